"""The task agent's vocabulary and small types: what every other agent module builds on.

Holds the transition vocabulary the agent speaks to experience memory (``ACTION_LOOK``,
``ACTION_NAVIGATE``, ``OUTCOME_REACHED`` / ``OUTCOME_BLOCKED`` and look outcome signatures read
by :func:`look_names`; the table is in :mod:`glove_ros.core.plan.agent`), the task
(:class:`Task`), the actions the agent asks its driver for (:class:`NavigateTo`,
:class:`Look`, :class:`Finish`) and what the robot knows a priori (:class:`WorldMap`).

Separate from :mod:`glove_ros.core.plan.agent` because the memory view
(:mod:`~glove_ros.core.plan.agent_memory`), the planners
(:mod:`~glove_ros.core.plan.agent_policy`), task parsing, plan-memory rehearsal and
consolidation all need these words and the map without the agent loop.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from glove_ros.core.memory.looks import look_names

__all__ = [
    "ACTION_LOOK",
    "ACTION_NAVIGATE",
    "OUTCOME_BLOCKED",
    "OUTCOME_DETOUR",
    "OUTCOME_REACHED",
    "AgentAction",
    "Finish",
    "Look",
    "NavigateTo",
    "Task",
    "WorldMap",
    "look_names",
]

#: action of a look at the current waypoint (outcome: ``colors=...``)
ACTION_LOOK = "look"
#: action of a one-corridor navigation (action_arg: the neighbour; outcome reached|blocked)
ACTION_NAVIGATE = "navigate_to"
OUTCOME_REACHED = "reached"
OUTCOME_BLOCKED = "blocked"
OUTCOME_DETOUR = "detour"  # arrived, but not along the corridor (Nav2 drove around it)


def _edge_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _pose_tuple(pose: Any) -> tuple[float, float, float] | None:
    """A pose as (x, y, yaw): accepts None, a 3-sequence or anything with x, y, yaw."""
    if pose is None:
        return None
    if all(hasattr(pose, k) for k in ("x", "y", "yaw")):
        values = (pose.x, pose.y, pose.yaw)
    else:
        try:
            values = tuple(pose)
        except TypeError:
            raise ValueError(f"pose must be (x, y, yaw) or have x, y, yaw; got {pose!r}") from None
    if len(values) != 3:
        raise ValueError(f"pose must have three values (x, y, yaw), got {pose!r}")
    out = tuple(float(v) for v in values)
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"pose must be finite, got {pose!r}")
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------- task and actions


@dataclass(frozen=True)
class Task:
    """A search task: find ``color``, the name a look reports when it sees the target: a
    colour block's colour ("red") or an object class ("cup", "dining table"; see
    :mod:`glove_ros.core.memory.looks`). ``id`` becomes the episode id."""

    color: str
    id: str = ""

    def validate(self) -> Task:
        """Raise ValueError for an empty target, one holding ``,`` ``=`` or ``*`` (no look
        could report it), or an id with a NUL."""
        if (not isinstance(self.color, str) or not self.color.strip()
                or any(c in self.color for c in ",=*")):
            raise ValueError(f"task target must be a non-empty colour or object class name "
                             f"without ',', '=' or '*', got {self.color!r}")
        if not isinstance(self.id, str) or "\x00" in self.id:
            raise ValueError(f"task id must be a string, got {self.id!r}")
        return self


@dataclass(frozen=True)
class NavigateTo:
    """Drive along one corridor to the neighbour ``waypoint``, on the way to ``goal``.

    ``avoid_edges`` are the corridors the agent routed around (for logging / a navigation
    stack that plans itself); ``reason`` says why ``goal`` was chosen.
    """

    waypoint: str
    goal: str
    reason: str = ""
    avoid_edges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Look:
    """Look at the current ``waypoint``: grab frames, detect blocks, report the signature."""

    waypoint: str


@dataclass(frozen=True)
class Finish:
    """The task is over: ``success`` and a one-line ``reason``."""

    success: bool
    reason: str


AgentAction = NavigateTo | Look | Finish


# --------------------------------------------------------------------------- the map


@dataclass(frozen=True)
class WorldMap:
    """What the robot knows a priori: waypoints with poses and corridors with lengths.

    Never the blocks, never which corridors are closed. Build it from a world with
    :meth:`from_world` (which reads only waypoints, edges and the dock) or directly.
    """

    waypoints: Mapping[str, tuple[float, float, float]]
    edges: Mapping[tuple[str, str], float]
    dock: str = ""

    def __post_init__(self) -> None:
        # one key per corridor, its two ends in sorted order, whatever order they were given
        # in: every lookup (``length``, the instruction checks) uses that key
        keyed: dict[tuple[str, str], float] = {}
        for (a, b), length in self.edges.items():
            k = _edge_key(a, b)
            if k in keyed and keyed[k] != length:
                raise ValueError(f"edge {a}-{b} is given twice with different lengths")
            keyed[k] = length
        object.__setattr__(self, "edges", keyed)
        adjacency: dict[str, list[tuple[str, float]]] = {w: [] for w in self.waypoints}
        for (a, b), length in self.edges.items():
            if a not in adjacency or b not in adjacency:
                raise ValueError(f"edge {a}-{b} names an unknown waypoint")
            if not (isinstance(length, (int, float)) and math.isfinite(length) and length > 0):
                raise ValueError(f"edge {a}-{b}: length must be > 0 m, got {length!r}")
            adjacency[a].append((b, float(length)))
            adjacency[b].append((a, float(length)))
        for lst in adjacency.values():
            lst.sort()
        object.__setattr__(self, "_adj", adjacency)

    @classmethod
    def from_world(cls, world: Any) -> WorldMap:
        """The map of a :class:`~glove_ros.core.world.worldfile.World`: waypoints, corridors, dock.

        The initial ``blocked`` flag of a corridor is ground truth and is not copied.
        """
        wps = {w.id: (float(w.x), float(w.y), float(w.yaw)) for w in world.waypoints}
        edges = {_edge_key(e.a, e.b): float(e.length) for e in world.edges}
        return cls(wps, edges, world.dock)

    @property
    def waypoint_ids(self) -> tuple[str, ...]:
        """Waypoint ids, sorted."""
        return tuple(sorted(self.waypoints))

    def has(self, waypoint: str) -> bool:
        """Whether ``waypoint`` is on the map."""
        return waypoint in self.waypoints

    def neighbors(self, waypoint: str) -> tuple[str, ...]:
        """Waypoints one corridor away, sorted."""
        return tuple(n for n, _ in self._adj[waypoint])  # type: ignore[attr-defined]

    def length(self, a: str, b: str) -> float | None:
        """Length of the corridor a-b, None if there is none."""
        return self.edges.get(_edge_key(a, b))

    def distances(self, start: str, avoid: Iterable[tuple[str, str]] = ()
                  ) -> tuple[dict[str, float], dict[str, str]]:
        """Dijkstra from ``start``: (distance by waypoint, predecessor by waypoint).

        ``avoid`` corridors (either order) are left out. Ties break by waypoint id.
        """
        if start not in self.waypoints:
            raise KeyError(f"unknown waypoint {start!r}")
        skip = {_edge_key(a, b) for a, b in avoid}
        best = {start: 0.0}
        prev: dict[str, str] = {}
        heap = [(0.0, start)]
        done: set[str] = set()
        while heap:
            d, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            for nxt, length in self._adj[node]:  # type: ignore[attr-defined]
                if _edge_key(node, nxt) in skip:
                    continue
                nd = d + length
                if nd < best.get(nxt, math.inf) - 1e-12:
                    best[nxt] = nd
                    prev[nxt] = node
                    heapq.heappush(heap, (nd, nxt))
        return {k: v for k, v in best.items() if k in done}, prev

    def shortest_path(self, start: str, goal: str, avoid: Iterable[tuple[str, str]] = ()
                      ) -> list[str] | None:
        """Waypoints from ``start`` to ``goal`` (both included), or None when cut off."""
        dist, prev = self.distances(start, avoid)
        if goal not in dist:
            return None
        path = [goal]
        while path[-1] != start:
            path.append(prev[path[-1]])
        return path[::-1]

