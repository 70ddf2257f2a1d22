"""Perception node: colour blocks (OpenCV HSV) or YOLO objects, tagged with the waypoint.

Interfaces (relative names; remap to the robot's camera in launch):
  sub  camera/image_raw   sensor_msgs/Image (bgr8, rgb8 or mono8)
  sub  current_waypoint   std_msgs/String (where the robot stands; "" while driving)
  pub  detections         glove_ros/DetectionArray

Backends: ``color`` (default; thresholds from ``color_config_file`` YAML, see
``config/perception_colors.yaml``) and ``yolo`` (ultralytics; ``yolo.model_path`` to a
.pt, .onnx or TensorRT .engine file; never downloads). The model is loaded on activate.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import yaml
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import Image
from std_msgs.msg import String

from glove_ros.core.perception import ColorBlockDetector, ColorDetectorConfig, make_detector
from glove_ros.msg import Detection, DetectionArray
from glove_ros.nodes.common import (
    Param,
    declare_params,
    latched_qos,
    param_values,
    run,
    validating_callback,
)

PARAMS = (
    Param("autostart", True, "configure and activate at start (no lifecycle manager)"),
    Param("backend", "color", "'color' (OpenCV HSV) or 'yolo' (ultralytics)", read_only=True),
    Param("color_config_file", "", "YAML with HSV thresholds; empty = built-in defaults",
          read_only=True),
    Param("yolo.model_path", "", "YOLO model file (.pt, .onnx, .engine)", read_only=True),
    Param("yolo.confidence", 0.25, "YOLO confidence threshold"),
    Param("min_confidence", 0.0, "detections below this are not published"),
)


def validate(values: dict[str, Any]) -> None:
    """Refuse parameter values the node cannot work with."""
    if values["backend"] not in ("color", "yolo"):
        raise ValueError(f"backend must be 'color' or 'yolo', got '{values['backend']}'")
    if values["backend"] == "yolo" and not values["yolo.model_path"]:
        raise ValueError("backend 'yolo' needs yolo.model_path (.pt, .onnx or .engine)")
    for key in ("yolo.confidence", "min_confidence"):
        if not 0.0 <= float(values[key]) <= 1.0:
            raise ValueError(f"{key} must be within 0..1")


def image_to_bgr(msg: Image) -> np.ndarray:
    """sensor_msgs/Image -> BGR uint8 array; ValueError for unsupported or bad images."""
    channels = {"bgr8": 3, "rgb8": 3, "mono8": 1}.get(msg.encoding)
    if channels is None:
        raise ValueError(f"unsupported image encoding '{msg.encoding}' (bgr8, rgb8, mono8)")
    if msg.height == 0 or msg.width == 0:
        raise ValueError("empty image")
    if msg.step < msg.width * channels or len(msg.data) < msg.step * msg.height:
        raise ValueError(f"image data ({len(msg.data)} bytes, step {msg.step}) does not "
                         f"match {msg.width}x{msg.height} {msg.encoding}")
    buf = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)
    img = buf[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    if msg.encoding == "rgb8":
        return np.ascontiguousarray(img[:, :, ::-1])
    if msg.encoding == "mono8":
        return np.repeat(img, 3, axis=2)
    return img


class PerceptionNode(LifecycleNode):
    """Runs the configured detector on every camera frame."""

    def __init__(self) -> None:
        super().__init__("perception")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._detector: Any = None
        self._color_config: ColorDetectorConfig | None = None
        self._waypoint = ""
        self._lock = threading.Lock()
        self._handles: list[Any] = []
        self._pub = None
        self._frames = 0
        self._bad = 0

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            path = str(values["color_config_file"])
            if path:
                with open(path) as f:
                    self._color_config = ColorDetectorConfig.from_dict(yaml.safe_load(f) or {})
        except (ValueError, OSError, yaml.YAMLError) as exc:
            self.get_logger().error(f"cannot configure perception: {exc}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        backend = str(self.get_parameter("backend").value)
        try:
            if backend == "color":
                self._detector = ColorBlockDetector(self._color_config)
            else:
                self._detector = make_detector(
                    "yolo", model_path=str(self.get_parameter("yolo.model_path").value),
                    conf=float(self.get_parameter("yolo.confidence").value))
        except Exception as exc:  # missing model file, ultralytics absent, bad file
            self.get_logger().error(f"cannot load the {backend} detector: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._pub = self.create_publisher(DetectionArray, "detections", 10)
        self._handles = [
            self.create_subscription(Image, "camera/image_raw", self._on_image, 2),
            self.create_subscription(String, "current_waypoint", self._on_waypoint, latched_qos()),
        ]
        self.get_logger().info(f"perception active with the {backend} backend")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        for h in self._handles:
            self.destroy_subscription(h)
        self._handles = []
        self._detector = None  # release the model
        return super().on_deactivate(state)

    def _on_waypoint(self, msg: String) -> None:
        with self._lock:
            self._waypoint = msg.data

    def _on_image(self, msg: Image) -> None:
        if self._detector is None or self._pub is None:
            return
        try:
            image = image_to_bgr(msg)
            detections = self._detector.detect(image)
        except ValueError as exc:
            self._bad += 1
            if self._bad in (1, 10, 100) or self._bad % 1000 == 0:
                self.get_logger().warning(f"dropped frame ({exc}); {self._bad} dropped so far")
            return
        min_conf = float(self.get_parameter("min_confidence").value)
        out = DetectionArray(backend=self._detector.backend)
        out.header = msg.header
        with self._lock:
            out.waypoint = self._waypoint
        out.detections = [
            Detection(label=d.label, color=d.color, x=int(d.x), y=int(d.y), width=int(d.width),
                      height=int(d.height), confidence=float(d.confidence))
            for d in detections if d.confidence >= min_conf
        ]
        self._pub.publish(out)
        self._frames += 1


def main(args: Sequence[str] | None = None) -> int:
    """Run the perception node."""
    return run(PerceptionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
