"""Memory node in its own process, driven over DDS: record, query, explain, restart, kill -9.

What must hold: every transition the node acknowledged is still there after a restart or
a SIGKILL; malformed transitions are rejected with a reason and store nothing.
"""

from __future__ import annotations

import math
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import NodeProcess, call, call_retry, ros_client, wait_for  # noqa: E402


def _transition(state: str, outcome: str, action: str = "look", episode: str = "e1"):
    from glove_ros.msg import Transition

    t = Transition(state_key=state, action=action, outcome=outcome, robot_id="r1",
                   episode_id=episode)
    t.header.stamp.sec = int(time.time())
    return t


def _start(tmp_path, name="memory", **params):
    base = {"db_path": str(tmp_path / "memory.db"), "verifier.p_th": 2}
    base.update(params)
    return NodeProcess("glove_ros.nodes.memory_node", tmp_path, base, name=name)


def test_topic_and_service_cross_processes(tmp_path):
    from glove_ros.msg import Transition
    from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

    proc = _start(tmp_path)
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            query = node.create_client(QueryMemory, "query_memory")
            explain = node.create_client(ExplainEntry, "explain_entry")
            pub = node.create_publisher(Transition, "transitions", 10)

            resp = call(node, record, RecordTransition.Request(
                transition=_transition("hall", "colors=red")))
            assert resp.accepted, resp.message
            assert resp.id > 0

            # a message published on the topic arrives in the other process
            def seen_topic() -> bool:
                pub.publish(_transition("lab", "colors=blue"))
                r = call(node, query, QueryMemory.Request(state_key="lab"))
                return r.total_matching > 0

            wait_for(seen_topic, 20, "topic transition stored", proc.log)

            r = call(node, query, QueryMemory.Request(state_key="hall", action="look"))
            assert [e.transition.outcome for e in r.entries] == ["colors=red"]
            assert r.entries[0].transition.robot_id == "r1"

            e = call(node, explain, ExplainEntry.Request(id=resp.id))
            assert e.found and "trusted" in e.explanation.lower()
            missing = call(node, explain, ExplainEntry.Request(id=10**9))
            assert not missing.found
    finally:
        assert proc.stop() == 0, proc.log()


def test_malformed_transitions_rejected_and_nothing_stored(tmp_path):
    from glove_ros.srv import QueryMemory, RecordTransition

    proc = _start(tmp_path)
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            query = node.create_client(QueryMemory, "query_memory")
            nan_pose = _transition("hall", "colors=red")
            nan_pose.has_pose = True
            nan_pose.pose.position.x = math.nan
            empty_action = _transition("hall", "colors=red", action="")
            bad_source = _transition("hall", "colors=red")
            bad_source.source = 9
            for bad, word in ((nan_pose, "nan"), (empty_action, "action"),
                              (bad_source, "source")):
                # re-sent when unanswered: right after discovery a request can be lost
                # (DDS matched the request writer before the reply reader); a malformed
                # transition is rejected every time, so a re-send stores nothing either
                resp = call_retry(node, record, RecordTransition.Request(transition=bad))
                assert not resp.accepted
                assert word in resp.message.lower(), resp.message
            r = call(node, query, QueryMemory.Request(include_suppressed=True))
            assert r.total_matching == 0
    finally:
        proc.stop()
    assert "rejected transition" in proc.log()


def test_acknowledged_transitions_survive_kill9_and_restart(tmp_path):
    from glove_ros.srv import QueryMemory, RecordTransition

    proc = _start(tmp_path)
    acked: list[int] = []
    with ros_client() as node:
        record = node.create_client(RecordTransition, "record_transition")
        for i in range(40):
            resp = call(node, record, RecordTransition.Request(
                transition=_transition(f"wp{i % 5}", f"colors=c{i}", episode=f"e{i}")))
            assert resp.accepted
            acked.append(resp.id)
        proc.kill9()  # mid-stream: no shutdown hook runs

        proc2 = _start(tmp_path, name="memory_restarted")
        try:
            query = node.create_client(QueryMemory, "query_memory")
            wait_for(lambda: "memory active" in proc2.log(), 20, "restart", proc2.log)
            r = call_retry(node, query, QueryMemory.Request(include_suppressed=True,
                                                            max_results=1000))
            assert sorted(e.id for e in r.entries) == sorted(acked)
        finally:
            assert proc2.stop() == 0, proc2.log()


def test_corrupt_database_fails_configure_and_is_untouched(tmp_path):
    db = tmp_path / "memory.db"
    garbage = b"this is not an sqlite database" * 100
    db.write_bytes(garbage)
    proc = _start(tmp_path)
    try:
        wait_for(lambda: "cannot configure memory" in proc.log(), 20, "configure error",
                 proc.log)
    finally:
        proc.stop()
    assert db.read_bytes() == garbage


def test_resent_transition_is_stored_once(tmp_path):
    # a client that lost the answer re-sends the very same message (planner_node.call): the
    # node must answer with the first copy's id and not count the observation twice
    from glove_ros.srv import QueryMemory, RecordTransition

    proc = _start(tmp_path)
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            query = node.create_client(QueryMemory, "query_memory")
            t = _transition("hall", "colors=red")
            t.header.stamp.nanosec = 123_456_789
            first = call(node, record, RecordTransition.Request(transition=t))
            again = call(node, record, RecordTransition.Request(transition=t))
            assert first.accepted and again.accepted, (first.message, again.message)
            assert again.id == first.id and "re-sent" in again.message, again.message
            t.header.stamp.nanosec += 1000  # a new observation, 1 us later (stamps are
            # stored as float seconds: ~0.24 us apart can still be told apart at 2026's epoch)
            later = call(node, record, RecordTransition.Request(transition=t))
            assert later.accepted and later.id != first.id
            r = call(node, query, QueryMemory.Request(state_key="hall", include_suppressed=True))
            assert sorted(e.id for e in r.entries) == sorted([first.id, later.id])
    finally:
        assert proc.stop() == 0, proc.log()
