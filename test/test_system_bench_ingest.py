"""``glove-ros bench ingest`` smoke run: short, low rate, NORMAL only (the full run is bench/).

What must hold: the benchmark runs the memory node and the bare subscriber through DDS and
writes its JSON; every transition published is either stored or counted as dropped (no
unreported loss at a rate far below capacity), and queries were answered while ingesting.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros


def test_bench_ingest_smoke(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "glove_ros.cli", "bench", "ingest", "--rates", "100",
         "--synchronous", "NORMAL", "--duration", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "ingest.json").read_text())
    (run,) = doc["runs"]
    assert run["published"] == 200
    assert run["unreported_loss"] == 0, run
    assert run["stored"] + run["counted_drops"] == 200
    assert run["queries"] > 0 and run["query_p99_ms"] is not None
    assert run["bare_received"] > 0
    assert "ours/bare" in out.stdout
