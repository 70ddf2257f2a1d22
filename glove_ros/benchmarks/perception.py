"""Frames per second of the perception backends on the same 640x480 frames, side by side.

Renders frames with the built-in simulator (every waypoint of a world, blocks, textured
walls, noise), then times each backend on exactly those frames in one run:

* ``color``: :class:`~glove_ros.core.world.perception.ColorBlockDetector` (OpenCV HSV);
* ``yolo``: :class:`~glove_ros.core.world.perception.YoloDetector` on an ONNX model through
  ultralytics (ONNX Runtime on the CPU unless ``--device`` says otherwise). Without
  ``--yolo-model`` an untrained yolo11n is built offline and exported to ONNX: its boxes
  mean nothing, its cost is the real cost. Skipped, with the reason, when ultralytics is
  not installed.

Prints fps per backend and the ratio colour/YOLO, and writes JSON (default
``bench/results/perception.json``); ``--json`` prints that JSON instead of the text.

``--darknet`` times the detector that ships instead (YOLOv3-tiny on OpenCV DNN, backend
``darknet``) on real photos from installed packages, per stage (letterbox, forward,
decode+NMS), on ``--threads`` OpenCV threads (1 by default), and lists what it found and
missed in each photo (default JSON ``bench/results/perception_darknet.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import _perception_darknet
from glove_ros.core.world.perception import (
    ColorBlockDetector,
    YoloDetector,
    build_untrained_yolo_onnx,
    outcome_signature,
)
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import DEFAULT_WORLD, load_world


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``glove-ros bench perception``."""
    parser.add_argument("--world", default=DEFAULT_WORLD,
                        help="world file or bundled world name (default: %(default)s)")
    parser.add_argument("--frames", type=int, default=40,
                        help="distinct frames rendered (default: %(default)s)")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--min-seconds", type=float, default=3.0,
                        help="time each backend for at least this long (default: %(default)s)")
    parser.add_argument("--yolo-model", default=None,
                        help="local .onnx/.pt/.engine model (default: build an untrained "
                             "yolo11n and export it to ONNX in a temporary folder)")
    parser.add_argument("--imgsz", type=int, default=640, help="YOLO inference size")
    parser.add_argument("--device", default="cpu", help="YOLO device (default: %(default)s)")
    parser.add_argument("--no-yolo", action="store_true", help="time the colour backend only")
    parser.add_argument("--seed", type=int, default=0, help="simulator seed")
    parser.add_argument("--output", default=None,
                        help="JSON file written (default: bench/results/perception.json, with "
                             "--darknet bench/results/perception_darknet.json; '' to skip)")
    _perception_darknet.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the JSON result only")


def render_frames(world_name: str, count: int, width: int, height: int, seed: int
                  ) -> tuple[list[np.ndarray], list[str]]:
    """``count`` frames cycling over the world's waypoints, and their true signatures."""
    world = load_world(world_name)
    sim = Simulator(world, seed=seed)
    frames, truth = [], []
    order = list(world.waypoint_ids)
    i = 0
    while len(frames) < count:
        wp = order[i % len(order)]
        i += 1
        if sim.battery < 0.5:  # frames, not battery management, are measured here
            sim.teleport(sim.at_waypoint or world.dock, battery=1.0)
        if sim.navigate(wp).outcome != "reached":
            if i > 10 * count + len(order):
                raise RuntimeError(f"world '{world_name}': cannot reach its waypoints")
            continue
        frames.append(sim.render_camera(width, height))
        info = sim.last_render
        truth.append("colors=" + ",".join(info.colors) if info else "colors=")
    return frames, truth


def time_backend(detect, frames: list[np.ndarray], min_seconds: float
                 ) -> tuple[float, int, list[list[Any]]]:
    """(fps, frames timed, detections of the first pass); 2 warm-up frames not timed."""
    for f in frames[:2]:
        detect(f)
    first: list[list[Any]] = []
    n = 0
    t0 = time.perf_counter()
    while True:
        for f in frames:
            dets = detect(f)
            if len(first) < len(frames):
                first.append(dets)
            n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            return n / elapsed, n, first


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("cv2", "ultralytics", "onnxruntime", "torch"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # absent or broken: recorded as such
            out[mod] = "not installed"
    return out


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 on success."""
    if args.frames < 1:
        raise ValueError("--frames must be >= 1")
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    if args.darknet:
        return _write(_perception_darknet.run(args.min_seconds, args.threads, say), args,
                      "bench/results/perception_darknet.json", say)
    frames, truth = render_frames(args.world, args.frames, args.width, args.height, args.seed)
    say(f"perception: {len(frames)} frames {args.width}x{args.height} from world "
        f"'{args.world}'")

    result: dict[str, Any] = {
        "benchmark": "perception",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "world": args.world,
        "frames": len(frames),
        "width": args.width,
        "height": args.height,
        "min_seconds": args.min_seconds,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                    # other work on the machine slows YOLO far more than the colour path
                    "loadavg_1m_at_start": round(os.getloadavg()[0], 2)
                    if hasattr(os, "getloadavg") else None},
        "backends": {},
    }

    color = ColorBlockDetector()
    fps, n, dets = time_backend(color.detect, frames, args.min_seconds)
    correct = sum(outcome_signature(d) == t for d, t in zip(dets, truth, strict=True))
    result["backends"]["color"] = {
        "fps": round(fps, 1), "ms_per_frame": round(1000 / fps, 3), "frames_timed": n,
        "signature_accuracy": round(correct / len(frames), 4),
    }
    say(f"  color (OpenCV HSV)    {fps:8.1f} fps  {1000 / fps:7.2f} ms/frame  "
        f"signatures right {correct}/{len(frames)}")

    yolo: dict[str, Any]
    if args.no_yolo:
        yolo = {"available": False, "reason": "--no-yolo"}
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="glove_yolo_") as tmp:
                model_path = args.yolo_model
                model_desc = model_path
                if model_path is None:
                    model_path = build_untrained_yolo_onnx(tmp, imgsz=args.imgsz)
                    model_desc = "yolo11n.yaml, untrained (random weights), exported to ONNX"
                det = YoloDetector(model_path, conf=0.25, imgsz=args.imgsz, device=args.device,
                                   classify_color=False)
                yfps, yn, _ = time_backend(det.detect, frames, args.min_seconds)
            yolo = {"available": True, "model": model_desc, "imgsz": args.imgsz,
                    "device": args.device, "fps": round(yfps, 1),
                    "ms_per_frame": round(1000 / yfps, 3), "frames_timed": yn}
            say(f"  yolo (ultralytics)    {yfps:8.1f} fps  {1000 / yfps:7.2f} ms/frame  "
                f"({model_desc}, {args.device})")
        except ImportError as exc:
            yolo = {"available": False, "reason": str(exc)}
            say(f"  yolo: skipped ({exc})")
    result["backends"]["yolo"] = yolo
    if yolo.get("available"):
        ratio = result["backends"]["color"]["fps"] / yolo["fps"]
        result["ratio_color_over_yolo"] = round(ratio, 1)
        say(f"  ratio color/yolo: {ratio:.1f}x")
    else:
        result["ratio_color_over_yolo"] = None
    result["versions"] = _versions()
    return _write(result, args, "bench/results/perception.json", say)


def _write(result: dict[str, Any], args: argparse.Namespace, default: str, say: Any) -> int:
    """Write the JSON (``--output``, else ``default``; '' skips) and print it for --json."""
    output = default if args.output is None else args.output
    if output:
        out = Path(output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        say(f"  wrote {out}")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # python -m glove_ros.benchmarks.perception
    p = argparse.ArgumentParser(description=__doc__)
    add_arguments(p)
    raise SystemExit(main(p.parse_args()))
