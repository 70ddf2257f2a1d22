"""Pose continuity: a robot standing still under AMCL stays located; only a stamp running
backwards or a re-localisation is a restart (issue 31; Nav2 AMCL publishes amcl_pose only
after update_min_d 0.25 m / update_min_a 0.2 rad of motion)."""

from __future__ import annotations

import math

import pytest

from glove_ros.core.world.pose_stream import PoseStream


def test_amcl_silence_while_standing_still_keeps_the_pose_and_is_no_restart():
    s = PoseStream("amcl", stale_after=2.0)
    assert s.current(0.0) is None  # never had a pose: unknown, not assumed
    assert s.update(10.0, 0.0, 1.0, 2.0, 0.5).accepted
    # 10 minutes of silence (standing still): still located, same epoch
    assert s.current(600.0) == (1.0, 2.0, 0.5)
    up = s.update(610.0, 600.0, 1.3, 2.0, 0.5)  # it moved 0.3 m: AMCL speaks again
    assert up.accepted and not up.restarted and s.epoch == 0
    assert s.current(600.1) == (1.3, 2.0, 0.5)


def test_continuous_source_goes_unknown_after_silence_but_does_not_restart():
    s = PoseStream("odom", stale_after=2.0)
    s.update(1.0, 0.0, 0.0, 0.0, 0.0)
    assert s.current(1.9) is not None
    assert s.current(2.1) is None  # the driver stopped: position unknown
    up = s.update(5.0, 4.0, 0.0, 0.0, 0.0)  # it speaks again with a later stamp
    assert not up.restarted and s.epoch == 0 and s.current(4.0) is not None


def test_stamp_regression_is_a_restart():
    s = PoseStream("pose")
    s.update(3658.0, 0.0, 1.0, 1.0, 0.0)
    up = s.update(30.0, 0.1, 0.0, 0.0, 0.0)  # simulated clock restarted
    assert up.restarted and s.epoch == 1 and "backwards" in up.reason


def test_relocalisation_is_a_restart_and_voids_the_pose_until_the_source_speaks():
    s = PoseStream("amcl")
    s.update(1.0, 0.0, 1.0, 1.0, 0.0)
    s.relocalised()
    assert s.epoch == 1 and s.current(0.1) is None and s.last is None
    s.update(2.0, 0.2, 4.0, 4.0, 0.0)
    assert s.current(0.3) == (4.0, 4.0, 0.0) and s.epoch == 1


@pytest.mark.parametrize("bad", [(math.nan, 0.0, 0.0), (0.0, math.inf, 0.0), (0.0, 0.0, math.nan)])
def test_non_finite_pose_is_refused_and_keeps_the_last_good_one(bad):
    s = PoseStream("amcl")
    s.update(1.0, 0.0, 1.0, 2.0, 0.0)
    up = s.update(2.0, 1.0, *bad)
    assert not up.accepted and "non-finite" in up.reason
    assert s.current(1.0) == (1.0, 2.0, 0.0) and s.epoch == 0


def test_stale_after_must_be_positive():
    with pytest.raises(ValueError, match="stale_after"):
        PoseStream("odom", stale_after=0.0)


def test_a_late_copy_is_ignored_not_a_restart():
    """Two readers of amcl_pose (plain and latched) on a multi-threaded executor can hand
    the planner an older copy after a newer pose: that is not a driver restart (a false
    restart dropped transitions in `bench robot`)."""
    s = PoseStream("amcl", reorder_s=1.0)
    s.update(100.2, 0.0, 1.0, 0.0, 0.0)
    up = s.update(100.0, 0.1, 0.8, 0.0, 0.0)
    assert not up.accepted and up.stale and not up.restarted and s.epoch == 0
    assert s.current(0.1) == (1.0, 0.0, 0.0)  # the newer pose stands
    assert s.update(3.0, 0.2, 0.0, 0.0, 0.0).restarted  # a big step back still is one


def test_after_gives_only_a_pose_stamped_since():
    s = PoseStream("pose")
    assert s.after(0.0) is None
    s.update(10.0, 100.0, 1.0, 2.0, 0.0)
    assert s.after(10.0) == (1.0, 2.0, 0.0)
    assert s.after(10.5) is None  # sent before the drive ended: from the way there
    s.update(11.0, 100.1, 2.0, 2.0, 0.0)
    assert s.after(10.5) == (2.0, 2.0, 0.0)


def test_pose_at_refuses_a_pose_from_the_way_there():
    from glove_ros.core.world.pose_stream import pose_at

    assert pose_at((2.0, 0.1, 0.0), (2.0, 0.0), 0.6) == ((2.0, 0.1, 0.0), pytest.approx(0.1))
    pose, off = pose_at((1.2, 0.0, 0.0), (2.0, 0.0), 0.6)
    assert pose is None and off == pytest.approx(0.8)
    assert pose_at(None, (2.0, 0.0), 0.6) == (None, 0.0)
    assert pose_at((5.0, 5.0, 1.0), None, 0.6) == ((5.0, 5.0, 1.0), 0.0)
