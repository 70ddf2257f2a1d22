"""Local equivalence rules ``s_k ~ s_t`` that define GLOVE's neighbourhood N(e).

N(e_t) = { e_k in D : s_k ~ s_t and a_k = a_t } (DESIGN.md section 3, step 1). The action
part (same ``action`` and same ``action_arg``) is fixed; the state part is pluggable:

``state``     exact discretised state: same ``state_key`` (grid cell, FrozenLake square).
``waypoint``  same waypoint id; the waypoint id is the ``state_key``, so this is ``state``
              under the name a waypoint-graph robot configures.
``pose``      robot poses within ``radius`` metres (Euclidean in x, y; yaw ignored). A
              transition without a pose cannot be placed, so it falls back to the label:
              two transitions are equivalent when both have poses within ``radius`` of each
              other, or when at least one has no pose and their ``state_key`` is the same.
              The relation stays symmetric, and a robot that loses localisation for a moment
              still compares against its memory of the same waypoint.

Every rule also says how to find candidates with an index (:meth:`EquivalenceRule.index_query`),
so a neighbourhood lookup is an indexed SQL query followed by an exact filter
(:meth:`EquivalenceRule.equivalent`) over few rows. The store keeps, for each posed
transition, the integer grid cell ``(floor(x / c), floor(y / c))`` for its cell size ``c``;
the pose rule asks for the cells covering the square of side 2 * radius around the pose
(3 x 3 cells when radius <= c) plus un-posed entries with the same label, then filters by
distance. Key-based rules (``state``, ``waypoint``) make N(e) exactly one
(state_key, action, action_arg) group, which lets the store answer Q_hist from per-group
outcome counts in constant time.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from glove_ros.core.memory.experience import Transition

__all__ = [
    "RULE_NAMES",
    "EquivalenceRule",
    "ExactStateRule",
    "IndexQuery",
    "PoseRadiusRule",
    "WaypointRule",
    "cell_of",
    "make_rule",
]


def cell_of(x: float, y: float, cell_size: float) -> tuple[int, int]:
    """Integer grid cell of the point (x, y) for square cells of side ``cell_size`` metres."""
    return (math.floor(x / cell_size), math.floor(y / cell_size))


@dataclass(frozen=True)
class IndexQuery:
    """Which stored transitions may be neighbours, in terms of the store's indexes.

    A candidate matches when its ``state_key`` equals ``state_key`` (and, if
    ``unposed_only``, it has no pose), or when it has a pose whose grid cell x lies in
    ``cell_xs`` and cell y in ``[cell_y_min, cell_y_max]``. The store also requires the
    same action and action_arg. Candidates are then filtered exactly by the rule.
    """

    state_key: str | None = None
    unposed_only: bool = False
    cell_xs: tuple[int, ...] = ()
    cell_y_min: int = 0
    cell_y_max: int = -1

    @property
    def uses_cells(self) -> bool:
        """True when the query looks at grid cells."""
        return bool(self.cell_xs) and self.cell_y_min <= self.cell_y_max


class EquivalenceRule(ABC):
    """A local equivalence rule ``~`` on preconditions (see the module docstring)."""

    #: configuration name (``make_rule(name)``)
    name: str = ""
    #: True when N(e) is exactly the transitions with the same state_key (and action)
    key_based: bool = False

    @abstractmethod
    def equivalent(self, a: Transition, b: Transition) -> bool:
        """True when the preconditions of ``a`` and ``b`` are equivalent (``s_a ~ s_b``)."""

    @abstractmethod
    def index_query(self, t: Transition, cell_size: float) -> IndexQuery:
        """Indexed candidate set that contains every stored transition equivalent to ``t``."""

    def describe(self) -> str:
        """Short human-readable form, e.g. ``pose within 0.3 m``."""
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"


class ExactStateRule(EquivalenceRule):
    """Exact discretised state: ``s_k ~ s_t`` iff ``state_key`` is equal."""

    name = "state"
    key_based = True

    def equivalent(self, a: Transition, b: Transition) -> bool:
        return a.state_key == b.state_key

    def index_query(self, t: Transition, cell_size: float) -> IndexQuery:
        return IndexQuery(state_key=t.state_key)

    def describe(self) -> str:
        return "same state_key"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


class WaypointRule(ExactStateRule):
    """Same waypoint id (the ``state_key`` of a waypoint-graph robot)."""

    name = "waypoint"

    def describe(self) -> str:
        return "same waypoint"


class PoseRadiusRule(EquivalenceRule):
    """Poses within ``radius`` metres; label fallback when either transition has no pose."""

    name = "pose"
    key_based = False

    def __init__(self, radius: float) -> None:
        if isinstance(radius, bool) or not isinstance(radius, (int, float)):
            raise ValueError(f"pose rule radius must be a number of metres, got {radius!r}")
        if not math.isfinite(radius) or radius <= 0:
            raise ValueError(f"pose rule radius must be a finite number > 0 metres, got {radius}")
        self.radius = float(radius)

    def equivalent(self, a: Transition, b: Transition) -> bool:
        if a.pose is None or b.pose is None:
            return a.state_key == b.state_key
        dx = a.pose[0] - b.pose[0]
        dy = a.pose[1] - b.pose[1]
        return dx * dx + dy * dy <= self.radius * self.radius

    def index_query(self, t: Transition, cell_size: float) -> IndexQuery:
        if t.pose is None:
            return IndexQuery(state_key=t.state_key)
        x, y = t.pose[0], t.pose[1]
        x0, y0 = cell_of(x - self.radius, y - self.radius, cell_size)
        x1, y1 = cell_of(x + self.radius, y + self.radius, cell_size)
        return IndexQuery(
            state_key=t.state_key,
            unposed_only=True,
            cell_xs=tuple(range(x0, x1 + 1)),
            cell_y_min=y0,
            cell_y_max=y1,
        )

    def describe(self) -> str:
        return f"pose within {self.radius:g} m"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PoseRadiusRule) and other.radius == self.radius

    def __hash__(self) -> int:
        return hash((type(self), self.radius))


#: names accepted by :func:`make_rule`
RULE_NAMES = ("state", "waypoint", "pose")


def make_rule(name: str, radius: float | None = None) -> EquivalenceRule:
    """Build an equivalence rule by name.

    ``radius`` (metres, > 0) is required by ``pose`` and refused by the other rules, so a
    configuration that sets a radius the rule would ignore is caught.
    """
    if name not in RULE_NAMES:
        raise ValueError(
            f"unknown equivalence rule {name!r}; choose one of {', '.join(RULE_NAMES)}"
        )
    if name == "pose":
        if radius is None:
            raise ValueError("the 'pose' equivalence rule needs radius=<metres>")
        return PoseRadiusRule(radius)
    if radius is not None:
        raise ValueError(
            f"radius applies only to the 'pose' equivalence rule, not {name!r}; remove it"
        )
    return WaypointRule() if name == "waypoint" else ExactStateRule()
