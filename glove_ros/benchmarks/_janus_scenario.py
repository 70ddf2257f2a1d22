"""Janus benchmark: the scenario file (YAML keys in janus.py's docstring) and its arms.

:class:`Scenario` and :class:`Arm` with their validation, and the loader: separate from
the run so a scenario can be checked (and overridden from the CLI) before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from glove_ros.core.plan.janus import JanusConfig, make_trigger
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.world.worldfile import World, load_world, resolve_world_path

__all__ = [
    "BENCH_TRIGGERS",
    "EMBEDDERS",
    "ERROR_KINDS",
    "HELDOUT_KINDS",
    "LOOK_KINDS",
    "REHEARSED_HELDOUT",
    "UNREHEARSED_HELDOUT",
    "PERCEPTIONS",
    "SCORERS",
    "UPDATERS",
    "Arm",
    "Scenario",
    "load_scenario",
    "matched_spec",
    "scenario_from_dict",
]


PERCEPTIONS = ("symbolic", "camera")
#: injected update-error kinds; the first four are about what a look sees (where a block
#: is), the last four about what no look of experience memory can confirm: a place never
#: looked at, a corridor never driven, a lesson forgotten, the model's own free-text note
ERROR_KINDS = ("wrong_place", "stale_place", "overgeneral", "forget",
               "unvisited_place", "false_route", "forget_lesson", "reflection")
LOOK_KINDS = ERROR_KINDS[:4]
HELDOUT_KINDS = ("find", "fetch", "goto", "corridor", "cold_find", "cold_goto",
                 "cold_corridor")
#: held-out question types the gate's rehearsal also asks (the first goal of a find) ...
REHEARSED_HELDOUT = ("find", "cold_find")
#: ... and the types it never rehearses (routes, corridors, the way back)
UNREHEARSED_HELDOUT = ("fetch", "goto", "corridor", "cold_goto", "cold_corridor")
#: trigger specs only the benchmark builds (not :func:`make_trigger`'s): ``clean`` (no gate,
#: no injected errors) and ``touches`` (compare when experience memory has any evidence
#: about what the update touches: the cheap experience-aware baseline)
BENCH_TRIGGERS = ("clean", "touches")
SCORERS = ("experience", "simulator")
UPDATERS = ("rule", "llm")
EMBEDDERS = ("onnx", "hashing")


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
        if self.trigger not in BENCH_TRIGGERS and matched_spec(self.trigger) is None:
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
    unvisited_place_rate: float = 0.0
    false_route_rate: float = 0.0
    forget_lesson_rate: float = 0.0
    reflection_rate: float = 0.0
    miss_threshold: int = 2
    janus: JanusConfig = field(default_factory=JanusConfig)
    arms: tuple[Arm, ...] = (Arm("never", "never"), Arm("momentum", "momentum"),
                             Arm("always", "always"))
    per_kind_arms: tuple[Arm, ...] = ()
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
        for key in (f"{k}_rate" for k in ERROR_KINDS):
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
        pk = [a.validate(self.janus).label for a in self.per_kind_arms]
        if len(set(pk)) != len(pk):
            raise ValueError(f"per_kind_arms labels must be unique, got {pk}")
        for a in self.per_kind_arms:
            if matched_spec(a.trigger) is not None or a.trigger == "clean":
                raise ValueError(f"per_kind_arms: {a.trigger!r} is not allowed there (no "
                                 "budget-matched or clean arms; the clean arm of arms: is "
                                 "the reference)")
        if self.per_kind_arms and "never" not in {a.trigger for a in self.per_kind_arms}:
            raise ValueError("per_kind_arms needs a never arm (the gains are paired against "
                             "it)")
        return self

    @property
    def error_rates(self) -> dict[str, float]:
        """Injected error kind -> probability per task."""
        return {k: float(getattr(self, f"{k}_rate")) for k in ERROR_KINDS}

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
            "per_kind_arms": [{"label": a.label, "trigger": a.trigger, "scorer": a.scorer}
                              for a in self.per_kind_arms],
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
                  "eval_every", "heldout_fraction", "updater", "janus", "arms",
                  "per_kind_arms"}
_UPDATER_KEYS = {"kind", "miss_threshold", *(f"{k}_rate" for k in ERROR_KINDS)}
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
    if "per_kind_arms" in data:
        pka = data["per_kind_arms"]
        if not isinstance(pka, list):
            raise ValueError("per_kind_arms must be a list")
        kw["per_kind_arms"] = tuple(_arm(a, i) for i, a in enumerate(pka))
    for key in (*(f"{k}_rate" for k in ERROR_KINDS), "miss_threshold"):
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
