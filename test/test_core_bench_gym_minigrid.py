"""A real MiniGrid world through the bring-your-own-environment adapter
(bench/scenarios/gym_minigrid_doors.yaml: two rooms, a north and a south door, the drift
closes the north door, the short route). The memory rules must differ after the drift and
GLOVE must alert at it; MiniGrid's four no-op actions are left out by ``actions``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("minigrid")

from glove_ros.benchmarks import gym as gymb  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[1] / "bench" / "scenarios" / \
    "gym_minigrid_doors.yaml"
METHODS = ["GLOVE-async", "LatestOverwrite", "RecentK", "PageHinkleyReset", "Static"]


@pytest.fixture(scope="module")
def doc():
    sc = gymb.load_scenario(SCENARIO)
    assert sc.actions == (0, 1, 2)
    return gymb.run_benchmark(sc, METHODS)


def test_rules_differ_after_the_drift_and_glove_alerts_at_it(doc):
    ph = {m: r["phases"] for m, r in doc["methods"].items()}
    assert [p["phase"] for p in ph["Static"]] == ["source", "north_closed", "north_open"]
    for m in METHODS:  # the source world: every rule finds the goal, nothing to alert on
        assert ph[m][0]["successes"] == 20 and ph[m][0]["alerts"] == 0, m
        # what the source phase taught is still known when the drift begins
        assert ph[m][1]["known_states_at_start"] == ph[m][0]["known_states"] > 6, m
    glove = ph["GLOVE-async"][1]
    # the first bump into the closed door (two moves from the start) raises the alert
    assert glove["alerts"] >= 1 and glove["first_alert_step"] <= 5
    # Static keeps walking into the closed door; a rule that updates finds the south door
    assert ph["Static"][1]["successes"] == 0
    assert ph["LatestOverwrite"][1]["successes"] >= 10
    assert glove["successes"] >= 10
    outcomes = {(p[1]["successes"], p[1]["steps"]) for p in ph.values()}
    assert len(outcomes) >= 4, outcomes
    assert all(r["decision_ms"]["mean"] > 0 for r in doc["methods"].values())


def test_without_the_action_subset_the_no_ops_cost_steps_after_the_drift(doc):
    """All seven MiniGrid actions: exploring pickup, drop, toggle and done at every new pose
    costs the detour search steps (and episodes) that the subset does not spend."""
    sc = dataclasses.replace(gymb.load_scenario(SCENARIO), actions=None)
    seven = gymb.run_method(sc, "LatestOverwrite")["phases"][1]
    three = doc["methods"]["LatestOverwrite"]["phases"][1]
    assert seven["steps"] > three["steps"]
    assert seven["successes"] < three["successes"]
