"""What the ``glove-ros bag`` subcommands share: exit codes, notes on stderr, rclpy plumbing
and the timed player.

Separate from :mod:`glove_ros.cli.bags` (the argument parser) so that the record / replay
processes (:mod:`glove_ros.cli.bag_record_replay`) and the ``--through-nodes`` drift test
(:mod:`glove_ros.cli.bag_nodes`) use one copy: rclpy in a private context without its
signal handlers, QoS conversion, a SIGINT / SIGTERM stop event, and :class:`_Player`, which
publishes recorded messages with their original timing. rclpy is imported only inside the
functions that need it.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from glove_ros.core.bag.bagfile import NS, BagError, QosSpec

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _msg_class(msgtype: str) -> Any:
    """The rclpy message class of ``pkg/msg/Name`` (BagError if not installed)."""
    pkg, sep, name = msgtype.partition("/msg/")
    if not sep:
        raise BagError(f"message type {msgtype} is not a pkg/msg/Name type")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ImportError, AttributeError):
        raise BagError(f"message type {msgtype} is not installed in this ROS 2 environment; "
                       f"source the workspace that defines it, or leave its topic out with "
                       f"--topics") from None


def _resolve(name: str, namespace: str) -> str:
    if name.startswith("/"):
        return name
    ns = "/" + namespace.strip("/")
    return (ns.rstrip("/") + "/" + name) if ns != "/" else "/" + name


def _rclpy_qos(spec: QosSpec) -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=max(1, int(spec.depth)),
        reliability=ReliabilityPolicy.RELIABLE if spec.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if spec.transient_local
        else DurabilityPolicy.VOLATILE)


def _init_rclpy() -> tuple[Any, Any]:
    """rclpy in a private context, without rclpy's signal handlers (we stop cleanly) and
    without reading sys.argv (``--remap a:=b`` is ours, not a global ROS remap)."""
    try:
        import rclpy

        import glove_ros.msg  # noqa: F401 - the generated interfaces
    except ImportError as exc:
        raise ValueError(f"this needs ROS 2 with the glove_ros interfaces ({exc}); source "
                         f"your ROS 2 workspace (here: source env.sh)") from None

    context = rclpy.context.Context()
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # an rclpy without the option
        rclpy.init(args=[], context=context)
    return rclpy, context


@contextlib.contextmanager
def _stop_on_signals() -> Any:
    """An event set by SIGINT or SIGTERM while inside (old handlers restored after)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


class _Player:
    """Publishes (bag topic, bag_ns, raw) with the original timing scaled by ``rate``."""

    def __init__(self, rate: float, clock_pub: Any = None, clock_rate: float = 50.0) -> None:
        if not rate > 0 or not math.isfinite(rate):
            raise ValueError(f"--rate must be > 0, got {rate}")
        self.rate = rate
        self.clock_pub = clock_pub
        self.clock_period = 1.0 / clock_rate if clock_rate > 0 else 0.0
        self.published = 0
        self._t0: int | None = None
        self._wall0 = 0.0
        self.stop = threading.Event()

    def _clock(self, ns: int) -> None:
        if self.clock_pub is not None:
            from rosgraph_msgs.msg import Clock

            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = int(ns // NS), int(ns % NS)
            self.clock_pub.publish(msg)

    def restart(self) -> None:
        """The next message is published at once; later ones keep their spacing to it."""
        self._t0 = None

    def play(self, messages: Iterable[tuple[Any, int, bytes]],
             after: Callable[[Any], None] | None = None) -> int:
        """Publish ``(publisher, bag_ns, raw)`` in order; returns how many were published.

        ``after(publisher)`` runs after each publication (flow control); time it takes
        delays the following messages (the recorded spacing is a minimum then)."""
        for pub, t_ns, raw in messages:
            if self.stop.is_set():
                break
            if self._t0 is None:
                self._t0, self._wall0 = t_ns, time.monotonic()
            due = self._wall0 + (t_ns - self._t0) / NS / self.rate
            while True:
                left = due - time.monotonic()
                if left <= 0 or self.stop.is_set():
                    break
                if self.clock_pub is not None and self.clock_period:
                    elapsed = (time.monotonic() - self._wall0) * self.rate
                    self._clock(self._t0 + int(elapsed * NS))
                    time.sleep(min(left, self.clock_period))
                else:
                    time.sleep(min(left, 0.05))
            self._clock(t_ns)
            pub.publish(bytes(raw))
            self.published += 1
            if after is not None:
                before = time.monotonic()
                after(pub)
                self._wall0 += time.monotonic() - before
        return self.published
