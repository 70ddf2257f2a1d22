"""Tests of the long-stream mode of glove-ros bench consolidation (issue 29): the
planner-read token metric counts exactly what retrieval gives the planner under its budget,
and the stream runner on a short stream gives the documented keys and curves."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from glove_ros.benchmarks import _consolidation_stream as stream
from glove_ros.benchmarks import consolidation as bench
from glove_ros.core.consolidate.acceptance import memory_tokens, rehearse_find
from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.plan_entries import Edit
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_retrieval import assemble_prompt, format_entry

SCEN = Path(__file__).resolve().parent.parent / "bench" / "scenarios"
STREAM = str(SCEN / "consolidation_stream.yaml")
TINY = str(SCEN / "consolidation_tiny.yaml")
WPS = ("dock", "hall", "kitchen", "office", "lab")


@pytest.fixture()
def store():
    s = PlanMemoryStore(":memory:")
    s.apply([  # oldest first: entry ids ascend in this order
        Edit.add("negative", "closed_hall_lab",
                 "The corridor between hall and lab was blocked (episode ep001)."),
        Edit.add("semantic", "seen_blue_office", "Saw the blue block at office (episode ep002)."),
        Edit.add("semantic", "seen_red_kitchen", "Saw the red block at kitchen (episode ep003)."),
        Edit.add("procedure", "path_dock_kitchen", "Route dock -> kitchen worked (episode ep003)."),
        Edit.add("semantic", "seen_red_lab", "Saw the red block at lab (episode ep004)."),
    ])
    yield s
    s.close()


def test_planner_read_counts_what_retrieval_returns_under_budget(store):
    entries = store.entries()
    query = "find the red block"
    # "Plan memory:" costs 5, each red line 30-32 (approx_tokens + newline): two fit in 70
    read, seen = stream.planner_read(entries, query, 70)
    assert read.included == ("seen_red_lab", "seen_red_kitchen")  # both red, newest first
    assert [e.name for e in seen] == list(read.included)
    assert read.text == "\n".join(["Plan memory:"] + [format_entry(e) for e in seen])
    assert read.tokens == approx_tokens(read.text) <= 70
    # the same text the store renders for the planner, and less than the whole memory
    assert read == store.render(budget_tokens=70, query=query)
    assert read.tokens < memory_tokens(entries)
    # a larger budget reads more, a budget below the header reads nothing
    big, _ = stream.planner_read(entries, query, 10_000)
    assert len(big.included) == 5 and big.tokens > read.tokens
    none, seen0 = stream.planner_read(entries, query, 4)
    assert none.tokens == 0 and none.included == () and seen0 == []
    # the memoised counter the runner uses reads exactly the same
    cached = stream.functools.lru_cache(maxsize=None)(approx_tokens)
    assert stream.planner_read(entries, query, 70, cached)[0] == read


def test_decision_tokens_is_the_deciding_prefix_of_the_read(store):
    entries = store.entries()
    read, seen = stream.planner_read(entries, "find the red block", 400)
    first, need = stream.decision_tokens(seen, "red", WPS)
    # the decision from the read entries is the planner's decision on the whole memory
    assert first == rehearse_find(entries, "red", WPS, budget_tokens=400) == "lab"
    # the newest red entry comes first and decides alone
    assert need == assemble_prompt(seen[:1]).tokens < read.tokens
    # nothing usable about a colour: the whole read counts
    first, need = stream.decision_tokens(seen, "green", WPS)
    assert first is None and need == read.tokens


def test_wilson_interval():
    assert stream.wilson(0, 0) is None
    lo, hi = stream.wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert stream.wilson(10, 10)[1] == 1.0 and stream.wilson(0, 10)[0] == 0.0


def test_stream_scenario_is_a_long_drifting_stream():
    sc = bench.load_scenario(STREAM)
    assert sc.episodes >= 1000 and sc.checkpoint_every == 100 and sc.every_k == 10
    drift = [e.episode for e in sc.world.drift_events()]
    assert len(drift) >= 10 and max(drift) > 900  # drift all along the stream
    assert len(bench._watched_edges(sc.world)) == 3
    with pytest.raises(bench.ScenarioError, match="checkpoint_every"):
        bench.parse_scenario({"world": "small", "episodes": 4, "checkpoint_every": -1})


@pytest.fixture(scope="module")
def doc():
    sc = bench.load_scenario(STREAM)
    sc = bench.Scenario(**{**sc.__dict__, "episodes": 30})
    return stream.run_stream(sc, checkpoint_every=10)


def test_stream_runner_on_a_tiny_stream_gives_keys_and_curves(doc):
    assert doc["mode"] == "stream" and doc["scenario"]["episodes"] == 30
    assert doc["scenario"]["checkpoint_every"] == 10
    assert set(doc["arms"]) == {"writer_only", "dedup_recency", "rule"}
    budget = doc["scenario"]["planner_budget_tokens"]
    keys = {"episodes", "success", "success_ci95", "read_tokens", "read_entries",
            "decision_tokens", "corridor_accuracy", "memory_entries",
            "memory_tokens_after_dock", "memory_tokens_before_dock", "dock_s"}
    for a in doc["arms"].values():
        s = a["summary"]
        assert keys <= set(s["all"]) and keys <= set(s["later_half"])
        assert s["all"]["episodes"] == 30 and s["later_half"]["episodes"] == 15
        assert 0 < s["all"]["read_tokens"] <= budget  # read under the budget
        assert s["all"]["decision_tokens"] <= s["all"]["read_tokens"]
        assert {"final_memory_tokens", "dock_s_total", "runs_committed"} <= set(s)
    # the curve per checkpoint window: 0-10, 10-20, 20-30
    ws = doc["windows"]
    assert [(w["from_episode"], w["to_episode"]) for w in ws] == [(0, 10), (10, 20), (20, 30)]
    for w in ws:
        for name in doc["arms"]:
            assert keys <= set(w[name]) and w[name]["read_tokens"] <= budget
            assert w[name]["memory_tokens_at_end"] == pytest.approx(
                next(d for d in doc["docks"] if d["episodes"] == w["to_episode"])[name][
                    "memory_tokens"])
    # the curve per dock: a consolidating arm runs once per dock, the baseline fits its budget
    assert [d["episodes"] for d in doc["docks"]] == [10, 20, 30]
    assert len(doc["arms"]["rule"]["runs"]) == 3
    assert doc["arms"]["writer_only"]["runs"] == [] == doc["arms"]["dedup_recency"]["runs"]
    for d in doc["docks"]:
        assert d["dedup_recency"]["memory_tokens"] <= doc["scenario"]["baseline_budget_tokens"]
        assert d["writer_only"]["memory_tokens"] == d["writer_only"]["memory_tokens_before"]
        assert d["rule"]["memory_tokens"] < d["writer_only"]["memory_tokens"]
    # the same episodes reach every arm: identical before the first dock
    w0 = ws[0]
    assert w0["writer_only"]["read_tokens"] == w0["rule"]["read_tokens"]
    assert w0["writer_only"]["success"] == w0["rule"]["success"]
    for key in ("rule_read_tokens_vs_baseline", "rule_decision_tokens_vs_baseline",
                "rule_memory_tokens_after_dock_vs_baseline", "rule_later_success_minus_baseline",
                "rule_later_paired_vs_baseline", "dedup_recency_read_tokens_vs_writer_only"):
        assert key in doc["ratios"]
    json.dumps(doc)
    table = stream.stream_table(doc)
    assert "read tok" in table and "20-30" in table and "vs dedup_recency" in table


def test_cli_checkpoint_flag_runs_the_stream_mode(tmp_path, capsys):
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--scenario", TINY, "--out", str(tmp_path), "--episodes", "8",
                         "--checkpoint-every", "4"])
    assert bench.main(args) == 0
    d = json.loads((tmp_path / "consolidation_tiny.json").read_text())
    assert d["mode"] == "stream" and len(d["windows"]) == 2
    assert (tmp_path / "consolidation_tiny.png").stat().st_size > 1000
    assert "decision tok" in capsys.readouterr().out
    bad = p.parse_args(["--scenario", TINY, "--out", str(tmp_path), "--checkpoint-every", "-2"])
    assert bench.main(bad) == 2
    # --seed: another stream, written next to the scenario's own result
    args = p.parse_args(["--scenario", TINY, "--out", str(tmp_path), "--episodes", "4",
                         "--checkpoint-every", "4", "--seed", "3", "--json"])
    assert bench.main(args) == 0
    d3 = json.loads((tmp_path / "consolidation_tiny_seed3.json").read_text())
    assert d3["scenario"]["seed"] == 3 and d3["scenario"]["episodes"] == 4
    assert bench.main(p.parse_args(["--scenario", TINY, "--seed", "-1"])) == 2
