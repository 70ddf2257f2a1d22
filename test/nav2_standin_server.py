"""Stand-in for Nav2's bt_navigator: a NavigateToPose action server (test double).

Run as its own process with the test-only nav2_msgs stand-in on the path (built by
test/test_node_nav2_action.py from test/nav2_standin/). What it does with a goal is set by
the latched ``standin/mode`` topic (std_msgs/String):

  succeed  three feedback messages (distance 0.6, 0.4, 0.2 m, current_pose in ``map``
           walking toward the goal), then succeeded
  abort    one feedback message, then aborted with error_code UNKNOWN (Nav2 gave up)
  hang     feedback every 50 ms until the goal is cancelled, then canceled

Every goal is echoed on ``standin/goals`` (geometry_msgs/PoseStamped, the goal pose as
received), every step on ``standin/events`` (std_msgs/String: goal, cancel_request,
succeeded, aborted, canceled) and each mode once in effect on the latched
``standin/mode_applied`` (std_msgs/String).
"""

from __future__ import annotations

import threading
import time

from geometry_msgs.msg import PoseStamped
from nav2_msgs.action import NavigateToPose
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String


class StandIn:
    def __init__(self, node) -> None:
        self.node = node
        self.mode = "succeed"
        self._lock = threading.Lock()
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        group = ReentrantCallbackGroup()
        node.create_subscription(String, "standin/mode", self._on_mode, latched,
                                 callback_group=group)
        self.goals = node.create_publisher(PoseStamped, "standin/goals", 10)
        self.events = node.create_publisher(String, "standin/events", 10)
        self.applied = node.create_publisher(String, "standin/mode_applied", latched)
        self.server = ActionServer(
            node, NavigateToPose, "navigate_to_pose", self._execute,
            goal_callback=lambda _g: GoalResponse.ACCEPT,
            cancel_callback=self._on_cancel, callback_group=group)

    def _on_mode(self, msg) -> None:
        with self._lock:
            self.mode = msg.data
        self.applied.publish(String(data=msg.data))  # the next goal runs in this mode

    def _event(self, text: str) -> None:
        self.events.publish(String(data=text))

    def _on_cancel(self, _handle) -> CancelResponse:
        self._event("cancel_request")
        return CancelResponse.ACCEPT

    def _feedback(self, handle, distance: float) -> None:
        fb = NavigateToPose.Feedback()
        goal = handle.request.pose
        fb.current_pose.header.frame_id = "map"
        fb.current_pose.header.stamp = self.node.get_clock().now().to_msg()
        fb.current_pose.pose.position.x = goal.pose.position.x - distance
        fb.current_pose.pose.position.y = goal.pose.position.y
        fb.current_pose.pose.orientation.w = 1.0
        fb.distance_remaining = float(distance)
        handle.publish_feedback(fb)

    def _execute(self, handle):
        with self._lock:
            mode = self.mode
        self.goals.publish(handle.request.pose)
        self._event("goal")
        result = NavigateToPose.Result()
        if mode == "abort":
            self._feedback(handle, 1.0)
            time.sleep(0.1)
            if hasattr(result, "error_code"):
                result.error_code = NavigateToPose.Result.UNKNOWN
            handle.abort()
            self._event("aborted")
            return result
        if mode == "hang":
            while not handle.is_cancel_requested:
                self._feedback(handle, 2.0)
                time.sleep(0.05)
            handle.canceled()
            self._event("canceled")
            return result
        for d in (0.6, 0.4, 0.2):
            self._feedback(handle, d)
            time.sleep(0.05)
        handle.succeed()
        self._event("succeeded")
        return result


def main() -> int:
    from rosproc import spin_standalone

    return spin_standalone("nav2_standin", StandIn, threads=4)


if __name__ == "__main__":
    raise SystemExit(main())
