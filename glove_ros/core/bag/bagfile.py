"""rosbag2 files without ROS: read, write, extract robot experience, score a drift test.

Built on the ``rosbags`` library (pure Python; reads and writes rosbag2 directories with
mcap or sqlite3 storage, and bare ``.mcap`` / ``.db3`` files). Nothing here imports rclpy:
``glove-ros bag drift-test`` and ``make-fixtures`` work from ``pip install glove_ros[bags]``.

* :func:`make_typestore`: the message types of a ROS 2 distribution plus glove_ros's own
  types, registered from the package's ``msg/*.msg`` files (nested ``glove_ros/Detection``
  included); :func:`ensure_type` adds any other installed ``.msg`` type on demand.
* :class:`BagReader` / :class:`BagWriter`: thin wrappers that turn every failure of a bad
  bag (missing ``metadata.yaml``, truncated storage file, unknown message type, ...) into a
  :class:`BagError` with one line a user can act on.
* :func:`load_input`: the experience a bag holds, as timed core transitions: the recorded
  ``transitions`` topic, or look outcomes rebuilt from ``detections`` or from camera frames
  with the look rule of :mod:`glove_ros.core.world.observation`.
* :func:`verify_core` / :func:`analyse` / :class:`Expectations`: run the GLOVE verifier
  over a source and a drifted recording and score it: alerts, false alarms, detection delay,
  suppressed and replaced memories, checked against a user's expectation file.

Times: every message has its *bag time* (when the recorder received it, ns); drift time,
delays and "before / after the drift" are measured on that one clock, because header
stamps may be simulated time while ``world_events`` only has a bag time.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sqlite3
import struct
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.core.memory.experience import Source, Transition
from glove_ros.core.world.observation import Frame, LookAggregator, LookConfig, colors_of

__all__ = [
    "DEFAULT_TOPICS",
    "INPUT_KINDS",
    "LATCHED_TOPICS",
    "NS",
    "AlertRecord",
    "BagError",
    "BagInput",
    "BagReader",
    "BagWriter",
    "Expectations",
    "QosSpec",
    "Timed",
    "TopicNames",
    "analyse",
    "detections_obj",
    "drift_from_events",
    "ensure_type",
    "format_report",
    "glove_msg_dir",
    "header_obj",
    "image_from_obj",
    "image_obj",
    "load_input",
    "make_typestore",
    "ros_distro",
    "string_obj",
    "time_obj",
    "touched_pairs",
    "transition_from_obj",
    "transition_obj",
    "verify_core",
]

NS = 1_000_000_000

#: topics ``glove-ros bag record`` writes when none are named (relative: resolved in the
#: recorder's namespace)
DEFAULT_TOPICS = (
    "camera/image_raw", "detections", "odom", "transitions", "dissonance", "memory_events",
    "world_events", "current_waypoint", "/clock",
)

#: what a drift test can rebuild experience from
INPUT_KINDS = ("auto", "transitions", "detections", "camera")

GLOVE_TYPES = {
    "transition": "glove_ros/msg/Transition",
    "detections": "glove_ros/msg/DetectionArray",
    "image": "sensor_msgs/msg/Image",
    "string": "std_msgs/msg/String",
}


#: state topics published latched (transient local, depth 1) by the glove_ros nodes
LATCHED_TOPICS = ("current_waypoint", "docked")


@dataclass(frozen=True)
class QosSpec:
    """The QoS a topic was offered with, as far as replay needs it."""

    reliable: bool = True
    transient_local: bool = False
    depth: int = 10

    @classmethod
    def for_topic(cls, topic: str) -> QosSpec:
        """What glove_ros publishes ``topic`` with: latched state topics, else reliable."""
        if topic.rstrip("/").rsplit("/", 1)[-1] in LATCHED_TOPICS:
            return cls(reliable=True, transient_local=True, depth=1)
        return cls()

    def to_rosbags(self) -> Any:
        """The rosbags ``Qos`` written to metadata.yaml (offered_qos_profiles)."""
        from rosbags.interfaces import (
            Qos,
            QosDurability,
            QosHistory,
            QosLiveliness,
            QosReliability,
            QosTime,
        )

        zero = QosTime(0, 0)
        return Qos(QosHistory.KEEP_LAST, int(self.depth),
                   QosReliability.RELIABLE if self.reliable else QosReliability.BEST_EFFORT,
                   QosDurability.TRANSIENT_LOCAL if self.transient_local
                   else QosDurability.VOLATILE, zero, zero, QosLiveliness.AUTOMATIC, zero, False)

    @classmethod
    def from_rosbags(cls, profiles: Sequence[Any]) -> QosSpec | None:
        """From a connection's offered profiles (None when the bag has none)."""
        if not profiles:
            return None
        reliable = all(getattr(q.reliability, "name", "") != "BEST_EFFORT" for q in profiles)
        latched = all(getattr(q.durability, "name", "") == "TRANSIENT_LOCAL" for q in profiles)
        depth = max((int(q.depth) for q in profiles), default=0) or 10
        return cls(reliable, latched, depth)


class BagError(ValueError):
    """A bag cannot be used; the message is one line saying why and what to do."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


# --------------------------------------------------------------------------- types


def ros_distro(default: str = "kilted") -> str:
    """The ROS 2 distribution whose standard types are assumed (``$ROS_DISTRO``)."""
    return (os.environ.get("ROS_DISTRO") or default).strip().lower()


def glove_msg_dir() -> Path | None:
    """The directory of glove_ros's ``.msg`` files (source checkout or ROS install)."""
    from glove_ros.paths import share_dirs

    for base in share_dirs():
        if (base / "msg" / "Transition.msg").is_file():
            return base / "msg"
    return None


def _referenced(fielddefs: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if "/msg/" in node:
                out.add(node)
        elif isinstance(node, (tuple, list)):
            for item in node:
                walk(item)

    for _consts, flds in fielddefs.values():
        for _name, desc in flds:
            walk(desc)
    return out


def _msg_file(msgtype: str) -> Path | None:
    pkg, _, name = msgtype.partition("/msg/")
    if not pkg or not name:
        return None
    dirs: list[Path] = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            dirs.append(Path(prefix) / "share" / pkg / "msg")
    if pkg == "glove_ros":
        d = glove_msg_dir()
        if d is not None:
            dirs.insert(0, d)
    for d in dirs:
        f = d / f"{name}.msg"
        if f.is_file():
            return f
    return None


def ensure_type(typestore: Any, msgtype: str) -> bool:
    """Make ``msgtype`` (``pkg/msg/Name``) known to ``typestore``; False if it cannot be.

    Types the store lacks are registered from installed ``.msg`` files
    (``$AMENT_PREFIX_PATH/share/PKG/msg/NAME.msg``), with the types they reference.
    """
    from rosbags.typesys import get_types_from_msg

    visiting: set[str] = set()

    def load(name: str) -> bool:
        if name in typestore.fielddefs:
            return True
        if name in visiting:  # a cycle: not a valid ROS message
            return False
        visiting.add(name)
        path = _msg_file(name)
        if path is None:
            return False
        try:
            found = get_types_from_msg(path.read_text(), name)
        except Exception:  # a .msg file rosbags cannot parse
            return False
        if not all(load(dep) for dep in _referenced(found) if dep not in found):
            return False
        try:
            typestore.register(found)
        except Exception:
            return False
        return True

    if not load(msgtype):
        return False
    try:
        typestore.generate_msgdef(msgtype, ros_version=2)
    except Exception:
        return False
    return True


def make_typestore(distro: str | None = None) -> Any:
    """A rosbags typestore: the standard types of ``distro`` (default ``$ROS_DISTRO``, else
    the latest) plus glove_ros's types from its ``msg/*.msg`` files."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    name = f"ROS2_{(distro or ros_distro()).upper()}"
    store = get_typestore(getattr(Stores, name, Stores.LATEST))
    d = glove_msg_dir()
    if d is not None:
        types: dict[str, Any] = {}
        for f in sorted(d.glob("*.msg")):
            types.update(get_types_from_msg(f.read_text(), f"glove_ros/msg/{f.stem}"))
        store.register(types)
    return store


# --------------------------------------------------------------------------- reading


@contextlib.contextmanager
def _bag_errors(path: Path, what: str = "") -> Iterator[None]:
    """Turn any failure while reading ``path`` into a one-line BagError."""
    try:
        yield
    except BagError:
        raise
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except FileNotFoundError as exc:
        raise BagError(f"bag {path}: {_one_line(exc)}") from None
    except sqlite3.DatabaseError as exc:
        raise BagError(f"bag {path}: the sqlite3 storage file is damaged or truncated "
                       f"({_one_line(exc)})") from None
    except (struct.error, EOFError) as exc:
        raise BagError(f"bag {path}: the storage file ends early (truncated? "
                       f"{_one_line(exc)}); try 'ros2 bag reindex' or re-record") from None
    except Exception as exc:  # rosbags ReaderError, AnyReaderError, TypesysError, ...
        reason = _one_line(exc).rstrip(".")
        low = reason.lower()
        if "magic" in low or "unexpected end" in low or "truncat" in low:
            reason = (f"the storage file is truncated or was never closed (recording killed?): "
                      f"{reason}; try 'ros2 bag reindex' or re-record")
        elif "malformed" in low or "not a database" in low:
            reason = f"the sqlite3 storage file is damaged or truncated: {reason}"
        raise BagError(f"bag {path}{': ' + what if what else ''}: {reason}") from None


class BagReader:
    """Read a rosbag2 directory, or a bare ``.mcap`` / ``.db3`` file.

    Types come from the definitions the bag carries (mcap, rosbag2 >= Iron), completed by
    ``typestore`` (default :func:`make_typestore`). Every failure is a :class:`BagError`.
    Use as a context manager.
    """

    def __init__(self, path: str | os.PathLike[str], typestore: Any = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f"bag {self.path}: no such file or directory")
        if self.path.is_dir() and not (self.path / "metadata.yaml").is_file():
            files = sorted(p.name for p in self.path.iterdir()
                           if p.suffix in (".mcap", ".db3"))
            hint = (f"; to read the storage file without it pass {self.path / files[0]}"
                    if files else "")
            raise BagError(f"bag {self.path}: metadata.yaml is missing, so this is not a "
                           f"complete rosbag2 directory{hint} (or rebuild it with "
                           f"'ros2 bag reindex')")
        if self.path.is_file() and self.path.suffix not in (".mcap", ".db3"):
            raise BagError(f"bag {self.path}: not a rosbag2 directory nor a .mcap / .db3 file")
        self._default = typestore if typestore is not None else make_typestore()
        from rosbags.highlevel import AnyReader

        with _bag_errors(self.path):
            self._reader = AnyReader([self.path], default_typestore=self._default)
            self._reader.open()
        store = self._reader.typestore
        extra = {k: v for k, v in self._default.fielddefs.items() if k not in store.fielddefs}
        with contextlib.suppress(Exception):
            store.register(extra)
        self.typestore = store

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the storage files."""
        with contextlib.suppress(Exception):
            self._reader.close()

    @property
    def topics(self) -> dict[str, tuple[str, int]]:
        """Topic name -> (message type, message count)."""
        out: dict[str, tuple[str, int]] = {}
        for c in self._reader.connections:
            typ, n = out.get(c.topic, (c.msgtype, 0))
            out[c.topic] = (typ, n + int(c.msgcount))
        return out

    @property
    def start_ns(self) -> int:
        """Bag time of the first message (ns)."""
        return int(self._reader.start_time) if self._reader.message_count else 0

    @property
    def end_ns(self) -> int:
        """Bag time just after the last message (ns)."""
        return int(self._reader.end_time) if self._reader.message_count else 0

    @property
    def message_count(self) -> int:
        """Messages in the bag according to its metadata."""
        return int(self._reader.message_count)

    def find_topic(self, name: str) -> str | None:
        """The bag topic called ``name`` (absolute or relative), else the only one whose name
        ends with ``/name`` (a namespaced robot), else None."""
        want = name if name.startswith("/") else "/" + name
        topics = self.topics
        if want in topics:
            return want
        tails = [t for t in topics if t.endswith(want)]
        return tails[0] if len(tails) == 1 else None

    def qos(self, topic: str) -> QosSpec:
        """The QoS ``topic`` was offered with (metadata), else :meth:`QosSpec.for_topic`."""
        for c in self._reader.connections:
            if c.topic == topic:
                spec = QosSpec.from_rosbags(getattr(c.ext, "offered_qos_profiles", []) or [])
                if spec is not None:
                    return spec
        return QosSpec.for_topic(topic)

    def known(self, msgtype: str) -> bool:
        """Whether messages of ``msgtype`` can be decoded."""
        return msgtype in self.typestore.fielddefs or ensure_type(self.typestore, msgtype)

    def messages(self, topics: Iterable[str] | None = None) -> Iterator[tuple[str, str, int, Any]]:
        """``(topic, msgtype, bag_time_ns, raw_cdr)`` in bag-time order, for ``topics`` (all
        when None). Raises BagError when the storage holds fewer messages than its metadata
        says (truncated file)."""
        want = None if topics is None else set(topics)
        conns = [c for c in self._reader.connections if want is None or c.topic in want]
        if not conns:
            return
        expected: Counter[str] = Counter()
        for c in conns:
            expected[c.topic] += int(c.msgcount)
        got: Counter[str] = Counter()
        with _bag_errors(self.path):
            for conn, t_ns, raw in self._reader.messages(connections=conns):
                got[conn.topic] += 1
                yield conn.topic, conn.msgtype, int(t_ns), raw
        short = {t: (n, got[t]) for t, n in expected.items() if n and got[t] < n}
        if short:
            topic, (n, m) = sorted(short.items())[0]
            raise BagError(f"bag {self.path}: {topic} should hold {n} messages but the storage "
                           f"file has {m} (truncated? try 'ros2 bag reindex' or re-record)")

    def decode(self, msgtype: str, raw: Any, topic: str = "") -> Any:
        """Deserialize one CDR message (BagError naming the topic if the type is unknown)."""
        if not self.known(msgtype):
            raise BagError(f"bag {self.path}: topic {topic or '?'} has message type {msgtype}, "
                           f"which neither the bag nor this installation defines")
        with _bag_errors(self.path, f"cannot decode a {msgtype} message on {topic or '?'}"):
            return self.typestore.deserialize_cdr(raw, msgtype)


# --------------------------------------------------------------------------- writing


class BagWriter:
    """Write a rosbag2 directory ``ros2 bag`` reads (metadata.yaml, type hashes, message
    definitions). ``version`` 8 keeps QoS metadata in the form ROS 2 Humble reads; mcap
    chunks are zstd-compressed inside the file (transparent to every mcap reader).
    Use as a context manager: the bag is finalised on exit, also after an error.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, storage: str = "mcap", version: int = 8,
        compress: bool = True, typestore: Any = None,
    ) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

        self.path = Path(path)
        if storage not in ("mcap", "sqlite3"):
            raise BagError(f"storage must be 'mcap' or 'sqlite3', got {storage!r}")
        if version not in (8, 9):
            raise BagError(f"bag version must be 8 (readable by Humble .. Kilted) or 9, "
                           f"got {version!r}")
        if self.path.exists():
            raise BagError(f"{self.path} exists already; give a new directory for the bag")
        self.typestore = typestore if typestore is not None else make_typestore()
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=version, storage_plugin=plugin)
        if compress and storage == "mcap":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        try:
            self._writer.open()
        except Exception as exc:
            raise BagError(f"cannot create bag {self.path}: {_one_line(exc)}") from None
        self._conns: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.closed = False

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def has_topic(self, topic: str) -> bool:
        """Whether ``topic`` was added."""
        return topic in self._conns

    def add_topic(self, topic: str, msgtype: str, digest: str | None = None,
                  qos: QosSpec | None = None) -> None:
        """Declare ``topic`` with ``msgtype`` and the QoS it was offered with (default:
        :meth:`QosSpec.for_topic`); BagError when the type is unknown here."""
        if topic in self._conns:
            return
        if not ensure_type(self.typestore, msgtype):
            raise BagError(f"message type {msgtype} of {topic} is unknown here: no definition "
                           f"in the type store nor an installed .msg file")
        msgdef, _ = self.typestore.generate_msgdef(msgtype, ros_version=2)
        rihs01 = digest or self.typestore.hash_rihs01(msgtype)
        spec = qos or QosSpec.for_topic(topic)
        self._conns[topic] = self._writer.add_connection(
            topic, msgtype, msgdef=msgdef, rihs01=rihs01,
            offered_qos_profiles=[spec.to_rosbags()])
        self._types[topic] = msgtype

    def write(self, topic: str, t_ns: int, raw: bytes | memoryview) -> None:
        """Write one serialized (CDR) message received at bag time ``t_ns``."""
        self._writer.write(self._conns[topic], int(t_ns), raw)
        self.counts[topic] += 1

    def write_msg(self, topic: str, t_ns: int, msg: Any, msgtype: str | None = None) -> None:
        """Serialize a rosbags message object and write it (adds the topic if needed)."""
        typ = msgtype or msg.__msgtype__
        self.add_topic(topic, typ)
        self.write(topic, t_ns, self.typestore.serialize_cdr(msg, typ))

    def close(self) -> None:
        """Finalise: write the mcap summary / sqlite index and metadata.yaml."""
        if self.closed:
            return
        self.closed = True
        self._writer.close()

    def abort(self) -> None:
        """Give up: remove the partial bag."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                self._writer.abort()
        shutil.rmtree(self.path, ignore_errors=True)


# --------------------------------------------------------------------------- messages


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


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class TopicNames:
    """Topic names a drift test reads (absolute, or relative = any namespace)."""

    transitions: str = "/transitions"
    detections: str = "/detections"
    camera: str = "/camera/image_raw"
    waypoint: str = "/current_waypoint"
    world_events: str = "/world_events"


@dataclass(frozen=True)
class Timed:
    """A transition with the bag time it belongs to (ns)."""

    transition: Transition
    bag_ns: int


@dataclass
class BagInput:
    """The experience one bag holds, in bag-time order.

    ``kind`` is where looks came from (``transitions``, ``detections`` or ``camera``);
    ``world_events`` are ``(bag_ns, text)``; ``stamp_to_bag`` maps header stamps (ns) of
    the transitions and of the frames looks were built from to their bag time.
    """

    path: Path
    kind: str
    items: list[Timed]
    start_ns: int
    end_ns: int
    world_events: list[tuple[int, str]] = field(default_factory=list)
    stamp_to_bag: dict[int, int] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)  # role -> bag topic used

    @property
    def transitions(self) -> list[Transition]:
        """The transitions alone."""
        return [i.transition for i in self.items]


def _require_type(bag: BagReader, topic: str, msgtype: str, want: str) -> None:
    if msgtype != want:
        raise BagError(f"bag {bag.path}: topic {topic} has type {msgtype}, expected {want}")
    if not bag.known(msgtype):
        raise BagError(f"bag {bag.path}: topic {topic} has message type {msgtype}, which "
                       f"neither the bag nor this installation defines")


def load_input(
    path: str | os.PathLike[str],
    kind: str = "auto",
    *,
    topics: TopicNames | None = None,
    look: LookConfig | None = None,
    detector: Any = None,
    robot_id: str = "",
    episode_id: str = "",
    typestore: Any = None,
) -> BagInput:
    """Read the experience in a bag as timed transitions (see :class:`BagInput`).

    ``kind``: ``transitions`` (the recorded topic), ``detections`` (looks rebuilt from
    detection arrays), ``camera`` (looks rebuilt from images tagged by the latest
    ``current_waypoint``, detected with ``detector``, default the colour detector), or
    ``auto`` (the first of those the bag has). With ``detections`` or ``camera``, recorded
    transitions other than looks (navigation) are kept as they are.
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"input must be one of {', '.join(INPUT_KINDS)}, got {kind!r}")
    names = topics or TopicNames()
    cfg = (look or LookConfig()).validate()
    with BagReader(path, typestore) as bag:
        found = {role: bag.find_topic(getattr(names, role)) for role in
                 ("transitions", "detections", "camera", "waypoint", "world_events")}
        counts = {role: bag.topics[t][1] if t else 0 for role, t in found.items()}
        if kind == "auto":
            kind = next((k for k in ("transitions", "detections", "camera") if counts[k]), "")
            if not kind:
                raise BagError(
                    f"bag {bag.path}: no experience to test: none of {names.transitions}, "
                    f"{names.detections}, {names.camera} has messages (topics: "
                    f"{', '.join(sorted(bag.topics)) or 'none'})")
        if not found[kind]:
            want = {"transitions": names.transitions, "detections": names.detections,
                    "camera": names.camera}[kind]
            raise BagError(f"bag {bag.path}: no topic {want} for input '{kind}' (topics: "
                           f"{', '.join(sorted(bag.topics)) or 'none'})")
        wanted = {t: role for role, t in found.items() if t and (
            role in ("transitions", "world_events") or role == kind
            or (kind == "camera" and role == "waypoint"))}
        expect = {"transitions": GLOVE_TYPES["transition"], "detections":
                  GLOVE_TYPES["detections"], "camera": GLOVE_TYPES["image"],
                  "waypoint": GLOVE_TYPES["string"], "world_events": GLOVE_TYPES["string"]}
        for topic, role in wanted.items():
            _require_type(bag, topic, bag.topics[topic][0], expect[role])
        if kind == "camera" and detector is None:
            from glove_ros.core.world.perception import ColorBlockDetector

            detector = ColorBlockDetector()

        items: list[Timed] = []
        events: list[tuple[int, str]] = []
        stamp_map: dict[int, int] = {}
        agg = LookAggregator(cfg)
        waypoint = ""
        frame_ns: dict[float, int] = {}

        def add_looks(looks: Iterable[Any], now_ns: int) -> None:
            for lk in looks:
                t = lk.to_transition(robot_id, episode_id)
                items.append(Timed(t, frame_ns.get(lk.stamp, now_ns)))

        for topic, msgtype, t_ns, raw in bag.messages(wanted):
            role = wanted[topic]
            obj = bag.decode(msgtype, raw, topic)
            if role == "world_events":
                events.append((t_ns, str(obj.data)))
            elif role == "transitions":
                try:
                    t = transition_from_obj(obj)
                except ValueError as exc:
                    raise BagError(f"bag {bag.path}: bad transition on {topic} at "
                                   f"{(t_ns - bag.start_ns) / NS:.3f}s: {exc}") from None
                if kind == "transitions" or t.action != "look":
                    items.append(Timed(t, t_ns))
                    stamp_map[int(round(t.stamp * NS))] = t_ns
            elif role == "waypoint":
                waypoint = str(obj.data)  # tags the following frames, as perception does
            elif role == "detections":
                stamp = _ns_of(obj.header.stamp)
                frame = Frame(str(obj.waypoint), colors_of(obj.detections, cfg.min_confidence),
                              stamp / NS)
                frame_ns[frame.stamp] = t_ns
                stamp_map[stamp] = t_ns
                add_looks(agg.add(frame), t_ns)
            elif role == "camera":
                stamp = _ns_of(obj.header.stamp)
                try:
                    image = image_from_obj(obj)
                except ValueError as exc:
                    raise BagError(f"bag {bag.path}: bad image on {topic}: {exc}") from None
                colors = colors_of(detector.detect(image), cfg.min_confidence)
                frame = Frame(waypoint, colors, stamp / NS)
                frame_ns[frame.stamp] = t_ns
                stamp_map[stamp] = t_ns
                add_looks(agg.add(frame), t_ns)
        add_looks(agg.flush(), bag.end_ns)
        items.sort(key=lambda i: i.bag_ns)
        return BagInput(Path(path), kind, items, bag.start_ns, bag.end_ns, events, stamp_map,
                        {role: t for t, role in wanted.items()})


def drift_from_events(events: Sequence[tuple[int, str]]) -> tuple[int, str] | None:
    """The first world event announcing a drift (text starting with ``DRIFT``, as the
    simulator node publishes them): ``(bag_ns, text)``, or None."""
    for t_ns, text in events:
        if text.strip().upper().startswith("DRIFT"):
            return t_ns, text
    return None


# --------------------------------------------------------------------------- scoring

Pair = tuple[str, str, str]


@dataclass(frozen=True)
class AlertRecord:
    """One dissonance alert, placed on the drifted recording.

    ``index`` is the position in the drifted items of the transition that fired it (None
    if unknown), ``bag_ns`` its bag time; ``expected`` is Q_hist as (outcome, probability).
    """

    state_key: str
    action: str
    action_arg: str
    observed: str
    expected: tuple[tuple[str, float], ...] = ()
    index: int | None = None
    bag_ns: int | None = None
    suppressed: int = 0
    probes: int = 0

    @property
    def pair(self) -> Pair:
        """``(state_key, action, action_arg)``."""
        return (self.state_key, self.action, self.action_arg)


def _majority(outcomes: Sequence[str]) -> set[str]:
    c = Counter(outcomes)
    top = max(c.values())
    return {o for o, n in c.items() if n == top}


def touched_pairs(before: Iterable[Transition], after: Iterable[Transition]) -> set[Pair]:
    """(state, action) pairs a drift changed: their most frequent outcome after the drift
    is not among the most frequent before it. Nuisance (a miss now and then) leaves the
    majority alone; pairs seen on one side only are not touched."""
    b: dict[Pair, list[str]] = defaultdict(list)
    a: dict[Pair, list[str]] = defaultdict(list)
    for t in before:
        b[t.key].append(t.outcome)
    for t in after:
        a[t.key].append(t.outcome)
    return {k for k in a if k in b and not (_majority(a[k]) & _majority(b[k]))}


def verify_core(
    source: Sequence[Timed], drifted: Sequence[Timed], config: Any,
) -> tuple[list[AlertRecord], dict[str, Any]]:
    """Run the GLOVE verifier (in-memory store) over the source then the drifted items.

    In ``sync`` mode a bag cannot re-drive the robot: each probe request is answered with
    the outcome the robot observes at that moment (the firing observation, repeated alpha
    times; deterministic world), or cancelled when there is none. Returns the alerts and
    ``{"suppressed", "replaced", "still_suppressed", "pending", "probes", "verifier"}``:
    entries ever suppressed, entries replaced, entries suppressed at the end, pending
    (state, action) pairs, probe samples applied, the verifier's statistics.
    """
    from glove_ros.core.memory.store import ExperienceStore
    from glove_ros.core.verify.verifier import GloveVerifier

    store = ExperienceStore(":memory:", synchronous="NORMAL")
    try:
        verifier = GloveVerifier(store, config)
        verifier.phase = "source"
        last: dict[Pair, str] = {}
        alerts: list[AlertRecord] = []
        probes = 0

        def answer(requests: Sequence[Any]) -> int:
            n = 0
            for req in requests:
                outcome = last.get(req.pair)
                if outcome is None or outcome == "?":
                    verifier.cancel_probe(req)
                    continue
                verifier.apply_probes(req, [outcome] * req.alpha)
                n += req.alpha
            return n

        for item in source:
            res = verifier.observe(item.transition)
            last[item.transition.key] = item.transition.outcome
            probes += answer(res.probe_requests)
        verifier.phase = "drifted"
        for i, item in enumerate(drifted):
            t = item.transition
            res = verifier.observe(t)
            last[t.key] = t.outcome
            if res.alert is not None:
                a = res.alert
                alerts.append(AlertRecord(a.state_key, a.action, a.action_arg,
                                          a.observed_outcome, tuple(a.expected), i,
                                          item.bag_ns, len(a.suppressed_ids),
                                          int(a.probes_requested)))
            probes += answer(res.probe_requests)
        counts = store.counts()
        stats = verifier.stats()
        return alerts, {"suppressed": stats["suppressions"], "replaced": counts["replaced"],
                        "still_suppressed": counts["suppressed"], "pending": counts["pending"],
                        "probes": probes, "verifier": stats}
    finally:
        store.close()


def _pair_text(p: Pair) -> str:
    return f"{p[0]}/{p[1]}" + (f"({p[2]})" if p[2] else "")


def analyse(
    *,
    drifted: BagInput,
    alerts: Sequence[AlertRecord],
    drift: tuple[int, str] | None,
    source: BagInput | None = None,
    outcome: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score alerts against the drift: a JSON-able report (docs/bags.md lists the fields).

    ``drift`` is ``(bag_ns, why)`` or None (no drift known: every alert is a false alarm).
    An alert is a *true* alert when it fires at or after the drift on a pair the drift
    touched (:func:`touched_pairs`); every other alert is a false alarm. Detection delay of
    a pair: transitions (all pairs: ``messages``; this pair: ``visits``) and seconds from
    the drift up to and including the one that fired its first true alert.
    """
    t0 = drifted.start_ns
    drift_ns = drift[0] if drift else None
    items = drifted.items
    before = [i.transition for i in (source.items if source else [])]
    after: list[Transition] = []
    for i in items:
        (after if drift_ns is not None and i.bag_ns >= drift_ns else before).append(i.transition)
    touched = touched_pairs(before, after) if drift_ns is not None else set()

    def rel(ns: int | None) -> float | None:
        return None if ns is None else round((ns - t0) / NS, 3)

    rows = []
    first_true: dict[Pair, dict[str, Any]] = {}
    for a in alerts:
        bag_ns = a.bag_ns
        if bag_ns is None and a.index is not None:
            bag_ns = items[a.index].bag_ns
        row: dict[str, Any] = {
            "state_key": a.state_key, "action": a.action, "action_arg": a.action_arg,
            "observed": a.observed, "expected": {o: round(p, 4) for o, p in a.expected},
            "t": rel(bag_ns), "suppressed": a.suppressed, "probes_requested": a.probes,
        }
        after_drift = drift_ns is not None and bag_ns is not None and bag_ns >= drift_ns
        if drift_ns is None:
            why = "no drift in this recording"
        elif not after_drift:
            why = "before the drift"
        elif a.pair not in touched:
            why = "the drift did not change this (state, action)"
        else:
            why = ""
        row["false_alarm"] = bool(why)
        if why:
            row["why"] = why
        if not why and drift_ns is not None and bag_ns is not None:
            in_window = [i for i in items if drift_ns <= i.bag_ns <= bag_ns]
            row["delay_messages"] = len(in_window)
            row["delay_visits"] = sum(1 for i in in_window if i.transition.key == a.pair)
            row["delay_seconds"] = round((bag_ns - drift_ns) / NS, 3)
            if a.pair not in first_true:
                first_true[a.pair] = row
        rows.append(row)
    true_rows = sorted(first_true.values(), key=lambda r: r["delay_seconds"])
    first = true_rows[0] if true_rows else None
    report: dict[str, Any] = {
        "source": None if source is None else {
            "path": str(source.path), "input": source.kind, "transitions": len(source.items)},
        "drifted": {"path": str(drifted.path), "input": drifted.kind,
                    "transitions": len(items), "start": round(t0 / NS, 3),
                    "duration": round((drifted.end_ns - t0) / NS, 3)},
        "drift": None if drift is None else {"t": rel(drift_ns), "time": round(drift[0] / NS, 3),
                                             "from": drift[1]},
        "touched_pairs": [list(p) for p in sorted(touched)],
        "transitions_after_drift": len(after) if drift_ns is not None else 0,
        "alerts": rows,
        "alert_count": len(rows),
        "alerted_state_keys": sorted({r["state_key"] for r in rows}),
        "false_alarms": sum(1 for r in rows if r["false_alarm"]),
        "missed_pairs": [list(p) for p in sorted(touched - set(first_true))],
        "detection_delay": None if first is None else {
            k: first[k] for k in ("delay_messages", "delay_visits", "delay_seconds")},
        "pair_delays": [{"pair": list((r["state_key"], r["action"], r["action_arg"])),
                         "messages": r["delay_messages"], "visits": r["delay_visits"],
                         "seconds": r["delay_seconds"]} for r in true_rows],
    }
    report.update(outcome or {})
    report.update(extra or {})
    return report


def format_report(report: Mapping[str, Any]) -> str:
    """A few human-readable lines of a drift-test report."""
    lines = []
    d = report["drifted"]
    src = report.get("source")
    head = f"drift test: {d['transitions']} transitions from {d['path']} ({d['input']})"
    if src:
        head += f" after {src['transitions']} from {src['path']} ({src['input']})"
    head += f"; verifier {report.get('mode', '?')}"
    head += " through node processes" if report.get("through_nodes") else " (core)"
    lines.append(head)
    drift = report.get("drift")
    when = "none known" if not drift else f"{drift['t']}s ({drift['from']})"
    touched = ", ".join(_pair_text(tuple(p)) for p in report["touched_pairs"]) or "nothing"
    lines.append(f"drift: {when}; changed: {touched}")
    for r in report["alerts"]:
        pair = _pair_text((r["state_key"], r["action"], r["action_arg"]))
        if r["false_alarm"]:
            tag = f"FALSE ALARM ({r['why']})"
        else:
            tag = (f"after {r['delay_messages']} messages / {r['delay_visits']} visits / "
                   f"{r['delay_seconds']}s")
        lines.append(f"  alert t={r['t']}s {pair}: observed {r['observed']!r}, expected "
                     f"{r['expected']} -> {tag}")
    delay = report.get("detection_delay")
    delay_text = "-" if not delay else (
        f"{delay['delay_messages']} messages, {delay['delay_seconds']}s")
    tail = (f"alerts: {report['alert_count']}, false alarms: {report['false_alarms']}, "
            f"suppressed: {report.get('suppressed', '?')}, "
            f"replaced: {report.get('replaced', '?')}, detection delay: {delay_text}")
    if report["missed_pairs"]:
        tail += ", missed: " + ", ".join(_pair_text(tuple(p)) for p in report["missed_pairs"])
    lines.append(tail)
    return "\n".join(lines)


# --------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expectations:
    """What a drift test must show; load with :meth:`load` from YAML (all keys optional).

    ``min_alerts`` / ``max_alerts``: alert count bounds. ``max_false_alarms``.
    ``max_delay_messages`` / ``max_delay_seconds``: bound on every touched pair's detection
    delay. ``alerted_state_keys``: exactly these state keys alert (any action).
    ``min_suppressed`` / ``min_replaced``: memory entries. ``max_missed``: touched pairs that
    may go without an alert.
    """

    min_alerts: int | None = None
    max_alerts: int | None = None
    max_false_alarms: int | None = None
    max_delay_messages: int | None = None
    max_delay_seconds: float | None = None
    alerted_state_keys: tuple[str, ...] | None = None
    min_suppressed: int | None = None
    min_replaced: int | None = None
    max_missed: int | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str = "expectations") -> Expectations:
        """Build and validate; unknown keys and wrong types raise ValueError."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a mapping of checks, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: "
                             f"{', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for key, v in data.items():
            if key == "alerted_state_keys":
                if v is None:
                    continue
                if not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
                    raise ValueError(f"{where}: alerted_state_keys must be a list of strings")
                values[key] = tuple(sorted(set(v)))
            elif key == "max_delay_seconds":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise ValueError(f"{where}: {key} must be a number >= 0, got {v!r}")
                values[key] = float(v)
            else:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"{where}: {key} must be an integer >= 0, got {v!r}")
                values[key] = v
        return cls(**values)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Expectations:
        """Read an expectation YAML file (ValueError with the file name when bad)."""
        import yaml

        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text())
        except OSError as exc:
            raise ValueError(f"cannot read expectation file {p}: {_one_line(exc)}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"expectation file {p} is not valid YAML: {_one_line(exc)}") from None
        return cls.from_dict(data, where=f"expectation file {p}")

    def check(self, report: Mapping[str, Any]) -> list[str]:
        """The failed checks, one line each (empty: the report meets every expectation)."""
        fails: list[str] = []
        n = report["alert_count"]
        if self.min_alerts is not None and n < self.min_alerts:
            fails.append(f"alerts: {n} < min_alerts {self.min_alerts}")
        if self.max_alerts is not None and n > self.max_alerts:
            fails.append(f"alerts: {n} > max_alerts {self.max_alerts}")
        fa = report["false_alarms"]
        if self.max_false_alarms is not None and fa > self.max_false_alarms:
            fails.append(f"false alarms: {fa} > max_false_alarms {self.max_false_alarms}")
        delays = report.get("pair_delays", [])
        for key, field_name in (("max_delay_messages", "messages"),
                                ("max_delay_seconds", "seconds")):
            limit = getattr(self, key)
            if limit is None:
                continue
            if not delays:
                fails.append(f"{key}: no alert after the drift, so no detection delay")
            for d in delays:
                if d[field_name] > limit:
                    fails.append(f"detection delay of {_pair_text(tuple(d['pair']))}: "
                                 f"{d[field_name]} {field_name} > {key} {limit}")
        if self.alerted_state_keys is not None:
            got = tuple(sorted(set(report["alerted_state_keys"])))
            if got != self.alerted_state_keys:
                fails.append(f"alerted state keys: {list(got)} != expected "
                             f"{list(self.alerted_state_keys)}")
        for key, name in (("min_suppressed", "suppressed"), ("min_replaced", "replaced")):
            limit = getattr(self, key)
            value = report.get(name)
            if limit is not None and (value is None or value < limit):
                fails.append(f"{name}: {value} < {key} {limit}")
        missed = len(report.get("missed_pairs", []))
        if self.max_missed is not None and missed > self.max_missed:
            fails.append(f"touched pairs without an alert: {missed} > max_missed "
                         f"{self.max_missed}")
        return fails

