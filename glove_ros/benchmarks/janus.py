"""Janus benchmark: plan-memory updates with and without the gate, on the JetRover core loop.

``glove-ros bench janus --scenario bench/scenarios/janus_maze.yaml``

A stream of "find the <colour> block" tasks runs in a world with drift (the JetRover core
loop of :mod:`glove_ros.benchmarks.jetrover` without DDS: simulator, perception,
experience memory with the GLOVE verifier, the task agent). After every task the same
updater proposes a plan-memory candidate and a gate decides; the arms differ only in the
gate's trigger:

  never          no gate: every candidate deployed (the plain updater)
  momentum       Janus: memory momentum trigger + hybrid evaluation set
  always         compare every update (after no warm-up)
  periodic:K     compare every K-th update
  random:P       compare with probability P

(an arm may also score with ``scorer: simulator``, the simulator's ground truth instead of
verified experience memory: an oracle that no robot has, to show what the robot's scorer
loses.)

What makes gating matter here -- and its honest limits:

* **The planner reads plan memory** (:class:`~glove_ros.core.plan_planner.PlanAwarePlanner`
  over the greedy planner). With ``planner_memory: plan`` (the default) it reads *only*
  plan memory -- experience memory is written and verified by GLOVE but not read for
  planning -- so task success measures the plan memory, the thing Janus protects, as in
  the paper where accuracy is a function of the memory. With ``planner_memory: both``
  trusted experience memory comes first and plan memory is a prior where it is silent;
  plan memory then matters much less and so does the gate.
* **Some proposed updates are harmful.** The default updater is the deterministic
  :class:`~glove_ros.core.updater.RuleUpdater` wrapped in :class:`NoisyUpdater`, which with
  seeded probabilities writes a wrong fact (the block seen in this episode put at another
  waypoint: the misattribution a small reflecting LLM makes) or drops a fact it should
  keep (the "overwrites useful knowledge" failure of the paper). The noise is drawn per
  episode from the seed, so every arm gets the same coin flips. ``--updater llm`` uses the
  bundled SmolLM2-135M GGUF through :class:`~glove_ros.core.updater.LlmUpdater` instead
  (no injected noise: its own mistakes are the harmful updates; slow on a CPU).
* **Drift makes correct updates look wrong for a while.** The gate scores rehearsed
  decisions against verified experience memory; after a swap, until GLOVE has seen
  ``p_th`` contradictions and suppressed the stale looks, the correcting update loses to
  the stale memory and is rejected; the next visit proposes it again.

Reported per arm (mean over ``seeds``): task success overall, per phase (phases split at
the world's drift events) and in the final phase; plan-memory accuracy (share of colours
whose rehearsed first goal from the dock holds the block, after each task); steps per task;
comparisons; candidates deployed / rejected; harmful candidates proposed / deployed and
clean candidates rejected (known from the injected noise); rehearsal decisions; LLM calls;
wall time (total and inside the gate). The paper's figures are written next to ours.

Scenario file (YAML; every key but ``name`` optional)::

    name: maze                     # results go to janus_<name>.json / .png
    description: "free text"
    world: jetrover_maze           # world file (relative to the scenario) or bundled name
    events: []                     # extra world events appended (world-file syntax)
    episodes: 60                   # tasks per run
    seeds: [0, 1, 2]               # task sequence / start / noise seeds; results averaged
    max_steps: 6                   # step limit per task (navigations + looks)
    task_start: random             # random | dock | stay
    perception: symbolic           # symbolic (ground-truth colours) | camera (OpenCV)
    planner_memory: plan           # plan | both (see above)
    verifier: {p_th: 2}            # VerifierConfig overrides (mode is async)
    belief_threshold: 0.5          # truth: share of trusted looks that must see the colour
    embedder: onnx                 # onnx (all-MiniLM-L6-v2 int8) | hashing
    updater:
      kind: rule                   # rule | llm
      wrong_fact_rate: 0.25        # P(a wrong fact is written), per task (rule only)
      forget_rate: 0.1             # P(a kept fact is dropped), per task (rule only)
      miss_threshold: 2            # rule updater
    janus: {beta: 0.9, tau: -0.1, warmup: 3, coverage_k: 8, boundary_max: 16,
            fresh_max: 16, seed: 0}
    arms:                          # trigger specs, or {label, trigger, scorer}
      - never
      - momentum
      - {label: momentum+oracle, trigger: momentum, scorer: simulator}
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.benchmarks import write_results
from glove_ros.benchmarks.jetrover import BenchConfig, ModeRunner, phase_plan
from glove_ros.core.agent import GreedyPlanner, WorldMap
from glove_ros.core.experience import Transition
from glove_ros.core.janus import JanusConfig, JanusGate, Verdict, make_trigger
from glove_ros.core.plan_memory import (
    Edit,
    PlanEntry,
    PlanMemoryStore,
    apply_edits,
)
from glove_ros.core.plan_planner import (
    ExperienceTruth,
    PlanAwarePlanner,
    PlanGatePipeline,
    RehearsalContext,
    SimulatorTruth,
    decide,
    make_rehearsal_scorer,
    outcome_from_transitions,
)
from glove_ros.core.sim import colors_signature
from glove_ros.core.updater import (
    EpisodeOutcome,
    LlmUpdater,
    RuleUpdater,
    RuleUpdaterConfig,
    UpdateProposal,
    fact_name,
)
from glove_ros.core.verifier import VerifierConfig
from glove_ros.core.world import World, load_world, resolve_world_path

__all__ = [
    "PAPER",
    "Arm",
    "Scenario",
    "NoisyUpdater",
    "ArmRunner",
    "load_scenario",
    "run_benchmark",
    "format_table",
    "write_plot",
    "result_stem",
    "add_arguments",
    "main",
]

DEFAULT_OUT = Path("bench/results")

#: The paper's figures (papers/janus.md, section 4), quoted next to ours.
PAPER: dict[str, Any] = {
    "source": "Janus (Chen et al., 2026), papers/janus.md section 4",
    "accuracy_gain_points": [2.7, 4.6],
    "examples": [
        {"backbone": "Qwen3-8B", "updater": "DC-RS", "without": 79.5, "with_janus": 83.2},
        {"backbone": "DeepSeek-V4-Flash", "updater": "ExpeL", "without": 79.6,
         "with_janus": 82.3},
    ],
    "trigger_ablation": "the momentum trigger beats random and periodic triggers and reaches "
                        "similar or better accuracy than always-compare with markedly fewer "
                        "comparisons",
    "setting": "six datasets (MATH500, GPQA, MMLU-Pro, HumanEval, APIBench, ...), LLM "
               "reasoning tasks; accuracy = average over the task stream",
}

PERCEPTIONS = ("symbolic", "camera")
PLANNER_MEMORIES = ("plan", "both")
SCORERS = ("experience", "simulator")
UPDATERS = ("rule", "llm")
EMBEDDERS = ("onnx", "hashing")


# --------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Arm:
    """One gate configuration: ``trigger`` spec (:func:`~glove_ros.core.janus.make_trigger`)
    and ``scorer`` (``experience``: rehearsal against verified experience memory, the
    robot's scorer; ``simulator``: against ground truth, an oracle)."""

    label: str
    trigger: str
    scorer: str = "experience"

    def validate(self, config: JanusConfig) -> Arm:
        """Raise ValueError for an unknown trigger or scorer."""
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("arm label must be a non-empty string")
        make_trigger(self.trigger, config)
        if self.scorer not in SCORERS:
            raise ValueError(f"arm {self.label!r}: scorer must be one of {SCORERS}, "
                             f"got {self.scorer!r}")
        return self


@dataclass(frozen=True)
class Scenario:
    """A Janus benchmark scenario (see the module docstring for the YAML keys)."""

    name: str
    world: str = "jetrover_maze"
    description: str = ""
    events: tuple[Mapping[str, Any], ...] = ()
    episodes: int = 60
    seeds: tuple[int, ...] = (0,)
    max_steps: int = 6
    task_start: str = "random"
    perception: str = "symbolic"
    planner_memory: str = "plan"
    verifier: Mapping[str, Any] = field(default_factory=dict)
    belief_threshold: float = 0.5
    embedder: str = "onnx"
    updater: str = "rule"
    wrong_fact_rate: float = 0.25
    forget_rate: float = 0.1
    miss_threshold: int = 2
    janus: JanusConfig = field(default_factory=JanusConfig)
    arms: tuple[Arm, ...] = (Arm("never", "never"), Arm("momentum", "momentum"),
                             Arm("always", "always"))
    source: str = ""

    def validate(self) -> Scenario:
        """Raise ValueError naming the bad key; return ``self``."""
        if not isinstance(self.name, str) or not self.name.strip() or "/" in self.name:
            raise ValueError("scenario name must be a non-empty string without '/'")
        for key, lo in (("episodes", 1), ("max_steps", 1), ("miss_threshold", 1)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{key} must be an int >= {lo}, got {v!r}")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                 for s in self.seeds):
            raise ValueError(f"seeds must be a non-empty list of ints >= 0, got {self.seeds!r}")
        for key, allowed in (("perception", PERCEPTIONS), ("planner_memory", PLANNER_MEMORIES),
                             ("embedder", EMBEDDERS), ("updater", UPDATERS),
                             ("task_start", ("random", "dock", "stay"))):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, got "
                                 f"{getattr(self, key)!r}")
        for key in ("wrong_fact_rate", "forget_rate"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"updater.{key} must be in [0, 1], got {v!r}")
        if not 0.0 < float(self.belief_threshold) <= 1.0:
            raise ValueError(f"belief_threshold must be in (0, 1], got {self.belief_threshold}")
        if "mode" in self.verifier:
            raise ValueError("verifier overrides must not set 'mode' (async is used)")
        VerifierConfig.from_dict({"mode": "async", **self.verifier})
        self.janus.validate()
        if not self.arms:
            raise ValueError("arms is empty: give at least one trigger")
        labels = [a.validate(self.janus).label for a in self.arms]
        if len(set(labels)) != len(labels):
            raise ValueError(f"arm labels must be unique, got {labels}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every setting."""
        return {
            "name": self.name, "description": self.description, "world": self.world,
            "events": [dict(e) for e in self.events], "episodes": self.episodes,
            "seeds": list(self.seeds), "max_steps": self.max_steps,
            "task_start": self.task_start, "perception": self.perception,
            "planner_memory": self.planner_memory, "verifier": dict(self.verifier),
            "belief_threshold": self.belief_threshold, "embedder": self.embedder,
            "updater": {"kind": self.updater, "wrong_fact_rate": self.wrong_fact_rate,
                        "forget_rate": self.forget_rate,
                        "miss_threshold": self.miss_threshold},
            "janus": {k: getattr(self.janus, k) for k in
                      ("beta", "tau", "warmup", "coverage_k", "boundary_max", "fresh_max",
                       "seed", "accept_ties")},
            "arms": [{"label": a.label, "trigger": a.trigger, "scorer": a.scorer}
                     for a in self.arms],
            "source": self.source,
        }

    def load_world(self) -> World:
        """The world with the scenario's extra ``events`` appended."""
        base = Path(self.source).parent if self.source else Path(".")
        candidate = base / self.world
        path = candidate if candidate.is_file() else resolve_world_path(self.world)
        world = load_world(path)
        if not self.events:
            return world
        data = world.to_dict()
        data["events"] = list(data["events"]) + [dict(e) for e in self.events]
        return World.from_dict(data, source=str(path))


_SCENARIO_KEYS = {"name", "description", "world", "events", "episodes", "seeds", "max_steps",
                  "task_start", "perception", "planner_memory", "verifier",
                  "belief_threshold", "embedder", "updater", "janus", "arms"}
_UPDATER_KEYS = {"kind", "wrong_fact_rate", "forget_rate", "miss_threshold"}
_JANUS_KEYS = {"beta", "tau", "warmup", "coverage_k", "boundary_max", "fresh_max", "seed",
               "accept_ties"}


def _arm(raw: Any, i: int) -> Arm:
    if isinstance(raw, str):
        return Arm(raw, raw)
    if isinstance(raw, Mapping):
        extra = set(raw) - {"label", "trigger", "scorer"}
        if extra or "trigger" not in raw:
            raise ValueError(f"arms[{i}]: give trigger (and optional label, scorer); "
                             f"unknown keys {sorted(extra)}")
        trigger = str(raw["trigger"])
        scorer = str(raw.get("scorer", "experience"))
        default = trigger if scorer == "experience" else f"{trigger}+{scorer}"
        return Arm(str(raw.get("label", default)), trigger, scorer)
    raise ValueError(f"arms[{i}] must be a trigger spec or a mapping, got {raw!r}")


def scenario_from_dict(data: Any, source: str = "") -> Scenario:
    """Build and validate a :class:`Scenario` from its YAML structure."""
    if not isinstance(data, Mapping):
        raise ValueError("a Janus scenario must be a YAML mapping")
    unknown = set(data) - _SCENARIO_KEYS
    if unknown:
        raise ValueError(f"unknown scenario keys {sorted(unknown)}; allowed: "
                         f"{sorted(_SCENARIO_KEYS)}")
    if "name" not in data:
        raise ValueError("scenario needs a name")
    upd = data.get("updater", {}) or {}
    jan = data.get("janus", {}) or {}
    if not isinstance(upd, Mapping) or set(upd) - _UPDATER_KEYS:
        raise ValueError(f"updater must be a mapping with keys {sorted(_UPDATER_KEYS)}")
    if not isinstance(jan, Mapping) or set(jan) - _JANUS_KEYS:
        raise ValueError(f"janus must be a mapping with keys {sorted(_JANUS_KEYS)}")
    events = data.get("events", []) or []
    if not isinstance(events, list) or not all(isinstance(e, Mapping) for e in events):
        raise ValueError("events must be a list of world events (mappings)")
    seeds = data.get("seeds", [0])
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    kw: dict[str, Any] = {}
    for key in ("description", "world", "episodes", "max_steps", "task_start", "perception",
                "planner_memory", "belief_threshold", "embedder"):
        if key in data:
            kw[key] = data[key]
    if "arms" in data:
        arms = data["arms"]
        if not isinstance(arms, list):
            raise ValueError("arms must be a list")
        kw["arms"] = tuple(_arm(a, i) for i, a in enumerate(arms))
    sc = Scenario(
        name=str(data["name"]), events=tuple(dict(e) for e in events),
        seeds=tuple(seeds), verifier=dict(data.get("verifier", {}) or {}),
        updater=str(upd.get("kind", "rule")),
        wrong_fact_rate=upd.get("wrong_fact_rate", Scenario.wrong_fact_rate),
        forget_rate=upd.get("forget_rate", Scenario.forget_rate),
        miss_threshold=upd.get("miss_threshold", Scenario.miss_threshold),
        janus=JanusConfig(**{k: jan[k] for k in jan}), source=source, **kw,
    )
    return sc.validate()


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (FileNotFoundError / ValueError)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"scenario file {p} not found (see bench/scenarios/janus_*.yaml)")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"scenario {p}: not valid YAML: {exc}") from exc
    return scenario_from_dict(data, source=str(p))


# --------------------------------------------------------------------------- noisy updater


class NoisyUpdater:
    """The rule updater with seeded harmful edits (a stand-in for an unreliable reflector).

    Per episode, from ``rng(seed, episode id)`` -- the same coin flips in every arm:
    with ``wrong_fact_rate`` the fact about a colour seen in this episode (else the task's
    colour) is written at a wrong waypoint; with ``forget_rate`` a block fact the episode
    did not touch is removed. ``injected`` maps episode id -> what was injected.
    """

    def __init__(self, base: RuleUpdater, waypoints: Sequence[str], *,
                 wrong_fact_rate: float = 0.0, forget_rate: float = 0.0, seed: int = 0) -> None:
        self.base = base
        self.waypoints = sorted(waypoints)
        if len(self.waypoints) < 2:
            raise ValueError("NoisyUpdater needs a map with at least two waypoints")
        self.wrong_fact_rate = float(wrong_fact_rate)
        self.forget_rate = float(forget_rate)
        self.seed = int(seed)
        self.injected: dict[str, str] = {}
        self.last: UpdateProposal | None = None

    def propose_edits(self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
                      ) -> UpdateProposal:
        """The rule updater's edits, possibly corrupted (pure apart from ``injected``)."""
        prop = self.base.propose_edits(entries, outcome)
        rng = np.random.default_rng([self.seed, zlib.crc32(outcome.episode_id.encode())])
        r_wrong, r_forget = float(rng.random()), float(rng.random())
        pick_wp, pick_fact = float(rng.random()), float(rng.random())
        edits = {e.name: e for e in prop.edits}
        existing = {e.name: e for e in entries}
        notes = []
        if r_wrong < self.wrong_fact_rate:
            seen = [(o.waypoint, c) for o in outcome.observations for c in o.colours]
            if seen:
                true_wp, colour = seen[-1]
            elif outcome.goal:
                colour = outcome.goal
                e = existing.get(fact_name(colour))
                wps = list((e.meta or {}).get("waypoints", [])) if e else []
                true_wp = wps[0] if wps else ""
            else:
                colour = ""
            if colour:
                others = [w for w in self.waypoints if w != true_wp]
                wrong = others[int(pick_wp * len(others)) % len(others)]
                name = fact_name(colour)
                body = f"The {colour} block was seen at {wrong}."
                meta = {"colour": colour, "waypoints": [wrong], "misses": {}}
                op = "edit" if name in existing else "add"
                edits[name] = Edit(op, name, "semantic", body, meta=meta,
                                   reason=f"reflection on episode {outcome.episode_id}")
                notes.append(f"wrong fact: {colour} at {wrong}")
        if r_forget < self.forget_rate:
            keep = sorted(n for n, e in existing.items()
                          if e.kind == "semantic" and n.startswith("block_") and n not in edits)
            if keep:
                name = keep[int(pick_fact * len(keep)) % len(keep)]
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


class _NoMemory:
    """A MemoryView with nothing in it (``planner_memory: plan``)."""

    def trusted(self, state_key: str | None = None, action: str | None = None) -> list[Any]:
        return []


class ArmRunner(ModeRunner):
    """One arm, one seed: the JetRover core loop (async GLOVE) plus updater and gate."""

    def __init__(self, world: World, scenario: Scenario, arm: Arm, seed: int,
                 embedder: Any, llm: Any = None) -> None:
        self.scenario = scenario
        self.arm = arm
        self.plan_planner = PlanAwarePlanner(GreedyPlanner())
        cfg = BenchConfig(episodes=scenario.episodes, seed=seed, max_steps=scenario.max_steps,
                          look_frames=1, frame_size=(320, 240), task_start=scenario.task_start,
                          verifier=dict(scenario.verifier))
        super().__init__(world, "async", cfg, planner_factory=lambda: self.plan_planner)
        if scenario.planner_memory == "plan":
            self.agent.memory = _NoMemory()
        self.world_map = WorldMap.from_world(world)
        self.rehearsal = RehearsalContext(self.world_map)
        self.plan = PlanMemoryStore(":memory:", synchronous="NORMAL")
        if scenario.updater == "llm":
            if llm is None:
                raise ValueError("updater llm needs a loaded LLM")
            self.updater: Any = LlmUpdater(llm)
        else:
            self.updater = NoisyUpdater(
                RuleUpdater(RuleUpdaterConfig(miss_threshold=scenario.miss_threshold)),
                self.world_map.waypoint_ids, wrong_fact_rate=scenario.wrong_fact_rate,
                forget_rate=scenario.forget_rate, seed=seed)
        if arm.scorer == "simulator":
            truth_fn: Any = SimulatorTruth(self.sim.state.colors_at)
        else:
            from glove_ros.core.agent import StoreMemoryView

            truth_fn = ExperienceTruth(StoreMemoryView(self.store), scenario.belief_threshold)
        self.scorer = make_rehearsal_scorer(self.plan, self.rehearsal, truth_fn)
        jcfg = replace(scenario.janus, seed=scenario.janus.seed + seed)
        self.gate = JanusGate(jcfg, embedder, self.scorer, store=self.plan,
                              trigger=make_trigger(arm.trigger, jcfg))
        self.pipeline = PlanGatePipeline(self.plan, self.updater, self.gate)
        self._captured: list[Transition] = []
        self.rows: list[dict[str, Any]] = []
        self.gate_wall_s = 0.0

    def look_signature(self) -> str:
        """Symbolic: the colours really at the waypoint; camera: rendered frames + OpenCV."""
        if self.scenario.perception == "camera":
            return super().look_signature()
        return colors_signature(self.sim.visible_colors())

    def record(self, t: Transition) -> None:
        """Remember the task's transitions (for the updater), then verify as usual."""
        self._captured.append(t)
        super().record(t)

    def plan_accuracy(self) -> float:
        """Share of colours whose rehearsed first goal (from the dock, plan memory alone)
        holds the block now."""
        entries = self.plan.entries()
        colours = self.world.colors
        hits = sum(c in self.sim.state.colors_at(decide(entries, c, self.rehearsal) or "")
                   for c in colours) if colours else 0
        return hits / len(colours) if colours else 0.0

    def run_episode(self, episode: int) -> Any:
        """One task, then the update through the gate."""
        self.plan_planner.set_entries(self.plan.entries())
        self._captured = []
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
        self.rows.append({
            "episode": episode, "phase": ep.phase, "color": ep.color, "success": ep.success,
            "steps": ep.steps, "first_goal": ep.first_goal, "first_goal_hit": first_hit,
            "edits": list(step.edits), "injected": injected,
            "verdict": None if d is None else Verdict(d.verdict).name.lower(),
            "triggered": bool(d and d.triggered),
            "cosine": None if d is None or math.isnan(d.cosine) else round(d.cosine, 4),
            "score_old": None if d is None or math.isnan(d.score_old) else d.score_old,
            "score_new": None if d is None or math.isnan(d.score_new) else d.score_new,
            "active_version": self.plan.active_version,
            "plan_accuracy": round(self.plan_accuracy(), 4),
            "note": step.note[:160],
        })
        return ep

    def run_all(self) -> dict[str, Any]:
        """Every episode; the arm's per-seed result."""
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
        return {
            "phases": [_agg(p["name"], [r for r in rows if p["start"] <= r["episode"] < p["end"]])
                       for p in self.phases],
            "totals": _agg("total", rows),
            "gate": {
                "proposals": len(proposals),
                "comparisons": int(self.gate.comparisons),
                "accepted_direct": sum(r["verdict"] == "accepted_direct" for r in proposals),
                "accepted_compared": sum(r["verdict"] == "accepted_compared" for r in proposals),
                "rejected": sum(r["verdict"] == "rejected" for r in proposals),
                "harmful_proposed": len(harmful),
                "harmful_deployed": sum(r["verdict"] != "rejected" for r in harmful),
                "clean_rejected": sum(r["verdict"] == "rejected" for r in clean),
                "rehearsal_decisions": int(self.scorer.decisions_made),
            },
            "llm_calls": int(self.pipeline.llm_calls),
            "wall_s": round(self.wall_s, 3),
            "gate_wall_s": round(self.gate_wall_s, 3),
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


# --------------------------------------------------------------------------- the benchmark


def _make_embedder(kind: str) -> Any:
    if kind == "onnx":
        from glove_ros.core.embedding import Embedder

        return Embedder().load()
    from glove_ros.core.embedding import HashingEmbedder

    return HashingEmbedder()


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def _merge(label: str, arm: Arm, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean over seeds of one arm's runs (and the min / max of the headline numbers)."""
    def mean_agg(aggs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        out = {"name": aggs[0]["name"], "episodes": aggs[0]["episodes"]}
        for k in ("success_rate", "steps_per_task", "first_goal_hit_rate", "plan_accuracy"):
            out[k] = round(_mean([a[k] for a in aggs]), 4)
        return out

    phases = [mean_agg([r["phases"][i] for r in runs]) for i in range(len(runs[0]["phases"]))]
    totals = mean_agg([r["totals"] for r in runs])
    gate = {k: round(_mean([r["gate"][k] for r in runs]), 2) for k in runs[0]["gate"]}
    return {
        "label": label, "trigger": arm.trigger, "scorer": arm.scorer,
        "phases": phases, "totals": totals, "final": phases[-1],
        "success_range": [min(r["totals"]["success_rate"] for r in runs),
                          max(r["totals"]["success_rate"] for r in runs)],
        "gate": gate,
        "llm_calls": round(_mean([r["llm_calls"] for r in runs]), 2),
        "wall_s": round(_mean([r["wall_s"] for r in runs]), 3),
        "gate_wall_s": round(_mean([r["gate_wall_s"] for r in runs]), 3),
        # per-task rows of the first seed only (the plot); the other seeds by their totals
        "runs": [{"seed": r["seed"], "totals": r["totals"], "phases": r["phases"],
                  "gate": r["gate"], **({"episodes": r["episodes"]} if i == 0 else {})}
                 for i, r in enumerate(runs)],
    }


def run_benchmark(scenario: Scenario, *, llm: Any = None, embedder: Any = None
                  ) -> dict[str, Any]:
    """Run every arm of ``scenario`` on every seed side by side; the JSON result document."""
    sc = scenario.validate()
    world = sc.load_world()
    if sc.updater == "llm" and llm is None:
        from glove_ros.core.llm import LlamaBackend, LlmConfig

        llm = LlamaBackend(LlmConfig(n_ctx=2048, n_threads=1, max_tokens=256,
                                     timeout_s=60.0)).load()
    emb = embedder if embedder is not None else _make_embedder(sc.embedder)
    arms: dict[str, Any] = {}
    t0 = time.perf_counter()
    for arm in sc.arms:
        runs = []
        for seed in sc.seeds:
            r = ArmRunner(world, sc, arm, seed, emb, llm).run_all()
            r["seed"] = seed
            runs.append(r)
        arms[arm.label] = _merge(arm.label, arm, runs)
    doc: dict[str, Any] = {
        "benchmark": "janus",
        "scenario": sc.to_dict(),
        "world": {"name": world.name, "drift_events": [
            {"type": e.type, "episode": e.episode} for e in world.drift_events()
            if e.episode is not None]},
        "phases": phase_plan(world, sc.episodes),
        "arms": arms,
        "wall_s": round(time.perf_counter() - t0, 3),
        "paper": PAPER,
    }
    doc["comparison"] = _comparison(arms)
    return doc


def _comparison(arms: Mapping[str, Any]) -> dict[str, Any]:
    """Points gained over the no-gate arm and comparisons relative to always-compare."""
    base = next((a for a in arms.values() if a["trigger"] == "never"), None)
    always = next((a for a in arms.values()
                   if a["trigger"] == "always" and a["scorer"] == "experience"), None)
    out: dict[str, Any] = {}
    for label, a in arms.items():
        row: dict[str, Any] = {}
        if base is not None and a is not base:
            row["success_points_vs_no_gate"] = round(
                100 * (a["totals"]["success_rate"] - base["totals"]["success_rate"]), 2)
            row["final_phase_points_vs_no_gate"] = round(
                100 * (a["final"]["success_rate"] - base["final"]["success_rate"]), 2)
            row["plan_accuracy_points_vs_no_gate"] = round(
                100 * (a["totals"]["plan_accuracy"] - base["totals"]["plan_accuracy"]), 2)
            # paired by seed: same tasks, starts and injected noise in both arms
            row["success_points_vs_no_gate_per_seed"] = [
                round(100 * (x["totals"]["success_rate"] - y["totals"]["success_rate"]), 2)
                for x, y in zip(a["runs"], base["runs"], strict=True)]
        if always is not None and always["gate"]["comparisons"] and a["trigger"] != "never":
            row["comparisons_vs_always"] = round(
                a["gate"]["comparisons"] / always["gate"]["comparisons"], 3)
        out[label] = row
    return out


# --------------------------------------------------------------------------- output


def result_stem(scenario: Scenario) -> str:
    """``janus_<name>`` without a doubled prefix."""
    name = scenario.name[len("janus_"):] if scenario.name.startswith("janus_") else scenario.name
    return f"janus_{name}"


def format_table(doc: Mapping[str, Any]) -> str:
    """The comparison table printed by the CLI."""
    sc = doc["scenario"]
    upd = sc["updater"]
    noise = (f" (wrong facts {upd['wrong_fact_rate']:g}, forgets {upd['forget_rate']:g})"
             if upd["kind"] == "rule" else " (bundled GGUF, no injected noise)")
    lines = [f"janus '{sc['name']}' on world '{doc['world']['name']}': {sc['episodes']} tasks x "
             f"{len(sc['seeds'])} seed(s), updater {upd['kind']}{noise}, "
             f"planner reads {sc['planner_memory']} memory, step limit {sc['max_steps']}, "
             f"tau {sc['janus']['tau']:g}"]
    phase_names = [p["name"] for p in doc["phases"]]
    injected = sc["updater"]["kind"] == "rule"  # harm is known only when it was injected
    head = ["arm", "success", *[f"[{n}]" for n in phase_names], "plan acc", "steps",
            "compared", "rejected", "harmful in", "clean rej", "llm", "wall s", "gate s"]
    rows = [head]
    for label, a in doc["arms"].items():
        g = a["gate"]
        rows.append([
            label, f"{a['totals']['success_rate']:.1%}",
            *[f"{p['success_rate']:.1%}" for p in a["phases"]],
            f"{a['totals']['plan_accuracy']:.1%}", f"{a['totals']['steps_per_task']:.2f}",
            f"{g['comparisons']:g}", f"{g['rejected']:g}",
            *([f"{g['harmful_deployed']:g}/{g['harmful_proposed']:g}",
               f"{g['clean_rejected']:g}"] if injected else ["n/a", "n/a"]),
            f"{a['llm_calls']:g}", f"{a['wall_s']:.1f}", f"{a['gate_wall_s']:.2f}",
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    comp = doc.get("comparison", {})
    for label, row in comp.items():
        parts = []
        if "success_points_vs_no_gate" in row:
            per = row["success_points_vs_no_gate_per_seed"]
            spread = (f", per seed {min(per):+.1f}..{max(per):+.1f}" if len(per) > 1 else "")
            parts.append(f"{row['success_points_vs_no_gate']:+.1f} pts success{spread} "
                         f"({row['final_phase_points_vs_no_gate']:+.1f} final phase, "
                         f"{row['plan_accuracy_points_vs_no_gate']:+.1f} plan accuracy) vs no gate")
        if "comparisons_vs_always" in row and doc["arms"][label]["trigger"] != "always":
            parts.append(f"{row['comparisons_vs_always']:.2f}x the comparisons of always")
        if parts:
            lines.append(f"{label}: " + "; ".join(parts))
    p = doc["paper"]
    lines.append(f"paper: +{p['accuracy_gain_points'][0]} to +{p['accuracy_gain_points'][1]} "
                 "points average accuracy with Janus; momentum trigger: fewer comparisons than "
                 "always-compare at similar or better accuracy")
    lines.append("plan acc: share of colours whose rehearsed first goal from the dock holds the "
                 "block (after each task); harmful in: injected harmful candidates deployed / "
                 "proposed; clean rej: candidates without injected harm rejected")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path, window: int = 8) -> None:
    """Per arm over tasks (first seed): rolling success, plan-memory accuracy, cumulative
    comparisons; drift events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8.5, 8.5), sharex=True)
    for label, a in doc["arms"].items():
        eps = a["runs"][0]["episodes"]
        x = np.array([e["episode"] for e in eps])
        ok = np.array([1.0 if e["success"] else 0.0 for e in eps])
        k = max(1, min(window, len(ok)))
        roll = np.array([ok[max(0, i - k + 1): i + 1].mean() for i in range(len(ok))])
        acc = np.array([e["plan_accuracy"] for e in eps])
        comps = np.cumsum([1 if e["triggered"] else 0 for e in eps])
        ls = "-" if a["trigger"] == "momentum" and a["scorer"] == "experience" else (
            ":" if a["trigger"] == "never" else "--")
        lw = 2.4 if ls == "-" else 1.5
        axes[0].plot(x, roll, ls, linewidth=lw, label=label, drawstyle="steps-post")
        axes[1].plot(x, acc, ls, linewidth=lw, label=label, drawstyle="steps-post")
        axes[2].plot(x, comps, ls, linewidth=lw, label=label, drawstyle="steps-post")
    axes[0].set_ylim(-0.05, 1.1)
    axes[0].set_ylabel(f"task success (rolling {window})")
    axes[1].set_ylim(-0.05, 1.1)
    axes[1].set_ylabel("plan-memory accuracy")
    axes[2].set_ylabel("comparisons (cumulative)")
    axes[2].set_xlabel("task")
    for ax in axes:
        for e in doc["world"]["drift_events"]:
            ax.axvline(e["episode"], color="red", linestyle="--", linewidth=1)
            ax.text(e["episode"], ax.get_ylim()[1], f" {e['type']}", color="red", fontsize=7,
                    va="top")
    axes[0].legend(fontsize=7, loc="lower left", ncol=2)
    sc = doc["scenario"]
    gain = doc["paper"]["accuracy_gain_points"]
    axes[0].set_title(f"Janus '{sc['name']}' (seed {sc['seeds'][0]}); paper: +{gain[0]}..+"
                      f"{gain[1]} pts with Janus", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="FILE",
                        help="scenario file (bench/scenarios/janus_*.yaml)")
    parser.add_argument("--updater", choices=UPDATERS, default=None,
                        help="override the scenario's updater: rule (deterministic, with the "
                        "scenario's injected noise) or llm (bundled GGUF; slow)")
    parser.add_argument("--episodes", type=int, default=0, metavar="N",
                        help="override the number of tasks (0: the scenario's)")
    parser.add_argument("--seeds", default="", metavar="S,S,...",
                        help="override the seeds, e.g. 0,1,2")
    parser.add_argument("--arms", default="", metavar="SPEC,SPEC",
                        help="override the arms by trigger spec, e.g. never,momentum,always")
    parser.add_argument("--embedder", choices=EMBEDDERS, default=None,
                        help="override the scenario's embedder")
    parser.add_argument("--tau", type=float, default=None,
                        help="override janus.tau (momentum trigger threshold), for sweeps")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where janus_<scenario>.json and .png go (default: %(default)s)")


def _overrides(sc: Scenario, args: argparse.Namespace) -> Scenario:
    kw: dict[str, Any] = {}
    if getattr(args, "updater", None):
        kw["updater"] = args.updater
    if getattr(args, "episodes", 0):
        kw["episodes"] = int(args.episodes)
    if getattr(args, "seeds", ""):
        try:
            kw["seeds"] = tuple(int(s) for s in str(args.seeds).split(",") if s.strip())
        except ValueError as exc:
            raise ValueError(f"--seeds expects comma-separated ints: {exc}") from None
    if getattr(args, "arms", ""):
        kw["arms"] = tuple(Arm(s.strip(), s.strip()) for s in str(args.arms).split(",")
                           if s.strip())
    if getattr(args, "embedder", None):
        kw["embedder"] = args.embedder
    if getattr(args, "tau", None) is not None:
        kw["janus"] = replace(sc.janus, tau=float(args.tau))
    return replace(sc, **kw).validate() if kw else sc


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed arguments; 0 on success, 2 on bad input."""
    try:
        sc = _overrides(load_scenario(args.scenario), args)
        sc.load_world()
    except (ValueError, FileNotFoundError, TypeError) as exc:
        print(f"glove-ros bench janus: {exc}", file=sys.stderr)
        return 2
    try:
        doc = run_benchmark(sc)
    except Exception as exc:  # e.g. the LLM or the embedding model cannot be loaded
        from glove_ros.core.embedding import EmbeddingLoadError
        from glove_ros.core.llm import LlmLoadError

        if isinstance(exc, (LlmLoadError, EmbeddingLoadError)):
            print(f"glove-ros bench janus: {exc}", file=sys.stderr)
            return 2
        raise
    return write_results(doc, args.out, result_stem(sc), write_plot, format_table, args.json)
