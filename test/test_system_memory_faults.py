"""Memory node under hostile-but-fair input, over DDS in its own process.

What must hold: a fuzz of every service and topic with random and extreme field values leaves
the node alive and stores nothing invalid; overflowing ids are "not found", not a crash; a
second writer on the same database refuses; live verifier.* changes take effect or are
refused; writes refused for lack of queue room are counted, published and logged.
"""

from __future__ import annotations

import math
import random
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, call, ros_client, wait_for  # noqa: E402

_EXTREME_TEXT = ["", " ", "\t\n", "é" * 300, "x" * 257, "y" * 5000, "\x1b[31mred\x1b[0m",
                 "colors=red", "wp1", "a" * 256, "\u202e", "😀" * 70, "look", "navigate_to"]
_EXTREME_FLOAT = [0.0, -0.0, 1e308, -1e308, math.inf, -math.inf, math.nan, 5e-324, 1e7, -1e7,
                  1.00001e7, 3.0]


def _text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_EXTREME_TEXT)
    n = rng.choice([0, 1, 5, 40, 255, 256, 257, 1024, 1025, 4097])
    return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(1, 0x2FFF)]))
                   for _ in range(n))


def _fuzz_transition(rng: random.Random):
    from glove_ros.msg import Transition

    t = Transition(robot_id=_text(rng), episode_id=_text(rng), state_key=_text(rng),
                   context=_text(rng), action=_text(rng), action_arg=_text(rng),
                   outcome=_text(rng), has_pose=rng.random() < 0.5,
                   reward=rng.choice(_EXTREME_FLOAT), source=rng.randint(0, 255))
    t.header.stamp.sec = rng.choice([0, 1, -1, 2**31 - 1, -(2**31), int(time.time())])
    t.header.stamp.nanosec = rng.choice([0, 999_999_999, 2**32 - 1])
    p = t.pose
    p.position.x, p.position.y = rng.choice(_EXTREME_FLOAT), rng.choice(_EXTREME_FLOAT)
    q = [rng.choice(_EXTREME_FLOAT) for _ in range(4)]
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = q
    if rng.random() < 0.3:  # sometimes a valid one, so that the verifier runs too
        t.state_key, t.action, t.outcome = rng.choice(["wp1", "wp2"]), "look", rng.choice(
            ["colors=red", "colors=blue"])
        t.source, t.reward, t.has_pose = rng.choice([0, 1, 2]), 0.0, False
    return t


def _start(tmp_path, name="memory", **params):
    base = {"db_path": str(tmp_path / "memory.db"), "verifier.p_th": 2,
            "stats_period": 0.5}
    base.update(params)
    return NodeProcess("glove_ros.nodes.memory_node", tmp_path, base, name=name)


def test_fuzz_every_service_and_topic_keeps_node_alive_and_stores_only_valid(tmp_path):
    from std_srvs.srv import Trigger

    from glove_ros import conversions as conv
    from glove_ros.msg import Transition
    from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

    rng = random.Random(13)
    proc = _start(tmp_path)
    accepted = 0
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            query = node.create_client(QueryMemory, "query_memory")
            explain = node.create_client(ExplainEntry, "explain_entry")
            reverify = node.create_client(Trigger, "reverify_negatives")
            pub = node.create_publisher(Transition, "transitions", 100)
            end = time.monotonic() + 12.0  # bounded time, not a count
            rounds = 0
            while time.monotonic() < end or rounds < 20:
                rounds += 1
                resp = call(node, record,
                            RecordTransition.Request(transition=_fuzz_transition(rng)))
                accepted += int(resp.accepted)
                assert resp.accepted or resp.message
                for _ in range(5):
                    pub.publish(_fuzz_transition(rng))
                q = QueryMemory.Request(state_key=_text(rng), action=_text(rng),
                                        action_arg=_text(rng), robot_id=_text(rng),
                                        include_suppressed=rng.random() < 0.5,
                                        max_results=rng.choice([0, 1, 2**32 - 1]))
                call(node, query, q)
                eid = rng.choice([0, 1, 2, 2**31, 2**63 - 1, 2**63, 2**64 - 1])
                e = call(node, explain, ExplainEntry.Request(id=eid))
                if eid >= 2**63 or eid == 0:
                    assert not e.found and "no memory entry" in e.explanation
                if rounds % 10 == 0:
                    assert call(node, reverify, Trigger.Request()).message
            assert proc.alive(), proc.log()
            # everything stored reads back as a valid transition
            r = call(node, query, QueryMemory.Request(include_suppressed=True,
                                                      max_results=2**32 - 1))
            assert r.total_matching >= accepted > 0
            for m in r.entries:
                conv.transition_from_msg(m.transition)  # raises on anything invalid
    finally:
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log()


def test_second_writer_on_the_same_database_refuses(tmp_path):
    from glove_ros.msg import Transition
    from glove_ros.srv import QueryMemory, RecordTransition

    first = _start(tmp_path)
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            t = Transition(state_key="hall", action="look", outcome="colors=red")
            assert call(node, record, RecordTransition.Request(transition=t)).accepted
            second = _start(tmp_path, name="memory_second", exit_on_failure=True)
            wait_for(lambda: not second.alive(), 30, "second writer exits", second.log)
            assert second.stop() == 1
            assert "refusing to be a second writer" in second.log()
            for _ in range(5):
                assert call(node, record, RecordTransition.Request(transition=t)).accepted
            query = node.create_client(QueryMemory, "query_memory")
            assert call(node, query, QueryMemory.Request(state_key="hall")).total_matching == 6
    finally:
        assert first.stop() == 0, first.log()


def _set(node, name: str, value):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    client = node.create_client(SetParameters, "/memory/set_parameters")
    if isinstance(value, bool):
        v = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=value)
    elif isinstance(value, str):
        v = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
    else:
        v = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)
    return call(node, client, SetParameters.Request(
        parameters=[Parameter(name=name, value=v)])).results[0]


def test_a_bad_live_parameter_is_refused_and_the_node_lives_on(tmp_path):
    """Issue 31: verifier.phase '' over the parameter service used to raise inside the
    callback and end the node (also via enabled=false, phase='', enabled=true). Afterwards:
    every bad value refused with a reason, the node alive and still recording."""
    from glove_ros.msg import Transition
    from glove_ros.srv import RecordTransition

    proc = _start(tmp_path)
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            refused = _set(node, "verifier.phase", "")
            assert not refused.successful and "verifier.phase is empty" in refused.reason
            assert _set(node, "verifier.enabled", False).successful
            refused = _set(node, "verifier.phase", "")
            assert not refused.successful and "verifier.phase" in refused.reason
            assert _set(node, "verifier.enabled", True).successful
            assert _set(node, "verifier.phase", "drift_1").successful
            t = Transition(state_key="hall", action="look", outcome="colors=red")
            assert call(node, record, RecordTransition.Request(transition=t)).accepted
            assert proc.alive(), proc.log()
    finally:
        assert proc.stop() == 0, proc.log()


def test_live_verifier_parameters_take_effect_or_are_refused(tmp_path):
    from glove_ros.msg import DissonanceAlert, Transition
    from glove_ros.srv import RecordTransition

    proc = _start(tmp_path, **{"verifier.detector": "p_th"})  # the paper's count rule
    try:
        with ros_client() as node:
            record = node.create_client(RecordTransition, "record_transition")
            alerts = Collector(node, DissonanceAlert, "dissonance")

            def rec(state: str, outcome: str) -> None:
                t = Transition(state_key=state, action="look", outcome=outcome)
                assert call(node, record, RecordTransition.Request(transition=t)).accepted

            refused = _set(node, "verifier.p_th", 0)
            assert not refused.successful and "p_th" in refused.reason
            assert _set(node, "verifier.p_th", 50).successful
            for _ in range(3):
                rec("a", "colors=red")
            for _ in range(5):  # 5 surprises: dissonance only if p_th were still 2
                rec("a", "colors=blue")
            assert _set(node, "verifier.p_th", 2).successful
            for _ in range(3):
                rec("b", "colors=red")
            for _ in range(2):
                rec("b", "colors=blue")
            wait_for(lambda: len(alerts) >= 1, 10, "dissonance at b", proc.log)
            time.sleep(0.5)
            assert [a.state_key for a in alerts.items] == ["b"]
    finally:
        assert proc.stop() == 0, proc.log()
    assert "verifier parameters applied" in proc.log()


def test_writes_refused_for_queue_room_are_counted_published_and_logged(tmp_path):
    from diagnostic_msgs.msg import DiagnosticStatus

    from glove_ros.msg import Transition
    from glove_ros.srv import QueryMemory

    # a one-slot queue whose writer waits 200 ms for company: a burst must overflow it
    proc = _start(tmp_path, **{"ingest.queue_size": 1, "ingest.max_delay_ms": 200.0,
                               "ingest.max_batch": 64})
    try:
        with ros_client() as node:
            stats = Collector(node, DiagnosticStatus, "memory_stats")
            pub = node.create_publisher(Transition, "transitions", 1000)
            query = node.create_client(QueryMemory, "query_memory")
            assert query.wait_for_service(timeout_sec=20)
            wait_for(lambda: pub.get_subscription_count() > 0, 20, "subscriber", proc.log)
            for i in range(500):
                pub.publish(Transition(state_key=f"wp{i}", action="look", outcome="colors=red"))

            def counters() -> dict[str, int]:
                if not len(stats):
                    return {}
                return {kv.key: int(kv.value) for kv in stats.items[-1].values}

            def stored() -> int:
                return call(node, query, QueryMemory.Request(max_results=1)).total_matching

            def settled() -> bool:
                # a batch is counted as committed after its commit: a report taken while the
                # last batch was being written (queue already empty) is one batch short
                c = counters()
                return (c.get("dropped", 0) > 0 and c["queued"] == 0
                        and stored() == c["committed"])

            wait_for(settled, 30, "drops published", proc.log)
            c = counters()
            assert stored() == c["committed"]
            assert c["committed"] + c["dropped"] + c["dds_lost"] <= 500
            assert stats.items[-1].level == DiagnosticStatus.WARN
    finally:
        assert proc.stop() == 0, proc.log()
    assert "transitions NOT stored since the last report" in proc.log()
