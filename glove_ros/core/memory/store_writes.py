"""Writes of the SQLite experience store: record, suppress, replace, restore, pending queue.

The write half of :class:`~glove_ros.core.memory.store.ExperienceStore`: validate and store
transitions, change entry status (never deleting a row) with one event per change, and
GLOVE's pending re-verification queue P with its fresh evidence. Each public write runs in
one :meth:`~glove_ros.core.memory.store.ExperienceStore.transaction`. Separate from the reads
(:mod:`~glove_ros.core.memory.store_queries`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from glove_ros.core.memory.experience import (
    EventKind,
    MemoryEvent,
    PendingItem,
    Status,
    Transition,
)
from glove_ros.core.memory.store_check import StoreError
from glove_ros.core.memory.store_rows import _chunks, _known_id, _marks, _normalise_ids


class _WriteMixin:
    """Write methods and pending queue P of :class:`~glove_ros.core.memory.store.ExperienceStore`
    (mixed into it)."""

    def record(self, transition: Transition) -> int:
        """Validate and store one transition as TRUSTED; return its id after the commit.

        Raises ``ValueError`` (nothing stored) for an invalid transition.
        """
        if not isinstance(transition, Transition):
            raise ValueError(f"record() needs a Transition, got {type(transition).__name__}")
        transition.validate()
        with self.transaction():
            return self._insert(transition, float(self._clock()))

    def record_many(self, transitions: Iterable[Transition]) -> list[int]:
        """Validate all, then store all in one transaction; return their ids in order.

        If any transition is invalid, ``ValueError`` names its index and nothing is stored.
        """
        items = list(transitions)
        for i, t in enumerate(items):
            if not isinstance(t, Transition):
                raise ValueError(f"record_many item {i} is not a Transition: {t!r}")
            try:
                t.validate()
            except ValueError as exc:
                raise ValueError(f"record_many item {i}: {exc}; nothing was stored") from None
        if not items:
            return []
        now = float(self._clock())
        with self.transaction():
            first = self._insert(items[0], now)
            rows = [
                self._row_values(t, float(t.stamp) if t.stamp > 0 else now, Status.TRUSTED, "")
                for t in items[1:]
            ]
            if rows:
                self._db().executemany(self._INSERT, rows)
            last = self._db().execute("SELECT MAX(id) FROM entries").fetchone()[0]
            if last != first + len(items) - 1:  # pragma: no cover - sqlite invariant
                raise StoreError("record_many: non-contiguous ids; transaction rolled back")
            ids = list(range(first, first + len(items)))
            agg: dict[tuple[str, str, str, str], list[float]] = {}
            for eid, t in zip(ids[1:], items[1:], strict=True):
                k = (t.state_key, t.action, t.action_arg, t.outcome)
                cur = agg.get(k)
                if cur is None:
                    agg[k] = [1, eid, float(t.reward)]
                else:
                    cur[0] += 1
                    cur[1] = eid
                    cur[2] = max(cur[2], float(t.reward))
            if agg:
                self._db().executemany(
                    self._UPSERT_COUNT,
                    [(k[0], k[1], k[2], k[3], int(v[0]), int(v[1]), v[2]) for k, v in agg.items()],
                )
            if self._listeners or self._tx_hooks:
                for eid, t in zip(ids[1:], items[1:], strict=True):
                    self._queue(
                        MemoryEvent(
                            kind=EventKind.RECORDED,
                            state_key=t.state_key,
                            action=t.action,
                            action_arg=t.action_arg,
                            entry_ids=(eid,),
                            stamp=float(t.stamp) if t.stamp > 0 else now,
                        )
                    )
        return ids

    def suppress(
        self, ids: Iterable[int], reason: str, stamp: float | None = None
    ) -> list[int]:
        """Hide TRUSTED entries from retrieval (status SUPPRESSED, ``valid_until = stamp``).

        Entries that are already suppressed or replaced are left as they are. Returns the ids
        whose status changed; emits one SUPPRESSED event per (state, action) group. Unknown
        ids raise ``ValueError`` and nothing changes.
        """
        id_list = _normalise_ids(ids)
        when = self._stamp(stamp)
        with self.transaction():
            found = self._require(id_list)
            changed = [i for i in id_list if found[i][0] == Status.TRUSTED]
            if not changed:
                return []
            for chunk in _chunks(changed):
                self._exec(
                    f"UPDATE entries SET status=1, valid_until=?, reason=? "
                    f"WHERE id IN ({_marks(len(chunk))})",
                    (when, reason, *chunk),
                )
            groups: dict[tuple[str, str, str], list[int]] = {}
            for i in changed:
                groups.setdefault(found[i][1], []).append(i)
            self._recount(groups)
            for key, members in groups.items():
                self._add_event(EventKind.SUPPRESSED, key, members, reason=reason, stamp=when)
        return changed

    def replace(
        self,
        ids: Iterable[int],
        new: Iterable[Transition | int],
        reason: str,
        evidence_count: int = 0,
        stamp: float | None = None,
    ) -> list[int]:
        """Multiset replacement D <- (D - ids) + new; returns the ids of ``new``.

        ``ids`` (trusted or suppressed) become REPLACED with ``valid_until = stamp`` and
        ``replaced_by`` = the first new id; they are never deleted. Each item of ``new`` is a
        :class:`Transition` (stored as a new TRUSTED entry) or the id of an existing entry
        that becomes TRUSTED (fresh evidence already in the store, e.g. natural observations
        collected while pending). Emits one REPLACED event. Raises ``ValueError`` with nothing
        changed if ``new`` is empty, a transition is invalid, an id is unknown, an old id is
        already replaced, or an id is both old and new.
        """
        old = _normalise_ids(ids)
        items = list(new)
        if not items:
            raise ValueError("replace() needs at least one new transition or entry id")
        new_existing: list[int] = []
        for i, item in enumerate(items):
            if isinstance(item, Transition):
                try:
                    item.validate()
                except ValueError as exc:
                    raise ValueError(f"replacement {i}: {exc}; nothing was changed") from None
            elif isinstance(item, int) and not isinstance(item, bool):
                new_existing.append(item)
            else:
                raise ValueError(f"replacement {i} must be a Transition or an entry id: {item!r}")
        if len(set(new_existing)) != len(new_existing):
            raise ValueError("replace(): a new entry id is listed twice")
        clash = set(old) & set(new_existing)
        if clash:
            raise ValueError(f"replace(): ids {sorted(clash)} are both replaced and replacing")
        if isinstance(evidence_count, bool) or not isinstance(evidence_count, int) or (
            evidence_count < 0
        ):
            raise ValueError(f"evidence_count must be an integer >= 0, got {evidence_count!r}")
        when = self._stamp(stamp)
        with self.transaction():
            found = self._require(old + new_existing)
            done = [i for i in old if found[i][0] == Status.REPLACED]
            if done:
                raise ValueError(
                    f"entries {done[:10]} are already replaced; restore them first"
                )
            new_ids: list[int] = []
            keys = [found[i][1] for i in old]
            for item in items:
                if isinstance(item, Transition):
                    eid = self._insert(item, when, Status.TRUSTED, f"replacement: {reason}")
                    new_ids.append(eid)
                    keys.append(item.key)
                else:
                    new_ids.append(item)
                    keys.append(found[item][1])
            if new_existing:
                for chunk in _chunks(new_existing):
                    self._exec(
                        f"UPDATE entries SET status=0, valid_until=NULL, replaced_by=NULL, "
                        f"reason=? WHERE id IN ({_marks(len(chunk))}) AND status != 0",
                        (f"verified: {reason}", *chunk),
                    )
            for chunk in _chunks(old):
                self._exec(
                    f"UPDATE entries SET status=2, valid_until=?, replaced_by=?, reason=? "
                    f"WHERE id IN ({_marks(len(chunk))})",
                    (when, new_ids[0], reason, *chunk),
                )
            self._recount(keys)
            first = items[0]
            key = first.key if isinstance(first, Transition) else found[first][1]
            self._add_event(
                EventKind.REPLACED, key, old, new_ids, reason=reason,
                evidence_count=evidence_count, stamp=when,
            )
        return new_ids

    def restore(
        self, ids: Iterable[int], reason: str, stamp: float | None = None
    ) -> list[int]:
        """Undo suppression or replacement: the entries become TRUSTED again.

        Entries that replaced them stay trusted (suppress them to undo fully). Restored ids
        leave the pending queue; a pending item left without suppressed ids is dropped.
        Returns the ids whose status changed; one RESTORED event per (state, action) group.
        """
        id_list = _normalise_ids(ids)
        when = self._stamp(stamp)
        with self.transaction():
            found = self._require(id_list)
            changed = [i for i in id_list if found[i][0] != Status.TRUSTED]
            if not changed:
                return []
            for chunk in _chunks(changed):
                self._exec(
                    f"UPDATE entries SET status=0, valid_until=NULL, replaced_by=NULL, reason=? "
                    f"WHERE id IN ({_marks(len(chunk))})",
                    (reason, *chunk),
                )
            groups: dict[tuple[str, str, str], list[int]] = {}
            for i in changed:
                groups.setdefault(found[i][1], []).append(i)
            self._recount(groups)
            gone = set(changed)
            for pid, raw in self._exec("SELECT id, suppressed_ids FROM pending").fetchall():
                held = json.loads(raw)
                left = [i for i in held if i not in gone]
                if len(left) == len(held):
                    continue
                if left:
                    self._exec(
                        "UPDATE pending SET suppressed_ids=? WHERE id=?", (json.dumps(left), pid)
                    )
                else:
                    self._exec("DELETE FROM pending_evidence WHERE pending_id=?", (pid,))
                    self._exec("DELETE FROM pending WHERE id=?", (pid,))
            for key, members in groups.items():
                self._add_event(EventKind.RESTORED, key, members, reason=reason, stamp=when)
        return changed

    # ------------------------------------------------------------------ pending queue P

    def _pending_item(self, row: Sequence[Any]) -> PendingItem:
        pid, s, a, arg, ids, stamp, reason = row
        ev = self._query(
            "SELECT outcome, entry_id FROM pending_evidence WHERE pending_id=? ORDER BY id",
            (pid,),
        )
        return PendingItem(
            key=pid,
            state_key=s,
            action=a,
            action_arg=arg,
            suppressed_ids=tuple(json.loads(ids)),
            stamp=stamp,
            reason=reason,
            evidence=tuple(o for o, _ in ev),
            evidence_ids=tuple(i for _, i in ev),
        )

    _PENDING_COLS = "id, state_key, action, action_arg, suppressed_ids, stamp, reason"

    def add_pending(
        self,
        state_key: str,
        action: str,
        action_arg: str,
        suppressed_ids: Iterable[int],
        stamp: float | None = None,
        reason: str = "",
    ) -> int:
        """Queue (state, action) for re-verification; returns the queue key.

        If the pair is already pending, its suppressed ids are merged and its evidence
        restarts (the world changed again, so earlier evidence no longer counts). Emits a
        QUEUED event.
        """
        for name, value in (("state_key", state_key), ("action", action)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"add_pending needs a non-empty {name}")
        if not isinstance(action_arg, str):
            raise ValueError("add_pending action_arg must be a string")
        ids = _normalise_ids(suppressed_ids, "suppressed_ids")
        when = self._stamp(stamp)
        key = (state_key, action, action_arg)
        with self.transaction():
            self._require(ids)
            row = self._exec(
                "SELECT id, suppressed_ids FROM pending WHERE state_key=? AND action=? "
                "AND action_arg=?",
                key,
            ).fetchone()
            if row is None:
                cur = self._exec(
                    "INSERT INTO pending(state_key, action, action_arg, suppressed_ids, stamp, "
                    "reason) VALUES(?,?,?,?,?,?)",
                    (*key, json.dumps(ids), when, reason),
                )
                pid = int(cur.lastrowid)
            else:
                pid = int(row[0])
                merged = list(json.loads(row[1]))
                held = set(merged)
                merged += [i for i in ids if i not in held]
                self._exec(
                    "UPDATE pending SET suppressed_ids=?, stamp=?, reason=? WHERE id=?",
                    (json.dumps(merged), when, reason, pid),
                )
                self._exec("DELETE FROM pending_evidence WHERE pending_id=?", (pid,))
            self._add_event(EventKind.QUEUED, key, ids, reason=reason, stamp=when)
        return pid

    def pending(self) -> list[PendingItem]:
        """Every pending (state, action), oldest queue key first."""
        rows = self._query(f"SELECT {self._PENDING_COLS} FROM pending ORDER BY id")
        return [self._pending_item(r) for r in rows]

    def get_pending(self, key: int) -> PendingItem | None:
        """The pending item with queue key ``key``, or None."""
        if _known_id(key) is None:
            return None
        rows = self._query(f"SELECT {self._PENDING_COLS} FROM pending WHERE id=?", (int(key),))
        return self._pending_item(rows[0]) if rows else None

    def pending_for(self, state_key: str, action: str, action_arg: str = "") -> PendingItem | None:
        """The pending item of (state_key, action, action_arg), or None."""
        rows = self._query(
            f"SELECT {self._PENDING_COLS} FROM pending WHERE state_key=? AND action=? "
            "AND action_arg=?",
            (state_key, action, action_arg),
        )
        return self._pending_item(rows[0]) if rows else None

    def add_pending_evidence(
        self, key: int, outcome: str, entry_id: int | None = None, stamp: float | None = None
    ) -> int:
        """Add one fresh outcome (optionally the entry carrying it); returns the evidence count.

        Unknown ``key`` or ``entry_id`` raises ``ValueError``.
        """
        if not isinstance(outcome, str) or not outcome.strip():
            raise ValueError("pending evidence needs a non-empty outcome signature")
        when = self._stamp(stamp)
        if _known_id(key) is None:
            raise ValueError(f"no pending re-verification with key {key}")
        with self.transaction():
            if self._exec("SELECT 1 FROM pending WHERE id=?", (int(key),)).fetchone() is None:
                raise ValueError(f"no pending re-verification with key {key}")
            if entry_id is not None:
                self._require(_normalise_ids([entry_id], "entry_id"))
            self._exec(
                "INSERT INTO pending_evidence(pending_id, outcome, entry_id, stamp) "
                "VALUES(?,?,?,?)",
                (int(key), outcome, entry_id, when),
            )
            n = self._exec(
                "SELECT COUNT(*) FROM pending_evidence WHERE pending_id=?", (int(key),)
            ).fetchone()[0]
        return int(n)

    def clear_pending(self, key: int) -> bool:
        """Remove a pending item and its evidence; False if there was none."""
        if _known_id(key) is None:
            return False
        with self.transaction():
            cur = self._exec("DELETE FROM pending WHERE id=?", (int(key),))
            self._exec("DELETE FROM pending_evidence WHERE pending_id=?", (int(key),))
            return cur.rowcount > 0
