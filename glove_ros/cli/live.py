"""``glove-ros task`` and ``glove-ros watch``: talk to a running glove_ros graph.

``task "find the red block"`` sends a RunTask goal to the planner's ``run_task`` action and
prints each feedback message and the result (every field the action defines). Exit code
0 when the task succeeded, 1 when it failed, 2 when no planner answered.

``watch`` prints what the robot's memory does, one readable line per event: dissonance
alerts, suppressed / replaced / restored memories, re-verification requests and probes,
Janus gate decisions, dock-time consolidations, task outcomes and world events.

Both join the graph of a running ``glove-ros launch`` (its ROS domain is read from the
launch's run file) unless ``ROS_DOMAIN_ID`` or ``--domain`` says otherwise, and work the
same against a real robot (``--namespace`` when its nodes run in one).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

# `glove-ros task --help` and `glove-ros watch --help`: plain text, one per command
TASK_DESCRIPTION = """\
Give the running robot a task in words and print what it does.

Sends the task ("find the red block", "go to the kitchen", "return to the dock") to the
planner's run_task action, prints each feedback message as it arrives, then the result:
every field the action defines, with the robot's answer and the memories it rests on.
Exit code 0 when the task succeeded, 1 when it failed, 2 when no planner answered.

What it understands (a fixed grammar; with planner:=llm other phrasings go to the local
LLM, which may only name places, colours and objects the request itself says):
  find the <colour> block                       search, looking at waypoints
  find the <object>                             search for an object (cup, person, ...)
  go to the <place>                             drive there
  where did you last see the <colour> block?    answer from memory, do not move
  where is the <object>? / where did you last see a <object>?   answer from memory
  is there a <object> in the <place>?           answer from the last look there, do not move
  is the <colour> block in the <place>?         the same for a colour block
  bring me to where you last saw the <colour> block   drive there
  go to the <object> / go to where you last saw the <object>   drive there
  is the corridor between <place> and <place> open?   answer from memory
  what changed since yesterday? / in the last hour?   answer from memory
  go charge / return to the dock                dock
Instructions: several of these in order, with constraints and conditions, checked against
the map before anything moves, then run step by step (one answer line per step):
  go to the kitchen, then the office, then dock   also: ',' ';' 'and then' 'after that'
                                                'finally'; a bare place repeats the verb
  check the kitchen / look in the pantry / look for the cup in the pantry   drive and look
  ... but avoid the lab / don't go through the hall / without passing the office
  ... do not use the hall-kitchen corridor / the corridor between hall and lab
                                                routes around them; refused when they cut a
                                                step off, naming the constraint
  if the cup is not in the kitchen, look in the pantry[, else return to the dock]
  if there is no person in the hall, check the office   decided from this plan's looks,
                                                else memory (cited), else by looking there
  go to the kitchen or the office               ambiguous: asks which one, never guesses
Other phrasings of an instruction go to the local LLM (planner:=llm), checked the same way.
Objects are the detector's classes (the planner's objects parameter): COCO names such as
cup, person, couch, dining table, with synonyms (sofa = couch, tv monitor = tv) and plurals.
A place, colour or object the robot does not know is refused and named, with what it does
know: it is never replaced by the nearest known one.

It joins the graph of a running 'glove-ros launch' (the launch's ROS domain is read from
its run file) unless ROS_DOMAIN_ID or --domain says otherwise, and works the same against
a real robot (--namespace when its nodes run in one).
"""

TASK_EXAMPLES = """\
examples:
  glove-ros task "find the red block"
  glove-ros task "is there a person in the kitchen?"   # objects: perception.backend darknet
  glove-ros task "bring me to where you last saw the blue block" --namespace /jetrover_1
  glove-ros task "find the green block" --episode 25   # simulator: drift events up to 25
"""

WATCH_DESCRIPTION = """\
Print what the running robot's memory does, one readable line per event, until Ctrl-C.

Dissonance alerts (what the robot saw against what memory said), suppressed, replaced and
restored memories, re-verification requests and probes, Janus gate decisions on plan
memory, dock-time consolidations, task outcomes and world events. --all adds every
recorded transition.

It joins the graph of a running 'glove-ros launch' (the launch's ROS domain is read from
its run file) unless ROS_DOMAIN_ID or --domain says otherwise, and works the same against
a real robot (--namespace when its nodes run in one).
"""

WATCH_EXAMPLES = """\
examples:
  glove-ros watch
  glove-ros watch --namespace /jetrover_1 --duration 60
"""


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros task``."""
    parser.add_argument("task", help='what to do, e.g. "find the red block"')
    parser.add_argument("--task-id", default="", help="episode id of the task "
                        "(default: cli-<time>)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="step limit (default 0: the planner's own)")
    parser.add_argument("--episode", type=int, default=None,
                        help="built-in simulator only: announce this episode number first, so "
                        "the world file's drift events up to it happen")
    _common_arguments(parser)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the result before cancelling (default 300)")


def add_watch_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros watch``."""
    parser.add_argument("--all", action="store_true",
                        help="also print every recorded transition (verbose)")
    parser.add_argument("--count", type=int, default=0,
                        help="exit after this many lines (default 0: until Ctrl-C)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="exit after this many seconds (default 0: until Ctrl-C)")
    _common_arguments(parser)


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="", help="robot namespace, e.g. /jetrover_1")
    parser.add_argument("--domain", type=int, default=None,
                        help="ROS domain id (default: ROS_DOMAIN_ID, else the running "
                        "glove-ros launch's)")
    parser.add_argument("--wait", type=float, default=30.0,
                        help="seconds to wait for the graph to appear (default 30)")


# ---------------------------------------------------------------- formatting (no ROS)

_EVENT_KINDS = {0: "recorded", 1: "SUPPRESSED", 2: "REPLACED", 3: "restored", 4: "queued"}
_GATE_VERDICTS = {0: "accepted (no comparison)", 1: "accepted after comparison",
                  2: "REJECTED"}


def _ids(ids: Any) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:6])
    return f"#{shown}" + (f" (+{len(ids) - 6} more)" if len(ids) > 6 else "")


def _sa(msg: Any) -> str:
    arg = getattr(msg, "action_arg", "")
    return f"({msg.state_key}, {msg.action}{' ' + arg if arg else ''})"


def format_alert(m: Any) -> str:
    """One line for a DissonanceAlert; it names the observation that raised it, and where
    that observation was made when it was elsewhere (object-level evidence)."""
    expected = ", ".join(f"{o} {p:.0%}" for o, p in zip(m.expected_outcomes,
                                                         m.expected_probabilities, strict=False))
    if getattr(m, "kind", "") == "object":
        return (f"OBJECT MOVED {_sa(m)}: '{m.observed_outcome}' seen at '{m.observed_at}', "
                f"so memory of it here is stale (memory here said [{expected}]); "
                f"{len(m.suppressed_ids)} memories suppressed")
    return (f"DISSONANCE {_sa(m)}: saw '{m.observed_outcome}', memory said [{expected}] "
            f"(n={m.history_size}, {m.consecutive_surprises} surprises in a row); "
            f"{len(m.suppressed_ids)} memories suppressed, {m.mode} mode"
            + (f", {m.probes_requested} probes requested" if m.probes_requested else ""))


def format_event(m: Any) -> str:
    """One line for a MemoryEvent."""
    kind = _EVENT_KINDS.get(int(m.kind), f"kind {m.kind}")
    line = f"memory {kind} {_sa(m)} {_ids(m.entry_ids)}"
    if len(m.new_entry_ids):
        line += f" -> {_ids(m.new_entry_ids)}"
    if m.evidence_count:
        line += f" on {m.evidence_count} fresh samples"
    return line + (f": {m.reason}" if m.reason else "")


def format_probe_request(m: Any) -> str:
    """One line for a ProbeRequest."""
    return (f"PROBE request {_sa(m)} x{m.samples} ({m.reason}) to confirm or replace "
            f"{_ids(m.entry_ids)}")


def format_gate(m: Any) -> str:
    """One line for a GateDecision."""
    verdict = _GATE_VERDICTS.get(int(m.verdict), f"verdict {m.verdict}")
    line = f"gate: plan-memory update {m.update_index} {verdict}"
    if int(m.verdict) != 0:
        line += f" (score old {m.score_old:.2f}, new {m.score_new:.2f})"
    return line + f"; active version {m.active_version}"


def format_outcome(m: Any) -> str:
    """One line for a TaskOutcome."""
    how = f"found at {m.found_at}" if m.success else f"FAILED ({m.reason})"
    return f"task '{m.task}' [{m.episode_id}]: {how} in {m.steps} steps"


def format_consolidation(report: Any) -> str:
    """One line for a consolidation report (glove_ros/ConsolidationReport)."""
    line = (f"CONSOLIDATION {report.status} ({report.reason}, {report.policy}): plan memory "
            f"{report.entries_before} -> {report.entries_after} entries, "
            f"{report.tokens_before} -> {report.tokens_after} tokens")
    if report.consolidation_id:
        line += f" [{report.consolidation_id}]"
    return f"{line}: {report.message}" if report.message else line


class ProbeCounter:
    """Turns the verifier's status (VerifierStatus) into a line when its probe count changes."""

    def __init__(self) -> None:
        self.spent: int | None = None

    def line(self, status: Any) -> str | None:
        """A line when probes were spent since the last status, else None."""
        spent = int(status.probes_spent)
        before, self.spent = self.spent, spent
        if spent == (before or 0):
            return None
        return (f"PROBES spent: {spent} (+{spent - (before or 0)}) of a budget of "
                f"{status.budget}; {status.refused} refused")


def fields_text(msg: Any) -> str:
    """``name=value`` for every field of a ROS message (whatever the action defines)."""
    parts = []
    for name in msg.get_fields_and_field_types():
        value = getattr(msg, name)
        if isinstance(value, str):
            value = repr(value)
        elif hasattr(value, "__len__") and not isinstance(value, (bytes, str)):
            value = list(value)
        parts.append(f"{name}={value}")
    return " ".join(parts)


# ---------------------------------------------------------------- ROS plumbing


class _Session:
    """An rclpy node spun by a background thread; SIGINT/SIGTERM set ``stop``."""

    def __init__(self, args: argparse.Namespace, name: str) -> None:
        from glove_ros.cli.launcher import join_domain

        self.stop = threading.Event()
        self._previous = _stop_on_signals(self.stop)
        note = join_domain(args.domain)
        import rclpy  # a missing ROS 2 is reported in one line by glove_ros.cli
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        print(f"[{name}] {note}", file=sys.stderr, flush=True)
        self.rclpy = rclpy
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"glove_ros_{name}", namespace=args.namespace or None,
                                      context=self.context)
        self.executor = MultiThreadedExecutor(2, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            while self.context.ok() and not self.stop.is_set():
                self.executor.spin_once(timeout_sec=0.2)
        except Exception:  # the context went away during shutdown
            pass

    def sleep(self, seconds: float) -> bool:
        """Sleep unless stopped; False when a signal arrived."""
        return not self.stop.wait(seconds)

    def close(self) -> None:
        """Stop spinning, destroy the node, shut this context down."""
        import signal

        from glove_ros.nodes.common import stop_executor

        self.stop.set()
        self._thread.join(2)
        stop_executor(self.executor, 2.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)
        for s, h in self._previous.items():
            signal.signal(s, h)


def _stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    import signal

    def handler(_s: int, _f: Any) -> None:
        stop.set()

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


def task_main(args: argparse.Namespace) -> int:
    """Send one task to the running planner; print feedback and the result."""
    from glove_ros.action import RunTask
    from glove_ros.nodes.common import SpinSafeActionClient

    s = _Session(args, "task")
    try:
        from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

        group = MutuallyExclusiveCallbackGroup()
        # spin-safe: a request sent from this thread is registered before its answer can
        # be taken (rclpy's own client, under Humble and Jazzy, could drop such an answer)
        client = SpinSafeActionClient(s.node, RunTask, "run_task", callback_group=group)
        deadline = time.monotonic() + args.wait
        while not client.wait_for_server(timeout_sec=0.5):
            if s.stop.is_set():
                return 130
            if time.monotonic() > deadline:
                print(f"glove-ros: no planner answers on {s.node.resolve_topic_name('run_task')} "
                      f"(ROS domain {_domain()}) after {args.wait:.0f}s; is 'glove-ros launch' "
                      "running (or your robot's graph, with --namespace)?", file=sys.stderr)
                return 2
        # discovery can list the server before the server has matched this client's reply
        # readers; a goal response sent before that is lost ("failed to send response
        # (timeout)" at the server) while the goal runs. Give the match a moment first.
        if not s.sleep(1.0):
            return 130
        if args.episode is not None:
            _announce_episode(s, args.episode)
        task_id = args.task_id or f"cli-{int(time.time())}"
        goal = RunTask.Goal(task=args.task, task_id=task_id, max_steps=max(0, args.max_steps))
        print(f"task '{args.task}' [{task_id}] sent to "
              f"{s.node.resolve_topic_name('run_task')}", flush=True)

        def on_feedback(msg: Any) -> None:
            print(f"  feedback: {fields_text(msg.feedback)}", flush=True)

        handle = _wait(s, client.send_goal_async(goal, feedback_callback=on_feedback),
                       args.wait)
        if handle is None or not handle.accepted:
            print("the planner rejected the task" if handle is not None else
                  "the planner did not answer the goal request", file=sys.stderr)
            return 1
        response = _wait(s, handle.get_result_async(), args.timeout,
                         alive=client.server_is_ready)
        if response is _GONE:
            print(f"the planner's run_task server went away during the task (the planner "
                  f"stopped or died?); no result for more than {SERVER_GONE_S:.0f}s: the "
                  "outcome is unknown", file=sys.stderr)
            return 1
        if response is None:
            handle.cancel_goal_async()
            why = "interrupted" if s.stop.is_set() else f"no result after {args.timeout:.0f}s"
            print(f"{why}: task cancelled", file=sys.stderr)
            return 130 if s.stop.is_set() else 1
        result = response.result
        print(f"result: {fields_text(result)}", flush=True)
        return 0 if getattr(result, "success", False) else 1
    finally:
        s.close()


def _domain() -> str:
    import os

    return os.environ.get("ROS_DOMAIN_ID", "0")


def _announce_episode(s: _Session, episode: int) -> None:
    from std_msgs.msg import UInt32

    pub = s.node.create_publisher(UInt32, "episode_start", 10)
    deadline = time.monotonic() + 10
    while s.node.count_subscribers("episode_start") == 0 and time.monotonic() < deadline:
        if not s.sleep(0.1):
            return
    pub.publish(UInt32(data=int(episode)))
    s.sleep(0.3)  # the simulator applies the episode's events before the task starts
    print(f"episode {episode} announced to the simulator", flush=True)


_GONE = object()  # what _wait returns when the server disappeared
SERVER_GONE_S = 3.0  # seconds an action server may be missing before the goal is given up


def _wait(s: _Session, future: Any, timeout: float,
          alive: Callable[[], bool] | None = None) -> Any:
    """The future's result; None on timeout or Ctrl-C; ``_GONE`` when ``alive`` (polled
    twice a second) has said False for more than ``SERVER_GONE_S`` seconds."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    end = time.monotonic() + timeout
    next_check, gone_since = time.monotonic() + 0.5, None
    while not done.wait(0.1):
        now = time.monotonic()
        if s.stop.is_set() or now > end:
            return None
        if alive is not None and now >= next_check:
            next_check = now + 0.5
            if alive():
                gone_since = None
            elif gone_since is None:
                gone_since = now
            elif now - gone_since > SERVER_GONE_S:
                return _GONE
    return future.result()


def watch_main(args: argparse.Namespace) -> int:
    """Print memory events of the running graph until Ctrl-C, --count or --duration."""
    from std_msgs.msg import String

    from glove_ros.msg import (
        ConsolidationReport,
        DissonanceAlert,
        GateDecision,
        MemoryEvent,
        ProbeRequest,
        TaskOutcome,
        VerifierStatus,
    )
    from glove_ros.nodes.common import latched_qos

    s = _Session(args, "watch")
    lock = threading.Lock()
    printed = [0]
    probes = ProbeCounter()

    def emit(line: str | None) -> None:
        if line is None:
            return
        with lock:
            if args.count and printed[0] >= args.count:
                return
            print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
            printed[0] += 1
            if args.count and printed[0] >= args.count:
                s.stop.set()

    def on_event(m: Any) -> None:
        if int(m.kind) != 0 or args.all:
            emit(format_event(m))

    subs: list[tuple[Any, str, Callable[[Any], None]]] = [
        (DissonanceAlert, "dissonance", lambda m: emit(format_alert(m))),
        (MemoryEvent, "memory_events", on_event),
        (ProbeRequest, "probe_requests", lambda m: emit(format_probe_request(m))),
        (VerifierStatus, "verifier_status", lambda m: emit(probes.line(m))),
        (GateDecision, "gate_decisions", lambda m: emit(format_gate(m))),
        (ConsolidationReport, "consolidation_report",
         lambda m: emit(format_consolidation(m))),
        (TaskOutcome, "task_outcomes", lambda m: emit(format_outcome(m))),
        (String, "world_events", lambda m: emit(f"WORLD {m.data}")),
    ]
    try:
        for msg_type, topic, cb in subs:  # verifier_status is latched (the last value)
            qos = latched_qos() if topic == "verifier_status" else 100
            s.node.create_subscription(msg_type, topic, cb, qos)
        # "listening" only once discovery has settled: the topics that have a publisher stop
        # growing for 1 s (at most 5 s). A message published before a subscription matched
        # its publisher is lost (volatile QoS): the first task's outcome was, on a loaded CI
        seen, settled, give_up = -1, time.monotonic(), time.monotonic() + 5.0
        while not s.stop.is_set() and time.monotonic() < give_up:
            n = sum(s.node.count_publishers(t) > 0 for _, t, _ in subs)  # expands t itself
            if n != seen:
                seen, settled = n, time.monotonic()
            elif n and time.monotonic() - settled >= 1.0:
                break
            s.sleep(0.1)
        print(f"[watch] listening on {', '.join(t for _, t, _ in subs)}"
              f"{' in ' + args.namespace if args.namespace else ''}; Ctrl-C to stop",
              file=sys.stderr, flush=True)
        end = time.monotonic() + args.duration if args.duration > 0 else None
        while not s.stop.is_set():
            if end is not None and time.monotonic() > end:
                break
            s.sleep(0.1)
        interrupted = s.stop.is_set() and not (args.count and printed[0] >= args.count)
        return 130 if interrupted else 0
    finally:
        s.close()
