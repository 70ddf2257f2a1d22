"""Tests of glove_ros.core.plan.plan_planner: plan memory as a planning prior, rehearsal against
verified experience memory, task outcome -> updater input, and the gate pipeline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from glove_ros.core.llm.embedding import HashingEmbedder
from glove_ros.core.llm.runtime import ScriptedLlm
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.plan.agent import AgentConfig, TaskAgent
from glove_ros.core.plan.agent_memory import Beliefs, StoreMemoryView
from glove_ros.core.plan.agent_policy import GreedyPlanner, PlanContext, rank_options
from glove_ros.core.plan.agent_types import Finish, Look, NavigateTo, Task, WorldMap
from glove_ros.core.plan.janus import GateTask, JanusConfig, JanusGate, Verdict, make_trigger
from glove_ros.core.plan.plan_entries import Edit, PlanEntry
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_planner import (
    ExperienceRisk,
    ExperienceTruth,
    PlanAwarePlanner,
    PlanGatePipeline,
    RehearsalContext,
    SimulatorTruth,
    decide,
    gate_task,
    make_rehearsal_scorer,
    outcome_from_transitions,
    plan_prior,
    rollback_to_parent,
    task_colour,
    truth,
)
from glove_ros.core.plan.updater import EpisodeOutcome, LlmUpdater, Observation, RuleUpdater

#   a ---- b ---- c
#   |             |
#  dock --------- d        (a line of corridors; dock is the start)
WPS = {"dock": (0.0, 0.0, 0.0), "a": (0.0, 1.0, 0.0), "b": (1.0, 1.0, 0.0),
       "c": (2.0, 1.0, 0.0), "d": (2.0, 0.0, 0.0)}
EDGES = {("a", "dock"): 1.0, ("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "d"): 1.0,
         ("d", "dock"): 2.5}


@pytest.fixture
def wm():
    return WorldMap(WPS, EDGES, "dock")


@pytest.fixture
def exp():
    s = ExperienceStore(":memory:")
    yield s
    s.close()


@pytest.fixture
def plan():
    s = PlanMemoryStore(":memory:")
    yield s
    s.close()


def fact(colour, *wps, name=None):
    return PlanEntry("semantic", name or f"block_{colour}",
                     f"The {colour} block was seen at {' and '.join(wps)}.",
                     meta={"colour": colour, "waypoints": list(wps), "misses": {}}, source="rule")


def look(wp, *colours):
    return Transition(wp, "look", "colors=" + ",".join(sorted(colours)), robot_id="r",
                      episode_id="e")


def ctx_for(wm, colour, beliefs=None, start="dock", checked=("dock",)):
    b = beliefs or Beliefs({}, {})
    opts = rank_options(wm, b, start, colour, checked, ())
    return PlanContext(Task(colour, "t"), start, wm, b, opts, frozenset(checked), frozenset(), 0)


def snapshot(store):
    return ([(v.version, v.status) for v in store.versions()], store.active_version,
            store.text())


# ---------------------------------------------------------------------------- the prior


def test_prior_reads_rule_facts_and_failed_searches(wm):
    failed = PlanEntry("negative", "failed_red", "Searching for the red block failed; not "
                       "found at a, b.", meta={"goal": "red", "searched": ["a", "b"]})
    entries = [fact("red", "c"), fact("blue", "a"), failed]
    p = plan_prior(entries, "red", wm.waypoint_ids)
    assert p.score == {"c": 1.0, "a": -1.0, "b": -1.0}
    assert p.preferred() == ["c"] and p.avoided() == {"a", "b"}
    assert p.support["c"] == ("block_red",)
    # structured facts about another colour say nothing about red
    assert plan_prior([fact("blue", "a")], "red", wm.waypoint_ids).empty
    # unknown waypoints in meta are ignored
    assert plan_prior([fact("red", "nowhere")], "red", wm.waypoint_ids).empty


def test_prior_reads_free_text_clause_by_clause(wm):
    notes = [
        PlanEntry("semantic", "n1", "The red block is at c and d, not at a."),
        PlanEntry("negative", "n2", "Never search b for the green block."),
        PlanEntry("semantic", "n3", "Red and blue swapped: blue at a."),
        PlanEntry("procedure", "n4", "Drive dock -> a -> b carefully."),  # no colour
    ]
    red = plan_prior(notes, "red", wm.waypoint_ids)
    assert red.score == {"c": 1.0, "d": 1.0, "a": -1.0}
    assert plan_prior(notes, "green", wm.waypoint_ids).score == {"b": -1.0}
    assert plan_prior(notes, "blue", wm.waypoint_ids).score == {"a": 1.0}
    with pytest.raises(ValueError):
        plan_prior(notes, "", wm.waypoint_ids)


def test_planner_keeps_experience_first(wm):
    # trusted experience believes red is at b: plan memory is not consulted
    beliefs = Beliefs.from_entries(
        [type("E", (), {"transition": look("b", "red"), "id": 1})()], [], wm)
    ctx = ctx_for(wm, "red", beliefs)
    assert ctx.options[0].kind == "believed"
    p = PlanAwarePlanner(GreedyPlanner(), [fact("red", "d")])
    assert p.choose(ctx).goal == "b"
    assert p.last_prior is None and p.prior_used == 0


def test_planner_promotes_unexplored_only_and_demotes_lessons(wm):
    ctx = ctx_for(wm, "red")
    assert ctx.options[0].waypoint == "a"  # nearest unexplored
    p = PlanAwarePlanner(entries=[fact("red", "c")])
    d = p.choose(ctx)
    assert d.goal == "c" and "plan memory (block_red)" in d.reason
    assert p.prior_used == 1 and p.name == "plan+greedy"
    # a waypoint where trusted looks saw something else is not overridden by a note
    beliefs = Beliefs.from_entries(
        [type("E", (), {"transition": look("c", "blue"), "id": 1})()], [], wm)
    assert PlanAwarePlanner(entries=[fact("red", "c")]).choose(
        ctx_for(wm, "red", beliefs)).goal == "a"
    # a failed search demotes a and b to the end
    failed = PlanEntry("negative", "failed_red", "x", meta={"goal": "red",
                                                            "searched": ["a", "b"]})
    new_ctx, _ = PlanAwarePlanner(entries=[failed]).reorder(ctx)
    assert [o.waypoint for o in new_ctx.options][-2:] == ["a", "b"]
    # silent plan memory: the base decision unchanged
    assert PlanAwarePlanner(entries=[]).choose(ctx).goal == "a"
    with pytest.raises(ValueError):
        PlanAwarePlanner(entries=["not an entry"])


def test_agent_with_plan_memory_goes_to_the_fact_first(wm):
    class Empty:
        def trusted(self, state_key=None, action=None):
            return []

    planner = PlanAwarePlanner(entries=[fact("red", "d")])
    agent = TaskAgent(wm, planner, Empty(), config=AgentConfig(max_steps=10))
    agent.start(Task("red", "t1"), at_waypoint="dock")
    truth_at = {"d": "colors=red"}
    moves = []
    while True:
        a = agent.next_action()
        if isinstance(a, Finish):
            break
        if isinstance(a, Look):
            agent.on_look(truth_at.get(a.waypoint, "colors="))
        elif isinstance(a, NavigateTo):
            moves.append(a.waypoint)
            agent.on_navigation("reached", a.waypoint)
    assert a.success and moves == ["d"] and agent.report.first_goal == "d"


# ---------------------------------------------------------------------------- rehearsal


def test_decide_rehearses_plan_memory_alone(wm):
    ctx = RehearsalContext(wm)
    assert decide([fact("red", "c")], GateTask("find:red", "find the red block",
                                               {"goal": "red"}), ctx) == "c"
    assert decide([], "red", ctx) == "a"  # nothing known: nearest
    assert decide([fact("red", "dock")], "red", ctx) == "dock"  # look where it stands
    assert decide([fact("red", "c")], "red", RehearsalContext(wm, start="c")) == "c"
    with pytest.raises(ValueError):
        decide([], "red", RehearsalContext(wm, start="mars"))
    with pytest.raises(ValueError):
        task_colour(GateTask("t", "do something"))


def test_truth_against_trusted_looks(exp):
    view = StoreMemoryView(exp)
    assert truth("red", "b", view) is None  # never looked there
    assert truth("red", None, view) is None
    ids = [exp.record(look("b", "red")) for _ in range(2)]
    exp.record(look("c", "blue"))
    assert truth("red", "b", view) == 1.0
    assert truth("red", "c", view) == 0.0
    exp.record(look("b", "blue"))  # mixed: 2 of 3 saw red -> still believed
    assert truth("red", "b", view) == 1.0
    exp.suppress(ids, "drift")  # GLOVE suppressed the stale looks
    assert truth("red", "b", view) == 0.0
    t = ExperienceTruth(view, belief_threshold=1.0)
    assert t(GateTask("find:blue", "find the blue block", {"goal": "blue"}), "b") == 1.0
    with pytest.raises(ValueError):
        ExperienceTruth(view, belief_threshold=0.0)
    sim = SimulatorTruth(lambda w: ("red",) if w == "b" else ())
    assert sim(gate_task("red"), "b") == 1.0 and sim(gate_task("red"), "c") == 0.0
    assert sim(gate_task("red"), None) is None


def make_gate(plan, wm, exp, trigger="always", warmup=0, **cfg):
    scorer = make_rehearsal_scorer(plan, RehearsalContext(wm),
                                   ExperienceTruth(StoreMemoryView(exp)))
    config = JanusConfig(warmup=warmup, **cfg)
    gate = JanusGate(config, HashingEmbedder(), scorer, store=plan,
                     trigger=make_trigger(trigger, config))
    return gate, scorer


def test_gate_rejects_a_wrong_fact_and_keeps_a_right_one(plan, wm, exp):
    for _ in range(2):
        exp.record(look("c", "red"))
        exp.record(look("a", "blue"))
        exp.record(look("b"))  # looked at b: nothing there
    gate, scorer = make_gate(plan, wm, exp)
    for c in ("red", "blue"):
        gate.observe_task(gate_task(c), 1.0)
    # a right fact beats the empty memory (which sends the robot to a: wrong for red)
    good = plan.propose([Edit.add("semantic", "block_red", "The red block was seen at c.",
                                  meta={"colour": "red", "waypoints": ["c"]})], source="rule")
    d = gate.propose(good)
    assert d.verdict == Verdict.ACCEPTED_COMPARED and plan.active_version == good.version
    # a hallucinated move of the red block to b (never seen there) is rejected
    bad = plan.propose([Edit.change("block_red", "The red block was seen at b.",
                                    meta={"colour": "red", "waypoints": ["b"]})], source="rule")
    d = gate.propose(bad)
    assert d.verdict == Verdict.REJECTED and plan.active_version == good.version
    assert plan.version_info(bad.version).status == "rejected"
    assert scorer.decisions_made >= 4 and d.score_old > d.score_new


def test_experience_risk_flags_updates_that_what_the_robot_knows_contradicts(plan, wm, exp):
    for _ in range(2):
        exp.record(look("c", "red"))
        exp.record(look("a", "blue"))
    base = plan.apply([Edit.add("semantic", "block_red", "The red block was seen at c.",
                                meta={"colour": "red", "waypoints": ["c"]})], source="rule")
    assert base
    risk = ExperienceRisk(plan, wm, StoreMemoryView(exp), events=exp)

    def cand(*edits):
        return plan.propose(list(edits), source="rule")

    # agrees with trusted experience, or about a waypoint it knows nothing of: no risk
    assert risk(cand(Edit.add("semantic", "block_blue", "The blue block was seen at a.",
                              meta={"colour": "blue", "waypoints": ["a"]}))) == ""
    assert risk(cand(Edit.add("semantic", "block_green", "The green block was seen at d.",
                              meta={"colour": "green", "waypoints": ["d"]}))) == ""
    # wrong place: trusted looks at a saw blue
    why = risk(cand(Edit.change("block_red", "The red block was seen at a.",
                                meta={"colour": "red", "waypoints": ["a"]})))
    assert "places red at a" in why and "drops red at c" in why
    # a forgotten fact trusted looks confirm
    assert "drops red at c" in risk(cand(Edit.remove("block_red", "forgot")))
    # an over-generalised negative lesson cancels the confirmed fact at c
    assert "drops red at c" in risk(cand(Edit.add(
        "negative", "never_red", "The red block is never at c or b.")))
    # the verifier found looks at c dissonant: any update about c is risky
    ids = [e.id for e in StoreMemoryView(exp).trusted(state_key="c", action="look")]
    exp.suppress(ids, "drift")
    exp.add_pending("c", "look", "", ids)
    assert "c/look recently dissonant" in risk(cand(Edit.change(
        "block_red", "The red block was seen at b.", meta={"colour": "red", "waypoints": ["b"]})))
    assert ("c", "look") in risk.dissonant() and risk.checks == 6
    # re-verified since: the new trusted look at c saw blue. The same move of red away
    # from c now says what experience says (no risk: deployed unjudged); putting green at
    # c is still risky while c is recently dissonant
    exp.record(look("c", "blue"))
    assert ("c", "look") in risk.dissonant()
    assert risk(cand(Edit.change("block_red", "The red block was seen at b.",
                                 meta={"colour": "red", "waypoints": ["b"]}))) == ""
    assert "green at c: c/look recently dissonant" in risk(cand(Edit.add(
        "semantic", "block_green", "The green block was seen at c.",
        meta={"colour": "green", "waypoints": ["c"]})))


# ---------------------------------------------------------------------------- outcomes


def test_outcome_from_transitions():
    ts = [look("dock"), Transition("dock", "navigate_to", "reached", "a"),
          look("a", "blue"), Transition("a", "navigate_to", "blocked", "b"),
          Transition("a", "navigate_to", "timeout", "b"),  # not a world fact
          Transition("a", "wave", "ok")]
    o = outcome_from_transitions("ep1", "", "Red", False, ts, [5, 6, 0, 8],
                                 reason="step_limit")
    assert o.goal == "red" and o.task == "find the red block" and o.failure_reason == "step_limit"
    assert [(x.waypoint, x.colours, x.transition_id) for x in o.observations] == [
        ("dock", (), 5), ("a", ("blue",), None)]
    assert [(x.source, x.target, x.blocked) for x in o.traversals] == [
        ("dock", "a", False), ("a", "b", True)]
    assert o.transition_ids == (5, 6, 8)
    ok = outcome_from_transitions("ep2", "find it", "red", True, [look("c", "red")],
                                  found_at="c", reason="found")
    assert ok.success and ok.reported_waypoint == "c" and ok.failure_reason == ""
    for bad in (
        lambda: outcome_from_transitions("", "t", "red", True, []),
        lambda: outcome_from_transitions("e", "t", "red", True, [Transition("a", "look", "x")]),
        lambda: outcome_from_transitions("e", "t", "red", True,
                                         [Transition("a", "navigate_to", "reached")]),
        lambda: outcome_from_transitions("e", "t", "red", True, [], [1]),
    ):
        with pytest.raises(ValueError):
            bad()
    assert gate_task("") is None and gate_task("Red").task_id == "find:red"


# ---------------------------------------------------------------------------- pipeline


def episode(eid, goal, *obs, success=True):
    return EpisodeOutcome(eid, f"find the {goal} block", goal, success, None,
                          tuple(Observation(w, tuple(c)) for w, c in obs))


def test_pipeline_rule_updater_warmup_then_rehearsed(plan, wm, exp):
    gate, _ = make_gate(plan, wm, exp, trigger="momentum", warmup=1, tau=1.0)
    pipe = PlanGatePipeline(plan, RuleUpdater(), gate)
    exp.record(look("c", "red"))
    s1 = pipe.process(episode("e1", "red", ("c", ["red"])))
    assert s1.decision.verdict == Verdict.ACCEPTED_DIRECT and s1.deployed
    assert s1.edits == ("add block_red",) and s1.llm_calls == 0
    # nothing new: no candidate, no decision, memory unchanged
    before = snapshot(plan)
    s2 = pipe.process(episode("e2", "red", ("c", ["red"])))
    assert s2.decision is None and "changes nothing" in s2.note and snapshot(plan) == before
    # an episode that (wrongly) saw red at b, which verified memory contradicts
    exp.record(look("b", "blue"))
    exp.record(look("b", "blue"))
    s3 = pipe.process(episode("e3", "red", ("b", ["red"])))
    assert s3.decision.triggered and s3.decision.verdict == Verdict.REJECTED
    assert plan.entry("block_red").meta["waypoints"] == ["c"]
    with pytest.raises(ValueError):
        pipe.process(EpisodeOutcome("", "t"))
    with pytest.raises(ValueError):
        PlanGatePipeline(PlanMemoryStore(":memory:"), RuleUpdater(), gate)


def test_pipeline_llm_garbage_leaves_memory_unchanged(plan, wm, exp):
    gate, _ = make_gate(plan, wm, exp, trigger="never")
    llm = ScriptedLlm(["not json {", {"edits": [{"op": "remove", "kind": "semantic",
                                                 "name": "ghost", "body": "gone"}]}])
    pipe = PlanGatePipeline(plan, LlmUpdater(llm), gate)
    before = snapshot(plan)
    s = pipe.process(episode("e1", "red", ("c", ["red"])))
    assert s.decision is None and "unusable" in s.note and s.llm_calls == 1
    s = pipe.process(episode("e2", "red", ("c", ["red"])))  # valid JSON, useless edit
    assert s.decision is None and "memory unchanged" in s.note
    assert snapshot(plan) == before and pipe.llm_calls == 2

    class Boom:
        llm = object()
        last = None

        def propose(self, store, outcome):
            raise RuntimeError("llama.cpp died")

    s = PlanGatePipeline(plan, Boom(), gate).process(episode("e3", "red"))
    assert s.decision is None and "llama.cpp died" in s.note and snapshot(plan) == before
    # a valid reflection goes through the gate (never trigger: deployed)
    llm.push({"edits": [{"op": "add", "kind": "semantic", "name": "red",
                         "body": "The red block is at c."}]})
    s = pipe.process(episode("e4", "red", ("c", ["red"])))
    assert s.deployed and plan.entry("red").source == "llm"
    assert decide(plan.entries(), "red", RehearsalContext(wm)) == "c"


def test_rollback_to_parent(plan):
    with pytest.raises(ValueError):
        rollback_to_parent(plan)
    v2 = plan.apply([Edit.add("semantic", "x", "one")])
    c = plan.propose([Edit.add("semantic", "y", "two")])
    plan.reject(c, "bad")
    v4 = plan.apply([Edit.add("semantic", "z", "three")])
    assert plan.version_info(v4).parent == v2
    assert rollback_to_parent(plan) == v2 and plan.active_version == v2
    assert rollback_to_parent(plan) == 1 and plan.text() == ""
    assert plan.events()[-1].event == "rollback"


def test_planner_set_entries_and_passthrough(wm):
    class FakeLlmPlanner(GreedyPlanner):
        name = "llm"
        calls = 3
        fallbacks = {"llm output unusable": 1}

    p = PlanAwarePlanner(FakeLlmPlanner())
    assert p.calls == 3 and p.fallbacks == {"llm output unusable": 1}
    p.set_entries([fact("red", "d")])
    assert p.choose(ctx_for(wm, "red")).goal == "d"
    assert PlanAwarePlanner().fallbacks is None
    with pytest.raises(ValueError):
        PlanAwarePlanner(base=object())
    # re-ordering keeps every option
    ctx = ctx_for(wm, "red")
    new, _ = PlanAwarePlanner(entries=[fact("red", "d")]).reorder(ctx)
    assert sorted(o.waypoint for o in new.options) == sorted(o.waypoint for o in ctx.options)
    assert replace(ctx, options=new.options).options[0].waypoint == "d"


def test_pipeline_reproposes_when_another_writer_deployed_meanwhile(plan, wm, exp):
    gate, _ = make_gate(plan, wm, exp, trigger="never")

    class Racing(RuleUpdater):
        """Another writer (the fast writer) deploys right after the first proposal."""

        raced = False

        def propose(self, store, outcome):
            cand = super().propose(store, outcome)
            if not self.raced:
                self.raced = True
                store.apply([Edit.add("semantic", f"fast_{outcome.episode_id}",
                                      "written meanwhile")], source="fast_writer")
            return cand

    pipe = PlanGatePipeline(plan, Racing(), gate)
    s = pipe.process(episode("e1", "red", ("c", ["red"])))
    assert s.deployed and plan.entry("block_red") is not None
    assert plan.entry("fast_e1") is not None  # the other writer's version kept too
    assert [v.status for v in plan.versions()].count("rejected") == 1  # the stale one
    no_retry = PlanGatePipeline(plan, Racing(), gate, stale_retries=0)
    s = no_retry.process(episode("e2", "blue", ("a", ["blue"])))
    assert not s.deployed and "not deployed" in s.decision.reason
    with pytest.raises(ValueError):
        PlanGatePipeline(plan, RuleUpdater(), gate, stale_retries=-1)


def test_believed_places_nearest_first_or_latest_look_first(wm):
    from glove_ros.core.plan.agent_memory import LookBelief
    # memory believes the person is at a (1 m, seen at entry 12) and at c (3 m, seen at 14)
    b = Beliefs({"a": LookBelief("a", {"objects=person": 1}, 12),
                 "c": LookBelief("c", {"objects=person": 1}, 14)}, {})
    near = rank_options(wm, b, "dock", "person", ("dock",), ())
    latest = rank_options(wm, b, "dock", "person", ("dock",), (), believed_order="latest")
    assert [o.waypoint for o in near[:2]] == ["a", "c"]
    assert [o.waypoint for o in latest[:2]] == ["c", "a"]  # the last sighting first
    assert all(o.kind == "believed" for o in latest[:2])
    assert [o.waypoint for o in near[2:]] == [o.waypoint for o in latest[2:]]  # the rest alike
    with pytest.raises(ValueError, match="believed_order must be one of nearest, latest"):
        rank_options(wm, b, "dock", "person", ("dock",), (), believed_order="newest")
    with pytest.raises(ValueError, match="believed_order"):
        AgentConfig(believed_order="closest").validate()
