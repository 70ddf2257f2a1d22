"""rosbag2 files without ROS: read and write them, with one-line errors for bad bags.

Built on the ``rosbags`` library (pure Python; reads and writes rosbag2 directories with
mcap or sqlite3 storage, and bare ``.mcap`` / ``.db3`` files). Nothing in
``glove_ros.core.bag`` imports rclpy: ``glove-ros bag drift-test`` and ``make-fixtures``
work from ``pip install glove_ros[bags]``.

* :class:`BagReader` / :class:`BagWriter`: thin wrappers that turn every failure of a bad
  bag (missing ``metadata.yaml``, truncated storage file, unknown message type, ...) into a
  :class:`BagError` with one line a user can act on.
* :class:`QosSpec`: the QoS a topic was offered with, kept in the bag's metadata.

The rest of the room builds on these: :mod:`~glove_ros.core.bag.typestore` (message types
registered from ``.msg`` files), :mod:`~glove_ros.core.bag.messages` (core types <->
message objects), :mod:`~glove_ros.core.bag.inputs` (the experience a bag holds, as timed
transitions) and :mod:`~glove_ros.core.bag.drift` (the verifier run over a source and a
drifted recording, scored against a user's expectation file).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import struct
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glove_ros.core.bag.typestore import ensure_type, make_typestore

__all__ = [
    "DEFAULT_TOPICS",
    "LATCHED_TOPICS",
    "NS",
    "BagError",
    "BagReader",
    "BagWriter",
    "QosSpec",
]

NS = 1_000_000_000

#: topics ``glove-ros bag record`` writes when none are named (relative: resolved in the
#: recorder's namespace)
DEFAULT_TOPICS = (
    "camera/image_raw", "detections", "odom", "transitions", "dissonance", "memory_events",
    "world_events", "current_waypoint", "/clock",
)


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
