"""Reads of the SQLite experience store: entries, neighbourhoods, counts, history, explain.

The read half of :class:`~glove_ros.core.memory.store.ExperienceStore`: entries by id,
N(e) under an equivalence rule, the trusted-outcome counts behind Q_hist
(:class:`OutcomeGroup`), retrieval for planning, the events that touched an entry and the
text that explains its status. Separate from the writes
(:mod:`~glove_ros.core.memory.store_writes`): nothing here changes the file.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from glove_ros.core.memory.equivalence import EquivalenceRule, ExactStateRule
from glove_ros.core.memory.experience import (
    EventKind,
    Explanation,
    MemoryEntry,
    MemoryEvent,
    Status,
    Transition,
)
from glove_ros.core.memory.store_rows import (
    _CHUNK,
    _chunks,
    _known_id,
    _marks,
    _normalise_ids,
)
from glove_ros.core.memory.store_schema import _COLUMNS

__all__ = ["OutcomeGroup"]


@dataclass(frozen=True)
class OutcomeGroup:
    """Trusted entries of one (state_key, action, action_arg), summarised per outcome.

    ``counts`` maps outcome -> number of trusted entries, ``last_ids`` outcome -> newest
    trusted entry id, ``max_rewards`` outcome -> largest reward among them.
    """

    state_key: str
    action: str
    action_arg: str
    counts: dict[str, int]
    last_ids: dict[str, int]
    max_rewards: dict[str, float]

    @property
    def size(self) -> int:
        """Number of trusted entries in the group."""
        return sum(self.counts.values())

    @property
    def last_id(self) -> int:
        """Newest trusted entry id in the group."""
        return max(self.last_ids.values()) if self.last_ids else 0

    @property
    def pair(self) -> tuple[str, str, str]:
        """``(state_key, action, action_arg)``."""
        return (self.state_key, self.action, self.action_arg)


def _fmt_stamp(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    if stamp > 1e9:  # wall clock: readable local time
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
    return f"t={stamp:g}s"


class _QueryMixin:
    """Read methods of :class:`~glove_ros.core.memory.store.ExperienceStore` (mixed into it)."""

    cell_size: float
    _lock: threading.RLock

    def get(self, entry_id: int) -> MemoryEntry | None:
        """The entry with id ``entry_id``, or None (also for ids no entry can have)."""
        eid = _known_id(entry_id)
        if eid is None:
            return None
        rows = self._query(f"SELECT {_COLUMNS} FROM entries WHERE id=?", (eid,))
        return self._entry(rows[0]) if rows else None

    def get_many(self, ids: Iterable[int]) -> list[MemoryEntry]:
        """Entries for ``ids`` that exist, in the order given."""
        id_list = _normalise_ids(ids)
        by_id: dict[int, MemoryEntry] = {}
        for chunk in _chunks(id_list):
            for row in self._query(
                f"SELECT {_COLUMNS} FROM entries WHERE id IN ({_marks(len(chunk))})",
                tuple(chunk),
            ):
                by_id[row[0]] = self._entry(row)
        return [by_id[i] for i in id_list if i in by_id]

    def find_resent(self, t: Transition) -> int | None:
        """The id of the entry ``t`` itself already made, or None: a request re-sent because
        its answer was lost must not be stored (and counted as evidence) twice.

        The same observation = the same robot, episode, stamp, state, action, argument,
        outcome and source; only a stamped transition (``stamp > 0``) can be recognised,
        since an unstamped one takes the store clock at insert.
        """
        if not t.stamp > 0:
            return None
        rows = self._query(
            "SELECT id FROM entries WHERE state_key=? AND action=? AND action_arg=? "
            "AND outcome=? AND robot_id=? AND episode_id=? AND stamp=? AND source=? "
            "ORDER BY id LIMIT 1",
            (t.state_key, t.action, t.action_arg, t.outcome, t.robot_id, t.episode_id,
             float(t.stamp), int(t.source)))
        return int(rows[0][0]) if rows else None

    def now(self) -> float:
        """The store clock in seconds (stamps left at 0 use it)."""
        return float(self._clock())

    def max_id(self) -> int:
        """Largest entry id so far (0 for an empty store); ids only grow."""
        row = self._query("SELECT MAX(id) FROM entries")
        return int(row[0][0] or 0)

    def neighbourhood(
        self,
        transition: Transition,
        rule: EquivalenceRule | None = None,
        include_suppressed: bool = False,
        limit: int | None = None,
    ) -> list[MemoryEntry]:
        """N(e) = stored entries e_k with s_k ~ s_t under ``rule``, the same action and arg.

        Trusted entries only unless ``include_suppressed`` (then every status). Newest
        first; ``limit`` keeps the newest ``limit``. ``rule`` defaults to same state_key.
        """
        rule = rule or ExactStateRule()
        q = rule.index_query(transition, self.cell_size)
        status = "" if include_suppressed else " AND status=0"
        parts: list[str] = []
        params: list[Any] = []
        if q.state_key is not None:
            unposed = " AND cx IS NULL" if q.unposed_only else ""
            parts.append(
                f"SELECT {_COLUMNS} FROM entries WHERE state_key=? AND action=? "
                f"AND action_arg=?{status}{unposed}"
            )
            params += [q.state_key, transition.action, transition.action_arg]
        if q.uses_cells:
            parts.append(
                f"SELECT {_COLUMNS} FROM entries WHERE action=? AND action_arg=? "
                f"AND cx IS NOT NULL AND cx IN ({_marks(len(q.cell_xs))}) "
                f"AND cy BETWEEN ? AND ?{status}"
            )
            params += [transition.action, transition.action_arg, *q.cell_xs]
            params += [q.cell_y_min, q.cell_y_max]
        if not parts:
            return []
        rows = self._query(" UNION ".join(parts) + " ORDER BY id DESC", params)
        out: list[MemoryEntry] = []
        for row in rows:
            entry = self._entry(row)
            if rule.equivalent(transition, entry.transition):
                out.append(entry)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def outcome_counts(
        self, transition: Transition, rule: EquivalenceRule | None = None
    ) -> dict[str, int]:
        """Outcome -> number of trusted entries in N(transition): the counts behind Q_hist.

        Constant time for key-based rules (maintained counts); pose rules count the
        neighbourhood.
        """
        rule = rule or ExactStateRule()
        if rule.key_based:
            rows = self._query(
                "SELECT outcome, n FROM outcome_counts WHERE state_key=? AND action=? "
                "AND action_arg=?",
                transition.key,
            )
            return {o: int(n) for o, n in rows if n > 0}
        return dict(Counter(e.transition.outcome for e in self.neighbourhood(transition, rule)))

    def outcome_groups(self, state_keys: Iterable[str] | None = None) -> list[OutcomeGroup]:
        """Trusted entries summarised per (state_key, action, action_arg) and outcome.

        Reads the maintained counts (one row per group and outcome), not the entries.
        """
        if state_keys is None:
            rows = self._query(
                "SELECT state_key, action, action_arg, outcome, n, last_id, max_reward "
                "FROM outcome_counts ORDER BY state_key, action, action_arg"
            )
        else:
            keys = sorted(set(state_keys))
            rows = []
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                rows += self._query(
                    "SELECT state_key, action, action_arg, outcome, n, last_id, max_reward "
                    f"FROM outcome_counts WHERE state_key IN ({_marks(len(chunk))}) "
                    "ORDER BY state_key, action, action_arg",
                    chunk,
                )
        groups: dict[tuple[str, str, str], OutcomeGroup] = {}
        for s, a, arg, outcome, n, last_id, max_reward in rows:
            if n <= 0:
                continue
            g = groups.get((s, a, arg))
            if g is None:
                g = groups[(s, a, arg)] = OutcomeGroup(s, a, arg, {}, {}, {})
            g.counts[outcome] = int(n)
            g.last_ids[outcome] = int(last_id)
            g.max_rewards[outcome] = float(max_reward)
        return list(groups.values())

    def query(
        self,
        state_key: str | None = None,
        action: str | None = None,
        action_arg: str | None = None,
        robot_id: str | None = None,
        include_suppressed: bool = False,
        limit: int | None = 100,
        offset: int = 0,
    ) -> tuple[list[MemoryEntry], int]:
        """Retrieve entries for planning, newest first: ``(entries, total_matching)``.

        ``None`` filters match everything (``""`` matches the empty string, e.g. no
        action_arg). Trusted entries only unless ``include_suppressed`` (then suppressed and
        replaced history too). ``total_matching`` counts before ``limit`` / ``offset``.
        """
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        where: list[str] = []
        params: list[Any] = []
        for col, value in (
            ("state_key", state_key),
            ("action", action),
            ("action_arg", action_arg),
        ):
            if value is not None:
                where.append(f"{col}=?")
                params.append(value)
        key_where = list(where)
        key_params = list(params)
        if robot_id is not None:
            where.append("robot_id=?")
            params.append(robot_id)
        if not include_suppressed:
            where.append("status=0")
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        with self._lock:
            if not include_suppressed and robot_id is None:
                kc = (" WHERE " + " AND ".join(key_where)) if key_where else ""
                total = self._query(f"SELECT COALESCE(SUM(n), 0) FROM outcome_counts{kc}",
                                    key_params)[0][0]
            else:
                total = self._query(f"SELECT COUNT(*) FROM entries{clause}", params)[0][0]
            if limit == 0:
                return [], int(total)
            lim = -1 if limit is None else limit
            rows = self._query(
                f"SELECT {_COLUMNS} FROM entries{clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                [*params, lim, offset],
            )
        return [self._entry(r) for r in rows], int(total)

    def history(self, entry_id: int) -> list[MemoryEvent]:
        """Every event that touched ``entry_id``, oldest first, starting with RECORDED.

        Empty for an unknown id.
        """
        entry = self.get(entry_id)
        if entry is None:
            return []
        t = entry.transition
        recorded = MemoryEvent(
            kind=EventKind.RECORDED,
            state_key=t.state_key,
            action=t.action,
            action_arg=t.action_arg,
            entry_ids=(entry.id,),
            reason=f"recorded ({t.source.name.lower()})",
            stamp=entry.valid_from,
        )
        rows = self._query(
            "SELECT e.id, e.kind, e.state_key, e.action, e.action_arg, e.entry_ids, "
            "e.new_entry_ids, e.reason, e.evidence_count, e.stamp FROM event_entries x "
            "JOIN events e ON e.id = x.event_id WHERE x.entry_id=? ORDER BY e.id",
            (int(entry_id),),
        )
        return [recorded, *(self._event(r) for r in rows)]

    def events(self, since: int = 0, limit: int = 1000) -> list[MemoryEvent]:
        """Stored events (not RECORDED) with ``event_id > since``, oldest first."""
        rows = self._query(
            "SELECT id, kind, state_key, action, action_arg, entry_ids, new_entry_ids, reason, "
            "evidence_count, stamp FROM events WHERE id > ? ORDER BY id LIMIT ?",
            (int(since), int(limit)),
        )
        return [self._event(r) for r in rows]

    def explain(self, entry_id: int, rule: EquivalenceRule | None = None) -> Explanation | None:
        """Why ``entry_id`` is trusted, suppressed or replaced, with evidence counts.

        ``rule`` defines its neighbourhood (default: same state_key). ``neighbourhood_size``
        and ``agreeing`` count the *other* trusted entries in N(e). None for an unknown id.
        """
        rule = rule or ExactStateRule()
        with self._lock:
            entry = self.get(entry_id)
            if entry is None:
                return None
            history = tuple(self.history(entry_id))
            t = entry.transition
            neighbours = [
                e for e in self.neighbourhood(t, rule) if e.id != entry.id
            ] if not rule.key_based else None
            if neighbours is None:
                counts = self.outcome_counts(t, rule)
                size = sum(counts.values()) - (1 if entry.trusted else 0)
                agreeing = counts.get(t.outcome, 0) - (1 if entry.trusted else 0)
            else:
                size = len(neighbours)
                agreeing = sum(1 for e in neighbours if e.transition.outcome == t.outcome)
            pending = self.pending_for(*t.key)
        where = f"{t.action}{'(' + t.action_arg + ')' if t.action_arg else ''} at {t.state_key!r}"
        who = ", ".join(
            x for x in (
                f"robot {t.robot_id}" if t.robot_id else "",
                f"episode {t.episode_id}" if t.episode_id else "",
                t.source.name.lower(),
            ) if x
        )
        head = (
            f"Entry {entry.id}: {where} gave {t.outcome!r} ({who}; recorded "
            f"{_fmt_stamp(entry.valid_from)})."
        )
        share = f" ({100.0 * agreeing / size:.0f}%)" if size else ""
        nb = (
            f"{agreeing} of {size} other trusted neighbours ({rule.describe()}) agree{share}."
            if size
            else f"No other trusted entry shares its neighbourhood ({rule.describe()})."
        )
        pending_evidence = 0
        if entry.status == Status.TRUSTED:
            restored = [h for h in history if h.kind == EventKind.RESTORED]
            body = f"It is TRUSTED and retrieved for planning. {nb}"
            if restored:
                body += (
                    f" It was restored {_fmt_stamp(restored[-1].stamp)}: {restored[-1].reason}."
                )
            elif entry.reason.startswith("verified"):
                body += f" It was confirmed as fresh evidence ({entry.reason})."
        elif entry.status == Status.SUPPRESSED:
            body = (
                f"It is SUPPRESSED (hidden from retrieval) since "
                f"{_fmt_stamp(entry.valid_until)}: {entry.reason}. {nb}"
            )
            if pending is not None and entry.id in pending.suppressed_ids:
                pending_evidence = pending.evidence_count
                seen = Counter(pending.evidence)
                fresh = ", ".join(f"{o!r} x{n}" for o, n in seen.most_common(5))
                body += (
                    f" Its (state, action) awaits re-verification with {pending_evidence} fresh "
                    f"sample(s) so far" + (f": {fresh}." if fresh else ".")
                )
            else:
                body += " It is not on the re-verification queue; restore() brings it back."
        else:
            replaced = [h for h in history if h.kind == EventKind.REPLACED and entry.id in
                        h.entry_ids]
            last = replaced[-1] if replaced else None
            by = (
                f" by entries {list(last.new_entry_ids)[:10]} on {last.evidence_count} fresh "
                "sample(s)"
                if last
                else ""
            )
            body = (
                f"It was REPLACED {_fmt_stamp(entry.valid_until)}{by}: {entry.reason}. It is "
                "kept as history and not retrieved; restore() brings it back."
            )
        return Explanation(
            entry=entry,
            history=history,
            text=f"{head} {body}",
            neighbourhood_size=max(size, 0),
            agreeing=max(agreeing, 0),
            pending_evidence=pending_evidence,
        )
