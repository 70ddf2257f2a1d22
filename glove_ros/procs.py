"""Child processes that die with their parent (shared by the launcher, the demo and fleet).

Kept apart from the CLI front-ends so that the ROS-side fleet transport (:mod:`glove_ros.fleet`)
can start its NATS server without importing the launcher.
"""

from __future__ import annotations

import signal


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: ask the kernel to SIGTERM this child when the launcher dies (even by SIGKILL)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
