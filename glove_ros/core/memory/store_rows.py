"""Row codec and shared write steps of the SQLite experience store.

Turns ``entries`` and ``events`` rows into :class:`MemoryEntry` / :class:`MemoryEvent` and
transitions into rows, and holds the steps every write of
:class:`~glove_ros.core.memory.store.ExperienceStore` shares: insert an entry, keep the
trusted-outcome counts, store an event and hand it to listeners and transaction hooks, check
ids and stamps; plus the id helpers (``IN (...)`` chunks, id normalisation). Separate so the
reads (:mod:`~glove_ros.core.memory.store_queries`) and the writes
(:mod:`~glove_ros.core.memory.store_writes`) share one definition of a row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from glove_ros.core.memory.equivalence import cell_of
from glove_ros.core.memory.experience import (
    EventKind,
    MemoryEntry,
    MemoryEvent,
    Source,
    Status,
    Transition,
)

_CHUNK = 500  # ids per IN (...) clause; below every SQLite variable limit
_SOURCES = {int(v): v for v in Source}
_STATUSES = {int(v): v for v in Status}


def _chunks(seq: Sequence[int], size: int = _CHUNK) -> Iterator[Sequence[int]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def _marks(n: int) -> str:
    return ",".join("?" * n)


_MAX_ID = (1 << 63) - 1  # SQLite INTEGER range; larger ids cannot exist


def _known_id(value: Any) -> int | None:
    """``value`` as a possible row id, or None when no row can have it (wrong type, range)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ID:
        return None
    return int(value)


def _normalise_ids(ids: Iterable[int], what: str = "ids") -> list[int]:
    out: list[int] = []
    seen: set[int] = set()
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int):
            raise ValueError(f"{what} must be integer entry ids, got {i!r}")
        if not -_MAX_ID <= i <= _MAX_ID:
            raise ValueError(f"{what}: {i} is outside the 64-bit id range; no entry has it")
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


class _RowsMixin:
    """Row and event plumbing of :class:`~glove_ros.core.memory.store.ExperienceStore` (mixed
    into it); every method runs inside the store's lock, most inside a write transaction."""

    cell_size: float
    _clock: Callable[[], float]
    _queued: list[MemoryEvent]
    _listeners: list[Callable[[MemoryEvent], None]]
    _tx_hooks: list[Callable[[MemoryEvent, Callable[..., Any]], None]]

    @staticmethod
    def _entry(row: Sequence[Any]) -> MemoryEntry:
        # Rows were validated on the way in; building the frozen dataclasses through their
        # __dict__ skips __init__ / __post_init__ and makes retrieval about 3x cheaper.
        (
            eid, state_key, action, action_arg, outcome, robot_id, episode_id, context,
            px, py, pyaw, reward, source, stamp, status, valid_from, valid_until, reason,
            replaced_by,
        ) = row
        t = object.__new__(Transition)
        t.__dict__.update(
            state_key=state_key,
            action=action,
            outcome=outcome,
            action_arg=action_arg,
            robot_id=robot_id,
            episode_id=episode_id,
            pose=(px, py, pyaw) if px is not None else None,
            context=context,
            reward=reward,
            source=_SOURCES[source],
            stamp=stamp,
        )
        e = object.__new__(MemoryEntry)
        e.__dict__.update(
            id=eid,
            transition=t,
            status=_STATUSES[status],
            valid_from=valid_from,
            valid_until=valid_until,
            reason=reason,
            replaced_by=replaced_by,
        )
        return e

    def _row_values(self, t: Transition, valid_from: float, status: Status, reason: str):
        if t.pose is not None:
            x, y, yaw = (float(v) for v in t.pose)
            cx, cy = cell_of(x, y, self.cell_size)
        else:
            x = y = yaw = None
            cx = cy = None
        return (
            t.state_key, t.action, t.action_arg, t.outcome, t.robot_id, t.episode_id,
            t.context, x, y, yaw, cx, cy, float(t.reward), int(t.source), float(t.stamp),
            int(status), valid_from, reason,
        )

    _INSERT = (
        "INSERT INTO entries(state_key, action, action_arg, outcome, robot_id, episode_id, "
        "context, px, py, pyaw, cx, cy, reward, source, stamp, status, valid_from, reason) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    )
    _UPSERT_COUNT = (
        "INSERT INTO outcome_counts(state_key, action, action_arg, outcome, n, last_id, "
        "max_reward) VALUES(?,?,?,?,?,?,?) ON CONFLICT(state_key, action, action_arg, outcome) "
        "DO UPDATE SET n = n + excluded.n, last_id = max(last_id, excluded.last_id), "
        "max_reward = max(max_reward, excluded.max_reward)"
    )

    def _insert(
        self, t: Transition, now: float, status: Status = Status.TRUSTED, reason: str = ""
    ) -> int:
        valid_from = float(t.stamp) if t.stamp > 0 else now
        cur = self._exec(self._INSERT, self._row_values(t, valid_from, status, reason))
        eid = int(cur.lastrowid)
        if status == Status.TRUSTED:
            self._exec(
                self._UPSERT_COUNT,
                (t.state_key, t.action, t.action_arg, t.outcome, 1, eid, float(t.reward)),
            )
        if self._listeners or self._tx_hooks:
            self._queue(
                MemoryEvent(
                    kind=EventKind.RECORDED,
                    state_key=t.state_key,
                    action=t.action,
                    action_arg=t.action_arg,
                    entry_ids=(eid,),
                    reason=reason,
                    stamp=valid_from,
                )
            )
        return eid

    def _recount(self, keys: Iterable[tuple[str, str, str]]) -> None:
        for key in set(keys):
            self._exec(
                "DELETE FROM outcome_counts WHERE state_key=? AND action=? AND action_arg=?", key
            )
            self._exec(
                "INSERT INTO outcome_counts(state_key, action, action_arg, outcome, n, last_id, "
                "max_reward) SELECT state_key, action, action_arg, outcome, COUNT(*), MAX(id), "
                "MAX(reward) FROM entries WHERE state_key=? AND action=? AND action_arg=? "
                "AND status=0 GROUP BY outcome",
                key,
            )

    def _add_event(
        self,
        kind: EventKind,
        key: tuple[str, str, str],
        entry_ids: Sequence[int],
        new_entry_ids: Sequence[int] = (),
        reason: str = "",
        evidence_count: int = 0,
        stamp: float = 0.0,
    ) -> MemoryEvent:
        cur = self._exec(
            "INSERT INTO events(kind, state_key, action, action_arg, entry_ids, new_entry_ids, "
            "reason, evidence_count, stamp) VALUES(?,?,?,?,?,?,?,?,?)",
            (
                int(kind), key[0], key[1], key[2], json.dumps(list(entry_ids)),
                json.dumps(list(new_entry_ids)), reason, int(evidence_count), float(stamp),
            ),
        )
        event_id = int(cur.lastrowid)
        linked = sorted(set(entry_ids) | set(new_entry_ids))
        if linked:
            self._db().executemany(
                "INSERT OR IGNORE INTO event_entries(entry_id, event_id) VALUES(?, ?)",
                [(i, event_id) for i in linked],
            )
        event = MemoryEvent(
            kind=kind,
            state_key=key[0],
            action=key[1],
            action_arg=key[2],
            entry_ids=tuple(entry_ids),
            new_entry_ids=tuple(new_entry_ids),
            reason=reason,
            evidence_count=int(evidence_count),
            stamp=float(stamp),
            event_id=event_id,
        )
        self._queue(event)
        return event

    def _queue(self, event: MemoryEvent) -> None:
        """Queue ``event`` for the listeners and run the transaction hooks on it (inside the
        write transaction: a hook that raises rolls the whole write back)."""
        self._queued.append(event)
        for hook in self._tx_hooks:
            hook(event, self._exec)

    @staticmethod
    def _event(row: Sequence[Any]) -> MemoryEvent:
        eid, kind, s, a, arg, ids, new_ids, reason, evidence, stamp = row
        return MemoryEvent(
            kind=EventKind(kind),
            state_key=s,
            action=a,
            action_arg=arg,
            entry_ids=tuple(json.loads(ids)),
            new_entry_ids=tuple(json.loads(new_ids)),
            reason=reason,
            evidence_count=evidence,
            stamp=stamp,
            event_id=eid,
        )

    def _stamp(self, stamp: float | None) -> float:
        if stamp is None or stamp == 0:
            return float(self._clock())
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise ValueError(f"stamp must be seconds (a number), got {stamp!r}")
        if not math.isfinite(stamp) or stamp < 0:
            raise ValueError(f"stamp must be finite seconds >= 0, got {stamp}")
        return float(stamp)

    def _statuses(self, ids: Sequence[int]) -> dict[int, tuple[int, tuple[str, str, str]]]:
        """id -> (status, key) for existing ids; call inside the lock."""
        found: dict[int, tuple[int, tuple[str, str, str]]] = {}
        for chunk in _chunks(ids):
            for eid, status, s, a, arg in self._exec(
                f"SELECT id, status, state_key, action, action_arg FROM entries "
                f"WHERE id IN ({_marks(len(chunk))})",
                tuple(chunk),
            ):
                found[eid] = (status, (s, a, arg))
        return found

    def _require(self, ids: Sequence[int]) -> dict[int, tuple[int, tuple[str, str, str]]]:
        found = self._statuses(ids)
        missing = [i for i in ids if i not in found]
        if missing:
            shown = ", ".join(str(i) for i in missing[:10])
            more = f" (+{len(missing) - 10} more)" if len(missing) > 10 else ""
            raise ValueError(f"unknown memory entry id(s): {shown}{more}; nothing was changed")
        return found
