"""``glove-ros bench robot`` smoke run: the four scenarios only (``--tasks 4``), a short stand.

The full run (20 tasks, 30 s standing still) is bench/results/robot.json. What must hold here:
the command starts the stock-JetRover emulation and the ``jetrover`` graph (test/stock_rig.py),
runs the stand-still, cancel, detour and dock-by-voltage scenarios, exits 0 and writes its
JSON with every measure issue 31 names; from an install without the source checkout (no
emulator) it exits 2 and says why.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("success_rate", "tasks", "tasks_ok", "transitions_recorded", "corridors_driven",
           "transitions_missing", "transitions_dropped", "transitions_dropped_stationary",
           "driver_restarts", "wrong_corridor_outcomes", "cancel_latency_max_s", "docks",
           "consolidations")


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_robot_smoke(tmp_path):
    pytest.importorskip("rclpy")
    out = subprocess.run(
        [sys.executable, "-m", "glove_ros.cli", "bench", "robot", "--tasks", "4", "--still",
         "2", "--seed", "3", "--out", str(tmp_path), "--json", "--no-progress"],
        capture_output=True, text=True, timeout=540, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    doc = json.loads((tmp_path / "robot.json").read_text())
    assert json.loads(out.stdout) == doc  # --json prints the document written
    assert (tmp_path / "robot.png").is_file()
    assert doc["benchmark"] == "robot"
    s = doc["settings"]
    assert (s["tasks"], s["seed"], s["still_s"]) == (4, 3, 2.0)
    assert sorted(s["plan"]) == ["cancel", "detour", "dock_voltage", "still"]
    m = doc["metrics"]
    missing = [k for k in METRICS if k not in m]
    assert not missing, f"robot.json lacks {missing}"
    assert m["tasks"] == 4 and len([t for t in doc["tasks"] if t["role"] == "plan"]) == 4
    assert m["corridors_driven"] > 0, doc["tasks"]
    assert m["cancel_latency_max_s"] is not None, m["cancels"]
    assert m["docks"], "the dock-by-voltage scenario left no dock"
    assert set(doc["verdict"]) == {"met", "why"}


def test_bench_robot_without_checkout_exits_2(monkeypatch, capsys):
    from glove_ros.benchmarks import robot

    monkeypatch.setattr(robot, "_checkout", lambda: None)
    parser = argparse.ArgumentParser()
    robot.add_arguments(parser)
    assert robot.main(parser.parse_args([])) == 2
    assert "source checkout" in capsys.readouterr().err
