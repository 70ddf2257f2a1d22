"""Scheduled changes of a world: drift the memory must notice and nuisance it must tolerate.

One frozen dataclass per event ``type`` of the world file's ``events:`` list
(:data:`EVENT_TYPES` maps the YAML name to the class); the simulator
(:mod:`glove_ros.core.world.sim`) applies them, the generator
(:mod:`glove_ros.core.world.worldgen`) schedules them. Separate from
:mod:`glove_ros.core.world.worldparts` (what a world is made of) and from the YAML parsing
of :mod:`glove_ros.core.world.worldparse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from glove_ros.core.world.worldparts import _fmt

__all__ = [
    "EVENT_TYPES",
    "BlockEdge",
    "DetectionDropout",
    "Event",
    "MissDetections",
    "MoveBlock",
    "NewObstacle",
    "OpenEdge",
    "PoseJitter",
    "ShiftBlock",
    "SwapBlocks",
]


@dataclass(frozen=True, kw_only=True)
class Event:
    """A scheduled change of the world; subclasses say what changes.

    Exactly one of ``episode`` (applied when that episode begins) and ``time`` (applied once
    simulated time reaches it) is set. ``category`` is ``"semantic"`` or ``"topological"``
    for drift the memory must notice, ``"nuisance"`` for noise it must tolerate.
    """

    type: ClassVar[str] = ""
    category: ClassVar[str] = ""
    episode: int | None = None
    time: float | None = None

    @property
    def is_drift(self) -> bool:
        """True for semantic and topological drift, False for nuisance."""
        return self.category != "nuisance"

    def due(self, episode: int, time: float) -> bool:
        """Whether the trigger has been reached at (episode, time)."""
        if self.episode is not None:
            return episode >= self.episode
        return self.time is not None and time >= self.time

    def trigger_text(self) -> str:
        """'episode 12' or 't=30s', for messages."""
        return f"episode {self.episode}" if self.episode is not None else f"t={_fmt(self.time)}s"

    def describe(self) -> str:
        """One-line summary, e.g. 'episode 12: swap_blocks red_block<->blue_block'."""
        return f"{self.trigger_text()}: {self.type}"

    def _extra_dict(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The YAML mapping this event was (or could be) read from."""
        d: dict[str, Any] = {"type": self.type}
        if self.episode is not None:
            d["episode"] = self.episode
        if self.time is not None:
            d["time"] = self.time
        d.update(self._extra_dict())
        return d


@dataclass(frozen=True, kw_only=True)
class _Windowed(Event):
    """An event that may end (``until_episode`` / ``until_time``)."""

    until_episode: int | None = None
    until_time: float | None = None

    def active(self, episode: int, time: float) -> bool:
        """Started and not yet ended at (episode, time)."""
        if not self.due(episode, time):
            return False
        if self.until_episode is not None and episode >= self.until_episode:
            return False
        return not (self.until_time is not None and time >= self.until_time)

    def _window_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.until_episode is not None:
            d["until_episode"] = self.until_episode
        if self.until_time is not None:
            d["until_time"] = self.until_time
        return d


@dataclass(frozen=True, kw_only=True)
class SwapBlocks(Event):
    """Semantic drift: two blocks trade places (waypoint and offset)."""

    type: ClassVar[str] = "swap_blocks"
    category: ClassVar[str] = "semantic"
    blocks: tuple[str, str]

    def describe(self) -> str:
        return f"{self.trigger_text()}: swap_blocks {self.blocks[0]}<->{self.blocks[1]}"

    def _extra_dict(self) -> dict[str, Any]:
        return {"blocks": list(self.blocks)}


@dataclass(frozen=True, kw_only=True)
class MoveBlock(Event):
    """Semantic drift: a block is carried to another waypoint."""

    type: ClassVar[str] = "move_block"
    category: ClassVar[str] = "semantic"
    block: str
    waypoint: str
    offset: tuple[float, float] = (0.6, 0.0)

    def describe(self) -> str:
        return f"{self.trigger_text()}: move_block {self.block} -> {self.waypoint}"

    def _extra_dict(self) -> dict[str, Any]:
        return {"block": self.block, "waypoint": self.waypoint, "offset": list(self.offset)}


@dataclass(frozen=True, kw_only=True)
class BlockEdge(Event):
    """Topological drift: a corridor becomes impassable."""

    type: ClassVar[str] = "block_edge"
    category: ClassVar[str] = "topological"
    edge: tuple[str, str]

    def describe(self) -> str:
        return f"{self.trigger_text()}: block_edge {self.edge[0]}-{self.edge[1]}"

    def _extra_dict(self) -> dict[str, Any]:
        return {"edge": list(self.edge)}


@dataclass(frozen=True, kw_only=True)
class OpenEdge(Event):
    """Topological drift: a blocked corridor becomes passable again."""

    type: ClassVar[str] = "open_edge"
    category: ClassVar[str] = "topological"
    edge: tuple[str, str]

    def describe(self) -> str:
        return f"{self.trigger_text()}: open_edge {self.edge[0]}-{self.edge[1]}"

    def _extra_dict(self) -> dict[str, Any]:
        return {"edge": list(self.edge)}


@dataclass(frozen=True, kw_only=True)
class ShiftBlock(Event):
    """Nuisance: a block is nudged a few centimetres (stays at its waypoint)."""

    type: ClassVar[str] = "shift_block"
    category: ClassVar[str] = "nuisance"
    block: str
    dx: float = 0.0  # forward, metres, in the block's waypoint frame
    dy: float = 0.0  # left, metres

    def _extra_dict(self) -> dict[str, Any]:
        return {"block": self.block, "dx": self.dx, "dy": self.dy}


@dataclass(frozen=True, kw_only=True)
class MissDetections(_Windowed):
    """Nuisance: each frame, each affected block goes unseen with probability ``rate``."""

    type: ClassVar[str] = "miss_detections"
    category: ClassVar[str] = "nuisance"
    rate: float
    blocks: tuple[str, ...] = ()  # empty: every block

    def applies_to(self, block_id: str) -> bool:
        """Whether this event affects ``block_id``."""
        return not self.blocks or block_id in self.blocks

    def _extra_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rate": self.rate, **self._window_dict()}
        if self.blocks:
            d["blocks"] = list(self.blocks)
        return d


@dataclass(frozen=True, kw_only=True)
class PoseJitter(_Windowed):
    """Nuisance: the robot stops a little off the waypoint pose; odometry is noisy."""

    type: ClassVar[str] = "pose_jitter"
    category: ClassVar[str] = "nuisance"
    sigma_xy: float = 0.02
    sigma_yaw: float = 0.03

    def _extra_dict(self) -> dict[str, Any]:
        return {"sigma_xy": self.sigma_xy, "sigma_yaw": self.sigma_yaw, **self._window_dict()}


@dataclass(frozen=True, kw_only=True)
class NewObstacle(_Windowed):
    """Nuisance: a grey box appears near a waypoint (seen by the camera, blocks nothing)."""

    type: ClassVar[str] = "new_obstacle"
    category: ClassVar[str] = "nuisance"
    id: str
    waypoint: str
    offset: tuple[float, float] = (0.9, 0.0)
    size: float = 0.2

    def _extra_dict(self) -> dict[str, Any]:
        return {"id": self.id, "waypoint": self.waypoint, "offset": list(self.offset),
                "size": self.size, **self._window_dict()}


@dataclass(frozen=True, kw_only=True)
class DetectionDropout(Event):
    """Nuisance: the next ``frames`` camera frames come out empty (exposure glitch)."""

    type: ClassVar[str] = "detection_dropout"
    category: ClassVar[str] = "nuisance"
    frames: int = 1

    def _extra_dict(self) -> dict[str, Any]:
        return {"frames": self.frames}


#: Event ``type`` string -> class.
EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (SwapBlocks, MoveBlock, BlockEdge, OpenEdge, ShiftBlock, MissDetections,
                PoseJitter, NewObstacle, DetectionDropout)
}
