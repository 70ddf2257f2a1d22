"""Child processes: ones that die with their parent (shared by the launcher, the demo and
fleet), and what the benchmarks that start node processes share (stop one, wait for a
condition, a ROS domain of their own).

Kept apart from the CLI front-ends so that the ROS-side fleet transport (:mod:`glove_ros.fleet`)
can start its NATS server without importing the launcher.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: ask the kernel to SIGTERM this child when the launcher dies (even by SIGKILL)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def stop_process(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGINT (a node's clean shutdown), SIGKILL after ``timeout`` s; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


def wait_until(pred: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    """Poll ``pred`` until true; RuntimeError naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


@contextmanager
def private_ros_domain() -> Iterator[None]:
    """A ROS domain of its own (no cross-talk with a running graph), on this machine; the
    caller's ROS_DOMAIN_ID / ROS_AUTOMATIC_DISCOVERY_RANGE win and are restored after."""
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random().randint(110, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
