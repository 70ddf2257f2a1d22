"""Tests of glove-ros bench janus: scenario files, the noisy updater, small runs, JSON shape."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from glove_ros.benchmarks import janus
from glove_ros.benchmarks.janus import (
    PAPER,
    Arm,
    NoisyUpdater,
    format_table,
    load_scenario,
    result_stem,
    run_benchmark,
    scenario_from_dict,
)
from glove_ros.core.embedding import HashingEmbedder
from glove_ros.core.llm import ScriptedLlm
from glove_ros.core.plan_memory import PlanMemoryStore
from glove_ros.core.updater import EpisodeOutcome, Observation, RuleUpdater

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "bench" / "scenarios"
SMALL = {"name": "t", "world": "small", "episodes": 8, "seeds": [0], "max_steps": 7,
         "embedder": "hashing", "verifier": {"p_th": 2},
         "updater": {"kind": "rule", "wrong_fact_rate": 0.4, "forget_rate": 0.2},
         "janus": {"warmup": 1, "accept_ties": True},
         "arms": ["never", "momentum", "always", "periodic:2", "random:0.5",
                  {"trigger": "always", "scorer": "simulator"}]}


@pytest.fixture(scope="module")
def small_doc():
    return run_benchmark(scenario_from_dict(SMALL), embedder=HashingEmbedder())


def test_shipped_scenarios_load():
    files = sorted(SCENARIOS.glob("janus_*.yaml"))
    assert {f.stem for f in files} >= {"janus_maze", "janus_small"}
    for f in files:
        sc = load_scenario(f)
        world = sc.load_world()
        assert sc.episodes > 0 and world.colors
        assert result_stem(sc) == f"janus_{sc.name}"
    maze = load_scenario(SCENARIOS / "janus_maze.yaml")
    assert {a.trigger for a in maze.arms} >= {"never", "momentum", "always"}
    # the extra event (green moves at 40) is appended to the world's own swap at 20
    assert [e.episode for e in maze.load_world().drift_events()] == [20, 40]


@pytest.mark.parametrize("bad", [
    {"name": "x", "colour": "red"},                       # unknown key
    {"world": "small"},                                   # no name
    {"name": "x", "arms": ["sometimes"]},                 # unknown trigger
    {"name": "x", "arms": ["never", "never"]},            # duplicate labels
    {"name": "x", "arms": []},
    {"name": "x", "arms": [{"trigger": "always", "scorer": "psychic"}]},
    {"name": "x", "updater": {"wrong_fact_rate": 1.5}},
    {"name": "x", "updater": {"temperature": 1}},
    {"name": "x", "verifier": {"mode": "sync"}},
    {"name": "x", "janus": {"tau": 3}},
    {"name": "x", "planner_memory": "dreams"},
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
        load_scenario(p).load_world()


def _ep(eid, goal, *obs):
    return EpisodeOutcome(eid, f"find the {goal} block", goal, True, None,
                          tuple(Observation(w, tuple(c)) for w, c in obs))


def test_noisy_updater_injects_seeded_harm():
    wps = ["a", "b", "c", "d"]
    clean = NoisyUpdater(RuleUpdater(), wps)
    entries: list = []
    base = RuleUpdater().propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    assert clean.propose_edits(entries, _ep("e1", "red", ("b", ["red"]))) == base
    wrong = NoisyUpdater(RuleUpdater(), wps, wrong_fact_rate=1.0)
    p = wrong.propose_edits(entries, _ep("e1", "red", ("b", ["red"])))
    fact = next(e for e in p.edits if e.name == "block_red")
    assert fact.meta["waypoints"] != ["b"] and "wrong fact" in wrong.injected["e1"]
    again = NoisyUpdater(RuleUpdater(), wps, wrong_fact_rate=1.0).propose_edits(
        entries, _ep("e1", "red", ("b", ["red"])))
    assert again == p  # the same coin flips for the same episode: every arm sees them
    store = PlanMemoryStore(":memory:")
    store.apply(list(base.edits))
    forget = NoisyUpdater(RuleUpdater(), wps, forget_rate=1.0)
    cand = forget.propose(store, _ep("e2", "blue", ("c", ["blue"])))
    assert cand is not None and "forgot block_red" in forget.injected["e2"]
    assert "remove block_red" in [f"{e.op} {e.name}" for e in cand.edits]
    assert store.active_version == 2  # proposing deploys nothing
    with pytest.raises(ValueError):
        NoisyUpdater(RuleUpdater(), ["only"])


def test_json_shape_and_counters(small_doc):
    doc = small_doc
    assert doc["benchmark"] == "janus" and doc["paper"] == PAPER
    assert doc["scenario"]["name"] == "t" and doc["world"]["name"] == "small"
    assert [p["name"] for p in doc["phases"]] == ["before drift", "swap_blocks@3"]
    assert list(doc["arms"]) == ["never", "momentum", "always", "periodic:2", "random:0.5",
                                 "always+simulator"]
    for a in doc["arms"].values():
        g = a["gate"]
        assert g["accepted_direct"] + g["accepted_compared"] + g["rejected"] == g["proposals"]
        assert g["comparisons"] <= g["proposals"]
        assert 0 <= g["harmful_deployed"] <= g["harmful_proposed"]
        assert a["llm_calls"] == 0 and a["wall_s"] >= a["gate_wall_s"] >= 0
        assert len(a["phases"]) == 2 and a["final"] == a["phases"][-1]
        assert 0.0 <= a["totals"]["success_rate"] <= 1.0
        rows = a["runs"][0]["episodes"]
        assert [r["episode"] for r in rows] == list(range(8))
        assert all(r["verdict"] in (None, "accepted_direct", "accepted_compared", "rejected")
                   for r in rows)
    never = doc["arms"]["never"]["gate"]
    assert never["comparisons"] == 0 and never["rejected"] == 0
    assert never["harmful_deployed"] == never["harmful_proposed"] > 0
    always = doc["arms"]["always"]["gate"]
    assert always["comparisons"] > 0 and always["rehearsal_decisions"] > 0
    assert always["harmful_deployed"] < never["harmful_deployed"]
    comp = doc["comparison"]
    assert "success_points_vs_no_gate" in comp["momentum"]
    assert len(comp["momentum"]["success_points_vs_no_gate_per_seed"]) == 1
    assert "comparisons_vs_always" in comp["momentum"]
    json.dumps(doc, allow_nan=False)  # strict JSON
    text = format_table(doc)
    assert "paper: +2.7 to +4.6" in text and "momentum" in text


def test_runs_are_deterministic(small_doc):
    again = run_benchmark(scenario_from_dict(SMALL), embedder=HashingEmbedder())
    for label in small_doc["arms"]:
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
    assert len(llm.calls) == 6


def test_main_writes_json_and_png(tmp_path, capsys):
    p = tmp_path / "janus_tiny.yaml"
    p.write_text(yaml.safe_dump({**SMALL, "name": "janus_tiny", "episodes": 4,
                                 "arms": ["never", "momentum"]}))
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
    from glove_ros.core.llm import LlamaBackend, LlmConfig

    llm = LlamaBackend(LlmConfig(n_ctx=1024, n_threads=1, max_tokens=128, timeout_s=60.0))
    try:
        llm.load()
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"bundled GGUF not loadable: {exc}")
    sc = replace(scenario_from_dict(SMALL), updater="llm", episodes=2,
                 arms=(Arm("always", "always"),))
    try:
        doc = run_benchmark(sc, llm=llm, embedder=HashingEmbedder())
    finally:
        llm.close()
    a = doc["arms"]["always"]
    assert a["llm_calls"] == 2 and len(a["runs"][0]["episodes"]) == 2
