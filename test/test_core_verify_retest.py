"""The shared re-test policy (core.verify.retest): ``<Rule>+retest`` arms (no ROS).

What must hold: the names parse and bad ones are errors; a +retest baseline answers the
stuck and detour hooks where GLOVE-async does, with the same thresholds (and leaves alone
what GLOVE leaves alone); the wrapper changes nothing while no hook fires (same decisions
as the bare rule on drift-free runs); on waypoint worlds the arm re-tests stale blocked
corridors and knows the unique colours GLOVE knows; the suite and ``bench frozenlake``
accept the arms.
"""

from __future__ import annotations

import argparse
import json

import pytest

from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.verify import memory_rules as mr
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_views import LatestOverwriteView, RecentKView
from glove_ros.core.verify.retest import (
    Retest,
    RetestSettings,
    RetestView,
    is_rule_name,
    make_retest_view,
    retest_names,
    select_stale,
    split_retest,
)

RIGHT, DOWN, UP = 2, 1, 3
HOLE, ICE = "hole", "ice"
NEG = {"is_negative": lambda o, r: o[1] == HOLE}


def _rules(*names: str) -> list[mr.MemoryRule]:
    return [mr.make_rule(n, **NEG) for n in names]


def _close(rules: list[mr.MemoryRule]) -> None:
    for r in rules:
        r.close()


# ----------------------------------------------------------------------------- names


def test_names_parse_and_bad_ones_are_errors():
    assert split_retest("RecentK+retest") == ("RecentK", True)
    assert split_retest("RecentK") == ("RecentK", False)
    assert retest_names(["RecentK"]) == ["RecentK+retest"]
    assert set(retest_names()) == {f"{b}+retest" for b in mr.BASELINE_RULES}
    assert is_rule_name("LatestOverwrite+retest") and is_rule_name("GLOVE-async")
    assert not is_rule_name("GLOVE-async+retest") and not is_rule_name("Oracle+retest")
    assert not any(n.endswith("+retest") for n in mr.rule_names())  # the default list stays
    rule = mr.make_rule("RecentK+retest", params={"k": 1})
    assert isinstance(rule, Retest) and rule.name == "RecentK-K1+retest"
    assert rule.rule.k == 1 and rule.probe_mode == "none"
    for bad in ("GLOVE-async+retest", "Oracle+retest", "Nope+retest"):
        with pytest.raises(ValueError, match="needs a baseline"):
            mr.make_rule(bad)
    with pytest.raises(ValueError, match="bad parameters"):
        mr.make_rule("RecentK+retest", params={"window": 3})
    with pytest.raises(ValueError, match="stale_negative_after"):
        mr.make_rule("RecentK+retest", glove_config={"stale_negative_after": -1})
    with pytest.raises(ValueError, match="forget"):
        Retest(mr.Oracle())


def test_settings_are_glove_defaults_or_its_overrides():
    cfg = VerifierConfig()
    s = RetestSettings()
    assert (s.stale_negative_after, s.recheck_volatile_first) == (
        cfg.stale_negative_after, cfg.recheck_volatile_first)
    rule = mr.make_rule("LatestOverwrite+retest", glove_config={"stale_negative_after": 7})
    assert rule.settings.stale_negative_after == 7


def test_select_stale_is_glove_choice():
    cands = [("a", 1, 1.0), ("b", 1, 0.5), ("c", 9, 1.0), ("d", 1, 0.6)]
    # not observed since the threshold and mostly failures (an even split only when named)
    assert select_stale(cands, threshold=5, named=False) == ["d"]  # d: both ways, first
    assert select_stale(cands, threshold=5, named=False, volatile_first=False) == ["a", "d"]
    assert select_stale(cands, threshold=5, named=True, volatile={"a"}) == ["a", "b", "d"]
    assert select_stale(cands, threshold=5, named=True, volatile={"a"},
                        only_volatile=True) == ["a", "b", "d"]
    assert select_stale([("a", 1, 1.0)], threshold=5, named=True, only_volatile=True) == []
    assert select_stale(cands, threshold=0, named=False) == []


# ----------------------------------------------------------------------------- hooks


def test_on_stuck_retests_a_stale_fall_like_glove_and_the_bare_rule_keeps_it():
    rules = _rules("GLOVE-async", "LatestOverwrite+retest", "RecentK+retest",
                   "LatestOverwrite")
    try:
        for r in rules:
            r.observe(0, RIGHT, (1, HOLE), 0.0, 0)
            for k in range(20):  # a fresh fall: not re-tested
                r.observe(4, DOWN, (8, ICE), 0.0, 1 + k)
            assert r.on_stuck(0, 21, {0, 4}) == []
            assert r.distribution(0, RIGHT) == {(1, HOLE): 1.0}
            for k in range(40):  # 60 observed transitions since: stale for a stuck agent
                r.observe(4, DOWN, (8, ICE), 0.0, 21 + k)
            assert r.on_stuck(0, 61, {3}) == []  # not reachable: kept
            assert r.distribution(0, RIGHT) == {(1, HOLE): 1.0}
            r.on_stuck(0, 61, {0, 4})
        glove, latest_rt, recent_rt, latest = rules
        for r in (glove, latest_rt, recent_rt):  # set aside: the next try re-tests it
            assert r.distribution(0, RIGHT) is None and r.rechecks == 1
        assert latest.distribution(0, RIGHT) == {(1, HOLE): 1.0}  # its own answer: keep
        # the fresh observation replaces the memory re-tested (RecentK keeps no old fall)
        for r in (glove, latest_rt, recent_rt):
            r.observe(0, RIGHT, (1, ICE), 0.0, 70)
            assert r.distribution(0, RIGHT) == {(1, ICE): 1.0}
    finally:
        _close(rules)


def test_on_blocked_retests_a_fall_at_a_place_that_changed_as_glove_does():
    """GLOVE's own test (test_core_bench_frozenlake: whoever saw the change), run on every
    arm: the same memories are kept and re-tested."""
    rules = _rules("GLOVE-async", "LatestOverwrite+retest", "RecencyWeighted+retest")
    try:
        for r in rules:
            for step in range(5):
                r.observe(4, RIGHT, (5, ICE), 0.0, step)  # tile 5 is ice
            r.observe(1, DOWN, (5, HOLE), 0.0, 10)  # tile 5 became a hole
            r.observe(9, UP, (5, HOLE), 0.0, 11)  # first contact from below
            r.observe(13, RIGHT, (14, HOLE), 0.0, 12)  # a hole that never moved
            assert r.distribution(4, RIGHT) == {(5, HOLE): 1.0}  # the place view
            r.on_blocked([(9, UP), (13, RIGHT)], 20)  # nothing changed since: kept
            assert r.distribution(9, UP) == {(5, HOLE): 1.0}
            r.observe(6, RIGHT, (7, ICE), 0.0, 30)
            r.observe(6, RIGHT, (7, HOLE), 0.0, 31)  # the world changes again
            assert r.on_blocked([(9, UP), (13, RIGHT)], 40) == []
            assert r.distribution(9, UP) is None, r.name
            assert r.distribution(13, RIGHT) == {(14, HOLE): 1.0}
            assert r.rechecks == 1
        bare = mr.make_rule("LatestOverwrite")
        bare.observe(9, UP, (5, HOLE), 0.0, 11)
        assert bare.on_blocked([(9, UP)], 40, no_route=True) == []
        assert bare.distribution(9, UP) == {(5, HOLE): 1.0}
    finally:
        _close(rules)


def test_the_rule_own_stuck_answer_runs_when_nothing_is_stale():
    ph = mr.make_rule("PageHinkleyReset+retest", **NEG)
    ph.observe(0, RIGHT, (1, ICE), 0.0, 0)
    ph.on_stuck(0, 1, None)  # nothing stale: PageHinkley's own answer, a reset
    assert ph.stats()["resets"] == 1 and ph.distribution(0, RIGHT) is None
    ph.observe(0, RIGHT, (1, HOLE), 0.0, 2)
    for k in range(60):
        ph.observe(4, DOWN, (8, ICE), 0.0, 3 + k)
    ph.on_stuck(0, 70, None)  # the policy re-tests; no reset on top of it
    assert ph.stats()["resets"] == 1 and ph.stats()["rechecks"] == 1


# ----------------------------------------------------------------------------- no hook


def _decisions(data: dict, method: str) -> tuple[list, dict]:
    from glove_ros.benchmarks._frozenlake_runner import Runner
    from glove_ros.benchmarks._frozenlake_scenario import parse_scenario

    sc = parse_scenario(dict(data), "test")
    rule = mr.make_rule(method, **NEG)
    log: list = []
    observe = rule.observe

    def spy(s, a, o, reward=0.0, step=0):
        log.append((s, a, o))
        observe(s, a, o, reward, step)

    rule.observe = spy  # type: ignore[method-assign]
    phases = Runner(sc, rule).run()
    return log, {"successes": [p.successes for p in phases], "stats": rule.stats()}


@pytest.mark.parametrize("slippery", [False, True])
@pytest.mark.parametrize("base", ["LatestOverwrite", "RecentK", "RecencyWeighted"])
def test_the_wrapper_changes_nothing_when_no_hook_fires(base, slippery):
    pytest.importorskip("gymnasium")
    from glove_ros.benchmarks import suite

    data = suite.generate_frozenlake(3, slippery=slippery, sizes=(4, 5), episodes=6)
    for phase in data["drift"]:  # drift-free: every phase keeps the source map
        phase["set"] = [{**c, "tile": data["map"][c["row"]][c["col"]]} for c in phase["set"]]
    bare_log, bare = _decisions(data, base)
    arm_log, arm = _decisions(data, f"{base}+retest")
    assert arm_log == bare_log and len(bare_log) > 50
    assert arm["successes"] == bare["successes"]
    assert arm["stats"]["rechecks"] == 0 and arm["stats"]["place_changes"] == 0


# ----------------------------------------------------------------------------- views


class _Feed:
    def __init__(self, view) -> None:
        self.view, self.next_id = view, 1

    def add(self, t: Transition) -> None:
        self.view.record(MemoryEntry(self.next_id, t, Status.TRUSTED, 0.0))
        self.next_id += 1


def test_view_arm_retests_a_stale_blocked_corridor_where_the_bare_view_keeps_it():
    bare = _Feed(LatestOverwriteView())
    arm = _Feed(make_retest_view("LatestOverwrite+retest"))
    key = ("a", "navigate_to", "b")
    for f in (bare, arm):
        f.add(Transition("a", "navigate_to", "blocked", "b"))
        for _ in range(20):
            f.add(Transition("c", "look", "colors=red"))
    assert arm.view.on_stuck([key]) is False  # fresh: kept (and LatestOverwrite: no answer)
    for f in (bare, arm):
        for _ in range(40):
            f.add(Transition("c", "look", "colors=red"))
    assert bare.view.on_stuck([key]) is False
    assert arm.view.on_stuck([key]) is True
    assert arm.view.trusted("a", "navigate_to") == [] and arm.view.rechecks == 1
    assert [e.transition.outcome for e in bare.view.trusted("a", "navigate_to")] == ["blocked"]
    arm.add(Transition("a", "navigate_to", "reached", "b"))  # the re-test's fresh sample
    assert [e.transition.outcome for e in arm.view.trusted("a", "navigate_to")] == ["reached"]
    assert arm.view.steps == 62 and arm.view.alerts == 0 and arm.view.name.endswith("+retest")


def test_view_arm_knows_unique_objects_and_changes_nothing_without_them():
    cfg = VerifierConfig(unique_objects=("red",))
    arm = _Feed(make_retest_view("RecentK+retest", {"k": 3}, cfg))
    bare = _Feed(RecentKView(k=3))
    for f in (arm, bare):
        for _ in range(2):
            f.add(Transition("a", "look", "colors=red,blue"))
            f.add(Transition("x", "look", "colors=blue"))
    assert [e.id for e in arm.view.trusted()] == [e.id for e in bare.view.trusted()]
    for f in (arm, bare):
        f.add(Transition("b", "look", "colors=red"))  # red (unique) moved to b
    assert arm.view.trusted("a", "look") == []  # a's memory of red is stale
    assert len(bare.view.trusted("a", "look")) == 2
    assert len(arm.view.trusted("x", "look")) == 2  # blue is not unique: kept
    assert arm.view.stats()["object_hides"] == 1
    assert isinstance(arm.view, RetestView)


def test_jetrover_runner_builds_the_arm_with_glove_knowledge_of_the_world():
    pytest.importorskip("cv2")
    from glove_ros.benchmarks import jetrover
    from glove_ros.benchmarks._jetrover_config import verifier_settings
    from glove_ros.benchmarks._jetrover_runner import ModeRunner
    from glove_ros.core.world.worldgen import generate_world

    world = generate_world(3001, kind="swap")
    runner = ModeRunner(world, "RecentK+retest", params={"k": 2})
    try:
        assert isinstance(runner.view, RetestView) and runner.view.inner.k == 2
        assert runner.params == {"k": 2}
        unique = verifier_settings(world, {}, "async")["unique_objects"]
        assert runner.view.unique_objects == frozenset(unique)
    finally:
        runner.close()
    with pytest.raises(ValueError, match="re-test arm"):
        ModeRunner(world, "Oracle+retest")
    with pytest.raises(ValueError, match="does not take"):
        ModeRunner(world, "RecentK+retest", params={"window": 3})
    # a world with nothing to re-test and no unique colour moving: the same run
    quiet = generate_world(3002, kind="nuisance", miss_rate=0.0)
    a = jetrover.run_world(quiet, "RecentK", episodes=12, seed=1)
    b = jetrover.run_world(quiet, "RecentK+retest", episodes=12, seed=1)
    for key in ("drift_success", "steps_per_task", "false_alarms", "transitions"):
        assert a[key] == b[key], key
    assert b["method"] == "RecentK+retest"


# ----------------------------------------------------------------------------- benches


QUICK = """
tune_seeds: [0, 1]
report_seeds: [3000, 3001]
families: [frozenlake_det]
baselines: [LatestOverwrite, RecentK, RecentK+retest, LatestOverwrite+retest]
sweep: {RecentK: [1, 3]}
family: {frozenlake_det: {sizes: [4, 5], episodes: 8}}
"""


def test_suite_runs_the_arms_swept_and_paired(tmp_path, capsys):
    pytest.importorskip("gymnasium")
    from glove_ros.benchmarks import suite

    quick = tmp_path / "quick.yaml"
    quick.write_text(QUICK)
    args = argparse.Namespace(scenario=str(quick), families=None, tune=None, report=None,
                              out=str(tmp_path), json=False)
    assert suite.main(args) == 0
    fam = json.loads((tmp_path / "suite.json").read_text())["families"]["frozenlake_det"]
    assert {"RecentK+retest", "LatestOverwrite+retest"} <= set(fam["methods"])
    assert set(fam["best_params"]["RecentK+retest"]) == {"k"}  # swept as the bare rule
    assert [s["params"]["k"] for s in fam["sweep_on_tune_seeds"]["RecentK+retest"]] \
        in ([1, 3], [3, 1])
    assert fam["paired_vs_best_baseline"]["baseline"] in ("LatestOverwrite", "RecentK")
    assert fam["paired_vs_best_retest"]["baseline"].endswith("+retest")
    assert "(best baseline + re-test)" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("baselines: [GLOVE-async+retest]\n")
    with pytest.raises(ValueError, match="unknown rule"):
        suite.load_suite(bad)


def test_fair_scenario_uses_development_seeds_only():
    from pathlib import Path

    from glove_ros.benchmarks import suite

    root = Path(__file__).resolve().parents[1] / "bench" / "scenarios"
    fair = suite.load_suite(root / "suite_fair.yaml")
    for lo, hi in (fair.tune_seeds, fair.report_seeds):  # the development ranges
        assert 0 <= lo < hi <= 100 or 3000 <= lo < hi <= 5100
    for name in ("suite.yaml", "suite_confirm.yaml"):
        held = suite.load_suite(root / name).report_seeds
        assert fair.report_seeds[1] <= held[0] or held[1] <= fair.report_seeds[0]
    bare = [b for b in fair.baselines if not b.endswith("+retest")]
    assert sorted(retest_names(bare)) == sorted(set(fair.baselines) - set(bare))


def test_bench_frozenlake_takes_the_arms():
    pytest.importorskip("gymnasium")
    from glove_ros.benchmarks import _frozenlake_scenario as fls
    from glove_ros.benchmarks import frozenlake as fl

    data = {"map": ["SFF", "FHF", "FFG"], "source": {"episodes": 2},
            "drift": [{"name": "drift_I", "episodes": 2,
                       "set": [{"row": 2, "col": 0, "tile": "H"}]}],
            "budget": {"total": 40}, "methods": ["RecentK+retest"]}
    sc = fls.parse_scenario(data, "t")
    assert fl._parse_methods(["LatestOverwrite+retest,RecentK"], sc) == [
        "LatestOverwrite+retest", "RecentK"]
    assert fl._parse_methods(None, sc) == ["RecentK+retest"]
    report = fl.run_benchmark(sc, ["RecentK+retest"])
    assert set(report["methods"]) == {"RecentK+retest"}
    with pytest.raises(ValueError, match="unknown method"):
        fl._parse_methods(["GLOVE-sync+retest"], sc)
    with pytest.raises(fls.ScenarioError, match="unknown method"):
        fls.parse_scenario({**data, "methods": ["Static+retest+retest"]}, "t")
