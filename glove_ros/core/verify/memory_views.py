"""Baseline memory rules as read views over one experience store (ROS-free).

The JetRover benchmark records every transition the agent returns in the same store for
every method; a baseline differs only in *what the agent reads back*. Each view here is a
:class:`~glove_ros.core.plan.agent_memory.MemoryView` (``trusted(state_key, action)``, newest
first) over the entries recorded so far (fed with :meth:`RuleView.record` right after the
store recorded them), applying its rule. Keys are ``(state_key, action, action_arg)``;
"steps" are recorded transitions (one per agent action).

==================  =====================================================================
name (params)       what the agent reads
==================  =====================================================================
LatestOverwrite     the newest entry of each key
RecentK (k=3)       the newest ``k`` entries of each key
SlidingWindow       entries among the newest ``window`` recorded transitions (a window in
(window=30)         steps over the whole store; an old key falls out of memory entirely)
RecencyWeighted     every entry, weighted ``0.5 ** (age / half_life)`` with the age in steps
(half_life=5)       behind its key's newest entry; the weight is given as a multiplicity
                    (the entry repeated ``round(RESOLUTION * weight)`` times, so the
                    agent's counts become weighted counts; weights under
                    ``0.5 / RESOLUTION`` vanish)
PageHinkleyReset    everything since the last reset; a Page-Hinkley test on the surprise
(delta=0.05,        stream (1 - the view's believed probability of the observed outcome of
threshold=1.0)      a known key) resets (hides everything before) on an alarm
PeriodicRefresh     everything since the last refresh; memory refreshes every ``period``
(period=30)         steps
==================  =====================================================================

The stuck hook (:meth:`RuleView.on_stuck`: the agent's trusted memory leaves it no way
forward) answers by each rule: PageHinkleyReset resets, PeriodicRefresh refreshes, the
local rules do nothing (the self-confirming deadlock). :class:`OracleView` is the upper
bound: it reads the simulator's current truth, one entry per waypoint look and per
corridor direction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.verify.memory_rules import PageHinkleyTest

__all__ = [
    "RULE_PARAMS",
    "LatestOverwriteView",
    "OracleView",
    "PageHinkleyResetView",
    "PeriodicRefreshView",
    "RecencyWeightedView",
    "RecentKView",
    "RuleView",
    "SlidingWindowView",
    "make_view",
]

Key = tuple[str, str, str]


def _filter(entries: list[MemoryEntry], state_key: str | None, action: str | None
            ) -> list[MemoryEntry]:
    return [e for e in entries
            if (state_key is None or e.transition.state_key == state_key)
            and (action is None or e.transition.action == action)]


class RuleView:
    """Base: every recorded entry visible (the static memory), newest first."""

    name = "RuleView"

    def __init__(self) -> None:
        self._entries: list[MemoryEntry] = []
        self._cache: list[MemoryEntry] | None = None
        self.alerts = 0
        self.resets = 0

    @property
    def steps(self) -> int:
        """Transitions recorded so far."""
        return len(self._entries)

    def record(self, entry: MemoryEntry) -> None:
        """The store recorded ``entry`` (the newest step)."""
        self._entries.append(entry)
        self._cache = None

    def visible(self) -> list[MemoryEntry]:
        """What the rule lets the agent read, oldest first (repeats allowed)."""
        return list(self._entries)

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """:class:`~glove_ros.core.plan.agent_memory.MemoryView`: visible entries, newest first."""
        if self._cache is None:
            self._cache = self.visible()
        return _filter(self._cache, state_key, action)[::-1]

    def on_stuck(self, keys: list[Key]) -> bool:
        """The agent is stuck behind remembered blockages; True if memory changed."""
        return False

    def stats(self) -> dict[str, Any]:
        """Counters for reports."""
        return {"alerts": self.alerts, "resets": self.resets}


class LatestOverwriteView(RuleView):
    """The newest entry of each key."""

    name = "LatestOverwrite"

    def visible(self) -> list[MemoryEntry]:
        newest: dict[Key, MemoryEntry] = {}
        for e in self._entries:
            newest[e.transition.key] = e
        return sorted(newest.values(), key=lambda e: e.id)


class RecentKView(RuleView):
    """The newest ``k`` entries of each key."""

    name = "RecentK"

    def __init__(self, k: int = 3) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"RecentK needs an int k >= 1, got {k!r}")
        super().__init__()
        self.k = k

    def visible(self) -> list[MemoryEntry]:
        per: dict[Key, list[MemoryEntry]] = {}
        for e in self._entries:
            per.setdefault(e.transition.key, []).append(e)
        return sorted((e for es in per.values() for e in es[-self.k:]), key=lambda e: e.id)


class SlidingWindowView(RuleView):
    """Entries among the newest ``window`` recorded transitions."""

    name = "SlidingWindow"

    def __init__(self, window: int = 30) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"SlidingWindow needs an int window >= 1, got {window!r}")
        super().__init__()
        self.window = window

    def visible(self) -> list[MemoryEntry]:
        return self._entries[-self.window:]


class RecencyWeightedView(RuleView):
    """Every entry, weighted by recency within its key, as a multiplicity."""

    name = "RecencyWeighted"
    #: multiplicity of a key's newest entry (weight 1)
    RESOLUTION = 20

    def __init__(self, half_life: float = 5.0) -> None:
        if isinstance(half_life, bool) or not isinstance(half_life, (int, float)) \
                or not half_life > 0:
            raise ValueError(f"RecencyWeighted needs half_life > 0, got {half_life!r}")
        super().__init__()
        self.half_life = float(half_life)

    def weights(self) -> list[tuple[MemoryEntry, float]]:
        """(entry, weight) oldest first; weight 1 for each key's newest entry."""
        newest: dict[Key, int] = {}
        for step, e in enumerate(self._entries):
            newest[e.transition.key] = step
        return [(e, 0.5 ** ((newest[e.transition.key] - step) / self.half_life))
                for step, e in enumerate(self._entries)]

    def visible(self) -> list[MemoryEntry]:
        out: list[MemoryEntry] = []
        for e, w in self.weights():
            out.extend([e] * int(round(self.RESOLUTION * w)))
        return out


class _SinceView(RuleView):
    """Everything recorded since ``self._start`` (a reset / refresh point)."""

    def __init__(self) -> None:
        super().__init__()
        self._start = 0

    def visible(self) -> list[MemoryEntry]:
        return self._entries[self._start:]

    def reset(self) -> None:
        """Hide everything recorded so far."""
        self._start = len(self._entries)
        self._cache = None
        self.resets += 1

    def on_stuck(self, keys: list[Key]) -> bool:
        if self._start == len(self._entries):
            return False
        self.reset()
        return True


class PageHinkleyResetView(_SinceView):
    """Page-Hinkley test on the surprise stream; an alarm hides everything before it."""

    name = "PageHinkleyReset"

    def __init__(self, delta: float = 0.05, threshold: float = 1.0) -> None:
        for label, v in (("delta", delta), ("threshold", threshold)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"PageHinkleyReset {label} must be a number, got {v!r}")
        if delta < 0 or threshold <= 0:
            raise ValueError(f"PageHinkleyReset needs delta >= 0 and threshold > 0, got "
                             f"{delta}, {threshold}")
        super().__init__()
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.alarm_steps: list[int] = []
        self.test = PageHinkleyTest(delta, threshold)

    def surprise(self, t: Transition) -> float | None:
        """1 - believed probability of ``t``'s outcome (None: the key is unknown)."""
        same = [e.transition.outcome for e in self.visible() if e.transition.key == t.key]
        if not same:
            return None
        return 1.0 - same.count(t.outcome) / len(same)

    def record(self, entry: MemoryEntry) -> None:
        x = self.surprise(entry.transition)
        if x is not None and self.test.update(x):
            self.alerts += 1
            self.alarm_steps.append(len(self._entries))
            self.reset()
        super().record(entry)

    def on_stuck(self, keys: list[Key]) -> bool:
        acted = super().on_stuck(keys)
        if acted:
            self.test.reset()
        return acted


class PeriodicRefreshView(_SinceView):
    """Memory refreshes (everything before is hidden) every ``period`` steps."""

    name = "PeriodicRefresh"

    def __init__(self, period: int = 30) -> None:
        if isinstance(period, bool) or not isinstance(period, int) or period < 1:
            raise ValueError(f"PeriodicRefresh needs an int period >= 1, got {period!r}")
        super().__init__()
        self.period = period

    def record(self, entry: MemoryEntry) -> None:
        step = len(self._entries)
        if step and step % self.period == 0:
            self.reset()
        super().record(entry)


class OracleView(RuleView):
    """The true current world as memory: ``truth()`` returns (signature per waypoint,
    blocked corridor keys, corridors as (a, b) pairs); one fresh entry per look and per
    corridor direction."""

    name = "oracle"

    def __init__(self, truth: Callable[[], tuple[Mapping[str, str], frozenset[tuple[str, str]],
                                                  list[tuple[str, str]]]]) -> None:
        super().__init__()
        self._truth = truth

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        return _filter(self.visible(), state_key, action)[::-1]  # the truth changes: no cache

    def visible(self) -> list[MemoryEntry]:
        sigs, blocked, corridors = self._truth()
        # one id for all: every place is equally fresh (the planner's "least recently seen"
        # order then falls back to distance)
        now = len(self._entries) + 1
        out = [_entry(now, Transition(w, "look", sigs[w])) for w in sorted(sigs)]
        for a, b in corridors:
            outcome = "blocked" if (min(a, b), max(a, b)) in blocked else "reached"
            for s, d in ((a, b), (b, a)):
                out.append(_entry(now, Transition(s, "navigate_to", outcome, d)))
        return out


def _entry(entry_id: int, t: Transition) -> MemoryEntry:
    return MemoryEntry(id=entry_id, transition=t, status=Status.TRUSTED, valid_from=0.0)


#: rule name -> (view class, default parameters); the parameters each rule accepts
RULE_PARAMS: dict[str, tuple[type[RuleView], dict[str, Any]]] = {
    "LatestOverwrite": (LatestOverwriteView, {}),
    "RecentK": (RecentKView, {"k": 3}),
    "SlidingWindow": (SlidingWindowView, {"window": 30}),
    "RecencyWeighted": (RecencyWeightedView, {"half_life": 5.0}),
    "PageHinkleyReset": (PageHinkleyResetView, {"delta": 0.05, "threshold": 1.0}),
    "PeriodicRefresh": (PeriodicRefreshView, {"period": 30}),
}


def make_view(name: str, params: Mapping[str, Any] | None = None) -> RuleView:
    """The view of baseline rule ``name`` with ``params`` over its defaults; ValueError for
    an unknown rule or parameter."""
    if name not in RULE_PARAMS:
        raise ValueError(f"unknown memory rule {name!r}; choose from {', '.join(RULE_PARAMS)}")
    cls, defaults = RULE_PARAMS[name]
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"{name} does not take {', '.join(unknown)}; its parameters: "
                         f"{', '.join(defaults) or 'none'}")
    return cls(**{**defaults, **params})
