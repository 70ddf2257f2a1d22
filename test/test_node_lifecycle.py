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


def _state(node, get, log) -> str:
    from lifecycle_msgs.srv import GetState

    return call_retry(node, get, GetState.Request(), timeout=30).current_state.label


def test_failed_configure_stays_alive_and_configures_after_the_fix(tmp_path):
    """A bad parameter leaves the node unconfigured and alive (ros2/demos lifecycle_py);
    set_parameters fixes it and configure / activate bring it up without a restart."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    proc = NodeProcess("glove_ros.nodes.verifier_node", tmp_path, {"probe_budget": -1})
    try:
        wait_for(lambda: "verifier is unconfigured" in proc.log() or not proc.alive(), 60,
                 "the failed configure", proc.log)
        log = proc.log()
        assert "invalid parameters: probe_budget must be >= 0" in log, log
        assert "ros2 lifecycle set /verifier configure" in log, log
        with ros_client("lifecycle_fix") as node:
            get = node.create_client(GetState, "/verifier/get_state")
            change = node.create_client(ChangeState, "/verifier/change_state")
            setp = node.create_client(SetParameters, "/verifier/set_parameters")
            assert _state(node, get, proc.log) == "unconfigured", proc.log()
            assert proc.alive(), proc.log()
            fix = Parameter(name="probe_budget", value=ParameterValue(
                type=ParameterType.PARAMETER_INTEGER, integer_value=5))
            r = call(node, setp, SetParameters.Request(parameters=[fix]), timeout=30)
            assert r.results[0].successful, r.results[0].reason
            for tid in (CONFIGURE, ACTIVATE):
                r = call(node, change, ChangeState.Request(transition=Transition(id=tid)),
                         timeout=30)
                assert r.success, (tid, proc.log())
            assert _state(node, get, proc.log) == "active", proc.log()
            wait_for(lambda: node.count_publishers("/verifier_status") == 1, 30,
                     "verifier_status publisher", proc.log)
    finally:
        assert proc.stop() == 0, proc.log()
    assert "active: probe budget 5" in proc.log()


def test_failed_configure_exits_when_told_to(tmp_path):
    """exit_on_failure:=true (glove-ros launch, respawn:=true): exit 1 for the supervisor."""
    proc = NodeProcess("glove_ros.nodes.verifier_node", tmp_path,
                       {"probe_budget": -1, "exit_on_failure": True})
    try:
        wait_for(lambda: not proc.alive(), 60, "the node to exit", proc.log)
    finally:
        code = proc.stop()
    assert code == 1, proc.log()
    assert "exiting with code 1 (exit_on_failure is true)" in proc.log()
