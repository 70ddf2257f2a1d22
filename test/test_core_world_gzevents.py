"""Drift events at run time in Gazebo: the gz service requests and their schedule, with a
fake command runner (no Gazebo here)."""

from __future__ import annotations

import math
import os
import stat
import sys

import pytest

from glove_ros.core.world.gzevents import (
    GzEventScheduler,
    apply_requests,
    proto_string,
    run_command,
)
from glove_ros.core.world.gzrobot import FLAVOURS
from glove_ros.core.world.sdf import world_to_sdf
from glove_ros.core.world.worldfile import World, load_world

FORTRESS, HARMONIC = FLAVOURS["fortress"], FLAVOURS["harmonic"]


def _timed_world() -> World:
    """corridor_blocked with timed events, listed out of time order on purpose."""
    d = load_world("corridor_blocked").to_dict()
    d["events"] = [
        {"time": 30.0, "type": "open_edge", "edge": ["hall", "goal"]},
        {"time": 10.0, "type": "block_edge", "edge": ["hall", "goal"]},
        {"time": 20.0, "type": "move_block", "block": "green_block", "waypoint": "far"},
        {"time": 12.0, "type": "new_obstacle", "id": "crate", "waypoint": "back",
         "until_time": 25.0},
        {"time": 15.0, "type": "miss_detections", "rate": 0.5},
    ]
    return World.from_dict(d)


class FakeRunner:
    """Records each command line; answers like ``gz service`` (data: true) or fails."""

    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        service = argv[argv.index("-s") + 1]
        if any(f in service for f in self.fail):
            return False, "Service call timed out"
        return True, "data: true"


def test_requests_are_gz_service_command_lines_per_flavour():
    sched = GzEventScheduler(_timed_world())
    (step,) = sched.advance(time=10.0)
    (req,) = step.requests
    assert req.service == "/world/corridor_blocked/create"
    fortress = req.command(FORTRESS, timeout_s=2.0)
    assert fortress[:4] == ["ign", "service", "-s", "/world/corridor_blocked/create"]
    assert fortress[fortress.index("--reqtype") + 1] == "ignition.msgs.EntityFactory"
    assert fortress[fortress.index("--reptype") + 1] == "ignition.msgs.Boolean"
    assert fortress[fortress.index("--timeout") + 1] == "2000"
    harmonic = req.command(HARMONIC)
    assert harmonic[0] == "gz" and harmonic[harmonic.index("--reqtype") + 1] == \
        "gz.msgs.EntityFactory"
    text = harmonic[harmonic.index("--req") + 1]
    assert text.startswith('sdf: "<?xml') and text.endswith("allow_renaming: false")
    assert '\\"barrier_goal_hall\\"' in text and "\n" not in text  # escaped, one line


def test_request_texts_for_pose_remove_and_create():
    w = _timed_world()
    sched = GzEventScheduler(w)
    steps = sched.advance(time=31.0)
    by_what = {r.what: r for s in steps for r in s.requests}
    pose = by_what["set_pose block_green_block"]
    assert pose.service == "/world/corridor_blocked/set_pose" and pose.reqtype == "Pose"
    far = w.waypoint("far")
    # the block 0.6 m in front of 'far' (x 2, y 0, yaw 0), half its size above the floor
    assert pose.request == ('name: "block_green_block" position { x: 2.6 y: 0 z: 0.025 } '
                            "orientation { x: 0 y: 0 z: 0 w: 1 }")
    assert far.yaw == 0.0
    remove = by_what["remove barrier_goal_hall"]
    assert remove.service == "/world/corridor_blocked/remove" and remove.reqtype == "Entity"
    assert remove.request == 'name: "barrier_goal_hall" type: MODEL'
    assert by_what["create obstacle_crate"].reqtype == "EntityFactory"
    assert by_what["remove obstacle_crate"].request == 'name: "obstacle_crate" type: MODEL'


def test_events_fire_once_in_time_order_at_their_sim_time():
    sched = GzEventScheduler(_timed_world())
    assert sched.advance(time=9.99) == []
    done = []
    for t in (10.0, 10.5, 12.0, 14.0, 16.0, 20.0, 26.0, 29.0, 30.0, 100.0):
        for step in sched.advance(time=t):
            done.append((step.time, [e.type for e in step.events],
                         [r.what for r in step.requests]))
    # each step is stamped with its trigger time (the clock passed it by the next check)
    assert done == [
        (10.0, ["block_edge"], ["create barrier_goal_hall"]),
        (12.0, ["new_obstacle"], ["create obstacle_crate"]),
        (15.0, ["miss_detections"], []),  # fired, nothing to change in Gazebo
        (20.0, ["move_block"], ["set_pose block_green_block"]),
        (25.0, [], ["remove obstacle_crate"]),  # its window's end
        (30.0, ["open_edge"], ["remove barrier_goal_hall"]),
    ]
    assert sched.pending() == []
    assert sched.advance(time=200.0) == []  # nothing fires twice


def test_a_long_jump_still_visits_each_trigger_in_order():
    steps = GzEventScheduler(_timed_world()).advance(time=1000.0)
    assert [s.time for s in steps] == [10.0, 12.0, 15.0, 20.0, 25.0, 30.0]
    assert [r.what for s in steps for r in s.requests] == [
        "create barrier_goal_hall", "create obstacle_crate", "set_pose block_green_block",
        "remove obstacle_crate", "remove barrier_goal_hall"]
    assert steps[2].skipped and steps[2].skipped[0].type == "miss_detections"


def test_time_never_goes_back():
    sched = GzEventScheduler(_timed_world())
    sched.advance(time=11.0)
    assert sched.advance(time=5.0) == [] and sched.time == 11.0


def test_episode_events_fire_when_the_episode_is_announced():
    w = load_world("drift_demo")  # closes hall-goal at 5, re-opens at 15, moves green at 25
    sched = GzEventScheduler(w)
    assert sched.advance(episode=4) == []
    (s5,) = sched.advance(episode=5)
    assert [r.what for r in s5.requests] == ["create barrier_goal_hall"]
    assert sched.advance(episode=5) == []
    steps = sched.advance(episode=30)  # both later events at once, in file order
    assert [r.what for r in steps[0].requests] == ["remove barrier_goal_hall",
                                                   "set_pose block_green_block"]


def test_starting_episode_matches_the_generated_sdf():
    """A scheduler started at the SDF's episode does not redo what the SDF holds."""
    w = load_world("drift_demo")
    assert "barrier_goal_hall" in world_to_sdf(w, episode=7)
    sched = GzEventScheduler(w, episode=7)
    (step,) = sched.advance(episode=15)
    assert [r.what for r in step.requests] == ["remove barrier_goal_hall"]
    with pytest.raises(ValueError, match="episode must be >= 0"):
        GzEventScheduler(w, episode=-1)


def test_swap_moves_both_blocks_and_world_name_can_differ():
    w = load_world("jetrover_maze")  # red and blue swap at episode 20
    sched = GzEventScheduler(w, world_name="lab")
    sched.advance(episode=19)  # earlier events (a nudged block) out of the way
    steps = sched.advance(episode=20)
    poses = [r for s in steps for r in s.requests if r.reqtype == "Pose"]
    assert {r.what for r in poses} == {"set_pose block_red_block", "set_pose block_blue_block"}
    assert all(r.service == "/world/lab/set_pose" for r in poses)
    office = w.waypoint("office")
    red = next(r for r in poses if "red" in r.what).request
    x = float(red.split("x: ")[1].split()[0])
    y = float(red.split("y: ")[1].split()[0])
    assert math.dist((x, y), (office.x, office.y)) < 1.0  # red now at the office


def test_apply_runs_every_request_and_reports_failures_without_raising():
    steps = GzEventScheduler(_timed_world()).advance(time=1000.0)
    requests = [r for s in steps for r in s.requests]
    runner = FakeRunner(fail={"/remove"})
    outcomes = apply_requests(requests, HARMONIC, runner, timeout_s=1.0)
    assert len(runner.calls) == len(requests) == len(outcomes)
    assert all(c[0] == "gz" for c in runner.calls)
    assert [o.ok for o in outcomes] == [True, True, True, False, False]
    assert outcomes[-1].output == "Service call timed out"

    def broken(argv, timeout_s):
        raise RuntimeError("boom")

    (out,) = apply_requests(requests[:1], FORTRESS, broken)
    assert not out.ok and "boom" in out.output


def _script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_run_command_checks_exit_code_reply_timeout_and_missing_tool(tmp_path):
    ok = _script(tmp_path, "ok", "print('data: true')")
    assert run_command([ok, "service"], 5.0) == (True, "data: true")
    refused = _script(tmp_path, "refused", "print('data: false')")
    good, text = run_command([refused], 5.0)
    assert not good and "did not confirm" in text
    failing = _script(tmp_path, "failing", "import sys; print('bad req', file=sys.stderr); "
                      "sys.exit(3)")
    good, text = run_command([failing], 5.0)
    assert not good and text == "exit code 3: bad req"
    slow = _script(tmp_path, "slow", "import time; time.sleep(5)")
    good, text = run_command([slow], 0.3)
    assert not good and "no answer within 0.3 s" in text
    good, text = run_command([os.path.join(str(tmp_path), "no-such-gz"), "service"], 1.0)
    assert not good and "not found: is Gazebo installed" in text


def test_proto_string_escapes_quotes_backslashes_and_newlines():
    assert proto_string('a "b"\\c\nd') == '"a \\"b\\"\\\\c\\nd"'
