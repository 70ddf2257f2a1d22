"""Simulator node: the built-in JetRover simulator, publishing what the real robot publishes.

Wraps :class:`glove_ros.core.world.sim.Simulator` (a waypoint-graph robot in a drifting world
file). Simulated time runs ``time_scale`` times faster than the wall clock and is
published on ``/clock``; the other nodes run with ``use_sim_time:=true``.

Interfaces (relative names; remap in launch):
  pub  camera/image_raw     sensor_msgs/Image (bgr8, rendered with OpenCV)
  pub  odom                 nav_msgs/Odometry (with the world's odometry noise / jitter)
  pub  pose                 geometry_msgs/PoseStamped (ground truth, frame ``map``)
  pub  battery              sensor_msgs/BatteryState (POWER_SUPPLY_STATUS_CHARGING when docked)
  pub  docked               std_msgs/Bool
  pub  world_events         std_msgs/String (each applied world event, for logs and demos)
  pub  /clock               rosgraph_msgs/Clock
  sub  episode_start        std_msgs/UInt32 (applies the world's events due at that episode)
  act  navigate_to_waypoint glove_ros/NavigateToWaypoint (feedback, cancel)
  srv  dock / undock        std_srvs/Trigger
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.time import Time
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import BatteryState, Image
from std_msgs.msg import Bool, String, UInt32
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.action import NavigateToWaypoint
from glove_ros.core.world.sim import Pose2D, Simulator
from glove_ros.core.world.worldfile import load_world
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    destroy_handles,
    param_values,
    run,
    validating_callback,
)
from glove_ros.paths import make_private_dirs, resolve_world

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("world", "jetrover_maze", "world file: a path, or the name of a bundled world",
          read_only=True),
    Param("seed", -1, "noise seed; -1 uses the world's seed", read_only=True),
    Param("time_scale", 10.0, "simulated seconds per wall-clock second"),
    Param("tick", 0.02, "wall-clock seconds between simulation steps"),
    Param("camera_rate", 5.0, "camera frames per wall-clock second (0 disables)"),
    Param("image_width", 640, "camera image width, pixels"),
    Param("image_height", 480, "camera image height, pixels"),
    Param("map_frame", "map", "frame of poses"),
    Param("odom_frame", "odom", "frame of odometry"),
    Param("base_frame", "base_link", "robot body frame"),
    Param("camera_frame", "camera_link", "camera frame"),
    Param("publish_clock", True, "publish /clock (simulated time)"),
    Param("state_path", "", "JSON file the world state is saved to and resumed from after a "
          "restart (robot waypoint, episode, time, applied events); '' = start fresh",
          read_only=True),
    Param("state_period", 1.0, "wall seconds between state saves (also saved after every "
          "navigation, docking and episode start)", read_only=True),
)


def validate(values: dict[str, Any]) -> None:
    """Refuse parameter values the simulator cannot work with."""
    if float(values["time_scale"]) <= 0:
        raise ValueError("time_scale must be > 0")
    if not 0 < float(values["tick"]) <= 1.0:
        raise ValueError("tick must be in (0, 1] seconds")
    if float(values["camera_rate"]) < 0:
        raise ValueError("camera_rate must be >= 0")
    if not (16 <= int(values["image_width"]) <= 4096 and 16 <= int(values["image_height"]) <= 4096):
        raise ValueError("image size must be within 16..4096 pixels")


def image_msg(frame: np.ndarray, stamp: Any, frame_id: str) -> Image:
    """BGR uint8 array -> sensor_msgs/Image (bgr8)."""
    h, w = frame.shape[:2]
    msg = Image(height=h, width=w, encoding="bgr8", is_bigendian=0, step=w * 3)
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.data = np.ascontiguousarray(frame, dtype=np.uint8).tobytes()
    return msg


class SimulatorNode(LifecycleNode):
    """Steps the simulator on a wall-clock timer and exposes it like a robot."""

    def __init__(self) -> None:
        super().__init__("simulator")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._sim: Simulator | None = None
        self._lock = threading.Lock()
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._handles: list[Any] = []
        self._pubs: dict[str, Any] = {}
        self._timer = None
        self._last_frame = 0.0
        self._nav_busy = False
        self._state_path = ""
        self._publish_failures = 0
        self._last_save = 0.0

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            path = resolve_world(str(values["world"]))
            world = load_world(path)
            seed = None if int(values["seed"]) < 0 else int(values["seed"])
            self._sim = Simulator(world, seed=seed)
            self._state_path = str(values["state_path"])
            resumed = self._resume()
        except (ValueError, FileNotFoundError, OSError) as exc:
            self.get_logger().error(f"cannot configure simulator: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(
            f"world '{world.name}' from {path}: {len(world.waypoints)} waypoints, "
            f"{len(world.blocks)} blocks, {len(world.events)} events; robot at "
            f"{self._sim.last_waypoint}" + (f" (resumed from {resumed})" if resumed else "")
        )
        return TransitionCallbackReturn.SUCCESS

    # restart safety --------------------------------------------------------------------
    def _resume(self) -> str:
        """Continue the saved world (``state_path``) if there is one; returns the path or ''.

        A restarted simulator must not reset the world: the robot would stand at the dock
        while the planner remembers it elsewhere, and drift already applied would be undone.
        """
        path = Path(self._state_path) if self._state_path else None
        if path is None or not path.exists():
            return ""
        try:
            snap = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"simulator state {path} is unreadable ({exc}); move it aside to "
                             "start a fresh world") from exc
        assert self._sim is not None
        if not isinstance(snap, dict):
            raise ValueError(f"simulator state {path} is not a JSON object")
        try:
            self._sim.restore(snap)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"cannot resume simulator state {path}: {exc}") from exc
        return str(path)

    def _save(self) -> None:
        """Write the world state atomically (temp file, fsync, rename); never raises."""
        if not self._state_path or self._sim is None:
            return
        with self._lock:
            snap = self._sim.snapshot()
        path = Path(self._state_path)
        try:
            make_private_dirs(path.parent)
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(snap, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            self.get_logger().error(f"cannot save simulator state to {path}: {exc}")

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        p = self._pubs
        p["image"] = self.create_publisher(Image, "camera/image_raw", 2)
        p["odom"] = self.create_publisher(Odometry, "odom", 10)
        p["pose"] = self.create_publisher(PoseStamped, "pose", 10)
        p["battery"] = self.create_publisher(BatteryState, "battery", 10)
        p["docked"] = self.create_publisher(Bool, "docked", 10)
        p["events"] = self.create_publisher(String, "world_events", 10)
        if self.get_parameter("publish_clock").value:
            p["clock"] = self.create_publisher(ClockMsg, "/clock", 10)
        step_group = MutuallyExclusiveCallbackGroup()
        group = ReentrantCallbackGroup()
        self._handles = [
            self.create_subscription(UInt32, "episode_start", self._on_episode, 10,
                                     callback_group=group),
            self.create_service(Trigger, "dock", self._on_dock, callback_group=group),
            self.create_service(Trigger, "undock", self._on_undock, callback_group=group),
        ]
        self._action = ActionServer(
            self, NavigateToWaypoint, "navigate_to_waypoint", self._execute_nav,
            goal_callback=self._on_goal, cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=group,
        )
        self._timer = self.create_timer(float(self.get_parameter("tick").value), self._step,
                                        callback_group=step_group, clock=self._wall)
        self.get_logger().info(
            f"simulating at {self.get_parameter('time_scale').value}x real time"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        self._action.destroy()
        destroy_handles(self, self._handles)
        return super().on_deactivate(state)

    # simulation loop -------------------------------------------------------------------
    def _sim_stamp(self) -> Any:
        assert self._sim is not None
        return Time(nanoseconds=int(self._sim.time * 1e9)).to_msg()

    def _step(self) -> None:
        sim = self._sim
        if sim is None:
            return
        dt = float(self.get_parameter("tick").value) * float(self.get_parameter("time_scale").value)
        with self._lock:
            before = len(sim.state.applied_events)
            sim.advance(dt)
            applied = sim.state.applied_events[before:]
            status = sim.status()
            odom = sim.odometry()
            frame = None
            rate = float(self.get_parameter("camera_rate").value)
            now = time.monotonic()
            if rate > 0 and now - self._last_frame >= 1.0 / rate:
                self._last_frame = now
                frame = sim.render_camera(int(self.get_parameter("image_width").value),
                                          int(self.get_parameter("image_height").value))
        stamp = self._sim_stamp()
        for event in applied:
            self._announce(event)
        if self._state_path and (applied or now - self._last_save >= float(
                self.get_parameter("state_period").value)):
            self._last_save = now
            self._save()
        try:  # a failed publish (RCLError under load) loses one sample, never the node
            if "clock" in self._pubs:
                self._pubs["clock"].publish(ClockMsg(clock=stamp))
            self._publish_state(status, odom, stamp)
            if frame is not None:
                self._pubs["image"].publish(
                    image_msg(frame, stamp, str(self.get_parameter("camera_frame").value)))
        except Exception as exc:
            self._publish_failures += 1
            self.get_logger().warning(
                f"publish failed ({self._publish_failures} so far; the world goes on): {exc}",
                throttle_duration_sec=10.0)

    def _publish_state(self, status: Any, odom: Pose2D, stamp: Any) -> None:
        mf = str(self.get_parameter("map_frame").value)
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = stamp, mf
        pose.pose = conv.pose_from_pose2d(status.pose.x, status.pose.y, status.pose.yaw)
        self._pubs["pose"].publish(pose)
        od = Odometry()
        od.header.stamp = stamp
        od.header.frame_id = str(self.get_parameter("odom_frame").value)
        od.child_frame_id = str(self.get_parameter("base_frame").value)
        od.pose.pose = conv.pose_from_pose2d(odom.x, odom.y, odom.yaw)
        self._pubs["odom"].publish(od)
        bat = BatteryState()
        bat.header.stamp = stamp
        bat.percentage = float(status.battery)
        bat.present = True
        bat.power_supply_status = (
            BatteryState.POWER_SUPPLY_STATUS_CHARGING if status.charging
            else BatteryState.POWER_SUPPLY_STATUS_FULL if status.docked
            else BatteryState.POWER_SUPPLY_STATUS_DISCHARGING
        )
        self._pubs["battery"].publish(bat)
        self._pubs["docked"].publish(Bool(data=bool(status.docked)))

    def _announce(self, event: Any) -> None:
        text = event.describe()
        kind = "DRIFT" if event.is_drift else "nuisance"
        self.get_logger().info(f"world event ({kind}): {text}")
        self._pubs["events"].publish(String(data=f"{kind}: {text}"))

    # interfaces ------------------------------------------------------------------------
    def _on_episode(self, msg: UInt32) -> None:
        assert self._sim is not None
        with self._lock:
            before = len(self._sim.state.applied_events)
            self._sim.begin_episode(int(msg.data))
            applied = self._sim.state.applied_events[before:]
        for event in applied:
            self._announce(event)
        self._save()

    def _on_dock(self, req: Any, resp: Any) -> Any:
        assert self._sim is not None
        with self._lock:
            resp.success = self._sim.dock()
        self._save()
        resp.message = "docked, charging" if resp.success else (
            f"cannot dock: robot must stand at '{self._sim.world.dock}' and not be driving")
        return resp

    def _on_undock(self, req: Any, resp: Any) -> Any:
        assert self._sim is not None
        with self._lock:
            self._sim.undock()
        resp.success, resp.message = True, "undocked"
        return resp

    def _on_goal(self, goal: Any) -> GoalResponse:
        with self._lock:
            if self._nav_busy:
                self.get_logger().warning(f"rejecting goal '{goal.waypoint}': already navigating")
                return GoalResponse.REJECT
            self._nav_busy = True
        return GoalResponse.ACCEPT

    def _execute_nav(self, handle: Any) -> Any:
        sim = self._sim
        assert sim is not None
        goal = handle.request
        result = NavigateToWaypoint.Result()
        try:
            avoid = []
            for item in goal.avoid_edges:
                a, sep, b = item.partition(":")
                if not sep or not a or not b:
                    raise ValueError(f"avoid_edges item '{item}' is not 'a:b'")
                avoid.append((a, b))
            with self._lock:
                nav = sim.start_navigation(goal.waypoint, avoid_edges=avoid)
            while True:
                with self._lock:
                    if nav.done:
                        break
                    if handle.is_cancel_requested:
                        sim.cancel_navigation()
                        break
                    fb = nav.feedback
                if fb is not None:
                    handle.publish_feedback(NavigateToWaypoint.Feedback(
                        current_waypoint=fb.current_waypoint,
                        distance_remaining=float(fb.distance_remaining)))
                time.sleep(float(self.get_parameter("tick").value))
            res = nav.result
            assert res is not None
            result.reached, result.outcome = bool(res.reached), res.outcome
            result.final_waypoint, result.travel_time = res.final_waypoint, float(res.travel_time)
            if res.outcome == "cancelled":
                handle.canceled()
            elif res.reached:
                handle.succeed()
            else:
                handle.abort()
            self.get_logger().info(
                f"navigate_to {goal.waypoint}: {res.outcome} at '{res.final_waypoint}' "
                f"after {res.travel_time:.1f}s sim"
            )
        except (ValueError, RuntimeError) as exc:
            self.get_logger().error(f"navigate_to {goal.waypoint}: {exc}")
            result.reached, result.outcome = False, "invalid_goal"
            result.final_waypoint = sim.last_waypoint
            handle.abort()
        finally:
            with self._lock:
                self._nav_busy = False
            self._save()
        return result


def main(args: Sequence[str] | None = None) -> int:
    """Run the simulator node."""
    return run(SimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["SimulatorNode", "image_msg", "main"]
