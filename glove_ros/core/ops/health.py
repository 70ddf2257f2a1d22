"""Rates and latencies a node reports on /diagnostics (ROS-free, thread-safe).

Levels follow diagnostic_msgs/DiagnosticStatus: OK 0, WARN 1, ERROR 2, STALE 3.
"""

from __future__ import annotations

import threading
import time
from collections import deque

OK, WARN, ERROR, STALE = 0, 1, 2, 3


class RateMeter:
    """Events per second over the last ``window`` seconds (monotonic clock)."""

    def __init__(self, window: float = 5.0) -> None:
        if window <= 0:
            raise ValueError(f"window must be > 0, got {window}")
        self.window = float(window)
        self.total = 0
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def tick(self, now: float | None = None) -> None:
        """Count one event."""
        t = time.monotonic() if now is None else now
        with self._lock:
            self._times.append(t)
            self.total += 1
            self._trim(t)

    def rate(self, now: float | None = None) -> float:
        """Events per second in the window ending ``now``."""
        t = time.monotonic() if now is None else now
        with self._lock:
            self._trim(t)
            return len(self._times) / self.window

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - self.window:
            self._times.popleft()


class LatencyStat:
    """Mean and maximum of the last ``size`` durations, plus a count of all."""

    def __init__(self, size: int = 50) -> None:
        self._values: deque[float] = deque(maxlen=size)
        self.count = 0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        """Record one duration."""
        with self._lock:
            self._values.append(float(seconds))
            self.count += 1

    def summary(self) -> tuple[float, float]:
        """(mean, max) of the recent durations; (0, 0) before any."""
        with self._lock:
            if not self._values:
                return 0.0, 0.0
            return sum(self._values) / len(self._values), max(self._values)


__all__ = ["ERROR", "OK", "STALE", "WARN", "LatencyStat", "RateMeter"]
