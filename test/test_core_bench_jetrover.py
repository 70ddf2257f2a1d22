"""Tests of glove-ros bench jetrover: the core loop without DDS on the shipped worlds.

Frames are rendered at 320x240 to keep the run short; detection is the real colour
detector on real pixels.
"""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from glove_ros.benchmarks import jetrover
from glove_ros.benchmarks.jetrover import (
    BenchConfig,
    ModeRunner,
    default_episodes,
    format_table,
    make_tasks,
    phase_plan,
    result_stem,
    run_benchmark,
    run_mode,
)
from glove_ros.core.world import World, load_world, worlds_dir

FAST = {"frame_size": (320, 240)}


@pytest.fixture(scope="module")
def maze_doc():
    return run_benchmark("jetrover_maze", config=BenchConfig(**FAST))


@pytest.fixture(scope="module")
def nuisance_doc():
    return run_benchmark("nuisance_only", config=BenchConfig(**FAST))


def _phase(doc, mode, index):
    return doc["modes"][mode]["phases"][index]


def test_plan_helpers_are_deterministic():
    w = load_world("jetrover_maze")
    assert default_episodes(w) == 40
    assert phase_plan(w, 40) == [{"name": "before drift", "start": 0, "end": 20},
                                 {"name": "swap_blocks@20", "start": 20, "end": 40}]
    assert phase_plan(load_world("nuisance_only"), 30) == [{"name": "all", "start": 0,
                                                             "end": 30}]
    assert make_tasks(w, 40, 0) == make_tasks(w, 40, 0)
    assert {t.color for t in make_tasks(w, 40, 0)} <= set(w.colors)
    assert make_tasks(w, 40, 0) != make_tasks(w, 40, 1)
    assert result_stem(w) == "jetrover_maze"
    assert result_stem(load_world("nuisance_only")) == "jetrover_nuisance_only"


def test_config_validation():
    for bad in ({"episodes": -1}, {"max_steps": 0}, {"look_frames": 0},
                {"task_start": "moon"}, {"verifier": {"mode": "sync"}},
                {"verifier": {"p_th": 0}}, {"verifier": {"nonsense": 1}}):
        with pytest.raises(ValueError):
            BenchConfig(**bad).validate()
    with pytest.raises(ValueError):
        ModeRunner(load_world("small"), "sometimes")


def test_nuisance_only_world_raises_no_alarm(nuisance_doc):
    for mode, r in nuisance_doc["modes"].items():
        t = r["totals"]
        assert t["episodes"] == 30 and t["successes"] == 30, mode
        assert t["alerts"] == 0 and t["false_alarms"] == 0, mode
        assert t["suppressed"] == 0 and t["probes"] == 0 and t["probe_steps"] == 0, mode
        assert r["alerts"] == []


def test_maze_swap_glove_realigns_and_static_keeps_driving_back(maze_doc):
    before = {m: _phase(maze_doc, m, 0) for m in jetrover.MODES}
    after = {m: _phase(maze_doc, m, 1) for m in jetrover.MODES}
    # identical before the drift: same tasks, same memory, nothing to verify
    assert len({(p["steps_per_task"], p["successes"]) for p in before.values()}) == 1
    assert all(p["alerts"] == 0 and p["stale_goals"] == 0 for p in before.values())
    for m in ("async", "sync"):
        # the swap is noticed at both places it touched, and nowhere else
        alerts = maze_doc["modes"][m]["alerts"]
        assert sorted(a["state_key"] for a in alerts) == ["kitchen", "office"]
        assert all(a["caused_by_drift"] and a["action"] == "look" for a in alerts)
        assert after[m]["false_alarms"] == 0 and after[m]["suppressed"] > 0
        assert after[m]["successes"] == after[m]["episodes"] == 20
        # GLOVE drives to the old place only until p_th surprises fire the alert
        assert after[m]["stale_goals"] <= 3
    assert after["static"]["alerts"] == 0 and after["static"]["suppressed"] == 0
    assert after["static"]["stale_goals"] >= after["async"]["stale_goals"] + 4
    assert after["static"]["steps_per_task"] > after["async"]["steps_per_task"] + 0.5
    assert maze_doc["ratios"]["steps_static_over_async"] > 1.1
    # sync mode re-looks (alpha = 1 per alert) and pays for it in steps
    assert after["sync"]["probes"] == 2 and after["sync"]["probe_steps"] == 2
    assert after["sync"]["steps_per_task"] == pytest.approx(
        after["async"]["steps_per_task"] + 2 / 20)


def test_false_alarms_are_counted_when_the_verifier_is_too_eager():
    # one frame per look, half the blocks missed, and a verifier that alarms on a single
    # surprise: the misses must show up as false alarms (the counter works)
    data = yaml.safe_load((worlds_dir() / "nuisance_only.yaml").read_text())
    data["events"].append({"episode": 0, "until_episode": 100, "type": "miss_detections",
                           "rate": 0.5})
    world = World.from_dict(data)
    cfg = BenchConfig(episodes=12, look_frames=1, verifier={"p_th": 1}, **FAST)
    r = ModeRunner(world, "async", cfg).run()
    assert r["totals"]["alerts"] > 0
    assert r["totals"]["false_alarms"] == r["totals"]["alerts"]
    assert not any(a["caused_by_drift"] for a in r["alerts"])


def test_static_memory_deadlocks_behind_a_reopened_door_and_glove_does_not():
    # small world, hall-room_a closed from the start, opened at episode 4; red lives behind
    data = yaml.safe_load((worlds_dir() / "small.yaml").read_text())
    data["edges"] = [["dock", "hall"], {"a": "hall", "b": "room_a", "blocked": True},
                     ["hall", "room_b"]]
    data["events"] = [{"episode": 4, "type": "open_edge", "edge": ["hall", "room_a"]}]
    world = World.from_dict(data)
    cfg = BenchConfig(episodes=12, task_start="dock", verifier={"stale_negative_after": 12},
                      **FAST)
    doc = run_benchmark(world, config=cfg)
    after = {m: doc["modes"][m]["phases"][1] for m in jetrover.MODES}
    reds = [e for e in doc["modes"]["static"]["episodes"][4:] if e["color"] == "red"]
    assert len(reds) >= 3
    # static memory: "blocked" for ever, never re-tried: every red task fails
    assert not any(e["success"] or e["blocked"] for e in reds)
    assert after["static"]["successes"] == after["static"]["episodes"] - len(reds)
    for m in ("async", "sync"):
        # GLOVE: stuck -> re-verify the stale negative -> the door is open -> success
        assert after[m]["successes"] == after[m]["episodes"] == 8, m
        assert after[m]["reverify_calls"] >= 1 and after[m]["false_alarms"] == 0
    # sync re-drives the corridor itself (a probe), charged as steps
    assert after["sync"]["probes"] == 1 and after["sync"]["probe_steps"] == 2


def test_run_mode_static_for_the_demo():
    r = run_mode("small", "static", BenchConfig(episodes=6, **FAST))
    assert r["mode"] == "static" and r["totals"]["episodes"] == 6
    assert [p["name"] for p in r["phases"]] == ["before drift", "swap_blocks@3"]
    assert "verifier" not in r and len(r["episodes"]) == 6


def test_table_and_json_are_complete(maze_doc):
    text = format_table(maze_doc)
    for word in ("async", "sync", "static", "false alarms", "stale goals", "swap_blocks@20"):
        assert word in text
    json.dumps(maze_doc)
    assert maze_doc["config"]["planner"] == "greedy"
    assert maze_doc["verifier"]["p_th"] >= 2


def test_cli_writes_json_and_png(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    jetrover.add_arguments(parser)
    args = parser.parse_args(["--scenario", "small", "--episodes", "5", "--mode", "async",
                              "--out", str(tmp_path), "--verifier", "p_th=2"])
    assert jetrover.main(args) == 0
    out = capsys.readouterr().out
    assert "async" in out
    assert not any(ln.lstrip().startswith("static") for ln in out.splitlines())
    doc = json.loads((tmp_path / "jetrover_small.json").read_text())
    assert list(doc["modes"]) == ["async"] and doc["verifier"]["p_th"] == 2
    assert (tmp_path / "jetrover_small.png").stat().st_size > 5000
    bad = parser.parse_args(["--scenario", "no_such_world", "--out", str(tmp_path)])
    assert jetrover.main(bad) == 2
    bad = parser.parse_args(["--scenario", "small", "--verifier", "p_th", "--out",
                             str(tmp_path)])
    assert jetrover.main(bad) == 2
