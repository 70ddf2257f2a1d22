"""Where the robot is, from one pose source, and when that source restarted (ROS-free).

Pose sources differ in *when* they speak, and the planner must not mistake silence for a
lost robot:

* **event-driven** sources speak only when something changed. Nav2's AMCL publishes
  ``amcl_pose`` on the first fix, after the robot moved ``update_min_d`` (0.25 m) or turned
  ``update_min_a`` (0.2 rad), and after a re-localisation (``initialpose``): a robot standing
  still is silent for as long as it stands. Its last pose stays the robot's pose: AMCL would
  have spoken had the robot moved past those thresholds.
* **continuous** sources (a PoseStamped stream, odometry, tf) publish at a fixed rate. A
  silence longer than ``stale_after`` seconds means the pose is no longer known (the driver
  stopped); the position is then *unknown*, never assumed.

What counts as a *restart* of the pose stream (the robot may have been carried, the map
frame may have jumped; no transition spanning it may be recorded) is the same for both:

* the header stamp runs backwards by more than ``reorder_s`` (1 s; the driver, or the
  simulated clock, restarted: a smaller step back is a copy delivered late, ignored), or
* the robot was re-localised (``initialpose`` seen, or :meth:`PoseStream.relocalised`).

A silence alone is never a restart: on a robot with AMCL, every task starts after one.
:attr:`PoseStream.epoch` counts restarts; the planner compares it before and after an
action and drops the transition when it changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: pose sources that publish only on change (Nav2 AMCL's amcl_pose)
EVENT_DRIVEN = frozenset({"amcl"})


@dataclass(frozen=True)
class PoseUpdate:
    """What one pose message did to the stream."""

    accepted: bool  # False: NaN / infinite values, or an older copy: the pose was ignored
    restarted: bool  # the stamp ran backwards: a new epoch began
    reason: str = ""  # why it was refused or why it restarted, for the log
    stale: bool = False  # a copy older than the last pose by at most ``reorder_s``: ignored


class PoseStream:
    """The latest pose of one source, its freshness and its restart epoch.

    Args:
        source: the pose source name (``amcl`` is event-driven, anything else continuous).
        stale_after: seconds of silence after which a *continuous* source's pose is unknown
            (ignored for event-driven sources). Must be > 0.
    """

    def __init__(self, source: str, stale_after: float = 2.0, reorder_s: float = 1.0) -> None:
        if not stale_after > 0:
            raise ValueError(f"stale_after must be > 0 seconds (got {stale_after})")
        self.source = source
        self.event_driven = source in EVENT_DRIVEN
        self.stale_after = float(stale_after)
        self.reorder_s = float(reorder_s)
        self.epoch = 0
        self._pose: tuple[float, float, float] | None = None
        self._stamp = -math.inf
        self._wall = -math.inf

    def update(self, stamp: float, wall: float, x: float, y: float, yaw: float) -> PoseUpdate:
        """Take one pose message (``stamp`` from its header, ``wall`` a monotonic clock)."""
        if not all(math.isfinite(v) for v in (stamp, x, y, yaw)):
            return PoseUpdate(False, False, f"non-finite pose ({x}, {y}, {yaw}) at {stamp}")
        if self._pose is not None and self._stamp - self.reorder_s <= stamp < self._stamp - 1e-6:
            # delivered out of order (two readers, a multi-threaded executor): a message
            # older than the last by less than ``reorder_s`` is a late copy, not a restart
            return PoseUpdate(False, False, f"pose {stamp:.2f}s older than the last "
                              f"({self._stamp:.2f}s): ignored", stale=True)
        restarted = self._pose is not None and stamp < self._stamp - 1e-6
        reason = ""
        if restarted:
            self.epoch += 1
            reason = f"pose stamp ran backwards ({self._stamp:.2f} -> {stamp:.2f}s)"
        self._pose = (float(x), float(y), float(yaw))
        self._stamp, self._wall = float(stamp), float(wall)
        return PoseUpdate(True, restarted, reason)

    def relocalised(self) -> None:
        """The robot was re-localised (``initialpose``): a new epoch; the old pose is void
        until the source speaks again."""
        self.epoch += 1
        self._pose = None

    @property
    def has_pose(self) -> bool:
        """Whether a pose is known (before any staleness check)."""
        return self._pose is not None

    @property
    def last(self) -> tuple[float, float, float] | None:
        """The last accepted pose, however old (None before the first and after a
        re-localisation): the pose stamped on transitions."""
        return self._pose

    def current(self, wall: float) -> tuple[float, float, float] | None:
        """The robot's pose now, or None when it is not known (never had one, stale, void)."""
        if self._pose is None:
            return None
        if not self.event_driven and wall - self._wall > self.stale_after:
            return None
        return self._pose

    def after(self, stamp: float) -> tuple[float, float, float] | None:
        """The last pose if its header stamp is at or after ``stamp``, else None: the pose of
        a robot that has arrived, not one sent on the way there and delivered late."""
        return self._pose if self._pose is not None and self._stamp >= stamp else None

    def silent_for(self, wall: float) -> float:
        """Seconds since the last accepted pose (infinite before the first)."""
        return wall - self._wall


def pose_at(pose: tuple[float, float, float] | None, waypoint: tuple[float, float] | None,
            radius: float) -> tuple[tuple[float, float, float] | None, float]:
    """The pose to stamp on what the robot does at ``waypoint`` (x, y) after arriving, and
    its distance from it: ``pose`` when it lies within ``radius`` metres, else None (a pose
    from the way there is wrong evidence for a pose-keyed memory: none is stored instead).
    With no waypoint to compare against, ``pose`` as it is (distance 0)."""
    if pose is None or waypoint is None:
        return pose, 0.0
    off = math.hypot(pose[0] - waypoint[0], pose[1] - waypoint[1])
    return (pose if off <= radius else None), off
