"""``glove-ros demo`` options and its database guard, without ROS."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from glove_ros.cli import demo
from glove_ros.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("value", ["0", "-3"])
def test_episodes_below_one_is_an_error_not_automatic(value, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["demo", "--episodes", value])
    assert e.value.code == 2
    assert "at least 1" in capsys.readouterr().err


def test_episodes_default_is_automatic():
    args = cli.build_parser().parse_args(["demo"])
    assert args.episodes is None


def test_demo_refuses_to_delete_a_deployment_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GLOVE_ROS_ROOT", str(ROOT))
    (tmp_path / "build" / "demo").mkdir(parents=True)
    shared = tmp_path / "build" / "demo" / "memory.db"  # config/sim.yaml's db_path, relative
    shared.write_bytes(b"robot memory")
    assert shared.resolve() in demo.deployment_databases()
    with pytest.raises(ValueError, match="config/sim.yaml"):
        demo._fresh_database(Path("build/demo/memory.db"))
    assert shared.read_bytes() == b"robot memory"
    own = tmp_path / "build" / "demo" / demo.DEMO_DB
    for suffix in ("", "-wal"):
        Path(str(own) + suffix).write_bytes(b"old demo")
    demo._fresh_database(own)
    assert not own.exists() and not os.path.exists(str(own) + "-wal")
    assert shared.exists()


def test_detection_moment_is_the_first_alert_after_each_drift_event():
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    world = load_world(resolve_world("corridor_blocked"))  # block at 5, re-open at 15
    rows = [{"episode": i, "alerts": int(i in (2, 7, 8))} for i in range(25)]
    found = demo.detection_moments(world, rows)
    assert [(d["episode"], d["detected_in_episode"], d["episodes_after"]) for d in found] == [
        (5, 7, 2), (15, None, None)]  # the alert at 2 precedes any drift: not a detection
    assert "not detected" in demo._detections_text(found)


def test_baseline_option_parses_and_rejects_what_the_rule_cannot_take(capsys):
    args = cli.build_parser().parse_args(["demo"])
    assert args.baseline == ("SlidingWindow", {"window": 100})  # the suite's best-tuned
    args = cli.build_parser().parse_args(["demo", "--baseline", "RecentK:k=1"])
    assert args.baseline == ("RecentK", {"k": 1})
    assert cli.build_parser().parse_args(["demo", "--baseline", "none"]).baseline is None
    for bad, said in (("Nope", "unknown rule"), ("RecentK:k=x", "param=number"),
                      ("RecentK:q=1", "does not take q")):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["demo", "--baseline", bad])
        assert said in capsys.readouterr().err


def test_table_and_plot_show_the_baseline_beside_glove_and_static(tmp_path):
    from glove_ros.benchmarks import jetrover as bench
    from glove_ros.core.world.worldfile import load_world

    world = load_world(ROOT / "worlds" / "small.yaml")
    cfg = bench.BenchConfig(episodes=6, seed=0, task_start="stay")
    static = bench.run_mode(world, "static", cfg)
    base = bench.ModeRunner(world, "RecentK", cfg, params={"k": 1}).run()
    base["label"] = "RecentK k=1"
    phases = bench.phase_plan(world, 6)
    rows = [{"episode": r["episode"], "success": r["success"], "steps": r["steps"],
             "alerts": 0, "suppressed": 0} for r in static["episodes"]]
    summary = demo._summarise(rows, phases, {}, static, base)
    drift = [p for p in summary if "episodes" in p]
    assert all(p["baseline_success_rate"] is not None for p in drift)
    text = demo._table(summary)
    assert "baseline success" in text and "baseline: RecentK k=1" in text
    demo._plot(rows, static, world, tmp_path / "demo.png", [], base)
    assert (tmp_path / "demo.png").stat().st_size > 0
