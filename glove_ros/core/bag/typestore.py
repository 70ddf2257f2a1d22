"""The message types a bag needs, registered without ROS: the typestore of rosbag2 files.

Separate from :mod:`glove_ros.core.bag.bagfile` (reading and writing) because it is about
type definitions, not storage: which ``.msg`` files describe glove_ros's own types and how
a type the store lacks is found among the installed packages.

* :func:`make_typestore`: the message types of a ROS 2 distribution plus glove_ros's own
  types, registered from the package's ``msg/*.msg`` files (nested ``glove_ros/Detection``
  included).
* :func:`ensure_type`: adds any other installed ``.msg`` type on demand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ensure_type", "glove_msg_dir", "make_typestore", "ros_distro"]


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
