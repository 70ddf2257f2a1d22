"""Janus benchmark: one arm on one world and seed.

:class:`ArmRunner` is the JetRover core loop plus the plan-memory updater and gate and
the held-out questions; the updater is :class:`~glove_ros.benchmarks._janus_kinds.NoisyUpdater`
(seeded harmful edits, each candidate labelled with its error kinds). Separate from the
scenario loader and from the aggregation over runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from glove_ros.benchmarks._janus_kinds import ExperienceTouch, NoisyUpdater
from glove_ros.benchmarks._janus_scenario import (
    ERROR_KINDS,
    HELDOUT_KINDS,
    REHEARSED_HELDOUT,
    UNREHEARSED_HELDOUT,
    Arm,
    Scenario,
)
from glove_ros.benchmarks._jetrover_config import BenchConfig
from glove_ros.benchmarks._jetrover_runner import ModeRunner
from glove_ros.core.memory.experience import Transition
from glove_ros.core.plan.agent_memory import Beliefs, StoreMemoryView
from glove_ros.core.plan.agent_policy import GreedyPlanner, PlanContext, rank_options
from glove_ros.core.plan.agent_types import Task, WorldMap
from glove_ros.core.plan.janus import EvidenceTrigger, JanusGate, Verdict, make_trigger
from glove_ros.core.plan.plan_entries import PlanEntry, apply_edits
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_planner import (
    ExperienceRisk,
    ExperienceTruth,
    PlanAwarePlanner,
    PlanGatePipeline,
    RehearsalContext,
    SimulatorTruth,
    decide,
    make_rehearsal_scorer,
    outcome_from_transitions,
)
from glove_ros.core.plan.updater import (
    LlmUpdater,
    RuleUpdater,
    RuleUpdaterConfig,
    blocked_name,
)
from glove_ros.core.world.sim import colors_signature
from glove_ros.core.world.worldfile import World, edge_key

__all__ = [
    "HELDOUT_AGGREGATES",
    "KIND_COUNTERS",
    "ArmRunner",
    "NoisyUpdater",
    "by_kind",
    "split_starts",
]


# --------------------------------------------------------------------------- one arm


def split_starts(world: World, fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(task start waypoints, held-out start waypoints): a seeded split of the waypoints,
    at least one in each."""
    ids = sorted(world.waypoint_ids)
    order = [ids[i] for i in np.random.default_rng([seed, 17]).permutation(len(ids))]
    k = min(len(ids) - 1, max(1, int(round(fraction * len(ids)))))
    return sorted(order[k:]), sorted(order[:k])


class ArmRunner(ModeRunner):
    """One arm, one world, one seed: the JetRover core loop (async GLOVE; the planner reads
    both memories) plus updater and gate, and the held-out questions."""

    def __init__(self, world: World, scenario: Scenario, arm: Arm, seed: int,
                 embedder: Any, llm: Any = None, spec: str | None = None,
                 only_kind: str | None = None) -> None:
        if only_kind is not None and only_kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {only_kind!r}; kinds: "
                             f"{', '.join(ERROR_KINDS)}")
        self.scenario = scenario
        self.arm = arm
        self.plan_planner = PlanAwarePlanner(GreedyPlanner())
        cfg = BenchConfig(episodes=scenario.episodes, seed=seed, max_steps=scenario.max_steps,
                          look_frames=1, frame_size=(320, 240), task_start="random",
                          verifier=dict(scenario.verifier))
        super().__init__(world, "async", cfg, planner_factory=lambda: self.plan_planner)
        self.world_map = WorldMap.from_world(world)
        self.task_starts, self.heldout_starts = split_starts(
            world, scenario.heldout_fraction, seed)
        self.rehearsal = RehearsalContext(self.world_map)
        self.plan = PlanMemoryStore(":memory:", synchronous="NORMAL")
        if scenario.updater == "llm":
            if llm is None:
                raise ValueError("updater llm needs a loaded LLM")
            self.updater: Any = LlmUpdater(llm)
        else:
            rates = {} if arm.trigger == "clean" else scenario.error_rates
            if only_kind is not None:  # the same coin flips, the other kinds off
                rates = {only_kind: rates.get(only_kind, 0.0)}
            self.updater = NoisyUpdater(
                RuleUpdater(RuleUpdaterConfig(miss_threshold=scenario.miss_threshold)),
                self.world_map.waypoint_ids, rates=rates, colours=world.colors, seed=seed,
                edges=self.world_map.edges)
        if arm.scorer == "simulator":
            truth_fn: Any = SimulatorTruth(self.sim.state.colors_at)
        else:
            truth_fn = ExperienceTruth(StoreMemoryView(self.store), scenario.belief_threshold)
        self.scorer = make_rehearsal_scorer(self.plan, self.rehearsal, truth_fn)
        self.risk = ExperienceRisk(self.plan, self.world_map, StoreMemoryView(self.store),
                                   events=self.store,
                                   belief_threshold=scenario.belief_threshold)
        self.touch = ExperienceTouch(self.plan, self.world_map, StoreMemoryView(self.store))
        # labels only (never the trigger): could experience memory see the candidate, and
        # does the evidence check speak against it? Own instances, so the arm's trigger
        # state is untouched
        self._label_touch = ExperienceTouch(self.plan, self.world_map,
                                            StoreMemoryView(self.store))
        self._label_risk = ExperienceRisk(self.plan, self.world_map,
                                          StoreMemoryView(self.store), events=self.store,
                                          belief_threshold=scenario.belief_threshold)
        jcfg = replace(scenario.janus, seed=scenario.janus.seed + seed)
        spec = spec or ("never" if arm.trigger == "clean" else arm.trigger)
        if spec == "touches":
            trigger: Any = EvidenceTrigger(self.touch)
            trigger.name = "touches"
        else:
            trigger = make_trigger(spec, jcfg, risk=self.risk)
        self.gate = JanusGate(jcfg, embedder, self.scorer, store=self.plan, trigger=trigger)
        self.pipeline = PlanGatePipeline(self.plan, self.updater, self.gate)
        self._captured: list[Transition] = []
        self.rows: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.gate_wall_s = 0.0

    def _task_start(self, episode: int) -> str:
        """Tasks start only from the task start waypoints (the rest are held out)."""
        ids = self.task_starts
        return ids[int(np.random.default_rng([self.config.seed, 13, episode]).integers(len(ids)))]

    def look_signature(self) -> str:
        """Symbolic: the colours really at the waypoint; camera: rendered frames + OpenCV."""
        if self.scenario.perception == "camera":
            return super().look_signature()
        return colors_signature(self.sim.visible_colors())

    def record(self, t: Transition) -> None:
        """Remember the task's transitions (for the updater), then verify as usual."""
        self._captured.append(t)
        super().record(t)

    # ------------------------------------------------------------------ held-out questions

    def _first_goal(self, entries: Sequence[PlanEntry], beliefs: Any, start: str,
                    colour: str) -> str | None:
        avoid = frozenset(beliefs.blocked_edges)
        opts = rank_options(self.world_map, beliefs, start, colour, (start,), avoid)
        ctx = PlanContext(Task(colour, id="heldout"), start, self.world_map, beliefs, opts,
                          frozenset({start}), avoid, 0)
        return PlanAwarePlanner(GreedyPlanner(), entries).choose(ctx).goal

    def _route_open(self, a: str, b: str, avoid: frozenset[tuple[str, str]]) -> bool:
        if a == b:
            return True
        path = self.world.shortest_path(a, b, avoid_edges=avoid)
        return path is not None and not any(
            self.sim.state.is_blocked(x, y) for x, y in zip(path, path[1:], strict=False))

    def heldout_eval(self) -> dict[str, float]:
        """Accuracy on the held-out questions now (both memories; simulator truth)."""
        entries = self.plan.entries()
        beliefs = self.agent.beliefs()
        avoid = frozenset(beliefs.blocked_edges)
        colors_at = self.sim.state.colors_at
        dock = self.world.dock
        find, fetch, goto, corridor, cold = [], [], [], [], []
        cold_goto: list[bool] = []
        empty = Beliefs({}, {})
        lessons = {e.name for e in entries}
        # a new robot knows corridors only from plan memory's lessons
        cold_avoid = frozenset(edge.key for edge in self.world.edges
                               if blocked_name(*edge.key) in lessons)
        for s in self.heldout_starts:
            for c in self.world.colors:
                # a robot with empty experience memory (new on the site, or its store reset)
                # reading this plan memory: the same planner, experience silent
                goal = s if c in colors_at(s) else self._first_goal(entries, empty, s, c)
                cold.append(goal is not None and c in colors_at(goal))
            for c in self.world.colors:
                if c in colors_at(s):
                    goal: str | None = s
                else:
                    goal = self._first_goal(entries, beliefs, s, c)
                hit = goal is not None and c in colors_at(goal)
                find.append(hit)
                fetch.append(hit and self._route_open(goal or s, dock, avoid))
            for w in self.world.waypoint_ids:
                if w != s:
                    goto.append(self._route_open(s, w, avoid))
                    cold_goto.append(self._route_open(s, w, cold_avoid))
        cold_corridor = [(blocked_name(*edge.key) in lessons) == self.sim.state.is_blocked(
            *edge.key) for edge in self.world.edges]
        for edge in self.world.edges:
            a, b = edge.key
            k = edge_key(a, b)
            eb = beliefs.edges.get(k)
            if eb is not None and (eb.reached or eb.blocked):
                believed = k in beliefs.blocked_edges
            else:
                believed = blocked_name(a, b) in lessons
            corridor.append(believed == self.sim.state.is_blocked(a, b))

        def mean(xs: Sequence[bool]) -> float:
            return float(np.mean(xs)) if xs else 0.0

        out = {"find": mean(find), "fetch": mean(fetch), "goto": mean(goto),
               "corridor": mean(corridor), "cold_find": mean(cold),
               "cold_goto": mean(cold_goto), "cold_corridor": mean(cold_corridor)}
        out["all"] = float(np.mean([out[k] for k in HELDOUT_KINDS]))
        out["rehearsed"] = float(np.mean([out[k] for k in REHEARSED_HELDOUT]))
        out["unrehearsed"] = float(np.mean([out[k] for k in UNREHEARSED_HELDOUT]))
        return out

    # ------------------------------------------------------------------ episodes

    def plan_accuracy(self) -> float:
        """Share of colours whose rehearsed first goal (from the dock, plan memory alone)
        holds the block now."""
        entries = self.plan.entries()
        colours = self.world.colors
        hits = sum(c in self.sim.state.colors_at(decide(entries, c, self.rehearsal) or "")
                   for c in colours) if colours else 0
        return hits / len(colours) if colours else 0.0

    def run_episode(self, episode: int) -> Any:
        """One task, then the update through the gate (and held-out questions every
        ``eval_every`` tasks)."""
        self.plan_planner.set_entries(self.plan.entries())
        self._captured = []
        used = self.plan_planner.prior_used
        ep = super().run_episode(episode)
        first_hit = bool(ep.first_goal) and ep.color in self.sim.state.colors_at(ep.first_goal)
        outcome = outcome_from_transitions(
            f"ep{episode:03d}", f"find the {ep.color} block", ep.color, ep.success,
            self._captured, found_at=ep.found_at, reason=ep.reason)
        t0 = time.perf_counter()
        step = self.pipeline.process(outcome)
        self.gate_wall_s += time.perf_counter() - t0
        d = step.decision
        noisy = isinstance(self.updater, NoisyUpdater)
        injected = self.updater.injected.get(outcome.episode_id, "") if noisy else ""
        kinds = list(self.updater.injected_kinds.get(outcome.episode_id, ())) if noisy else []
        seen = against = error_seen = None
        if d is not None:
            cand = SimpleNamespace(base_version=d.base_version, version=d.candidate_version)
            seen = bool(self._label_touch(cand))
            against = bool(self._label_risk(cand))
            clean_edits = self.updater.clean_edits.get(outcome.episode_id) if kinds else None
            if kinds:
                # the injected error alone: the candidate against what the rule updater
                # itself proposed
                base = self.plan.entries(d.base_version)
                clean = apply_edits(base, clean_edits, source="rule") if clean_edits else base
                error_seen = bool(self._label_touch.between(
                    clean, self.plan.entries(d.candidate_version)))
        row = {
            "episode": episode, "phase": ep.phase, "color": ep.color, "success": ep.success,
            "steps": ep.steps, "first_goal": ep.first_goal, "first_goal_hit": first_hit,
            "prior_used": self.plan_planner.prior_used - used,
            "edits": list(step.edits), "injected": injected, "kinds": kinds,
            "experience_sees": seen, "evidence_against": against,
            "experience_sees_error": error_seen,
            "verdict": None if d is None else Verdict(d.verdict).name.lower(),
            "triggered": bool(d and d.triggered),
            "cosine": None if d is None or math.isnan(d.cosine) else round(d.cosine, 4),
            "score_old": None if d is None or math.isnan(d.score_old) else d.score_old,
            "score_new": None if d is None or math.isnan(d.score_new) else d.score_new,
            "active_version": self.plan.active_version,
            "plan_accuracy": round(self.plan_accuracy(), 4),
            "note": step.note[:160],
        }
        if (episode + 1) % self.scenario.eval_every == 0 or episode + 1 == self.episodes:
            h = self.heldout_eval()
            self.evals.append({"after_episode": episode, **h})
            row["heldout"] = {k: round(v, 4) for k, v in h.items()}
        self.rows.append(row)
        return ep

    def run_all(self) -> dict[str, Any]:
        """Every episode; the arm's per-run result."""
        t0 = time.perf_counter()
        try:
            for episode in range(self.episodes):
                self.run_episode(episode)
        finally:
            self.wall_s = time.perf_counter() - t0
            self.close()
            self.plan.close()
        return self.result()

    def result(self) -> dict[str, Any]:
        """Aggregates of this run."""
        rows = self.rows
        proposals = [r for r in rows if r["verdict"] is not None]
        harmful = [r for r in proposals if r["injected"]]
        clean = [r for r in proposals if not r["injected"]]
        later = [r for r in rows if r["episode"] >= self.episodes // 2]
        heldout = {k: round(float(np.mean([e[k] for e in self.evals])), 4) if self.evals
                   else 0.0 for k in HELDOUT_AGGREGATES}
        kinds = {k: sum(1 for r in harmful if k in r["kinds"]) for k in ERROR_KINDS}
        return {
            "phases": [_agg(p["name"], [r for r in rows if p["start"] <= r["episode"] < p["end"]])
                       for p in self.phases],
            "totals": _agg("total", rows),
            "later": _agg("later half", later),
            "heldout": heldout,
            "prior_used_per_task": round(sum(r["prior_used"] for r in rows) / max(1, len(rows)),
                                         4),
            "gate": {
                "proposals": len(proposals),
                "comparisons": int(self.gate.comparisons),
                "accepted_direct": sum(r["verdict"] == "accepted_direct" for r in proposals),
                "accepted_compared": sum(r["verdict"] == "accepted_compared" for r in proposals),
                "rejected": sum(r["verdict"] == "rejected" for r in proposals),
                "harmful_proposed": len(harmful),
                "harmful_deployed": sum(r["verdict"] != "rejected" for r in harmful),
                "harmful_compared": sum(r["triggered"] for r in harmful),
                "clean_compared": sum(r["triggered"] for r in clean),
                "clean_rejected": sum(r["verdict"] == "rejected" for r in clean),
                "rehearsal_decisions": int(self.scorer.decisions_made),
            },
            "harmful_by_kind": kinds,
            "by_kind": by_kind(proposals),
            "llm_calls": int(self.pipeline.llm_calls),
            "wall_s": round(self.wall_s, 3),
            "gate_wall_s": round(self.gate_wall_s, 3),
            "evals": self.evals,
            "episodes": rows,
        }


#: every held-out figure of a run: the question types and their averages
HELDOUT_AGGREGATES = (*HELDOUT_KINDS, "all", "rehearsed", "unrehearsed")

#: per-kind counters of :func:`by_kind`
KIND_COUNTERS = ("proposed", "deployed", "blocked", "compared", "experience_sees",
                 "experience_sees_error", "evidence_against")


def by_kind(proposals: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per error kind (and ``clean``: no injected error), over the candidates of a run:
    proposed, deployed, blocked (rejected), compared (the trigger fired), and how many of
    them experience memory held evidence about (``experience_sees``: anything the candidate
    changes; ``experience_sees_error``: what the injected error changes beyond the rule
    updater's own edits) or the evidence check spoke against (``evidence_against``). A
    candidate carrying two kinds counts in both."""
    out: dict[str, dict[str, int]] = {}
    for k in (*ERROR_KINDS, "clean"):
        rows = [r for r in proposals if (k in r["kinds"] if k != "clean" else not r["kinds"])]
        out[k] = {
            "proposed": len(rows),
            "deployed": sum(r["verdict"] != "rejected" for r in rows),
            "blocked": sum(r["verdict"] == "rejected" for r in rows),
            "compared": sum(bool(r["triggered"]) for r in rows),
            "experience_sees": sum(bool(r["experience_sees"]) for r in rows),
            "experience_sees_error": sum(bool(r["experience_sees_error"]) for r in rows),
            "evidence_against": sum(bool(r["evidence_against"]) for r in rows),
        }
    return out


def _agg(name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {
        "name": name, "episodes": n,
        "success_rate": round(sum(r["success"] for r in rows) / n, 4) if n else 0.0,
        "steps_per_task": round(sum(r["steps"] for r in rows) / n, 3) if n else 0.0,
        "first_goal_hit_rate": round(sum(r["first_goal_hit"] for r in rows) / n, 4) if n else 0.0,
        "plan_accuracy": round(sum(r["plan_accuracy"] for r in rows) / n, 4) if n else 0.0,
    }
