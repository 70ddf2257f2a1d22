"""Waypoint navigation bridge: ``navigate_to_waypoint`` on a real robot, over Nav2.

The planner drives the robot through the ``navigate_to_waypoint`` action; in simulation the
simulator node serves it, on the JetRover this node does, in one of two ways
(``nav2.interface``; ``auto`` picks the action when ``nav2_msgs`` is importable):

**action** (Nav2's ``NavigateToPose`` on ``navigate_to_pose``): the waypoint's pose (from
the world file, frame ``map_frame``) is the goal; Nav2's feedback becomes ours
(distance_remaining; current_waypoint from its current_pose, which must be in
``map_frame``); succeeded -> ``reached``, aborted (no plan, recoveries exhausted) ->
``blocked``, our cancel and ``nav.timeout`` cancel the Nav2 goal for real (``cancelled`` /
``timeout``); no server within ``nav2.server_timeout`` -> ``unreachable`` (the task fails,
nothing is remembered).

**topic** (fallback, no ``nav2_msgs``): it publishes the waypoint's pose on ``goal_pose``,
the topic Nav2's ``bt_navigator`` (and RViz's "Nav2 Goal") uses, and judges progress from
the robot pose (:class:`glove_ros.core.world.waypoint_nav.NavTracker`):

- ``reached``: within ``nav.xy_tolerance`` of the waypoint (final_waypoint = the target);
- ``blocked``: no ``nav.stall_distance`` of movement within ``nav.stall_timeout`` seconds
  (Nav2 could not plan, gave up after its recoveries, or never received the goal);
- ``timeout``: not there after ``nav.timeout`` seconds;
- ``unknown_waypoint``: the world file has no such waypoint (aborted at once);
- ``cancelled``: the goal was cancelled; the robot is stopped by sending its current pose
  as the new goal.

On blocked, timeout and cancel the current pose is sent as the goal so that Nav2 stops
chasing a goal the planner has given up. ``final_waypoint`` is the target when reached,
else the waypoint within ``nav.xy_tolerance`` of the robot ("" between waypoints).
``avoid_edges`` cannot be expressed in NavigateToPose or a goal pose (Nav2 plans its own
route on its costmap; use a keepout filter mask for corridors that stay closed); they are
logged and ignored. One goal at a time; a second is rejected.

Interfaces (relative names; remap in launch):
  act  navigate_to_pose      nav2_msgs/NavigateToPose client (interface action)
  pub  goal_pose             geometry_msgs/PoseStamped (frame ``map_frame``) -> bt_navigator
                             (interface topic)
  sub  pose                  geometry_msgs/PoseWithCovarianceStamped, when pose_source=pose
                             (remap to ``amcl_pose`` on the JetRover)
  sub  odom                  nav_msgs/Odometry, when pose_source=odom (only meaningful when
                             the odometry frame coincides with ``map_frame``)
  act  navigate_to_waypoint  glove_ros/NavigateToWaypoint (feedback, cancel)

Lifecycle: configure validates parameters and loads the world's waypoints; activate opens
the interfaces; deactivate closes them (a running goal ends as ``cancelled``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from glove_ros.action import NavigateToWaypoint
from glove_ros.core.world.waypoint_nav import (
    CANCELLED,
    DETOUR,
    DRIVING,
    REACHED,
    UNREACHABLE,
    NavConfig,
    NavTracker,
    corridors_driven,
    judge_arrival,
    nearest_waypoint,
    outcome_from_nav2,
    route_deviation,
)
from glove_ros.core.world.worldfile import World, load_world
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    SpinSafeActionClient,
    declare_params,
    destroy_handles,
    latched_qos,
    param_values,
    run,
    validating_callback,
    wait_future,
)
from glove_ros.paths import resolve_world

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("world", "jetrover_maze", "world file (a path or a bundled world's name); only its "
          "waypoints are used", read_only=True),
    Param("map_frame", "map", "frame of the goal poses and of the robot pose"),
    Param("pose_source", "pose", "'pose' (PoseWithCovarianceStamped on 'pose', e.g. amcl_pose) "
          "or 'odom' (nav_msgs/Odometry on 'odom')", read_only=True),
    Param("nav.xy_tolerance", 0.25, "metres from the waypoint that count as reached"),
    Param("nav.stall_timeout", 20.0, "seconds without nav.stall_distance of movement -> blocked"),
    Param("nav.stall_distance", 0.1, "metres of movement that count as progress"),
    Param("nav.timeout", 300.0, "seconds before a goal ends as timeout"),
    Param("nav.corridor_tolerance", 1.0, "metres the travelled path may stray from the straight "
          "corridor between two waypoints: further, and an arrival is a 'detour' (memory learns "
          "nothing about the corridor Nav2 drove around)"),
    Param("nav2.interface", "auto", "'action' (Nav2's NavigateToPose), 'topic' (goal_pose + "
          "pose tracking) or 'auto' (action when nav2_msgs is importable)", read_only=True),
    Param("nav2.action", "navigate_to_pose", "NavigateToPose action name (relative)",
          read_only=True),
    Param("nav2.server_timeout", 5.0, "seconds to wait for the NavigateToPose server"),
    Param("nav2.behavior_tree", "", "behaviour tree file for Nav2 ('' = Nav2's default)"),
)

POSE_SOURCES = ("pose", "odom")
INTERFACES = ("auto", "action", "topic")


def nav2_action_type() -> Any:
    """Nav2's NavigateToPose action type, or None when nav2_msgs is not installed."""
    try:
        from nav2_msgs.action import NavigateToPose
    except ImportError:
        return None
    return NavigateToPose


def choose_interface(requested: str) -> str:
    """'action' or 'topic' for ``nav2.interface``; ValueError if action is impossible."""
    if requested not in INTERFACES:
        raise ValueError(f"nav2.interface must be one of {', '.join(INTERFACES)} "
                         f"(got '{requested}')")
    have = nav2_action_type() is not None
    if requested == "action" and not have:
        raise ValueError("nav2.interface is 'action' but nav2_msgs is not importable "
                         "(install ros-<distro>-nav2-msgs, or use 'topic')")
    if requested == "auto":
        return "action" if have else "topic"
    return requested
TICK = 0.1  # seconds between progress checks / feedback


def nav_config(values: dict[str, Any]) -> NavConfig:
    """The tracker config from the ``nav.*`` parameters (validated)."""
    return NavConfig.from_dict({k: v for k, v in values.items() if k.startswith("nav.")})


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if str(values["pose_source"]) not in POSE_SOURCES:
        raise ValueError(f"pose_source must be one of {', '.join(POSE_SOURCES)} "
                         f"(got '{values['pose_source']}')")
    if not str(values["map_frame"]).strip():
        raise ValueError("map_frame is empty")
    if not str(values["world"]).strip():
        raise ValueError("world is empty; give a world file path or a bundled world name")
    if float(values["nav2.server_timeout"]) <= 0:
        raise ValueError("nav2.server_timeout must be > 0")
    choose_interface(str(values["nav2.interface"]))
    nav_config(values)


def yaw_of(q: Any) -> float:
    """Yaw of a geometry_msgs/Quaternion."""
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


class WaypointNavNode(LifecycleNode):
    """Serves ``navigate_to_waypoint`` by publishing Nav2 goal poses and watching the pose."""

    def __init__(self) -> None:
        super().__init__("waypoint_nav")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._world: World | None = None
        self._lock = threading.Lock()
        self._pose: tuple[float, float, float] | None = None  # x, y, yaw in map_frame
        self._pose_seq = 0
        self._frame_warned = False
        self._busy = False
        self._route: list[tuple[float, float]] | None = None  # poses of the goal in flight
        self._active = False
        self._handles: list[Any] = []
        self._goal_pub = None
        self._action: ActionServer | None = None
        self._interface = "topic"
        self._nav2 = None  # ActionClient of NavigateToPose (interface action)

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            path = resolve_world(str(values["world"]))
            self._world = load_world(path)
        except (ValueError, FileNotFoundError) as exc:
            self.get_logger().error(f"cannot configure waypoint_nav: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._interface = choose_interface(str(values["nav2.interface"]))
        self.get_logger().info(
            f"world '{self._world.name}' from {path}: waypoints "
            f"{', '.join(self._world.waypoint_ids)}; pose from '{values['pose_source']}'; "
            f"Nav2 through its {self._interface}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        group = ReentrantCallbackGroup()
        if self._interface == "action":
            self._nav2 = SpinSafeActionClient(self, nav2_action_type(),
                                              str(self.get_parameter("nav2.action").value),
                                              callback_group=group)
        else:
            self._goal_pub = self.create_publisher(PoseStamped, "goal_pose", 10)
        if self.get_parameter("pose_source").value == "odom":
            sub = self.create_subscription(Odometry, "odom", self._on_odom, 10,
                                           callback_group=group)
            self._handles = [sub]
        else:  # amcl_pose: AMCL keeps its last pose (transient local) and is silent while the
            # robot stands; a second, latched subscription gets that pose at start, while the
            # plain one still matches a volatile publisher (a latched reader would not)
            self._handles = [
                self.create_subscription(PoseWithCovarianceStamped, "pose", self._on_pose, 10,
                                         callback_group=group),
                self.create_subscription(PoseWithCovarianceStamped, "pose", self._on_first_pose,
                                         latched_qos(), callback_group=group)]
        self._active = True
        self._action = ActionServer(
            self, NavigateToWaypoint, "navigate_to_waypoint", self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=group,
        )
        goals = (self._goal_pub.topic_name if self._goal_pub is not None
                 else f"action {self._nav2._action_name}")
        self.get_logger().info(f"waypoint_nav active; goals on {goals}, pose from "
                               f"{self._handles[0].topic_name}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        deadline = time.monotonic() + 5.0
        while self._busy and time.monotonic() < deadline:  # let a running goal finish
            time.sleep(0.05)
        if self._action is not None:
            self._action.destroy()
            self._action = None
        destroy_handles(self, self._handles)
        if self._goal_pub is not None:
            self.destroy_publisher(self._goal_pub)
            self._goal_pub = None
        if self._nav2 is not None:
            self._nav2.destroy()
            self._nav2 = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._world = None
        with self._lock:
            self._pose = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return TransitionCallbackReturn.SUCCESS

    # pose ------------------------------------------------------------------------------
    def _store_pose(self, frame: str, pose: Any) -> None:
        mf = str(self.get_parameter("map_frame").value)
        if frame and frame != mf and not self._frame_warned:
            self._frame_warned = True
            self.get_logger().warning(
                f"robot pose is in frame '{frame}', goals in '{mf}': progress is judged as if "
                f"they coincided (use pose_source:=pose with amcl_pose on a real robot)")
        with self._lock:
            self._pose = (float(pose.position.x), float(pose.position.y),
                          yaw_of(pose.orientation))
            self._pose_seq += 1
            if self._route is not None:
                self._route.append(self._pose[:2])

    def _on_pose(self, msg: PoseWithCovarianceStamped) -> None:
        self._store_pose(msg.header.frame_id, msg.pose.pose)

    def _on_first_pose(self, msg: PoseWithCovarianceStamped) -> None:
        """The latched reader: only AMCL's last pose from before this node started counts."""
        with self._lock:
            known = self._pose is not None
        if not known:
            self._on_pose(msg)

    def _on_odom(self, msg: Odometry) -> None:
        self._store_pose(msg.header.frame_id, msg.pose.pose)

    # goals -----------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _send_goal(self, x: float, y: float, yaw: float) -> None:
        pub = self._goal_pub
        if pub is None:
            return
        pub.publish(self._goal_pose(x, y, yaw))

    def _stop(self, why: str) -> None:
        """Send the current pose as the goal so that Nav2 stops driving."""
        with self._lock:
            pose = self._pose
        if pose is None:
            self.get_logger().warning(f"{why}: no robot pose known, cannot send a stop goal")
            return
        self._send_goal(*pose)

    def _on_goal(self, goal: Any) -> GoalResponse:
        with self._lock:
            if self._busy or not self._active:
                self.get_logger().warning(f"rejecting goal '{goal.waypoint}': "
                                          + ("already navigating" if self._busy else "inactive"))
                return GoalResponse.REJECT
            self._busy = True
        return GoalResponse.ACCEPT

    def _final_waypoint(self, tol: float) -> str:
        with self._lock:
            pose = self._pose
        if pose is None or self._world is None:
            return ""
        return nearest_waypoint(self._world, pose[0], pose[1], tol) or ""

    def _execute(self, handle: Any) -> Any:
        tol = float(self.get_parameter("nav.xy_tolerance").value)
        start = self._final_waypoint(tol)  # the corridor starts where the robot stands
        with self._lock:
            self._route = []
        try:
            result = self._drive(handle)
            return self._judge_route(result, start, handle.request.waypoint)
        finally:
            with self._lock:
                self._busy = False
                self._route = None

    def _judge_route(self, result: Any, start: str, goal: str) -> Any:
        """Which corridors the drive went along (``result.corridors``, from the poses), and
        whether a reached goal one corridor away was reached along it or by a detour."""
        world = self._world
        if world is None or not start or start == goal or not world.has_waypoint(start):
            return result
        with self._lock:
            path = list(self._route or [])
        tol = float(self.get_parameter("nav.corridor_tolerance").value)
        xy = {w.id: (w.x, w.y) for w in world.waypoints}
        edges = {tuple(sorted((e.a, e.b))) for e in world.edges}
        visit = 2.0 * float(self.get_parameter("nav.xy_tolerance").value)
        if result.outcome == REACHED:
            path = [*path, xy[goal]]  # it is there: the last visit is the goal
        result.corridors = [f"{a}:{b}" for a, b in
                            corridors_driven(path, start, xy, edges, visit, tol)]
        if result.outcome != REACHED or tuple(sorted((start, goal))) not in edges:
            return result  # only a goal one corridor away says something about a corridor
        a, b = world.waypoint(start), world.waypoint(goal)
        if judge_arrival(path, (a.x, a.y), (b.x, b.y), tol) == DETOUR:
            worst = route_deviation(path, (a.x, a.y), (b.x, b.y))
            self.get_logger().warning(
                f"navigate_to '{goal}': arrived by a detour ({worst:.1f} m off the corridor "
                f"{start} -> {goal}, tolerance {tol} m): the corridor is not recorded")
            result.outcome = DETOUR
        return result

    def _drive(self, handle: Any) -> Any:
        goal = handle.request
        result = NavigateToWaypoint.Result(reached=False)
        world = self._world
        config = nav_config(param_values(self, PARAMS))
        if world is None or not world.has_waypoint(goal.waypoint):
            known = ", ".join(world.waypoint_ids) if world is not None else "none"
            self.get_logger().error(f"navigate_to '{goal.waypoint}': unknown waypoint "
                                    f"(known: {known})")
            result.outcome = "unknown_waypoint"
            result.final_waypoint = self._final_waypoint(config.xy_tolerance)
            handle.abort()
            return result
        if goal.avoid_edges:
            self.get_logger().warning(
                f"navigate_to '{goal.waypoint}': avoid_edges {list(goal.avoid_edges)} not "
                f"supported by Nav2's NavigateToPose or goal_pose (Nav2 plans its own route on its "
                f"costmap; use a keepout mask); ignored")
        wp = world.waypoint(goal.waypoint)
        if self._interface == "action":
            return self._drive_action(handle, wp, config, result)
        self._wait_for_nav2()
        start = self._now()
        tracker = NavTracker((wp.x, wp.y), config, start)
        self._send_goal(wp.x, wp.y, wp.yaw)
        self.get_logger().info(f"navigate_to '{wp.id}': goal ({wp.x:.2f}, {wp.y:.2f}, "
                               f"yaw {wp.yaw:.2f}) sent")
        seen = -1
        status = DRIVING
        while True:
            if handle.is_cancel_requested or not self._active:
                status = "cancelled"
                break
            with self._lock:
                pose, seq = self._pose, self._pose_seq
            now = self._now()
            if pose is not None and seq != seen:
                seen = seq
                status = tracker.update(pose[0], pose[1], now)
            else:
                status = tracker.poll(now)
            if tracker.done:
                break
            dist = tracker.distance_remaining
            if dist is not None:
                handle.publish_feedback(NavigateToWaypoint.Feedback(
                    current_waypoint=self._final_waypoint(config.xy_tolerance),
                    distance_remaining=float(dist)))
            time.sleep(TICK)
        if status != REACHED:
            self._stop(f"navigate_to '{wp.id}' {status}")
        result.reached = status == REACHED
        result.outcome = status
        result.final_waypoint = (wp.id if status == REACHED
                                 else self._final_waypoint(config.xy_tolerance))
        result.travel_time = float(max(self._now() - start, 0.0))
        if status == "cancelled":
            if handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
        elif status == REACHED:
            handle.succeed()
        else:
            handle.abort()
        dist = tracker.distance_remaining
        self.get_logger().info(
            f"navigate_to '{wp.id}': {status} at '{result.final_waypoint}' after "
            f"{result.travel_time:.1f}s"
            + (f", {dist:.2f} m from the goal" if dist is not None else ", no pose received"))
        return result

    def _drive_action(self, handle: Any, wp: Any, config: NavConfig, result: Any) -> Any:
        """One navigate_to_waypoint goal as one Nav2 NavigateToPose goal."""
        action_type = nav2_action_type()
        client = self._nav2
        start = self._now()
        server_timeout = float(self.get_parameter("nav2.server_timeout").value)
        nav_goal = None
        if client is not None and client.wait_for_server(timeout_sec=server_timeout):
            goal = action_type.Goal()
            goal.pose = self._goal_pose(wp.x, wp.y, wp.yaw)
            goal.behavior_tree = str(self.get_parameter("nav2.behavior_tree").value)
            nav_goal = wait_future(client.send_goal_async(
                goal, feedback_callback=lambda fb: self._on_nav2_feedback(handle, fb, config)),
                server_timeout)
        if nav_goal is None or not nav_goal.accepted:
            why = ("no NavigateToPose server" if nav_goal is None else "Nav2 rejected the goal")
            self.get_logger().error(f"navigate_to '{wp.id}': {why} on "
                                    f"{client._action_name if client else '?'}")
            result.outcome = UNREACHABLE
            result.final_waypoint = self._final_waypoint(config.xy_tolerance)
            handle.abort()
            return result
        self.get_logger().info(f"navigate_to '{wp.id}': NavigateToPose goal ({wp.x:.2f}, "
                               f"{wp.y:.2f}, yaw {wp.yaw:.2f}) in '{goal.pose.header.frame_id}'")
        done = nav_goal.get_result_async()
        cancelled = timed_out = False
        while not done.done():
            if not cancelled and (handle.is_cancel_requested or not self._active
                                  or self._now() - start > config.timeout):
                cancelled = True
                timed_out = not handle.is_cancel_requested and self._active
                wait_future(nav_goal.cancel_goal_async(), server_timeout)  # Nav2 stops
            time.sleep(TICK)
        status = done.result().status
        code = int(getattr(done.result().result, "error_code", 0) or 0)
        outcome = outcome_from_nav2(status, cancelled and not timed_out, timed_out, code)
        result.reached = outcome == REACHED
        result.outcome = outcome
        result.final_waypoint = (wp.id if outcome == REACHED
                                 else self._final_waypoint(config.xy_tolerance))
        result.travel_time = float(max(self._now() - start, 0.0))
        if outcome == REACHED:
            handle.succeed()
        elif outcome == CANCELLED and handle.is_cancel_requested:
            handle.canceled()
        else:
            handle.abort()
        self.get_logger().info(f"navigate_to '{wp.id}': {outcome} (Nav2 status {status}, "
                               f"error_code {code}) at '{result.final_waypoint}' after "
                               f"{result.travel_time:.1f}s")
        return result

    def _on_nav2_feedback(self, handle: Any, msg: Any, config: NavConfig) -> None:
        """Nav2 feedback -> our feedback; its current_pose updates the map pose if in map."""
        fb = msg.feedback
        mf = str(self.get_parameter("map_frame").value)
        frame = fb.current_pose.header.frame_id
        if frame == mf:
            self._store_pose(frame, fb.current_pose.pose)
        elif not self._frame_warned:
            self._frame_warned = True
            self.get_logger().warning(f"Nav2 feedback pose in '{frame}', not '{mf}': ignored")
        try:
            handle.publish_feedback(NavigateToWaypoint.Feedback(
                current_waypoint=self._final_waypoint(config.xy_tolerance),
                distance_remaining=float(fb.distance_remaining)))
        except Exception as exc:  # the goal may have ended between Nav2's feedback and here
            self.get_logger().debug(f"feedback dropped: {exc}")

    def _goal_pose(self, x: float, y: float, yaw: float) -> PoseStamped:
        msg = PoseStamped()
        msg.header.frame_id = str(self.get_parameter("map_frame").value)
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.pose.position.x, msg.pose.position.y = float(x), float(y)
        msg.pose.orientation.z, msg.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        return msg

    def _wait_for_nav2(self, timeout: float = 5.0) -> None:
        """Wait briefly for a goal_pose subscriber, so that the goal is not lost."""
        pub = self._goal_pub
        deadline = time.monotonic() + timeout
        while pub is not None and pub.get_subscription_count() == 0:
            if time.monotonic() > deadline:
                self.get_logger().warning(
                    f"no subscriber on {pub.topic_name} (is Nav2's bt_navigator running?); "
                    f"sending the goal anyway")
                return
            time.sleep(0.05)


def main(args: Sequence[str] | None = None) -> int:
    """Run the waypoint navigation bridge."""
    return run(WaypointNavNode, args)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["PARAMS", "WaypointNavNode", "choose_interface", "main", "nav2_action_type",
           "nav_config", "validate", "yaw_of"]
