"""The mutable ground truth of a world (no ROS): where each block is, which corridors are
blocked, which nuisances are active.

:class:`WorldState` applies a :class:`~glove_ros.core.world.worldfile.World`'s scheduled events
as episodes begin (:meth:`WorldState.advance`) and as simulated time passes; the simulator
(:mod:`glove_ros.core.world.sim`) and the Gazebo bridge read it. Moved out of ``sim.py``
unchanged (``sim`` re-exports these names).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

from glove_ros.core.memory.looks import look_signature
from glove_ros.core.world.worldevents import (
    BlockEdge,
    DetectionDropout,
    Event,
    MissDetections,
    MoveBlock,
    NewObstacle,
    OpenEdge,
    PoseJitter,
    ShiftBlock,
    SwapBlocks,
)
from glove_ros.core.world.worldfile import World, edge_key

__all__ = ["Obstacle", "Placement", "WorldState"]

@dataclass(frozen=True)
class Placement:
    """Where a block is now (ground truth); ``object`` is set (and ``color`` empty) for an
    object block."""

    block_id: str
    color: str
    waypoint: str
    offset: tuple[float, float]
    size: float
    object: str = ""

    @property
    def name(self) -> str:
        """The object class if set, else the colour: what a look reports for it."""
        return self.object or self.color


@dataclass(frozen=True)
class Obstacle:
    """A grey box placed by a ``new_obstacle`` nuisance."""

    id: str
    waypoint: str
    offset: tuple[float, float]
    size: float


# --------------------------------------------------------------------------- world state


class WorldState:
    """The mutable ground truth of a world: block placements, blocked edges, nuisances.

    Events are applied once, in file order, when :meth:`advance` reaches their trigger.
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self._episode = -1
        self._time = 0.0
        self._placements = {
            b.id: Placement(b.id, b.color, b.waypoint, tuple(b.offset), b.size, b.object)
            for b in world.blocks
        }
        self._blocked = {e.key for e in world.edges if e.blocked}
        self._obstacles: dict[str, tuple[Obstacle, NewObstacle]] = {}
        self._dropout_left = 0
        self._pending = list(world.events)
        self._applied: list[Event] = []
        self.advance(episode=0, time=0.0)

    # ------------------------------------------------------------------ events

    @property
    def episode(self) -> int:
        """Current episode index (starts at 0)."""
        return self._episode

    @property
    def time(self) -> float:
        """Current simulated time, seconds."""
        return self._time

    @property
    def applied_events(self) -> tuple[Event, ...]:
        """Events applied so far, in the order they took effect."""
        return tuple(self._applied)

    def advance(self, *, episode: int | None = None, time: float | None = None) -> list[Event]:
        """Move to ``episode`` and/or ``time`` and apply every event now due.

        Both only move forward (ValueError otherwise). Returns the newly applied events.
        """
        if episode is not None:
            if episode < self._episode:
                raise ValueError(f"episode {episode} is before the current episode "
                                 f"{self._episode}; episodes only move forward (build a new "
                                 "WorldState to replay)")
            self._episode = episode
        if time is not None:
            if time < self._time - 1e-9:
                raise ValueError(f"time {time} is before the current time {self._time}")
            self._time = max(self._time, time)
        fired = []
        still = []
        for ev in self._pending:
            if ev.due(self._episode, self._time):
                self._apply(ev)
                fired.append(ev)
            else:
                still.append(ev)
        self._pending = still
        self._applied.extend(fired)
        return fired

    def _apply(self, ev: Event) -> None:
        if isinstance(ev, SwapBlocks):
            a, b = (self._placements[i] for i in ev.blocks)
            self._placements[a.block_id] = replace(a, waypoint=b.waypoint, offset=b.offset)
            self._placements[b.block_id] = replace(b, waypoint=a.waypoint, offset=a.offset)
        elif isinstance(ev, MoveBlock):
            p = self._placements[ev.block]
            self._placements[ev.block] = replace(p, waypoint=ev.waypoint,
                                                 offset=tuple(ev.offset))
        elif isinstance(ev, BlockEdge):
            self._blocked.add(edge_key(*ev.edge))
        elif isinstance(ev, OpenEdge):
            self._blocked.discard(edge_key(*ev.edge))
        elif isinstance(ev, ShiftBlock):
            p = self._placements[ev.block]
            off = (p.offset[0] + ev.dx, p.offset[1] + ev.dy)
            self._placements[ev.block] = replace(p, offset=off)
        elif isinstance(ev, NewObstacle):
            self._obstacles[ev.id] = (Obstacle(ev.id, ev.waypoint, tuple(ev.offset), ev.size), ev)
        elif isinstance(ev, DetectionDropout):
            self._dropout_left += ev.frames
        # MissDetections and PoseJitter act through the queries below while active.

    # ------------------------------------------------------------------ queries

    def placement(self, block_id: str) -> Placement:
        """Current placement of ``block_id``."""
        return self._placements[block_id]

    def placements(self) -> tuple[Placement, ...]:
        """Every block's current placement, sorted by block id."""
        return tuple(self._placements[k] for k in sorted(self._placements))

    def blocks_at(self, waypoint: str) -> tuple[Placement, ...]:
        """Blocks now at ``waypoint``, sorted by id."""
        return tuple(p for p in self.placements() if p.waypoint == waypoint)

    def colors_at(self, waypoint: str) -> tuple[str, ...]:
        """Sorted distinct names (colours, or object classes) now at ``waypoint`` (ground
        truth, no nuisance)."""
        return tuple(sorted({p.name for p in self.blocks_at(waypoint)}))

    def counts_at(self, waypoint: str) -> dict[str, int]:
        """Name -> how many blocks of it are now at ``waypoint`` (ground truth)."""
        return dict(sorted(Counter(p.name for p in self.blocks_at(waypoint)).items()))

    def expected_signature(self, waypoint: str) -> str:
        """The outcome signature a perfect detector would report at ``waypoint``, in the
        world's look kind: ``colors=blue,red`` or ``objects=cup,person*2``."""
        return look_signature(self.counts_at(waypoint), self.world.look_kind)

    def is_blocked(self, a: str, b: str) -> bool:
        """Whether the corridor a-b is blocked now."""
        return edge_key(a, b) in self._blocked

    @property
    def blocked_edges(self) -> frozenset[tuple[str, str]]:
        """Keys of the corridors blocked now."""
        return frozenset(self._blocked)

    def obstacles_at(self, waypoint: str) -> tuple[Obstacle, ...]:
        """Active nuisance obstacles at ``waypoint``."""
        return tuple(o for o, ev in self._obstacles.values()
                     if o.waypoint == waypoint and ev.active(self._episode, self._time))

    def obstacles(self) -> tuple[Obstacle, ...]:
        """Every active nuisance obstacle."""
        return tuple(o for o, ev in self._obstacles.values()
                     if ev.active(self._episode, self._time))

    def miss_rate(self, block_id: str) -> float:
        """Probability that ``block_id`` is left out of a frame now (largest active rate)."""
        rates = [ev.rate for ev in self._applied if isinstance(ev, MissDetections)
                 and ev.active(self._episode, self._time) and ev.applies_to(block_id)]
        return max(rates, default=0.0)

    def pose_jitter(self) -> tuple[float, float]:
        """Active (sigma_xy, sigma_yaw) of pose jitter; (0, 0) when none."""
        active = [ev for ev in self._applied if isinstance(ev, PoseJitter)
                  and ev.active(self._episode, self._time)]
        return (max((e.sigma_xy for e in active), default=0.0),
                max((e.sigma_yaw for e in active), default=0.0))

    @property
    def dropout_frames_left(self) -> int:
        """How many coming frames a detection dropout will still empty."""
        return self._dropout_left

    def take_dropout_frame(self) -> bool:
        """Consume one dropout frame; True if the frame being rendered must be empty."""
        if self._dropout_left > 0:
            self._dropout_left -= 1
            return True
        return False

    def object_position(self, waypoint: str, offset: tuple[float, float]) -> tuple[float, float]:
        """Map-frame (x, y) of a point at ``offset`` (forward, left) from a waypoint pose."""
        w = self.world.waypoint(waypoint)
        c, s = math.cos(w.yaw), math.sin(w.yaw)
        return (w.x + c * offset[0] - s * offset[1], w.y + s * offset[0] + c * offset[1])

    def block_position(self, block_id: str) -> tuple[float, float]:
        """Map-frame (x, y) of the centre of ``block_id``."""
        p = self._placements[block_id]
        return self.object_position(p.waypoint, p.offset)
