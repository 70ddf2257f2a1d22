"""Shared plumbing of the glove_ros nodes: parameter declaration, autostart, ``main()``.

Nothing here decides anything about memory; it only keeps every node's ``main()`` and
parameter handling identical (STYLE.md, "Node anatomy").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
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

    ``validate`` receives the would-be parameter dict and raises ValueError to refuse.
    """
    def callback(changes: list[rclpy.parameter.Parameter]) -> SetParametersResult:
        values = param_values(node, params)
        for change in changes:
            values[change.name] = change.value
        try:
            validate(values)
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    return callback


def autostart(node: Any) -> bool:
    """Configure and activate a lifecycle node (what a lifecycle manager would do).

    Returns True when the node reached the active state.
    """
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error("configure failed; node stays unconfigured")
        return False
    if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
        node.get_logger().error("activate failed; node stays inactive")
        return False
    return True


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
    """
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        if (
            lifecycle_autostart
            and hasattr(node, "trigger_configure")
            and node.get_parameter("autostart").value
            and not autostart(node)
        ):
            code = 1
        else:
            executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


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
    "LifecycleState",
    "latched_qos",
    "Param",
    "Progress",
    "TransitionCallbackReturn",
    "autostart",
    "declare_params",
    "destroy_handles",
    "wait_future",
    "param_values",
    "run",
    "validating_callback",
]
