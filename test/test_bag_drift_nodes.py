"""`glove-ros bag drift-test --through-nodes`: the fixture bags through real node processes.

camera -> perception -> observer -> memory (the swap), detections -> observer -> memory (the
nuisance-only bag), recorded transitions -> memory; each run in its own namespace.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("rosbags")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from glove_ros.cli.bags import cli_main  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "bags"
SWAP = ["--source", FIX / "small_source", "--drifted", FIX / "small_drifted"]


def _drift(capsys, *argv):
    code = cli_main(["drift-test", *[str(a) for a in argv], "--through-nodes", "--json"])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return code, json.loads(out.out), out.err


def test_swap_from_camera_frames_through_perception_observer_memory(capsys):
    code, rep, err = _drift(capsys, *SWAP, "--input", "camera", "--color-config",
                            FIX / "perception_fixture.yaml", "--rate", "10",
                            "--expect", FIX / "swap_expect.yaml")
    assert "nodes ready" in err and "memory, observer, perception" in err
    assert rep["through_nodes"] and rep["drifted"]["input"] == "camera"
    assert rep["alerted_state_keys"] == ["room_a", "room_b"]
    assert rep["false_alarms"] == 0 and rep["missed_pairs"] == []
    assert all(a["t"] is not None and a["delay_messages"] > 0 for a in rep["alerts"])
    assert rep["suppressed"] == 6
    assert code == 0, rep["expectations"]


def test_nuisance_only_from_detections_raises_no_alarm(capsys):
    code, rep, _ = _drift(capsys, "--drifted", FIX / "nuisance_only", "--input", "detections",
                          "--rate", "20", "--expect", FIX / "nuisance_expect.yaml")
    assert code == 0, rep["expectations"]
    assert rep["alert_count"] == 0 and rep["nodes"]["recorded"] >= 70  # 78 looks + moves


def test_recorded_transitions_through_the_memory_node_match_the_core(capsys):
    code, nodes, _ = _drift(capsys, *SWAP, "--rate", "20", "--set", "p_th=2")
    assert code == 0
    assert nodes["nodes"] == {**nodes["nodes"], "recorded": 70, "expected": 70, "lost": {}}
    assert cli_main(["drift-test", *map(str, SWAP), "--set", "p_th=2", "--json"]) == 0
    core = json.loads(capsys.readouterr().out)
    for key in ("alert_count", "alerted_state_keys", "false_alarms", "detection_delay",
                "pair_delays", "suppressed", "replaced"):
        assert nodes[key] == core[key], key
