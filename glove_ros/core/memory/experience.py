"""Core types of experience memory D (DESIGN.md section 2): transitions and their history.

A :class:`Transition` is one experience e = (s, a, s'): a precondition ``state_key`` (a
waypoint id or a discretised state, optionally with the robot ``pose`` at s), an ``action``
with an optional ``action_arg``, and the ``outcome`` signature of s' (e.g.
``"colors=blue,red"``, ``"reached"``, ``"blocked"``). GLOVE compares outcomes by this
signature only, never by raw sensor data.

A :class:`MemoryEntry` is a stored transition with its verification state: TRUSTED (retrieved
for planning), SUPPRESSED (hidden from retrieval, awaiting re-verification) or REPLACED
(superseded by verified evidence, kept as history). Entries are never deleted; every change
is a :class:`MemoryEvent`, so every change can be explained (:class:`Explanation`) and undone.

The integer values of :class:`Source`, :class:`Status` and :class:`EventKind` are the
constants of ``msg/Transition.msg``, ``msg/MemoryEntry.msg`` and ``msg/MemoryEvent.msg``.
This module is pure Python (no ROS).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import IntEnum
from typing import Any

__all__ = [
    "MAX_CONTEXT_CHARS",
    "MAX_KEY_CHARS",
    "MAX_OUTCOME_CHARS",
    "MAX_POSE_ABS",
    "MAX_STAMP",
    "EventKind",
    "Explanation",
    "MemoryEntry",
    "MemoryEvent",
    "PendingItem",
    "Source",
    "Status",
    "Transition",
]

#: longest accepted state_key, action, action_arg, robot_id and episode_id (characters)
MAX_KEY_CHARS = 256
#: longest accepted outcome signature (characters)
MAX_OUTCOME_CHARS = 1024
#: longest accepted task context (characters)
MAX_CONTEXT_CHARS = 4096
#: largest accepted |x| and |y| of a pose, metres (keeps grid cells in 64-bit integers)
MAX_POSE_ABS = 1.0e7
#: latest accepted stamp, seconds: builtin_interfaces/Time carries int32 seconds
MAX_STAMP = float(2**31 - 1)


class Source(IntEnum):
    """Where a transition came from (``Transition.SOURCE_*``)."""

    OBSERVED = 0  # seen during a task (natural interaction)
    PROBED = 1  # produced by a verification probe (synchronous replay)
    IMPORTED = 2  # loaded from a bag, another robot or a file


class Status(IntEnum):
    """Verification state of a memory entry (``MemoryEntry.STATUS_*``)."""

    TRUSTED = 0  # retrieved for planning
    SUPPRESSED = 1  # hidden from retrieval, awaiting re-verification
    REPLACED = 2  # superseded by verified evidence; kept as history


class EventKind(IntEnum):
    """Kind of change to experience memory (``MemoryEvent.*``)."""

    RECORDED = 0
    SUPPRESSED = 1
    REPLACED = 2
    RESTORED = 3
    QUEUED = 4  # (state, action) put on the pending re-verification queue


_KEY_FIELDS = ("state_key", "action", "action_arg", "robot_id", "episode_id")


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Transition:
    """One experience e = (s, a, s') observed by a robot.

    ``state_key`` is the discretised precondition s (waypoint id or grid cell), ``pose`` the
    optional robot pose ``(x, y, yaw)`` at s in metres / radians (used by the pose-radius
    equivalence rule), ``action`` / ``action_arg`` the action a (e.g. ``"navigate_to"``,
    ``"wp_kitchen"``), ``outcome`` the outcome signature of s'. ``stamp`` is when the outcome
    was observed, in seconds (0: unknown, the store then uses its clock).

    Construction never raises; call :meth:`validate` (the store does) to reject bad input.
    A list pose is normalised to a tuple and an int source to :class:`Source`.
    """

    state_key: str
    action: str
    outcome: str
    action_arg: str = ""
    robot_id: str = ""
    episode_id: str = ""
    pose: tuple[float, float, float] | None = None
    context: str = ""
    reward: float = 0.0
    source: Source = Source.OBSERVED
    stamp: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.pose, list):
            object.__setattr__(self, "pose", tuple(self.pose))
        if not isinstance(self.source, Source) and isinstance(self.source, int):
            try:
                object.__setattr__(self, "source", Source(self.source))
            except ValueError:
                pass  # validate() reports it

    @property
    def key(self) -> tuple[str, str, str]:
        """``(state_key, action, action_arg)``: the (s, a) pair GLOVE verifies."""
        return (self.state_key, self.action, self.action_arg)

    @property
    def has_pose(self) -> bool:
        """True when the transition carries a pose."""
        return self.pose is not None

    def validate(self) -> Transition:
        """Raise ``ValueError`` naming the first bad field; return ``self`` when valid."""
        for name in ("state_key", "action", "outcome"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ValueError(f"transition {name} must be a string, got {type(value).__name__}")
            if not value.strip():
                raise ValueError(f"transition {name} is empty; every transition needs one")
        for name in (*_KEY_FIELDS, "outcome", "context"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ValueError(f"transition {name} must be a string, got {type(value).__name__}")
            limit = (
                MAX_OUTCOME_CHARS
                if name == "outcome"
                else MAX_CONTEXT_CHARS
                if name == "context"
                else MAX_KEY_CHARS
            )
            if len(value) > limit:
                raise ValueError(
                    f"transition {name} is {len(value)} characters long; the limit is {limit}"
                    + (" (store an outcome signature, not raw data)" if name == "outcome" else "")
                )
            if "\x00" in value:
                raise ValueError(f"transition {name} contains a NUL character")
            if name in _KEY_FIELDS:
                bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
                if bad is not None:
                    raise ValueError(f"transition {name} contains the control character "
                                     f"{bad!r}; keys are one printable line")
        if self.pose is not None:
            if not isinstance(self.pose, tuple) or len(self.pose) != 3:
                raise ValueError(
                    f"transition pose must be None or (x, y, yaw), got {self.pose!r}"
                )
            for label, value in zip(("x", "y", "yaw"), self.pose, strict=True):
                if not _is_real(value):
                    raise ValueError(f"transition pose {label} must be a number, got {value!r}")
                if not math.isfinite(value):
                    raise ValueError(f"transition pose {label} is {value}; poses must be finite")
            if abs(self.pose[0]) > MAX_POSE_ABS or abs(self.pose[1]) > MAX_POSE_ABS:
                raise ValueError(
                    f"transition pose {self.pose[:2]} is beyond {MAX_POSE_ABS:g} m from the "
                    "origin; check the frame"
                )
        if not _is_real(self.reward):
            raise ValueError(f"transition reward must be a number, got {self.reward!r}")
        if not math.isfinite(self.reward):
            raise ValueError(f"transition reward is {self.reward}; rewards must be finite")
        if not _is_real(self.stamp):
            raise ValueError(f"transition stamp must be a number, got {self.stamp!r}")
        if not math.isfinite(self.stamp) or self.stamp < 0 or self.stamp >= MAX_STAMP:
            raise ValueError(
                f"transition stamp is {self.stamp}; stamps are seconds in [0, 2**31) (0: unknown)"
            )
        if not isinstance(self.source, Source):
            raise ValueError(
                f"transition source {self.source!r} is not one of "
                + ", ".join(f"{s.name}={s.value}" for s in Source)
            )
        return self

    def with_(self, **changes: Any) -> Transition:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (pose as a list or None, source as its name)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["pose"] = list(self.pose) if self.pose is not None else None
        out["source"] = self.source.name if isinstance(self.source, Source) else self.source
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Transition:
        """Inverse of :meth:`to_dict`; unknown keys raise ``ValueError``. Validates."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown transition field(s): {', '.join(unknown)}")
        values = dict(data)
        src = values.get("source")
        if isinstance(src, str):
            try:
                values["source"] = Source[src.upper()]
            except KeyError:
                raise ValueError(f"unknown transition source {src!r}") from None
        pose = values.get("pose")
        if pose is not None and not isinstance(pose, tuple):
            values["pose"] = tuple(pose)
        try:
            t = cls(**values)
        except TypeError as exc:  # missing required field
            raise ValueError(f"transition: {exc}") from None
        return t.validate()


@dataclass(frozen=True)
class MemoryEntry:
    """A stored transition with its verification state.

    ``valid_from`` / ``valid_until`` are seconds (``valid_until`` is None while the entry is
    trusted); ``reason`` says why the status last changed; ``replaced_by`` is the id of the
    first replacing entry (None unless REPLACED).
    """

    id: int
    transition: Transition
    status: Status
    valid_from: float
    valid_until: float | None = None
    reason: str = ""
    replaced_by: int | None = None

    @property
    def trusted(self) -> bool:
        """True when the entry is retrieved for planning."""
        return self.status == Status.TRUSTED


@dataclass(frozen=True)
class MemoryEvent:
    """One change to experience memory.

    ``entry_ids`` are the entries the event applies to; ``new_entry_ids`` those that replaced
    them (REPLACED only); ``evidence_count`` the fresh samples that justified the change.
    ``event_id`` is the store's id of the event (0 for the RECORDED event, which the store
    derives from the entry itself).
    """

    kind: EventKind
    state_key: str
    action: str
    action_arg: str
    entry_ids: tuple[int, ...]
    new_entry_ids: tuple[int, ...] = ()
    reason: str = ""
    evidence_count: int = 0
    stamp: float = 0.0
    event_id: int = 0


@dataclass(frozen=True)
class PendingItem:
    """One (state, action) on the persistent re-verification queue P (async mode).

    ``key`` is the queue's handle; ``suppressed_ids`` the entries hidden while it is
    pending; ``evidence`` the fresh outcomes collected since it was queued, with the entry
    ids that carry them in ``evidence_ids`` (None where the evidence has no entry).
    """

    key: int
    state_key: str
    action: str
    action_arg: str
    suppressed_ids: tuple[int, ...]
    stamp: float
    reason: str = ""
    evidence: tuple[str, ...] = ()
    evidence_ids: tuple[int | None, ...] = ()

    @property
    def evidence_count(self) -> int:
        """Number of fresh samples collected so far."""
        return len(self.evidence)

    @property
    def pair(self) -> tuple[str, str, str]:
        """``(state_key, action, action_arg)``."""
        return (self.state_key, self.action, self.action_arg)


@dataclass(frozen=True)
class Explanation:
    """Why an entry is trusted, suppressed or replaced (``srv/ExplainEntry.srv``).

    ``neighbourhood_size`` is |N(e)| among trusted entries, ``agreeing`` the trusted
    neighbours with the same outcome, ``pending_evidence`` the fresh samples collected while
    its (state, action) is pending; ``text`` one paragraph a person can read.
    """

    entry: MemoryEntry
    history: tuple[MemoryEvent, ...]
    text: str
    neighbourhood_size: int
    agreeing: int
    pending_evidence: int = 0
