"""/diagnostics and the memory markers over DDS: memory, perception, verifier, planner and
markers nodes as processes, this test as the camera and the robot's experience.

What must hold: every node reports on /diagnostics under its own name (memory: database
size and health, pending queue, probe budget; perception: camera and inference rate of a
BEST_EFFORT camera, which the default sensor-data QoS must receive; verifier: probe
budget; planner: LLM state, latency, fallback rate); memory_markers draws every waypoint
and corridor of the map, a remembered colour block, and colours corridors and blocks by
memory status: trusted, pending (after dissonance) and stale-negative.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, call, ros_client, wait_for  # noqa: E402

from glove_ros.core.world.markers import STATUS_COLORS  # noqa: E402


def _t(state: str, action: str, outcome: str, arg: str = ""):
    from glove_ros.msg import Transition

    return Transition(state_key=state, action=action, action_arg=arg, outcome=outcome,
                      robot_id="rover", episode_id="e")


def _values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def _latest(collector, name: str):
    for array in reversed(list(collector.items)):
        for s in array.status:
            if s.name == name:
                return s
    return None


def _color(marker) -> tuple:
    return tuple(round(v, 2) for v in (marker.color.r, marker.color.g, marker.color.b))


def _rgb(status: str) -> tuple:
    return tuple(round(v, 2) for v in STATUS_COLORS[status][:3])


@pytest.fixture
def nodes(tmp_path):
    procs = [
        NodeProcess("glove_ros.nodes.memory_node", tmp_path, {
            "db_path": str(tmp_path / "m.db"), "verifier.p_th": 2,
            "verifier.stale_negative_after": 3, "verifier.max_probe_budget": 7}),
        NodeProcess("glove_ros.nodes.perception_node", tmp_path),
        NodeProcess("glove_ros.nodes.verifier_node", tmp_path, {"probe_budget": 5}),
        NodeProcess("glove_ros.nodes.planner_node", tmp_path, {"world": "small"}),
        NodeProcess("glove_ros.nodes.markers_node", tmp_path, {
            "world": "small", "period": 0.5, "stale_negative_after": 3}),
    ]
    yield procs
    for p in procs:
        p.stop()


def test_diagnostics_and_markers_reflect_memory(nodes):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import String
    from visualization_msgs.msg import Marker, MarkerArray

    from glove_ros.nodes.common import latched_qos
    from glove_ros.srv import RecordTransition

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-2500:]}" for p in nodes)

    with ros_client("diagnostics_test") as node:
        diagnostics = Collector(node, DiagnosticArray, "/diagnostics")
        markers = Collector(node, MarkerArray, "memory_markers", latched_qos())
        # a camera driver's QoS: BEST_EFFORT (never matched by a RELIABLE subscription)
        best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
        camera = node.create_publisher(Image, "camera/image_raw", best_effort)
        waypoint = node.create_publisher(String, "current_waypoint", latched_qos())
        frame = np.zeros((48, 64, 3), np.uint8)
        frame[10:30, 20:40] = (0, 0, 255)  # a red block, BGR
        stop = threading.Event()

        def stream() -> None:
            while not stop.is_set():
                msg = Image(height=48, width=64, encoding="bgr8", step=64 * 3,
                            data=frame.tobytes())
                msg.header.frame_id = "camera"
                camera.publish(msg)
                time.sleep(0.05)

        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        try:
            waypoint.publish(String(data="hall"))  # standing at a waypoint: perception infers
            # the memory node reports once it is active: only then send it experience (on a
            # loaded machine wait_for_service can succeed while it is still starting up)
            def memory_ready() -> bool:
                status = _latest(diagnostics, "glove_ros: /memory")
                return status is not None and "entries" in _values(status)  # db open

            wait_for(memory_ready, 60, "memory configured", logs)
            record = node.create_client(RecordTransition, "record_transition")
            # room_a: red seen three times, then blue twice -> dissonance, pair pending
            for t in [_t("room_a", "look", "colors=red")] * 3 + [_t("dock", "navigate_to",
                                                                    "reached", "hall")]:
                assert call(node, record, RecordTransition.Request(transition=t),
                            timeout=60).accepted
            # hall -> room_b blocked once, then enough other experience to make it stale
            call(node, record, RecordTransition.Request(
                transition=_t("hall", "navigate_to", "blocked", "room_b")))
            for t in [_t("room_a", "look", "colors=blue")] * 2 + [
                    _t("room_b", "look", "colors=blue")] * 3:
                call(node, record, RecordTransition.Request(transition=t))

            names = {f"glove_ros: /{n}" for n in ("memory", "perception", "verifier", "planner")}

            def all_reported() -> bool:
                mem, per = _latest(diagnostics, "glove_ros: /memory"), _latest(
                    diagnostics, "glove_ros: /perception")
                return (all(_latest(diagnostics, n) is not None for n in names)
                        and int(_values(mem).get("pending_queue", 0)) >= 1
                        # pending since the dissonance, which came before the last three
                        # records: a report from between them counts fewer than all ten
                        and int(_values(mem).get("entries", 0)) >= 10
                        and float(_values(per).get("inference_hz", 0)) > 0
                        # the camera rate counts frames over a 5 s window: on a loaded machine
                        # the first report can come when only one frame has arrived (0.2 Hz)
                        and float(_values(per).get("camera_hz", 0)) > 1.0)
            wait_for(all_reported, 30, "diagnostics of every node", logs)

            mem = _values(_latest(diagnostics, "glove_ros: /memory"))
            assert int(mem["db_bytes"]) > 0 and int(mem["entries"]) == 10
            assert int(mem["suppressed"]) == 3 and mem["probe_budget_left"] == "7"
            per = _latest(diagnostics, "glove_ros: /perception")
            assert per.level == b"\x00", per.message
            assert _values(per)["camera_qos"] == "sensor_data"
            ver = _values(_latest(diagnostics, "glove_ros: /verifier"))
            assert (ver["probe_budget"], ver["probe_budget_left"]) == ("5", "5")
            plan = _values(_latest(diagnostics, "glove_ros: /planner"))
            assert plan["planner"] == "greedy" and plan["llm_loaded"] == "false"
            assert "llm_fallback_rate" in plan and "decision_latency_mean_s" in plan

            # driving: no inference (frames counted as skipped), camera rate unchanged
            skipped = "skipped_while_driving_or_rate_limited"

            def perception() -> dict[str, str]:
                return _values(_latest(diagnostics, "glove_ros: /perception"))

            at_waypoint = int(perception()[skipped])  # no rate limit: none skipped at a waypoint
            waypoint.publish(String(data=""))
            # the first report with skipped frames is the first one after the switch (on a
            # loaded machine a report read a fixed 1 s later could still predate it)
            wait_for(lambda: int(perception()[skipped]) > at_waypoint, 30,
                     "perception skipping frames while driving", logs)
            before = int(perception()["inferences"])
            time.sleep(2.0)
            after = perception()
            assert int(after["inferences"]) == before
            assert int(after[skipped]) > 0

            def drawn() -> dict:
                if not markers.items:
                    return {}
                return {(m.ns, m.id): m for m in markers.items[-1].markers
                        if m.action == Marker.ADD}

            def memory_drawn() -> bool:
                texts = [m.text for m in drawn().values()]
                return any("(pending)" in t for t in texts)
            wait_for(memory_drawn, 20, "markers with memory status", logs)
            shown = list(drawn().values())
            assert markers.items[-1].markers[0].action == Marker.DELETEALL
            assert {m.header.frame_id for m in shown} == {"map"}
            labels = {m.text for m in shown if m.ns == "waypoints" and m.text}
            assert labels == {"dock", "hall", "room_a", "room_b"}
            lines = [m for m in shown if m.ns == "corridors" and m.type == Marker.LINE_STRIP]
            assert len(lines) == 3
            by_end = {(round(m.points[1].x, 1), round(m.points[1].y, 1)): m for m in lines}
            assert _color(by_end[(0.0, 1.0)]) == _rgb("trusted")  # dock -> hall reached
            crosses = [m for m in shown if m.ns == "corridors" and m.type == Marker.LINE_LIST]
            assert len(crosses) == 1 and _color(crosses[0]) == _rgb("stale_negative")
            assert _color(by_end[(1.0, 1.0)]) == _rgb("stale_negative")  # hall:room_b
            blocks = {m.text for m in shown if m.ns == "blocks" and m.text}
            # room_a: red contradicted by blue, the pair awaits re-verification; room_b: blue
            assert blocks == {"blue (pending)", "blue (trusted)"}
            cubes = [m for m in shown if m.ns == "blocks" and m.type == Marker.CUBE]
            assert any(_color(c) == (0.1, 0.3, 0.95) and c.color.a == 1.0 for c in cubes)
        finally:
            stop.set()
            streamer.join(2)
    for p in nodes:
        assert p.alive(), f"{p.name} died:\n{p.log()}"
