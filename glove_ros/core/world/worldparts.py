"""The static parts of a world file as frozen dataclasses: waypoints, corridors, blocks,
walls, and the robot's drive / camera models.

Separate from :mod:`glove_ros.core.world.worldfile` (the world that holds them, its loader
and its validator) and from
:mod:`glove_ros.core.world.worldevents` (what changes during a run): these are the plain
values a world is made of, each with the checks that need nothing but its own fields.
:func:`~glove_ros.core.world.worldfile.edge_key` is defined here because :class:`Edge`
needs it; import it from ``worldfile`` as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["OBJECT_SIZE", "Block", "CameraSpec", "Edge", "RobotSpec", "Wall", "Waypoint",
           "edge_key"]


def edge_key(a: str, b: str) -> tuple[str, str]:
    """Canonical (sorted) key of the undirected edge between ``a`` and ``b``."""
    return (a, b) if a <= b else (b, a)


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Waypoint:
    """A named place the robot can drive to, with the pose it stops in there."""

    id: str
    x: float
    y: float
    yaw: float = 0.0
    wall: str = "plain"  # what the camera sees behind the blocks: plain | cardboard


@dataclass(frozen=True)
class Edge:
    """An undirected corridor between two waypoints.

    ``blocked`` is the *initial* ground truth (e.g. a closed door): the planner's map
    still contains the corridor, and the robot finds out by driving into it.
    """

    a: str
    b: str
    length: float
    blocked: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """Canonical sorted (a, b) key."""
        return edge_key(self.a, self.b)

    def other(self, waypoint: str) -> str:
        """The end of this edge that is not ``waypoint``."""
        return self.b if waypoint == self.a else self.a


#: Default ``size`` of an object block in a world file: the height, in metres, of the photo
#: the simulator stands at the block's place. 0.4 m at the usual 0.8-1.0 m forward is a
#: photo 180-230 px tall in a 640x480 frame (90-115 px in 320x240); the crops of
#: :mod:`glove_ros.core.world.photos` were checked with the shipped YOLOv3-tiny at 0.2-0.5 m.
OBJECT_SIZE = 0.4


@dataclass(frozen=True)
class Block:
    """A block placed near a waypoint: a coloured block or an object.

    A colour block has ``color`` set (a name of
    :data:`~glove_ros.core.world.worldfile.BLOCK_COLORS`) and ``object`` empty; an object
    has ``object`` set (a canonical COCO class, :mod:`glove_ros.core.world.labels`) and
    ``color`` empty. :attr:`name` is what a look reports for it either way.

    ``offset`` is (forward, left) in metres in the waypoint's frame: the robot standing at
    the waypoint pose sees the block ``forward`` metres ahead and ``left`` to the left.
    ``size`` is a colour block's edge (a cube) and an object's height (the simulator paints
    a real photo of the class that tall, its width from the photo's aspect; default in a
    world file :data:`OBJECT_SIZE`).
    """

    id: str
    color: str
    waypoint: str
    offset: tuple[float, float] = (0.6, 0.0)
    size: float = 0.05
    object: str = ""

    @property
    def name(self) -> str:
        """The object class if this is an object, else the colour."""
        return self.object or self.color


@dataclass(frozen=True)
class Wall:
    """A wall segment for the Gazebo world (the built-in simulator uses edges only)."""

    x1: float
    y1: float
    x2: float
    y2: float
    height: float = 0.3
    thickness: float = 0.05

    @property
    def length(self) -> float:
        """Length of the segment in metres."""
        return math.hypot(self.x2 - self.x1, self.y2 - self.y1)


@dataclass(frozen=True)
class RobotSpec:
    """Drive and battery model of the simulated robot."""

    speed: float = 0.3
    battery_initial: float = 1.0
    drain_per_m: float = 0.01
    drain_per_s: float = 0.0002
    charge_per_s: float = 0.01
    blocked_stop_fraction: float = 0.5
    odom_sigma_xy: float = 0.0
    odom_sigma_yaw: float = 0.0

    def problems(self) -> list[str]:
        """Human-readable problems with these values (empty when valid)."""
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            if not math.isfinite(v):
                out.append(f"robot.{f.name} must be a finite number, got {v}")
        if self.speed <= 0:
            out.append(f"robot.speed must be > 0 m/s, got {_fmt(self.speed)}")
        if not 0.0 <= self.battery_initial <= 1.0:
            out.append(f"robot.battery_initial must be in 0..1, got {_fmt(self.battery_initial)}")
        for name in ("drain_per_m", "drain_per_s", "charge_per_s", "odom_sigma_xy",
                     "odom_sigma_yaw"):
            if getattr(self, name) < 0:
                out.append(f"robot.{name} must be >= 0, got {_fmt(getattr(self, name))}")
        if not 0.0 < self.blocked_stop_fraction < 1.0:
            out.append("robot.blocked_stop_fraction must be strictly between 0 and 1, got "
                       f"{_fmt(self.blocked_stop_fraction)}")
        return out


@dataclass(frozen=True)
class CameraSpec:
    """Pinhole camera of the simulated robot (looking straight ahead, level)."""

    hfov_deg: float = 70.0
    height: float = 0.2
    wall_distance: float = 1.2
    noise_sigma: float = 3.0

    def problems(self) -> list[str]:
        """Human-readable problems with these values (empty when valid)."""
        out = []
        if not 10.0 <= self.hfov_deg <= 150.0:
            out.append(f"camera.hfov_deg must be in 10..150, got {_fmt(self.hfov_deg)}")
        if not self.height > 0:
            out.append(f"camera.height must be > 0 m, got {_fmt(self.height)}")
        if not self.wall_distance > 0.3:
            out.append(f"camera.wall_distance must be > 0.3 m, got {_fmt(self.wall_distance)}")
        if not 0 <= self.noise_sigma <= 50:
            out.append(f"camera.noise_sigma must be in 0..50, got {_fmt(self.noise_sigma)}")
        return out
