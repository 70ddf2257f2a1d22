"""Per-node /diagnostics: one diagnostic_msgs/DiagnosticStatus per node, once a second.

What diagnostic_updater does in C++, kept small: a node registers one check (a callable
returning ``(level, message, {key: value})``); a timer publishes it on the absolute
``/diagnostics`` topic (where rqt_robot_monitor, the diagnostic aggregator and Foxglove
look), named ``glove_ros: <fully qualified node name>`` so robots in different namespaces
stay apart, with ``hardware_id`` the robot (namespace or robot_id). A check that raises is
reported as ERROR with the exception, never kills the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from glove_ros.core.ops.health import ERROR

Check = Callable[[], "tuple[int, str, dict[str, Any]]"]


class NodeDiagnostics:
    """Publishes ``check()`` on /diagnostics every ``period`` seconds (wall clock)."""

    def __init__(self, node: Any, check: Check, period: float = 1.0,
                 hardware_id: str = "", callback_group: Any = None) -> None:
        from rclpy.clock import Clock, ClockType

        self._node = node
        self._check = check
        self.name = f"glove_ros: {node.get_fully_qualified_name()}"
        self.hardware_id = hardware_id or (node.get_namespace().strip("/") or "robot")
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # wall clock: diagnostics keep flowing while simulated time is paused
        self._timer = node.create_timer(period, self.publish, callback_group=callback_group,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def status(self) -> DiagnosticStatus:
        """The current status (runs the check)."""
        try:
            level, message, values = self._check()
        except Exception as exc:  # a broken check is itself a diagnosis
            level, message, values = ERROR, f"diagnostic check failed: {exc}", {}
        return DiagnosticStatus(
            level=bytes([int(level)]), name=self.name, message=str(message),
            hardware_id=self.hardware_id,
            values=[KeyValue(key=str(k), value=_text(v)) for k, v in values.items()])

    def publish(self) -> None:
        """Publish one DiagnosticArray with this node's status."""
        msg = DiagnosticArray(status=[self.status()])
        msg.header.stamp = self._node.get_clock().now().to_msg()
        self._pub.publish(msg)

    def destroy(self) -> None:
        """Stop publishing (node shutdown)."""
        self._node.destroy_timer(self._timer)
        self._node.destroy_publisher(self._pub)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


__all__ = ["NodeDiagnostics"]
