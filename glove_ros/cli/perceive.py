"""Run a perception backend on image files and print what it sees (no ROS needed).

  glove-ros perceive photo.jpg                     the shipped detector (YOLOv3-tiny, COCO)
  glove-ros perceive a.jpg b.png --json            JSON: backend, then per image its boxes
  glove-ros perceive shelf.jpg --classes cup,bottle --threshold 0.3
  glove-ros perceive frame.png --params-file config/jetrover.yaml
                                                   what the robot's perception node would
                                                   publish for this frame (its backend, its
                                                   thresholds, its min_confidence)

Backends: ``darknet`` (default without a params file: YOLOv3-tiny on the 80 COCO classes,
model files installed by scripts/setup.sh), ``color`` (HSV colour blocks) and ``yolo`` (your
ultralytics .pt/.onnx/.engine, ``--model``). ``--params-file`` reads the perception node's
section (``/**/perception: ros__parameters:``) of a ROS 2 parameter file; the options given
here override it. Each detection: class, score (0..1), box as x y width height in pixels
(top-left corner). Labels use the COCO 2017 spelling ("couch", "tv"); ``--classes`` accepts
synonyms ("sofa", "tvmonitor", "table").

Every image is read before the model loads: a missing or undecodable file is one line on
stderr and exit status 2, and nothing is printed for the others. docs/perception.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

BACKEND_CHOICES = ("darknet", "color", "yolo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``glove-ros perceive``."""
    parser.add_argument("images", nargs="+", metavar="IMAGE",
                        help="image files (JPEG, PNG, ... anything OpenCV reads)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default=None,
                        help="detector (default: the params file's, else darknet)")
    parser.add_argument("--classes", action="append", default=None, metavar="C1,C2",
                        help="classes of interest, comma-separated or repeated, e.g. --classes "
                             "person,cup --classes 'dining table' (darknet, yolo; default: "
                             "all)")
    parser.add_argument("--threshold", type=float, default=None, metavar="T",
                        help="lowest score kept, 0..1 (darknet: score threshold, default "
                             "0.25; yolo: confidence; color: minimum confidence)")
    parser.add_argument("--nms", type=float, default=None, metavar="IOU",
                        help="darknet: IoU above which the weaker box of a class is dropped "
                             "(default 0.45)")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="yolo: the .pt/.onnx/.engine file; darknet: a folder with your "
                             "own .cfg, .weights and .names (default: the shipped YOLOv3-tiny)")
    parser.add_argument("--params-file", default=None, metavar="YAML",
                        help="ROS 2 parameter file: use its perception node section")
    parser.set_defaults(func=main)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def params_from_file(path: str | Path) -> dict[str, Any]:
    """The perception node's parameters in a ROS 2 parameter file, flattened to the node's
    dotted names. ValueError when the file has no perception section."""
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a ROS 2 parameter file (a mapping of node names)")
    sections = [v for k, v in data.items()
                if str(k).rstrip("/").split("/")[-1] == "perception" and isinstance(v, dict)]
    if not sections:
        raise ValueError(f"{path}: no perception node section (e.g. '/**/perception:')")
    out: dict[str, Any] = {}
    for section in sections:
        _flatten("", section.get("ros__parameters") or {}, out)
    return out


def read_image(path: str | Path) -> Any:
    """The image at ``path`` as a BGR uint8 array; FileNotFoundError / ValueError saying
    what is wrong with the file."""
    import cv2
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"image '{p}' does not exist")
    if not p.is_file():
        raise ValueError(f"image '{p}' is not a file")
    try:
        data = np.fromfile(p, np.uint8)
    except OSError as exc:
        raise ValueError(f"cannot read image '{p}': {exc.strerror or exc}") from exc
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ValueError(f"cannot decode image '{p}' ({data.size} bytes): not an image format "
                         "OpenCV reads (JPEG, PNG, BMP, TIFF, WebP, ...)")
    return image


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The detector parameters: the params file's perception section, then the options."""
    values = params_from_file(args.params_file) if args.params_file else {}
    if args.backend:
        values["backend"] = args.backend
    elif not args.params_file:
        values["backend"] = "darknet"
    backend = values.get("backend", "color")
    if args.classes is not None:
        values["classes"] = [c.strip() for item in args.classes for c in item.split(",")
                             if c.strip()]
    if args.threshold is not None:
        if not 0.0 <= args.threshold <= 1.0:
            raise ValueError(f"--threshold must be within 0..1, got {args.threshold}")
        key = {"darknet": "darknet.score_threshold", "yolo": "yolo.confidence"}.get(
            backend, "min_confidence")
        values[key] = args.threshold
    if args.nms is not None:
        if backend != "darknet":
            raise ValueError("--nms applies to the darknet backend")
        values["darknet.nms_threshold"] = args.nms
    if args.model is not None:
        if backend == "darknet":
            values["darknet.model_dir"] = args.model
        elif backend == "yolo":
            values["yolo.model_path"] = args.model
        else:
            raise ValueError("--model applies to the darknet and yolo backends")
    return values


def main(args: argparse.Namespace) -> int:
    """Run ``glove-ros perceive``; 0 on success (ValueError / FileNotFoundError otherwise,
    which the ``glove-ros`` entry point prints as one line with exit status 2)."""
    from glove_ros.core.world.perception import detector_from_params

    values = settings(args)
    images = [(str(p), read_image(p)) for p in args.images]  # all readable before loading
    try:
        detector = detector_from_params(values)
    except ImportError as exc:  # ultralytics absent, OpenCV 5: the message says what to do
        raise ValueError(str(exc)) from exc
    min_conf = float(values.get("min_confidence", 0.0))
    results = []
    for path, image in images:
        t0 = time.perf_counter()
        dets = [d for d in detector.detect(image) if d.confidence >= min_conf]
        ms = (time.perf_counter() - t0) * 1000
        results.append({
            "path": path, "width": int(image.shape[1]), "height": int(image.shape[0]),
            "ms": round(ms, 1),
            "detections": [{"label": d.label, "color": d.color, "score": round(d.confidence, 4),
                            "box": [d.x, d.y, d.width, d.height]} for d in dets],
        })
    if args.json:
        print(json.dumps({"backend": detector.backend, "images": results}, indent=2))
        return 0
    for r in results:
        n = len(r["detections"])
        print(f"{r['path']}  {r['width']}x{r['height']}  {n} detection{'s' * (n != 1)} "
              f"({detector.backend}, {r['ms']:.0f} ms)")
        for d in r["detections"]:
            name = d["label"] + (f" ({d['color']})" if d["color"] else "")
            x, y, w, h = d["box"]
            print(f"  {name:<16} {d['score']:.2f}  x={x} y={y} w={w} h={h}")
    sys.stdout.flush()
    return 0
