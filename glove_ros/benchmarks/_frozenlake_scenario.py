"""FrozenLake drift benchmark: the scenario file (YAML keys in frozenlake.py's docstring).

Loading and validating a scenario (the map, drift phases, budget, agent and GLOVE
settings) is its own concern, apart from the world, the agent and the run loop: the suite
builds scenarios with :func:`parse_scenario` without running the benchmark's CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from glove_ros.core.verify.memory_rules import rule_names
from glove_ros.core.verify.retest import is_rule_name


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the key and what is allowed."""


@dataclass(frozen=True)
class TileChange:
    """Set tile (row, col) to ``tile`` ("H" or "F") when a drift phase starts."""

    row: int
    col: int
    tile: str


@dataclass(frozen=True)
class PhaseSpec:
    """One drift phase: a name, an episode count and the tile changes it applies."""

    name: str
    episodes: int
    changes: tuple[TileChange, ...]


@dataclass(frozen=True)
class AgentConfig:
    """The memory-driven planner shared by every method."""

    gamma: float = 0.95
    unknown_trust: float = 0.9
    hole_penalty: float = 1.0
    prior_weight: float = 0.0

    def validate(self) -> None:
        """Raise ScenarioError if a value is out of range."""
        if not 0.0 < self.gamma < 1.0:
            raise ScenarioError(f"agent.gamma must be in (0, 1), got {self.gamma}")
        if not 0.0 < self.unknown_trust <= 1.0:
            raise ScenarioError(
                f"agent.unknown_trust must be in (0, 1], got {self.unknown_trust}"
            )
        if self.hole_penalty < 0.0:
            raise ScenarioError(f"agent.hole_penalty must be >= 0, got {self.hole_penalty}")
        if self.prior_weight < 0.0:
            raise ScenarioError(f"agent.prior_weight must be >= 0, got {self.prior_weight}")


@dataclass(frozen=True)
class Scenario:
    """A validated FrozenLake drift scenario (see the module docstring for the YAML)."""

    name: str
    map: tuple[str, ...]
    source_episodes: int
    phases: tuple[PhaseSpec, ...]
    budget_total: int
    probe_cap: int
    is_slippery: bool = False
    success_rate: float = 1.0 / 3.0
    seed: int = 0
    max_episode_steps: int = 0
    agent: AgentConfig = field(default_factory=AgentConfig)
    glove: dict[str, Any] = field(default_factory=dict)
    methods: tuple[str, ...] = ()
    paper: dict[str, dict[str, str]] = field(default_factory=dict)
    description: str = ""

    @property
    def nrow(self) -> int:
        """Number of map rows."""
        return len(self.map)

    @property
    def ncol(self) -> int:
        """Number of map columns."""
        return len(self.map[0])

    def maps(self) -> list[tuple[str, ...]]:
        """The map of the source phase followed by the map of each drift phase."""
        rows = [list(r) for r in self.map]
        out = [tuple("".join(r) for r in rows)]
        for phase in self.phases:
            for ch in phase.changes:
                rows[ch.row][ch.col] = ch.tile
            out.append(tuple("".join(r) for r in rows))
        return out


_TOP_KEYS = {
    "name", "description", "map", "is_slippery", "success_rate", "seed",
    "max_episode_steps", "source", "drift", "budget", "agent", "glove", "methods", "paper",
}
_REQUIRED = ("map", "source", "drift", "budget")


def _check_keys(obj: Any, where: str, allowed: set[str], required: Sequence[str] = ()) -> dict:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where} must be a mapping, got {type(obj).__name__}")
    unknown = sorted(str(k) for k in obj if k not in allowed)
    if unknown:
        raise ScenarioError(
            f"unknown key {unknown[0]!r} in {where}; allowed: {', '.join(sorted(allowed))}"
        )
    for key in required:
        if key not in obj:
            raise ScenarioError(f"missing key {key!r} in {where}")
    return obj


def _int(value: Any, where: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioError(f"{where} must be >= {minimum}, got {value}")
    return value


def _float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{where} must be a number, got {value!r}")
    return float(value)


def parse_scenario(data: Any, default_name: str = "scenario") -> Scenario:
    """Validate a scenario mapping (as loaded from YAML) and build a :class:`Scenario`."""
    data = _check_keys(data, "scenario", _TOP_KEYS, _REQUIRED)
    name = str(data.get("name", default_name))
    if not name or any(c in name for c in "/\\ "):
        raise ScenarioError(f"name must be a non-empty word without spaces or slashes: {name!r}")

    rows = data["map"]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, str) for r in rows):
        raise ScenarioError("map must be a non-empty list of strings (rows over S F H G)")
    if len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ScenarioError("map rows must all have the same, non-zero length")
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch not in "SFHG":
                raise ScenarioError(
                    f"map row {r} col {c}: bad tile {ch!r}; tiles are S (start), F (frozen), "
                    "H (hole), G (goal)"
                )
    flat = "".join(rows)
    if flat.count("S") != 1:
        raise ScenarioError(f"map needs exactly one S (start), found {flat.count('S')}")
    if "G" not in flat:
        raise ScenarioError("map needs at least one G (goal)")
    nrow, ncol = len(rows), len(rows[0])

    is_slippery = data.get("is_slippery", False)
    if not isinstance(is_slippery, bool):
        raise ScenarioError(f"is_slippery must be true or false, got {is_slippery!r}")
    success_rate = _float(data.get("success_rate", 1.0 / 3.0), "success_rate")
    if not 0.0 < success_rate <= 1.0:
        raise ScenarioError(f"success_rate must be in (0, 1], got {success_rate}")
    if "success_rate" in data and not is_slippery:
        raise ScenarioError("success_rate applies to slippery maps only; set is_slippery: true")
    seed = _int(data.get("seed", 0), "seed")
    max_steps = _int(data.get("max_episode_steps", 4 * nrow * ncol), "max_episode_steps", 1)

    source = _check_keys(data["source"], "source", {"episodes"}, ("episodes",))
    source_episodes = _int(source["episodes"], "source.episodes", 1)

    drift = data["drift"]
    if not isinstance(drift, list) or not drift:
        raise ScenarioError("drift must be a non-empty list of phases")
    phases: list[PhaseSpec] = []
    current = [list(r) for r in rows]
    for i, ph in enumerate(drift):
        where = f"drift[{i}]"
        ph = _check_keys(ph, where, {"name", "episodes", "set"}, ("episodes", "set"))
        pname = str(ph.get("name", f"drift_{i + 1}"))
        if pname == "source" or pname in {p.name for p in phases}:
            raise ScenarioError(f"{where}.name {pname!r} is reserved or used twice")
        episodes = _int(ph["episodes"], f"{where}.episodes", 1)
        if not isinstance(ph["set"], list):
            raise ScenarioError(f"{where}.set must be a list of {{row, col, tile}}")
        changes = []
        for j, ch in enumerate(ph["set"]):
            cw = f"{where}.set[{j}]"
            ch = _check_keys(ch, cw, {"row", "col", "tile"}, ("row", "col", "tile"))
            row = _int(ch["row"], f"{cw}.row")
            col = _int(ch["col"], f"{cw}.col")
            if not (0 <= row < nrow and 0 <= col < ncol):
                raise ScenarioError(
                    f"{cw}: ({row}, {col}) is outside the {nrow}x{ncol} map "
                    f"(rows 0..{nrow - 1}, cols 0..{ncol - 1})"
                )
            tile = ch["tile"]
            if tile not in ("H", "F"):
                raise ScenarioError(f"{cw}.tile must be H (hole) or F (frozen), got {tile!r}")
            if current[row][col] in "SG":
                raise ScenarioError(f"{cw}: ({row}, {col}) is {current[row][col]}; "
                                    "the start and goal tiles cannot change")
            current[row][col] = tile
            changes.append(TileChange(row, col, tile))
        phases.append(PhaseSpec(pname, episodes, tuple(changes)))

    budget = _check_keys(data["budget"], "budget", {"total", "probe_cap"}, ("total",))
    total = _int(budget["total"], "budget.total", 1)
    probe_cap = _int(budget.get("probe_cap", total), "budget.probe_cap", 0)
    if probe_cap > total:
        raise ScenarioError(f"budget.probe_cap ({probe_cap}) exceeds budget.total ({total})")

    agent_raw = _check_keys(data.get("agent", {}), "agent",
                            {"gamma", "unknown_trust", "hole_penalty", "prior_weight"})
    agent = AgentConfig(**{k: _float(v, f"agent.{k}") for k, v in agent_raw.items()})
    agent.validate()

    glove = data.get("glove", {}) or {}
    if not isinstance(glove, dict):
        raise ScenarioError("glove must be a mapping of VerifierConfig fields")
    if glove:
        _validate_glove(glove)

    methods = data.get("methods", [])
    if not isinstance(methods, list):
        raise ScenarioError("methods must be a list of method names")
    for m in methods:
        if not is_rule_name(m):
            raise ScenarioError(f"methods: unknown method {m!r}; choose from "
                                f"{', '.join(rule_names())}")
    paper = data.get("paper", {}) or {}
    if not isinstance(paper, dict) or not all(isinstance(v, dict) for v in paper.values()):
        raise ScenarioError("paper must map method names to {phase: 'k/n'}")

    return Scenario(
        name=name, map=tuple(rows), source_episodes=source_episodes, phases=tuple(phases),
        budget_total=total, probe_cap=probe_cap, is_slippery=is_slippery,
        success_rate=success_rate, seed=seed, max_episode_steps=max_steps, agent=agent,
        glove=dict(glove), methods=tuple(methods),
        paper={str(k): {str(p): str(s) for p, s in v.items()} for k, v in paper.items()},
        description=str(data.get("description", "")),
    )


def _validate_glove(glove: dict[str, Any]) -> None:
    """Check the glove mapping against the core VerifierConfig (its own validation)."""
    from glove_ros.core.verify.memory_rules import glove_config_fields

    fields_ = glove_config_fields()
    if fields_ is None:
        raise ScenarioError("the glove section needs glove_ros.core.verify.config, "
                            "which is missing")
    for key in glove:
        if key not in fields_:
            raise ScenarioError(
                f"unknown key {key!r} in glove; VerifierConfig fields: {', '.join(fields_)}"
                + (" (mode is set by the method name)" if key == "mode" else "")
            )
    from glove_ros.core.verify.config import VerifierConfig

    try:
        VerifierConfig.from_dict({**glove, "mode": "sync"})
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"glove: {exc}") from exc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scenario file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from exc
    stem = path.stem
    default = stem[len("frozenlake_"):] if stem.startswith("frozenlake_") else stem
    try:
        return parse_scenario(data, default_name=default or "scenario")
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
