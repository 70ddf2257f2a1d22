"""Tests of the baseline memory rules as views over recorded entries (core.memory_views)."""

from __future__ import annotations

import pytest

from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.plan.agent_memory import Beliefs
from glove_ros.core.plan.agent_types import WorldMap
from glove_ros.core.verify.memory_views import (
    RULE_PARAMS,
    LatestOverwriteView,
    OracleView,
    PageHinkleyResetView,
    PeriodicRefreshView,
    RecencyWeightedView,
    RecentKView,
    RuleView,
    SlidingWindowView,
    make_view,
)


class _Feed:
    """Records transitions into a view with increasing ids."""

    def __init__(self, view: RuleView) -> None:
        self.view = view
        self.next_id = 1

    def look(self, wp: str, outcome: str) -> None:
        self._add(Transition(wp, "look", outcome))

    def nav(self, a: str, b: str, outcome: str) -> None:
        self._add(Transition(a, "navigate_to", outcome, b))

    def _add(self, t: Transition) -> None:
        self.view.record(MemoryEntry(self.next_id, t, Status.TRUSTED, 0.0))
        self.next_id += 1


def _outcomes(view: RuleView, wp: str = "a") -> list[str]:
    return [e.transition.outcome for e in view.trusted(state_key=wp, action="look")]


def test_static_view_keeps_everything_newest_first():
    f = _Feed(RuleView())
    for o in ("colors=red", "colors=red", "colors=blue"):
        f.look("a", o)
    f.nav("a", "b", "reached")
    assert _outcomes(f.view) == ["colors=blue", "colors=red", "colors=red"]
    assert [e.id for e in f.view.trusted()] == [4, 3, 2, 1]
    assert f.view.trusted(action="navigate_to")[0].transition.action_arg == "b"
    assert f.view.on_stuck([("a", "navigate_to", "b")]) is False


def test_latest_overwrite_and_recent_k_per_key():
    latest, recent = _Feed(LatestOverwriteView()), _Feed(RecentKView(k=2))
    for f in (latest, recent):
        for o in ("colors=red", "colors=red", "colors=blue"):
            f.look("a", o)
        f.look("b", "colors=")
        f.nav("a", "b", "blocked")
        f.nav("b", "a", "reached")  # the other direction is its own key
    assert _outcomes(latest.view) == ["colors=blue"]
    assert _outcomes(latest.view, "b") == ["colors="]
    assert len(latest.view.trusted(action="navigate_to")) == 2
    assert _outcomes(recent.view) == ["colors=blue", "colors=red"]
    assert latest.view.on_stuck([]) is False and recent.view.on_stuck([]) is False


def test_sliding_window_counts_steps_over_the_whole_store():
    f = _Feed(SlidingWindowView(window=3))
    f.look("a", "colors=red")
    f.look("b", "colors=")
    f.look("a", "colors=blue")
    f.look("c", "colors=green")
    assert _outcomes(f.view) == ["colors=blue"]  # the first look fell out of the window
    assert _outcomes(f.view, "b") == ["colors="]
    f.look("c", "colors=green")
    assert _outcomes(f.view, "b") == []  # b is forgotten entirely


def test_recency_weighted_gives_weights_as_multiplicities():
    f = _Feed(RecencyWeightedView(half_life=1.0))
    f.look("a", "colors=red")   # step 0: weight 0.5 ** 2 -> 5 copies
    f.look("b", "colors=")      # step 1: newest of b -> 20 copies
    f.look("a", "colors=blue")  # step 2: newest of a -> 20 copies
    outs = _outcomes(f.view)
    assert outs.count("colors=blue") == 20 and outs.count("colors=red") == 5
    beliefs = Beliefs.from_entries(f.view.trusted(action="look"), [],
                                   WorldMap({"a": (0.0, 0.0, 0.0), "b": (1.0, 0.0, 0.0)},
                                            {("a", "b"): 1.0}))
    assert beliefs.looks["a"].share("blue") == pytest.approx(0.8)
    g = _Feed(RecencyWeightedView(half_life=100.0))  # long memory: plain frequencies
    for o in ("colors=red", "colors=red", "colors=blue"):
        g.look("a", o)
    outs = _outcomes(g.view)
    assert outs.count("colors=red") == 40 and outs.count("colors=blue") == 20


def test_page_hinkley_resets_on_a_run_of_surprises_not_on_one():
    f = _Feed(PageHinkleyResetView(delta=0.05, threshold=1.0))
    for _ in range(10):
        f.look("a", "colors=red")
    f.look("a", "colors=")  # one miss: surprise 1/11, no alarm
    assert f.view.alerts == 0 and len(_outcomes(f.view)) == 11
    for _ in range(4):
        f.look("a", "colors=blue")
    assert f.view.alerts == 1 and f.view.resets == 1
    assert set(_outcomes(f.view)) <= {"colors=blue"}  # everything before the alarm hidden
    f.look("b", "colors=")
    assert f.view.on_stuck([("a", "navigate_to", "b")]) is True
    assert f.view.trusted() == [] and f.view.resets == 2
    assert f.view.on_stuck([]) is False  # nothing left to reset


def test_periodic_refresh_every_period_steps_and_when_stuck():
    f = _Feed(PeriodicRefreshView(period=3))
    for o in ("colors=red", "colors=red", "colors=red"):
        f.look("a", o)
    assert len(_outcomes(f.view)) == 3
    f.look("a", "colors=blue")  # step 3 starts a new period
    assert _outcomes(f.view) == ["colors=blue"] and f.view.resets == 1
    assert f.view.on_stuck([]) is True and f.view.trusted() == []


def test_oracle_view_reads_the_truth_each_time():
    truth = {"sigs": {"a": "colors=red", "b": "colors="}, "blocked": frozenset()}
    view = OracleView(lambda: (truth["sigs"], truth["blocked"], [("a", "b")]))
    assert _outcomes(view) == ["colors=red"]
    navs = view.trusted(action="navigate_to")
    assert sorted((e.transition.state_key, e.transition.outcome) for e in navs) == [
        ("a", "reached"), ("b", "reached")]
    truth["sigs"] = {"a": "colors=", "b": "colors=red"}
    truth["blocked"] = frozenset({("a", "b")})
    assert _outcomes(view) == ["colors="] and _outcomes(view, "b") == ["colors=red"]
    assert {e.transition.outcome for e in view.trusted(action="navigate_to")} == {"blocked"}


def test_make_view_parameters():
    assert isinstance(make_view("RecentK", {"k": 5}), RecentKView)
    assert make_view("RecentK", {"k": 5}).k == 5
    assert make_view("SlidingWindow").window == RULE_PARAMS["SlidingWindow"][1]["window"]
    assert make_view("PageHinkleyReset", {"threshold": 2.5}).threshold == 2.5
    assert make_view("RecencyWeighted", {"half_life": 12}).half_life == 12.0
    assert make_view("PeriodicRefresh", {"period": 7}).period == 7
    for name, params in (("Nope", {}), ("RecentK", {"window": 3}), ("RecentK", {"k": 0}),
                         ("SlidingWindow", {"window": 1.5}), ("RecencyWeighted",
                                                              {"half_life": 0}),
                         ("PageHinkleyReset", {"threshold": -1}),
                         ("PeriodicRefresh", {"period": True})):
        with pytest.raises(ValueError):
            make_view(name, params)
