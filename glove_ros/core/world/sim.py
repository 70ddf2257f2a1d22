"""The built-in simulator core: a waypoint-graph robot in a drifting world (no ROS).

:class:`WorldState` is the mutable ground truth of a :class:`~glove_ros.core.world.worldfile.World`:
where each block is, which corridors are blocked, which nuisances are active. It applies
the world's scheduled events as episodes begin (:meth:`WorldState.advance`) and as
simulated time passes.

:class:`Simulator` is the robot in that world, what the simulator node wraps:

* navigation along the map's shortest path, step-wise for action feedback and cancel::

      nav = sim.start_navigation("office")          # a Navigation handle
      while not nav.done:
          feedback = sim.advance(0.1)               # NavFeedback: waypoint, metres left
          if cancel_requested:
              sim.cancel_navigation()
      result = nav.result                           # NavResult: outcome, travel_time, ...

  or in one call, ``sim.navigate("office")``. Whether a corridor is blocked is decided
  when the robot starts along it (an event firing while it is on the corridor does not
  stop it). Outcomes: ``reached``, ``blocked`` (a
  blocked corridor: the robot drives up to the blockage and back to the last waypoint it
  reached), ``unknown_waypoint``, ``unreachable`` (no path in the map, e.g. every route
  avoided), ``cancelled``, ``battery_empty``. Travel time is distance / speed and does
  not depend on the step size.
* odometry (:meth:`Simulator.odometry`) with optional noise; a battery that drains while
  driving (and slowly while idle) and charges while docked (:meth:`Simulator.dock`);
* a camera (:meth:`Simulator.render_camera`) that paints the blocks at the current
  waypoint as shaded boxes, and object blocks as real photos of their class
  (:mod:`glove_ros.core.world.photos`), on a textured wall and floor, with noise, so real
  OpenCV perception (the HSV colour detector, the shipped YOLOv3-tiny) runs on it.
  Nuisances are honoured: a missed detection leaves a block out of one frame, a dropout
  empties whole frames, a shift or pose jitter moves pixels. Looks at an object world
  report ``objects=cup,person*2`` (:meth:`WorldState.expected_signature`).

Everything random is drawn from generators seeded by ``(seed, stream, counter)``: the same
seed and the same calls give the same frames, poses and outcomes. With ``keyed_arrivals``
the stop pose's jitter and the odometry noise read there are drawn from the arrival's key
instead of a running counter: ``(episode, waypoint, k)`` for the k-th arrival at that
waypoint in the episode (:meth:`Simulator.arrival_key`). Two simulators of the same world
and seed whose robots took different routes then stand at the same pose on the same
arrival, and, rendering with the same ``noise_key``, see the same frame (common random
numbers for methods compared side by side, e.g. ``bench jetrover``).

The world's ground truth (:class:`WorldState`, :class:`Placement`, :class:`Obstacle`) lives
in :mod:`glove_ros.core.world.worldstate` and is re-exported here.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from glove_ros.core.world.photos import object_photo, require_photos
from glove_ros.core.world.scene import scene_frame
from glove_ros.core.world.worldevents import Event
from glove_ros.core.world.worldfile import BLOCK_COLORS, World
from glove_ros.core.world.worldstate import Obstacle, Placement, WorldState

__all__ = [
    "NAV_OUTCOMES",
    "NavFeedback",
    "NavResult",
    "Navigation",
    "Obstacle",
    "Placement",
    "Pose2D",
    "RenderInfo",
    "RenderedObject",
    "SimStatus",
    "Simulator",
    "WorldState",
    "colors_signature",
]

#: Every outcome a navigation can end with.
NAV_OUTCOMES = ("reached", "blocked", "unknown_waypoint", "unreachable", "cancelled",
                "battery_empty")

_OBSTACLE_BGR = (92, 95, 98)  # grey: no colour detector may fire on it


def colors_signature(colors: Iterable[str]) -> str:
    """Outcome signature of a set of colours, e.g. ``"colors=blue,red"``; ``"colors="`` for
    none. Same format as :func:`glove_ros.core.world.perception.outcome_signature`."""
    return "colors=" + ",".join(sorted(set(colors)))


@dataclass(frozen=True)
class Pose2D:
    """A planar pose in the map frame: metres and radians."""

    x: float
    y: float
    yaw: float


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


# --------------------------------------------------------------------------- navigation


@dataclass(frozen=True)
class NavFeedback:
    """Progress of a navigation (the action feedback)."""

    current_waypoint: str  # last waypoint reached
    distance_remaining: float  # metres along the planned route (or back, when returning)
    distance_travelled: float
    elapsed: float  # seconds of driving so far
    pose: Pose2D


@dataclass(frozen=True)
class NavResult:
    """How a navigation ended (the action result)."""

    target: str
    reached: bool
    outcome: str  # one of NAV_OUTCOMES
    final_waypoint: str  # where the robot ended up; "" if stranded between waypoints
    travel_time: float  # seconds: distance / speed
    distance: float  # metres driven
    path: tuple[str, ...] = ()  # planned route, start first
    visited: tuple[str, ...] = ()  # waypoints reached in order, start first
    blocked_edge: tuple[str, str] | None = None  # the corridor found blocked


class Navigation:
    """Handle of one navigation started by :meth:`Simulator.start_navigation`."""

    def __init__(self, target: str, path: list[str], start: str) -> None:
        self.target = target
        self.path = tuple(path)
        self.result: NavResult | None = None
        self.feedback: NavFeedback | None = None
        # internal progress
        self._leg = 0  # index in path of the waypoint the current segment starts from
        self._phase = "drive"  # drive | approach_block | return
        self._s = 0.0  # metres done on the current segment
        self._seg_len = 0.0
        self._seg_from = (0.0, 0.0)
        self._seg_to = (0.0, 0.0)
        self._blocked_edge: tuple[str, str] | None = None
        self._distance = 0.0
        self._visited = [start]
        self._seg_ready = False

    @property
    def done(self) -> bool:
        """True once :attr:`result` is set."""
        return self.result is not None


# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class RenderedObject:
    """One object painted in a frame, with its bounding box in pixels."""

    id: str
    kind: str  # "block" | "object" (a photo) | "obstacle"
    color: str  # colour name for blocks, "grey" for obstacles, "" for objects
    x: int
    y: int
    width: int
    height: int
    object: str = ""  # the class of an object block

    @property
    def name(self) -> str:
        """The object class, else the colour."""
        return self.object or self.color


@dataclass(frozen=True)
class RenderInfo:
    """Ground truth of the last rendered frame (what was painted, what a nuisance hid)."""

    frame_index: int
    waypoint: str  # "" between waypoints
    pose: Pose2D
    objects: tuple[RenderedObject, ...]
    missed: tuple[str, ...]  # block ids left out by a miss_detections nuisance
    dropout: bool  # the whole frame was emptied by a detection dropout

    @property
    def colors(self) -> tuple[str, ...]:
        """Sorted distinct colours of the colour blocks painted."""
        return tuple(sorted({o.color for o in self.objects if o.kind == "block"}))

    @property
    def counts(self) -> dict[str, int]:
        """Name (colour or class) -> blocks and objects painted; obstacles left out."""
        return dict(sorted(Counter(o.name for o in self.objects if o.kind != "obstacle").items()))


@dataclass(frozen=True)
class SimStatus:
    """A snapshot of the robot for status topics and logs."""

    time: float
    episode: int
    waypoint: str  # "" between waypoints
    last_waypoint: str
    pose: Pose2D
    battery: float
    docked: bool
    charging: bool
    navigating: bool


# --------------------------------------------------------------------------- simulator


class Simulator:
    """A robot on the world's waypoint graph; see the module docstring for the API tour.

    Args:
        world: a validated world.
        seed: noise seed; defaults to ``world.seed``.
        start: starting waypoint; defaults to ``world.start_waypoint``.
        keyed_arrivals: draw each stop pose's jitter (and the odometry noise read there)
            from the arrival's key (:meth:`arrival_key`) rather than in sequence, so the
            same arrival gets the same pose whatever the robot did before (default off:
            the sequential draws of earlier releases).
    """

    def __init__(self, world: World, *, seed: int | None = None, start: str | None = None,
                 keyed_arrivals: bool = False):
        require_photos(world.objects)  # a class the camera cannot show is refused up front
        self.world = world
        self.seed = world.seed if seed is None else int(seed)
        self.state = WorldState(world)
        start = world.start_waypoint if start is None else start
        world.waypoint(start)
        self._time = 0.0
        self._at: str | None = start
        self._last = start
        w = world.waypoint(start)
        self._pose = Pose2D(w.x, w.y, w.yaw)
        self.battery = world.robot.battery_initial
        self.docked = False
        self.navigation: Navigation | None = None
        self.last_render: RenderInfo | None = None
        self._frame = 0
        self._odom_rng = np.random.default_rng([self.seed, 4])
        self._arrival_rng = np.random.default_rng([self.seed, 3])
        self.keyed_arrivals = bool(keyed_arrivals)
        self._wp_index = {w: i for i, w in enumerate(world.waypoint_ids)}
        self._arrival_counts: dict[str, int] = {}
        self._arrival_episode = -1
        self._arrival_key: tuple[int, int, int] | None = None
        self._odom_reads = 0
        self._bg_cache: dict[tuple[str, str, int, int], np.ndarray] = {}

    # ------------------------------------------------------------------ basic state

    @property
    def time(self) -> float:
        """Simulated time, seconds."""
        return self._time

    @property
    def episode(self) -> int:
        """Current episode index."""
        return self.state.episode

    @property
    def pose(self) -> Pose2D:
        """True pose (what odometry reports without noise)."""
        return self._pose

    @property
    def at_waypoint(self) -> str | None:
        """The waypoint the robot stands at; None while driving or stranded."""
        return self._at

    @property
    def last_waypoint(self) -> str:
        """The last waypoint the robot reached."""
        return self._last

    @property
    def navigating(self) -> bool:
        """Whether a navigation is in progress."""
        return self.navigation is not None and not self.navigation.done

    @property
    def charging(self) -> bool:
        """Docked and not yet full."""
        return self.docked and self.battery < 1.0

    def status(self) -> SimStatus:
        """A snapshot of time, place, battery and docking state."""
        return SimStatus(self._time, self.episode, self._at or "", self._last, self._pose,
                         self.battery, self.docked, self.charging, self.navigating)

    def begin_episode(self, episode: int) -> list[Event]:
        """Start episode ``episode`` (non-decreasing); returns the events it triggered."""
        return self.state.advance(episode=episode)

    # ------------------------------------------------------------------ restart safety

    def snapshot(self) -> dict[str, Any]:
        """What a restarted simulator needs to continue this world (JSON-serialisable).

        A navigation in progress is not kept: a restored robot stands at the last waypoint it
        reached (the driver died; the navigation has no result).
        """
        return {"world": self.world.name, "seed": self.seed, "episode": self.episode,
                "time": self._time, "last_waypoint": self._last, "battery": self.battery,
                "docked": self.docked, "events_applied": len(self.state.applied_events)}

    def restore(self, snap: Mapping[str, Any]) -> None:
        """Continue from :meth:`snapshot`: same world events applied, robot at its waypoint.

        ``ValueError`` for a snapshot of another world, of a simulator that already moved on,
        or whose world events do not replay to the same count (then do not use this one).
        """
        if snap.get("world") != self.world.name:
            raise ValueError(f"state is of world {snap.get('world')!r}, not "
                             f"{self.world.name!r}")
        episode, when = int(snap["episode"]), float(snap["time"])
        waypoint, battery = str(snap["last_waypoint"]), float(snap["battery"])
        if episode < self.episode or when < self._time:
            raise ValueError("restore() needs a simulator that has not moved on yet")
        self.world.waypoint(waypoint)
        if not 0.0 <= battery <= 1.0:
            raise ValueError(f"state battery {battery} is not in 0..1")
        self.state.advance(episode=episode, time=when)
        self._time = when
        self.teleport(waypoint, battery=battery)
        self.docked = bool(snap.get("docked", False)) and waypoint == self.world.dock
        applied = len(self.state.applied_events)
        if applied != int(snap.get("events_applied", applied)):
            raise ValueError(f"state says {snap['events_applied']} world events were applied; "
                             f"replaying its episode and time applies {applied}")

    def visible_colors(self) -> tuple[str, ...]:
        """Ground-truth colours (or classes) at the current waypoint (no nuisance); ()
        between."""
        return self.state.colors_at(self._at) if self._at else ()

    def teleport(self, waypoint: str, *, battery: float | None = None) -> None:
        """Put the robot at ``waypoint`` at once (a reset for tests and benchmarks; a person
        carrying the robot). Cancels any navigation without a result."""
        w = self.world.waypoint(waypoint)
        self.navigation = None
        self._at = self._last = waypoint
        self._pose = Pose2D(w.x, w.y, w.yaw)
        self.docked = False
        if self.keyed_arrivals:
            self._arrive(waypoint)  # an arrival without jitter: keys the odometry read here
        if battery is not None:
            if not 0.0 <= battery <= 1.0:
                raise ValueError(f"battery must be in 0..1, got {battery}")
            self.battery = battery

    # ------------------------------------------------------------------ docking

    def dock(self) -> bool:
        """Dock (start charging). Only possible standing at the dock waypoint while not
        navigating; returns whether the robot is docked."""
        if self.navigating or self._at != self.world.dock:
            return False
        self.docked = True
        return True

    def undock(self) -> None:
        """Leave the dock (navigation does this by itself)."""
        self.docked = False

    # ------------------------------------------------------------------ odometry

    def odometry(self) -> Pose2D:
        """The pose odometry reports: true pose plus noise (robot.odom_sigma_* and any
        active pose_jitter nuisance)."""
        jx, jyaw = self.state.pose_jitter()
        sxy = math.hypot(self.world.robot.odom_sigma_xy, jx)
        syaw = math.hypot(self.world.robot.odom_sigma_yaw, jyaw)
        if sxy == 0 and syaw == 0:
            return self._pose
        if self.keyed_arrivals and self._arrival_key is not None and self._at is not None:
            rng = np.random.default_rng([self.seed, 4, *self._arrival_key, self._odom_reads])
            self._odom_reads += 1
            n = rng.standard_normal(3)
        else:
            n = self._odom_rng.standard_normal(3)
        return Pose2D(float(self._pose.x + sxy * n[0]), float(self._pose.y + sxy * n[1]),
                      _wrap(float(self._pose.yaw + syaw * n[2])))

    # ------------------------------------------------------------------ navigation

    def start_navigation(self, target: str, *,
                         avoid_edges: Iterable[tuple[str, str]] = ()) -> Navigation:
        """Plan the shortest route to ``target`` over the map and start driving.

        ``avoid_edges`` are corridors to plan around (e.g. ones memory believes blocked).
        Returns a :class:`Navigation`; it is already done for ``unknown_waypoint``,
        ``unreachable``, ``battery_empty`` and for a target the robot is standing at.
        Drive it with :meth:`advance`. RuntimeError if a navigation is in progress.
        """
        if self.navigating:
            raise RuntimeError("a navigation is already in progress; cancel it first")
        start = self._at or self._last
        nav = Navigation(target, [], start)
        self.navigation = nav
        if not self.world.has_waypoint(target):
            return self._finish(nav, "unknown_waypoint")
        if self._at is None or self.battery <= 0.0:
            return self._finish(nav, "battery_empty")
        path = self.world.shortest_path(start, target, avoid_edges=avoid_edges)
        if path is None:
            return self._finish(nav, "unreachable")
        nav.path = tuple(path)
        self.undock()
        if len(path) == 1:
            self._stop_at(target, final=True)
            return self._finish(nav, "reached")
        nav.feedback = self._feedback(nav)
        return nav

    def advance(self, dt: float) -> NavFeedback | None:
        """Let ``dt`` seconds of simulated time pass: drive the current navigation, drain
        or charge the battery, and apply time-triggered events. Returns the navigation's
        feedback (None when no navigation is in progress)."""
        if not (dt >= 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a finite number >= 0, got {dt}")
        self.state.advance(time=self._time)
        nav = self.navigation if self.navigating else None
        robot = self.world.robot
        if nav is not None:
            self._drive(nav, robot.speed * dt)
        if self.docked:
            self.battery = min(1.0, self.battery + robot.charge_per_s * dt)
        else:
            self.battery = max(0.0, self.battery - robot.drain_per_s * dt)
        self._time += dt
        self.state.advance(time=self._time)
        if nav is None:
            return None
        if not nav.done:
            nav.feedback = self._feedback(nav)
        return nav.feedback

    def cancel_navigation(self) -> NavResult | None:
        """Stop the current navigation at once. A robot between waypoints goes back to the
        last waypoint it reached (that distance and time are added). Returns the result,
        or None if nothing was in progress."""
        nav = self.navigation
        if nav is None or nav.done:
            return None
        back = 0.0
        if nav._seg_ready:
            back = nav._s if nav._phase in ("drive", "approach_block") else nav._seg_len - nav._s
        if back > 0:
            self._consume(nav, back)
            self._time += back / self.world.robot.speed
            self.state.advance(time=self._time)
        self._stop_at(nav.path[nav._leg] if nav.path else self._last, final=True)
        return self._finish(nav, "cancelled").result

    def navigate(self, target: str, *, avoid_edges: Iterable[tuple[str, str]] = (),
                 dt: float = 0.1) -> NavResult:
        """Drive to ``target`` until the navigation ends; returns its result."""
        if dt <= 0:
            raise ValueError(f"dt must be > 0, got {dt}")
        nav = self.start_navigation(target, avoid_edges=avoid_edges)
        while not nav.done:
            self.advance(dt)
        assert nav.result is not None
        return nav.result

    def wait(self, seconds: float) -> None:
        """Let time pass without driving (charging when docked)."""
        self.advance(seconds)

    # ------------------------------------------------------------------ internals

    def _edge_len(self, a: str, b: str) -> float:
        e = self.world.edge(a, b)
        assert e is not None
        return e.length

    def _setup_segment(self, nav: Navigation) -> None:
        """Start the edge path[leg] -> path[leg+1]; find out whether it is blocked."""
        u, v = nav.path[nav._leg], nav.path[nav._leg + 1]
        wu, wv = self.world.waypoint(u), self.world.waypoint(v)
        length = self._edge_len(u, v)
        nav._s = 0.0
        nav._seg_from = (wu.x, wu.y)
        if self.state.is_blocked(u, v):
            f = self.world.robot.blocked_stop_fraction
            nav._phase = "approach_block"
            nav._seg_len = f * length
            nav._seg_to = (wu.x + f * (wv.x - wu.x), wu.y + f * (wv.y - wu.y))
            nav._blocked_edge = (u, v)
        else:
            nav._phase = "drive"
            nav._seg_len = length
            nav._seg_to = (wv.x, wv.y)
        nav._seg_ready = True
        self._at = None

    def _consume(self, nav: Navigation, metres: float) -> None:
        nav._distance += metres
        self.battery = max(0.0, self.battery - self.world.robot.drain_per_m * metres)

    def _drive(self, nav: Navigation, budget: float) -> None:
        while budget > 1e-12 and not nav.done:
            if not nav._seg_ready:
                self._setup_segment(nav)
            left = nav._seg_len - nav._s
            step = min(budget, left)
            # battery: how far can we go?
            drain = self.world.robot.drain_per_m
            if drain > 0 and self.battery - drain * step <= 0:
                step = self.battery / drain
                self._consume(nav, step)
                nav._s += step
                self._set_pose_on_segment(nav)
                self.battery = 0.0
                self._at = None
                self._finish(nav, "battery_empty")
                return
            self._consume(nav, step)
            nav._s += step
            budget -= step
            self._set_pose_on_segment(nav)
            if nav._s < nav._seg_len - 1e-12:
                continue
            # segment complete
            nav._seg_ready = False
            if nav._phase == "drive":
                nav._leg += 1
                reached = nav.path[nav._leg]
                nav._visited.append(reached)
                final = nav._leg == len(nav.path) - 1
                self._stop_at(reached, final=final)
                if final:
                    self._finish(nav, "reached")
            elif nav._phase == "approach_block":
                # hit the blockage: turn round, drive back to path[leg]
                nav._phase = "return"
                nav._seg_from, nav._seg_to = nav._seg_to, nav._seg_from
                nav._s = 0.0
                nav._seg_ready = True
            else:  # returned
                back_to = nav.path[nav._leg]
                nav._visited.append(back_to)
                self._stop_at(back_to, final=True)
                self._finish(nav, "blocked")

    def _set_pose_on_segment(self, nav: Navigation) -> None:
        (x0, y0), (x1, y1) = nav._seg_from, nav._seg_to
        f = 0.0 if nav._seg_len <= 0 else min(1.0, nav._s / nav._seg_len)
        yaw = math.atan2(y1 - y0, x1 - x0) if (x1, y1) != (x0, y0) else self._pose.yaw
        self._pose = Pose2D(x0 + f * (x1 - x0), y0 + f * (y1 - y0), yaw)

    def _stop_at(self, waypoint: str, *, final: bool) -> None:
        """Arrive at ``waypoint``; at the end of a navigation turn to its yaw (+ jitter)."""
        w = self.world.waypoint(waypoint)
        self._at = self._last = waypoint
        if not final:
            self._pose = Pose2D(w.x, w.y, self._pose.yaw)
            return
        sxy, syaw = self.state.pose_jitter()
        if self.keyed_arrivals:
            key = self._arrive(waypoint)
            n = np.random.default_rng([self.seed, 3, *key]).standard_normal(3)
        else:
            n = self._arrival_rng.standard_normal(3) if (sxy or syaw) else np.zeros(3)
        self._pose = Pose2D(float(w.x + sxy * n[0]), float(w.y + sxy * n[1]),
                            _wrap(float(w.yaw + syaw * n[2])))

    @property
    def arrival_key(self) -> tuple[int, int, int] | None:
        """``(episode, waypoint index, k)`` of the robot's last arrival with
        ``keyed_arrivals`` (the k-th at that waypoint in the episode, from 0; a teleport
        counts as one); None without ``keyed_arrivals`` or before the first arrival."""
        return self._arrival_key

    def _arrive(self, waypoint: str) -> tuple[int, int, int]:
        """Count an arrival at ``waypoint`` in the current episode; returns its key."""
        episode = max(self.state.episode, 0)
        if episode != self._arrival_episode:
            self._arrival_counts.clear()
            self._arrival_episode = episode
        k = self._arrival_counts.get(waypoint, 0)
        self._arrival_counts[waypoint] = k + 1
        self._arrival_key = (episode, self._wp_index[waypoint], k)
        self._odom_reads = 0
        return self._arrival_key

    def _remaining(self, nav: Navigation) -> float:
        if not nav.path:
            return 0.0
        if not nav._seg_ready:
            rest = nav.path[nav._leg:]
            return self.world.path_length(rest) if len(rest) > 1 else 0.0
        if nav._phase == "return":
            return nav._seg_len - nav._s
        rest = nav.path[nav._leg + 1:]
        after = self.world.path_length(rest) if len(rest) > 1 else 0.0
        u, v = nav.path[nav._leg], nav.path[nav._leg + 1]
        return self._edge_len(u, v) - nav._s + after

    def _feedback(self, nav: Navigation) -> NavFeedback:
        return NavFeedback(self._last, self._remaining(nav), nav._distance,
                           nav._distance / self.world.robot.speed, self._pose)

    def _finish(self, nav: Navigation, outcome: str) -> Navigation:
        final = self._at or ""
        nav.result = NavResult(
            target=nav.target,
            reached=outcome == "reached",
            outcome=outcome,
            final_waypoint=final,
            travel_time=nav._distance / self.world.robot.speed,
            distance=nav._distance,
            path=nav.path,
            visited=tuple(nav._visited),
            blocked_edge=nav._blocked_edge if outcome == "blocked" else None,
        )
        nav.feedback = NavFeedback(self._last, 0.0, nav._distance, nav.result.travel_time,
                                   self._pose)
        return nav

    # ------------------------------------------------------------------ camera

    def render_camera(self, width: int = 640, height: int = 480, *,
                      noise_key: Sequence[int] | None = None) -> np.ndarray:
        """Render the camera frame at the current pose: ``(height, width, 3)`` uint8 BGR.

        Blocks at the current waypoint are painted as shaded boxes (their colours from
        :data:`~glove_ros.core.world.worldfile.BLOCK_COLORS`), object blocks as a real photo
        of their class standing on the floor, ``size`` tall
        (:func:`~glove_ros.core.world.photos.paint_photo`), nuisance obstacles as grey boxes,
        on a wall (plain or corrugated cardboard) and a tiled floor, with per-frame lighting
        and Gaussian noise over everything. Between waypoints only the background is seen. What was
        painted (and hidden by nuisance) is in :attr:`last_render`.

        The frame's randomness (missed detections, lighting, noise) is drawn from the
        running frame counter, or, given ``noise_key`` (non-negative ints), from
        ``(seed, noise_key)``: the same key gives the same draws whatever was rendered
        before (common random numbers for runs compared side by side).
        """
        import cv2  # lazy: only the camera needs OpenCV

        if width < 32 or height < 24:
            raise ValueError(f"frame too small: {width}x{height} (min 32x24)")
        index = self._frame
        self._frame += 1
        rng = np.random.default_rng([self.seed, 1, index] if noise_key is None
                                    else [self.seed, 2, *noise_key])
        wp = self._at
        style = self.world.waypoint(wp).wall if wp else "plain"
        img = self._background(style, wp or "", width, height).copy()
        cam = self.world.camera
        fx = (width / 2) / math.tan(math.radians(cam.hfov_deg) / 2)
        cx, cy = width / 2, height / 2

        dropout = self.state.take_dropout_frame()
        scene = scene_frame(self.world.scene, self.seed, index, noise_key)  # world's scene:
        objects: list[tuple[float, str, str, str, str, Any, float, float, float]] = []
        missed: list[str] = []
        if wp is not None:
            for p in self.state.blocks_at(wp):
                draw = rng.random()  # drawn for every block: frames stay reproducible
                if dropout:
                    continue
                if draw < self.state.miss_rate(p.block_id):
                    missed.append(p.block_id)
                    continue
                X, Y = self._to_camera(self.state.object_position(p.waypoint, p.offset))
                objects.append((X, p.block_id, "object" if p.object else "block", p.color,
                                p.object, BLOCK_COLORS.get(p.color), Y, p.size, p.size))
            if not dropout:
                for o in self.state.obstacles_at(wp):
                    X, Y = self._to_camera(self.state.object_position(o.waypoint, o.offset))
                    objects.append((X, o.id, "obstacle", "grey", "", _OBSTACLE_BGR, Y, o.size,
                                    o.size * 0.8))
        painted = []
        for X, oid, kind, color, obj, bgr, Y, size, tall in sorted(objects, reverse=True):
            box = (scene.paint(img, object_photo(obj), X, Y, size, fx, cx, cy, cam.height) if obj
                   else _draw_box(cv2, img, X, Y, size, tall, bgr, fx, cx, cy, cam.height))
            if box is not None:
                painted.append(RenderedObject(oid, kind, color, *box, object=obj))
        scene.finish(img)
        gain = rng.uniform(0.9, 1.08) * (0.3 if dropout else 1.0)
        img *= gain
        if cam.noise_sigma > 0:
            img += rng.standard_normal(img.shape, dtype=np.float32) * np.float32(cam.noise_sigma)
        frame = np.clip(img, 0, 255).astype(np.uint8)
        self.last_render = RenderInfo(index, wp or "", self._pose, tuple(painted),
                                      tuple(missed), dropout)
        return frame

    def _to_camera(self, xy: tuple[float, float]) -> tuple[float, float]:
        """Map point -> (forward, left) in the camera frame at the true pose."""
        dx, dy = xy[0] - self._pose.x, xy[1] - self._pose.y
        c, s = math.cos(self._pose.yaw), math.sin(self._pose.yaw)
        return (c * dx + s * dy, -s * dx + c * dy)

    def _background(self, style: str, waypoint: str, width: int, height: int) -> np.ndarray:
        key = (style, waypoint, width, height)
        bg = self._bg_cache.get(key)
        if bg is None:
            bg = _make_background(style, width, height, self.world.camera,
                                  np.random.default_rng([self.seed, 2, zlib.crc32(
                                      waypoint.encode())]))
            if len(self._bg_cache) > 64:
                self._bg_cache.clear()
            self._bg_cache[key] = bg
        return bg


def _lowfreq(rng: np.random.Generator, width: int, height: int, cell: int) -> np.ndarray:
    import cv2

    small = rng.standard_normal((max(2, height // cell), max(2, width // cell))).astype(np.float32)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)


def _make_background(style: str, width: int, height: int, cam, rng: np.random.Generator
                     ) -> np.ndarray:
    """Wall above the floor line, tiled floor below, vignetting; float32 BGR."""
    import cv2

    fx = (width / 2) / math.tan(math.radians(cam.hfov_deg) / 2)
    cx, cy = width / 2, height / 2
    v_wall = int(round(cy + fx * cam.height / cam.wall_distance))
    v_wall = min(max(v_wall, 1), height - 1)
    img = np.empty((height, width, 3), np.float32)

    # wall
    cols = np.arange(width, dtype=np.float32)
    if style == "cardboard":
        base = np.array((140, 165, 190), np.float32)
        corrugation = 7.0 * np.sin(cols * (2 * np.pi / max(6.0, width / 55.0)))
        bumps = 10.0 * _lowfreq(rng, width, v_wall, 24)
        shade = corrugation[None, :] + bumps
    else:
        base = np.array((196, 201, 206), np.float32)
        shade = 5.0 * _lowfreq(rng, width, v_wall, 40)
    img[:v_wall] = base[None, None, :] + shade[:, :, None]
    if style == "cardboard":  # packing-tape seams
        for u in rng.integers(0, width, size=2):
            img[:v_wall, max(0, u - 2):u + 2] *= 0.85
    # skirting board
    sk = max(2, height // 80)
    img[max(0, v_wall - sk):v_wall] = (170, 172, 175)

    # floor with perspective tiles
    floor = np.array((105, 110, 116), np.float32)
    img[v_wall:] = floor + 4.0 * _lowfreq(rng, width, height - v_wall, 32)[:, :, None]
    line = (88, 92, 97)
    tile = 0.3
    depth = tile
    while depth < cam.wall_distance:
        v = int(round(cy + fx * cam.height / depth))
        if v_wall < v < height:
            cv2.line(img, (0, v), (width - 1, v), line, 1)
        depth += tile
    for k in range(-12, 13):
        lateral = k * tile + tile / 2
        near = 0.2
        p0 = (int(round(cx - fx * lateral / near)), int(round(cy + fx * cam.height / near)))
        p1 = (int(round(cx - fx * lateral / cam.wall_distance)), v_wall)
        cv2.line(img, p0, p1, line, 1)

    # vignetting
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r2 = ((xx - cx) / cx) ** 2 + ((yy - cy) / cy) ** 2
    img *= (1.0 - 0.12 * r2)[:, :, None]
    return img


def _draw_box(cv2, img: np.ndarray, X: float, Y: float, size: float, tall: float,
              bgr: tuple[int, int, int], fx: float, cx: float, cy: float, cam_h: float
              ) -> tuple[int, int, int, int] | None:
    """Paint a box of footprint ``size`` and height ``tall`` centred at camera (X fwd, Y left).

    Returns the clipped pixel bounding box (x, y, w, h) or None if nothing is visible.
    """
    h, w = img.shape[:2]
    xf, xb = X - size / 2, X + size / 2
    if xf < 0.08:
        return None
    ul = cx - fx * (Y + size / 2) / xf
    ur = cx - fx * (Y - size / 2) / xf
    v_bot = cy + fx * cam_h / xf
    v_top = cy + fx * (cam_h - tall) / xf
    color = np.array(bgr, np.float32)
    pts = []
    # contact shadow on the floor
    shadow = np.array([[ul - 2, v_bot - 1], [ur + 2, v_bot - 1], [ur + 5, v_bot + 4],
                       [ul - 5, v_bot + 4]], np.float64)
    cv2.fillConvexPoly(img, np.round(shadow).astype(np.int32), (70, 72, 75), cv2.LINE_AA)
    front = np.array([[ul, v_top], [ur, v_top], [ur, v_bot], [ul, v_bot]])
    pts.append(front)
    if tall < cam_h:  # the top face is visible from above
        ulb = cx - fx * (Y + size / 2) / xb
        urb = cx - fx * (Y - size / 2) / xb
        v_top_b = cy + fx * (cam_h - tall) / xb
        top = np.array([[ul, v_top], [ur, v_top], [urb, v_top_b], [ulb, v_top_b]])
        top_color = color * 0.8 + 255 * 0.2
        cv2.fillConvexPoly(img, np.round(top).astype(np.int32),
                           tuple(float(c) for c in top_color), cv2.LINE_AA)
        pts.append(top)
    front_color = color * 0.9
    cv2.fillConvexPoly(img, np.round(front).astype(np.int32),
                       tuple(float(c) for c in front_color), cv2.LINE_AA)
    # a slightly darker edge between the faces
    cv2.line(img, (int(round(ul)), int(round(v_top))), (int(round(ur)), int(round(v_top))),
             tuple(float(c) for c in color * 0.75), 1, cv2.LINE_AA)
    allp = np.concatenate(pts)
    x0 = max(0, int(math.floor(allp[:, 0].min())))
    x1 = min(w, int(math.ceil(allp[:, 0].max())))
    y0 = max(0, int(math.floor(allp[:, 1].min())))
    y1 = min(h, int(math.ceil(allp[:, 1].max())))
    if x1 <= x0 or y1 <= y0:
        return None
    return (x0, y0, x1 - x0, y1 - y0)
