"""GLOVE across processes: memory node + verifier node over DDS.

Async (physical-robot default): a contradiction fires one alert, the stale memories stop
being retrieved at once, and the pending pair is replaced after a natural visit.
Sync: the verifier node probes the robot (a Probe action server standing in for it) and
the probed outcomes replace the stale memories; never_probe actions are refused.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import (  # noqa: E402
    Collector,
    NodeProcess,
    call,
    ros_client,
    wait_for,
    warm_record,
)


def _t(state: str, outcome: str, action: str = "look"):
    from glove_ros.msg import Transition

    return Transition(state_key=state, action=action, outcome=outcome, robot_id="r1",
                      episode_id="e")




def _record_all(node, client, transitions):
    from glove_ros.srv import RecordTransition

    ids = []
    for t in transitions:
        r = call(node, client, RecordTransition.Request(transition=t))
        assert r.accepted, r.message
        ids.append(r.id)
    return ids


def test_async_alert_suppress_then_replace_after_evidence(tmp_path):
    from glove_ros.msg import DissonanceAlert, MemoryEntry, MemoryEvent
    from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

    mem = NodeProcess("glove_ros.nodes.memory_node", tmp_path, {
        "db_path": str(tmp_path / "m.db"), "verifier.mode": "async",
        "verifier.detector": "p_th", "verifier.p_th": 2})  # the paper's rule: exact counts
    try:
        with ros_client() as node:
            alerts = Collector(node, DissonanceAlert, "dissonance")
            events = Collector(node, MemoryEvent, "memory_events")
            record = node.create_client(RecordTransition, "record_transition")
            warm_record(node, record)
            query = node.create_client(QueryMemory, "query_memory")
            explain = node.create_client(ExplainEntry, "explain_entry")
            call(node, query, QueryMemory.Request())  # wait for discovery both ways
            wait_for(lambda: node.count_publishers("dissonance") > 0, 10, "publisher")

            old = _record_all(node, record, [_t("hall", "colors=red")] * 3)
            _record_all(node, record, [_t("lab", "colors=green")] * 2)  # untouched pair
            assert len(alerts) == 0
            # one surprise (a missed detection) is nuisance, not drift: no alert
            _record_all(node, record, [_t("hall", "colors=")])
            _record_all(node, record, [_t("hall", "colors=red")])
            assert len(alerts) == 0
            # the blocks were swapped: p_th = 2 consecutive surprises -> dissonance
            _record_all(node, record, [_t("hall", "colors=blue")] * 2)
            wait_for(lambda: len(alerts) == 1, 10, "dissonance alert", mem.log)
            a = alerts.items[0]
            assert (a.state_key, a.action, a.observed_outcome) == ("hall", "look", "colors=blue")
            assert a.consecutive_surprises == 2 and a.mode == "async"
            assert a.probes_requested == 0
            assert set(old) <= set(a.suppressed_ids)

            trusted = call(node, query, QueryMemory.Request(state_key="hall", action="look"))
            assert "colors=red" not in {e.transition.outcome for e in trusted.entries}
            lab = call(node, query, QueryMemory.Request(state_key="lab"))
            assert lab.total_matching == 2  # no collateral suppression

            e = call(node, explain, ExplainEntry.Request(id=old[0]))
            assert e.entry.status == MemoryEntry.STATUS_SUPPRESSED
            assert "suppress" in e.explanation.lower()

            # a later natural visit confirms the new world: stale entries are replaced
            _record_all(node, record, [_t("hall", "colors=blue")])
            def replaced() -> bool:
                r = call(node, explain, ExplainEntry.Request(id=old[0]))
                return r.entry.status == MemoryEntry.STATUS_REPLACED
            wait_for(replaced, 10, "replacement after evidence", mem.log)
            wait_for(lambda: any(ev.kind == MemoryEvent.REPLACED for ev in events.items), 10,
                     "REPLACED memory event")
            assert len(alerts) == 1  # no second alarm for the same drift
            everything = call(node, query, QueryMemory.Request(
                state_key="hall", include_suppressed=True, max_results=100))
            assert everything.total_matching == 8  # every hall visit kept, nothing deleted
    finally:
        assert mem.stop() == 0, mem.log()


def _probe_server(node, outcome: str, calls: list):
    from rclpy.action import ActionServer
    from rclpy.callback_groups import ReentrantCallbackGroup

    from glove_ros.action import Probe

    def execute(handle):
        calls.append((handle.request.state_key, handle.request.action, handle.request.samples))
        handle.succeed()
        return Probe.Result(completed=True, outcomes=[outcome] * handle.request.samples)

    return ActionServer(node, Probe, "probe", execute, callback_group=ReentrantCallbackGroup())


def test_sync_probe_replaces_and_never_probe_is_refused(tmp_path):
    from glove_ros.msg import DissonanceAlert, MemoryEntry, ProbeRequest, VerifierStatus
    from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

    mem = NodeProcess("glove_ros.nodes.memory_node", tmp_path, {
        "db_path": str(tmp_path / "m.db"), "verifier.mode": "sync",
        "verifier.detector": "p_th", "verifier.p_th": 2,
        "verifier.k_modes": 1})
    ver = NodeProcess("glove_ros.nodes.verifier_node", tmp_path, {
        "never_probe": ["push"], "probe_budget": 5})
    try:
        with ros_client() as node:
            calls: list = []
            _server = _probe_server(node, "colors=blue", calls)
            alerts = Collector(node, DissonanceAlert, "dissonance")
            requests = Collector(node, ProbeRequest, "probe_requests")
            status = Collector(node, VerifierStatus, "verifier_status")
            record = node.create_client(RecordTransition, "record_transition")
            warm_record(node, record)
            query = node.create_client(QueryMemory, "query_memory")
            explain = node.create_client(ExplainEntry, "explain_entry")
            call(node, query, QueryMemory.Request())
            wait_for(lambda: node.count_subscribers("probe_requests") > 1, 20,
                     "verifier node subscribed", ver.log)
            # this node sees the verifier's subscription; the memory node's publisher may
            # match it a moment later (each participant discovers on its own), and a request
            # published before that is not delivered (volatile topic)
            time.sleep(1.0)

            old = _record_all(node, record, [_t("hall", "colors=red")] * 3)
            _record_all(node, record, [_t("hall", "colors=blue")] * 2)
            wait_for(lambda: len(alerts) == 1 and len(requests) == 1, 10, "alert + request",
                     mem.log)
            assert alerts.items[0].probes_requested == 1  # alpha = 1 for K = 1
            wait_for(lambda: len(calls) == 1, 20, "probe goal at the robot", ver.log)
            assert calls[0] == ("hall", "look", 1)

            def replaced() -> bool:
                r = call(node, explain, ExplainEntry.Request(id=old[0]))
                return r.entry.status == MemoryEntry.STATUS_REPLACED
            wait_for(replaced, 20, "probed outcome replaced stale memory",
                     lambda: mem.log() + ver.log())
            trusted = call(node, query, QueryMemory.Request(state_key="hall", action="look"))
            assert {e.transition.outcome for e in trusted.entries} == {"colors=blue"}
            assert any(e.transition.source == e.transition.SOURCE_PROBED
                       for e in trusted.entries)
            wait_for(lambda: len(status) > 0, 10, "verifier status")
            last = status.items[-1]
            assert (last.probes_spent, last.budget, last.budget_left) == (1, 5, 4)
            assert (list(last.phases), list(last.phase_probes)) == (["default"], [1])

            # never_probe: the unsafe action is never sent to the robot
            _record_all(node, record, [_t("door", "opened", action="push")] * 3)
            _record_all(node, record, [_t("door", "stuck", action="push")] * 2)
            wait_for(lambda: len(alerts) == 2, 10, "second alert", mem.log)
            # the verifier's refusal itself (its start-up line names never_probe too): only
            # once the request was handled does "no second probe goal" mean it was refused
            wait_for(lambda: "action 'push' is never_probe" in ver.log(), 20, "refusal",
                     ver.log)
            assert len(calls) == 1
    finally:
        ver.stop()
        assert mem.stop() == 0, mem.log()
