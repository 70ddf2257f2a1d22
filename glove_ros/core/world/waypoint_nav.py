"""Progress judgement for driving to a waypoint through Nav2: action results or plain poses.

With ``nav2_msgs`` the node sends Nav2's ``NavigateToPose`` action and Nav2 says how it
ended (:func:`outcome_from_nav2`). Without it, the fallback is the plain ``goal_pose`` topic:

Nav2's ``bt_navigator`` accepts a goal on ``goal_pose`` but says nothing back on a plain
topic: whether the robot arrived, is stuck, or Nav2 gave up is judged here from the robot
pose alone. ROS-free so it is unit-tested without a robot
(:mod:`glove_ros.nodes.waypoint_nav_node` wraps it).

:class:`NavTracker` statuses:

- ``driving``: not there yet, still making progress;
- ``reached``: within ``xy_tolerance`` of the goal (position only; Nav2 handles the yaw);
- ``blocked``: the robot did not move ``stall_distance`` within ``stall_timeout`` seconds
  (Nav2 failed to plan, gave up after its recoveries, or an obstacle holds the robot).
  Moving counts as progress even away from the goal, since Nav2 may plan a detour;
- ``timeout``: not reached within ``timeout`` seconds of the start.

A terminal status (anything but ``driving``) is sticky.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DRIVING = "driving"
REACHED = "reached"
BLOCKED = "blocked"
TIMEOUT = "timeout"
STATUSES = (DRIVING, REACHED, BLOCKED, TIMEOUT)
CANCELLED = "cancelled"
UNREACHABLE = "unreachable"  # no navigation server: the task fails, nothing is remembered

# action_msgs/GoalStatus codes of a finished goal (ROS-free copies)
GOAL_SUCCEEDED, GOAL_CANCELED, GOAL_ABORTED = 4, 5, 6


DETOUR = "detour"  # arrived, but not along the corridor: memory learns nothing of it
LOCALISATION_LOST = "localisation_lost"  # Nav2 could not transform / place the robot
NAV_FAILED = "nav_failed"  # Nav2 itself failed (plugin, behaviour tree, controller)

#: Nav2 error codes (Jazzy and later put one in the NavigateToPose result; Humble aborts with
#: none) -> outcome. Only "no valid path", an occupied start / goal and an abort that names
#: no cause (as Humble's) are read as facts about the world that memory may keep as
#: ``blocked``; a TF error or a robot outside the map is lost localisation; a controller
#: that made no progress, a timeout or a failed plugin is Nav2's own failure. Neither is
#: remembered. Ranges: ComputePathToPose 200-208, FollowPath 100-107, NavigateToPose
#: 9000-9003 (nav2_msgs).
NAV2_ERROR_OUTCOMES: dict[int, str] = {
    208: BLOCKED, 205: BLOCKED, 206: BLOCKED,  # NO_VALID_PATH, START_/GOAL_OCCUPIED
    9000: BLOCKED,  # navigator UNKNOWN: gave up with no cause named, read as Humble's abort
    204: UNREACHABLE,  # GOAL_OUTSIDE_MAP: the site file and the map disagree
    202: LOCALISATION_LOST, 203: LOCALISATION_LOST,  # TF_ERROR, START_OUTSIDE_MAP
    102: LOCALISATION_LOST, 9002: LOCALISATION_LOST,  # FollowPath / navigator TF_ERROR
}


def outcome_from_nav2(status: int, cancel_requested: bool, timed_out: bool,
                      error_code: int = 0) -> str:
    """The navigate_to_waypoint outcome of a finished NavigateToPose goal.

    Succeeded -> reached; cancelled -> cancelled, or timeout when our own ``nav.timeout``
    cancelled it. Aborted: by ``error_code`` (:data:`NAV2_ERROR_OUTCOMES`; any other
    non-zero code is ``nav_failed``); with no code (Humble) Nav2 could not plan or gave up
    after its recoveries -> blocked, a world fact memory keeps.
    """
    if status == GOAL_SUCCEEDED:
        return REACHED
    if timed_out:
        return TIMEOUT
    if cancel_requested or status == GOAL_CANCELED:
        return CANCELLED
    if error_code:
        return NAV2_ERROR_OUTCOMES.get(int(error_code), NAV_FAILED)
    return BLOCKED


@dataclass(frozen=True)
class NavConfig:
    """Thresholds of :class:`NavTracker` (metres and seconds)."""

    xy_tolerance: float = 0.25   # goal reached within this distance
    stall_timeout: float = 20.0  # seconds without stall_distance of movement -> blocked
    stall_distance: float = 0.1  # movement that counts as progress
    timeout: float = 300.0       # seconds from the start -> timeout
    corridor_tolerance: float = 1.0  # a path further than this from the corridor -> detour

    def validate(self) -> NavConfig:
        """Raise ``ValueError`` naming every bad value; return ``self`` when valid."""
        problems = []
        for name in ("xy_tolerance", "stall_timeout", "stall_distance", "timeout",
                     "corridor_tolerance"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                problems.append(f"nav.{name} must be a finite number > 0 (got {value!r})")
        if not problems and self.stall_timeout > self.timeout:
            problems.append(f"nav.stall_timeout ({self.stall_timeout}) must not exceed "
                            f"nav.timeout ({self.timeout})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> NavConfig:
        """Build from ``{"xy_tolerance": ..., ...}`` (a ``nav.`` prefix is stripped)."""
        kw = {k.split(".", 1)[1] if k.startswith("nav.") else k: v for k, v in raw.items()}
        unknown = set(kw) - {"xy_tolerance", "stall_timeout", "stall_distance", "timeout",
                             "corridor_tolerance"}
        if unknown:
            raise ValueError(f"unknown nav settings: {', '.join(sorted(unknown))}")
        return cls(**{k: float(v) for k, v in kw.items()}).validate()


def route_deviation(path: list[tuple[float, float]], start: tuple[float, float],
                    goal: tuple[float, float]) -> float:
    """The largest distance, in metres, of a travelled ``path`` from the straight corridor
    ``start`` -> ``goal`` (0 for an empty path)."""
    (ax, ay), (bx, by) = start, goal
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy
    worst = 0.0
    for x, y in path:
        t = 0.0 if length2 == 0 else max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / length2))
        worst = max(worst, math.hypot(x - (ax + t * dx), y - (ay + t * dy)))
    return worst


def judge_arrival(path: list[tuple[float, float]], start: tuple[float, float],
                  goal: tuple[float, float], tolerance: float) -> str:
    """``reached`` when the robot drove the corridor (no pose of ``path`` further than
    ``tolerance`` metres from it), else ``detour``: Nav2 plans its own route, and arriving
    says nothing about a corridor it drove around (a closed door it avoided)."""
    return REACHED if route_deviation(path, start, goal) <= tolerance else DETOUR


def corridors_driven(path: list[tuple[float, float]], start: str,
                     waypoints: dict[str, tuple[float, float]], corridors: set[tuple[str, str]],
                     visit_radius: float, tolerance: float) -> list[tuple[str, str]]:
    """The corridors a drive evidently went along, in order: Nav2 plans its own route, so a
    drive to a far waypoint may pass others. The waypoints the ``path`` came within
    ``visit_radius`` of are its visits (``start``, where the robot stood, first); two
    consecutive visits joined by a corridor (``corridors``: sorted pairs) count when every
    pose between them stayed within ``tolerance`` of that corridor. A stretch between
    waypoints that are not neighbours, or that strays, says nothing about any corridor."""
    visits: list[tuple[str, int]] = [(start, 0)] if start in waypoints else []
    for i, (x, y) in enumerate(path):
        near = [(math.hypot(x - wx, y - wy), w) for w, (wx, wy) in waypoints.items()]
        d, w = min(near) if near else (math.inf, "")
        if d <= visit_radius and (not visits or visits[-1][0] != w):
            visits.append((w, i))
    out = []
    for (a, i), (b, j) in zip(visits, visits[1:], strict=False):
        if tuple(sorted((a, b))) in corridors and \
                route_deviation(path[i:j + 1], waypoints[a], waypoints[b]) <= tolerance:
            out.append((a, b))
    return out


class NavTracker:
    """Judges one drive to ``goal_xy`` from pose updates (times in seconds, any epoch)."""

    def __init__(self, goal_xy: tuple[float, float], config: NavConfig,
                 start_time: float) -> None:
        config.validate()
        self.goal = (float(goal_xy[0]), float(goal_xy[1]))
        self.config = config
        self.start_time = float(start_time)
        self.status = DRIVING
        self.pose: tuple[float, float] | None = None   # last pose seen
        self._anchor: tuple[float, float] | None = None  # pose at the last progress
        self._anchor_time = self.start_time

    @property
    def done(self) -> bool:
        """True once the status is terminal."""
        return self.status != DRIVING

    @property
    def distance_remaining(self) -> float | None:
        """Straight-line distance from the last pose to the goal; None before any pose."""
        if self.pose is None:
            return None
        return math.hypot(self.goal[0] - self.pose[0], self.goal[1] - self.pose[1])

    def elapsed(self, t: float) -> float:
        """Seconds since the start."""
        return float(t) - self.start_time

    def update(self, x: float, y: float, t: float) -> str:
        """A new robot pose at time ``t``; returns the status."""
        if self.done:
            return self.status
        self.pose = (float(x), float(y))
        if self._anchor is None or math.hypot(
                x - self._anchor[0], y - self._anchor[1]) >= self.config.stall_distance:
            self._anchor, self._anchor_time = self.pose, float(t)
        dist = self.distance_remaining
        assert dist is not None
        if dist <= self.config.xy_tolerance:
            self.status = REACHED
            return self.status
        return self.poll(t)

    def poll(self, t: float) -> str:
        """The status at time ``t`` without a new pose (a silent pose source stalls too)."""
        if self.done:
            return self.status
        if self.elapsed(t) >= self.config.timeout:
            self.status = TIMEOUT
        elif float(t) - self._anchor_time >= self.config.stall_timeout:
            self.status = BLOCKED
        return self.status


def nearest_waypoint(world: Any, x: float, y: float, max_dist: float = math.inf) -> str | None:
    """Id of the waypoint of ``world`` nearest to (x, y) within ``max_dist``; else None.

    Ties go to the waypoint listed first in the world file.
    """
    best, best_d = None, math.inf
    for w in world.waypoints:
        d = math.hypot(w.x - x, w.y - y)
        if d < best_d:
            best, best_d = w.id, d
    return best if best is not None and best_d <= max_dist else None


__all__ = ["BLOCKED", "CANCELLED", "DRIVING", "REACHED", "STATUSES", "TIMEOUT", "UNREACHABLE",
           "NavConfig", "NavTracker", "nearest_waypoint", "outcome_from_nav2"]
