"""Tests of glove-ros bench janus: scenario files, the noisy updater, small runs, JSON shape."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from glove_ros.benchmarks import janus
from glove_ros.benchmarks._janus_arm import NoisyUpdater
from glove_ros.benchmarks._janus_report import format_table
from glove_ros.benchmarks._janus_scenario import Arm, load_scenario, scenario_from_dict
from glove_ros.benchmarks.janus import PAPER, result_stem, run_benchmark
from glove_ros.core.llm.embedding import HashingEmbedder
from glove_ros.core.llm.runtime import ScriptedLlm
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, RuleUpdater

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "bench" / "scenarios"
SMALL = {"name": "t", "worlds": ["small", "corridor_blocked"], "episodes": 8, "seeds": [0],
         "max_steps": 7, "embedder": "hashing", "verifier": {"p_th": 2}, "eval_every": 4,
         "updater": {"kind": "rule", "wrong_place_rate": 0.3, "stale_place_rate": 0.2,
                     "overgeneral_rate": 0.1, "forget_rate": 0.2},
         "janus": {"warmup": 1, "accept_ties": True},
         "arms": ["never", "clean", "momentum", "always", "evidence", "random:~evidence",
                  "periodic:2", {"trigger": "always", "scorer": "simulator"}]}


@pytest.fixture(scope="module")
def small_doc():
    return run_benchmark(scenario_from_dict(SMALL), embedder=HashingEmbedder())


def test_shipped_scenarios_load():
    files = sorted(SCENARIOS.glob("janus_*.yaml"))
    assert {f.stem for f in files} >= {"janus_worlds", "janus_small"}
    for f in files:
        sc = load_scenario(f)
        assert sc.episodes > 0 and all(w.colors for w in sc.load_worlds())
        assert result_stem(sc) == f"janus_{sc.name}"
    main = load_scenario(SCENARIOS / "janus_worlds.yaml")
    assert {a.trigger for a in main.arms} >= {"never", "clean", "momentum", "always",
                                              "evidence", "random:~evidence"}
    worlds = main.load_worlds()
    assert len(worlds) == 3
    # the extra event (green moves at 40) is appended to the maze's own swap at 20
    assert [e.episode for e in worlds[0].drift_events()] == [20, 40]


@pytest.mark.parametrize("bad", [
    {"name": "x", "colour": "red"},                       # unknown key
    {"world": "small"},                                   # no name
    {"name": "x", "arms": ["sometimes"]},                 # unknown trigger
    {"name": "x", "arms": ["never", "never"]},            # duplicate labels
    {"name": "x", "arms": []},
    {"name": "x", "arms": [{"trigger": "always", "scorer": "psychic"}]},
    {"name": "x", "updater": {"wrong_place_rate": 1.5}},
    {"name": "x", "arms": ["never", "random:~evidence"]},  # matched to an arm not before it
    {"name": "x", "world": "small", "worlds": ["small"]},
    {"name": "x", "heldout_fraction": 1.0},
    {"name": "x", "updater": {"temperature": 1}},
    {"name": "x", "verifier": {"mode": "sync"}},
    {"name": "x", "janus": {"tau": 3}},
    {"name": "x", "planner_memory": "plan"},              # real wiring only
    {"name": "x", "seeds": [-1]},
    {"name": "x", "episodes": 0},
    ["not", "a", "mapping"],
])
def test_scenario_validation(bad):
    with pytest.raises(ValueError):
        scenario_from_dict(bad)


def test_load_scenario_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_scenario(tmp_path / "missing.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(ValueError):
        load_scenario(p)
    p.write_text(yaml.safe_dump({"name": "x", "world": "no_such_world"}))
    with pytest.raises(FileNotFoundError):
        load_scenario(p).load_worlds()


def _ep(eid, goal, *obs):
    return EpisodeOutcome(eid, f"find the {goal} block", goal, True, None,
                          tuple(Observation(w, tuple(c)) for w, c in obs))


def test_noisy_updater_injects_seeded_harm():
    wps = ["a", "b", "c", "d"]
    clean = NoisyUpdater(RuleUpdater(), wps)
    entries: list = []
    base = RuleUpdater().propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    assert clean.propose_edits(entries, _ep("e1", "red", ("b", ["red"]))) == base
    wrong = NoisyUpdater(RuleUpdater(), wps, rates={"wrong_place": 1.0})
    p = wrong.propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    fact = next(e for e in p.edits if e.name == "block_red")
    assert fact.meta["waypoints"] != ["b"] and "wrong place" in wrong.injected["e1"]
    again = NoisyUpdater(RuleUpdater(), wps, rates={"wrong_place": 1.0}).propose_edits(
        entries, _ep("e1", "red", ("b", ["red"])))
    assert again == p  # the same coin flips for the same episode: every arm sees them
    # stale place: red was seen at a before, at b now -> written at a
    stale = NoisyUpdater(RuleUpdater(), wps, rates={"stale_place": 1.0})
    assert stale.propose_edits(entries, _ep("e0", "red", ("a", ["red"]))).edits == \
        RuleUpdater().propose_edits(entries, _ep("e0", "red", ("a", ["red"]))).edits
    p = stale.propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    assert next(e for e in p.edits if e.name == "block_red").meta["waypoints"] == ["a"]
    assert "stale place: red at a" in stale.injected["e1"]
    # over-generalisation: every other colour written where red was found
    over = NoisyUpdater(RuleUpdater(), wps, rates={"overgeneral": 1.0},
                        colours=["red", "blue", "green"])
    p = over.propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    assert {e.name: e.meta["waypoints"] for e in p.edits} == {
        "block_red": ["b"], "block_blue": ["b"], "block_green": ["b"]}
    with pytest.raises(ValueError, match="unknown error kind"):
        NoisyUpdater(RuleUpdater(), wps, rates={"typo": 1.0})
    store = PlanMemoryStore(":memory:")
    store.apply(list(base.edits))
    forget = NoisyUpdater(RuleUpdater(), wps, rates={"forget": 1.0})
    cand = forget.propose(store, _ep("e2", "blue", ("c", ["blue"])))
    assert cand is not None and "forgot block_red" in forget.injected["e2"]
    assert "remove block_red" in [f"{e.op} {e.name}" for e in cand.edits]
    assert store.active_version == 2  # proposing deploys nothing
    with pytest.raises(ValueError):
        NoisyUpdater(RuleUpdater(), ["only"])


def test_json_shape_and_counters(small_doc):
    doc = small_doc
    assert doc["benchmark"] == "janus" and doc["paper"] == PAPER
    assert doc["scenario"]["name"] == "t"
    assert [w["name"] for w in doc["worlds"]] == ["small", "corridor_blocked"]
    assert doc["scenario"]["planner_memory"].startswith("both")
    assert list(doc["arms"]) == ["never", "clean", "momentum", "always", "evidence",
                                 "random:~evidence", "periodic:2", "always+simulator"]
    for a in doc["arms"].values():
        g = a["gate"]
        assert g["accepted_direct"] + g["accepted_compared"] + g["rejected"] == g["proposals"]
        assert g["comparisons"] <= g["proposals"]
        assert 0 <= g["harmful_deployed"] <= g["harmful_proposed"]
        assert a["llm_calls"] == 0 and a["wall_s"] >= a["gate_wall_s"] >= 0
        assert len(a["runs"]) == 2 and {r["world"] for r in a["runs"]} == {
            "small", "corridor_blocked"}
        assert set(a["heldout"]) == {"find", "fetch", "goto", "corridor", "cold_find",
                                     "cold_goto", "cold_corridor", "all", "rehearsed",
                                     "unrehearsed"}
        assert all(0.0 <= v <= 1.0 for v in a["heldout"].values())
        rows = a["runs"][0]["episodes"]
        assert [r["episode"] for r in rows] == list(range(8))
        assert [e["after_episode"] for e in a["runs"][0]["evals"]] == [3, 7]
        assert all(r["verdict"] in (None, "accepted_direct", "accepted_compared", "rejected")
                   for r in rows)
    never, clean = doc["arms"]["never"]["gate"], doc["arms"]["clean"]["gate"]
    assert never["comparisons"] == 0 and never["rejected"] == 0
    assert never["harmful_deployed"] == never["harmful_proposed"] > 0
    assert clean["harmful_proposed"] == 0 and clean["comparisons"] == 0
    always = doc["arms"]["always"]["gate"]
    assert always["comparisons"] > 0 and always["rehearsal_decisions"] > 0
    assert always["harmful_deployed"] < never["harmful_deployed"]
    # the evidence trigger compares less than always and still stops harmful candidates
    ev = doc["arms"]["evidence"]["gate"]
    assert 0 < ev["comparisons"] < always["comparisons"]
    assert ev["harmful_deployed"] < never["harmful_deployed"]
    # the budget-matched random arm takes the evidence arm's comparison rate
    assert doc["arms"]["random:~evidence"]["resolved_trigger"].startswith("random:0.")
    comp = doc["comparison"]
    for which in ("later", "heldout", "new_robot"):
        row = comp["evidence"][f"{which}_points_vs_no_gate"]
        assert row["n"] == 2 and len(row["ci95"]) == 2
        assert len(comp["evidence"][f"{which}_points_vs_no_gate_per_run"]) == 2
    assert "comparisons_vs_always" in comp["evidence"]
    # a plan memory with injected errors misleads a new robot: the clean arm is the ceiling
    assert doc["arms"]["clean"]["heldout"]["cold_find"] > doc["arms"]["never"]["heldout"][
        "cold_find"]
    json.dumps(doc, allow_nan=False)  # strict JSON
    text = format_table(doc)
    assert "paper: +2.7 to +4.6" in text and "evidence" in text and "new robot" in text


def test_runs_are_deterministic(small_doc):
    again = run_benchmark(scenario_from_dict({**SMALL, "arms": ["never", "evidence"]}),
                          embedder=HashingEmbedder())
    for label in again["arms"]:
        assert again["arms"][label]["totals"] == small_doc["arms"][label]["totals"]
        assert again["arms"][label]["gate"] == small_doc["arms"][label]["gate"]


def test_llm_updater_path_counts_calls_and_survives_garbage():
    sc = replace(scenario_from_dict(SMALL), updater="llm", episodes=3,
                 arms=(Arm("never", "never"), Arm("always", "always")))
    llm = ScriptedLlm(default="not json {")
    doc = run_benchmark(sc, llm=llm, embedder=HashingEmbedder())
    for a in doc["arms"].values():
        assert a["llm_calls"] == 3 and a["gate"]["proposals"] == 0
        assert all("unusable" in r["note"] for r in a["runs"][0]["episodes"])
        assert a["totals"]["plan_accuracy"] in (0.0, 0.5)  # empty memory throughout
    assert len(llm.calls) == 12  # 3 tasks x 2 worlds x 2 arms


def test_main_writes_json_and_png(tmp_path, capsys):
    p = tmp_path / "janus_tiny.yaml"
    p.write_text(yaml.safe_dump({**SMALL, "name": "janus_tiny", "episodes": 4,
                                 "worlds": ["small"], "arms": ["never", "evidence"]}))
    parser = argparse.ArgumentParser()
    janus.add_arguments(parser)
    out = tmp_path / "out"
    assert janus.main(parser.parse_args(["--scenario", str(p), "--out", str(out)])) == 0
    assert (out / "janus_tiny.json").is_file() and (out / "janus_tiny.png").stat().st_size > 0
    doc = json.loads((out / "janus_tiny.json").read_text())
    assert doc["scenario"]["episodes"] == 4 and "never" in capsys.readouterr().out
    args = parser.parse_args(["--scenario", str(p), "--out", str(out), "--json",
                              "--episodes", "3", "--arms", "never,always", "--seeds", "1"])
    assert janus.main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["scenario"]["seeds"] == [1] and list(printed["arms"]) == ["never", "always"]
    bad = parser.parse_args(["--scenario", str(tmp_path / "none.yaml"), "--out", str(out)])
    assert janus.main(bad) == 2
    bad = parser.parse_args(["--scenario", str(p), "--arms", "sometimes", "--out", str(out)])
    assert janus.main(bad) == 2
    assert "glove-ros bench janus" in capsys.readouterr().err


@pytest.mark.llm
@pytest.mark.slow
def test_real_gguf_updater_smoke():
    """Two reflections by the bundled SmolLM2-135M (1 thread): whatever it writes, the run
    completes, each task costs one LLM call, and garbage never breaks the loop."""
    pytest.importorskip("llama_cpp")
    from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

    llm = LlamaBackend(LlmConfig(n_ctx=1024, n_threads=1, max_tokens=128, timeout_s=60.0))
    try:
        llm.load()
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"bundled GGUF not loadable: {exc}")
    sc = replace(scenario_from_dict(SMALL), updater="llm", episodes=2,
                 worlds=({"world": "small", "events": []},), arms=(Arm("always", "always"),))
    try:
        doc = run_benchmark(sc, llm=llm, embedder=HashingEmbedder())
    finally:
        llm.close()
    a = doc["arms"]["always"]
    assert a["llm_calls"] == 2 and len(a["runs"][0]["episodes"]) == 2
