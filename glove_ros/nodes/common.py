"""Shared plumbing of the glove_ros nodes: parameter declaration, autostart, ``main()``.

Nothing here decides anything about memory; it only keeps every node's ``main()`` and
parameter handling identical (STYLE.md, "Node anatomy").
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionClient
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.node import Node


def latched_qos(depth: int = 1) -> Any:
    """QoS for state topics (``current_waypoint``, ``docked``): late joiners get the last value."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                      reliability=ReliabilityPolicy.RELIABLE)


@dataclass(frozen=True)
class Param:
    """One ROS parameter: name, default value and the description shown by `ros2 param`."""

    name: str
    default: Any
    description: str
    read_only: bool = False


def declare_params(node: Node, params: Sequence[Param]) -> None:
    """Declare every parameter of a node in one place, each with its description."""
    for p in params:
        node.declare_parameter(
            p.name, p.default,
            ParameterDescriptor(description=p.description, read_only=p.read_only),
        )


def param_values(node: Node, params: Sequence[Param]) -> dict[str, Any]:
    """Current values of ``params`` as a plain dict (read with ``.value``)."""
    return {p.name: node.get_parameter(p.name).value for p in params}


def validating_callback(
    node: Node, params: Sequence[Param], validate: Callable[[dict[str, Any]], None]
) -> Callable[[list[rclpy.parameter.Parameter]], SetParametersResult]:
    """A set-parameters callback that applies the same validator as configure.

    ``validate`` receives the would-be parameter dict and raises ValueError to refuse. Any
    other exception (a TypeError from a value of the wrong type, a bug) refuses too: an
    exception escaping a parameter callback would end the node.
    """
    def callback(changes: list[rclpy.parameter.Parameter]) -> SetParametersResult:
        values = param_values(node, params)
        for change in changes:
            values[change.name] = change.value
        try:
            validate(values)
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        except Exception as exc:  # never raise out of a parameter callback
            node.get_logger().error(f"parameter check failed: {exc!r}")
            return SetParametersResult(successful=False, reason=f"refused: {exc!r}")
        return SetParametersResult(successful=True)

    return callback


AUTOSTART_PARAMS = (
    Param("autostart", True, "configure and activate at start (no lifecycle manager)"),
    Param("exit_on_failure", False,
          "with autostart: exit with code 1 when configure or activate fails, for a "
          "supervisor that restarts the process (glove-ros launch, respawn:=true); false: "
          "stay alive unconfigured / inactive so the parameters can be fixed and the node "
          "configured again", read_only=True),
)
"""The start-up parameters every lifecycle node declares first."""


def autostart(node: Any) -> bool:
    """Configure and activate a lifecycle node (what a lifecycle manager would do).

    Returns True when the node reached the active state. On failure it logs what state
    the node is left in and how to bring it up by hand; the transition's own callback has
    logged the reason.
    """
    name = node.get_fully_qualified_name()
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error(
            f"configure failed (reason above); {name} is {lifecycle_state(node)}: fix the cause "
            f"(a parameter: ros2 param set {name} NAME VALUE), then configure and activate it "
            f"(ros2 lifecycle set {name} configure; ... activate)")
        return False
    if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error(
            f"activate failed (reason above); {name} is {lifecycle_state(node)}: "
            f"activate it again (ros2 lifecycle set {name} activate)")
        return False
    return True


def lifecycle_state(node: Any) -> str:
    """Label of a lifecycle node's current state (``unconfigured``, ``active``, ...)."""
    machine = getattr(node, "_state_machine", None)  # rclpy keeps it private
    if machine is None:
        return "unknown"
    return str(machine.current_state[1])


def run(
    make_node: Callable[[], Node],
    args: Sequence[str] | None = None,
    threads: int = 4,
    lifecycle_autostart: bool = True,
) -> int:
    """The common ``main()``: init, build, spin, clean shutdown on Ctrl-C or SIGTERM.

    Lifecycle nodes are configured and activated at start when their ``autostart``
    parameter is true (the default), so a plain process start gives a working node;
    with ``autostart:=false`` an external lifecycle manager drives the transitions.
    When configure or activate fails, the node stays alive in the state it was left in
    (unconfigured / inactive, as ros2/demos lifecycle_py does), so its parameters can be
    fixed with ``ros2 param set`` and the transition triggered again; with
    ``exit_on_failure:=true`` (what ``glove-ros launch`` and ``respawn:=true`` launches
    pass, they restart the process with back-off) it exits with code 1 instead. A node
    left ``finalized`` (a transition raised) can never be configured again and exits 1.

    SIGINT and SIGTERM only set a flag (no KeyboardInterrupt anywhere, also not while the
    node is being built or loads a model); the spin loop sees it within a quarter second.
    Teardown runs in the order that lets callbacks finish while their publishers still
    work: executor, node, then rclpy. So a stop prints no traceback and no "exception was
    never retrieved" from a callback that outlived its context. Returns 0 after a signal,
    1 when the node could not be brought up and was told to exit (or cannot recover).
    """
    _stacks_on_demand()
    stop = threading.Event()
    previous = _on_stop_signals(stop)
    threading.Thread(target=stop_watchdog, args=(stop,), name="stop_watchdog",
                     daemon=True).start()
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except ImportError:  # older rclpy without the option: its own handler also stops spin
        rclpy.init(args=args)
    node = None
    executor = None
    code = 0
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        if (
            not stop.is_set()
            and lifecycle_autostart
            and hasattr(node, "trigger_configure")
            and node.get_parameter("autostart").value
            and not autostart(node)
            and (node.get_parameter("exit_on_failure").value
                 or lifecycle_state(node) == "finalized")
        ):
            why = ("exit_on_failure is true" if node.get_parameter("exit_on_failure").value
                   else "finalized, it cannot be configured again")
            node.get_logger().error(f"exiting with code 1 ({why})")
            code = 1
        else:
            while not stop.is_set() and rclpy.ok():
                executor.spin_once(timeout_sec=0.25)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        _teardown(node, executor)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


#: Seconds a node may take to exit after SIGINT / SIGTERM before :func:`stop_watchdog`
#: ends it: teardown waits up to 5 s for running callbacks, and ``ros2 launch`` escalates to
#: SIGKILL 10 s after its SIGINT, so the stacks are written before that.
STOP_GRACE_S = 8.0


def stop_watchdog(stop: threading.Event, grace: float = STOP_GRACE_S,
                  exit_now: Callable[[int], Any] = os._exit) -> None:
    """Daemon thread of :func:`run`: once ``stop`` is set, give the process ``grace``
    seconds to exit; if it is still alive (a callback, a thread or rcl teardown that does
    not return), write every thread's stack to stderr (the node's log) with a line saying
    so, and exit with code 0: the stop was asked for, and a robot's launch must not wait on
    one node. The stacks say what held it."""
    stop.wait()
    time.sleep(grace)
    sys.stderr.write(f"[glove_ros] still running {grace:.0f} s after the stop signal: "
                     "the stacks of every thread follow, then the process exits\n")
    sys.stderr.flush()
    try:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError):  # stderr without a file descriptor
        pass
    sys.stderr.flush()
    exit_now(0)


#: Seconds after :data:`STOP_GRACE_S` at which the interpreter-independent last resort of
#: :func:`_on_stop_signals` ends a process that :func:`stop_watchdog` could not end (9 s
#: after the signal: still before ``ros2 launch``'s SIGKILL at 10 s).
LAST_RESORT_S = 1.0

#: The first line faulthandler writes when the last resort fires (then the stacks).
LAST_RESORT_HEADER = f"Timeout (0:00:{STOP_GRACE_S + LAST_RESORT_S:02.0f})!"


def _on_stop_signals(stop: threading.Event) -> dict[int, Any]:
    """Make SIGINT and SIGTERM set ``stop``; returns the previous handlers.

    The handler also arms faulthandler's timer, a C thread that needs no Python: a
    process in which a C call holds the interpreter (the GIL) for good runs no Python
    thread, so :func:`stop_watchdog` never wakes; the timer still writes every thread's
    stack and exits with code 1, :data:`LAST_RESORT_S` after the watchdog's grace."""
    def handler(_signum: int, _frame: Any) -> None:
        if not stop.is_set():
            _arm(lambda: faulthandler.dump_traceback_later(
                STOP_GRACE_S + LAST_RESORT_S, exit=True))
        stop.set()

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


def _stacks_on_demand() -> None:
    """``kill -USR1 PID`` writes every thread's stack to the node's log and the node goes
    on; the handler is faulthandler's, in C, so it works in a process no Python thread
    can run in (a C call holding the GIL): what to send a node that does not answer.
    A crash in C (SIGSEGV, SIGABRT, ...) writes the stacks too before the process dies."""
    _arm(lambda: faulthandler.enable(all_threads=True))
    if hasattr(signal, "SIGUSR1"):
        _arm(lambda: faulthandler.register(signal.SIGUSR1, all_threads=True))


def _arm(call: Callable[[], Any]) -> None:
    """Run a faulthandler set-up; skipped where stderr has no file descriptor (a node
    run inside a test that captures output)."""
    try:
        call()
    except (AttributeError, ValueError, OSError, RuntimeError):
        pass


def _teardown(node: Node | None, executor: Any, timeout: float = 5.0) -> None:
    """Let running callbacks finish (up to ``timeout``), destroy the node, shut rclpy down."""
    if executor is not None:
        # A callback that runs longer (a task in flight) must not hold the process:
        # drain and shut the executor down from a helper thread, go on after the timeout.
        done = threading.Thread(target=stop_executor, args=(executor, timeout), daemon=True)
        done.start()
        done.join(timeout)
    if node is not None:
        node.destroy_node()
    rclpy.try_shutdown()


def stop_executor(executor: Any, timeout: float = 5.0) -> None:
    """Wait for the callbacks already handed to worker threads, then shut the executor down.

    rclpy's ``MultiThreadedExecutor.shutdown`` destroys its guard condition before its
    worker threads finish, and a callback finishing afterwards fails on that guard
    ("exception was never retrieved: cannot use Destroyable"). The spin loop has stopped
    handing out work, so waiting for the worker pool first closes that window.
    """
    pool = getattr(executor, "_executor", None)  # rclpy's ThreadPoolExecutor (private)
    if pool is not None:
        pool.shutdown(wait=True)
    executor.shutdown(timeout_sec=timeout)


class BackgroundSpinner:
    """Spin ``executor`` on a daemon thread until :meth:`stop` (clients such as the demo and
    the benchmarks that drive a graph from their main thread).

    :meth:`stop` ends the loop first (no new work is handed out), lets running callbacks
    finish and only then shuts the executor down, so no callback outlives it ("exception
    was never retrieved: cannot use Destroyable")."""

    def __init__(self, executor: Any, period: float = 0.1) -> None:
        self.executor = executor
        self._spinning = threading.Event()
        self._spinning.set()
        self._thread = threading.Thread(target=self._loop, args=(period,), daemon=True)
        self._thread.start()

    def _loop(self, period: float) -> None:
        while self._spinning.is_set():
            self.executor.spin_once(timeout_sec=period)

    def stop(self, join_timeout: float = 2.0) -> None:
        """Stop spinning, wait for running callbacks, shut the executor down."""
        self._spinning.clear()
        self._thread.join(join_timeout)
        stop_executor(self.executor)


class SpinSafeActionClient(ActionClient):
    """An rclpy ActionClient that may be created while an executor spins its node on
    another thread: in a lifecycle transition (the nodes' clients), or beside a background
    spinner (the demo's and ``glove-ros task``'s run_task clients).

    rclpy (Kilted) registers a new client with its node before it sets the client's lock;
    an executor that rebuilds its wait set in between fails on the missing lock
    ("'ActionClient' object has no attribute '_lock'") and its spin thread dies, so nothing
    is received any more. This client has its lock before it is registered (rclpy then
    replaces it with another, while nothing can hold it yet).

    It may also be destroyed while the executor spins (a lifecycle node's deactivate and
    cleanup): rclpy's executor lists the node's waitables, fails to enter a client destroyed
    since (and skips its entities) but adds it to the wait set all the same ("action client
    pointer is invalid"), and its spin thread dies. A destroyed client adds nothing and is
    never ready. A client the executor did enter is destroyed only once the executor lets
    go of it (rclpy's ``destroy_when_not_in_use``), so it stays valid through that wait.

    A client destroyed after the wait found it ready (an answer or the server's latched
    goal status had arrived) but before the executor took its data is taken as having
    nothing: rclpy's executor marks the client's callback group busy before the take, and
    a take that raises ("action client pointer is invalid") never marks it free again, so
    every entity of that group -- by default the whole node's subscriptions, timers and
    clients -- is never run again (CI saw a test node lose every action answer this way).

    A request (goal, cancel, result) may be sent from any thread while the executor spins:
    rclpy before Kilted sends the request and only then registers it, so an answer taken in
    between was dropped ("Ignoring unexpected goal response") and its future never done.
    Here a request is sent and registered, and an answer taken, one at a time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        self._request_lock = threading.RLock()  # send + register vs. take (see above)
        self._destroyed = False
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    def add_to_wait_set(self, wait_set: Any) -> None:
        if not self._destroyed:
            super().add_to_wait_set(wait_set)

    def is_ready(self, wait_set: Any) -> bool:
        return not self._destroyed and super().is_ready(wait_set)

    def take_data(self) -> Any:
        with self._request_lock:
            if self._destroyed:
                return {}
            try:
                return super().take_data()
            except Exception:
                if self._destroyed:  # destroyed between the wait and this take
                    return {}
                raise

    def destroy(self) -> None:
        self._destroyed = True  # before the handle goes: the executor checks it first
        super().destroy()


def wait_future(future: Any, timeout: float) -> Any:
    """Block this worker thread until an rclpy future is done; its result, or None on timeout.

    For service calls and action goals made from a callback of a MultiThreadedExecutor (the
    executor's other threads complete the future).
    """
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        return None
    return future.result()


def destroy_handles(node: Node, handles: list[Any]) -> None:
    """Destroy the subscriptions and services a node opened on activate; empties the list."""
    for handle in handles:
        if hasattr(handle, "srv_name"):
            node.destroy_service(handle)
        else:
            node.destroy_subscription(handle)
    handles.clear()


class Progress:
    """Thread-safe counters a node reports in its status log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, key: str, n: int = 1) -> None:
        """Increment counter ``key`` by ``n``."""
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + n

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters."""
        with self._lock:
            return dict(self._counts)


__all__ = [
    "AUTOSTART_PARAMS",
    "LifecycleState",
    "latched_qos",
    "Param",
    "Progress",
    "TransitionCallbackReturn",
    "autostart",
    "declare_params",
    "destroy_handles",
    "lifecycle_state",
    "wait_future",
    "param_values",
    "run",
    "stop_executor",
    "validating_callback",
]
