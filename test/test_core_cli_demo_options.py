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
    from glove_ros.benchmarks._jetrover_config import BenchConfig, phase_plan
    from glove_ros.benchmarks._jetrover_runner import ModeRunner
    from glove_ros.core.world.worldfile import load_world

    world = load_world(ROOT / "worlds" / "small.yaml")
    cfg = BenchConfig(episodes=6, seed=0, task_start="stay")
    static = bench.run_mode(world, "static", cfg)
    base = ModeRunner(world, "RecentK", cfg, params={"k": 1}).run()
    base["label"] = "RecentK k=1"
    phases = phase_plan(world, 6)
    rows = [{"episode": r["episode"], "success": r["success"], "steps": r["steps"],
             "alerts": 0, "suppressed": 0} for r in static["episodes"]]
    summary = demo._summarise(rows, phases, {}, static, base)
    drift = [p for p in summary if "episodes" in p]
    assert all(p["baseline_success_rate"] is not None for p in drift)
    text = demo._table(summary)
    assert "baseline success" in text and "baseline: RecentK k=1" in text
    demo._plot(rows, static, world, tmp_path / "demo.png", [], base)
    assert (tmp_path / "demo.png").stat().st_size > 0


def test_figure_leads_with_steps_after_the_drift_and_stale_goals_not_success():
    """The success panel is flat at 1.0 for every memory (a robot that keeps searching
    finds the block): the figure leads with the panels where the memory shows."""
    from glove_ros.benchmarks import jetrover as bench
    from glove_ros.benchmarks._jetrover_config import BenchConfig
    from glove_ros.core.world.worldfile import load_world

    world = load_world(ROOT / "worlds" / "small.yaml")  # blocks swap at episode 3
    cfg = BenchConfig(episodes=8, seed=0, task_start="stay")
    static = bench.run_mode(world, "static", cfg)
    rows = [{"episode": r["episode"], "success": r["success"], "steps": r["steps"]}
            for r in static["episodes"]]  # the ROS graph's rows: no stale_goal field
    fig = demo._figure(rows, static, world, [{"detected_in_episode": 4}])
    steps, stale, success = fig.axes
    assert steps.get_title().startswith("robot steps since the drift (episode 3)")
    assert stale.get_title().startswith("stale first goals")
    assert success.get_title().startswith("success")
    width = [a.get_position().width for a in fig.axes]
    assert width[0] > width[1] > width[2]  # first and largest: where memory matters
    # the same data: steps counted from the drift episode on, stale goals of static memory
    glove_line = steps.get_lines()[0]
    assert list(glove_line.get_xdata()) == [r["episode"] for r in rows if r["episode"] >= 3]
    total = sum(r["steps"] for r in rows if r["episode"] >= 3)
    assert glove_line.get_ydata()[-1] == total
    [static_stale] = [ln for ln in stale.get_lines() if ln.get_label() == "static memory"]
    assert static_stale.get_ydata()[-1] == sum(r["stale_goal"] for r in static["episodes"])
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_demo_output_folder_is_absolute_whatever_the_current_folder(tmp_path, monkeypatch):
    from glove_ros import paths

    monkeypatch.chdir(tmp_path)
    out = Path(cli.build_parser().parse_args(["demo"]).out)
    assert out.is_absolute() and out == paths.data_dir() / "demo"
    assert out == ROOT / "build" / "demo"  # run from this checkout: its build/
    monkeypatch.setattr(paths, "_SOURCE_ROOT", tmp_path / "site-packages")  # an install
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert demo.default_out() == tmp_path / "data" / "glove_ros" / "demo"


def test_demo_progress_is_a_summary_line_off_a_terminal(capsys):
    bar = demo._progress(3)  # stderr is captured here: not a terminal
    for _ in range(3):
        bar.update(1)
    demo._say("  episode   0 ...")
    bar.close()
    out = capsys.readouterr()
    assert "\r" not in out.err and "\r" not in out.out
    assert out.out == "  episode   0 ...\n"
    assert out.err.startswith("episodes: 3/3 tasks in ") and out.err.count("\n") == 1
    assert cli.build_parser().parse_args(["demo", "--progress"]).progress is True
    assert cli.build_parser().parse_args(["demo", "--no-progress"]).progress is False
    assert cli.build_parser().parse_args(["demo"]).progress is None
