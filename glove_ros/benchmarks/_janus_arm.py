"""Janus benchmark: one arm on one world and seed, and the noisy updater it is fed by.

:class:`ArmRunner` is the JetRover core loop plus the plan-memory updater and gate and
the held-out questions; :class:`NoisyUpdater` injects the seeded harmful edits. Separate
from the scenario loader and from the aggregation over runs.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from glove_ros.benchmarks._janus_scenario import ERROR_KINDS, HELDOUT_KINDS, Arm, Scenario
from glove_ros.benchmarks._jetrover_config import BenchConfig
from glove_ros.benchmarks._jetrover_runner import ModeRunner
from glove_ros.core.memory.experience import Transition
from glove_ros.core.plan.agent_memory import Beliefs, StoreMemoryView
from glove_ros.core.plan.agent_policy import GreedyPlanner, PlanContext, rank_options
from glove_ros.core.plan.agent_types import Task, WorldMap
from glove_ros.core.plan.janus import JanusGate, Verdict, make_trigger
from glove_ros.core.plan.plan_entries import Edit, PlanEntry, apply_edits
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
    EpisodeOutcome,
    LlmUpdater,
    RuleUpdater,
    RuleUpdaterConfig,
    UpdateProposal,
    blocked_name,
    fact_name,
)
from glove_ros.core.world.sim import colors_signature
from glove_ros.core.world.worldfile import World, edge_key

__all__ = [
    "ArmRunner",
    "NoisyUpdater",
    "split_starts",
]


# --------------------------------------------------------------------------- noisy updater


class NoisyUpdater:
    """The rule updater with seeded harmful edits of realistic kinds (a stand-in for an
    unreliable reflecting LLM).

    Per episode, from ``rng(seed, episode id)`` -- the same coin flips in every arm -- each
    kind fires with its rate (``rates``: kind -> probability, kinds in :data:`ERROR_KINDS`):

    * ``wrong_place``: the block seen in this episode (else the task's) written at another
      waypoint (misattribution);
    * ``stale_place``: that block written where an *earlier* episode saw it, when that
      differs from where it was seen last (a reflection reading an old trace after drift);
    * ``overgeneral``: every other known colour written at the waypoint where this block was
      seen ("blocks are kept there");
    * ``forget``: a block fact the episode did not touch removed.

    ``injected`` maps episode id -> what was injected (empty: a clean candidate).
    """

    def __init__(self, base: RuleUpdater, waypoints: Sequence[str], *,
                 rates: Mapping[str, float] | None = None, colours: Sequence[str] = (),
                 seed: int = 0) -> None:
        self.base = base
        self.waypoints = sorted(waypoints)
        if len(self.waypoints) < 2:
            raise ValueError("NoisyUpdater needs a map with at least two waypoints")
        self.rates = {k: 0.0 for k in ERROR_KINDS}
        for k, v in (rates or {}).items():
            if k not in self.rates:
                raise ValueError(f"unknown error kind {k!r}; kinds: {', '.join(ERROR_KINDS)}")
            self.rates[k] = float(v)
        self.colours = sorted(set(colours))
        self.seed = int(seed)
        self.injected: dict[str, str] = {}
        self.sightings: dict[str, list[str]] = {}  # colour -> waypoints, in episode order
        self.last: UpdateProposal | None = None

    def _fact(self, colour: str, wp: str, existing: Mapping[str, PlanEntry], why: str) -> Edit:
        name = fact_name(colour)
        return Edit("edit" if name in existing else "add", name, "semantic",
                    f"The {colour} block was seen at {wp}.",
                    meta={"colour": colour, "waypoints": [wp], "misses": {}}, reason=why)

    def propose_edits(self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
                      ) -> UpdateProposal:
        """The rule updater's edits, possibly corrupted (pure apart from ``injected`` and
        the sighting history)."""
        prop = self.base.propose_edits(entries, outcome)
        rng = np.random.default_rng([self.seed, zlib.crc32(outcome.episode_id.encode())])
        draws = {k: (float(rng.random()), float(rng.random())) for k in ERROR_KINDS}
        edits = {e.name: e for e in prop.edits}
        existing = {e.name: e for e in entries}
        history = {c: list(w) for c, w in self.sightings.items()}
        seen = [(o.waypoint, c) for o in outcome.observations for c in o.colours]
        for wp, c in seen:
            self.sightings.setdefault(c, []).append(wp)
        if seen:
            true_wp, colour = seen[-1]
        elif outcome.goal:
            colour = outcome.goal
            e = existing.get(fact_name(colour))
            wps = list((e.meta or {}).get("waypoints", [])) if e else []
            true_wp = wps[0] if wps else ""
        else:
            colour, true_wp = "", ""
        why = f"reflection on episode {outcome.episode_id}"
        notes = []
        r, pick = draws["wrong_place"]
        if colour and r < self.rates["wrong_place"]:
            others = [w for w in self.waypoints if w != true_wp]
            wrong = others[int(pick * len(others)) % len(others)]
            edits[fact_name(colour)] = self._fact(colour, wrong, existing, why)
            notes.append(f"wrong place: {colour} at {wrong}")
        r, pick = draws["stale_place"]
        if colour and r < self.rates["stale_place"] and not notes:
            old = [w for w in history.get(colour, []) if w != true_wp]
            if old:
                stale = old[-1]
                edits[fact_name(colour)] = self._fact(colour, stale, existing, why)
                notes.append(f"stale place: {colour} at {stale}")
        r, pick = draws["overgeneral"]
        if seen and r < self.rates["overgeneral"]:
            others = [c for c in self.colours if c != colour]
            for c in others:
                edits[fact_name(c)] = self._fact(c, true_wp, existing, why)
            if others:
                notes.append(f"over-generalised: {', '.join(others)} at {true_wp}")
        r, pick = draws["forget"]
        if r < self.rates["forget"]:
            keep = sorted(n for n, e in existing.items()
                          if e.kind == "semantic" and n.startswith("block_") and n not in edits)
            if keep:
                name = keep[int(pick * len(keep)) % len(keep)]
                edits[name] = Edit.remove(name, "reflection: no longer relevant")
                notes.append(f"forgot {name}")
        if not notes:
            return prop
        new = tuple(edits.values())
        try:
            apply_edits(list(entries), new, source="rule")
        except ValueError:
            return prop
        self.injected[outcome.episode_id] = "; ".join(notes)
        return UpdateProposal(new, prop.dropped, None, None)

    def propose(self, store: PlanMemoryStore, outcome: EpisodeOutcome) -> Any:
        """Store the (possibly corrupted) edit set as a candidate; ``None`` if empty."""
        outcome.validate()
        self.last = self.propose_edits(store.entries(), outcome)
        if not self.last.edits:
            return None
        try:
            return store.propose(list(self.last.edits), source="rule",
                                 reason=f"episode {outcome.episode_id}")
        except ValueError as exc:
            self.last = replace(self.last, error=f"store refused: {exc}")
            return None


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
                 embedder: Any, llm: Any = None, spec: str | None = None) -> None:
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
            self.updater = NoisyUpdater(
                RuleUpdater(RuleUpdaterConfig(miss_threshold=scenario.miss_threshold)),
                self.world_map.waypoint_ids, rates=rates, colours=world.colors, seed=seed)
        if arm.scorer == "simulator":
            truth_fn: Any = SimulatorTruth(self.sim.state.colors_at)
        else:
            truth_fn = ExperienceTruth(StoreMemoryView(self.store), scenario.belief_threshold)
        self.scorer = make_rehearsal_scorer(self.plan, self.rehearsal, truth_fn)
        self.risk = ExperienceRisk(self.plan, self.world_map, StoreMemoryView(self.store),
                                   events=self.store,
                                   belief_threshold=scenario.belief_threshold)
        jcfg = replace(scenario.janus, seed=scenario.janus.seed + seed)
        spec = spec or ("never" if arm.trigger == "clean" else arm.trigger)
        self.gate = JanusGate(jcfg, embedder, self.scorer, store=self.plan,
                              trigger=make_trigger(spec, jcfg, risk=self.risk))
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
        empty = Beliefs({}, {})
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
        lessons = {n for n in (e.name for e in entries)}
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
               "corridor": mean(corridor), "cold_find": mean(cold)}
        out["all"] = float(np.mean([out[k] for k in HELDOUT_KINDS]))
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
        injected = (self.updater.injected.get(outcome.episode_id, "")
                    if isinstance(self.updater, NoisyUpdater) else "")
        row = {
            "episode": episode, "phase": ep.phase, "color": ep.color, "success": ep.success,
            "steps": ep.steps, "first_goal": ep.first_goal, "first_goal_hit": first_hit,
            "prior_used": self.plan_planner.prior_used - used,
            "edits": list(step.edits), "injected": injected,
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
                   else 0.0 for k in (*HELDOUT_KINDS, "all")}
        kinds = {k: sum(1 for r in harmful if k.replace("_", " ") in r["injected"]
                        or (k == "overgeneral" and "over-generalised" in r["injected"])
                        or (k == "forget" and "forgot" in r["injected"]))
                 for k in ERROR_KINDS}
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
            "llm_calls": int(self.pipeline.llm_calls),
            "wall_s": round(self.wall_s, 3),
            "gate_wall_s": round(self.gate_wall_s, 3),
            "evals": self.evals,
            "episodes": rows,
        }


def _agg(name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {
        "name": name, "episodes": n,
        "success_rate": round(sum(r["success"] for r in rows) / n, 4) if n else 0.0,
        "steps_per_task": round(sum(r["steps"] for r in rows) / n, 3) if n else 0.0,
        "first_goal_hit_rate": round(sum(r["first_goal_hit"] for r in rows) / n, 4) if n else 0.0,
        "plan_accuracy": round(sum(r["plan_accuracy"] for r in rows) / n, 4) if n else 0.0,
    }
