"""`glove-ros perceive IMAGE...`: the shipped detector's boxes on image files, as text or
JSON; a params file's perception section; bad files and options in one line (no ROS)."""

from __future__ import annotations

import json

import pytest
from conftest import require_darknet

from glove_ros.benchmarks._perception_darknet import PHOTO_TRUTH, package_file
from glove_ros.cli import main as cli

pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def coffee() -> str:
    require_darknet()
    path = package_file(*PHOTO_TRUTH["coffee.png"][:2])
    assert path is not None, "scikit-image's coffee.png is missing: run scripts/setup.sh"
    return str(path)


def _blank_png(tmp_path) -> str:
    import cv2
    import numpy as np

    path = tmp_path / "blank.png"
    assert cv2.imwrite(str(path), np.zeros((120, 160, 3), np.uint8))
    return str(path)


def test_json_output(coffee, tmp_path, capsys):
    blank = _blank_png(tmp_path)
    assert cli.main(["perceive", "--json", coffee, blank]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backend"] == "darknet"
    first, second = data["images"]
    assert first["path"] == coffee and (first["width"], first["height"]) == (600, 400)
    cup = first["detections"][0]
    assert cup["label"] == "cup" and cup["score"] > 0.5 and cup["color"] == ""
    x, y, w, h = cup["box"]
    assert x >= 0 and x + w <= 600 and y >= 0 and y + h <= 400 and w > 100 and h > 100
    assert second == {"path": blank, "width": 160, "height": 120, "ms": second["ms"],
                      "detections": []}


def test_text_output_classes_and_threshold(coffee, capsys):
    assert cli.main(["perceive", coffee]) == 0
    out = capsys.readouterr().out
    assert "600x400  1 detection (darknet," in out
    assert "  cup" in out and "x=" in out and " w=" in out
    # a class of interest that is not in the photo, by a synonym: nothing
    assert cli.main(["perceive", "--classes", "sofa,tvmonitor", coffee]) == 0
    assert "0 detections" in capsys.readouterr().out
    # a threshold above the cup's score: nothing either
    assert cli.main(["perceive", "--threshold", "0.9", "--classes", "mug", coffee]) == 0
    assert "0 detections" in capsys.readouterr().out


def test_params_file_is_the_configured_backend(coffee, tmp_path, capsys):
    params = tmp_path / "robot.yaml"
    params.write_text("/**/perception:\n  ros__parameters:\n    backend: darknet\n"
                      "    classes: [cup]\n    darknet:\n      score_threshold: 0.3\n"
                      "    min_confidence: 0.99\n/**/memory:\n  ros__parameters: {}\n")
    assert cli.main(["perceive", "--json", "--params-file", str(params), coffee]) == 0
    assert json.loads(capsys.readouterr().out)["images"][0]["detections"] == []  # min_conf
    params.write_text(params.read_text().replace("0.99", "0.5"))
    assert cli.main(["perceive", "--json", "--params-file", str(params), coffee]) == 0
    dets = json.loads(capsys.readouterr().out)["images"][0]["detections"]
    assert [d["label"] for d in dets] == ["cup"]
    # the colour backend of a params file, overridden on the command line
    params.write_text("/**/perception:\n  ros__parameters:\n    backend: color\n")
    assert cli.main(["perceive", "--json", "--params-file", str(params), coffee]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "color"
    assert cli.main(["perceive", "--json", "--params-file", str(params), "--backend",
                     "darknet", coffee]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "darknet"
    params.write_text("/**/memory:\n  ros__parameters: {}\n")
    assert cli.main(["perceive", "--params-file", str(params), coffee]) == 2
    assert "no perception node section" in capsys.readouterr().err


def test_unreadable_images_are_one_line_errors(coffee, tmp_path, capsys):
    text = tmp_path / "notes.jpg"
    text.write_text("not a picture")
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    cases = [
        ([str(tmp_path / "missing.jpg")], "image '" + str(tmp_path / "missing.jpg")
         + "' does not exist"),
        ([str(text)], "cannot decode image '" + str(text) + "' (13 bytes)"),
        ([str(empty)], "cannot decode image '" + str(empty) + "' (0 bytes)"),
        ([str(tmp_path)], "is not a file"),
        ([coffee, str(text)], "cannot decode image"),  # nothing printed for the good one
    ]
    for argv, message in cases:
        assert cli.main(["perceive", *argv]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("glove-ros: error: "), captured.err
        assert message in lines[0]


def test_bad_options_are_one_line_errors(coffee, capsys):
    for argv, message in [
        (["--threshold", "1.5"], "--threshold must be within 0..1"),
        (["--classes", "unicorn"], "'unicorn' is not one of the model's 80 classes"),
        (["--backend", "color", "--nms", "0.5"], "--nms applies to the darknet backend"),
        (["--backend", "color", "--classes", "cup"], "classes applies to the darknet and yolo"),
        (["--backend", "darknet", "--model", "/no/such/dir"], "does not exist"),
    ]:
        assert cli.main(["perceive", *argv, coffee]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["perceive", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for text in ("YOLOv3-tiny", "--classes", "--threshold", "--params-file", "--json",
                 "x y width height"):
        assert text in out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "perceive" in capsys.readouterr().out
