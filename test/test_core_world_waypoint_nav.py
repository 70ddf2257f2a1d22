"""NavTracker: reached / blocked / timeout judgement from poses alone; nearest waypoint."""

from __future__ import annotations

import math

import pytest

from glove_ros.core.world.waypoint_nav import NavConfig, NavTracker, nearest_waypoint
from glove_ros.core.world.worldfile import load_world

CFG = NavConfig(xy_tolerance=0.25, stall_timeout=2.0, stall_distance=0.1, timeout=30.0)


def test_defaults_and_validation():
    c = NavConfig().validate()
    assert (c.xy_tolerance, c.stall_timeout, c.stall_distance, c.timeout) == (
        0.25, 20.0, 0.1, 300.0)
    for bad in ({"xy_tolerance": 0}, {"stall_timeout": -1}, {"stall_distance": math.nan},
                {"timeout": math.inf}, {"stall_timeout": 50.0, "timeout": 10.0}):
        with pytest.raises(ValueError, match="nav\\."):
            NavConfig(**bad).validate()
    assert NavConfig.from_dict({"nav.timeout": 5, "nav.stall_timeout": 1}).timeout == 5.0
    with pytest.raises(ValueError, match="unknown"):
        NavConfig.from_dict({"nav.speed": 1.0})
    with pytest.raises(ValueError):
        NavTracker((0, 0), NavConfig(timeout=-1), 0.0)


def test_reached_when_within_tolerance():
    tr = NavTracker((2.0, 0.0), CFG, start_time=100.0)
    assert tr.distance_remaining is None
    t = 100.0
    for x in (0.0, 0.5, 1.0, 1.5):
        t += 0.5
        assert tr.update(x, 0.0, t) == "driving"
        assert tr.distance_remaining == pytest.approx(2.0 - x)
    assert tr.update(1.8, 0.1, t + 0.5) == "reached"
    assert tr.done
    # sticky: later poses or time do not change a terminal status
    assert tr.update(0.0, 0.0, t + 1000) == "reached"
    assert tr.poll(t + 1000) == "reached"


def test_blocked_when_no_progress_within_stall_timeout():
    tr = NavTracker((5.0, 0.0), CFG, start_time=0.0)
    assert tr.update(0.0, 0.0, 0.0) == "driving"
    assert tr.update(0.05, 0.0, 1.0) == "driving"   # jitter below stall_distance
    assert tr.update(0.02, 0.03, 1.9) == "driving"
    assert tr.update(0.04, 0.0, 2.0) == "blocked"   # 2 s without 0.1 m of movement
    assert tr.done and tr.poll(100.0) == "blocked"


def test_movement_resets_the_stall_clock_even_away_from_goal():
    tr = NavTracker((5.0, 0.0), CFG, start_time=0.0)
    t, x = 0.0, 0.0
    for _ in range(10):  # a Nav2 detour: moving away from the goal is still progress
        t += 1.5
        x -= 0.15
        assert tr.update(x, 0.0, t) == "driving"
    assert tr.update(x + 0.05, 0.0, t + 1.9) == "driving"
    assert tr.update(x + 0.05, 0.0, t + 2.0) == "blocked"


def test_silent_pose_source_counts_as_stall():
    tr = NavTracker((1.0, 0.0), CFG, start_time=10.0)
    assert tr.poll(11.9) == "driving"
    assert tr.poll(12.0) == "blocked"
    assert tr.distance_remaining is None
    tr2 = NavTracker((1.0, 0.0), CFG, start_time=10.0)
    tr2.update(0.0, 0.0, 11.0)
    assert tr2.poll(12.5) == "driving"  # the stall clock restarts at the first pose
    assert tr2.poll(13.0) == "blocked"


def test_timeout_while_still_moving():
    cfg = NavConfig(xy_tolerance=0.25, stall_timeout=2.0, stall_distance=0.1, timeout=5.0)
    tr = NavTracker((100.0, 0.0), cfg, start_time=0.0)
    t, x = 0.0, 0.0
    status = "driving"
    while status == "driving":
        t += 0.5
        x += 0.2
        status = tr.update(x, 0.0, t)
    assert status == "timeout" and t == pytest.approx(5.0)
    assert tr.elapsed(t) == pytest.approx(5.0)


def test_nearest_waypoint_on_small_world():
    world = load_world("small")
    assert nearest_waypoint(world, 0.05, 0.95) == "hall"
    assert nearest_waypoint(world, 0.9, 1.1, max_dist=0.25) == "room_b"
    assert nearest_waypoint(world, 0.5, 1.0, max_dist=0.25) is None   # between waypoints
    assert nearest_waypoint(world, 10.0, 10.0) == "room_b"            # no limit: nearest


def test_nav2_result_maps_to_outcomes():
    from glove_ros.core.world.waypoint_nav import (
        GOAL_ABORTED,
        GOAL_CANCELED,
        GOAL_SUCCEEDED,
        outcome_from_nav2,
    )

    assert outcome_from_nav2(GOAL_SUCCEEDED, False, False) == "reached"
    assert outcome_from_nav2(GOAL_ABORTED, False, False) == "blocked"  # Nav2 gave up
    assert outcome_from_nav2(GOAL_CANCELED, True, False) == "cancelled"
    assert outcome_from_nav2(GOAL_CANCELED, False, True) == "timeout"  # our nav.timeout
    assert outcome_from_nav2(GOAL_SUCCEEDED, True, False) == "reached"  # arrived first


def test_nav2_error_codes_only_make_world_facts_blocked():
    """Issue 31: a TF timeout or a controller failure is not a blocked corridor (Jazzy's
    NavigateToPose carries the failing node's error code; Humble's none)."""
    from glove_ros.core.world.waypoint_nav import GOAL_ABORTED, outcome_from_nav2

    assert outcome_from_nav2(GOAL_ABORTED, False, False, 208) == "blocked"  # NO_VALID_PATH
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 206) == "blocked"  # GOAL_OCCUPIED
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 202) == "localisation_lost"  # TF
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 9002) == "localisation_lost"
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 105) == "nav_failed"  # no progress
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 9003) == "nav_failed"  # TIMEOUT
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 9000) == "blocked"  # no cause named
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 204) == "unreachable"  # off the map
    assert outcome_from_nav2(GOAL_ABORTED, False, False, 0) == "blocked"  # Humble: no code


def test_a_path_off_the_corridor_is_a_detour_not_the_corridor_reached():
    from glove_ros.core.world.waypoint_nav import judge_arrival, route_deviation

    a, b = (0.0, 0.0), (4.0, 0.0)
    straight = [(x * 0.5, 0.05) for x in range(9)]
    around = [(0.0, 0.0), (0.0, 3.0), (4.0, 3.0), (4.0, 0.0)]  # the way round a closed door
    assert route_deviation(straight, a, b) == pytest.approx(0.05)
    assert judge_arrival(straight, a, b, 1.0) == "reached"
    assert route_deviation(around, a, b) == pytest.approx(3.0)
    assert judge_arrival(around, a, b, 1.0) == "detour"
    assert judge_arrival([], a, b, 1.0) == "reached"  # no pose seen: nothing contradicts it


def test_corridors_driven_are_read_from_the_path_not_from_the_goal():
    """Nav2 may pass other waypoints on its way; only corridors the path evidently followed
    are reported (issue 31: memory learns about a corridor only when the robot drove it)."""
    from glove_ros.core.world.waypoint_nav import corridors_driven

    wps = {"kitchen": (0.0, 4.0), "dock": (0.0, 0.0), "hall": (4.0, 0.0), "lab": (4.0, 4.0)}
    corridors = {("dock", "kitchen"), ("dock", "hall"), ("hall", "lab")}
    via_dock = [(0.0, 4.0 - 0.5 * k) for k in range(9)] + [(0.5 * k, 0.1) for k in range(9)]
    assert corridors_driven(via_dock, "kitchen", wps, corridors, 0.5, 1.0) == [
        ("kitchen", "dock"), ("dock", "hall")]
    # straight across the room from kitchen to hall: no corridor joins them
    across = [(0.5 * k, 4.0 - 0.5 * k) for k in range(9)]
    assert corridors_driven(across, "kitchen", wps, corridors, 0.5, 1.0) == []
    # a wide swerve on the dock-hall corridor: not evidence of that corridor
    swerve = [(0.0, 0.0), (2.0, 2.5), (4.0, 0.0)]
    assert corridors_driven(swerve, "dock", wps, corridors, 0.5, 1.0) == []
    assert corridors_driven([], "", wps, corridors, 0.5, 1.0) == []
