"""Wall clock to node clock: what "5 minutes ago" means on a node that runs on another clock.

A person asking "what changed in the last 5 minutes?" means wall-clock minutes. Memory is
stamped on the node's clock, which under ``use_sim_time`` runs at the simulator's pace (the
demo's runs 20x faster than the wall) and on a real robot equals the wall clock. A
:class:`ClockMap` keeps (wall, node) samples taken as the node runs and turns a wall-clock
instant into the node-clock stamp of that instant: interpolated between samples, and before
the first sample extrapolated at the rate seen so far (1.0 until a second sample exists).

Pure and ROS-free: the planner node feeds it ``time.time()`` and its clock's ``now()``.
"""
from __future__ import annotations

import bisect
import math
from collections import deque

__all__ = ["ClockMap"]


class ClockMap:
    """Samples of (wall seconds, node-clock seconds); :meth:`node_time_at` maps back.

    A node clock that jumps backwards (a bag replayed from its start, a simulator reset)
    starts a new series: the old samples no longer describe this clock.
    """

    def __init__(self, *, min_gap_s: float = 0.5, keep: int = 4096) -> None:
        if min_gap_s < 0 or keep < 2:
            raise ValueError("ClockMap needs min_gap_s >= 0 and keep >= 2")
        self.min_gap_s = float(min_gap_s)
        self._wall: deque[float] = deque(maxlen=keep)
        self._node: deque[float] = deque(maxlen=keep)

    def __len__(self) -> int:
        return len(self._wall)

    def sample(self, wall: float, node: float) -> None:
        """Record one pair; pairs closer than ``min_gap_s`` of wall time to the last are
        skipped, non-finite values are refused."""
        if not (math.isfinite(wall) and math.isfinite(node)):
            raise ValueError(f"ClockMap.sample needs finite times, got wall={wall} node={node}")
        if self._wall:
            if node < self._node[-1] or wall < self._wall[-1]:  # clock reset: a new series
                self._wall.clear()
                self._node.clear()
            elif wall - self._wall[-1] < self.min_gap_s:
                return
        self._wall.append(float(wall))
        self._node.append(float(node))

    def rate(self) -> float:
        """Node seconds per wall second over the samples kept (1.0 with fewer than two)."""
        if len(self._wall) < 2 or self._wall[-1] <= self._wall[0]:
            return 1.0
        return (self._node[-1] - self._node[0]) / (self._wall[-1] - self._wall[0])

    def node_time_at(self, wall: float) -> float:
        """The node-clock stamp of wall-clock instant ``wall`` (never below 0)."""
        if not self._wall:
            raise ValueError("ClockMap has no samples yet: sample the clocks first")
        walls = list(self._wall)
        nodes = list(self._node)
        if wall >= walls[-1]:
            value = nodes[-1] + (wall - walls[-1]) * self.rate()
        elif wall <= walls[0]:
            value = nodes[0] - (walls[0] - wall) * self.rate()
        else:
            i = bisect.bisect_right(walls, wall)
            w0, w1, n0, n1 = walls[i - 1], walls[i], nodes[i - 1], nodes[i]
            value = n0 + (n1 - n0) * (wall - w0) / (w1 - w0) if w1 > w0 else n1
        return max(0.0, value)

    def node_time_ago(self, wall_now: float, seconds: float) -> float:
        """The node-clock stamp of ``seconds`` of wall time before ``wall_now``."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a duration must be finite and >= 0, got {seconds}")
        return self.node_time_at(wall_now - seconds)
