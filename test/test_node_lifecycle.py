"""Lifecycle hygiene, as ros2/demos lifecycle_py does it: a full cleanup / configure /
activate cycle leaves each topic with exactly one publisher and a working node.

Each node runs in its own process (autostart: configured and active); the test drives
its ``change_state`` service like a lifecycle manager would.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import NodeProcess, call, call_retry, ros_client, wait_for  # noqa: E402

DEACTIVATE, CLEANUP, CONFIGURE, ACTIVATE = 4, 2, 1, 3  # lifecycle_msgs/Transition ids


def _cycle(node, name: str, log) -> None:
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    change = node.create_client(ChangeState, f"/{name}/change_state")
    get = node.create_client(GetState, f"/{name}/get_state")
    # get_state is idempotent: re-sent when a first answer is lost right after discovery
    wait_for(lambda: call_retry(node, get, GetState.Request(), timeout=20).current_state.label
             == "active", 30, f"{name} active", log)
    for tid in (DEACTIVATE, CLEANUP, CONFIGURE, ACTIVATE):
        r = call(node, change, ChangeState.Request(transition=Transition(id=tid)), timeout=20)
        assert r.success, (name, tid, log())
    assert call(node, get, GetState.Request()).current_state.label == "active"


@pytest.mark.parametrize("module,name,params,topics", [
    ("glove_ros.nodes.memory_node", "memory", {"db_path": "{tmp}/m.db"},
     ["memory_events", "dissonance", "probe_requests", "memory_stats"]),
    ("glove_ros.nodes.perception_node", "perception", {}, ["detections"]),
    ("glove_ros.nodes.verifier_node", "verifier", {}, ["verifier_status"]),
    ("glove_ros.nodes.planner_node", "planner", {"world": "small"},
     ["current_waypoint", "task_outcomes"]),
])
def test_cycle_keeps_one_publisher_per_topic(tmp_path, module, name, params, topics):
    params = {k: str(v).replace("{tmp}", str(tmp_path)) for k, v in params.items()}
    proc = NodeProcess(module, tmp_path, params)
    try:
        with ros_client(f"lifecycle_{name}") as node:
            for _ in range(2):
                _cycle(node, name, proc.log)
            for topic in topics:
                wait_for(lambda t=topic: node.count_publishers(t) >= 1, 10, topic, proc.log)
                assert node.count_publishers(topic) == 1, (topic, proc.log())
            if name == "memory":  # and it still answers after two cycles
                from glove_ros.srv import QueryMemory

                query = node.create_client(QueryMemory, "query_memory")
                assert call(node, query, QueryMemory.Request(), timeout=20).total_matching == 0
    finally:
        assert proc.stop() == 0, proc.log()
