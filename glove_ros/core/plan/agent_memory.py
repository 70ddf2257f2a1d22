"""The task agent's read side of experience memory: the memory view and the beliefs.

:class:`MemoryView` is the protocol through which planning reads trusted experience memory
(the node implements it with the ``query_memory`` service, the benchmark with
:class:`StoreMemoryView`); :class:`Beliefs` summarises what trusted look and navigation
memories say about waypoints (:class:`LookBelief`) and corridors (:class:`EdgeBelief`), the
evidence every planner ranks its options by.

Separate from :mod:`glove_ros.core.plan.agent` because reading and summarising memory is its
own concern, shared by the agent, the planners (:mod:`~glove_ros.core.plan.agent_policy`),
plan-memory rehearsal and the verifier's memory views, and testable without the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from glove_ros.core.memory.experience import MemoryEntry
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
    WorldMap,
    _edge_key,
    look_names,
)

__all__ = [
    "Beliefs",
    "EdgeBelief",
    "LookBelief",
    "MemoryView",
    "StoreMemoryView",
]


@runtime_checkable
class MemoryView(Protocol):
    """Read access to trusted experience memory (what the planner may retrieve).

    The agent calls ``trusted(action="look")`` and ``trusted(action="navigate_to")`` once per
    planning decision. Return every trusted entry of the filter; an implementation that caps
    the answer (the ``query_memory`` service's ``max_results``) must keep the newest ones,
    and beliefs then reflect only those.
    """

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """Trusted entries matching the filters (None matches everything), newest first."""
        ...


class StoreMemoryView:
    """:class:`MemoryView` over an :class:`~glove_ros.core.memory.store.ExperienceStore`.

    ``limit`` bounds the entries read per call (None: all), like the node's
    ``max_results``.
    """

    def __init__(self, store: Any, limit: int | None = None) -> None:
        self.store = store
        self.limit = limit

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """Trusted entries, newest first (``ExperienceStore.query``)."""
        entries, _ = self.store.query(state_key=state_key, action=action, limit=self.limit)
        return list(entries)


@dataclass(frozen=True)
class LookBelief:
    """What trusted look memories say about one waypoint.

    ``counts`` maps outcome signature -> trusted entries; ``last_id`` is the newest entry id
    (recency of the waypoint's memory).
    """

    waypoint: str
    counts: Mapping[str, int]
    last_id: int

    @property
    def n(self) -> int:
        """Number of trusted looks."""
        return sum(self.counts.values())

    def share(self, color: str) -> float:
        """Fraction of trusted looks that saw ``color``."""
        n = self.n
        if n == 0:
            return 0.0
        return sum(k for o, k in self.counts.items() if color in look_names(o)) / n

    @property
    def majority(self) -> str:
        """The most frequent outcome (ties: the lexically smallest)."""
        return min(self.counts, key=lambda o: (-self.counts[o], o)) if self.counts else ""


@dataclass(frozen=True)
class EdgeBelief:
    """What trusted navigation memories say about one corridor.

    ``directions`` maps (from, to) -> (reached, blocked) counts of trusted entries; the
    verifier keeps each direction as its own (state, action) group.
    """

    edge: tuple[str, str]
    directions: Mapping[tuple[str, str], tuple[int, int]]

    @property
    def reached(self) -> int:
        """Trusted ``reached`` entries, both directions."""
        return sum(r for r, _ in self.directions.values())

    @property
    def blocked(self) -> int:
        """Trusted ``blocked`` entries, both directions."""
        return sum(b for _, b in self.directions.values())

    @property
    def blocked_share(self) -> float:
        """The largest fraction of blocked attempts over the two directions (a corridor is
        as blocked as the more pessimistic direction remembers)."""
        return max((b / (r + b) for r, b in self.directions.values() if r + b), default=0.0)

    @property
    def blocked_keys(self) -> tuple[tuple[str, str, str], ...]:
        """(state_key, action, action_arg) of the directions with blocked memories."""
        return tuple(sorted((a, ACTION_NAVIGATE, b) for (a, b), (_, blk)
                            in self.directions.items() if blk))


@dataclass(frozen=True)
class Beliefs:
    """A snapshot of trusted memory, summarised for planning."""

    looks: Mapping[str, LookBelief]
    edges: Mapping[tuple[str, str], EdgeBelief]
    blocked_threshold: float = 1.0

    @classmethod
    def from_entries(cls, looks: Iterable[MemoryEntry], navs: Iterable[MemoryEntry],
                     world_map: WorldMap, blocked_threshold: float = 1.0) -> Beliefs:
        """Summarise trusted look and navigate_to entries; ones off the map are ignored."""
        counts: dict[str, dict[str, int]] = {}
        last: dict[str, int] = {}
        for e in looks:
            t = e.transition
            if t.action != ACTION_LOOK or not world_map.has(t.state_key):
                continue
            try:
                look_names(t.outcome)
            except ValueError:
                continue
            c = counts.setdefault(t.state_key, {})
            c[t.outcome] = c.get(t.outcome, 0) + 1
            last[t.state_key] = max(last.get(t.state_key, 0), int(e.id))
        edge_counts: dict[tuple[str, str], dict[tuple[str, str], list[int]]] = {}
        for e in navs:
            t = e.transition
            if t.action != ACTION_NAVIGATE or world_map.length(t.state_key, t.action_arg) is None:
                continue
            per = edge_counts.setdefault(_edge_key(t.state_key, t.action_arg), {})
            rec = per.setdefault((t.state_key, t.action_arg), [0, 0])
            if t.outcome == OUTCOME_REACHED:
                rec[0] += 1
            elif t.outcome == OUTCOME_BLOCKED:
                rec[1] += 1
        return cls(
            {w: LookBelief(w, c, last[w]) for w, c in counts.items()},
            {k: EdgeBelief(k, {d: (r, b) for d, (r, b) in per.items()})
             for k, per in edge_counts.items()},
            blocked_threshold,
        )

    @property
    def blocked_edges(self) -> frozenset[tuple[str, str]]:
        """Corridors whose trusted memory (in some direction) is at least
        ``blocked_threshold`` blocked."""
        return frozenset(k for k, b in self.edges.items()
                         if b.blocked and b.blocked_share >= self.blocked_threshold)

