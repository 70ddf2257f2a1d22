"""The consolidation node in its own process (NodeProcess), driven over DDS.

- docked=true starts a run by itself (action feedback seen on the action's feedback topic);
  docked=false mid-run cancels it and the plan memory is exactly as before;
- the Consolidate action on request: dry_run reports without writing, a real run commits,
  undo_consolidation restores the memory; task outcomes go through the fast writer.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import NodeProcess, call, ros_client, wait_for  # noqa: E402

from glove_ros.core.consolidate.writer import FastWriter  # noqa: E402
from glove_ros.core.plan.plan_memory import PlanMemoryStore  # noqa: E402
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, Traversal  # noqa: E402

NODE = "glove_ros.nodes.consolidation_node"


def _fill(path, n: int = 8) -> None:
    """n episodes: the red block at kitchen, then (after n/2) at office."""
    with PlanMemoryStore(path) as store:
        w = FastWriter(store)
        tid = 0
        for i in range(n):
            where = "kitchen" if i < n // 2 else "office"
            obs = (Observation("dock", (), tid + 1), Observation("hall", (), tid + 2),
                   Observation(where, ("red",), tid + 3))
            trav = (Traversal("dock", "hall", False, tid + 4),
                    Traversal("hall", where, False, tid + 5))
            tid += 5
            w.write(EpisodeOutcome(f"ep{i:02d}", "find the red block", "red", True, where,
                                   obs, trav))


def _snapshot(path):
    with PlanMemoryStore(path) as store:
        return store.active_version, [(e.entry_id, e.name, e.body) for e in store.entries()]


class Collector:
    """Messages of one topic, thread-safe."""

    def __init__(self, node, msg_type, topic, qos=50):
        self.items: list = []
        self._lock = threading.Lock()
        node.create_subscription(msg_type, topic, self._cb, qos)

    def _cb(self, msg):
        with self._lock:
            self.items.append(msg)

    def __len__(self):
        with self._lock:
            return len(self.items)

    def reports(self):
        from glove_ros import conversions as conv

        with self._lock:
            return [conv.consolidation_report_dict(m) for m in self.items]


class Repeater:
    """Publishes a Bool at 5 Hz in the background, like a robot base does."""

    def __init__(self, pub, value: bool) -> None:
        from std_msgs.msg import Bool

        self.pub, self.msg = pub, Bool(data=value)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def set(self, value: bool) -> None:
        self.msg.data = value

    def _run(self) -> None:
        while not self._stop.is_set():
            self.pub.publish(self.msg)
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def test_docking_starts_a_run_and_undocking_cancels_it_cleanly(tmp_path):
    from std_msgs.msg import Bool

    from glove_ros.action import Consolidate
    from glove_ros.msg import ConsolidationReport

    db = tmp_path / "plan.db"
    _fill(str(db), 8)
    before = _snapshot(str(db))
    node_proc = NodeProcess(NODE, tmp_path, {
        "db_path": str(db), "every_k_episodes": 3, "rule.step_delay_s": 0.3})
    try:
        with ros_client() as node:
            feedback = Collector(node, Consolidate.Impl.FeedbackMessage,
                                 "consolidate/_action/feedback")
            reports = Collector(node, ConsolidationReport, "consolidation_report")
            docked = node.create_publisher(Bool, "docked", 10)
            wait_for(lambda: node.count_subscribers("docked") > 0, 20, "node subscribed",
                     node_proc.log)
            rep = Repeater(docked, False)
            try:
                time.sleep(1.0)
                assert len(feedback) == 0  # not docked: nothing starts
                rep.set(True)
                wait_for(lambda: len(feedback) >= 2, 30, "consolidation feedback",
                         node_proc.log)
                fb = feedback.items[-1].feedback
                assert fb.step >= 2 and fb.last_tool == "check_memory"
                rep.set(False)
                wait_for(lambda: len(reports) >= 1, 30, "consolidation report", node_proc.log)
            finally:
                rep.stop()
            r = reports.reports()[0]
            assert r["status"] == "cancelled" and r["reason"] == "docked", r
            assert not r["committed"] and "memory unchanged" in r["message"]
            assert r["entries_after"] == r["entries_before"] == len(before[1])
    finally:
        assert node_proc.stop() == 0, node_proc.log()
    assert _snapshot(str(db)) == before
    assert "undocked during consolidation: cancelling" in node_proc.log()


def test_consolidate_action_dry_run_commit_undo_and_fast_writes(tmp_path):
    from action_msgs.msg import GoalStatus
    from std_srvs.srv import Trigger

    from glove_ros.action import Consolidate
    from glove_ros.msg import TaskOutcome, Transition
    from glove_ros.nodes.common import SpinSafeActionClient

    db = tmp_path / "plan.db"
    _fill(str(db), 6)
    before = _snapshot(str(db))
    node_proc = NodeProcess(NODE, tmp_path, {"db_path": str(db), "every_k_episodes": 100})
    try:
        with ros_client() as node:
            client = SpinSafeActionClient(node, Consolidate, "consolidate")
            assert client.wait_for_server(timeout_sec=20), node_proc.log()

            def run_goal(goal):
                fbs: list = []
                fut = client.send_goal_async(goal, feedback_callback=fbs.append)
                wait_for(fut.done, 20, "goal response")
                handle = fut.result()
                assert handle.accepted
                res = handle.get_result_async()
                wait_for(res.done, 60, "result", node_proc.log)
                return res.result(), fbs

            out, fbs = run_goal(Consolidate.Goal(reason="request", dry_run=True))
            r = out.result
            assert out.status == GoalStatus.STATUS_SUCCEEDED
            assert not r.committed and r.message.startswith("dry run")
            assert r.entries_before == r.entries_after == len(before[1])
            assert fbs and fbs[-1].feedback.last_tool == "terminate"
            assert _snapshot(str(db)) == before

            out, fbs = run_goal(Consolidate.Goal(reason="request"))
            r = out.result
            assert r.committed, r.message
            assert r.entries_after < r.entries_before and r.tokens_after < r.tokens_before
            assert r.consolidation_id.startswith("consolidation-")
            assert fbs[-1].feedback.entries_written >= 1
            assert _snapshot(str(db)) != before

            undo = node.create_client(Trigger, "undo_consolidation")
            resp = call(node, undo, Trigger.Request())
            assert resp.success, resp.message
            assert _snapshot(str(db)) == before

            # a finished task goes through the fast writer
            pub = node.create_publisher(TaskOutcome, "task_outcomes", 10)
            # published once: wait until this publisher itself has matched the node's reader
            # (the graph can show the reader before the writer is matched to it)
            wait_for(lambda: pub.get_subscription_count() > 0, 10, "subscriber matched")
            msg = TaskOutcome(
                robot_id="r1", episode_id="live_1", task="find the blue block",
                target="blue", success=True, reason="found", found_at="lab",
                transitions=[
                    Transition(state_key="hall", action="navigate_to", action_arg="lab",
                               outcome="reached", episode_id="live_1"),
                    Transition(state_key="lab", action="look", outcome="colors=blue",
                               episode_id="live_1"),
                ],
                transition_ids=[101, 102])
            pub.publish(msg)

            def written() -> bool:
                with PlanMemoryStore(str(db)) as s:
                    return s.entry("seen_blue_lab") is not None

            wait_for(written, 20, "fast write of the task outcome", node_proc.log)
            pub.publish(msg)  # re-delivered: not written twice
            time.sleep(1.0)
            with PlanMemoryStore(str(db)) as s:
                e = s.entry("seen_blue_lab")
                assert e.provenance.episodes == ("live_1",) and e.provenance.transitions == (102,)
                assert s.entry("seen_blue_lab-2") is None
                assert s.journal()[-1].trace["drives"] == [["hall", "lab", False, 101]]
    finally:
        assert node_proc.stop() == 0, node_proc.log()


class _FakeLlm:
    """Counts loads and releases (a test double for LlamaBackend)."""

    model_path = "fake.gguf"

    def __init__(self) -> None:
        self.loaded = False
        self.loads = self.closes = 0

    def load(self):
        self.loaded, self.loads = True, self.loads + 1
        return self

    def close(self) -> None:
        self.loaded, self.closes = False, self.closes + 1


def test_llm_is_loaded_only_for_a_run_and_released_after():
    import rclpy
    from rclpy.parameter import Parameter

    from glove_ros.nodes.consolidation_node import ConsolidationNode

    rclpy.init()
    try:
        node = ConsolidationNode()
        fake = node._llm = _FakeLlm()
        node._load_llm()
        assert fake.loaded and fake.loads == 1
        node._load_llm()  # already loaded: no second load
        node._release_llm()
        assert not fake.loaded and fake.closes == 1
        node._release_llm()  # idempotent
        assert fake.closes == 1
        node.set_parameters([Parameter("llm.keep_loaded", value=True)])
        node._load_llm()
        node._release_llm()
        assert fake.loaded and fake.loads == 2  # kept between runs when asked
        node.destroy_node()
    finally:
        rclpy.shutdown()


def test_report_message_carries_the_core_report():
    """consolidation_report is typed: every field of the core report survives the message
    (NaN for utilities not computed), the tool list is cut to the last 8 calls."""
    import math

    from glove_ros import conversions as conv
    from glove_ros.core.consolidate.acceptance import Evaluation
    from glove_ros.core.consolidate.consolidation import ConsolidationReport
    from glove_ros.core.consolidate.tools import ToolRecord

    tools = tuple(ToolRecord(step=i, tool="read_region" if i % 2 else "write_entry",
                             call="{}", ok=i != 3, error="bad" if i == 3 else None, tokens=i)
                  for i in range(1, 11))
    ev = Evaluation(tasks=6, judged=5, utility_old=0.5, utility_new=0.75, counterfactual=0.25,
                    masked_mean=0.5, load_bearing=("s1",), harmful=(), tokens_before=300,
                    tokens_after=120, accepted=True, reasons=(), heldout_tasks=2,
                    heldout_judged=2, heldout_old=0.5, heldout_new=None)
    report = ConsolidationReport(
        status="committed", message="committed c7", reason="docked", policy="rule",
        consolidation_id="c7", base_version=3, version=4, entries_before=9, entries_after=4,
        tokens_before=300, tokens_after=120, candidate_entries=4, candidate_tokens=120,
        region_entries=7, synthesized=2, fan_in_mean=2.5, fan_in_max=3, steps=10,
        llm_tokens=2**40, elapsed_s=1.5, evaluation=ev, tools=tools)
    msg = conv.consolidation_report_to_msg(report)
    assert msg.status == msg.STATUS_COMMITTED and msg.committed and msg.version == 4
    assert msg.llm_tokens == 2**32 - 1  # clamped to the field, not wrapped
    assert list(msg.tool_steps) == list(range(3, 11)) and msg.tool_errors[0] == "bad"
    assert math.isnan(msg.heldout_new)
    d = conv.consolidation_report_dict(msg)
    want = report.as_dict()
    want["llm_tokens"] = 2**32 - 1
    want["tools"] = [{k: v for k, v in t.items() if k != "call"} for t in want["tools"][-8:]]
    for key in ("tokens_before", "tokens_after"):
        want["evaluation"].pop(key)  # the message's top-level sizes carry them
    assert d == want
    none = conv.consolidation_report_to_msg(ConsolidationReport("skipped", "nothing to do",
                                                                "request", "rule"))
    assert not none.evaluated and none.version == -1 and len(none.tool_names) == 0
    assert conv.consolidation_report_dict(none)["evaluation"] is None
