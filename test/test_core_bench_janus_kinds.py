"""Tests of the Janus benchmark's update-error kinds beyond what looks confirm, the cheap
experience-aware baseline trigger (``touches``) and the per-kind results."""

from __future__ import annotations

import json

import pytest

from glove_ros.benchmarks._janus_arm import by_kind
from glove_ros.benchmarks._janus_kinds import (
    ExperienceTouch,
    NoisyUpdater,
    changed_edges,
    changed_waypoints,
)
from glove_ros.benchmarks._janus_perkind import per_kind_summary
from glove_ros.benchmarks._janus_report import format_table
from glove_ros.benchmarks._janus_scenario import ERROR_KINDS, Arm, scenario_from_dict
from glove_ros.benchmarks.janus import run_benchmark
from glove_ros.core.llm.embedding import HashingEmbedder
from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.plan.agent_types import WorldMap
from glove_ros.core.plan.plan_entries import apply_edits
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_planner import plan_prior
from glove_ros.core.plan.updater import (
    EpisodeOutcome,
    Observation,
    RuleUpdater,
    Traversal,
    blocked_name,
)

WPS = ["a", "b", "c", "d"]
EDGES = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]


def _ep(eid, goal, obs=(), drives=()):
    return EpisodeOutcome(eid, f"find the {goal} block", goal, True, None,
                          tuple(Observation(w, tuple(c)) for w, c in obs),
                          tuple(Traversal(s, t, blocked) for s, t, blocked in drives))


def _noisy(kind, **kw):
    return NoisyUpdater(RuleUpdater(), WPS, rates={kind: 1.0}, edges=EDGES,
                        colours=["red", "blue"], **kw)


def test_every_kind_is_known_and_rates_validate():
    assert ERROR_KINDS[4:] == ("unvisited_place", "false_route", "forget_lesson", "reflection")
    sc = scenario_from_dict({"name": "x", "updater": {"reflection_rate": 0.3}})
    assert sc.error_rates["reflection"] == 0.3 and sc.error_rates["false_route"] == 0.0
    with pytest.raises(ValueError, match="reflection_rate"):
        scenario_from_dict({"name": "x", "updater": {"reflection_rate": 2}})
    with pytest.raises(ValueError, match="needs a never arm"):
        scenario_from_dict({"name": "x", "per_kind_arms": ["always"]})
    with pytest.raises(ValueError, match="not allowed"):
        scenario_from_dict({"name": "x", "arms": ["never", "evidence"],
                            "per_kind_arms": ["never", "random:~evidence"]})


def test_unvisited_place_names_a_waypoint_never_looked_at_beside_the_true_one():
    up = _noisy("unvisited_place")
    p = up.propose_edits([], _ep("e1", "red", [("b", ["red"]), ("a", [])]))
    fact = next(e for e in p.edits if e.name == "block_red")
    # a and b were looked at; the added place is c or d, listed first, b still there
    assert fact.meta["waypoints"][1:] == ["b"] and fact.meta["waypoints"][0] in ("c", "d")
    assert up.injected_kinds["e1"] == ("unvisited_place",)
    assert "never looked at" in up.injected["e1"]
    # the clean edits are kept, so the error alone can be told from the rule updater's work
    assert [e.name for e in up.clean_edits["e1"]] == ["block_red"]
    # once every other waypoint was looked at, nothing is injected (the candidate is clean)
    full = _noisy("unvisited_place")
    p = full.propose_edits([], _ep("e1", "red", [("a", []), ("c", []), ("d", []),
                                                 ("b", ["red"])]))
    assert "e1" not in full.injected and p == RuleUpdater().propose_edits(
        [], _ep("e1", "red", [("a", []), ("c", []), ("d", []), ("b", ["red"])]))


def test_false_route_blocks_only_a_corridor_never_driven():
    fr = _noisy("false_route")
    drives = [("a", "b", False), ("b", "c", False), ("c", "d", False)]
    p = fr.propose_edits([], _ep("e1", "red", [("c", ["red"])], drives))
    lesson = next(e for e in p.edits if e.name.startswith("blocked_"))
    assert lesson.name == blocked_name("a", "d") and lesson.kind == "negative"
    assert sorted(lesson.meta["edge"]) == ["a", "d"]
    assert fr.injected_kinds["e1"] == ("false_route",)
    # every corridor driven: no false route can be injected
    fr.driven.add(("a", "d"))
    fr.propose_edits([], _ep("e2", "red", [("c", ["red"])]))
    assert "e2" not in fr.injected


def test_forget_lesson_removes_a_corridor_lesson_not_a_block_fact():
    store = PlanMemoryStore(":memory:")
    first = RuleUpdater().propose_edits(
        [], _ep("e0", "red", [("c", ["red"])], [("a", "b", True), ("a", "d", False),
                                                 ("d", "c", False)]))
    store.apply(list(first.edits))
    names = {e.name for e in store.entries()}
    assert blocked_name("a", "b") in names and "block_red" in names
    fl = _noisy("forget_lesson")
    cand = fl.propose(store, _ep("e1", "blue", [("d", ["blue"])]))
    assert cand is not None and fl.injected_kinds["e1"] == ("forget_lesson",)
    removed = [e.name for e in cand.edits if e.op == "remove"]
    assert len(removed) == 1 and not removed[0].startswith("block_")
    assert removed[0] in (blocked_name("a", "b"), "route_a_c")


def test_reflection_is_free_text_the_planner_reads_as_a_wrong_claim():
    for seed in range(12):
        rf = _noisy("reflection", seed=seed)
        p = rf.propose_edits([], _ep("e1", "red", [("b", ["red"])]))
        note = next(e for e in p.edits if e.name == "note_red")
        assert note.kind == "semantic" and not note.meta  # free text, no structured claim
        assert rf.injected_kinds["e1"] == ("reflection",)
        entries = apply_edits([], p.edits, source="rule")
        prior = plan_prior(entries, "red", WPS)
        if "never kept at b" in note.body:
            assert "b" in prior.avoided()  # the true place is now avoided
        else:
            assert prior.preferred()[0] in ("a", "c")  # a neighbour of b outranks b
            assert prior.preferred()[0] != "b"


def test_kinds_draw_the_same_coins_whichever_other_kinds_are_on():
    alone = NoisyUpdater(RuleUpdater(), WPS, rates={"reflection": 0.5}, edges=EDGES, seed=3)
    mixed = NoisyUpdater(RuleUpdater(), WPS, rates={"reflection": 0.5, "wrong_place": 0.5,
                                                    "false_route": 0.5}, edges=EDGES, seed=3)
    for i in range(20):
        ep = _ep(f"e{i}", "red", [("b", ["red"])])
        alone.propose_edits([], ep)
        mixed.propose_edits([], ep)
    fired_alone = set(alone.injected_kinds)
    fired_mixed = {k for k, v in mixed.injected_kinds.items() if "reflection" in v}
    assert fired_alone == fired_mixed and 0 < len(fired_alone) < 20


class _Memory:
    """A MemoryView of fixed trusted entries."""

    def __init__(self, transitions):
        self.entries = [MemoryEntry(i + 1, t, Status.TRUSTED, 0.0)
                        for i, t in enumerate(transitions)]

    def trusted(self, state_key=None, action=None):
        return [e for e in self.entries
                if (state_key is None or e.transition.state_key == state_key)
                and (action is None or e.transition.action == action)]


def test_touch_trigger_compares_only_what_experience_memory_has_evidence_about():
    wm = WorldMap({w: (float(i), 0.0, 0.0) for i, w in enumerate(WPS)},
                  {e: 1.0 for e in EDGES}, "a")
    memory = _Memory([Transition("b", "look", "colors=red"),
                      Transition("a", "navigate_to", "reached", action_arg="b")])
    store = PlanMemoryStore(":memory:")
    touch = ExperienceTouch(store, wm, memory)
    up = RuleUpdater()
    # a fact about b (looked at) is compared
    c1 = store.propose(list(up.propose_edits([], _ep("e1", "red", [("b", ["red"])])).edits),
                       source="rule")
    assert "red at b" in touch(c1) and "trusted look" in touch(c1)
    store.deploy(c1)
    # a fact about d (never looked at) is deployed without comparison
    c2 = store.propose(list(up.propose_edits(store.entries(),
                                             _ep("e2", "blue", [("d", ["blue"])])).edits),
                       source="rule")
    assert changed_waypoints(store.entries(c2.base_version), store.entries(c2.version),
                             WPS) == {"d": ["blue"]}
    assert touch(c2) == ""
    # a corridor lesson: compared for a-b (driven), not for c-d (never driven)
    ab = up.propose_edits([], _ep("e3", "red", [], [("a", "b", True)])).edits
    c3 = store.propose(list(ab), source="rule")
    assert changed_edges(store.entries(c3.base_version), store.entries(c3.version)) == {
        ("a", "b")}
    assert "corridor a-b" in touch(c3)
    store.reject(c3, "test: not deployed")
    cd = up.propose_edits([], _ep("e4", "red", [], [("c", "d", True)])).edits
    assert touch(store.propose(list(cd), source="rule")) == ""
    with pytest.raises(ValueError):
        ExperienceTouch(store, wm, object())


def test_by_kind_counts_each_labelled_candidate():
    rows = [
        {"kinds": ["reflection"], "verdict": "rejected", "triggered": True,
         "experience_sees": True, "experience_sees_error": True, "evidence_against": True},
        {"kinds": ["reflection", "false_route"], "verdict": "accepted_direct",
         "triggered": False, "experience_sees": False, "experience_sees_error": False,
         "evidence_against": False},
        {"kinds": [], "verdict": "rejected", "triggered": True, "experience_sees": True,
         "experience_sees_error": None, "evidence_against": False},
    ]
    out = by_kind(rows)
    assert out["reflection"] == {"proposed": 2, "deployed": 1, "blocked": 1, "compared": 1,
                                 "experience_sees": 1, "experience_sees_error": 1,
                                 "evidence_against": 1}
    assert out["false_route"]["proposed"] == 1 and out["false_route"]["deployed"] == 1
    assert out["clean"]["blocked"] == 1 and out["wrong_place"]["proposed"] == 0


def _run(heldout, later, kind_counts, clean_blocked=0):
    counts = {"proposed": 0, "deployed": 0, "blocked": 0, "compared": 0,
              "experience_sees": 0, "experience_sees_error": 0, "evidence_against": 0}
    return {"by_kind": {"false_route": {**counts, **kind_counts},
                        "clean": {**counts, "proposed": 5, "blocked": clean_blocked}},
            "gate": {"comparisons": kind_counts.get("compared", 0)},
            "later": {"success_rate": later},
            "heldout": {k: heldout for k in ("find", "fetch", "goto", "corridor", "cold_find",
                                             "cold_goto", "cold_corridor", "all",
                                             "rehearsed", "unrehearsed")}}


def test_per_kind_summary_pairs_gains_against_never_and_harm_against_clean():
    arms = [Arm("never", "never"), Arm("always", "always")]
    runs = {"never": [_run(0.80, 1.0, {"proposed": 2, "deployed": 2}),
                      _run(0.90, 1.0, {"proposed": 2, "deployed": 2})],
            "always": [_run(0.85, 1.0, {"proposed": 2, "deployed": 1, "blocked": 1,
                                        "compared": 2}, clean_blocked=1),
                       _run(0.90, 1.0, {"proposed": 2, "deployed": 2, "compared": 2})]}
    clean = [_run(0.90, 1.0, {}), _run(0.90, 1.0, {})]
    out = per_kind_summary("false_route", runs, arms, clean)
    a = out["arms"]["always"]
    assert a["proposed"] == 2 and a["harmful_deployed"] == 1.5 and a["blocked"] == 0.5
    assert a["helpful_blocked"] == 0.5
    g = a["gain_vs_never"]["heldout"]
    assert g["per_run"] == [5.0, 0.0] and g["mean"] == 2.5 and len(g["ci95"]) == 2
    assert a["gain_vs_never"]["later"]["mean"] == 0.0
    assert "gain_vs_never" not in out["arms"]["never"]
    assert out["harm_vs_clean"]["unrehearsed"]["per_run"] == [-10.0, 0.0]


def test_small_run_reports_every_kind_per_arm():
    sc = scenario_from_dict({
        "name": "k", "worlds": ["small", "corridor_blocked"], "episodes": 8, "seeds": [0],
        "max_steps": 7, "embedder": "hashing", "eval_every": 4,
        "updater": {"kind": "rule", "wrong_place_rate": 0.3, "stale_place_rate": 0.0,
                    "overgeneral_rate": 0.0, "forget_rate": 0.0, "unvisited_place_rate": 0.5,
                    "false_route_rate": 0.5, "forget_lesson_rate": 0.5,
                    "reflection_rate": 0.5},
        "janus": {"warmup": 1},
        "arms": ["never", "clean", "always", "evidence", "touches"],
        "per_kind_arms": ["never", "touches", "always"]})
    doc = run_benchmark(sc, embedder=HashingEmbedder())
    json.dumps(doc, allow_nan=False)
    # kinds with rate 0 are not run alone; the others are, for every per-kind arm
    assert set(doc["per_kind"]) == {"wrong_place", "unvisited_place", "false_route",
                                    "forget_lesson", "reflection"}
    for block in doc["per_kind"].values():
        assert list(block["arms"]) == ["never", "touches", "always"]
        never = block["arms"]["never"]
        assert never["blocked"] == 0 and never["compared"] == 0
        assert never["harmful_deployed"] == never["proposed"]
        for a in block["arms"].values():
            assert a["deployed"] + a["blocked"] == a["proposed"]
            assert a["experience_sees_error"] <= a["proposed"]
        assert set(block["harm_vs_clean"]) == {"later", "heldout", "rehearsed",
                                               "unrehearsed", "new_robot"}
    # the touches trigger compares at most what always-compare compares
    t, al = doc["arms"]["touches"]["gate"], doc["arms"]["always"]["gate"]
    assert t["comparisons"] <= al["comparisons"] and doc["arms"]["touches"][
        "resolved_trigger"] == "touches"
    # every injected candidate of the mixed run carries its kinds
    rows = doc["arms"]["never"]["runs"][0]["episodes"]
    labelled = [r for r in rows if r["injected"]]
    assert labelled and all(r["kinds"] and set(r["kinds"]) <= set(ERROR_KINDS)
                            for r in labelled)
    assert all(not r["kinds"] for r in rows if not r["injected"])
    assert doc["arms"]["clean"]["by_kind"]["reflection"]["proposed"] == 0
    text = format_table(doc)
    assert "per error kind" in text and "unvisited_place" in text and "touches" in text
