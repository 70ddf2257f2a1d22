"""The plan-gate node in its own process: TaskOutcome in, GateDecision out, plan memory in
the shared SQLite file checked afterwards.

World ``small``: the red block at room_a, the blue block at room_b (hall and dock empty).
Verified experience memory (the relative truth the gate scores against) is written into the
same database file before the node starts, as the memory node would have.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, call, ros_client, wait_for  # noqa: E402

from glove_ros.core.memory.experience import Transition  # noqa: E402
from glove_ros.core.memory.store import ExperienceStore  # noqa: E402
from glove_ros.core.plan.plan_memory import PlanMemoryStore  # noqa: E402

NODE = "glove_ros.nodes.plan_gate_node"




def _look(wp, colours=""):
    return Transition(wp, "look", f"colors={colours}", robot_id="r1", episode_id="seed")


def _seed_experience(path):
    with ExperienceStore(str(path)) as exp:
        for _ in range(2):
            for t in (_look("room_a", "red"), _look("room_b", "blue"), _look("hall"),
                      _look("dock")):
                exp.record(t)


def _outcome(episode, target, steps, success=True, found_at=""):
    """A TaskOutcome from (kind, ...) steps: ("look", wp, colours) / ("nav", a, b, outcome)."""
    from glove_ros import conversions as conv
    from glove_ros.msg import TaskOutcome

    ts = []
    for s in steps:
        if s[0] == "look":
            ts.append(_look(s[1], s[2]))
        else:
            ts.append(Transition(s[1], "navigate_to", s[3], s[2], robot_id="r1",
                                 episode_id=episode))
    return TaskOutcome(robot_id="r1", episode_id=episode, task=f"find the {target} block",
                       target=target, success=success, reason="found" if success else "failed",
                       found_at=found_at, steps=len(steps),
                       transitions=[conv.transition_to_msg(t) for t in ts],
                       transition_ids=[0] * len(ts))


def _plan(path):
    store = PlanMemoryStore(path)
    try:
        return ([(v.version, v.status) for v in store.versions()], store.active_version,
                {e.name: list(e.meta.get("waypoints", [])) for e in store.entries()})
    finally:
        store.close()


def _start(tmp_path, **extra):
    db = tmp_path / "memory.db"
    _seed_experience(db)
    params = {"db_path": str(db), "world": "small", "embedder": "hashing",
              "janus.warmup": 1, "janus.tau": 1.0, "trigger": "momentum", **extra}
    return db, NodeProcess(NODE, tmp_path, params)


def _connect(node, proc):
    from glove_ros.msg import GateDecision, TaskOutcome

    decisions = Collector(node, GateDecision, "gate_decisions")
    pub = node.create_publisher(TaskOutcome, "task_outcomes", 10)
    wait_for(lambda: pub.get_subscription_count() > 0, 30, "plan gate subscription", proc.log)
    wait_for(lambda: node.count_publishers("gate_decisions") > 0, 30, "gate_decisions", proc.log)
    return decisions, pub


def test_warmup_accept_harmful_reject_garbage_and_rollback(tmp_path):
    from std_srvs.srv import Trigger

    from glove_ros.msg import GateDecision

    db, proc = _start(tmp_path)
    try:
        with ros_client("plan_gate_test") as node:
            decisions, pub = _connect(node, proc)
            rollback = node.create_client(Trigger, "plan_memory_rollback")
            explain = node.create_client(Trigger, "explain_gate")

            # 1. warm-up: the first update is deployed without comparison
            pub.publish(_outcome("ep1", "red", [
                ("look", "dock", ""), ("nav", "dock", "hall", "reached"), ("look", "hall", ""),
                ("nav", "hall", "room_a", "reached"), ("look", "room_a", "red")],
                found_at="room_a"))
            wait_for(lambda: len(decisions) >= 1, 30, "first decision", proc.log)
            d1 = decisions.items[0]
            assert d1.verdict == GateDecision.ACCEPTED_DIRECT and not d1.triggered
            versions, active, entries = _plan(db)
            assert active == int(d1.active_version) == 2
            assert entries["block_red"] == ["room_a"]

            # 2. a harmful update: a misdetection puts the red block at room_b, where
            # verified memory saw only blue -> compared and rejected, memory unchanged
            pub.publish(_outcome("ep2", "red", [
                ("look", "hall", ""), ("nav", "hall", "room_b", "reached"),
                ("look", "room_b", "red")], found_at="room_b"))
            wait_for(lambda: len(decisions) >= 2, 30, "second decision", proc.log)
            d2 = decisions.items[1]
            assert d2.verdict == GateDecision.REJECTED and d2.triggered
            assert d2.score_old > d2.score_new and d2.active_version == "2"
            versions, active, entries = _plan(db)
            assert active == 2 and (3, "rejected") in versions
            assert entries["block_red"] == ["room_a"]
            r = call(node, explain, Trigger.Request())
            assert r.success and "rejected" in r.message

            # 3. garbage: a look whose outcome is no colour signature -> dropped
            before = _plan(db)
            bad = _outcome("ep3", "blue", [("look", "room_b", "blue")])
            bad.transitions[0].outcome = "a blue-ish thing"
            pub.publish(bad)
            wait_for(lambda: "rejected task outcome 'ep3'" in proc.log(), 30, "garbage drop",
                     proc.log)
            assert _plan(db) == before and len(decisions) == 2

            # 4. rollback: back to the empty memory, then nothing left to undo
            r = call(node, rollback, Trigger.Request())
            assert r.success and "from version 2 to 1" in r.message
            assert _plan(db)[1] == 1 and _plan(db)[2] == {}
            r = call(node, rollback, Trigger.Request())
            assert not r.success and "first version" in r.message
            assert proc.alive()
        assert proc.stop() == 0  # clean shutdown on SIGINT
    finally:
        proc.stop()


@pytest.mark.llm
@pytest.mark.slow
def test_llm_updater_garbage_leaves_memory_unchanged(tmp_path):
    """The real GGUF, bounded to 16 tokens: no edit list fits, so the reply is unusable --
    the node must propose nothing and leave plan memory exactly as it was."""
    pytest.importorskip("llama_cpp")
    db, proc = _start(tmp_path, updater="llm", **{"llm.max_tokens": 16, "llm.n_threads": 1,
                                                  "llm.n_ctx": 1024})
    try:
        with ros_client("plan_gate_llm_test") as node:
            _, pub = _connect(node, proc)
            before = _plan(db)
            pub.publish(_outcome("ep1", "red", [("look", "room_a", "red")], found_at="room_a"))
            wait_for(lambda: "episode 'ep1': no candidate" in proc.log(), 120, "LLM reply",
                     proc.log)
            assert "memory unchanged" in proc.log()
            assert _plan(db) == before and proc.alive()
        assert proc.stop() == 0
    finally:
        proc.stop()


def test_bad_parameters_fail_configure(tmp_path):
    """The node logs the reason and stays alive unconfigured (fixable without a restart)."""
    proc = NodeProcess(NODE, tmp_path, {"db_path": str(tmp_path / "m.db"),
                                        "trigger": "sometimes", "embedder": "hashing"})
    try:
        wait_for(lambda: "plan_gate is unconfigured" in proc.log() or not proc.alive(), 60,
                 "the failed configure", proc.log)
        assert "cannot configure plan gate" in proc.log() and "unknown trigger" in proc.log()
        assert proc.alive(), proc.log()
    finally:
        assert proc.stop() == 0, proc.log()
