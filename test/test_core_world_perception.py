"""Perception on frames rendered by the simulator: colour blocks, signatures, YOLO path."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from glove_ros.core.world.perception import (
    ColorBlockDetector,
    ColorDetectorConfig,
    ColorRange,
    Detection,
    YoloDetector,
    make_detector,
    outcome_signature,
)
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import BLOCK_COLORS, World, load_world

BUNDLED = ("jetrover_maze", "small", "nuisance_only", "corridor_blocked")


@pytest.fixture(scope="module")
def detector() -> ColorBlockDetector:
    return ColorBlockDetector()


def iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    ix = max(0, min(ax + aw, bx + bw) - max(ax, bx))
    iy = max(0, min(ay + ah, by + bh) - max(ay, by))
    inter = ix * iy
    return inter / float(aw * ah + bw * bh - inter)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_block_found_with_its_colour(name, detector):
    w = load_world(name)
    sim = Simulator(w)
    checked = 0
    for wp in w.waypoint_ids:
        assert sim.navigate(wp).reached
        img = sim.render_camera()
        info = sim.last_render
        dets = detector.detect(img)
        blocks = [o for o in info.objects if o.kind == "block"]
        assert len(dets) == len(blocks), (wp, dets, info)
        for o in blocks:
            match = [d for d in dets if d.color == o.color]
            assert len(match) == 1, (wp, o, dets)
            d = match[0]
            assert d.label == "block" and 0 < d.confidence <= 1
            assert iou((d.x, d.y, d.width, d.height), (o.x, o.y, o.width, o.height)) > 0.6
            checked += 1
        assert outcome_signature(dets) == sim.state.expected_signature(wp)
    assert checked == len(w.blocks)


def test_all_palette_colours_are_told_apart(detector):
    colors = list(BLOCK_COLORS)
    waypoints = [{"id": "dock", "x": 0, "y": 0}]
    edges = []
    blocks = []
    for i, c in enumerate(colors):
        waypoints.append({"id": f"w{i}", "x": float(i + 1), "y": 0.0, "yaw": -1.5708,
                          "wall": "cardboard" if i % 2 else "plain"})
        edges.append(["dock" if i == 0 else f"w{i - 1}", f"w{i}"])
        blocks.append({"id": f"b_{c}", "color": c, "waypoint": f"w{i}",
                       "offset": [0.55, 0.1 if i % 2 else -0.1]})
    # two blocks side by side at the first waypoint too
    blocks.append({"id": "b_extra", "color": "green", "waypoint": "w0", "offset": [0.7, 0.12]})
    w = World.from_dict({"name": "palette", "dock": "dock", "waypoints": waypoints,
                         "edges": edges, "blocks": blocks})
    sim = Simulator(w)
    for i, c in enumerate(colors):
        sim.navigate(f"w{i}")
        sig = outcome_signature(detector.detect(sim.render_camera()))
        assert sig == sim.state.expected_signature(f"w{i}"), (c, sig)
    sim.navigate("w0")
    assert outcome_signature(detector.detect(sim.render_camera())) == "colors=green,red"


def test_red_wraps_around_hue_zero(detector):
    img = np.full((120, 160, 3), 128, np.uint8)
    img[20:60, 20:60] = (40, 30, 200)  # hue ~178: upper red range
    img[20:60, 90:130] = (30, 40, 200)  # hue ~2: lower red range
    dets = detector.detect(img)
    assert [d.color for d in dets] == ["red", "red"]
    assert [d.x for d in dets] == sorted(d.x for d in dets)
    one_sided = ColorDetectorConfig(colors=(ColorRange("red", (((0, 100, 60), (8, 255, 255)),)),))
    assert len(ColorBlockDetector(one_sided).detect(img)) == 1


def test_grey_scene_and_small_specks_give_nothing(detector):
    rng = np.random.default_rng(0)
    img = np.clip(rng.normal(120, 20, (240, 320, 3)), 0, 255).astype(np.uint8)
    assert detector.detect(img) == []
    img[100:105, 100:105] = (30, 40, 200)  # 25 px < min_area
    assert detector.detect(img) == []


def test_swap_changes_the_signature(detector):
    sim = Simulator(load_world("small"))
    sim.navigate("room_a")
    before = outcome_signature(detector.detect(sim.render_camera()))
    sim.begin_episode(3)  # red and blue swap
    after = outcome_signature(detector.detect(sim.render_camera()))
    assert before == "colors=red" and after == "colors=blue"


def test_missed_detection_nuisance_removes_one_frames_block(detector):
    d = load_world("small").to_dict()
    d["events"] = [{"episode": 0, "type": "miss_detections", "rate": 0.3,
                    "blocks": ["red_block"]}]
    sim = Simulator(World.from_dict(d))
    sim.navigate("room_a")
    seen_missed = seen_normal = False
    for _ in range(30):
        sig = outcome_signature(detector.detect(sim.render_camera()))
        if sim.last_render.missed:
            assert sim.last_render.missed == ("red_block",)
            assert sig == "colors="
            seen_missed = True
        else:
            assert sig == "colors=red"
            seen_normal = True
    assert seen_missed and seen_normal


def test_nuisance_does_not_change_signatures_except_misses_and_dropouts(detector):
    w = load_world("nuisance_only")
    sim = Simulator(w)
    frames = 0
    for ep in range(0, 14):
        sim.begin_episode(ep)
        assert sim.navigate(w.dock).reached and sim.dock()  # recharge between episodes
        sim.wait(200.0)
        for wp in w.waypoint_ids:
            assert sim.navigate(wp).reached
            sig = outcome_signature(detector.detect(sim.render_camera(320, 240)))
            info = sim.last_render
            expected = sim.state.expected_signature(wp)
            if info.dropout:
                assert sig == "colors="
            elif info.missed:
                assert sig == "colors=" + ",".join(info.colors)
            else:
                assert sig == expected, (ep, wp, sig)
            frames += 1
    assert frames == 14 * len(w.waypoints)


def test_outcome_signature():
    red = Detection("block", "red", 0, 0, 10, 10, 0.9)
    blue = Detection("block", "blue", 20, 0, 10, 10, 0.4)
    assert outcome_signature([]) == "colors="
    assert outcome_signature([red, blue, red]) == "colors=blue,red"
    assert outcome_signature([red, blue], min_confidence=0.5) == "colors=red"
    assert outcome_signature([Detection("cup", "", 0, 0, 5, 5, 0.8)]) == "colors=cup"
    assert red.area == 100 and red.center == (5.0, 5.0)


def test_config_validation_and_round_trip():
    cfg = ColorDetectorConfig()
    assert ColorDetectorConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="lower 20 > upper 10"):
        ColorDetectorConfig(colors=(ColorRange("x", (((20, 0, 0), (10, 255, 255)),)),)).validate()
    with pytest.raises(ValueError, match="blur_kernel must be"):
        ColorDetectorConfig(blur_kernel=4).validate()
    with pytest.raises(ValueError, match="min_area must be"):
        ColorDetectorConfig(min_area=0).validate()
    with pytest.raises(ValueError, match="H must be in 0..179"):
        ColorDetectorConfig(colors=(ColorRange("x", (((0, 0, 0), (200, 255, 255)),)),)).validate()
    with pytest.raises(ValueError, match="unknown key"):
        ColorDetectorConfig.from_dict({"min_aera": 5})
    with pytest.raises(ValueError, match="duplicate colour"):
        ColorDetectorConfig(colors=(ColorRange("a", (((0, 0, 0), (5, 255, 255)),)),) * 2
                            ).validate()
    cfg2 = ColorDetectorConfig.from_dict({"colors": {"red": [[0, 90, 60, 10, 255, 255]]},
                                          "min_area": 50})
    assert cfg2.colors[0].color == "red" and cfg2.min_area == 50


def test_bad_images_are_rejected(detector):
    with pytest.raises(ValueError, match=r"shape \(H, W, 3\)"):
        detector.detect(np.zeros((10, 10), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        detector.detect(np.zeros((10, 10, 3), np.float32))


def test_dominant_color(detector):
    sim = Simulator(load_world("small"))
    sim.navigate("room_b")
    img = sim.render_camera()
    (obj,) = sim.last_render.objects
    assert detector.dominant_color(img, (obj.x, obj.y, obj.width, obj.height)) == "blue"
    assert detector.dominant_color(img, (0, 0, 40, 40)) == ""


def test_make_detector_and_yolo_argument_errors(tmp_path):
    assert isinstance(make_detector("color"), ColorBlockDetector)
    assert make_detector("color", config=ColorDetectorConfig(min_area=20)).config.min_area == 20
    with pytest.raises(ValueError, match="unknown perception backend 'sonar'"):
        make_detector("sonar")
    with pytest.raises(ValueError, match="needs model_path"):
        make_detector("yolo")
    with pytest.raises(ValueError, match="unexpected argument"):
        make_detector("color", model_path="x.onnx")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        YoloDetector(tmp_path / "yolo11n.pt")
    with pytest.raises(ValueError, match=r"\.pt, \.onnx, \.engine"):
        YoloDetector(tmp_path / "model.tflite")


def test_yolo_without_ultralytics_is_a_clear_error(tmp_path, monkeypatch):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not a model")
    monkeypatch.setitem(sys.modules, "ultralytics", None)  # import fails as if absent
    with pytest.raises(ImportError, match="needs ultralytics, which is not installed"):
        YoloDetector(model)


HAS_ULTRALYTICS = importlib.util.find_spec("ultralytics") is not None
HAS_ONNX = importlib.util.find_spec("onnx") is not None


@pytest.fixture(scope="module")
def yolo_onnx(tmp_path_factory):
    if not HAS_ULTRALYTICS:
        pytest.skip("ultralytics is not installed (pip install -r requirements/vision.txt)")
    if not HAS_ONNX:
        pytest.skip("onnx is not installed: ultralytics cannot export to ONNX")
    from glove_ros.core.world.perception import build_untrained_yolo_onnx

    return build_untrained_yolo_onnx(tmp_path_factory.mktemp("yolo"), imgsz=320)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's legacy ONNX exporter
def test_yolo_onnx_backend_output_structure(yolo_onnx):
    assert yolo_onnx.suffix == ".onnx" and yolo_onnx.is_file()
    # random weights score every box ~1e-4: a tiny threshold makes it report boxes; we
    # check the structure only, never accuracy
    det = make_detector("yolo", model_path=yolo_onnx, conf=1e-5, imgsz=320, device="cpu")
    assert det.backend == "yolo"
    sim = Simulator(load_world("jetrover_maze"))
    sim.navigate("kitchen")
    img = sim.render_camera()
    dets = det.detect(img)
    assert isinstance(dets, list)
    assert dets, "an untrained model at conf=1e-5 still proposes boxes"
    for d in dets:
        assert isinstance(d, Detection)
        assert d.label in det.names.values()
        assert d.color in set(BLOCK_COLORS) | {""}
        assert 1e-5 <= d.confidence <= 1.0
        assert d.width > 0 and d.height > 0
        assert d.x >= 0 and d.x + d.width <= 640
        assert d.y >= 0 and d.y + d.height <= 480
    assert [d.confidence for d in dets] == sorted((d.confidence for d in dets), reverse=True)
    assert outcome_signature(dets).startswith("colors=")
    # class filter by name: only that class comes back
    one = YoloDetector(yolo_onnx, conf=1e-5, imgsz=320, classes=[det.names[0]],
                       classify_color=False)
    assert all(d.label == det.names[0] and d.color == "" for d in one.detect(img))
    with pytest.raises(ValueError, match="not in the model"):
        YoloDetector(yolo_onnx, classes=["no_such_class"])


def test_perception_benchmark_smoke(tmp_path, capsys):
    """`glove-ros bench perception` runs and writes its JSON (colour backend only here)."""
    import argparse
    import json

    from glove_ros.benchmarks import perception as bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "perception.json"
    args = parser.parse_args(["--no-yolo", "--frames", "3", "--min-seconds", "0.05",
                              "--world", "small", "--output", str(out)])
    assert bench.main(args) == 0
    data = json.loads(out.read_text())
    assert data["frames"] == 3 and data["width"] == 640
    assert data["backends"]["color"]["fps"] > 0
    assert data["backends"]["color"]["signature_accuracy"] == 1.0
    assert data["backends"]["yolo"] == {"available": False, "reason": "--no-yolo"}
    assert "color (OpenCV HSV)" in capsys.readouterr().out


def test_color_vocabulary_is_what_perception_can_report(tmp_path):
    """Issue 31: a real site's world file places no blocks; the task vocabulary must still hold
    the colours perception reports (the built-in table or the node's colour file)."""
    from glove_ros.core.world.perception import DEFAULT_COLOR_RANGES, color_vocabulary

    assert color_vocabulary() == tuple(sorted(c.color for c in DEFAULT_COLOR_RANGES))
    assert "red" in color_vocabulary() and "blue" in color_vocabulary()
    f = tmp_path / "colors.yaml"
    f.write_text("colors:\n  teal: [[80, 100, 50, 95, 255, 255]]\n")
    assert color_vocabulary(str(f)) == ("teal",)
    f.write_text("colors:\n  teal: [[80, 100, 50, 300, 255, 255]]\n")
    with pytest.raises(ValueError, match="teal"):
        color_vocabulary(str(f))
    with pytest.raises(OSError):
        color_vocabulary(str(tmp_path / "missing.yaml"))
