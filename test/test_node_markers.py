"""The markers node in its own process against a memory stand-in that never answers its
first query (as when a reply is lost while discovery settles, or memory restarts mid-call).

What must hold: the node drops the unanswered request after ``query_timeout``, says so in
its log, asks again, and draws the memory the second answer carries.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, ros_client, wait_for  # noqa: E402

NODE = "glove_ros.nodes.markers_node"


def test_a_lost_query_reply_is_asked_again(tmp_path):
    from rclpy.callback_groups import ReentrantCallbackGroup
    from visualization_msgs.msg import Marker, MarkerArray

    from glove_ros.msg import MemoryEntry, Transition
    from glove_ros.srv import QueryMemory

    release = threading.Event()
    asked: list[int] = []

    def serve(request, response):
        asked.append(1)
        if len(asked) == 1:
            release.wait(60)  # the first request is never answered while the test runs
            return response
        entry = MemoryEntry(id=1, status=MemoryEntry.STATUS_TRUSTED, transition=Transition(
            state_key="room_a", action="look", outcome="colors=red"))
        response.entries = [entry]
        response.total_matching = 1
        return response

    with ros_client("markers_test") as node:
        node.create_service(QueryMemory, "query_memory", serve,
                            callback_group=ReentrantCallbackGroup())
        markers = Collector(node, MarkerArray, "memory_markers")
        proc = NodeProcess(NODE, tmp_path, {"world": "small", "period": 0.3,
                                            "query_timeout": 1.5})
        try:
            def drawn_red() -> bool:
                if not markers.items:
                    return False
                return any(m.text == "red (trusted)" for m in markers.items[-1].markers
                           if m.action == Marker.ADD)

            wait_for(drawn_red, 30, "memory drawn from the second query", proc.log)
            assert len(asked) >= 2
            assert "asking again" in proc.log()
            assert proc.alive()
        finally:
            release.set()
            assert proc.stop() == 0, proc.log()
