"""Tests of glove-ros bench jetrover's perception settings: the shipped darknet detector on
object worlds (k-of-n looks, detections cached per frame, the detector's measured rates),
the oracle's perception, and baselines at their best setting beside GLOVE.

The darknet tests build a tiny object world (two waypoints, a cup that moves) and keep it
to a few episodes: the detector costs ~60-100 ms a frame, the cache makes methods side by
side share it.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

from glove_ros.benchmarks import jetrover
from glove_ros.benchmarks._jetrover_config import BenchConfig, make_tasks, task_names
from glove_ros.benchmarks._jetrover_report import format_table
from glove_ros.benchmarks._jetrover_runner import DetectionCache, ModeRunner, frame_digest
from glove_ros.benchmarks.jetrover import parse_baselines, run_benchmark
from glove_ros.core.memory.looks import look_kind
from glove_ros.core.plan.agent_types import ACTION_LOOK
from glove_ros.core.world.perception import Detection
from glove_ros.core.world.worldfile import World, load_world

FAST = {"frame_size": (320, 240)}

#: a tiny home: the cup is carried from the kitchen to the office at episode 3, the cat
#: sleeps in the bedroom; photos 0.25-0.3 m tall at 0.9-1 m, which YOLOv3-tiny finds in
#: 320x240 frames
TINY_OBJECTS = {
    "name": "tiny_objects", "seed": 5, "dock": "dock", "robot": {"speed": 0.5},
    "waypoints": [{"id": "dock", "x": 0.0, "y": 0.0, "yaw": -1.5708},
                  {"id": "kitchen", "x": 2.0, "y": 0.0, "yaw": 0.0},
                  {"id": "bedroom", "x": -2.0, "y": 0.0, "yaw": 3.1416},
                  {"id": "office", "x": 0.0, "y": 2.0, "yaw": 1.5708}],
    "edges": [["dock", "kitchen"], ["dock", "bedroom"], ["dock", "office"]],
    "blocks": [{"id": "cup", "object": "cup", "waypoint": "kitchen", "offset": [0.9, 0.0],
                "size": 0.3},
               {"id": "cat", "object": "cat", "waypoint": "bedroom", "offset": [1.0, 0.0],
                "size": 0.25}],
    "events": [{"episode": 3, "type": "move_block", "block": "cup", "waypoint": "office",
                "offset": [0.9, 0.0]}],
}


def _tiny_objects() -> World:
    return World.from_dict(TINY_OBJECTS)


def _darknet_or_skip() -> None:
    """The shipped YOLOv3-tiny and the packaged photos the simulator crops."""
    from glove_ros.core.world import darknet, photos

    try:
        darknet.find_model()
        photos.require_photos(("cup", "cat"))
    except (FileNotFoundError, ImportError, ValueError) as exc:
        pytest.skip(f"the shipped detector or its photos are not installed: {exc}")


# --------------------------------------------------------------------------- settings


def test_detector_and_perception_settings_are_validated_and_resolved():
    small = load_world("small")
    cfg = BenchConfig().resolve(small)
    # a colour world keeps today's detector and noise: its numbers do not change
    assert (cfg.detector, cfg.common_noise, cfg.perception) == ("color", False, "camera")
    assert BenchConfig(common_noise=True).resolve(small).common_noise is True
    with pytest.raises(ValueError, match="cannot see the looks"):
        BenchConfig(detector="darknet").resolve(small)
    with pytest.raises(ValueError, match="look_min_count"):  # no k-of-n rule runs there
        BenchConfig(look_frames=3, look_min_count=2).resolve(small)
    for bad in ({"detector": "yolo"}, {"perception": "psychic"},
                {"look_frames": 2, "look_min_count": 3}, {"look_min_count": 0},
                {"common_noise": "yes"}):
        with pytest.raises(ValueError):
            BenchConfig(**bad).validate()
    # k of n: the look rule's 2 of 3, scaled
    assert [BenchConfig(look_frames=n).min_count for n in (1, 2, 3, 4, 6)] == [1, 2, 2, 3, 4]
    assert BenchConfig(look_frames=3, look_min_count=1).min_count == 1


def test_parse_baselines():
    assert parse_baselines("none") == ()
    assert parse_baselines("all") == ("LatestOverwrite", "RecentK", "SlidingWindow",
                                      "RecencyWeighted", "PageHinkleyReset", "PeriodicRefresh")
    fair = parse_baselines("fair")
    assert len(fair) == 12 and "RecentK+retest" in fair
    assert parse_baselines("RecentK, LatestOverwrite+retest") == ("RecentK",
                                                                  "LatestOverwrite+retest")
    for bad in ("Recent", "RecentK,RecentK", "GLOVE+retest"):
        with pytest.raises(ValueError):
            parse_baselines(bad)


# --------------------------------------------------------------------------- oracle perception


def _looks_equal_truth(world, config) -> tuple[int, ModeRunner]:
    """Run async with every recorded look checked against the simulator's truth at that
    moment; the number of looks checked."""
    runner = ModeRunner(world, "async", config)
    checked = []
    original = runner.record

    def record(t):
        if t.action == ACTION_LOOK:
            assert t.outcome == runner.sim.state.expected_signature(t.state_key), t
            checked.append(t)
        original(t)

    runner.record = record
    runner.run()
    return len(checked), runner


def test_oracle_perception_looks_are_the_simulators_truth():
    """--perception oracle: every look is WorldState.expected_signature (no frames), so a
    world with missed detections is seen perfectly, and the JSON says which perception ran."""
    world = load_world("small")
    n, runner = _looks_equal_truth(world, BenchConfig(episodes=6, perception="oracle"))
    assert n >= 6 and runner.looks >= n
    assert runner.summary()["perception"] == {"perception": "oracle", "looks": runner.looks}
    doc = run_benchmark(world, ("async", "static"),
                        BenchConfig(episodes=4, perception="oracle"))
    assert doc["config"]["perception"] == "oracle"
    assert doc["config"]["detector"] == "none (ground truth)"
    assert "perception" not in doc  # no detector, no rates
    assert "oracle perception" in format_table(doc)


# --------------------------------------------------------------------------- baselines


def test_baselines_run_at_their_best_setting_beside_glove():
    world = load_world("small")
    doc = run_benchmark(world, ("async", "static"), BenchConfig(episodes=6, **FAST),
                        baselines=("RecentK", "LatestOverwrite+retest"),
                        sweep={"RecentK": (1, 8)})
    assert list(doc["modes"]) == ["async", "static", "RecentK", "LatestOverwrite+retest"]
    sweep = doc["baseline_sweep"]
    assert [s["params"]["k"] for s in sweep["RecentK"]] in ([1, 8], [8, 1])
    best = sweep["RecentK"][0]
    # the kept setting is the best one: most successes after drift, then fewest steps
    assert (best["successes_after_drift"], -best["steps_per_task_after_drift"]) >= \
        (sweep["RecentK"][1]["successes_after_drift"],
         -sweep["RecentK"][1]["steps_per_task_after_drift"])
    assert doc["modes"]["RecentK"]["params"] == best["params"]
    assert doc["best_baseline"] == {"bare": {"name": "RecentK", "params": best["params"]},
                                    "retest": {"name": "LatestOverwrite+retest",
                                               "params": {}}}
    assert doc["ratios"]["steps_best_baseline_over_async"] > 0
    for m, r in doc["modes"].items():
        d = r["drift"]
        assert d["looks"] > 0 and d["false_alarms_per_1000_looks"] == pytest.approx(
            round(1000 * d["false_alarms"] / d["looks"], 3)), m
    text = format_table(doc)
    assert "FA/1k looks" in text and "the best baseline, RecentK(k=" in text
    with pytest.raises(ValueError, match="baseline"):
        run_benchmark(world, ("async",), BenchConfig(episodes=2), baselines=("Nope",))


# --------------------------------------------------------------------------- detection cache


class _CountingDetector:
    """Stands in for DarknetDetector in the cache: counts forward passes."""

    def __init__(self) -> None:
        from glove_ros.core.world.darknet import DarknetConfig

        self.config = DarknetConfig()
        self.model = SimpleNamespace(weights="/nowhere/yolov3-tiny.weights")
        self.calls = 0

    def detect(self, frame):
        self.calls += 1
        return [Detection("cup", "", 3, 4, 10, 12, round(float(frame.mean()) / 255, 4))]


def test_detection_cache_keys_on_pixels_and_keeps_detections_on_disk(tmp_path):
    det = _CountingDetector()
    a = np.zeros((48, 64, 3), np.uint8)
    b = a.copy()
    b[0, 0, 0] = 1  # one pixel differs: another frame
    cache = DetectionCache(det, tmp_path)
    assert frame_digest(a) == frame_digest(a.copy()) != frame_digest(b)
    d1, dets, src = cache.detect(a)
    assert src == "run" and dets[0].label == "cup" and det.calls == 1
    assert cache.detect(a.copy())[1:] == (dets, "memory") and det.calls == 1
    assert cache.detect(b)[2] == "run" and det.calls == 2
    assert cache.stats()["detector_runs"] == 2 and cache.stats()["cache_hits"] == 1
    # a new process (a new cache on the same folder) reads them back without the network
    again = DetectionCache(_CountingDetector(), tmp_path)
    assert again.path == cache.path and again.path.name.startswith("darknet-")
    assert again.detect(a) == (d1, dets, "disk") and again.detector.calls == 0
    assert again.detect(a)[2] == "memory"
    # other detector settings, another file
    det2 = _CountingDetector()
    from glove_ros.core.world.darknet import DarknetConfig

    det2.config = DarknetConfig(score_threshold=0.5)
    assert DetectionCache(det2, tmp_path).path != cache.path
    cache.path.write_text("not json\n")
    with pytest.raises(ValueError, match="delete the file"):
        DetectionCache(_CountingDetector(), tmp_path)


def test_task_names_of_a_colour_world_are_its_colours():
    w = load_world("small")
    assert task_names(w) == tuple(w.colors)
    assert {t.color for t in make_tasks(w, 20, 0)} <= set(w.colors)


def test_cli_perception_flags(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    jetrover.add_arguments(parser)
    args = parser.parse_args(["--scenario", "small", "--episodes", "3", "--mode", "async",
                              "--perception", "oracle", "--baselines", "RecentK",
                              "--out", str(tmp_path)])
    assert jetrover.main(args) == 0
    doc = json.loads((tmp_path / "jetrover_small_oracle_perception.json").read_text())
    assert doc["config"]["perception"] == "oracle" and list(doc["modes"]) == ["async",
                                                                              "RecentK"]
    for bad in (["--detector", "darknet"], ["--baselines", "Nope"],
                ["--frame-size", "big"], ["--look-frames", "2", "--look-min-count", "3"]):
        args = parser.parse_args(["--scenario", "small", "--out", str(tmp_path), *bad])
        assert jetrover.main(args) == 2, bad
    assert "glove-ros bench jetrover:" in capsys.readouterr().err


# --------------------------------------------------------------------------- object worlds


def test_tasks_on_an_object_world_are_its_classes():
    w = _tiny_objects()
    assert w.look_kind == "objects" and task_names(w) == ("cat", "cup")
    assert {t.color for t in make_tasks(w, 20, 0)} == {"cat", "cup"}
    assert BenchConfig().resolve(w).detector == "darknet"
    assert BenchConfig().resolve(w).common_noise is True  # methods share the detections
    with pytest.raises(ValueError, match="cannot see the looks"):
        BenchConfig(detector="color").resolve(w)
    assert BenchConfig(look_frames=3, look_min_count=1).resolve(w).min_count == 1
    with pytest.raises(ValueError, match="look_min_count"):
        BenchConfig(look_frames=3, look_min_count=1, perception="oracle").resolve(w)


def test_darknet_looks_on_an_object_world_share_cached_detections():
    """The real detector on real photo pixels: looks are objects= outcomes judged k of n,
    the cup is found in most tasks (before and after it moves), the detector's per-class
    rates are measured on the frames judged, and a second method reuses the first's
    detections (the k-th look at a place in an episode is the same frame)."""
    _darknet_or_skip()
    world = _tiny_objects()
    cfg = BenchConfig(episodes=6, seed=1, **FAST)  # seed 1: cup, cat, cup | cup, cat, cup
    looks = []
    first = ModeRunner(world, "async", cfg)
    record = first.record

    def spy(t):
        if t.action == ACTION_LOOK:
            looks.append(t.outcome)
        record(t)

    first.record = spy
    a = first.run()
    assert looks and all(look_kind(o) == "objects" for o in looks)
    assert any("cup" in o for o in looks)
    cups = [e for e in a["episodes"] if e["color"] == "cup"]
    assert len(cups) == 4 and sum(e["success"] for e in cups) >= 3
    # found where it is: the kitchen before the move, the office after it
    assert all(e["found_at"] == ("kitchen" if e["episode"] < 3 else "office")
               for e in cups if e["success"])
    assert sum(e["success"] for e in a["episodes"]) >= 5
    p = a["perception"]
    assert p["frames"] == 2 * p["looks"]  # two frames a look, every look rendered
    assert p["frames"] == p["detector_runs"] + p["cache_hits"] + p["disk_hits"]
    second = ModeRunner(world, "static", cfg, rates=first.rates)
    b = second.run()
    assert b["perception"]["cache_hits"] > 0  # the same frames, not detected again
    rates = first.rates.summary()["per_frame"]
    assert rates["cup"]["present"] > 0 and rates["cup"]["hit_rate"] >= 0.8
    assert rates["cup"]["false_rate"] <= 0.1 and rates["cat"]["hit_rate"] >= 0.8


def test_darknet_benchmark_document_reports_rates_cache_and_perception(tmp_path):
    _darknet_or_skip()
    world = _tiny_objects()
    doc = run_benchmark(world, ("async", "static"), BenchConfig(episodes=4, seed=1, **FAST))
    cfg = doc["config"]
    assert (cfg["perception"], cfg["detector"], cfg["look_rule"]) == (
        "camera", "darknet", {"frames": 2, "min_count": 2})
    p = doc["perception"]
    assert p["cache_hits"] > 0 and p["frames"] == p["detector_runs"] + p["cache_hits"] \
        + p["disk_hits"]
    assert p["detector_settings"]["config"]["input_size"] == 416
    assert {"cup", "cat"} <= set(p["rates"]["per_frame"]) and p["rates"]["looks"] > 0
    text = format_table(doc)
    assert "darknet detector" in text and "cache hits" in text and "hit rate" in text
    json.dumps(doc)
    # the same world with the oracle's perception: the truth, objects= with counts
    n, runner = _looks_equal_truth(world, BenchConfig(episodes=4, perception="oracle"))
    assert n > 0 and runner.sim.state.expected_signature("office") == "objects=cup"


def test_cli_keeps_darknet_detections_on_disk(tmp_path, capsys):
    _darknet_or_skip()
    path = tmp_path / "tiny_objects.yaml"
    import yaml

    path.write_text(yaml.safe_dump(TINY_OBJECTS))
    parser = argparse.ArgumentParser()
    jetrover.add_arguments(parser)
    cache = tmp_path / "cache"
    args = parser.parse_args(["--scenario", str(path), "--episodes", "2", "--mode", "static",
                              "--frame-size", "320x240", "--detection-cache", str(cache),
                              "--out", str(tmp_path)])
    assert jetrover.main(args) == 0
    doc = json.loads((tmp_path / "jetrover_tiny_objects.json").read_text())
    files = list(cache.glob("darknet-*.jsonl"))
    assert len(files) == 1 and doc["perception"]["cache_file"] == str(files[0])
    lines = files[0].read_text().splitlines()
    assert len(lines) == doc["perception"]["detector_runs"] > 0
    assert "darknet detector" in capsys.readouterr().out
