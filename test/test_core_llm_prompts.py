"""The planner's prompt (facts with status and age), its reference rule, memory answers,
and the decision-quality harness scored with scripted models."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from glove_ros.benchmarks import llm as bench
from glove_ros.core.llm.prompts import (
    FEW_SHOT,
    REPLACED,
    SUPPRESSED,
    VERIFIED,
    Fact,
    FactSource,
    Note,
    OptionView,
    decision_messages,
    reference_choice,
)
from glove_ros.core.llm.runtime import ScriptedLlm
from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.plan import answers
from glove_ros.core.plan.agent_policy import LlmPlanner


def test_reference_rule():
    here_far = OptionView("kitchen", 8.0, (Fact(("red",), VERIFIED, 60, 2),))
    near = OptionView("lab", 1.0)
    absent = OptionView("office", 2.0, (Fact(("blue",), VERIFIED, 60, 1),))
    stale = OptionView("store", 3.0, (Fact(("red",), SUPPRESSED, 9e4, 3, "contradicted"),))
    assert reference_choice("red", [near, absent, here_far]) == "kitchen"
    assert reference_choice("red", [absent, stale, OptionView("hall", 5.0)]) == "store"
    assert reference_choice("red", [absent, stale, near]) == "lab"
    note = Note("n", "The red block is usually in the store.")
    assert reference_choice("red", [absent, stale, near], [note]) == "store"
    wrong = Note("n", "The red block is at office.")
    assert reference_choice("red", [absent, near], [wrong]) == "lab"
    assert reference_choice("red", [absent]) == "office"
    assert reference_choice("red", []) is None


def test_prompt_shows_status_age_and_notes_but_not_stale_claims():
    opts = [OptionView("store", 3.0, (Fact(("red",), REPLACED, 9e4, 3, "replaced by newer "
                                            "verified looks", "#7,#5"),
                                       Fact(("blue",), VERIFIED, 120, 1, ref="#9"))),
            OptionView("lab", 1.0)]
    msgs = decision_messages("red", "hall", opts, [Note("n", "The red block is in the lab.")])
    assert msgs[0]["role"] == "system" and msgs[1:len(FEW_SHOT) + 1] == list(FEW_SHOT)
    user = msgs[-1]["content"]
    assert user.index("- lab (1.0 m)") < user.index("- store (3.0 m)")  # nearest first
    assert "NOT HERE, verified: saw blue (1 look, 2 min ago) [#9]" in user
    assert "replaced as stale: replaced by newer verified looks [#7,#5]" in user
    assert "saw red" not in user  # a stale memory's claim cannot pull the choice
    assert 'note: "The red block is in the lab."' in user
    # the few-shot answers follow the rule and sit at different positions
    pos = set()
    for q, a in zip(FEW_SHOT[::2], FEW_SHOT[1::2], strict=True):
        lines = [ln for ln in q["content"].splitlines() if ln.startswith("- ")]
        pos.add([ln.split()[1] for ln in lines].index(json.loads(a["content"])["waypoint"]))
    assert pos == {0, 1, 2}


def _entry(i, wp, outcome, status=Status.TRUSTED, t=100.0, until=None, reason="",
           action="look", arg=""):
    tr = Transition(wp, action, outcome, action_arg=arg, robot_id="r", episode_id="e")
    return MemoryEntry(i, tr, status, t, until, reason)


def test_fact_source_groups_history_by_status():
    hist = [_entry(1, "lab", "colors=red", Status.REPLACED, 10, 50, "replaced by #3"),
            _entry(2, "lab", "colors=red", Status.REPLACED, 20, 50, "replaced by #3"),
            _entry(3, "lab", "colors=blue", t=60)]
    facts = FactSource(lambda wp: hist if wp == "lab" else [], lambda: 100.0).facts("lab")
    assert [(f.status, f.colours, f.n, f.ref) for f in facts] == [
        (VERIFIED, ("blue",), 1, "#3"), (REPLACED, ("red",), 2, "#2,#1")]
    assert facts[0].age_s == 40.0


def test_llm_planner_prompt_carries_plan_notes_and_history():
    from glove_ros.core.plan.agent_memory import Beliefs
    from glove_ros.core.plan.agent_policy import PlanContext, PlanOption
    from glove_ros.core.plan.agent_types import Task, WorldMap

    wm = SimpleNamespace()
    llm = ScriptedLlm([{"rule": "2 note", "waypoint": "lab"}])
    hist = {"lab": [_entry(4, "lab", "colors=red", Status.SUPPRESSED, 5, 50, "dissonance")]}
    p = LlmPlanner(llm, history=lambda wp: hist.get(wp, []), now=lambda: 100.0)
    p.set_notes([SimpleNamespace(name="n", body="The red block is in the lab.",
                                 kind="semantic")])
    ctx = PlanContext(Task("red", id="t"), "hall", wm, Beliefs({}, {}),
                      (PlanOption("office", "unexplored", 1.0),
                       PlanOption("lab", "unexplored", 2.0)), frozenset(), frozenset(), 0)
    d = p.choose(ctx)
    assert d.goal == "lab" and d.source == "llm"
    user = llm.calls[0][0][-1]["content"]
    assert "suppressed as stale: dissonance [#4]" in user and "red block is in the lab" in user
    assert isinstance(WorldMap, type)


def test_answers_cite_trusted_and_explain_stale():
    es = [_entry(1, "lab", "colors=blue", Status.REPLACED, 10, 80, "replaced by newer looks"),
          _entry(2, "kitchen", "colors=blue,red", t=90),
          _entry(3, "office", "colors=blue", t=95),
          _entry(4, "hall", "blocked", action="navigate_to", arg="lab", t=20),
          _entry(5, "lab", "reached", action="navigate_to", arg="hall", t=97),
          _entry(6, "hall", "blocked", Status.SUPPRESSED, 5, 96, "stale negative",
                 action="navigate_to", arg="lab")]
    a = answers.last_seen("blue", es, 100.0)
    assert a.value == "office" and a.cited == (3,) and "#3" in a.text
    assert len(a.explain) == 1 and a.explain[0].startswith("#1 ") and "replaced" in a.explain[0]
    assert answers.last_seen("green", es, 100.0).value == ""
    c = answers.corridor_status("lab", "hall", es, 100.0)
    assert c.value == "open" and c.cited == (5, 4) and "stale negative" in c.explain[0]
    assert answers.corridor_status("lab", "office", es, 100.0).value == "unknown"
    ch = answers.changes_since(85.0, es, 100.0)
    assert ch.value == "1" and set(ch.cited) == {2, 3, 5}  # #1 was replaced before 85
    assert "kitchen" in ch.text and any("#6" in x for x in ch.explain)
    # the span the person asked for (wall clock) is what the answer names, not node time
    asked = answers.changes_since(85.0, es, 100.0, asked_s=300.0)
    assert asked.text.startswith("Since 5 min") and " ago:" in asked.text
    assert asked.value == ch.value and asked.cited == ch.cited


def test_harness_scores_right_and_wrong_models():
    rng = random.Random(5)
    cases = [bench.waypoint_case(rng, k) for k in bench.WAYPOINT_KINDS for _ in range(2)]
    assert {c.kind for c in cases} == set(bench.WAYPOINT_KINDS)
    answers_ = iter(c.answer for c in cases)

    def right(m, schema):
        ans = next(answers_)
        rule = next(b["properties"]["rule"]["enum"][0] for b in schema["anyOf"]
                    if ans in b["properties"]["waypoint"]["enum"])
        return {"rule": rule, "waypoint": ans}

    good = ScriptedLlm(default=right)
    st = bench.run_waypoint(good, cases, 20.0)
    assert st.summary()["accuracy"] == 1.0 and st.summary()["valid_rate"] == 1.0
    first = ScriptedLlm(default=lambda m, s: {  # the last branch's farthest option
        k: s["anyOf"][-1]["properties"][k]["enum"][-1] for k in ("rule", "waypoint")})
    s2 = bench.run_waypoint(first, cases, 20.0).summary()
    assert s2["accuracy"] < 0.8 and s2["fallback_rate"] == 0.0
    garbage = bench.run_waypoint(ScriptedLlm(default="nope"), cases[:3], 20.0).summary()
    assert garbage["valid_rate"] == 0.0 and garbage["fallback_rate"] == 1.0


def test_harness_parse_job_and_unknown_job():
    rng = random.Random(1)
    cases = [bench.parse_case(rng, i) for i in ("find", "corridor_status", "changes")]
    it = iter(cases)

    def reply(m, s):
        c = next(it)
        return {"intent": c.intent, "colour": c.colour, "waypoint": c.waypoint,
                "waypoint2": c.waypoint2, "since_hours": 0}

    assert bench.run_parse(ScriptedLlm(default=reply), cases, 20.0).summary()["accuracy"] == 1.0
    with pytest.raises(ValueError, match="unknown job"):
        bench.run(ScriptedLlm(), ["dance"])


def test_harness_reflect_job_scores_right_and_garbage_reflections():
    """The reflection job runs the real LlmUpdater on generated episodes (a block moved, or
    a new fact): a reply that writes the block at its new place is right, garbage is a
    fallback and memory is judged unchanged."""
    cases = bench._reflect_cases(random.Random(1002), 4)
    assert {c[-1] for c in cases} == {"moved", "new_fact"}
    it = iter(cases)

    def right(m, s):
        _entries, _outcome, colour, new, old, _kind = next(it)
        return {"edits": [{"op": "edit" if old else "add", "kind": "semantic",
                           "name": f"block_{colour}", "body": f"The {colour} block is at {new}."}]}

    good = bench.run_reflect(ScriptedLlm(default=right), cases, 20.0).summary()
    assert good["accuracy"] == 1.0 and good["valid_rate"] == 1.0
    bad = bench.run_reflect(ScriptedLlm(default="not json {"), cases, 20.0).summary()
    assert bad["accuracy"] == 0.0 and bad["fallback_rate"] == 1.0


def test_harness_consolidate_job_needs_the_new_place_and_its_episode():
    cases = bench._consolidate_cases(random.Random(1003), 3)
    for _store, region, ws, _colour, _wp, ep in cases:
        assert ep in region.episodes and ws.synthesized  # journaled, one fact already written
    picks = iter(cases)

    def right(m, s):
        _s, _region, _ws, colour, wp, ep = next(picks)
        return {"tool": "synthesize", "args": {"kind": "semantic", "name": f"{colour}_block",
                                               "body": f"The {colour} block is at {wp}.",
                                               "sources": [ep]}}

    assert bench.run_consolidate(ScriptedLlm(default=right), cases, 20.0).summary()[
        "accuracy"] == 1.0
    stale = iter(cases)

    def old_place(m, s):  # valid, but writes the block where it no longer is
        _s, region, _ws, colour, wp, _ep = next(stale)
        old = next(ep for ep in region.episodes if ep.endswith("a"))
        place = next(p for p in bench.PLACES if p != wp and p in str(region.entries))
        return {"tool": "synthesize", "args": {"kind": "semantic", "name": f"{colour}_block",
                                               "body": f"The {colour} block is at {place}.",
                                               "sources": [old]}}

    wrong = bench.run_consolidate(ScriptedLlm(default=old_place), cases, 20.0).summary()
    assert wrong["accuracy"] == 0.0 and wrong["valid_rate"] == 1.0
    for store, *_ in cases:
        store.close()


def test_note_verdict_and_one_option_per_rule():
    """An option a note places the block at is marked NOTE (rule 2 in the verdict); a note
    with a negation, or naming two options, places nothing; each rule's grammar branch
    writes the one option the rule prescribes (nearest of its verdict; first note)."""
    from glove_ros.core.llm.prompts import decision_schema, placed_by_notes

    opts = [OptionView("lab", 1.0), OptionView("store", 3.0), OptionView("garage", 5.0),
            OptionView("office", 2.0, (Fact(("blue",), VERIFIED, 60, 1),))]
    notes = [Note("a", "The red block is not in the lab."),
             Note("b", "The red block was in the lab or the store."),
             Note("c", "The red block is usually in the garage."),
             Note("d", "Last time the red block turned up at store.")]
    assert placed_by_notes("red", opts, notes) == ["garage", "store"]
    assert reference_choice("red", opts, notes) == "garage"
    user = decision_messages("red", "hall", opts, notes)[-1]["content"]
    line = {ln.split()[1]: ln for ln in user.splitlines() if ln.startswith("- ")}
    assert "NOTE" in line["garage"] and "NOTE" in line["store"]
    assert "UNKNOWN" in line["lab"] and "NOTE (" not in line["lab"]
    branches = {b["properties"]["rule"]["enum"][0]: b["properties"]["waypoint"]["enum"]
                for b in decision_schema("red", opts, notes)["anyOf"]}
    assert branches == {"2 note": ["garage"], "3 UNKNOWN": ["lab"], "4 NOT HERE": ["office"]}
