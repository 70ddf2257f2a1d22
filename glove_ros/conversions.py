"""Message <-> core conversions: the only module that knows both ROS messages and core types.

Every ``*_from_msg`` validates and raises ``ValueError`` with a message naming the bad
field, so a node can log it and drop the message without changing anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose

from glove_ros.core.memory.experience import (
    EventKind,
    Explanation,
    MemoryEntry,
    MemoryEvent,
    Source,
    Status,
    Transition,
)
from glove_ros.msg import ConsolidationReport as ConsolidationReportMsg
from glove_ros.msg import MemoryEntry as MemoryEntryMsg
from glove_ros.msg import MemoryEvent as MemoryEventMsg
from glove_ros.msg import Transition as TransitionMsg

if TYPE_CHECKING:  # the consolidation core pulls in numpy; nodes without it need not
    from glove_ros.core.consolidate.consolidation import ConsolidationReport


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


# consolidation ---------------------------------------------------------------------------
_U32 = 2**32 - 1
_REPORT_SCALARS = (  # fields copied as they are (ints clamped to uint32)
    "entries_before", "entries_after", "tokens_before", "tokens_after", "candidate_entries",
    "candidate_tokens", "region_entries", "region_tokens", "region_episodes",
    "region_left_out", "synthesized", "fan_in_max", "steps", "llm_tokens", "prompt_tokens",
    "entries_read", "traces_read", "base_version",
)


def _u32(x: float) -> int:
    return max(0, min(int(x), _U32))


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def consolidation_report_to_msg(report: ConsolidationReport,
                                max_tools: int = 8) -> ConsolidationReportMsg:
    """Core ConsolidationReport -> glove_ros/ConsolidationReport (the last ``max_tools``
    tool calls; the calls' argument text is left out to keep the message small)."""
    msg = ConsolidationReportMsg(
        status=report.status, committed=report.committed, message=report.message,
        reason=report.reason, policy=report.policy,
        consolidation_id=report.consolidation_id,
        version=-1 if report.version is None else int(report.version),
        compression=float(report.compression), fan_in_mean=float(report.fan_in_mean),
        wall_seconds=float(report.elapsed_s),
        **{k: _u32(getattr(report, k)) for k in _REPORT_SCALARS},
    )
    ev = report.evaluation
    if ev is not None:
        msg.evaluated, msg.accepted = True, bool(ev.accepted)
        msg.eval_tasks, msg.eval_judged = _u32(ev.tasks), _u32(ev.judged)
        msg.utility_old, msg.utility_new = float(ev.utility_old), float(ev.utility_new)
        msg.counterfactual, msg.masked_mean = float(ev.counterfactual), float(ev.masked_mean)
        msg.load_bearing, msg.harmful = list(ev.load_bearing), list(ev.harmful)
        msg.eval_reasons = list(ev.reasons)
        msg.heldout_tasks, msg.heldout_judged = _u32(ev.heldout_tasks), _u32(ev.heldout_judged)
        msg.heldout_old, msg.heldout_new = _nan(ev.heldout_old), _nan(ev.heldout_new)
    else:
        msg.utility_old = msg.utility_new = msg.counterfactual = msg.masked_mean = math.nan
        msg.heldout_old = msg.heldout_new = math.nan
    tools = list(report.tools)[-max_tools:] if max_tools > 0 else []
    msg.tool_steps = [_u32(t.step) for t in tools]
    msg.tool_names = [str(t.tool) for t in tools]
    msg.tool_ok = [bool(t.ok) for t in tools]
    msg.tool_errors = [str(t.error or "") for t in tools]
    msg.tool_tokens = [_u32(t.tokens) for t in tools]
    return msg


def consolidation_report_dict(msg: ConsolidationReportMsg) -> dict[str, Any]:
    """glove_ros/ConsolidationReport -> a JSON-able dict (for printing and demo summaries).

    Keys as in the core report's ``as_dict()`` (``elapsed_s``, ``evaluation`` or None,
    ``tools`` as a list of dicts), NaN utilities as None. ValueError when the tool arrays
    differ in length."""
    def num(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    d: dict[str, Any] = {
        "status": msg.status, "committed": bool(msg.committed), "message": msg.message,
        "reason": msg.reason, "policy": msg.policy, "consolidation_id": msg.consolidation_id,
        "version": None if msg.version < 0 else int(msg.version),
        "compression": float(msg.compression), "fan_in_mean": float(msg.fan_in_mean),
        "elapsed_s": float(msg.wall_seconds),
        **{k: int(getattr(msg, k)) for k in _REPORT_SCALARS},
    }
    d["evaluation"] = None if not msg.evaluated else {
        "tasks": int(msg.eval_tasks), "judged": int(msg.eval_judged),
        "utility_old": num(msg.utility_old), "utility_new": num(msg.utility_new),
        "counterfactual": num(msg.counterfactual), "masked_mean": num(msg.masked_mean),
        "load_bearing": list(msg.load_bearing), "harmful": list(msg.harmful),
        "accepted": bool(msg.accepted), "reasons": list(msg.eval_reasons),
        "heldout_tasks": int(msg.heldout_tasks), "heldout_judged": int(msg.heldout_judged),
        "heldout_old": num(msg.heldout_old), "heldout_new": num(msg.heldout_new),
    }
    d["tools"] = [{"step": int(s), "tool": n, "ok": bool(o), "error": e or None,
                   "tokens": int(t)}
                  for s, n, o, e, t in zip(msg.tool_steps, msg.tool_names, msg.tool_ok,
                                           msg.tool_errors, msg.tool_tokens, strict=True)]
    return d
