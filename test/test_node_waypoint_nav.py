"""waypoint_nav node across processes: navigate_to_waypoint over Nav2's plain topics.

The node runs in its own process (world small, pose from odom). The test process plays
the robot base a Nav2 stack would drive (a test double): it takes each ``goal_pose`` and
publishes ``odom`` moving toward it at ``step`` metres per 50 ms, or not at all.
"""

from __future__ import annotations

import math
import threading
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import NodeProcess, answering_action_client, ros_client, wait_for  # noqa: E402

STALL_TIMEOUT = 3.0  # a stalled base is "blocked" after this; long enough for a loaded CI machine


class FakeBase:
    """Subscribes goal_pose, publishes nav_msgs/Odometry on odom every 50 ms."""

    def __init__(self, node, x: float = 0.0, y: float = 0.0) -> None:
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry

        self.x, self.y = x, y
        self.step = 0.2
        self.goals: list = []
        self.at_goal: list[tuple[float, float]] = []  # where the base was as each goal came
        self._lock = threading.Lock()
        self._goal = None
        self._pub = node.create_publisher(Odometry, "odom", 10)
        self._sub = node.create_subscription(PoseStamped, "goal_pose", self._on_goal, 10)
        self._timer = node.create_timer(0.05, self._tick)
        self._odom = Odometry
        self._node = node

    def _on_goal(self, msg) -> None:
        with self._lock:
            self.goals.append(msg)
            self.at_goal.append((self.x, self.y))
            self._goal = (msg.pose.position.x, msg.pose.position.y)

    def _tick(self) -> None:
        with self._lock:
            if self._goal is not None and self.step > 0:
                dx, dy = self._goal[0] - self.x, self._goal[1] - self.y
                d = math.hypot(dx, dy)
                if d <= self.step:
                    self.x, self.y = self._goal
                else:
                    self.x += self.step * dx / d
                    self.y += self.step * dy / d
            msg = self._odom()
            msg.header.frame_id = "odom"
            msg.header.stamp = self._node.get_clock().now().to_msg()
            msg.pose.pose.position.x, msg.pose.pose.position.y = self.x, self.y
            msg.pose.pose.orientation.w = 1.0
        self._pub.publish(msg)

    def teleport(self, x: float, y: float) -> None:
        with self._lock:
            self.x, self.y, self._goal = x, y, None


@pytest.fixture(scope="module")
def nav(tmp_path_factory):
    """(node process, test node, fake base, action client), shared by the module's tests."""
    from glove_ros.action import NavigateToWaypoint
    from glove_ros.nodes.common import SpinSafeActionClient

    log_dir = tmp_path_factory.mktemp("waypoint_nav")
    proc = NodeProcess("glove_ros.nodes.waypoint_nav_node", log_dir, {
        "world": "small", "pose_source": "odom", "nav.stall_timeout": STALL_TIMEOUT,
        "nav.timeout": 30.0})
    try:
        with ros_client("waypoint_nav_test") as node:
            base = FakeBase(node)
            # destroyed while the node spins: only a spin-safe client leaves the node running
            probe = SpinSafeActionClient(node, NavigateToWaypoint, "navigate_to_waypoint")
            wait_for(lambda: probe.server_is_ready() or not proc.alive(), 20,
                     "navigate_to_waypoint server", proc.log)
            assert proc.alive(), proc.log()
            probe.destroy()
            # a client whose answers arrive: an unknown waypoint is aborted before anything
            # moves, so it can be sent until its answers come back
            client, result = answering_action_client(
                node, NavigateToWaypoint, "navigate_to_waypoint",
                lambda _attempt: NavigateToWaypoint.Goal(waypoint="no_such_waypoint"), proc.log)
            assert result.outcome == "unknown_waypoint", result
            wait_for(lambda: node.count_publishers("goal_pose") > 0, 10, "goal_pose publisher",
                     proc.log)
            yield proc, node, base, client
    finally:
        proc.stop()


def _wait(future, timeout: float, what: str, logs=None):
    end = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}"
                                 + (f"\n--- logs ---\n{logs()}" if logs else ""))
        time.sleep(0.01)
    return future.result()


def _send(client, waypoint: str, avoid=(), feedback=None):
    from glove_ros.action import NavigateToWaypoint

    goal = NavigateToWaypoint.Goal(waypoint=waypoint, avoid_edges=list(avoid))
    return client.send_goal_async(goal, feedback_callback=feedback)


def _run(nav, waypoint: str, avoid=(), timeout: float = 15.0):
    proc, _node, _base, client = nav
    feedback: list = []
    handle = _wait(_send(client, waypoint, avoid, lambda f: feedback.append(f.feedback)),
                   10, "goal response", proc.log)
    assert handle.accepted, proc.log()
    res = _wait(handle.get_result_async(), timeout, f"result for {waypoint}", proc.log)
    return res, feedback


def test_reached_with_final_waypoint(nav):
    from action_msgs.msg import GoalStatus

    proc, _node, base, _client = nav
    base.teleport(0.0, 0.0)
    base.step = 0.2
    res, feedback = _run(nav, "room_b", avoid=["hall:room_a"])
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED, proc.log()
    assert (r.reached, r.outcome, r.final_waypoint) == (True, "reached", "room_b")
    assert r.travel_time > 0.0
    goal = base.goals[-1]
    assert goal.header.frame_id == "map"
    assert (goal.pose.position.x, goal.pose.position.y) == pytest.approx((1.0, 1.0))
    assert goal.pose.orientation.w == pytest.approx(1.0)  # room_b yaw 0
    assert math.hypot(base.x - 1.0, base.y - 1.0) <= 0.25
    assert feedback and all(0.0 <= f.distance_remaining <= 1.5 for f in feedback)
    assert "avoid_edges" in proc.log() and "not supported" in proc.log()


def test_goal_carries_waypoint_yaw(nav):
    proc, _node, base, _client = nav
    base.teleport(1.0, 1.0)
    base.step = 0.2
    res, _ = _run(nav, "hall")
    assert res.result.outcome == "reached", proc.log()
    q = base.goals[-1].pose.orientation
    assert 2 * math.atan2(q.z, q.w) == pytest.approx(1.5708, abs=1e-4)


def test_blocked_when_base_stalls(nav):
    from action_msgs.msg import GoalStatus

    proc, _node, base, _client = nav
    base.teleport(0.0, 1.0)   # at hall
    base.step = 0.0           # the base never moves
    n_goals = len(base.goals)
    t0 = time.monotonic()
    res, _ = _run(nav, "room_a")
    r = res.result
    assert res.status == GoalStatus.STATUS_ABORTED
    assert (r.reached, r.outcome, r.final_waypoint) == (False, "blocked", "hall"), proc.log()
    assert time.monotonic() - t0 >= STALL_TIMEOUT * 0.9
    # the target goal, then the stop goal at the current pose
    wait_for(lambda: len(base.goals) >= n_goals + 2, 5, "stop goal", proc.log)
    target, stop = base.goals[n_goals], base.goals[-1]
    assert (target.pose.position.x, target.pose.position.y) == pytest.approx((-1.0, 1.0))
    assert (stop.pose.position.x, stop.pose.position.y) == pytest.approx((0.0, 1.0))


def test_unknown_waypoint_is_aborted(nav):
    from action_msgs.msg import GoalStatus

    proc, _node, base, _client = nav
    n_goals = len(base.goals)
    res, _ = _run(nav, "kitchen")
    assert res.status == GoalStatus.STATUS_ABORTED
    assert (res.result.reached, res.result.outcome) == (False, "unknown_waypoint")
    assert len(base.goals) == n_goals  # nothing sent to Nav2
    assert "unknown waypoint" in proc.log()


def test_cancel_stops_the_robot(nav):
    from action_msgs.msg import GoalStatus

    proc, _node, base, client = nav
    base.teleport(0.0, 0.0)
    base.step = 0.01          # 0.2 m/s: progress, but far from done when cancelled
    n_goals = len(base.goals)
    feedback: list = []
    handle = _wait(_send(client, "room_a", feedback=lambda f: feedback.append(f)), 10,
                   "goal response", proc.log)
    assert handle.accepted
    wait_for(lambda: len(feedback) >= 2, 10, "feedback", proc.log)
    with base._lock:
        before = math.hypot(base.x, base.y)  # how far along the (straight) way at cancel
    _wait(handle.cancel_goal_async(), 10, "cancel response", proc.log)
    res = _wait(handle.get_result_async(), 10, "cancelled result", proc.log)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert (res.result.reached, res.result.outcome) == (False, "cancelled")
    wait_for(lambda: len(base.goals) >= n_goals + 2, 5, "stop goal", proc.log)
    stop = base.goals[-1]
    # the stop goal is where the robot was, well short of room_a (-1, 1): on its way, no
    # further than it had got when the stop came, and not behind where it was at the
    # cancel by more than a few odometry ticks (the node knows the pose from odom, 20 Hz;
    # how far the base rolled on before the stop came depends on the machine's load)
    assert math.hypot(stop.pose.position.x + 1.0, stop.pose.position.y - 1.0) > 0.5
    along = math.hypot(stop.pose.position.x, stop.pose.position.y)
    assert before - 5 * base.step <= along <= math.hypot(*base.at_goal[-1]) + 1e-9
    # the node is free again: a new goal is accepted and reached
    base.step = 0.2
    res, _ = _run(nav, "dock")
    assert res.result.outcome == "reached" and res.result.final_waypoint == "dock"
