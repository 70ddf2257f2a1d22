"""ClockMap: a wall-clock span ("the last 5 minutes") mapped onto the node's clock."""
from __future__ import annotations

import math

import pytest

from glove_ros.core.ops.clock import ClockMap


def _sim(rate: float, start_wall: float = 1000.0, n: int = 20) -> ClockMap:
    cm = ClockMap(min_gap_s=0.5)
    for i in range(n):
        cm.sample(start_wall + i, 50.0 + rate * i)
    return cm


def test_a_sim_clock_at_20x_maps_five_wall_minutes_to_100_sim_minutes():
    cm = _sim(20.0, n=400)  # 400 wall seconds sampled, node clock 20x
    wall_now = 1000.0 + 399
    node_now = cm.node_time_at(wall_now)
    assert node_now == pytest.approx(50.0 + 20.0 * 399)
    assert node_now - cm.node_time_ago(wall_now, 300.0) == pytest.approx(6000.0)
    assert cm.rate() == pytest.approx(20.0)


def test_before_the_first_sample_it_extrapolates_at_the_rate_seen_and_never_below_zero():
    cm = _sim(20.0)
    assert cm.node_time_at(1000.0 - 2.0) == pytest.approx(50.0 - 40.0)
    assert cm.node_time_at(1000.0 - 1e6) == 0.0


def test_a_real_robot_clock_maps_one_to_one():
    cm = _sim(1.0)
    assert cm.node_time_ago(1019.0, 10.0) == pytest.approx(cm.node_time_at(1019.0) - 10.0)


def test_interpolates_between_samples():
    cm = ClockMap(min_gap_s=0.0)
    cm.sample(0.0, 0.0)
    cm.sample(10.0, 100.0)
    cm.sample(20.0, 110.0)
    assert cm.node_time_at(5.0) == pytest.approx(50.0)
    assert cm.node_time_at(15.0) == pytest.approx(105.0)


def test_samples_closer_than_the_gap_are_skipped_and_a_clock_reset_starts_over():
    cm = ClockMap(min_gap_s=0.5)
    cm.sample(0.0, 0.0)
    cm.sample(0.1, 2.0)  # too close: skipped
    assert len(cm) == 1
    cm.sample(1.0, 20.0)
    assert len(cm) == 2
    cm.sample(2.0, 3.0)  # node clock went back (a replayed bag): new series
    assert len(cm) == 1 and cm.rate() == 1.0


def test_bad_input_is_refused_and_nothing_is_recorded():
    cm = ClockMap()
    with pytest.raises(ValueError, match="no samples"):
        cm.node_time_at(0.0)
    with pytest.raises(ValueError, match="finite"):
        cm.sample(math.nan, 1.0)
    assert len(cm) == 0
    cm.sample(0.0, 0.0)
    with pytest.raises(ValueError, match="duration"):
        cm.node_time_ago(1.0, -5.0)
    with pytest.raises(ValueError):
        ClockMap(keep=1)
