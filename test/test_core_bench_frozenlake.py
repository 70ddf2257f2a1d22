"""FrozenLake drift benchmark and the memory update rules it compares (no ROS).

Runs gymnasium's real FrozenLake-v1 on the small shipped scenario (bench/scenarios/
frozenlake_tiny.yaml) and checks behaviour: GLOVE recovers after drift II where
LatestOverwrite is deadlocked by its stale "hole" memory, every probe step is charged to the
budget, running out of budget fails episodes, and the JSON document has its documented shape.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("gymnasium")

from glove_ros.benchmarks import _frozenlake_agent as fla  # noqa: E402
from glove_ros.benchmarks import _frozenlake_scenario as fls  # noqa: E402
from glove_ros.benchmarks import frozenlake as fl  # noqa: E402
from glove_ros.core.verify import memory_rules as mr  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "bench" / "scenarios"
TINY = SCENARIOS / "frozenlake_tiny.yaml"
HOLE = fla.HOLE


def tiny_data() -> dict:
    return yaml.safe_load(TINY.read_text())


def parse(data: dict) -> fls.Scenario:
    return fls.parse_scenario(data, "test")


@pytest.fixture(scope="module")
def tiny_report() -> dict:
    """One run of every method on the tiny scenario (shared: the runs are deterministic)."""
    return fl.run_benchmark(fls.load_scenario(TINY), mr.rule_names())


def phase(report: dict, method: str, name: str) -> dict:
    return next(p for p in report["methods"][method]["phases"] if p["phase"] == name)


# ----------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("frozenlake_*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    sc = fls.load_scenario(path)
    assert sc.phases and sc.budget_total > 0
    maps = sc.maps()
    assert len(maps) == 1 + len(sc.phases)
    assert all(len(m) == sc.nrow for m in maps)


def test_paper_scenario_matches_the_paper_setting():
    sc = fls.load_scenario(SCENARIOS / "frozenlake_paper.yaml")
    assert sc.name == "paper" and not sc.is_slippery
    assert (sc.budget_total, sc.probe_cap) == (310, 30)
    assert [p.episodes for p in sc.phases] == [20, 20]
    source, drift1, drift2 = sc.maps()
    # drift I turns a frozen tile into a hole, drift II makes that same tile safe again
    (tile,) = [(r, c) for r in range(sc.nrow) for c in range(sc.ncol)
               if source[r][c] == "F" and drift1[r][c] == "H"]
    assert drift2[tile[0]][tile[1]] == "F"


def test_slippery_scenario_is_slippery_with_several_outcome_modes():
    sc = fls.load_scenario(SCENARIOS / "frozenlake_slippery.yaml")
    assert sc.is_slippery and 0 < sc.success_rate < 1
    assert sc.glove == {}  # the shipped scenarios run GLOVE with the verifier's defaults
    env = fla.make_env(sc.map, sc)
    try:  # several outcome modes per (s, a): the intended move and the slides
        assert max(len(d) for d in fla.true_model(env).values()) > 1
    finally:
        env.close()


def _mutate(path: tuple, value) -> dict:
    data = tiny_data()
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_mutate(("colour",), "blue"), "unknown key 'colour' in scenario"),
        (_mutate(("drift", 0, "when"), 3), "unknown key 'when' in drift[0]"),
        (_mutate(("drift", 0, "set", 0, "z"), 1), "unknown key 'z' in drift[0].set[0]"),
        (_mutate(("budget", "probes"), 3), "unknown key 'probes' in budget"),
        (_mutate(("agent", "temperature"), 1.0), "unknown key 'temperature' in agent"),
        (_mutate(("glove", "p_tresh"), 2), "unknown key 'p_tresh' in glove"),
        (_mutate(("glove", "mode"), "sync"), "mode is set by the method name"),
        (_mutate(("glove", "p_th"), 0), "p_th"),
        (_mutate(("map",), ["SFX", "FHF", "FFG"]), "bad tile 'X'"),
        (_mutate(("map",), ["SFF", "FHF", "FF"]), "same, non-zero length"),
        (_mutate(("map",), ["SFF", "FHF", "FFF"]), "at least one G"),
        (_mutate(("map",), ["SFF", "SHF", "FFG"]), "exactly one S"),
        (_mutate(("drift", 0, "set", 0, "tile"), "G"), "must be H (hole) or F (frozen)"),
        (_mutate(("drift", 0, "set", 0, "row"), 3), "outside the 3x3 map"),
        (_mutate(("drift", 0, "set", 0, "col"), -1), "outside the 3x3 map"),
        (_mutate(("drift", 0, "set", 0), {"row": 0, "col": 0, "tile": "H"}),
         "start and goal tiles cannot change"),
        (_mutate(("drift", 0, "episodes"), 0), "drift[0].episodes must be >= 1"),
        (_mutate(("drift",), []), "drift must be a non-empty list"),
        (_mutate(("budget", "probe_cap"), 500), "exceeds budget.total"),
        (_mutate(("success_rate",), 0.5), "slippery maps only"),
        (_mutate(("methods",), ["GLOVE-sync", "Clairvoyant"]), "unknown method 'Clairvoyant'"),
        (_mutate(("agent", "gamma"), 1.5), "agent.gamma"),
        (_mutate(("is_slippery",), "yes"), "is_slippery must be true or false"),
    ],
)
def test_invalid_scenarios_raise_clear_errors(data, message):
    with pytest.raises(fls.ScenarioError) as exc:
        parse(data)
    assert message in str(exc.value)


def test_missing_key_and_bad_files(tmp_path):
    data = tiny_data()
    del data["budget"]
    with pytest.raises(fls.ScenarioError, match="missing key 'budget'"):
        parse(data)
    bad = tmp_path / "bad.yaml"
    bad.write_text("map: [SFF\n  - oops: [")
    with pytest.raises(fls.ScenarioError, match="not valid YAML"):
        fls.load_scenario(bad)
    with pytest.raises(FileNotFoundError):
        fls.load_scenario(tmp_path / "absent.yaml")
    # an error names the file it came from
    (tmp_path / "frozenlake_x.yaml").write_text(yaml.safe_dump(_mutate(("colour",), 1)))
    with pytest.raises(fls.ScenarioError, match="frozenlake_x.yaml"):
        fls.load_scenario(tmp_path / "frozenlake_x.yaml")


def test_scenario_name_defaults_to_the_file_name(tmp_path):
    data = tiny_data()
    del data["name"]
    path = tmp_path / "frozenlake_mine.yaml"
    path.write_text(yaml.safe_dump(data))
    assert fls.load_scenario(path).name == "mine"


def test_drift_changes_accumulate_and_the_env_follows_them():
    sc = fls.load_scenario(TINY)
    source, drift1, drift2 = sc.maps()
    assert source[2][0] == "F" and drift1[2][0] == "H" and drift2[2][0] == "F"
    assert drift2[1][2] == "H"  # drift II also closes the detour
    env = fla.make_env(drift1, sc)
    try:
        env.reset(seed=0)
        env.step(fla.DOWN)
        nxt, reward, term, _, _ = env.step(fla.DOWN)  # (1,0) -> (2,0): a hole in drift I
        assert fla.outcome_of(nxt, reward, term) == (6, HOLE)
    finally:
        env.close()


# ----------------------------------------------------------------------------- behaviour


def test_glove_recovers_after_drift_ii_while_latest_overwrite_is_deadlocked(tiny_report):
    latest = phase(tiny_report, "LatestOverwrite", "drift_II")
    assert latest["reopened_tiles"] == [[2, 0]]
    # (1,0) --down--> (2,0) is remembered as a hole when drift II re-opens the tile
    assert [3, fla.DOWN] in latest["negative_entries"]
    assert latest["entry_retries_task"] == 0 and latest["entry_retries_probe"] == 0
    assert latest["deadlock"] is True
    assert latest["successes"] == 0

    for method in ("GLOVE-sync", "GLOVE-async"):
        glove = phase(tiny_report, method, "drift_II")
        assert glove["negative_entries"] == latest["negative_entries"]
        assert glove["deadlock"] is False
        assert glove["successes"] >= glove["episodes"] - 2
        assert glove["alerts"] >= 1
    sync = phase(tiny_report, "GLOVE-sync", "drift_II")
    assert sync["entry_retries_probe"] >= 1  # the stale negative was probed, not forced
    async_ = phase(tiny_report, "GLOVE-async", "drift_II")
    assert async_["probe_steps"] == 0 and async_["entry_retries_task"] >= 1


def test_drift_i_is_detected_and_static_memory_fails(tiny_report):
    for method in ("GLOVE-sync", "GLOVE-async"):
        assert phase(tiny_report, method, "drift_I")["alerts"] >= 1
    assert phase(tiny_report, "Static", "drift_I")["successes"] == 0
    assert phase(tiny_report, "LatestOverwrite", "drift_I")["successes"] >= 4
    # no drift, no verification cost: nothing surprising in the source phase
    for method in ("GLOVE-sync", "GLOVE-async"):
        src = phase(tiny_report, method, "source")
        assert src["alerts"] == 0 and src["probe_steps"] == 0
        assert src["successes"] == src["episodes"]


def test_deadlock_flag_is_null_without_a_reopened_tile(tiny_report):
    for method in tiny_report["methods"]:
        assert phase(tiny_report, method, "drift_I")["deadlock"] is None
        assert phase(tiny_report, method, "source")["deadlock"] is None


# ----------------------------------------------------------------------------- budget


def test_every_probe_step_is_charged_to_the_budget(tiny_report):
    sc = fls.load_scenario(TINY)
    for name, m in tiny_report["methods"].items():
        drift = m["phases"][1:]
        task = sum(p["task_steps"] for p in drift)
        probe = sum(p["probe_steps"] for p in drift)
        used = m["budget_used"]
        assert (used["task"], used["probe"]) == (task, probe), name
        assert task + probe + used["left"] == sc.budget_total
        assert probe <= sc.probe_cap
        if not name.startswith("GLOVE-sync"):  # only synchronous replay probes
            assert probe == 0, name
    assert tiny_report["methods"]["GLOVE-sync"]["budget_used"]["probe"] > 0
    # probes and task steps share one budget: GLOVE-sync has less left for the task
    sync = tiny_report["methods"]["GLOVE-sync"]["budget_used"]
    assert sync["task"] + sync["probe"] > sync["task"]


def test_running_out_of_budget_fails_the_remaining_episodes():
    data = tiny_data()
    data["budget"] = {"total": 10, "probe_cap": 5}
    report = fl.run_benchmark(parse(data), ["LatestOverwrite", "GLOVE-sync"])
    for name, m in report["methods"].items():
        drift = m["phases"][1:]
        used = m["budget_used"]
        assert used["task"] + used["probe"] == 10, name
        assert used["left"] == 0
        exhausted = sum(p["budget_exhausted_episodes"] for p in drift)
        assert exhausted >= 10, name  # 16 drift episodes cannot fit in 10 steps
        assert all(p["successes"] + p["budget_exhausted_episodes"] <= p["episodes"]
                   for p in drift)
        # nothing succeeds once the budget is gone: drift II gets no step at all
        assert drift[1]["task_steps"] == 0 and drift[1]["successes"] == 0


def test_probe_cap_zero_means_no_probe_steps_and_async_fallback():
    data = tiny_data()
    data["budget"] = {"total": 120, "probe_cap": 0}
    report = fl.run_benchmark(parse(data), ["GLOVE-sync"])
    m = report["methods"]["GLOVE-sync"]
    assert m["budget_used"]["probe"] == 0
    assert m["rule_stats"]["cancelled_probes"] >= 1
    # the cancelled probes leave the pairs suppressed and pending: natural visits still
    # re-open the tile, so drift II is not deadlocked
    assert phase(report, "GLOVE-sync", "drift_II")["deadlock"] is False


# ----------------------------------------------------------------------------- JSON / CLI


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    fl.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_main_json_shape_and_files(tmp_path, capsys):
    args = _args("--scenario", str(TINY), "--methods", "GLOVE-sync,LatestOverwrite",
                 "--json", "--out", str(tmp_path))
    assert fl.main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "frozenlake" and doc["policy"] == "greedy"
    assert doc["phases"] == ["source", "drift_I", "drift_II"]
    assert list(doc["methods"]) == ["GLOVE-sync", "LatestOverwrite"]
    sc = doc["scenario"]
    assert sc["name"] == "tiny" and sc["budget"] == {"total": 120, "probe_cap": 20}
    assert set(sc["phase_maps"]) == set(doc["phases"])
    for m in doc["methods"].values():
        assert set(m) >= {"phases", "drift_successes", "drift_episodes", "budget_used",
                          "rule_stats"}
        assert [p["phase"] for p in m["phases"]] == doc["phases"]
        for p in m["phases"]:
            assert set(p) == {
                "phase", "episodes", "successes", "success_rate", "task_steps",
                "probe_steps", "probes", "alerts", "decisions", "budget_exhausted_episodes",
                "reopened_tiles", "negative_entries", "entry_retries_task",
                "entry_retries_probe", "deadlock", "stale_kept", "costly_episodes",
                "deadlock_at_end", "first_contact_falls",
                "unmet_hole_falls",
            }
            assert 0 <= p["successes"] <= p["episodes"]
        assert m["drift_successes"] == sum(p["successes"] for p in m["phases"][1:])
    written = json.loads((tmp_path / "frozenlake_tiny.json").read_text())
    assert written == doc
    png = (tmp_path / "frozenlake_tiny.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_main_prints_a_table(tmp_path, capsys):
    assert fl.main(_args("--scenario", str(TINY), "--methods", "Static", "RecentK",
                         "--out", str(tmp_path))) == 0
    out = capsys.readouterr().out
    assert "drift_II" in out and "RecentK" in out and "Static" in out
    assert "GLOVE-sync" not in out


def test_bad_method_and_policy_are_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown method 'Clairvoyant'"):
        fl.main(_args("--scenario", str(TINY), "--methods", "Clairvoyant",
                      "--out", str(tmp_path)))
    with pytest.raises(ValueError, match="unknown policy"):
        fl.run_benchmark(fls.load_scenario(TINY), ["Static"], policy="random")
    assert not (tmp_path / "frozenlake_tiny.json").exists()


def test_runs_are_reproducible():
    sc = fls.load_scenario(SCENARIOS / "frozenlake_slippery.yaml")
    small = dataclasses.replace(sc, source_episodes=5)
    a = fl.run_benchmark(small, ["GLOVE-sync", "RecentK"])
    b = fl.run_benchmark(small, ["GLOVE-sync", "RecentK"])
    assert a == b


def test_llm_policy_goes_through_the_llm_and_falls_back_on_bad_replies():
    from glove_ros.core.llm.runtime import ScriptedLlm

    data = tiny_data()
    data["source"] = {"episodes": 1}
    data["drift"][0]["episodes"] = 1
    data["drift"][1]["episodes"] = 1
    llm = ScriptedLlm(replies=["not json {"], default={"move": "down"})
    report = fl.run_benchmark(parse(data), ["LatestOverwrite"], policy="llm", llm=llm)
    stats = report["methods"]["LatestOverwrite"]["llm"]
    assert stats["calls"] == len(llm.calls) > 1
    assert stats["fallbacks"] == 1
    messages, schema, _ = llm.calls[0]
    assert schema["properties"]["move"]["enum"] == list(fla.ACTION_NAMES)
    assert "row 0 col 0" in messages[-1]["content"]
    # always "down" from the start: (0,0) -> (1,0) -> (2,0) -> stays at the bottom wall
    src = report["methods"]["LatestOverwrite"]["phases"][0]
    assert src["successes"] == 0 and src["task_steps"] == fls.load_scenario(TINY).max_episode_steps


@pytest.mark.llm
@pytest.mark.slow
def test_llm_policy_on_the_real_bundled_gguf():
    pytest.importorskip("llama_cpp")
    from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError

    try:
        llm = LlamaBackend(LlmConfig(n_ctx=1024, max_tokens=16, n_threads=2))
    except LlmLoadError as exc:
        pytest.skip(str(exc))
    data = tiny_data()
    data["source"] = {"episodes": 1}
    data["drift"][0]["episodes"] = 1
    data["drift"][1]["episodes"] = 1
    try:
        report = fl.run_benchmark(parse(data), ["GLOVE-sync"], policy="llm", llm=llm)
    finally:
        llm.close()
    m = report["methods"]["GLOVE-sync"]
    decisions = sum(p["decisions"] for p in m["phases"])
    # every decision went through the model; the grammar keeps replies valid
    assert m["llm"]["calls"] == decisions > 0
    assert m["llm"]["fallbacks"] == 0


# ----------------------------------------------------------------------------- rules


def test_baseline_update_rules():
    a, b = ("s", "a"), ("s", "b")
    latest = mr.LatestOverwrite()
    latest.observe(*a, "x", step=1)
    latest.observe(*a, "y", step=2)
    assert latest.distribution(*a) == {"y": 1.0} and latest.predict(*b) is None

    k3 = mr.RecentK()
    for i, o in enumerate(["x", "x", "x", "y"]):
        k3.observe(*a, o, step=i)
    assert k3.distribution(*a) == pytest.approx({"x": 2 / 3, "y": 1 / 3})
    assert k3.support(*a) == 3

    w5 = mr.SlidingWindow()
    for i, o in enumerate(["y"] + ["x"] * 5):
        w5.observe(*a, o, step=i)
    assert w5.distribution(*a) == {"x": 1.0} and w5.window == 5

    rw = mr.RecencyWeighted()
    rw.observe(*a, "x", step=0)
    rw.observe(*a, "y", step=5)  # one half-life newer: twice the weight
    assert rw.distribution(*a) == pytest.approx({"x": 1 / 3, "y": 2 / 3})

    static = mr.Static()
    static.begin_phase("source", learning=True)
    static.observe(*a, "x", step=0)
    static.begin_phase("drift", learning=False)
    static.observe(*a, "y", step=1)
    assert static.distribution(*a) == {"x": 1.0}

    refresh = mr.PeriodicRefresh()
    refresh.observe(*a, "x", step=29)
    refresh.observe(*b, "x", step=30)  # a new 30-step period: memory cleared first
    assert refresh.distribution(*a) is None and refresh.distribution(*b) == {"x": 1.0}
    assert refresh.refreshes == 1


def test_page_hinkley_resets_on_a_run_of_surprises_not_on_one():
    ph = mr.PageHinkleyReset()
    for i in range(20):
        ph.observe("s", "a", "x", step=i)
    ph.observe("s", "a", "y", step=20)
    assert ph.resets == 0 and ph.distribution("s", "a") is not None
    ph.observe("s", "a", "y", step=21)  # y is still rare (1/21): a second surprise
    assert ph.resets == 1 and ph.alerts == 1
    assert ph.distribution("s", "a") == {"y": 1.0}  # memory restarted from this sample


def test_learner_reference_meets_a_closing_by_trying_it_and_is_told_an_opening():
    neg = {"is_negative": lambda o, r: o[1] == HOLE}
    ice, hole = {(1, "F"): 1.0}, {(1, HOLE): 1.0}
    rule = mr.make_rule("LearnerReference", **neg)
    assert rule.name == "LearnerReference"
    rule.set_world({(0, "R"): ice, (0, "D"): ice})
    rule.observe(0, "R", (1, "F"))
    assert rule.distribution(0, "R") == ice
    assert rule.distribution(0, "D") is None  # never tried: unknown, though the world knows
    # the tried move closes: it still believes the ice until it tries the move again
    rule.set_world({(0, "R"): hole, (0, "D"): ice})
    assert rule.distribution(0, "R") == ice
    # a closing it has not met outlives a further phase that leaves it closed
    rule.set_world({(0, "R"): hole, (0, "D"): hole})
    assert rule.distribution(0, "R") == ice
    rule.observe(0, "R", (1, HOLE))  # the first contact: now it knows
    assert rule.distribution(0, "R") == hole
    # it re-opens: told at once, no re-test (the gift no real memory gets)
    rule.set_world({(0, "R"): ice, (0, "D"): hole})
    assert rule.distribution(0, "R") == ice and rule.support(0, "R") > 0
    assert rule.support(0, "D") == 0
    # the old name is refused with the new one, never silently mapped
    with pytest.raises(ValueError, match="renamed 'LearnerReference'"):
        mr.make_rule("LearnerBound")


def test_make_rule_names_and_errors():
    assert mr.rule_names()[:2] == ["GLOVE-sync", "GLOVE-async"]
    for name in mr.rule_names():
        rule = mr.make_rule(name, {"p_th": 1})
        try:
            assert rule.name == name
        finally:
            rule.close()
    with pytest.raises(ValueError, match="unknown memory rule"):
        mr.make_rule("Clairvoyant")
    with pytest.raises(ValueError, match="mode"):
        mr.make_rule("GLOVE-sync", {"mode": "async"})
    with pytest.raises(ValueError):
        mr.make_rule("GLOVE-sync", {"p_th": 0})


def test_glove_adapter_probes_realigns_and_breaks_the_deadlock():
    def is_negative(o, r):
        return o[1] == HOLE

    rule = mr.make_rule("GLOVE-sync", {"detector": "p_th", "p_th": 1}, is_negative=is_negative)
    try:
        rule.begin_phase("source", learning=True)
        for step in range(3):
            rule.observe(0, 1, (3, "ice"), step=step)
        rule.observe(3, 2, (4, HOLE), step=3)  # a negative memory elsewhere
        assert rule.distribution(0, 1) == {(3, "ice"): 1.0}
        assert rule.probe_requests() == [] and rule.alerts == 0

        rule.observe(0, 1, (3, HOLE), step=10)  # deterministic world: one mismatch is drift
        assert rule.alerts == 1
        (target,) = rule.probe_requests()
        assert (target.state, target.action, target.count, target.reason) == (
            0, 1, 1, "dissonance")
        assert rule.probe_requests() == []  # drained
        rule.apply_probes(target, [(3, HOLE)])
        assert rule.distribution(0, 1) == {(3, HOLE): 1.0}

        # stuck: the older negative memory (3, right) is stale since the dissonance
        targets = rule.on_stuck(0, step=11, reachable=[0, 3])
        assert [(t.state, t.action, t.reason) for t in targets] == [(3, 2, "stale_negative")]
        assert rule.distribution(3, 2) is None  # suppressed while it is re-tested
        rule.apply_probes(targets[0], [(4, "ice")])
        assert rule.distribution(3, 2) == {(4, "ice"): 1.0}
        # fresh memories are not doubted again
        assert rule.on_stuck(0, step=12, reachable=[0, 3]) == []
        assert rule.stats()["alerts"] == 1
    finally:
        rule.close()


def test_glove_adapter_rechecks_mostly_negative_groups_in_slippery_worlds():
    def is_negative(o, r):
        return o[1] == HOLE

    rule = mr.make_rule("GLOVE-sync", {"detector": "p_th", "p_th": 2, "k_modes": 3,
                                        "probe_epsilon": 1.0, "delta": 0.1},
                        is_negative=is_negative)
    try:
        # (1, down): mostly a hole, once a slip onto ice (one surprise, no alert): the
        # deadlock rule re-tests mostly-negative groups, not only all-negative ones
        for step, o in enumerate([(5, HOLE)] * 2 + [(1, "ice")] + [(5, HOLE)] * 2):
            rule.observe(1, 1, o, step=step)
        assert rule.alerts == 0 and rule.probe_requests() == []
        rule.observe(0, 2, (1, "ice"), step=5)
        rule.observe(0, 2, (9, HOLE), step=6)
        rule.observe(0, 2, (9, HOLE), step=7)  # 2 surprises -> dissonance: the world changed
        (probe,) = rule.probe_requests()
        assert (probe.state, probe.action) == (0, 2)
        rule.apply_probes(probe, [(9, HOLE)] * probe.count)
        targets = rule.on_stuck(0, step=8, reachable=[0, 1])
        assert [(t.state, t.action) for t in targets] == [(1, 1)]
        assert targets[0].count == 9  # alpha for K = 3, eps = 1, delta = 0.1
        rule.apply_probes(targets[0], [(5, "ice")] * targets[0].count)
        assert rule.distribution(1, 1) == {(5, "ice"): 1.0}
        assert rule.stats()["rechecks"] == 1
    finally:
        rule.close()


# ----------------------------------------------------------------------------- detour hook


class _Fixed(mr.MemoryRule):
    """A test double: a fixed belief table."""

    def __init__(self, table: dict) -> None:
        super().__init__()
        self.table = table

    def observe(self, *a, **k) -> None:
        return None

    def distribution(self, state, action):
        return self.table.get((state, action))


def test_blocking_pairs_name_the_remembered_falls_on_a_shorter_route():
    # 3x3, start 0, goal 2; memory: right from 0 falls into tile 1 (and down from 4 too)
    agent = fla.MemoryAgent(3, 3, [2], fls.AgentConfig())
    fall = {(0, fla.RIGHT): {(1, HOLE): 1.0}, (4, fla.UP): {(1, HOLE): 1.0}}
    beliefs = agent.beliefs(_Fixed(fall))
    assert not agent.stuck(0, beliefs)  # 0 -> 3 -> 4 -> 5 -> 2 is still believed open
    # the 2-move route is blocked only by memory: every remembered fall into tile 1
    assert agent.blocking_pairs(0, beliefs) == [(0, fla.RIGHT), (4, fla.UP)]
    # memory stood by them: no shorter route past a kept tile
    assert agent.blocking_pairs(0, beliefs, frozenset({1})) == []
    # nothing remembered as a fall, nothing blocks
    assert agent.blocking_pairs(0, agent.beliefs(_Fixed({}))) == []


def test_blocking_pairs_weigh_a_route_through_unexplored_tiles_as_a_guess():
    # 3x3, start 0, goal 8. Known: down, down, then right from 6 falls into 7 (7 -> 8 known).
    # Unexplored: 0 -> 1 -> 2 -> 5 -> 8, as short. Counting moves alone, the agent would
    # explore round the remembered fall (and meet whatever holes lie there); as the planner
    # values routes, four guessed moves are worth less than one remembered fall re-tested.
    known = {(0, fla.DOWN): {(3, fla.ICE): 1.0}, (3, fla.DOWN): {(6, fla.ICE): 1.0},
             (6, fla.RIGHT): {(7, HOLE): 1.0}, (7, fla.RIGHT): {(8, fla.GOAL): 1.0}}
    agent = fla.MemoryAgent(3, 3, [8], fls.AgentConfig(gamma=0.95, unknown_trust=0.9))
    beliefs = agent.beliefs(_Fixed(known))
    assert agent.blocking_pairs(0, beliefs) == [(6, fla.RIGHT)]
    # memory's own route past the fall is as short (4 moves), through unexplored tiles
    holes = agent.hole_tiles(beliefs)
    length, route = agent._route_length(0, beliefs, holes, False)
    assert length == 4.0 and (6, fla.RIGHT) not in route
    # a planner that trusts unexplored moves fully (unknown_trust 1) has nothing to ask
    trusting = fla.MemoryAgent(3, 3, [8], fls.AgentConfig(gamma=0.95, unknown_trust=1.0))
    assert trusting.blocking_pairs(0, trusting.beliefs(_Fixed(known))) == []


def test_route_known_is_false_only_when_every_route_passes_a_remembered_fall():
    # a 1x3 corridor, start 0, goal 2: the detour hook tells the rule ``no_route`` when
    # memory leaves no route at all (not only a longer one)
    agent = fla.MemoryAgent(1, 3, [2], fls.AgentConfig(gamma=0.95, unknown_trust=0.9))
    assert agent.route_known(0, agent.beliefs(_Fixed({})))  # guesses are a route
    fell = {(0, fla.RIGHT): {(1, HOLE): 1.0}}
    beliefs = agent.beliefs(_Fixed(fell))
    assert not agent.route_known(0, beliefs)
    assert agent.blocking_pairs(0, beliefs) == [(0, fla.RIGHT)]
    # a slide memory (less likely than not a fall) is still a route
    slid = {(0, fla.RIGHT): {(1, HOLE): 0.4, (1, fla.ICE): 0.6}}
    assert agent.route_known(0, agent.beliefs(_Fixed(slid)))


def test_with_no_route_left_blocking_pairs_name_the_falls_on_every_cheapest_route():
    # 3x3, start 0, goal 8, tile 4 a hole. Two equally short known routes, each blocked by
    # one remembered fall: 0-1-2 then down into 5, 0-3-6 then right into 7. Memory leaves
    # no route, so both falls are named at once (first found alone: dev world 3137 kept the
    # other, stale, one while it left no route); a tile the rule stands by drops out.
    known = {(0, fla.RIGHT): {(1, fla.ICE): 1.0}, (1, fla.RIGHT): {(2, fla.ICE): 1.0},
             (2, fla.DOWN): {(5, HOLE): 1.0}, (5, fla.DOWN): {(8, fla.GOAL): 1.0},
             (0, fla.DOWN): {(3, fla.ICE): 1.0}, (3, fla.DOWN): {(6, fla.ICE): 1.0},
             (6, fla.RIGHT): {(7, HOLE): 1.0}, (7, fla.RIGHT): {(8, fla.GOAL): 1.0},
             (1, fla.DOWN): {(4, HOLE): 1.0}, (3, fla.RIGHT): {(4, HOLE): 1.0}}
    agent = fla.MemoryAgent(3, 3, [8], fls.AgentConfig(gamma=0.95, unknown_trust=0.9))
    beliefs = agent.beliefs(_Fixed(known))
    assert not agent.route_known(0, beliefs)
    assert agent.blocking_pairs(0, beliefs) == [(2, fla.DOWN), (6, fla.RIGHT)]
    assert agent.blocking_pairs(0, beliefs, frozenset({5})) == [(6, fla.RIGHT)]
    # with the fall at 5 gone a route is left, and no remembered fall stands in the way of
    # a shorter one: nothing is named
    open_5 = {**known, (2, fla.DOWN): {(5, fla.ICE): 1.0}}
    b2 = agent.beliefs(_Fixed(open_5))
    assert agent.route_known(0, b2) and agent.blocking_pairs(0, b2) == []


def _drift_at(rule, state, action, before, after, step):
    """100 consistent observations, then one contradiction (an alarm, deterministic)."""
    for k in range(100):
        rule.observe(state, action, before, 0.0, step + k)
    alerts = rule.alerts
    rule.observe(state, action, after, 0.0, step + 100)
    assert rule.alerts == alerts + 1
    return step + 101


def test_on_blocked_retests_only_memories_older_than_a_dissonance():
    """GLOVE re-tests a blocking fall only once the world showed it changes (steady state
    costs nothing), and then only a fall at a place that changed before (a re-test of a
    fall is a fall); a local rule keeps what it believes (same hook, its own answer)."""
    neg = {"is_negative": lambda o, r: o[1] == HOLE}
    rule = mr.make_rule("GLOVE-async", **neg)
    anyr = mr.make_rule("GLOVE-async-anyrecheck", **neg)
    latest = mr.make_rule("LatestOverwrite")
    try:
        for r in (rule, anyr, latest):
            for step in range(3):
                r.observe(0, fla.RIGHT, (1, HOLE), 0.0, step)  # a hole since the start
        assert rule.on_blocked([(0, fla.RIGHT)], 5) == []
        assert rule.distribution(0, fla.RIGHT) == {(1, HOLE): 1.0}  # no dissonance: kept
        for r in (rule, anyr):
            # (2, DOWN) was ice and became a hole (a place that changed); later the world
            # changes somewhere else too
            step = _drift_at(r, 2, fla.DOWN, (5, fla.ICE), (5, HOLE), 10)
            _drift_at(r, 6, fla.RIGHT, (7, fla.ICE), (7, HOLE), step)
            assert r.distribution(2, fla.DOWN) == {(5, HOLE): 1.0}
            r.on_blocked([(0, fla.RIGHT), (2, fla.DOWN)], 400)
            assert r.distribution(2, fla.DOWN) is None  # suppressed, pending a re-test
        # the fall that never changed is kept by default, re-tested by the ablation
        assert rule.distribution(0, fla.RIGHT) == {(1, HOLE): 1.0}
        assert anyr.distribution(0, fla.RIGHT) is None
        assert latest.on_blocked([(0, fla.RIGHT)], 112) == []
        assert latest.distribution(0, fla.RIGHT) == {(1, HOLE): 1.0}
    finally:
        rule.close()
        anyr.close()


def test_place_evidence_a_fall_into_a_tile_is_read_by_every_way_into_it():
    """Place-level evidence (a project extension, ablation ``GLOVE-async-noplace``): an
    outcome shows what its tile is now, so another pair's memory of arriving there safely
    is read as the newest kind seen there, its dynamics (where it leads, how often) kept.
    A detour re-test drops that reading once a tile was seen to change kind after it."""
    neg = {"is_negative": lambda o, r: o[1] == HOLE}
    rule = mr.make_rule("GLOVE-async", **neg)
    noplace = mr.make_rule("GLOVE-async-noplace", **neg)
    try:
        for r in (rule, noplace):
            for step in range(9):  # (1, DOWN) slides to tile 5 most of the time
                r.observe(1, fla.DOWN, (5, fla.ICE) if step % 3 else (2, fla.ICE), 0.0, step)
            r.observe(4, fla.RIGHT, (5, HOLE), 0.0, 20)  # tile 5 became a hole
        assert rule.distribution(1, fla.DOWN) == pytest.approx({(5, HOLE): 2 / 3,
                                                               (2, fla.ICE): 1 / 3})
        assert noplace.distribution(1, fla.DOWN) == pytest.approx({(5, fla.ICE): 2 / 3,
                                                                  (2, fla.ICE): 1 / 3})
        # nothing changed since the fall: the detour hook stands by the reading
        rule.on_blocked([(1, fla.DOWN)], 30)
        assert rule.distribution(1, fla.DOWN)[(5, HOLE)] == pytest.approx(2 / 3)
        # later another tile changes kind (the world changes again): the reading of tile 5
        # is dropped for a pair in the way, which plans on its own memory until tile 5
        # is seen again
        rule.observe(6, fla.RIGHT, (7, fla.ICE), 0.0, 40)
        rule.observe(6, fla.RIGHT, (7, HOLE), 0.0, 41)
        rule.on_blocked([(1, fla.DOWN)], 50)
        assert rule.distribution(1, fla.DOWN)[(5, fla.ICE)] == pytest.approx(2 / 3)
        rule.observe(8, fla.UP, (5, HOLE), 0.0, 60)
        assert rule.distribution(1, fla.DOWN)[(5, HOLE)] == pytest.approx(2 / 3)
        # the store itself is untouched: the reading is a view, nothing rewritten or lost
        assert rule.support(1, fla.DOWN) == 9
    finally:
        rule.close()
        noplace.close()


def test_a_change_seen_later_but_perhaps_made_earlier_leaves_a_fresh_fall_standing():
    """One drift closes tile 5 and re-opens tile 9 at once (slippery development world 44:
    the detour hook then sent the agent back into the hole it had just met, and it fell
    again). The agent meets the new hole first, the re-opened tile later. That tile was
    last seen as a hole before the fall, so its change may be as old as the hole's: it
    makes neither the fall itself nor the reading of tile 5 by another way into it stale,
    and the detour hook keeps both. A tile last seen as its old kind after the fall
    changed after it, surely: then both are re-tested."""
    rule = mr.make_rule("GLOVE-async", is_negative=lambda o, r: o[1] == HOLE)
    try:
        for step in range(5):
            rule.observe(4, fla.RIGHT, (5, fla.ICE), 0.0, step)  # tile 5 is ice
        rule.observe(8, fla.RIGHT, (9, HOLE), 0.0, 6)  # tile 9 is a hole
        rule.observe(1, fla.DOWN, (5, fla.ICE), 0.0, 7)
        rule.observe(1, fla.DOWN, (5, HOLE), 0.0, 10)  # the drift: tile 5 closed
        assert rule.distribution(4, fla.RIGHT) == {(5, HOLE): 1.0}  # read by every way in
        rule.observe(8, fla.RIGHT, (9, fla.ICE), 0.0, 20)  # ... and tile 9 re-opened
        assert rule.on_blocked([(4, fla.RIGHT), (1, fla.DOWN)], 30) == []
        assert rule.distribution(4, fla.RIGHT) == {(5, HOLE): 1.0}
        assert rule.distribution(1, fla.DOWN) == {(5, HOLE): 1.0}
        assert rule.rechecks == 0  # the fall is not suspect: nothing surely changed since
        # tile 11, seen as ice after the fall and then as a hole: the world changed after
        # the fall, surely; the reading of tile 5 is dropped and the fall re-tested
        rule.observe(10, fla.RIGHT, (11, fla.ICE), 0.0, 40)
        rule.observe(10, fla.RIGHT, (11, HOLE), 0.0, 41)
        rule.on_blocked([(4, fla.RIGHT), (1, fla.DOWN)], 50)
        assert rule.distribution(4, fla.RIGHT) == {(5, fla.ICE): 1.0}
        assert rule.rechecks == 1
    finally:
        rule.close()


def test_a_remembered_fall_at_a_tile_that_changed_kind_is_retested_whoever_saw_the_change():
    """Place-level volatility (development world 35, slippery, drift III): tile 5 was ice,
    then a pair fell into it (the place changed); later another pair, with no memory of the
    tile, slid into it too (a first contact: no alarm, and the tile's kind did not change
    then). When the world changes again and that second fall blocks the agent's route,
    the detour re-tests it: the tile changed before, whichever pair saw it. A fall into a
    tile never seen as another kind is kept (a hole that never moved)."""
    rule = mr.make_rule("GLOVE-async", is_negative=lambda o, r: o[1] == HOLE)
    try:
        for step in range(5):
            rule.observe(4, fla.RIGHT, (5, fla.ICE), 0.0, step)  # tile 5 is ice
        rule.observe(1, fla.DOWN, (5, HOLE), 0.0, 10)  # tile 5 became a hole
        rule.observe(9, fla.UP, (5, HOLE), 0.0, 11)  # first contact from below
        rule.observe(13, fla.RIGHT, (14, HOLE), 0.0, 12)  # a hole that never moved
        # nothing changed since: the detour stands by both
        rule.on_blocked([(9, fla.UP), (13, fla.RIGHT)], 20)
        assert rule.distribution(9, fla.UP) == {(5, HOLE): 1.0}
        rule.observe(6, fla.RIGHT, (7, fla.ICE), 0.0, 30)
        rule.observe(6, fla.RIGHT, (7, HOLE), 0.0, 31)  # the world changes again
        rule.on_blocked([(9, fla.UP), (13, fla.RIGHT)], 40)
        assert rule.distribution(9, fla.UP) is None  # suppressed: the next visit re-tests
        assert rule.distribution(13, fla.RIGHT) == {(14, HOLE): 1.0}
        assert rule.rechecks == 1
    finally:
        rule.close()


def test_a_stale_memory_that_costs_nothing_is_reported_apart_from_a_deadlock():
    """Drift I closes (1,0); drift II re-opens it. LatestOverwrite keeps its fall into it but
    the route it took instead is as short: stale_kept, not a deadlock (on the tiny scenario,
    where the detour is longer or absent, the same memory is a deadlock)."""
    data = {
        "map": ["SFF", "FFF", "FFG"],
        "source": {"episodes": 3},
        "drift": [{"name": "drift_I", "episodes": 4, "set": [{"row": 1, "col": 0, "tile": "H"}]},
                  {"name": "drift_II", "episodes": 4, "set": [{"row": 1, "col": 0, "tile": "F"}]}],
        "budget": {"total": 200},
    }
    report = fl.run_benchmark(parse(data), ["LatestOverwrite"])
    p2 = phase(report, "LatestOverwrite", "drift_II")
    assert p2["negative_entries"] and p2["entry_retries_task"] == 0
    assert p2["deadlock"] is False and p2["stale_kept"] is True
    assert p2["successes"] == p2["episodes"]
