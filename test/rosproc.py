"""Helpers for tests that start glove_ros nodes as separate processes over DDS."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class NodeProcess:
    """One node in its own OS process, with its output captured to a log file."""

    def __init__(self, module: str, log_dir: Path, params: dict[str, Any] | None = None,
                 remaps: dict[str, str] | None = None, name: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.name = name or module.rsplit(".", 1)[-1]
        self.log_path = log_dir / f"{self.name}.log"
        cmd = [sys.executable, "-u", "-m", module, "--ros-args"]
        for key, value in (params or {}).items():
            cmd += ["-p", f"{key}:={_param_text(value)}"]
        for old, new in (remaps or {}).items():
            cmd += ["-r", f"{old}:={new}"]
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(env if env is not None else os.environ))

    def log(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL: the process gets no chance to clean up."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_param_text(v) if not isinstance(v, str) else f"'{v}'"
                              for v in value) + "]"
    return str(value)


def wait_for(pred: Callable[[], bool], timeout: float, what: str,
             logs: Callable[[], str] | None = None) -> None:
    """Poll ``pred`` until true; fail with ``what`` (and process logs) on timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f"\n--- logs ---\n{logs()}" if logs else ""))


@contextlib.contextmanager
def ros_client(name: str = "test_client") -> Iterator[Any]:
    """An rclpy node in this process, spun by a background executor thread."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(name, context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set() and context.ok():
            executor.spin_once(timeout_sec=0.05)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        # the spin loop ends first, then the executor: shutting an executor down while its
        # thread still waits in it can destroy the wait's guard condition under it (seen
        # with Jazzy's rclpy: "'NoneType' object has no attribute 'handle'" in that thread)
        stop.set()
        thread.join(5)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


_SETTLED: set[int] = set()  # clients whose server had time to match their reply reader


def call(node: Any, client: Any, request: Any, timeout: float = 10.0) -> Any:
    """Call a service from a spun node and return the response (fails on timeout).

    The first call on a client waits a moment after the service shows up: discovery may
    list the server before the server has matched the client's reply reader, and an answer
    sent before that is lost (the request itself may have been served)."""
    assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} absent"
    if id(client) not in _SETTLED:
        time.sleep(0.5)
        _SETTLED.add(id(client))
    future = client.call_async(request)
    end = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > end:
            raise AssertionError(f"service {client.srv_name} did not answer in {timeout}s")
        time.sleep(0.01)
    return future.result()


def call_retry(node: Any, client: Any, request: Any, timeout: float = 30.0,
               attempt: float = 3.0) -> Any:
    """Like :func:`call`, re-sending every ``attempt`` seconds until ``timeout``.

    Needed right after a server process restarted: discovery may still list the dead
    one, and a request sent before the new one matched is never answered.
    """
    end = time.monotonic() + timeout
    while True:
        try:
            left = max(end - time.monotonic(), 0.1)
            return call(node, client, request, timeout=min(attempt, left))
        except AssertionError:
            if time.monotonic() > end:
                raise


def warm_record(node: Any, client: Any, timeout: float = 30.0) -> None:
    """Warm up a ``record_transition`` client's answer path: send a malformed transition
    (rejected, nothing stored) until one is answered.

    Right after discovery DDS may match the request writer before the reply reader, and the
    first answer is lost; re-sending a real transition then would store it twice.
    """
    from glove_ros.msg import Transition
    from glove_ros.srv import RecordTransition

    bad = Transition(state_key="warm-up", action="", outcome="x")
    resp = call_retry(node, client, RecordTransition.Request(transition=bad), timeout=timeout)
    assert not resp.accepted, "the warm-up transition must be rejected"


class Collector:
    """Messages of one topic received by a test node, in arrival order (thread-safe)."""

    def __init__(self, node: Any, msg_type: Any, topic: str, qos: Any = 100) -> None:
        self.items: list = []
        self._lock = threading.Lock()
        self.sub = node.create_subscription(msg_type, topic, self._cb, qos)

    def _cb(self, msg: Any) -> None:
        with self._lock:
            self.items.append(msg)

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)


def answering_action_client(node: Any, action_type: Any, name: str,
                            probe: Callable[[int], Any], logs: Callable[[], str] = lambda: "",
                            tries: int = 6, wait: float = 5.0) -> tuple[Any, Any]:
    """An ActionClient of ``name`` whose answers arrive, and the result of the probe that
    showed it: ``(client, result)``.

    Discovery may list an action server before the server matched the client's reply
    readers; an answer sent before that is dropped ("client will not receive response"),
    and on 2 loaded cores one client once lost every answer for a whole test module. So
    ``probe(attempt)`` -- a goal the server answers without acting (the planner's empty task,
    waypoint_nav's unknown waypoint) -- is sent until its goal response and its result both
    arrive, on a new client after each unanswered try. The caller checks the result.

    The clients are :class:`SpinSafeActionClient`: a plain rclpy client destroyed while the
    test node spins, just as its answer arrived, leaves the node's callback group busy for
    good, and the node then runs nothing more (every later try unanswered, as CI once saw).
    """
    from glove_ros.nodes.common import SpinSafeActionClient as ActionClient

    def arrived(future: Any) -> bool:
        end = time.monotonic() + wait
        while not future.done():
            if time.monotonic() > end:
                return False
            time.sleep(0.02)
        return True

    client = ActionClient(node, action_type, name)
    for attempt in range(1, tries + 1):
        assert client.wait_for_server(timeout_sec=30), f"{name} server absent\n{logs()}"
        sent = client.send_goal_async(probe(attempt))
        if arrived(sent):
            handle = sent.result()
            assert handle.accepted, f"{name} refused the probe goal\n{logs()}"
            result = handle.get_result_async()
            if arrived(result):
                return client, result.result().result
        client.destroy()
        client = ActionClient(node, action_type, name)
    raise AssertionError(f"{name} never answered {tries} probe goals\n{logs()}")


def spin_standalone(name: str, build: Callable[[Any], Any], threads: int = 4) -> int:
    """``main()`` of a test-side stand-in process (the Nav2 stand-in, the stock-JetRover
    emulator): a node called ``name`` with ``build(node)`` attached, spun on a
    multi-threaded executor until Ctrl-C or shutdown."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    rclpy.init(args=sys.argv)
    node = rclpy.create_node(name)
    build(node)
    executor = MultiThreadedExecutor(num_threads=threads)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
