"""Messages as rosbags objects: build the ones glove_ros records, read back the ones it tests.

Separate from :mod:`glove_ros.core.bag.bagfile` (storage) because these functions convert
between core types (:class:`~glove_ros.core.memory.experience.Transition`, BGR images,
detections) and message objects of a rosbags typestore; they never touch a file.
``make-fixtures`` builds messages with them, the drift test reads them back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from glove_ros.core.bag.bagfile import NS
from glove_ros.core.memory.experience import Source, Transition

__all__ = [
    "GLOVE_TYPES",
    "detections_obj",
    "header_obj",
    "image_from_obj",
    "image_obj",
    "string_obj",
    "time_obj",
    "transition_from_obj",
    "transition_obj",
]

#: message type of each role a drift test reads
GLOVE_TYPES = {
    "transition": "glove_ros/msg/Transition",
    "detections": "glove_ros/msg/DetectionArray",
    "image": "sensor_msgs/msg/Image",
    "string": "std_msgs/msg/String",
}


def _ns_of(stamp: Any) -> int:
    return int(stamp.sec) * NS + int(stamp.nanosec)


def time_obj(ts: Any, ns: int) -> Any:
    """builtin_interfaces/Time for ``ns`` nanoseconds."""
    return ts.types["builtin_interfaces/msg/Time"](sec=int(ns // NS), nanosec=int(ns % NS))


def header_obj(ts: Any, ns: int, frame_id: str = "") -> Any:
    """std_msgs/Header."""
    return ts.types["std_msgs/msg/Header"](stamp=time_obj(ts, ns), frame_id=frame_id)


def string_obj(ts: Any, text: str) -> Any:
    """std_msgs/String."""
    return ts.types["std_msgs/msg/String"](data=text)


def transition_obj(ts: Any, t: Transition, frame_id: str = "map") -> Any:
    """Core Transition -> rosbags glove_ros/msg/Transition (stamp from ``t.stamp``)."""
    pose_t = ts.types["geometry_msgs/msg/Pose"]
    point = ts.types["geometry_msgs/msg/Point"]
    quat = ts.types["geometry_msgs/msg/Quaternion"]
    if t.pose is not None:
        x, y, yaw = t.pose
        pose = pose_t(position=point(x=float(x), y=float(y), z=0.0),
                      orientation=quat(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)))
    else:
        pose = pose_t(position=point(x=0.0, y=0.0, z=0.0),
                      orientation=quat(x=0.0, y=0.0, z=0.0, w=1.0))
    return ts.types[GLOVE_TYPES["transition"]](
        header=header_obj(ts, int(round(t.stamp * NS)), frame_id), robot_id=t.robot_id,
        episode_id=t.episode_id, state_key=t.state_key, has_pose=t.pose is not None, pose=pose,
        context=t.context, action=t.action, action_arg=t.action_arg, outcome=t.outcome,
        reward=float(t.reward), source=int(t.source))


def transition_from_obj(obj: Any) -> Transition:
    """rosbags glove_ros/msg/Transition -> validated core Transition (ValueError if bad)."""
    pose = None
    if obj.has_pose:
        q = obj.pose.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        pose = (float(obj.pose.position.x), float(obj.pose.position.y), yaw)
    if obj.source not in {s.value for s in Source}:
        raise ValueError(f"transition source {obj.source} is unknown")
    return Transition(
        state_key=obj.state_key, action=obj.action, outcome=obj.outcome,
        action_arg=obj.action_arg, robot_id=obj.robot_id, episode_id=obj.episode_id,
        pose=pose, context=obj.context, reward=float(obj.reward), source=Source(obj.source),
        stamp=_ns_of(obj.header.stamp) / NS,
    ).validate()


def image_obj(ts: Any, bgr: np.ndarray, ns: int, frame_id: str = "camera_link") -> Any:
    """BGR uint8 array -> sensor_msgs/Image (bgr8)."""
    h, w = bgr.shape[:2]
    return ts.types["sensor_msgs/msg/Image"](
        header=header_obj(ts, ns, frame_id), height=h, width=w, encoding="bgr8",
        is_bigendian=0, step=w * 3, data=np.ascontiguousarray(bgr, np.uint8).reshape(-1))


def image_from_obj(obj: Any) -> np.ndarray:
    """sensor_msgs/Image (bgr8, rgb8, mono8) -> BGR uint8 array; ValueError otherwise."""
    channels = {"bgr8": 3, "rgb8": 3, "mono8": 1}.get(obj.encoding)
    if channels is None:
        raise ValueError(f"unsupported image encoding '{obj.encoding}' (bgr8, rgb8, mono8)")
    h, w, step = int(obj.height), int(obj.width), int(obj.step)
    data = np.asarray(obj.data, np.uint8)
    if h == 0 or w == 0 or step < w * channels or data.size < step * h:
        raise ValueError(f"image data ({data.size} bytes, step {step}) does not match "
                         f"{w}x{h} {obj.encoding}")
    img = data[: step * h].reshape(h, step)[:, : w * channels].reshape(h, w, channels)
    if obj.encoding == "rgb8":
        return np.ascontiguousarray(img[:, :, ::-1])
    if obj.encoding == "mono8":
        return np.repeat(img, 3, axis=2)
    return np.ascontiguousarray(img)


def detections_obj(ts: Any, waypoint: str, detections: Sequence[Any], ns: int,
                   backend: str = "color", frame_id: str = "camera_link") -> Any:
    """Core detections -> glove_ros/msg/DetectionArray."""
    det = ts.types["glove_ros/msg/Detection"]
    return ts.types[GLOVE_TYPES["detections"]](
        header=header_obj(ts, ns, frame_id), waypoint=waypoint, backend=backend,
        detections=[det(label=d.label, color=d.color, x=int(d.x), y=int(d.y),
                        width=int(d.width), height=int(d.height),
                        confidence=float(d.confidence)) for d in detections])
