"""Two memory nodes (two robots, own namespaces and databases) share verified memory over
real NATS JetStream servers: a hub and one leaf server per robot.

What must hold: both robots remember the red block at room_a; robot A's verifier finds it
gone (two looks see blue) and suppresses its memory; robot B's memory node applies A's
event through the fleet: B's own red memories at room_a become suppressed with a "fleet:"
reason and room_a is queued for B's re-verification, while B's other memories stay trusted
and both nodes stay up; nothing is recorded in B for it (its entry count is unchanged); a
subscriber that joins B's graph afterwards still receives the suppression on the latched
``fleet_suppressions`` topic.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("nats")
pytestmark = pytest.mark.ros

from rosproc import NodeProcess, call, ros_client, wait_for, warm_record  # noqa: E402

from glove_ros import fleet as fl  # noqa: E402


def _t(state: str, outcome: str):
    from glove_ros.msg import Transition

    return Transition(state_key=state, action="look", outcome=outcome, robot_id="rover",
                      episode_id="e")


@pytest.mark.usefixtures("nats_server")
def test_a_suppression_on_one_robot_reaches_the_other_robots_memory_node(tmp_path):
    from glove_ros.msg import MemoryEntry
    from glove_ros.srv import QueryMemory, RecordTransition

    hub, leaves = fl.local_servers(["rA", "rB"], tmp_path)
    servers = [hub, *leaves.values()]
    urls = {robot: server.url for robot, server in leaves.items()}
    procs = {}
    try:
        for s in servers:
            s.start()
        fl.run(fl.ensure_hub(servers[0].url, ["rA", "rB"]))
        for robot in ("rA", "rB"):
            procs[robot] = NodeProcess(
                "glove_ros.nodes.memory_node", tmp_path,
                {"db_path": str(tmp_path / f"{robot}.db"), "fleet.url": urls[robot],
                 "fleet.robot_id": robot, "fleet.period": 0.1},
                remaps={"__ns": f"/{robot}"}, name=f"memory_{robot}")

        def logs() -> str:
            return "\n".join(f"--- {n}\n{p.log()}" for n, p in procs.items()) + "".join(
                f"--- {s.name}\n{s.log()[-1500:]}" for s in servers)

        with ros_client("fleet_test") as node:
            record = {r: node.create_client(RecordTransition, f"/{r}/record_transition")
                      for r in procs}
            query = node.create_client(QueryMemory, "/rB/query_memory")
            for r in procs:
                warm_record(node, record[r], timeout=60)
            for r in procs:
                for t in [_t("room_a", "colors=red")] * 3 + [_t("hall", "colors=")] * 2:
                    assert call(node, record[r], RecordTransition.Request(transition=t)).accepted
            wait_for(lambda: all("fleet link up" in p.log() for p in procs.values()), 30,
                     "both fleet links", logs)
            for t in [_t("room_a", "colors=blue")] * 2:  # robot A sees the block gone
                call(node, record["rA"], RecordTransition.Request(transition=t))

            def b_entries():
                return call(node, query, QueryMemory.Request(
                    include_suppressed=True, max_results=100)).entries

            def b_suppressed():
                return [e for e in b_entries() if e.status == MemoryEntry.STATUS_SUPPRESSED]

            wait_for(lambda: len(b_suppressed()) == 3, 60, "A's suppression in B's memory",
                     logs)
            entries = b_entries()
            assert len(entries) == 5  # nothing recorded in B for it
            for e in b_suppressed():
                assert (e.transition.state_key, e.transition.outcome) == ("room_a",
                                                                           "colors=red")
                assert e.reason.startswith("fleet: rA found 'colors=red' at room_a look")
            assert all(e.status == MemoryEntry.STATUS_TRUSTED for e in entries
                       if e.transition.state_key == "hall")
            assert "fleet: rA found 'colors=red'" in procs["rB"].log()
            # a subscriber that joins after the fact still gets it (transient local)
            from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

            from glove_ros.msg import MemoryEvent

            got = []
            node.create_subscription(MemoryEvent, "/rB/fleet_suppressions", got.append,
                                     QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                                                durability=DurabilityPolicy.TRANSIENT_LOCAL))
            wait_for(lambda: len(got) == 1, 30, "the latched fleet_suppressions message", logs)
            assert got[0].kind == MemoryEvent.SUPPRESSED and got[0].state_key == "room_a"
            assert sorted(got[0].entry_ids) == sorted(e.id for e in b_suppressed())
            assert got[0].reason.startswith("fleet: rA found 'colors=red' at room_a look stale")
            assert all(p.alive() for p in procs.values()), logs()
    finally:
        for p in procs.values():
            p.stop()
        for s in servers:
            s.stop()
