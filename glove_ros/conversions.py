"""Message <-> core conversions: the only module that knows both ROS messages and core types.

Every ``*_from_msg`` validates and raises ``ValueError`` with a message naming the bad
field, so a node can log it and drop the message without changing anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose

from glove_ros.core.experience import (
    EventKind,
    Explanation,
    MemoryEntry,
    MemoryEvent,
    Source,
    Status,
    Transition,
)
from glove_ros.msg import MemoryEntry as MemoryEntryMsg
from glove_ros.msg import MemoryEvent as MemoryEventMsg
from glove_ros.msg import Transition as TransitionMsg


# time ------------------------------------------------------------------------------------
def seconds_from_time(stamp: Time) -> float:
    """builtin_interfaces/Time -> float seconds."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def time_from_seconds(seconds: float | None) -> Time:
    """Float seconds -> builtin_interfaces/Time (None or negative -> zero time)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return Time()
    sec = int(seconds)
    return Time(sec=sec, nanosec=min(int(round((seconds - sec) * 1e9)), 999_999_999))


# poses -----------------------------------------------------------------------------------
def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    """Yaw (rotation about z) of a quaternion, radians."""
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def pose2d_from_pose(pose: Pose) -> tuple[float, float, float]:
    """geometry_msgs/Pose -> (x, y, yaw)."""
    q = pose.orientation
    return (float(pose.position.x), float(pose.position.y),
            yaw_from_quaternion(q.x, q.y, q.z, q.w))


def pose_from_pose2d(x: float, y: float, yaw: float) -> Pose:
    """(x, y, yaw) -> geometry_msgs/Pose on the ground plane."""
    pose = Pose()
    pose.position.x, pose.position.y = float(x), float(y)
    pose.orientation.z, pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return pose


# transitions -----------------------------------------------------------------------------
def transition_from_msg(msg: TransitionMsg) -> Transition:
    """glove_ros/Transition -> validated core Transition (``ValueError`` if malformed)."""
    if msg.source not in {s.value for s in Source}:
        raise ValueError(f"transition source {msg.source} is not one of "
                         + ", ".join(f"{s.name}={s.value}" for s in Source))
    if not 0 <= msg.header.stamp.nanosec < 1_000_000_000:
        raise ValueError(f"transition stamp nanosec {msg.header.stamp.nanosec} is not below 1e9")
    t = Transition(
        state_key=msg.state_key,
        action=msg.action,
        outcome=msg.outcome,
        action_arg=msg.action_arg,
        robot_id=msg.robot_id,
        episode_id=msg.episode_id,
        pose=pose2d_from_pose(msg.pose) if msg.has_pose else None,
        context=msg.context,
        reward=float(msg.reward),
        source=Source(msg.source),
        stamp=seconds_from_time(msg.header.stamp),
    )
    return t.validate()


def transition_to_msg(t: Transition, frame_id: str = "map") -> TransitionMsg:
    """Core Transition -> glove_ros/Transition."""
    msg = TransitionMsg(
        robot_id=t.robot_id, episode_id=t.episode_id, state_key=t.state_key,
        has_pose=t.pose is not None, context=t.context, action=t.action,
        action_arg=t.action_arg, outcome=t.outcome, reward=float(t.reward),
        source=int(t.source),
    )
    msg.header.stamp = time_from_seconds(t.stamp)
    msg.header.frame_id = frame_id
    if t.pose is not None:
        msg.pose = pose_from_pose2d(*t.pose)
    return msg


# memory entries and events ---------------------------------------------------------------
def entry_to_msg(entry: MemoryEntry) -> MemoryEntryMsg:
    """Core MemoryEntry -> glove_ros/MemoryEntry."""
    return MemoryEntryMsg(
        id=int(entry.id),
        transition=transition_to_msg(entry.transition),
        status=int(entry.status),
        valid_from=time_from_seconds(entry.valid_from),
        valid_until=time_from_seconds(entry.valid_until),
        reason=entry.reason,
        replaced_by=int(entry.replaced_by or 0),
    )


def entry_from_msg(msg: MemoryEntryMsg) -> MemoryEntry:
    """glove_ros/MemoryEntry -> core MemoryEntry (the planner's view of retrieved memory)."""
    until = seconds_from_time(msg.valid_until)
    return MemoryEntry(
        id=int(msg.id),
        transition=transition_from_msg(msg.transition),
        status=Status(msg.status),
        valid_from=seconds_from_time(msg.valid_from),
        valid_until=until if until > 0 else None,
        reason=msg.reason,
        replaced_by=int(msg.replaced_by) or None,
    )


def entries_to_msgs(entries: Iterable[MemoryEntry]) -> list[MemoryEntryMsg]:
    """Convert a sequence of entries."""
    return [entry_to_msg(e) for e in entries]


def event_to_msg(event: MemoryEvent) -> MemoryEventMsg:
    """Core MemoryEvent -> glove_ros/MemoryEvent."""
    msg = MemoryEventMsg(
        kind=int(EventKind(event.kind)), state_key=event.state_key, action=event.action,
        action_arg=event.action_arg, entry_ids=[int(i) for i in event.entry_ids],
        new_entry_ids=[int(i) for i in event.new_entry_ids], reason=event.reason,
        evidence_count=int(event.evidence_count),
    )
    msg.header.stamp = time_from_seconds(event.stamp)
    return msg


def explanation_fields(expl: Explanation) -> dict[str, Any]:
    """Fields of an ExplainEntry response from a core Explanation."""
    return {
        "found": True,
        "entry": entry_to_msg(expl.entry),
        "history": [event_to_msg(e) for e in expl.history],
        "explanation": expl.text,
        "neighbourhood_size": int(expl.neighbourhood_size),
        "agreeing": int(expl.agreeing),
        "pending_evidence": int(expl.pending_evidence),
    }


def ids(values: Sequence[int]) -> list[int]:
    """Entry ids as plain ints for uint64[] fields."""
    return [int(v) for v in values]
