"""Reading a world file's YAML structure: typed values that name the entry at fault, and
the parser of one ``events:`` entry.

Separate from :mod:`glove_ros.core.world.worldfile` so that the world's schema, its
queries and its validation are not buried under value-reading helpers;
:meth:`~glove_ros.core.world.worldfile.World.from_dict` builds every part with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from glove_ros.core.world.worldevents import (
    EVENT_TYPES,
    BlockEdge,
    DetectionDropout,
    Event,
    MissDetections,
    MoveBlock,
    NewObstacle,
    OpenEdge,
    PoseJitter,
    ShiftBlock,
    SwapBlocks,
    _Windowed,
)


class _Ctx:
    """Reads typed values from a mapping, naming the entry in every error."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
        self.data = data
        self.where = where

    def check_keys(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        unknown = sorted(str(k) for k in self.data if k not in allowed)
        if unknown:
            raise ValueError(
                f"{self.where}: unknown key(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(allowed))}"
            )

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def str(self, key: str, default: Any = ...) -> str:
        if not self.has(key):
            if default is ...:
                raise ValueError(f"{self.where}: missing required key '{key}'")
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise ValueError(f"{self.where}: '{key}' must be a string, got {value!r}")
        return value

    def float(self, key: str, default: Any = ...) -> float:
        if not self.has(key):
            if default is ...:
                raise ValueError(f"{self.where}: missing required key '{key}'")
            return default
        return _as_float(self.data[key], f"{self.where}: '{key}'")

    def int(self, key: str, default: Any = ...) -> int:
        if not self.has(key):
            if default is ...:
                raise ValueError(f"{self.where}: missing required key '{key}'")
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{self.where}: '{key}' must be an integer, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        if not self.has(key):
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise ValueError(f"{self.where}: '{key}' must be true or false, got {value!r}")
        return value

    def pair(self, key: str, default: Any = ...) -> tuple[float, float]:
        if not self.has(key):
            if default is ...:
                raise ValueError(f"{self.where}: missing required key '{key}'")
            return default
        value = self.data[key]
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
            raise ValueError(f"{self.where}: '{key}' must be a list [a, b], got {value!r}")
        return (
            _as_float(value[0], f"{self.where}: '{key}'[0]"),
            _as_float(value[1], f"{self.where}: '{key}'[1]"),
        )

    def names(self, key: str, count: int | None = None, default: Any = ...) -> tuple[str, ...]:
        if not self.has(key):
            if default is ...:
                raise ValueError(f"{self.where}: missing required key '{key}'")
            return default
        value = self.data[key]
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError(f"{self.where}: '{key}' must be a list of ids, got {value!r}")
        if count is not None and len(value) != count:
            raise ValueError(f"{self.where}: '{key}' must list exactly {count} ids, got {value!r}")
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"{self.where}: '{key}' must hold ids (strings), got {item!r}")
        return tuple(value)


def _as_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    return float(value)


def _list(data: Mapping[str, Any], key: str, where: str, required: bool = False) -> list[Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise ValueError(f"{where}: missing required key '{key}'")
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: '{key}' must be a list, got {type(value).__name__}")
    return value


def _parse_event(raw: Any, where: str) -> Event:
    c = _Ctx(raw, where)
    kind = c.str("type")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"{where}: unknown event type '{kind}'; expected one of "
                         f"{', '.join(EVENT_TYPES)}")
    where = f"{where} ({kind})"
    c.where = where
    common: dict[str, Any] = {}
    if c.has("episode"):
        common["episode"] = c.int("episode")
    if c.has("time"):
        common["time"] = c.float("time")
    keys = {"type", "episode", "time"}
    if issubclass(cls, _Windowed):
        keys |= {"until_episode", "until_time"}
        if c.has("until_episode"):
            common["until_episode"] = c.int("until_episode")
        if c.has("until_time"):
            common["until_time"] = c.float("until_time")
    if cls is SwapBlocks:
        keys |= {"blocks"}
        c.check_keys(keys)
        return SwapBlocks(blocks=c.names("blocks", 2), **common)  # type: ignore[arg-type]
    if cls is MoveBlock:
        keys |= {"block", "waypoint", "offset"}
        c.check_keys(keys)
        return MoveBlock(block=c.str("block"), waypoint=c.str("waypoint"),
                         offset=c.pair("offset", (0.6, 0.0)), **common)
    if cls in (BlockEdge, OpenEdge):
        keys |= {"edge"}
        c.check_keys(keys)
        return cls(edge=c.names("edge", 2), **common)  # type: ignore[call-arg]
    if cls is ShiftBlock:
        keys |= {"block", "dx", "dy"}
        c.check_keys(keys)
        return ShiftBlock(block=c.str("block"), dx=c.float("dx", 0.0), dy=c.float("dy", 0.0),
                          **common)
    if cls is MissDetections:
        keys |= {"rate", "blocks"}
        c.check_keys(keys)
        return MissDetections(rate=c.float("rate"), blocks=c.names("blocks", default=()),
                              **common)
    if cls is PoseJitter:
        keys |= {"sigma_xy", "sigma_yaw"}
        c.check_keys(keys)
        return PoseJitter(sigma_xy=c.float("sigma_xy", 0.02), sigma_yaw=c.float("sigma_yaw", 0.03),
                          **common)
    if cls is NewObstacle:
        keys |= {"id", "waypoint", "offset", "size"}
        c.check_keys(keys)
        return NewObstacle(id=c.str("id"), waypoint=c.str("waypoint"),
                           offset=c.pair("offset", (0.9, 0.0)), size=c.float("size", 0.2),
                           **common)
    keys |= {"frames"}
    c.check_keys(keys)
    return DetectionDropout(frames=c.int("frames", 1), **common)
