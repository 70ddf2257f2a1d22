"""FrozenLake drift benchmark: GLOVE against the paper's memory-update baselines.

Every method drives the same memory-driven agent on gymnasium's FrozenLake-v1; only the
memory update rule differs (glove_ros/core/verify/memory_rules.py). The agent is told the grid and
where the goal is; what each action does it knows only from its memory of (state, action)
-> outcome transitions. It runs value iteration over the believed outcomes (goal +1, hole
-hole_penalty); an action memory knows nothing about is assumed to make its intended move
(free-space assumption, worth unknown_trust times that), into a hole if memory holds the
target tile is one. So it follows a remembered route, explores toward the goal, and never
takes an action its memory says ends in a hole. When no believed route is left it is
stuck: it asks its memory rule for probes (GLOVE re-tests stale negative memories),
otherwise it wanders on the moves it believes safest until the episode's step limit.

Phases: a source phase (learning, no budget), then drift phases, each rebuilding the env
from the previous map with some tiles changed. One interaction budget covers all drift
phases: every task step and every probe step (a reset of a second env and a replay along
remembered moves to (s, a), then a; replay steps are charged but only the probed outcome
is handed to memory) is charged to it; an episode the budget cannot finish is a failure.
A probe cap bounds the probe steps within it (paper: B = 310 = 280 task + 30 probe).
For a phase that re-opens a hole the benchmark reports the self-confirming deadlock: the
method's memory believed an entry to the re-opened tile to be a hole at the start of the
phase, still believes it at the end, neither the agent nor a probe ever tried that entry
again, and it cost: at the start of one of the phase's episodes, the route memory believed
in from the start tile was longer than with those entries corrected (or there was none), so
the memory itself forced a detour while the method had an episode to re-test it in. A
wrong memory that cost nothing (another route is as short) is reported apart as
``stale_kept``. ``deadlock_at_end`` keeps the earlier reading (kept, and the believed route
at the end of the phase longer than the world's shortest, for any reason).

The agent hands its memory rule two hooks, the same for every rule: ``on_stuck`` when no
believed route is left, and ``on_blocked(pairs)`` when remembered falls are all that stand
between it and a shorter route (GLOVE re-tests those not re-confirmed since its latest
dissonance; the local rules keep what they believe).

Scenario YAML keys (unknown keys are errors):

  name               str, optional; results go to frozenlake_<name>.json (default: the
                     file name without .yaml and without a leading "frozenlake_")
  description        str, optional
  map                list of equal-length rows over S F H G: one S, at least one G
  is_slippery        bool (default false)
  success_rate       float in (0, 1], slippery only: probability of the intended move
                     (default 1/3, gymnasium's)
  seed               int (default 0)
  max_episode_steps  int >= 1 (default 4 * rows * cols)
  source             {episodes: int >= 1}: the learning phase, not charged to the budget
  drift              list (>= 1) of {name: str, episodes: int >= 1,
                     set: list of {row: int, col: int, tile: H or F}}; each phase changes
                     the previous phase's map; S and G tiles cannot change
  budget             {total: int >= 1, probe_cap: int >= 0 (default: total)}
  agent              {gamma: (0, 1) default 0.95, unknown_trust: (0, 1] default 0.9,
                     hole_penalty: >= 0 default 1.0, prior_weight: >= 0 default 0}
  glove              mapping passed to the core VerifierConfig (e.g. epsilon, delta,
                     p_th, outcome_modes); keys are checked against it
  methods            list of method names run by default (default: all)
  paper              optional reference numbers {method: {phase: "16/20"}} for the table

Output per method and phase: successes/episodes, task steps, probe steps, alerts, budget
exhaustion and the deadlock flag; a table (or JSON with --json), and
<out>/frozenlake_<name>.json plus a PNG of success per phase per method
(frozenlake_<name>_llm.* with --policy llm).

JSON shape:

  {"benchmark": "frozenlake", "policy": "greedy" | "llm",
   "scenario": {name, file, description, map, phase_maps: {phase: rows}, is_slippery,
                success_rate, seed, max_episode_steps, budget: {total, probe_cap},
                agent: {...}, glove: {...}},
   "phases": ["source", <drift phase names>...],
   "methods": {<method>: {
       "phases": [{phase, episodes, successes, success_rate, task_steps, probe_steps,
                   probes, alerts, decisions, budget_exhausted_episodes,
                   reopened_tiles: [[row, col]], negative_entries: [[state, action]],
                   entry_retries_task, entry_retries_probe,
                   deadlock: true | false | null (no tile re-opened in this phase),
                   stale_kept: true | false | null, first_contact_falls,
                   unmet_hole_falls}],
       "drift_successes", "drift_episodes",
       "budget_used": {task, probe, left}, "rule_stats": {...},
       "llm": {calls, fallbacks} (policy llm only)}},
   "paper": {<method>: {<phase>: "k/n"}}}
"""

from __future__ import annotations

import argparse
import heapq
import importlib.util
import json
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.core.verify.memory_rules import MemoryRule, ProbeTarget, make_rule, rule_names

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
ACTION_NAMES = ("left", "down", "right", "up")
_MOVES = {LEFT: (0, -1), DOWN: (1, 0), RIGHT: (0, 1), UP: (-1, 0)}
GOAL, HOLE, ICE = "goal", "hole", "ice"

DEFAULT_OUT = Path("bench/results")
TOL = 1e-9
_GOAL_NODE = -1  # the route search's one node for every goal outcome


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the key and what is allowed."""


# --------------------------------------------------------------------------- scenario


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
        if m not in rule_names():
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
        raise ScenarioError("the glove section needs glove_ros.core.verify.verifier, "
                            "which is missing")
    for key in glove:
        if key not in fields_:
            raise ScenarioError(
                f"unknown key {key!r} in glove; VerifierConfig fields: {', '.join(fields_)}"
                + (" (mode is set by the method name)" if key == "mode" else "")
            )
    from glove_ros.core.verify.verifier import VerifierConfig

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


# --------------------------------------------------------------------------- world


def make_env(desc: Sequence[str], scenario: Scenario) -> Any:
    """gymnasium's FrozenLake-v1 on ``desc`` (imported lazily: an optional dependency)."""
    import gymnasium as gym

    kwargs: dict[str, Any] = {"desc": list(desc), "is_slippery": scenario.is_slippery,
                              "max_episode_steps": scenario.max_episode_steps}
    if scenario.is_slippery:
        kwargs["success_rate"] = scenario.success_rate
    return gym.make("FrozenLake-v1", **kwargs)


def true_model(env: Any) -> dict[tuple[int, int], dict[tuple[int, str], float]]:
    """The true outcome distribution of every (state, action) of a FrozenLake env."""
    table = env.unwrapped.P
    out: dict[tuple[int, int], dict[tuple[int, str], float]] = {}
    for s, actions in table.items():
        for a, branches in actions.items():
            dist: dict[tuple[int, str], float] = {}
            for p, nxt, reward, term in branches:
                if p > 0:
                    o = outcome_of(nxt, reward, term)
                    dist[o] = dist.get(o, 0.0) + p
            out[(int(s), int(a))] = dist
    return out


def outcome_of(next_state: int, reward: float, terminated: bool) -> tuple[int, str]:
    """The outcome signature the memories store: (next state, goal | hole | ice)."""
    if terminated:
        return (int(next_state), GOAL if reward > 0 else HOLE)
    return (int(next_state), ICE)


def move(state: int, action: int, nrow: int, ncol: int) -> int:
    """The intended (non-slipping) successor of ``state`` under ``action``."""
    r, c = divmod(state, ncol)
    dr, dc = _MOVES[action]
    r = min(max(r + dr, 0), nrow - 1)
    c = min(max(c + dc, 0), ncol - 1)
    return r * ncol + c


# --------------------------------------------------------------------------- agent


class MemoryAgent:
    """Plans on a memory rule's beliefs plus task knowledge: the grid and the goal tiles.

    Memory is the only source of what an action does. A pair the memory knows nothing about
    is planned with the free-space assumption: it is believed to make its intended move,
    into a hole if memory holds that its target tile is a hole (a remembered fall into a tile
    generalises to every way into it), and it is worth ``unknown_trust`` times that. The
    agent is stuck when no believed route reaches a goal; it then wanders on the moves it
    believes least likely to end in a hole.
    """

    def __init__(self, nrow: int, ncol: int, goals: Sequence[int], config: AgentConfig) -> None:
        self.nrow, self.ncol = nrow, ncol
        self.n_states = nrow * ncol
        self.goals = frozenset(goals)
        self.cfg = config

    def beliefs(self, rule: MemoryRule) -> dict[tuple[int, int], dict[Hashable, float] | None]:
        """The rule's believed outcome distribution of every (state, action).

        With ``prior_weight`` w > 0 a belief resting on n samples is blended with the
        intended move, (n * memory + w * intended) / (n + w): a pair seen once is not taken
        as certain (slippery worlds). The intended move is left out when memory holds a hole
        at its target (what the agent planned never happens there)."""
        out = {}
        w = self.cfg.prior_weight
        for s in range(self.n_states):
            for a in range(4):
                dist = rule.distribution(s, a)
                if dist and w > 0:
                    n = rule.support(s, a)
                    nxt = move(s, a, self.nrow, self.ncol)
                    kind = GOAL if nxt in self.goals else ICE
                    if (nxt, HOLE) not in dist:
                        mixed = {o: p * n / (n + w) for o, p in dist.items()}
                        mixed[(nxt, kind)] = mixed.get((nxt, kind), 0.0) + w / (n + w)
                        dist = mixed
                out[(s, a)] = dist
        return out

    @staticmethod
    def hole_tiles(beliefs: dict) -> set[int]:
        """Tiles memory believes are holes: some pair most likely falls into them."""
        out = set()
        for dist in beliefs.values():
            if dist:
                for (nxt, kind), p in dist.items():
                    if kind == HOLE and p >= 0.5:
                        out.add(nxt)
        return out

    def model(self, state: int, action: int, beliefs: dict,
              holes: set[int]) -> tuple[dict[Hashable, float], bool]:
        """Believed outcome distribution of a pair, and whether it is a free-space guess."""
        dist = beliefs[(state, action)]
        if dist:
            return dist, False
        nxt = move(state, action, self.nrow, self.ncol)
        kind = HOLE if nxt in holes else GOAL if nxt in self.goals else ICE
        return {(nxt, kind): 1.0}, True

    def q_values(self, beliefs: dict) -> np.ndarray:
        """Value iteration over the believed model (goal +1, hole -hole_penalty)."""
        n = self.n_states
        holes = self.hole_tiles(beliefs)
        g = self.cfg.gamma
        reward = np.zeros(n * 4)  # immediate value of goal / hole outcomes
        trust = np.ones(n * 4)
        rows: list[int] = []
        cols: list[int] = []
        probs: list[float] = []
        for s in range(n):
            for a in range(4):
                dist, guessed = self.model(s, a, beliefs, holes)
                i = s * 4 + a
                if guessed:
                    trust[i] = self.cfg.unknown_trust
                for (nxt, kind), p in dist.items():
                    if kind == GOAL:
                        reward[i] += p
                    elif kind == HOLE:
                        reward[i] -= p * self.cfg.hole_penalty
                    else:
                        rows.append(i)
                        cols.append(int(nxt))
                        probs.append(p)
        trans = np.zeros((n * 4, n))
        np.add.at(trans, (np.array(rows, dtype=int), np.array(cols, dtype=int)),
                  np.array(probs, dtype=float))
        v = np.zeros(n)
        q = reward * trust
        for _ in range(1000):
            q = (reward + g * (trans @ v)) * trust
            new_v = q.reshape(n, 4).max(axis=1)
            if np.max(np.abs(new_v - v)) < 1e-10:
                v = new_v
                break
            v = new_v
        return q.reshape(n, 4)

    def stuck(self, state: int, beliefs: dict) -> bool:
        """True when no believed route (memory, or free-space guesses) reaches a goal."""
        holes = self.hole_tiles(beliefs)
        seen = {state}
        queue = deque([state])
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist, _ = self.model(s, a, beliefs, holes)
                for (nxt, kind), p in dist.items():
                    if p <= 0:
                        continue
                    if kind == GOAL:
                        return False
                    if kind == ICE and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
        return True

    def reachable(self, state: int, beliefs: dict) -> set[int]:
        """States the agent believes it can reach from ``state`` (free-space guesses too)."""
        holes = self.hole_tiles(beliefs)
        seen = {state}
        queue = deque([state])
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist, _ = self.model(s, a, beliefs, holes)
                for (nxt, kind), p in dist.items():
                    if p > 0 and kind == ICE and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
        return seen

    def _route_length(self, state: int, beliefs: dict, holes: set[int], optimistic: bool,
                      kept: frozenset[int] = frozenset(), guess_cost: float = 0.0
                      ) -> tuple[float, list[tuple[int, int]]]:
        """Cheapest way to a goal over believed ice transitions, and the pairs used; a pair
        believed more likely than not to end in a hole is no move at all.

        Every move costs 1, a free-space guess ``1 + guess_cost`` (0: the fewest moves).
        ``optimistic``: such a pair (remembered, or guessed into a remembered hole tile) is
        planned as its intended move instead (a remembered one as a known move: the route
        as it would be were that memory wrong), unless it leads into a tile of ``kept``
        (holes memory was asked about and stands by)."""
        goal = _GOAL_NODE
        prev: dict[int, tuple[int, int]] = {}
        best = {state: 0.0}
        heap = [(0.0, 0, state)]  # (cost, push order: ties go first-found, as in a BFS)
        pushed = 0
        while heap:
            d, _, s = heapq.heappop(heap)
            if s == goal:
                path = [prev[goal]]
                while path[-1][0] != state:
                    path.append(prev[path[-1][0]])
                return d, path[::-1]
            if d > best[s]:
                continue
            for a, cost, nodes in self._moves(s, beliefs, holes, optimistic, kept, guess_cost):
                step = d + cost
                for node in nodes:
                    if step >= best.get(node, math.inf):
                        continue
                    best[node] = step
                    prev[node] = (s, a)
                    pushed += 1
                    heapq.heappush(heap, (step, pushed, node))
        return math.inf, []

    def _moves(self, s: int, beliefs: dict, holes: set[int], optimistic: bool,
               kept: frozenset[int], guess_cost: float
               ) -> Iterator[tuple[int, float, list[int]]]:
        """The route search's moves from ``s``: (action, cost, nodes it may reach), a goal
        outcome as ``_GOAL_NODE`` (see :meth:`_route_length`)."""
        for a in range(4):
            dist, guessed = self.model(s, a, beliefs, holes)
            nxt = move(s, a, self.nrow, self.ncol)
            if self.hole_risk(dist) >= 0.5:  # the agent never takes such a move
                if not optimistic or nxt in kept:
                    continue
                dist = {(nxt, GOAL if nxt in self.goals else ICE): 1.0}
            nodes = [_GOAL_NODE if kind == GOAL else nxt for (nxt, kind), p in dist.items()
                     if p > 0 and kind in (GOAL, ICE)]
            if nodes:
                yield a, 1.0 + (guess_cost if guessed else 0.0), nodes

    def _cheapest_route_pairs(self, state: int, beliefs: dict, holes: set[int],
                              kept: frozenset[int], guess_cost: float) -> set[tuple[int, int]]:
        """Every pair on some cheapest optimistic route from ``state`` to a goal (all the
        routes that tie, not only the first found; empty when there is none)."""
        edges: list[tuple[int, int, float, list[int]]] = []
        frm = {state: 0.0}
        heap = [(0.0, state)]
        while heap:
            d, s = heapq.heappop(heap)
            if d > frm[s] or s == _GOAL_NODE:
                continue
            for a, cost, nodes in self._moves(s, beliefs, holes, True, kept, guess_cost):
                edges.append((s, a, cost, nodes))
                for node in nodes:
                    if d + cost < frm.get(node, math.inf):
                        frm[node] = d + cost
                        heapq.heappush(heap, (d + cost, node))
        total = frm.get(_GOAL_NODE, math.inf)
        if not math.isfinite(total):
            return set()
        to_goal = {_GOAL_NODE: 0.0}  # cheapest cost on to a goal, over the same moves
        changed = True
        while changed:  # Bellman-Ford over at most n_states nodes
            changed = False
            for s, _a, cost, nodes in edges:
                via = min(cost + to_goal.get(n, math.inf) for n in nodes)
                if via < to_goal.get(s, math.inf) - TOL:
                    to_goal[s] = via
                    changed = True
        return {(s, a) for s, a, cost, nodes in edges
                if any(abs(frm[s] + cost + to_goal.get(n, math.inf) - total) <= TOL
                       for n in nodes)}

    def blocking_pairs(self, state: int, beliefs: dict,
                       kept: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        """Remembered failures that stand between ``state`` and a shorter route.

        Empty unless ignoring what memory says ends in a hole (but the ``kept`` tiles)
        would shorten the way to a goal (the agent detours, or is stuck); then the
        remembered pairs whose failure blocks that shorter route: the pair itself, and the
        pairs that remember falling into the same tile.

        Routes are compared as the planner values them: a move memory knows nothing about is
        worth ``unknown_trust`` of a known one, so it costs ln(unknown_trust) / ln(gamma)
        moves more; a remembered failure is planned as a known move (the route were that
        memory wrong). A route through unexplored tiles is a guess: a remembered failure
        that alone stands in the way of a known route is worth asking about before the agent
        explores round it. When memory leaves no route at all, the remembered failures on
        every cheapest route are named (any of them is as good a way on)."""
        holes = self.hole_tiles(beliefs)
        guess = self._guess_cost()
        believed, _ = self._route_length(state, beliefs, holes, False, guess_cost=guess)
        free, path = self._route_length(state, beliefs, holes, True, kept, guess)
        if not free < believed:
            return []
        if not math.isfinite(believed):
            # memory leaves no route at all: every cheapest route is as good a way on, so
            # the remembered falls on all of them are named, not those of the first found
            path = sorted(self._cheapest_route_pairs(state, beliefs, holes, kept, guess))
        out: list[tuple[int, int]] = []
        for s, a in path:
            dist, guessed = self.model(s, a, beliefs, holes)
            if self.hole_risk(dist) < 0.5:
                continue
            if not guessed:
                out.append((s, a))
            # a remembered fall into a tile blocks every way into it
            tile = move(s, a, self.nrow, self.ncol)
            out += [pair for pair, d in beliefs.items() if d and any(
                nxt == tile and kind == HOLE and p >= 0.5 for (nxt, kind), p in d.items())]
        return sorted(set(out))

    def _guess_cost(self) -> float:
        """Extra moves a free-space guess is worth: ln(unknown_trust) / ln(gamma)."""
        return math.log(self.cfg.unknown_trust) / math.log(self.cfg.gamma)

    def route_known(self, state: int, beliefs: dict) -> bool:
        """Whether memory leaves a route to a goal from ``state`` at all (over moves not
        believed more likely than not to end in a hole, free-space guesses included)."""
        holes = self.hole_tiles(beliefs)
        cost, _ = self._route_length(state, beliefs, holes, False,
                                     guess_cost=self._guess_cost())
        return math.isfinite(cost)

    @staticmethod
    def hole_risk(dist: dict[Hashable, float] | None) -> float:
        """Believed probability that a pair ends in a hole (0 for unknown pairs)."""
        if not dist:
            return 0.0
        return sum(p for (_, kind), p in dist.items() if kind == HOLE)

    def choose(self, state: int, beliefs: dict, tried: dict[tuple[int, int], int]) -> int:
        """The agent's action: best believed value, or a safe wander when stuck."""
        if self.stuck(state, beliefs):
            holes = self.hole_tiles(beliefs)
            risks = [self.hole_risk(self.model(state, a, beliefs, holes)[0]) for a in range(4)]
            best = min(risks)
            options = [a for a in range(4) if risks[a] <= best + TOL]
            return min(options, key=lambda a: (tried.get((state, a), 0), a))
        q = self.q_values(beliefs)[state]
        best = q.max()
        return int(min(a for a in range(4) if q[a] >= best - TOL))

    def path_to(self, start: int, target: int, beliefs: dict) -> list[int] | None:
        """Shortest action sequence from ``start`` to ``target`` over remembered moves
        (most likely outcome of each pair), or None when memory knows no such route."""
        if start == target:
            return []
        prev: dict[int, tuple[int, int]] = {}
        queue = deque([start])
        seen = {start}
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist = beliefs[(s, a)]
                if not dist:
                    continue
                (nxt, kind), _ = max(dist.items(), key=lambda kv: kv[1])
                if kind != ICE or nxt in seen:
                    continue
                seen.add(nxt)
                prev[nxt] = (s, a)
                if nxt == target:
                    actions = []
                    cur = nxt
                    while cur != start:
                        ps, pa = prev[cur]
                        actions.append(pa)
                        cur = ps
                    return actions[::-1]
                queue.append(nxt)
        return None


# --------------------------------------------------------------------------- one run


@dataclass
class Budget:
    """The drift phases' interaction budget: task and probe steps share ``total``."""

    total: int
    probe_cap: int
    task_used: int = 0
    probe_used: int = 0

    @property
    def left(self) -> int:
        """Steps left for anything."""
        return self.total - self.task_used - self.probe_used

    def can_probe(self) -> bool:
        """One more probe step fits both the total and the probe cap."""
        return self.left > 0 and self.probe_used < self.probe_cap


@dataclass
class PhaseResult:
    """What one method did in one phase."""

    phase: str
    episodes: int
    successes: int = 0
    task_steps: int = 0
    probe_steps: int = 0
    probes: int = 0
    alerts: int = 0
    decisions: int = 0
    budget_exhausted_episodes: int = 0
    reopened_tiles: list[list[int]] = field(default_factory=list)
    negative_entries: list[list[int]] = field(default_factory=list)
    entry_retries_task: int = 0
    entry_retries_probe: int = 0
    deadlock: bool | None = None
    stale_kept: bool | None = None
    #: episode starts at which the re-opened tile's stale negative memory made the believed
    #: route from the start longer than the same memory with those entries corrected
    costly_episodes: int = 0
    #: the earlier, end-of-phase reading of a deadlock (kept, and the believed route at the
    #: end of the phase longer than the world's shortest for any reason), for comparison
    deadlock_at_end: bool | None = None
    #: failed episodes that ended in the first fall into a tile that became a hole in this
    #: phase: what no method that learns from experience can avoid (the oracle is told)
    first_contact_falls: int = 0
    #: failed episodes that ended in the first fall into a hole that was already one before
    #: this phase but that the agent had never fallen into since it last changed (a hole
    #: met on a new route): no memory can hold it either
    unmet_hole_falls: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (see the README's JSON shape)."""
        return {
            "phase": self.phase,
            "episodes": self.episodes,
            "successes": self.successes,
            "success_rate": self.successes / self.episodes if self.episodes else 0.0,
            "task_steps": self.task_steps,
            "probe_steps": self.probe_steps,
            "probes": self.probes,
            "alerts": self.alerts,
            "decisions": self.decisions,
            "budget_exhausted_episodes": self.budget_exhausted_episodes,
            "reopened_tiles": self.reopened_tiles,
            "negative_entries": self.negative_entries,
            "entry_retries_task": self.entry_retries_task,
            "entry_retries_probe": self.entry_retries_probe,
            "deadlock": self.deadlock,
            "stale_kept": self.stale_kept,
            "costly_episodes": self.costly_episodes,
            "deadlock_at_end": self.deadlock_at_end,
            "first_contact_falls": self.first_contact_falls,
            "unmet_hole_falls": self.unmet_hole_falls,
        }


class Runner:
    """Runs one method (one memory rule) through the scenario's phases."""

    def __init__(self, scenario: Scenario, rule: MemoryRule, policy: Any = None) -> None:
        self.sc = scenario
        self.rule = rule
        goals = [r * scenario.ncol + c for r, row in enumerate(scenario.map)
                 for c, ch in enumerate(row) if ch == "G"]
        self.agent = MemoryAgent(scenario.nrow, scenario.ncol, goals, scenario.agent)
        self.policy = policy
        self.step = 0  # global interaction step (task and probe), all phases
        self.budget: Budget | None = None
        self._track: set[tuple[int, int]] = set()
        self._result: PhaseResult | None = None
        self._new_holes: set[int] = set()  # tiles that became holes in this phase
        self._met: set[int] = set()  # holes fallen into since they last changed kind

    # ---- probing
    def _run_probes(self, targets: Sequence[ProbeTarget], probe_env: Any) -> None:
        for target in targets:
            outcomes = []
            attempts = 0
            while len(outcomes) < target.count and attempts < 2 * target.count:
                attempts += 1
                got = self._probe_once(target, probe_env)
                if got is None:
                    break
                if got is not False:
                    outcomes.append(got)
            self.rule.apply_probes(target, outcomes)

    def _probe_once(self, target: ProbeTarget, env: Any) -> Any:
        """One probe episode on the probe env: reset, replay to state, take action.

        Returns the outcome, False when the replay went astray (steps still charged), or
        None when no probe can be made (budget or probe cap spent, or no known route)."""
        res = self._result
        assert res is not None
        if self.budget is not None and not self.budget.can_probe():
            return None
        obs, _ = env.reset()
        state = int(obs)
        for _ in range(self.sc.max_episode_steps):
            if self.budget is not None and not self.budget.can_probe():
                return None
            if state == target.state:
                action = int(target.action)
            else:
                path = self.agent.path_to(state, int(target.state), self.agent.beliefs(self.rule))
                if path is None:
                    return None
                action = path[0]
            nxt, reward, term, trunc, _ = env.step(action)
            self._charge_probe()
            if state == target.state:
                res.probes += 1
                if (state, action) in self._track:
                    res.entry_retries_probe += 1
                return outcome_of(nxt, reward, term)
            state = int(nxt)
            if term or trunc:
                return False
        return False

    def _charge_probe(self) -> None:
        assert self._result is not None
        self._result.probe_steps += 1
        self.step += 1
        if self.budget is not None:
            self.budget.probe_used += 1

    # ---- episodes
    def _episode(self, env: Any, probe_env: Any, seed: int | None) -> tuple[bool, bool]:
        """Run one task episode; returns (success, ran out of budget)."""
        res = self._result
        assert res is not None
        if self.budget is not None and self.budget.left <= 0:
            return False, True
        obs, _ = env.reset(seed=seed)
        state = int(obs)
        tried: dict[tuple[int, int], int] = {}
        asked_stuck: set[int] = set()
        asked_blocked: set[tuple[tuple[int, int], ...]] = set()
        for _ in range(self.sc.max_episode_steps):
            if self.budget is not None and self.budget.left <= 0:
                return False, True
            beliefs = self.agent.beliefs(self.rule)
            if state not in asked_stuck and self.agent.stuck(state, beliefs):
                asked_stuck.add(state)
                targets = self.rule.on_stuck(state, self.step,
                                             self.agent.reachable(state, beliefs))
                if targets:
                    self._run_probes(targets, probe_env)
                    beliefs = self.agent.beliefs(self.rule)
                    if self.budget is not None and self.budget.left <= 0:
                        return False, True
            beliefs, exhausted = self._ask_blocked(state, beliefs, probe_env, asked_blocked)
            if exhausted:
                return False, True
            if self.policy is not None:
                action = self.policy.choose(self, state, beliefs, tried)
            else:
                action = self.agent.choose(state, beliefs, tried)
            tried[(state, action)] = tried.get((state, action), 0) + 1
            res.decisions += 1
            if (state, action) in self._track:
                res.entry_retries_task += 1
            nxt, reward, term, trunc, _ = env.step(action)
            res.task_steps += 1
            if self.budget is not None:
                self.budget.task_used += 1
            self.rule.observe(state, action, outcome_of(nxt, reward, term), float(reward),
                              self.step)
            self.step += 1
            targets = self.rule.probe_requests()
            if targets:
                self._run_probes(targets, probe_env)
            if term:
                nxt_i = int(nxt)
                if reward <= 0 and nxt_i not in self._met:  # first fall since it changed
                    self._met.add(nxt_i)
                    if nxt_i in self._new_holes:
                        res.first_contact_falls += 1
                    else:
                        res.unmet_hole_falls += 1
                return reward > 0, False
            if trunc:
                return False, False
            state = int(nxt)
        return False, False

    def _ask_blocked(self, state: int, beliefs: dict, probe_env: Any,
                     asked: set[tuple[tuple[int, int], ...]]) -> tuple[dict, bool]:
        """The detour hook: hand the rule the remembered failures that block a shorter
        route (each set once per episode); where it stands by them, look for the next
        shorter route past them. Returns (beliefs, budget exhausted)."""
        kept: set[int] = set()
        no_route: bool | None = None  # beliefs stay the same until the loop returns
        while True:
            blocking = tuple(self.agent.blocking_pairs(state, beliefs, frozenset(kept)))
            if not blocking or blocking in asked:
                return beliefs, False
            asked.add(blocking)
            if no_route is None:
                no_route = not self.agent.route_known(state, beliefs)
            targets = self.rule.on_blocked(blocking, self.step, no_route=no_route)
            if targets:
                self._run_probes(targets, probe_env)
            now = self.agent.beliefs(self.rule)
            if self.budget is not None and self.budget.left <= 0:
                return now, True
            if targets or any(now[p] != beliefs[p] for p in blocking):
                return now, False
            kept |= {move(s, a, self.sc.nrow, self.sc.ncol) for s, a in blocking}

    def _route_from_start(self, desc: Sequence[str], model: Mapping[tuple[int, int], Any]
                          ) -> float:
        """Fewest possible moves from the start tile to a goal over ``model`` (beliefs or
        the true model; inf when there is no route)."""
        start = next(r * self.sc.ncol + c for r, row in enumerate(desc)
                     for c, ch in enumerate(row) if ch == "S")
        holes = self.agent.hole_tiles(model)
        return self.agent._route_length(start, model, holes, False)[0]

    def _route_longer_than_true(self, desc: Sequence[str],
                                truth: Mapping[tuple[int, int], Any]) -> bool:
        """Whether the route memory believes in from the start tile is longer than the
        world's shortest (both over possible moves; no believed route counts as longer)."""
        beliefs = self.agent.beliefs(self.rule)
        return self._route_from_start(desc, beliefs) > self._route_from_start(desc, truth)

    def _stale_costly(self, desc: Sequence[str], truth: Mapping[tuple[int, int], Any]) -> bool:
        """Whether the tracked stale negatives, if still believed and never re-tried this
        phase, make the believed route from the start tile longer than the same beliefs
        with those pairs corrected (their true outcomes): the memory itself, not other
        errors, is what costs the detour."""
        res = self._result
        assert res is not None
        if not self._track or res.entry_retries_task or res.entry_retries_probe:
            return False
        beliefs = self.agent.beliefs(self.rule)
        if not any(self.agent.hole_risk(beliefs[p]) >= 0.5 for p in self._track):
            return False
        fixed = {**beliefs, **{p: dict(truth[p]) for p in self._track}}
        return self._route_from_start(desc, beliefs) > self._route_from_start(desc, fixed)

    def _deadlock_setup(self, prev: Sequence[str] | None, cur: Sequence[str]) -> None:
        res = self._result
        assert res is not None
        self._track = set()
        if prev is None:
            return
        nrow, ncol = self.sc.nrow, self.sc.ncol
        reopened = [(r, c) for r in range(nrow) for c in range(ncol)
                    if prev[r][c] == "H" and cur[r][c] != "H"]
        res.reopened_tiles = [list(t) for t in reopened]
        if not reopened:
            return
        for r, c in reopened:
            tile = r * ncol + c
            for s in range(nrow * ncol):
                sr, sc_ = divmod(s, ncol)
                if cur[sr][sc_] in "HG" or s == tile:
                    continue
                for a in range(4):
                    if move(s, a, nrow, ncol) != tile:
                        continue
                    if self.agent.hole_risk(self.rule.distribution(s, a)) >= 0.5:
                        self._track.add((s, a))
        res.negative_entries = sorted([s, a] for s, a in self._track)

    def run(self) -> list[PhaseResult]:
        """Source phase then every drift phase; returns one result per phase."""
        maps = self.sc.maps()
        names = ["source", *[p.name for p in self.sc.phases]]
        episodes = [self.sc.source_episodes, *[p.episodes for p in self.sc.phases]]
        results = []
        for i, (name, desc, n_eps) in enumerate(zip(names, maps, episodes, strict=True)):
            learning = i == 0
            if i == 1:
                self.budget = Budget(self.sc.budget_total, self.sc.probe_cap)
            self._result = res = PhaseResult(name, n_eps)
            env = make_env(desc, self.sc)
            probe_env = make_env(desc, self.sc)
            if hasattr(self.rule, "set_world"):  # the oracle knows the true current world
                self.rule.set_world(true_model(env))
            self.rule.begin_phase(name, learning)
            self._deadlock_setup(maps[i - 1] if i else None, desc)
            changed = set() if not i else {
                r * self.sc.ncol + c for r, row in enumerate(desc) for c, ch in enumerate(row)
                if ch != maps[i - 1][r][c]}
            self._new_holes = {t for t in changed
                               if desc[t // self.sc.ncol][t % self.sc.ncol] == "H"}
            self._met -= changed  # a tile that changed kind is unmet again
            alerts0 = self.rule.alerts
            probe_env.reset(seed=self.sc.seed + 7919 * (i + 1))
            truth = true_model(env) if res.reopened_tiles else {}
            try:
                for ep in range(n_eps):
                    if res.reopened_tiles and self._stale_costly(desc, truth):
                        res.costly_episodes += 1
                    seed = self.sc.seed + 1000 * i if ep == 0 else None
                    ok, exhausted = self._episode(env, probe_env, seed)
                    res.successes += int(ok)
                    res.budget_exhausted_episodes += int(exhausted)
            finally:
                env.close()
                probe_env.close()
            res.alerts = self.rule.alerts - alerts0
            if res.reopened_tiles:
                # self-confirming: memory still believes the entry ends in a hole and never
                # tried it again (a rule that re-tested and dropped the belief is not stuck)
                still = [p for p in self._track
                         if self.agent.hole_risk(self.rule.distribution(*p)) >= 0.5]
                kept = bool(still) and (
                    res.entry_retries_task == 0 and res.entry_retries_probe == 0
                )
                # a deadlock: kept although it cost a longer route at the start of an
                # episode of this phase (so the rule had an episode to re-test it in)
                costly = kept and res.costly_episodes > 0
                res.deadlock = costly
                res.stale_kept = kept and not costly
                res.deadlock_at_end = kept and self._route_longer_than_true(desc, truth)
            results.append(res)
        return results


# --------------------------------------------------------------------------- benchmark


def run_benchmark(scenario: Scenario, methods: Sequence[str], policy: str = "greedy",
                  scenario_file: str = "", llm: Any = None, threads: int = 0,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every method on the scenario; returns the JSON-ready result document.

    ``llm`` (a glove_ros.core.llm.runtime JsonLlm) is used by ``policy="llm"``; by default the
    default GGUF is loaded with ``threads`` llama.cpp threads (0: half the cores).
    ``progress`` gets one line per finished method."""
    if policy not in ("greedy", "llm"):
        raise ValueError(f"unknown policy {policy!r}; choose greedy or llm")
    for name in methods:
        if name not in rule_names():
            raise ValueError(f"unknown method {name!r}; choose from {', '.join(rule_names())}")
    report: dict[str, Any] = {
        "benchmark": "frozenlake",
        "scenario": {
            "name": scenario.name,
            "file": scenario_file,
            "description": scenario.description,
            "map": list(scenario.map),
            "phase_maps": {n: list(m) for n, m in zip(
                ["source", *[p.name for p in scenario.phases]], scenario.maps(), strict=True)},
            "is_slippery": scenario.is_slippery,
            "success_rate": scenario.success_rate if scenario.is_slippery else 1.0,
            "seed": scenario.seed,
            "max_episode_steps": scenario.max_episode_steps,
            "budget": {"total": scenario.budget_total, "probe_cap": scenario.probe_cap},
            "agent": {"gamma": scenario.agent.gamma,
                      "unknown_trust": scenario.agent.unknown_trust,
                      "hole_penalty": scenario.agent.hole_penalty,
                      "prior_weight": scenario.agent.prior_weight},
            "glove": dict(scenario.glove),
        },
        "policy": policy,
        "phases": ["source", *[p.name for p in scenario.phases]],
        "methods": {},
        "paper": scenario.paper,
    }
    llm_policy = _make_policy(policy, llm, threads)
    t0 = time.monotonic()
    for i, name in enumerate(methods, 1):
        rule = make_rule(name, scenario.glove, is_negative=lambda o, r: o[1] == HOLE)
        calls0 = llm_policy.calls if llm_policy else 0
        fallbacks0 = llm_policy.fallbacks if llm_policy else 0
        try:
            runner = Runner(scenario, rule, llm_policy)
            phases = runner.run()
            rule_stats = rule.stats()
        finally:
            rule.close()
        budget = runner.budget
        drift = phases[1:]
        report["methods"][name] = {
            "phases": [p.to_json() for p in phases],
            "drift_successes": sum(p.successes for p in drift),
            "drift_episodes": sum(p.episodes for p in drift),
            "budget_used": {"task": budget.task_used if budget else 0,
                            "probe": budget.probe_used if budget else 0,
                            "left": budget.left if budget else scenario.budget_total},
            "rule_stats": rule_stats,
        }
        if llm_policy is not None:
            report["methods"][name]["llm"] = {
                "calls": llm_policy.calls - calls0,
                "fallbacks": llm_policy.fallbacks - fallbacks0,
            }
        if progress is not None:
            done = report["methods"][name]
            progress(f"{name}: {done['drift_successes']}/{done['drift_episodes']} drift "
                     f"successes ({i}/{len(methods)} methods, {time.monotonic() - t0:.0f} s)")
    return report


class LlmPolicy:
    """The agent's action choice through the local LLM (glove_ros.core.llm.runtime).

    The prompt gives the position, the goal and, for each of the four moves, what memory
    says it does and the memory planner's estimate; the reply is forced by a JSON schema to
    ``{"move": one of left/down/right/up}``. Every move is offered, remembered holes
    included: whether the model avoids them is part of what is measured. A failed reply
    (invalid JSON, timeout) falls back to the greedy planner's move and is counted.
    """

    def __init__(self, llm: Any) -> None:
        from glove_ros.core.llm.runtime import choice_schema

        self.llm = llm
        self.schema = choice_schema(list(ACTION_NAMES), key="move")
        self.calls = 0
        self.fallbacks = 0

    def prompt(self, agent: MemoryAgent, state: int, beliefs: dict) -> list[dict[str, str]]:
        """The chat messages for one decision."""
        holes = agent.hole_tiles(beliefs)
        q = agent.q_values(beliefs)[state]
        r, c = divmod(state, agent.ncol)
        goals = ", ".join(f"row {g // agent.ncol} col {g % agent.ncol}"
                          for g in sorted(agent.goals))
        lines = []
        for a, name in enumerate(ACTION_NAMES):
            dist = beliefs[(state, a)]
            if dist:
                parts = []
                for (nxt, kind), p in sorted(dist.items(), key=lambda kv: -kv[1]):
                    where = f"row {nxt // agent.ncol} col {nxt % agent.ncol}"
                    what = {GOAL: "reached the goal at", HOLE: "fell into a hole at",
                            ICE: "moved to"}[kind]
                    parts.append(f"{what} {where} ({p:.0%})")
                seen = "memory: " + "; ".join(parts)
            else:
                nxt = move(state, a, agent.nrow, agent.ncol)
                seen = (f"never tried; it should lead to row {nxt // agent.ncol} "
                        f"col {nxt % agent.ncol}")
                if nxt in holes:
                    seen += ", where memory has a hole"
            lines.append(f"- {name}: {seen}; planner estimate {q[a]:+.2f}")
        return [
            {"role": "system", "content": (
                f"You move an agent on a frozen lake, a grid of {agent.nrow} rows and "
                f"{agent.ncol} columns. Reach the goal. Stepping into a hole ends the "
                "episode as a failure. Answer with the next move as JSON.")},
            {"role": "user", "content": (
                f"You are at row {r} col {c}. The goal is at {goals}.\n"
                + "\n".join(lines) + "\nWhich move?")},
        ]

    def choose(self, runner: Runner, state: int, beliefs: dict,
               tried: dict[tuple[int, int], int]) -> int:
        """Ask the LLM for the move; the greedy planner's move if the reply is unusable."""
        self.calls += 1
        result = self.llm.complete_json(self.prompt(runner.agent, state, beliefs),
                                        self.schema, max_tokens=16)
        if result.ok:
            return ACTION_NAMES.index(result.data["move"])
        self.fallbacks += 1
        return runner.agent.choose(state, beliefs, tried)


def _make_policy(policy: str, llm: Any = None, threads: int = 0) -> LlmPolicy | None:
    if policy == "greedy":
        return None
    if policy == "llm":
        if llm is None:
            if importlib.util.find_spec("glove_ros.core.llm.runtime") is None:
                raise ValueError("--policy llm needs glove_ros/core/llm/runtime.py, which this "
                                 "checkout does not have; use --policy greedy")
            from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

            llm = LlamaBackend(LlmConfig(n_ctx=1024, max_tokens=16, temperature=0.0,
                                         n_threads=int(threads)))
        return LlmPolicy(llm)
    raise ValueError(f"unknown policy {policy!r}; choose greedy or llm")


def format_table(report: dict[str, Any]) -> str:
    """A readable table: success per phase, drift totals, steps, alerts, deadlock."""
    sc = report["scenario"]
    phases = report["phases"]
    drift_names = phases[1:]
    kind = "slippery" if sc["is_slippery"] else "deterministic"
    lines = [
        f"FrozenLake drift benchmark '{sc['name']}' ({len(sc['map'])}x{len(sc['map'][0])}, "
        f"{kind}, policy {report['policy']}); drift budget {sc['budget']['total']} steps "
        f"(probe cap {sc['budget']['probe_cap']})",
    ]
    head = ["method", *phases, "drift", "task", "probe", "alerts", "out-of-budget", "deadlock"]
    rows = [head]
    for name, m in report["methods"].items():
        ph = m["phases"]
        drift = ph[1:]
        dead = [p["phase"] for p in drift if p["deadlock"]]
        checked = [p for p in drift if p["deadlock"] is not None]
        rows.append([
            name,
            *[f"{p['successes']}/{p['episodes']}" for p in ph],
            f"{m['drift_successes']}/{m['drift_episodes']}",
            str(sum(p["task_steps"] for p in drift)),
            str(sum(p["probe_steps"] for p in drift)),
            str(sum(p["alerts"] for p in drift)),
            str(sum(p["budget_exhausted_episodes"] for p in drift)),
            ("yes (" + ",".join(dead) + ")") if dead else ("no" if checked else "-"),
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("task/probe/alerts/out-of-budget: totals over the drift phases "
                 f"({', '.join(drift_names)}); deadlock: a re-opened tile's remembered-hole "
                 "entry never re-tried in the phase although, at an episode start, it made "
                 "the believed route longer than the same memory with it corrected")
    if report.get("paper"):
        lines.append("paper (Qwen3-30B agent, B=310): " + "; ".join(
            f"{m} " + " ".join(f"{p}={v}" for p, v in vals.items())
            for m, vals in report["paper"].items()))
    return "\n".join(lines)


def write_plot(report: dict[str, Any], path: Path) -> None:
    """Grouped bars: success rate per phase per method (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = report["phases"]
    methods = list(report["methods"])
    fig, ax = plt.subplots(figsize=(10.0, 4.5))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(phases))
    for k, name in enumerate(methods):
        ph = report["methods"][name]["phases"]
        xs = x + (k - (len(methods) - 1) / 2) * width
        ax.bar(xs, [p["success_rate"] for p in ph], width, label=name)
        for xi, p in zip(xs, ph, strict=True):
            if p["deadlock"]:
                ax.text(xi, 0.02, "deadlock", rotation=90, ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels(phases)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    sc = report["scenario"]
    kind = "slippery" if sc["is_slippery"] else "deterministic"
    ax.set_title(f"FrozenLake '{sc['name']}' ({kind}): success per phase, drift budget "
                 f"{sc['budget']['total']} steps incl. probes")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="FILE",
                        help="scenario YAML (see bench/scenarios/frozenlake_*.yaml)")
    parser.add_argument("--policy", choices=("greedy", "llm"), default="greedy",
                        help="how the agent picks actions (default: greedy memory planner)")
    parser.add_argument("--methods", nargs="+", metavar="NAME",
                        help="memory rules to compare (space or comma separated; default: "
                        "the scenario's list, else all): " + ", ".join(rule_names()))
    parser.add_argument("--threads", type=int, default=0, metavar="N",
                        help="llama.cpp threads for --policy llm (default: 0, half the cores)")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where frozenlake_<name>[_llm].json and .png go "
                        "(default: %(default)s)")


def _parse_methods(raw: Sequence[str] | None, scenario: Scenario) -> list[str]:
    if not raw:
        return list(scenario.methods) or rule_names()
    names = [n.strip() for item in raw for n in item.split(",") if n.strip()]
    for n in names:
        if n not in rule_names():
            raise ValueError(f"unknown method {n!r}; choose from {', '.join(rule_names())}")
    return list(dict.fromkeys(names))


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; prints the table (or JSON) and writes JSON + PNG under --out."""
    scenario = load_scenario(args.scenario)
    methods = _parse_methods(args.methods, scenario)
    report = run_benchmark(scenario, methods, args.policy, str(args.scenario),
                           threads=args.threads,
                           progress=lambda line: print(f"[frozenlake] {line}", file=sys.stderr,
                                                       flush=True))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"frozenlake_{scenario.name}" + ("_llm" if args.policy == "llm" else "")
    json_path = out / f"{stem}.json"
    png_path = out / f"{stem}.png"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    write_plot(report, png_path)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report))
        print(f"wrote {json_path} and {png_path}", file=sys.stderr)
    return 0
