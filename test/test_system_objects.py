"""Objects end to end over DDS: the simulator paints real photos, the shipped detector
(darknet backend) sees them, memory holds the class, the planner finds "the cup".

simulator (worlds/home_objects.yaml) -> camera -> perception (YOLOv3-tiny) -> detections ->
planner -> record_transition -> memory (+ GLOVE) and the verifier node, five processes. What
must hold: "find the cup" succeeds at the kitchen, where the world put it; the memory holds
the look as an object class (``objects=cup``), not a colour; "is there a cup in the
kitchen?" is then answered yes from that look without driving; an object the robot does not
know is refused by name.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from conftest import require_darknet  # noqa: E402
from rosproc import NodeProcess, call, ros_client, wait_for  # noqa: E402
from test_system_jetrover import _run_task  # noqa: E402


@pytest.fixture
def graph(tmp_path):
    require_darknet()
    common = {"use_sim_time": True}
    procs = [
        NodeProcess("glove_ros.nodes.simulator_node", tmp_path,
                    {"world": "home_objects", "time_scale": 10.0, "camera_rate": 5.0}),
        NodeProcess("glove_ros.nodes.perception_node", tmp_path,
                    {**common, "backend": "darknet"}),
        NodeProcess("glove_ros.nodes.memory_node", tmp_path, {
            **common, "db_path": str(tmp_path / "m.db"), "verifier.p_th": 2}),
        NodeProcess("glove_ros.nodes.verifier_node", tmp_path, {**common}),
        NodeProcess("glove_ros.nodes.planner_node", tmp_path, {
            **common, "world": "home_objects", "robot_id": "rover", "look.timeout": 30.0}),
    ]
    yield procs
    for p in procs:
        p.stop()


def test_find_the_cup_with_the_real_detector_and_memory_holds_the_class(graph):
    from glove_ros.action import RunTask
    from glove_ros.msg import DetectionArray
    from glove_ros.nodes.common import SpinSafeActionClient
    from glove_ros.srv import QueryMemory

    def logs():
        return "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in graph)

    with ros_client() as node:
        frames = []
        node.create_subscription(DetectionArray, "detections", frames.append, 10)
        client = SpinSafeActionClient(node, RunTask, "run_task")
        query = node.create_client(QueryMemory, "query_memory")
        assert client.wait_for_server(timeout_sec=60), logs()
        wait_for(lambda: len(frames) > 0, 60, "perception output", logs)
        assert frames[-1].backend == "darknet"

        found = _run_task(client, "find the cup", "t0", timeout=240)
        assert found.success and found.found_at == "kitchen", (found.reason, logs())
        kitchen = call(node, query, QueryMemory.Request(state_key="kitchen", action="look"))
        assert {e.transition.outcome for e in kitchen.entries} == {"objects=cup"}, logs()

        there = _run_task(client, "is there a cup in the kitchen?", "q0")
        assert there.intent == "is_there" and there.success and there.steps == 0, there.answer
        assert there.answer.lower().startswith("yes") and there.cited_entries, there.answer
        gnome = _run_task(client, "find the garden gnome", "q1")
        assert not gnome.success and gnome.reason == "invalid_task"
        assert "garden gnome" in gnome.answer, gnome.answer
    for p in graph:
        assert p.alive(), f"{p.name} died:\n{p.log()}"
