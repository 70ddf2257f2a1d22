"""Janus benchmark: plan-memory updates with and without the gate, on the robot's real wiring.

``glove-ros bench janus --scenario bench/scenarios/janus_worlds.yaml``

A stream of "find the <colour> block" tasks runs in several worlds with drift (the JetRover
core loop of :mod:`glove_ros.benchmarks.jetrover` without DDS: simulator, perception,
experience memory with the async GLOVE verifier, the task agent). **The planner reads both
memories, as on the robot**: trusted experience memory first, plan memory a prior where it
is silent (:class:`~glove_ros.core.plan.plan_planner.PlanAwarePlanner`). After every task the
same updater proposes a plan-memory candidate and a gate decides; the arms differ only in
the gate's trigger:

  never               no gate: every candidate deployed (the plain updater)
  clean               no gate and no injected errors: the ceiling any gate could reach
  always              compare every update
  momentum            Janus: memory momentum trigger (cos(z, m) < tau)
  evidence            compare when what the robot knows speaks against the update
                      (:class:`~glove_ros.core.plan.plan_planner.ExperienceRisk`: the edit
                      touches a waypoint whose look GLOVE recently found dissonant, places a
                      colour where trusted looks saw others, or drops one they confirm)
  evidence+momentum   either
  periodic:K, random:P   ablations; ``random:~LABEL`` / ``periodic:~LABEL`` take the
                      comparison rate LABEL measured (equal comparison budgets)

**Harmful updates** come from :class:`NoisyUpdater` (the rule updater with seeded errors of
the kinds a small reflecting LLM makes, the same coin flips in every arm): *wrong place*
(the block seen here written at another waypoint), *stale place* (the block written where
an earlier episode saw it, before it moved), *over-generalisation* (every colour written at
the waypoint where this block was found) and *forgotten facts* (a fact dropped).

**Scored on what the updates did not see**: task success on the *later* episodes (the
second half of each run), and held-out questions asked every ``eval_every`` tasks from
start waypoints the tasks never start from (``heldout_fraction`` of the waypoints): *find*
(the planner's first goal, both memories, holds the block -- or the block is at the start),
*fetch* (find, then the remembered route back to the dock is really open), *go-to* (the
remembered route to each other waypoint is really open), *corridor* (is this corridor
blocked? experience memory first, plan memory's corridor lessons where it is silent),
answered with both memories and scored against the simulator's ground truth; and
*new robot* (find for a robot whose experience memory is empty -- new on the site, or its
store reset -- reading this plan memory: where plan memory is the only knowledge). The gate's
own rehearsal scorer never sees these (it scores against verified experience memory).

Reported per arm over every (world, seed) run: means, per-run figures, the paired gain over
``never`` with a 95% t-interval, comparisons (and relative to ``always``), the share of
always-compare's gain kept, harmful candidates proposed / deployed, clean candidates
rejected, how often plan memory changed the planner's first option (``prior_used``), wall
time. The plot is the Pareto view: gain against comparisons for every trigger.

Scenario file (YAML; every key but ``name`` optional)::

    name: worlds                   # results go to janus_<name>.json / .png
    description: "free text"
    worlds:                        # one run per (world, seed); or world: + events: for one
      - {world: jetrover_maze, events: [...]}
      - {world: corridor_blocked}
    episodes: 60                   # tasks per run
    seeds: [0, 1, 2]               # task sequence / start / noise seeds
    max_steps: 6                   # step limit per task (navigations + looks)
    perception: symbolic           # symbolic (ground-truth colours) | camera (OpenCV)
    verifier: {}                   # VerifierConfig overrides (mode is async), e.g.
                                   # {detector: p_th, p_th: 2} for the paper's rule
    belief_threshold: 0.5          # the gate's truth: share of trusted looks that must agree
    embedder: onnx                 # onnx (all-MiniLM-L6-v2 int8) | hashing
    eval_every: 5                  # held-out questions every k tasks (and after the last)
    heldout_fraction: 0.5          # share of waypoints kept as held-out start waypoints
    updater:
      kind: rule                   # rule | llm
      wrong_place_rate: 0.15       # P(error of that kind) per task (rule only)
      stale_place_rate: 0.15
      overgeneral_rate: 0.1
      forget_rate: 0.1
      miss_threshold: 2            # rule updater
    janus: {beta: 0.9, tau: 0.0, warmup: 3, coverage_k: 8, boundary_max: 16,
            fresh_max: 16, seed: 0, accept_ties: true}
    arms: [never, clean, always, momentum, evidence, "random:~evidence"]
    # or {label, trigger, scorer: experience | simulator}; simulator = an oracle
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
from glove_ros.benchmarks.jetrover import BenchConfig, ModeRunner
from glove_ros.core.memory.experience import Transition
from glove_ros.core.plan.agent import (
    Beliefs,
    GreedyPlanner,
    PlanContext,
    StoreMemoryView,
    Task,
    WorldMap,
    rank_options,
)
from glove_ros.core.plan.janus import JanusConfig, JanusGate, Verdict, make_trigger
from glove_ros.core.plan.plan_memory import (
    Edit,
    PlanEntry,
    PlanMemoryStore,
    apply_edits,
)
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
from glove_ros.core.verify.verifier import VerifierConfig
from glove_ros.core.world.sim import colors_signature
from glove_ros.core.world.worldfile import World, edge_key, load_world, resolve_world_path

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
ERROR_KINDS = ("wrong_place", "stale_place", "overgeneral", "forget")
HELDOUT_KINDS = ("find", "fetch", "goto", "corridor", "cold_find")
SCORERS = ("experience", "simulator")
UPDATERS = ("rule", "llm")
EMBEDDERS = ("onnx", "hashing")


# --------------------------------------------------------------------------- scenario


def matched_spec(trigger: str) -> tuple[str, str] | None:
    """``("random" | "periodic", LABEL)`` for a budget-matched spec ``random:~LABEL``."""
    kind, _, arg = str(trigger).partition(":")
    if kind in ("random", "periodic") and arg.startswith("~") and len(arg) > 1:
        return kind, arg[1:]
    return None


@dataclass(frozen=True)
class Arm:
    """One gate configuration: ``trigger`` spec (:func:`~glove_ros.core.plan.janus.make_trigger`,
    plus ``clean`` and the budget-matched ``random:~LABEL`` / ``periodic:~LABEL``) and
    ``scorer`` (``experience``: rehearsal against verified experience memory, the robot's
    scorer; ``simulator``: against ground truth, an oracle)."""

    label: str
    trigger: str
    scorer: str = "experience"

    def validate(self, config: JanusConfig) -> Arm:
        """Raise ValueError for an unknown trigger or scorer."""
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("arm label must be a non-empty string")
        if self.trigger != "clean" and matched_spec(self.trigger) is None:
            make_trigger(self.trigger, config, risk=lambda c: "")
        if self.scorer not in SCORERS:
            raise ValueError(f"arm {self.label!r}: scorer must be one of {SCORERS}, "
                             f"got {self.scorer!r}")
        return self


@dataclass(frozen=True)
class Scenario:
    """A Janus benchmark scenario (see the module docstring for the YAML keys)."""

    name: str
    worlds: tuple[Mapping[str, Any], ...] = ({"world": "jetrover_maze", "events": []},)
    description: str = ""
    episodes: int = 60
    seeds: tuple[int, ...] = (0,)
    max_steps: int = 6
    perception: str = "symbolic"
    verifier: Mapping[str, Any] = field(default_factory=dict)
    belief_threshold: float = 0.5
    embedder: str = "onnx"
    eval_every: int = 5
    heldout_fraction: float = 0.5
    updater: str = "rule"
    wrong_place_rate: float = 0.15
    stale_place_rate: float = 0.15
    overgeneral_rate: float = 0.1
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
        for key, lo in (("episodes", 1), ("max_steps", 1), ("miss_threshold", 1),
                        ("eval_every", 1)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{key} must be an int >= {lo}, got {v!r}")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                 for s in self.seeds):
            raise ValueError(f"seeds must be a non-empty list of ints >= 0, got {self.seeds!r}")
        if not self.worlds:
            raise ValueError("worlds is empty: give at least one world")
        for key, allowed in (("perception", PERCEPTIONS), ("embedder", EMBEDDERS),
                             ("updater", UPDATERS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, got "
                                 f"{getattr(self, key)!r}")
        for key in ("wrong_place_rate", "stale_place_rate", "overgeneral_rate", "forget_rate"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"updater.{key} must be in [0, 1], got {v!r}")
        if not 0.0 < float(self.belief_threshold) <= 1.0:
            raise ValueError(f"belief_threshold must be in (0, 1], got {self.belief_threshold}")
        if not 0.0 < float(self.heldout_fraction) < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")
        if "mode" in self.verifier:
            raise ValueError("verifier overrides must not set 'mode' (async is used)")
        VerifierConfig.from_dict({"mode": "async", **self.verifier})
        self.janus.validate()
        if not self.arms:
            raise ValueError("arms is empty: give at least one trigger")
        labels: list[str] = []
        for a in self.arms:
            a.validate(self.janus)
            m = matched_spec(a.trigger)
            if m is not None and m[1] not in labels:
                raise ValueError(f"arm {a.label!r}: {a.trigger!r} needs an earlier arm "
                                 f"labelled {m[1]!r} to take its comparison rate from")
            labels.append(a.label)
        if len(set(labels)) != len(labels):
            raise ValueError(f"arm labels must be unique, got {labels}")
        return self

    @property
    def error_rates(self) -> dict[str, float]:
        """Injected error kind -> probability per task."""
        return {"wrong_place": self.wrong_place_rate, "stale_place": self.stale_place_rate,
                "overgeneral": self.overgeneral_rate, "forget": self.forget_rate}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every setting."""
        return {
            "name": self.name, "description": self.description,
            "worlds": [{"world": w["world"], "events": [dict(e) for e in w.get("events", [])]}
                       for w in self.worlds],
            "episodes": self.episodes, "seeds": list(self.seeds),
            "max_steps": self.max_steps, "perception": self.perception,
            "planner_memory": "both (trusted experience first, plan memory where it is silent)",
            "verifier": dict(self.verifier), "belief_threshold": self.belief_threshold,
            "embedder": self.embedder, "eval_every": self.eval_every,
            "heldout_fraction": self.heldout_fraction,
            "updater": {"kind": self.updater, **{f"{k}_rate": v for k, v in
                                                 self.error_rates.items()},
                        "miss_threshold": self.miss_threshold},
            "janus": {k: getattr(self.janus, k) for k in
                      ("beta", "tau", "warmup", "coverage_k", "boundary_max", "fresh_max",
                       "seed", "accept_ties")},
            "arms": [{"label": a.label, "trigger": a.trigger, "scorer": a.scorer}
                     for a in self.arms],
            "source": self.source,
        }

    def load_worlds(self) -> list[World]:
        """Every world, with its extra ``events`` appended."""
        base = Path(self.source).parent if self.source else Path(".")
        out = []
        for spec in self.worlds:
            candidate = base / str(spec["world"])
            path = candidate if candidate.is_file() else resolve_world_path(str(spec["world"]))
            world = load_world(path)
            events = list(spec.get("events", []) or [])
            if events:
                data = world.to_dict()
                data["events"] = list(data["events"]) + [dict(e) for e in events]
                world = World.from_dict(data, source=str(path))
            out.append(world)
        return out

    def load_world(self) -> World:
        """The first world."""
        return self.load_worlds()[0]


_SCENARIO_KEYS = {"name", "description", "world", "events", "worlds", "episodes", "seeds",
                  "max_steps", "perception", "verifier", "belief_threshold", "embedder",
                  "eval_every", "heldout_fraction", "updater", "janus", "arms"}
_UPDATER_KEYS = {"kind", "wrong_place_rate", "stale_place_rate", "overgeneral_rate",
                 "forget_rate", "miss_threshold"}
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


def _worlds(data: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    if "worlds" in data and ("world" in data or "events" in data):
        raise ValueError("give either worlds: or world: (+ events:), not both")
    raw = data.get("worlds", [{"world": data.get("world", "jetrover_maze"),
                               "events": data.get("events", []) or []}])
    if not isinstance(raw, list) or not raw:
        raise ValueError("worlds must be a non-empty list of {world, events}")
    out = []
    for i, w in enumerate(raw):
        if isinstance(w, str):
            w = {"world": w}
        if not isinstance(w, Mapping) or "world" not in w or set(w) - {"world", "events"}:
            raise ValueError(f"worlds[{i}] must be a world name or {{world, events}}")
        events = w.get("events", []) or []
        if not isinstance(events, list) or not all(isinstance(e, Mapping) for e in events):
            raise ValueError(f"worlds[{i}].events must be a list of world events (mappings)")
        out.append({"world": str(w["world"]), "events": [dict(e) for e in events]})
    return tuple(out)


def scenario_from_dict(data: Any, source: str = "") -> Scenario:
    """Build and validate a :class:`Scenario` from its YAML structure."""
    if not isinstance(data, Mapping):
        raise ValueError("a Janus scenario must be a YAML mapping")
    unknown = set(data) - _SCENARIO_KEYS
    if unknown:
        raise ValueError(f"unknown scenario keys {sorted(unknown)}; allowed: "
                         f"{sorted(_SCENARIO_KEYS)} (the planner always reads both memories)")
    if "name" not in data:
        raise ValueError("scenario needs a name")
    upd = data.get("updater", {}) or {}
    jan = data.get("janus", {}) or {}
    if not isinstance(upd, Mapping) or set(upd) - _UPDATER_KEYS:
        raise ValueError(f"updater must be a mapping with keys {sorted(_UPDATER_KEYS)}")
    if not isinstance(jan, Mapping) or set(jan) - _JANUS_KEYS:
        raise ValueError(f"janus must be a mapping with keys {sorted(_JANUS_KEYS)}")
    seeds = data.get("seeds", [0])
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    kw: dict[str, Any] = {}
    for key in ("description", "episodes", "max_steps", "perception", "belief_threshold",
                "embedder", "eval_every", "heldout_fraction"):
        if key in data:
            kw[key] = data[key]
    if "arms" in data:
        arms = data["arms"]
        if not isinstance(arms, list):
            raise ValueError("arms must be a list")
        kw["arms"] = tuple(_arm(a, i) for i, a in enumerate(arms))
    for key in ("wrong_place_rate", "stale_place_rate", "overgeneral_rate", "forget_rate",
                "miss_threshold"):
        if key in upd:
            kw[key] = upd[key]
    sc = Scenario(
        name=str(data["name"]), worlds=_worlds(data), seeds=tuple(seeds),
        verifier=dict(data.get("verifier", {}) or {}), updater=str(upd.get("kind", "rule")),
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


# --------------------------------------------------------------------------- the benchmark


def _make_embedder(kind: str) -> Any:
    if kind == "onnx":
        from glove_ros.core.llm.embedding import Embedder

        return Embedder().load()
    from glove_ros.core.llm.embedding import HashingEmbedder

    return HashingEmbedder()


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


#: two-sided 95% Student t quantiles for 1..30 degrees of freedom (30+: the last)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval(xs: Sequence[float]) -> dict[str, Any]:
    """Mean and 95% t-interval of ``xs`` (paired per-run differences); the interval is
    ``None`` with fewer than two values."""
    x = np.asarray(list(xs), dtype=float)
    n = len(x)
    if n == 0:
        return {"mean": 0.0, "ci95": None, "n": 0}
    m = float(x.mean())
    if n < 2:
        return {"mean": round(m, 3), "ci95": None, "n": n}
    half = float(_T975[min(n - 1, len(_T975)) - 1] * x.std(ddof=1) / math.sqrt(n))
    return {"mean": round(m, 3), "ci95": [round(m - half, 3), round(m + half, 3)], "n": n}


_HEADLINE = ("later", "heldout", "new_robot")


def _metric(run: Mapping[str, Any], which: str) -> float:
    """A run's headline figure: later-half task success, held-out accuracy (all kinds) or
    held-out find accuracy of a new robot (empty experience memory)."""
    if which == "later":
        return float(run["later"]["success_rate"])
    return float(run["heldout"]["all" if which == "heldout" else "cold_find"])


def _merge(label: str, arm: Arm, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean over runs (every world x seed) of one arm, and the per-run figures."""
    def mean_agg(aggs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        out = {"name": aggs[0]["name"], "episodes": aggs[0]["episodes"]}
        for k in ("success_rate", "steps_per_task", "first_goal_hit_rate", "plan_accuracy"):
            out[k] = round(_mean([a[k] for a in aggs]), 4)
        return out

    totals = mean_agg([r["totals"] for r in runs])
    later = mean_agg([r["later"] for r in runs])
    heldout = {k: round(_mean([r["heldout"][k] for r in runs]), 4) for k in runs[0]["heldout"]}
    gate = {k: round(_mean([r["gate"][k] for r in runs]), 2) for k in runs[0]["gate"]}
    return {
        "label": label, "trigger": arm.trigger, "scorer": arm.scorer,
        "totals": totals, "later": later, "heldout": heldout, "gate": gate,
        "harmful_by_kind": {k: round(_mean([r["harmful_by_kind"][k] for r in runs]), 2)
                            for k in ERROR_KINDS},
        "prior_used_per_task": round(_mean([r["prior_used_per_task"] for r in runs]), 4),
        "llm_calls": round(_mean([r["llm_calls"] for r in runs]), 2),
        "wall_s": round(_mean([r["wall_s"] for r in runs]), 3),
        "gate_wall_s": round(_mean([r["gate_wall_s"] for r in runs]), 3),
        "resolved_trigger": runs[0].get("resolved_trigger", arm.trigger),
        # per-task rows of the first run only (the plot); the other runs by their figures
        "runs": [{"world": r["world"], "seed": r["seed"], "totals": r["totals"],
                  "later": r["later"], "heldout": r["heldout"], "phases": r["phases"],
                  "gate": r["gate"], "prior_used_per_task": r["prior_used_per_task"],
                  **({"episodes": r["episodes"], "evals": r["evals"]} if i == 0 else {})}
                 for i, r in enumerate(runs)],
    }


def _resolve(arm: Arm, arms: Mapping[str, Any], config: JanusConfig) -> str:
    """The concrete trigger spec of ``arm`` (a budget-matched one takes the comparison rate
    its reference arm measured)."""
    m = matched_spec(arm.trigger)
    if m is None:
        return "never" if arm.trigger == "clean" else arm.trigger
    kind, ref = m
    g = arms[ref]["gate"]
    rate = g["comparisons"] / g["proposals"] if g["proposals"] else 0.0
    if kind == "random":
        return f"random:{min(1.0, max(0.0, rate)):.4f}"
    return f"periodic:{max(1, int(round(1.0 / rate))) if rate > 0 else 10**6}"


def run_benchmark(scenario: Scenario, *, llm: Any = None, embedder: Any = None
                  ) -> dict[str, Any]:
    """Run every arm on every (world, seed) side by side; the JSON result document."""
    sc = scenario.validate()
    worlds = sc.load_worlds()
    if sc.updater == "llm" and llm is None:
        from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

        llm = LlamaBackend(LlmConfig(n_ctx=2048, n_threads=1, max_tokens=256,
                                     timeout_s=60.0)).load()
    emb = embedder if embedder is not None else _make_embedder(sc.embedder)
    arms: dict[str, Any] = {}
    t0 = time.perf_counter()
    for arm in sc.arms:
        spec = _resolve(arm, arms, sc.janus)
        runs = []
        for world in worlds:
            for seed in sc.seeds:
                r = ArmRunner(world, sc, arm, seed, emb, llm, spec).run_all()
                r.update(world=world.name, seed=seed, resolved_trigger=spec)
                runs.append(r)
        arms[arm.label] = _merge(arm.label, arm, runs)
    doc: dict[str, Any] = {
        "benchmark": "janus",
        "scenario": sc.to_dict(),
        "worlds": [{"name": w.name, "waypoints": len(w.waypoint_ids), "colours": list(w.colors),
                    "drift_events": [{"type": e.type, "episode": e.episode}
                                     for e in w.drift_events() if e.episode is not None]}
                   for w in worlds],
        "arms": arms,
        "wall_s": round(time.perf_counter() - t0, 3),
        "paper": PAPER,
    }
    doc["comparison"] = _comparison(arms)
    return doc


def _comparison(arms: Mapping[str, Any]) -> dict[str, Any]:
    """Paired gains over the no-gate arm (mean and 95% interval over runs), comparisons
    relative to always-compare and the share of always-compare's gain kept."""
    base = next((a for a in arms.values() if a["trigger"] == "never"), None)
    always = next((a for a in arms.values()
                   if a["trigger"] == "always" and a["scorer"] == "experience"), None)
    out: dict[str, Any] = {}
    gains_always: dict[str, float] = {}
    if base is not None and always is not None:
        for which in _HEADLINE:
            gains_always[which] = 100 * _mean([
                _metric(x, which) - _metric(y, which)
                for x, y in zip(always["runs"], base["runs"], strict=True)])
    for label, a in arms.items():
        row: dict[str, Any] = {"comparisons": a["gate"]["comparisons"]}
        if base is not None and a is not base:
            for which in _HEADLINE:
                per = [round(100 * (_metric(x, which) - _metric(y, which)), 2)
                       for x, y in zip(a["runs"], base["runs"], strict=True)]
                row[f"{which}_points_vs_no_gate"] = interval(per)
                row[f"{which}_points_vs_no_gate_per_run"] = per
                g_all = gains_always.get(which)
                if g_all is not None and abs(g_all) > 1e-9 and a is not always:
                    row[f"{which}_share_of_always_gain"] = round(_mean(per) / g_all, 3)
        if always is not None and always["gate"]["comparisons"] and a["trigger"] not in (
                "never", "clean"):
            row["comparisons_vs_always"] = round(
                a["gate"]["comparisons"] / always["gate"]["comparisons"], 3)
        out[label] = row
    return out


# --------------------------------------------------------------------------- output


def result_stem(scenario: Scenario) -> str:
    """``janus_<name>`` without a doubled prefix."""
    name = scenario.name[len("janus_"):] if scenario.name.startswith("janus_") else scenario.name
    return f"janus_{name}"


def _ci(row: Mapping[str, Any], which: str) -> str:
    g = row.get(f"{which}_points_vs_no_gate")
    if not g:
        return "-"
    ci = g["ci95"]
    return f"{g['mean']:+.1f}" + (f" [{ci[0]:+.1f},{ci[1]:+.1f}]" if ci else "")


def format_table(doc: Mapping[str, Any]) -> str:
    """The comparison table printed by the CLI."""
    sc = doc["scenario"]
    upd = sc["updater"]
    noise = (", ".join(f"{k[:-5]} {v:g}" for k, v in upd.items() if k.endswith("_rate"))
             if upd["kind"] == "rule" else "LLM reflections, no injected noise")
    runs = len(sc["worlds"]) * len(sc["seeds"])
    lines = [f"janus '{sc['name']}' on {', '.join(w['name'] for w in doc['worlds'])}: "
             f"{sc['episodes']} tasks x {len(sc['seeds'])} seed(s) per world ({runs} runs), "
             f"planner reads both memories, updater {upd['kind']} ({noise}), step limit "
             f"{sc['max_steps']}, tau {sc['janus']['tau']:g}"]
    injected = upd["kind"] == "rule"
    head = ["arm", "trigger", "later", "held-out", "find", "fetch", "goto", "corr",
            "new robot", "cmp", "x always", "harm in", "clean rej", "prior/task",
            "gain later [95%]", "gain held-out [95%]", "gain new robot [95%]", "kept"]
    rows = [head]
    comp = doc.get("comparison", {})
    for label, a in doc["arms"].items():
        g, h, c = a["gate"], a["heldout"], comp.get(label, {})
        rows.append([
            label, a["resolved_trigger"], f"{a['later']['success_rate']:.1%}",
            f"{h['all']:.1%}", f"{h['find']:.1%}", f"{h['fetch']:.1%}", f"{h['goto']:.1%}",
            f"{h['corridor']:.1%}", f"{h['cold_find']:.1%}", f"{g['comparisons']:g}",
            f"{c['comparisons_vs_always']:.2f}" if "comparisons_vs_always" in c else "-",
            f"{g['harmful_deployed']:g}/{g['harmful_proposed']:g}" if injected else "n/a",
            f"{g['clean_rejected']:g}" if injected else "n/a",
            f"{a['prior_used_per_task']:.2f}", _ci(c, "later"), _ci(c, "heldout"),
            _ci(c, "new_robot"),
            (f"{c['new_robot_share_of_always_gain']:.0%}"
             if "new_robot_share_of_always_gain" in c else "-"),
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(x.ljust(w) if i < 2 else x.rjust(w)
                               for i, (x, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    p = doc["paper"]
    lines.append(f"paper: +{p['accuracy_gain_points'][0]} to +{p['accuracy_gain_points'][1]} "
                 "points average accuracy with Janus; momentum trigger: fewer comparisons than "
                 "always-compare at similar or better accuracy")
    lines.append("later: task success in the second half of each run; held-out: questions "
                 "from start waypoints tasks never start from (find, fetch, go-to, corridor, "
                 "find by a new robot with empty experience memory), "
                 "simulator truth; cmp: comparisons per run; harm in: injected harmful "
                 "candidates deployed / proposed; prior/task: first options plan memory "
                 "changed per task; gain: paired points vs never over runs, 95% t-interval; "
                 "kept: share of always-compare's new-robot gain")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """The Pareto view: gain over no gate (later-half success; held-out accuracy; new-robot
    find) against comparisons per run, every trigger, 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    comp = doc.get("comparison", {})
    for ax, which, title in ((axes[0], "later", "task success, later half"),
                             (axes[1], "heldout", "held-out questions, all kinds"),
                             (axes[2], "new_robot", "held-out find, new robot")):
        for label, a in doc["arms"].items():
            g = comp.get(label, {}).get(f"{which}_points_vs_no_gate")
            if a["trigger"] == "never":
                ax.plot(0, 0, "ks")
                ax.annotate("never", (0, 0), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
                continue
            if not g:
                continue
            x = a["gate"]["comparisons"]
            ci = g["ci95"] or [g["mean"], g["mean"]]
            ax.errorbar(x, g["mean"], yerr=[[g["mean"] - ci[0]], [ci[1] - g["mean"]]],
                        fmt="D" if a["trigger"] == "clean" else "o", capsize=3)
            ax.annotate(label, (x, g["mean"]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("comparisons per run")
        ax.set_ylabel("points vs no gate (95% CI)")
        ax.set_title(title, fontsize=10)
    sc = doc["scenario"]
    fig.suptitle(f"Janus '{sc['name']}' on the real wiring ({len(sc['worlds'])} worlds x "
                 f"{len(sc['seeds'])} seeds): gain vs comparisons", fontsize=10)
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
                        help="override the arms by trigger spec, e.g. never,evidence,always")
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
        sc.load_worlds()
    except (ValueError, FileNotFoundError, TypeError) as exc:
        print(f"glove-ros bench janus: {exc}", file=sys.stderr)
        return 2
    try:
        doc = run_benchmark(sc)
    except Exception as exc:  # e.g. the LLM or the embedding model cannot be loaded
        from glove_ros.core.llm.embedding import EmbeddingLoadError
        from glove_ros.core.llm.runtime import LlmLoadError

        if isinstance(exc, (LlmLoadError, EmbeddingLoadError)):
            print(f"glove-ros bench janus: {exc}", file=sys.stderr)
            return 2
        raise
    return write_results(doc, args.out, result_stem(sc), write_plot, format_table, args.json)
