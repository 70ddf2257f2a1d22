"""``glove-ros demo`` end to end on the small world: the table counts every printed alert."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros


def _run_demo(args: list[str], cwd, timeout: float) -> subprocess.CompletedProcess:
    """The demo in its own session; on a timeout its whole process group (the demo and the
    graph it started) is killed, so a hung demo cannot disturb the tests after it."""
    proc = subprocess.Popen([sys.executable, "-u", "-m", "glove_ros.cli", "demo", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the demo did not finish in {timeout:.0f} s:\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_demo_small_world_counts_every_alert(tmp_path):
    out = tmp_path / "demo"
    r = _run_demo(["--world", "small", "--episodes", "8", "--no-static", "--out", str(out)],
                  tmp_path, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    text = r.stdout + r.stderr
    assert "Traceback" not in text and "never retrieved" not in text, text
    doc = json.loads((out / "demo.json").read_text())
    # an alert is a dissonance (a look here contradicted memory here) or an object seen
    # elsewhere (its line names where): both count
    printed = r.stdout.count("! dissonance at") + r.stdout.count("! object moved:")
    assert printed >= 1, r.stdout  # the swap at episode 3 is detected
    assert all(" seen at " in ln for ln in r.stdout.splitlines() if "! object moved:" in ln)
    rows = doc["episodes_detail"]
    assert len(rows) == 8
    assert sum(row["alerts"] for row in rows) == printed == len(doc["counters"]["alerts"])
    table_alerts = sum(p.get("alerts", 0) for p in doc["phases"])
    assert table_alerts == printed
    assert (out / "demo_memory.db").is_file() and (out / "demo.png").is_file()
    snaps = doc["counters"]["map_snapshots"]
    assert (out / "demo_map.png").is_file() and snaps
    # the map has a snapshot at the detection; the memory it drew is per place, and the new
    # (blue) look at room_a can be recorded trusted before or after that snapshot, so the
    # contradicted memory itself is checked in the database: no red look at room_a is
    # trusted any more, the blue ones are
    assert any("dissonance" in s["label"] for s in snaps)
    from glove_ros.core.memory.store import ExperienceStore

    with ExperienceStore(str(out / "demo_memory.db")) as store:
        looks = store.query("room_a", "look", include_suppressed=True, limit=None)[0]
    red = [e for e in looks if e.transition.outcome == "colors=red"]
    blue = [e for e in looks if e.transition.outcome == "colors=blue"]
    assert red and not any(e.trusted for e in red), [(e.id, e.status.name) for e in red]
    assert blue and all(e.trusted for e in blue)
    assert "episodes" in r.stderr  # the progress bar
