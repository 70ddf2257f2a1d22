"""Markers node: what experience memory believes about the map, for RViz or Foxglove.

Every ``period`` seconds it asks memory (``query_memory``, suppressed history included)
and publishes a ``visualization_msgs/MarkerArray`` on ``memory_markers`` (latched, frame
``map_frame``): waypoints, corridors coloured by memory status and crossed where memory
believes them blocked, and the blocks memory saw at each waypoint
(:mod:`glove_ros.core.world.markers`; trusted green, pending amber, stale-negative purple,
suppressed grey, unknown pale blue). Waypoint positions come from the world file, in the
map frame (REP-105), the same file waypoint_nav uses.

Interfaces (relative names):
  cli  query_memory      glove_ros/QueryMemory
  pub  memory_markers    visualization_msgs/MarkerArray (transient local)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import Point
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from visualization_msgs.msg import Marker, MarkerArray

from glove_ros.core.world.markers import EntryView, Shape, memory_layers
from glove_ros.core.world.worldfile import load_world
from glove_ros.nodes.common import Param, declare_params, latched_qos, param_values, run
from glove_ros.paths import resolve_world
from glove_ros.srv import QueryMemory

PARAMS = (
    Param("world", "jetrover_maze", "world file (a path or a bundled world's name): waypoints "
          "and corridors in the map frame", read_only=True),
    Param("map_frame", "map", "frame_id of the markers"),
    Param("period", 2.0, "seconds between refreshes", read_only=True),
    Param("query_timeout", 5.0, "seconds an unanswered query_memory request is waited for; "
          "then it is dropped and asked again (a reply lost while discovery settles or "
          "memory restarts would otherwise freeze the markers)"),
    Param("max_entries", 5000, "entries asked of memory per refresh"),
    Param("stale_negative_after", 50, "transitions after which a negative belief is drawn "
          "stale (memory's verifier.stale_negative_after)"),
    Param("negative_outcomes", ["hole", "blocked", "collision", "failed", "unreachable"],
          "outcomes that make a belief negative (memory's verifier.negative_outcomes)"),
)
KINDS = {"disc": Marker.CYLINDER, "text": Marker.TEXT_VIEW_FACING, "line": Marker.LINE_STRIP,
         "cross": Marker.LINE_LIST, "cube": Marker.CUBE}


def to_marker(shape: Shape, marker_id: int, frame: str, stamp: Any) -> Marker:
    """One core Shape as a visualization_msgs/Marker."""
    m = Marker(ns=shape.layer, id=marker_id, type=KINDS[shape.kind], action=Marker.ADD)
    m.header.frame_id = frame
    m.header.stamp = stamp
    m.color.r, m.color.g, m.color.b, m.color.a = shape.color
    m.pose.orientation.w = 1.0
    x, y = shape.points[0]
    if shape.kind == "line":
        m.points = [Point(x=float(px), y=float(py), z=0.02) for px, py in shape.points]
        m.scale.x = 0.06
    elif shape.kind == "cross":
        d = 0.15
        m.points = [Point(x=x - d, y=y - d, z=0.05), Point(x=x + d, y=y + d, z=0.05),
                    Point(x=x - d, y=y + d, z=0.05), Point(x=x + d, y=y - d, z=0.05)]
        m.scale.x = 0.05
    else:
        m.pose.position.x, m.pose.position.y = float(x), float(y)
        if shape.kind == "disc":
            m.scale.x, m.scale.y, m.scale.z = 0.3, 0.3, 0.01
        elif shape.kind == "cube":
            m.pose.position.z = 0.05
            m.scale.x = m.scale.y = m.scale.z = 0.1
        else:  # text
            m.pose.position.z = 0.3
            m.scale.z = 0.12
            m.text = shape.text
    return m


class MarkersNode(Node):
    """Polls memory and republishes the marker layers."""

    def __init__(self) -> None:
        super().__init__("markers")
        declare_params(self, PARAMS)
        values = param_values(self, PARAMS)
        world = load_world(resolve_world(str(values["world"])))
        self._waypoints = {w.id: (w.x, w.y) for w in world.waypoints}
        self._corridors = [(e.a, e.b) for e in world.edges]
        self._ids: dict[tuple[str, str], int] = {}
        self._pending: Any = None
        self._pending_since = 0.0
        group = MutuallyExclusiveCallbackGroup()
        self._pub = self.create_publisher(MarkerArray, "memory_markers", latched_qos())
        self._client = self.create_client(QueryMemory, "query_memory", callback_group=group)
        self._timer = self.create_timer(float(values["period"]), self._refresh,
                                        callback_group=group)
        self._publish([])  # the map at once, before memory answers
        self.get_logger().info(f"markers of world '{world.name}' on {self._pub.topic_name}")

    def _marker_id(self, shape: Shape) -> int:
        return self._ids.setdefault((shape.layer, shape.key), len(self._ids))

    def _publish(self, entries: list[EntryView]) -> None:
        values = param_values(self, PARAMS)
        shapes = memory_layers(self._waypoints, self._corridors, entries,
                               list(values["negative_outcomes"]),
                               int(values["stale_negative_after"]))
        stamp = self.get_clock().now().to_msg()
        frame = str(values["map_frame"])
        out = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
        out.markers += [to_marker(s, self._marker_id(s), frame, stamp) for s in shapes]
        self._pub.publish(out)

    def _refresh(self) -> None:
        if self._pending is not None and not self._pending.done():
            waited = time.monotonic() - self._pending_since
            if waited < float(self.get_parameter("query_timeout").value):
                return  # memory still answering the last request
            self.get_logger().warning(
                f"query_memory unanswered after {waited:.1f}s (reply lost or memory "
                "restarted); asking again")
            drop = getattr(self._client, "remove_pending_request", None)  # not on old rclpy
            if drop is not None:
                drop(self._pending)
        if not self._client.service_is_ready():
            return
        req = QueryMemory.Request(include_suppressed=True,
                                  max_results=int(self.get_parameter("max_entries").value))
        self._pending = self._client.call_async(req)
        self._pending_since = time.monotonic()
        self._pending.add_done_callback(self._on_entries)

    def _on_entries(self, future: Any) -> None:
        try:
            res = future.result()
        except Exception as exc:
            self.get_logger().warning(f"query_memory failed: {exc}")
            return
        entries = [EntryView(int(e.id), e.transition.state_key, e.transition.action,
                             e.transition.action_arg, e.transition.outcome, int(e.status))
                   for e in res.entries]
        self._publish(entries)


def main(args: Sequence[str] | None = None) -> int:
    """Run the markers node."""
    return run(MarkersNode, args)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["PARAMS", "MarkersNode", "main", "to_marker"]
