"""Perception node: colour blocks (OpenCV HSV) or objects (a trained detector), tagged with
the waypoint.

Interfaces (relative names; remap to the robot's camera in launch):
  sub  camera/image_raw   sensor_msgs/Image (bgr8, rgb8 or mono8); QoS ``camera_qos``:
                          ``sensor_data`` (default: BEST_EFFORT, depth 5, what camera drivers
                          publish and what also matches a RELIABLE publisher) or
                          ``reliable`` (RELIABLE, depth 2)
  sub  current_waypoint   std_msgs/String (where the robot stands; "" while driving)
  pub  detections         glove_ros/DetectionArray; ``backend`` names the backend. color:
                          label "block", color the colour name. darknet and yolo: label
                          the canonical COCO class (sofa -> couch, tvmonitor -> tv; a
                          custom model's own names, normalised), color always "" (the
                          observer then records objects= looks with counts, not colours)
  pub  /diagnostics       diagnostic_msgs/DiagnosticArray: camera rate, inference rate,
                          frames skipped and dropped

When to infer (``infer_when``): ``stopped`` (default) runs the detector only while the
robot stands at a waypoint (``current_waypoint`` not empty), the only frames a look uses;
``always`` on every frame. Either way at most ``max_rate`` inferences per second (0: no
limit); skipped frames are counted, never queued. Images and the waypoint arrive in
separate callback groups, so a slow inference never delays the waypoint update.

Backends: ``color`` (default; thresholds from ``color_config_file`` YAML, see
``config/perception_colors.yaml``), ``darknet`` (the trained detector that ships:
YOLOv3-tiny on the 80 COCO classes through OpenCV DNN, ``darknet.*`` thresholds; or your own
Darknet model in ``darknet.model_dir``) and ``yolo`` (ultralytics; ``yolo.model_path`` to a
.pt, .onnx or TensorRT .engine file). ``classes`` keeps only the classes of interest (darknet
and yolo). Nothing is ever downloaded; the model is loaded on activate. docs/perception.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import yaml
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image
from std_msgs.msg import String

from glove_ros.core.ops.health import OK, WARN, RateMeter
from glove_ros.core.world import darknet
from glove_ros.core.world.labels import canonical_label
from glove_ros.core.world.observation import kind_of_backend
from glove_ros.core.world.perception import (
    BACKENDS,
    ColorBlockDetector,
    ColorDetectorConfig,
    detector_from_params,
)
from glove_ros.msg import Detection, DetectionArray
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    latched_qos,
    param_values,
    run,
    validating_callback,
)
from glove_ros.nodes.diagnostics import NodeDiagnostics

_DARKNET = darknet.DarknetConfig()  # the darknet backend's defaults
PARAMS = (
    *AUTOSTART_PARAMS,
    Param("backend", "color", "'color' (OpenCV HSV colour blocks: colors= looks), 'darknet' "
          "(the shipped YOLOv3-tiny, COCO) or 'yolo' (ultralytics, your model); both publish "
          "canonical class labels without colour (objects= looks with counts)", read_only=True),
    Param("color_config_file", "", "YAML with HSV thresholds; empty = built-in defaults",
          read_only=True),
    Param("classes", [""], "classes of interest for darknet and yolo (e.g. [person, cup]; "
          "synonyms like sofa/couch accepted by darknet); empty = all", read_only=True),
    Param("darknet.model_dir", "", "folder with your own .cfg, .weights and .names; empty = "
          "the shipped YOLOv3-tiny", read_only=True),
    Param("darknet.score_threshold", _DARKNET.score_threshold, "darknet: lowest score "
          "(objectness x class probability) kept", read_only=True),
    Param("darknet.nms_threshold", _DARKNET.nms_threshold, "darknet: IoU above which the "
          "weaker box of one class is dropped", read_only=True),
    Param("darknet.containment_threshold", _DARKNET.containment_threshold, "darknet: share "
          "of the smaller of two boxes of one class inside the other above which they are "
          "one object, the weaker dropped (one cup is one cup)", read_only=True),
    Param("darknet.class_thresholds", [""], "darknet: per-class score thresholds, "
          "'NAME=VALUE' (e.g. [person=0.5, cup=0.3])", read_only=True),
    Param("darknet.input_size", _DARKNET.input_size, "darknet: square network input in "
          "pixels (multiple of 32; the frame is letterboxed into it)", read_only=True),
    Param("yolo.model_path", "", "YOLO model file (.pt, .onnx, .engine)", read_only=True),
    Param("yolo.confidence", 0.25, "YOLO confidence threshold"),
    Param("min_confidence", 0.0, "detections below this are not published"),
    Param("camera_qos", "sensor_data", "'sensor_data' (BEST_EFFORT, matches any camera) or "
          "'reliable'", read_only=True),
    Param("infer_when", "stopped", "'stopped' (only at a waypoint) or 'always'"),
    Param("max_rate", 0.0, "inferences per second at most (0: no limit)"),
)
CAMERA_QOS = ("sensor_data", "reliable")
INFER_WHEN = ("stopped", "always")


def camera_qos(name: str) -> QoSProfile:
    """The camera subscription's QoS for ``camera_qos``."""
    if name == "sensor_data":
        return qos_profile_sensor_data
    return QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)


def should_infer(infer_when: str, waypoint: str, max_rate: float, last: float | None,
                 now: float) -> bool:
    """Whether a frame arriving at ``now`` is run through the detector."""
    if infer_when == "stopped" and not waypoint:
        return False
    return not (max_rate > 0 and last is not None and now - last < 1.0 / max_rate)


def validate(values: dict[str, Any]) -> None:
    """Refuse parameter values the node cannot work with."""
    if values["backend"] not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got "
                         f"'{values['backend']}'")
    if values["backend"] == "yolo" and not values["yolo.model_path"]:
        raise ValueError("backend 'yolo' needs yolo.model_path (.pt, .onnx or .engine)")
    if values["backend"] == "color" and _classes(values):
        raise ValueError("classes applies to the darknet and yolo backends; the color backend "
                         "reports colours (set color_config_file instead)")
    darknet.config_from_params(values)  # ValueError for bad thresholds or input size
    for key in ("yolo.confidence", "min_confidence"):
        if not 0.0 <= float(values[key]) <= 1.0:
            raise ValueError(f"{key} must be within 0..1")
    if values["camera_qos"] not in CAMERA_QOS:
        raise ValueError(f"camera_qos must be one of {', '.join(CAMERA_QOS)} "
                         f"(got '{values['camera_qos']}')")
    if values["infer_when"] not in INFER_WHEN:
        raise ValueError(f"infer_when must be one of {', '.join(INFER_WHEN)} "
                         f"(got '{values['infer_when']}')")
    if float(values["max_rate"]) < 0:
        raise ValueError("max_rate must be >= 0 (0: no limit)")


def _classes(values: dict[str, Any]) -> list[str]:
    return [str(c).strip() for c in values["classes"] if str(c).strip()]


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


def detection_msgs(detections: Sequence[Any], backend: str,
                   min_confidence: float = 0.0) -> list[Detection]:
    """The glove_ros/Detection messages of one frame's core detections.

    Detections below ``min_confidence`` are dropped. A trained detector's (``darknet``,
    ``yolo``: look kind ``objects``) detection is published as its canonical class
    (:func:`~glove_ros.core.world.labels.canonical_label`) with an empty colour: the box's
    dominant colour that the yolo backend reads is not published, so a red cup is a cup,
    not "red". ``color`` detections are published as they are.
    """
    objects = kind_of_backend(backend) == "objects"
    out = []
    for d in detections:
        if d.confidence < min_confidence:
            continue
        label, color = (canonical_label(d.label), "") if objects else (d.label, d.color)
        out.append(Detection(label=label, color=color, x=int(d.x), y=int(d.y),
                             width=int(d.width), height=int(d.height),
                             confidence=float(d.confidence)))
    return out


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
        self._skipped = 0
        self._last_infer: float | None = None
        self._camera = RateMeter()
        self._inferences = RateMeter()
        self._camera_topic = ""
        self._diagnostics = NodeDiagnostics(self, self._diagnose)

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
        values = param_values(self, PARAMS)
        backend = str(values["backend"])
        try:
            if backend == "color":
                self._detector = ColorBlockDetector(self._color_config)
            else:
                self._detector = detector_from_params(values)
        except Exception as exc:  # missing model file, ultralytics absent, bad file
            self.get_logger().error(f"cannot load the {backend} detector: {exc}")
            return TransitionCallbackReturn.FAILURE
        if self._pub is None:
            self._pub = self.create_publisher(DetectionArray, "detections", 10)
        qos = str(self.get_parameter("camera_qos").value)
        self._handles = [
            self.create_subscription(Image, "camera/image_raw", self._on_image, camera_qos(qos),
                                     callback_group=MutuallyExclusiveCallbackGroup()),
            self.create_subscription(String, "current_waypoint", self._on_waypoint, latched_qos(),
                                     callback_group=MutuallyExclusiveCallbackGroup()),
        ]
        self._camera_topic = self._handles[0].topic_name
        classes = _classes(values)
        self.get_logger().info(f"perception active with the {backend} backend"
                               + (f" (classes: {', '.join(classes)})" if classes else "")
                               + f"; camera {self._camera_topic} ({qos} QoS), inference "
                               f"{self.get_parameter('infer_when').value}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        for h in self._handles:
            self.destroy_subscription(h)
        self._handles = []
        self._detector = None  # release the model
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._pub is not None:
            self.destroy_publisher(self._pub)
            self._pub = None
        self._color_config = None
        return TransitionCallbackReturn.SUCCESS

    def _diagnose(self) -> tuple[int, str, dict[str, Any]]:
        """/diagnostics: camera rate, inference rate, skipped and dropped frames."""
        camera, infer = self._camera.rate(), self._inferences.rate()
        values = {"camera_topic": self._camera_topic, "camera_hz": camera, "inference_hz": infer,
                  "frames": self._camera.total, "inferences": self._inferences.total,
                  "skipped_while_driving_or_rate_limited": self._skipped,
                  "dropped_bad_frames": self._bad,
                  "camera_qos": self.get_parameter("camera_qos").value}
        if self._detector is None:
            return WARN, "inactive (no detector loaded)", values
        if camera == 0.0:
            return WARN, (f"no camera frames on {self._camera_topic} for "
                          f"{self._camera.window:.0f}s (driver running? QoS?)"), values
        return OK, f"camera {camera:.1f} Hz, inference {infer:.1f} Hz", values

    def _on_waypoint(self, msg: String) -> None:
        with self._lock:
            self._waypoint = msg.data

    def _on_image(self, msg: Image) -> None:
        detector = self._detector
        if detector is None or self._pub is None:
            return
        self._camera.tick()
        with self._lock:
            waypoint = self._waypoint
        now = time.monotonic()
        if not should_infer(str(self.get_parameter("infer_when").value), waypoint,
                            float(self.get_parameter("max_rate").value), self._last_infer, now):
            self._skipped += 1
            return
        self._last_infer = now
        self._inferences.tick()
        try:
            image = image_to_bgr(msg)
            detections = detector.detect(image)
        except ValueError as exc:
            self._bad += 1
            if self._bad in (1, 10, 100) or self._bad % 1000 == 0:
                self.get_logger().warning(f"dropped frame ({exc}); {self._bad} dropped so far")
            return
        min_conf = float(self.get_parameter("min_confidence").value)
        out = DetectionArray(backend=detector.backend)
        out.header = msg.header
        out.waypoint = waypoint
        out.detections = detection_msgs(detections, detector.backend, min_conf)
        self._pub.publish(out)
        self._frames += 1


def main(args: Sequence[str] | None = None) -> int:
    """Run the perception node."""
    return run(PerceptionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
