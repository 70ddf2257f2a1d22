"""Plan memory M: the versioned store of the planner's text entries (DESIGN.md sections 2, 4, 5).

Plan memory is three separately testable pieces:

1. **Storage** -- this module: :class:`PlanMemoryStore`, versioned, in SQLite (WAL). Tables
   are prefixed ``plan_`` so the file can be shared with experience memory. Every version is
   an immutable snapshot (an ordered list of immutable entry rows); the *active* version is a
   pointer. A :class:`Candidate` is an edit set applied to the active version and stored as
   an undeployed version; :meth:`PlanMemoryStore.deploy` moves the pointer to it,
   :meth:`PlanMemoryStore.reject` marks it rejected (kept for audit),
   :meth:`PlanMemoryStore.rollback` moves the pointer back to any deployed version in one call.
   Nothing is ever deleted: removed and replaced entries stay in older versions, every edit
   keeps its reason (:meth:`PlanMemoryStore.history`, :meth:`PlanMemoryStore.archived`), and
   :meth:`PlanMemoryStore.append` is the append-only fast writer (Auto-Dreamer) that journals
   each write with its episode trace.
2. **Retrieval** -- :func:`~glove_ros.core.plan.plan_retrieval.rank_entries`: order entries
   for a query (lexical overlap, plus embedding cosine when an embedder is given), negative
   lessons first on ties.
3. **Prompt assembly** -- :func:`~glove_ros.core.plan.plan_retrieval.assemble_prompt`: the
   text the planner reads, under a token budget;
   :func:`~glove_ros.core.plan.plan_retrieval.memory_text` is the whole memory as one
   canonical text (what the Janus trigger embeds).

The entries themselves (:class:`~glove_ros.core.plan.plan_entries.PlanEntry`,
:class:`~glove_ros.core.plan.plan_entries.Edit`, validation and
:func:`~glove_ros.core.plan.plan_entries.apply_edits`) are in
:mod:`glove_ros.core.plan.plan_entries`; retrieval and prompt assembly in
:mod:`glove_ros.core.plan.plan_retrieval`. This module keeps the SQLite storage and the
records it answers with (versions, revisions, archived entries, journal, audit events).

Versions are positive ints (the ROS ``GateDecision.active_version`` string is ``str(v)``).
Version 1 is the empty memory created with a new database.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.memory.store_check import retry_while_busy
from glove_ros.core.plan.plan_entries import (
    MAX_NAME,
    Edit,
    PlanEntry,
    Provenance,
    _check_name,
    apply_edits,
)
from glove_ros.core.plan.plan_retrieval import (
    RenderedMemory,
    assemble_prompt,
    memory_text,
    rank_entries,
)

__all__ = [
    "Candidate",
    "VersionInfo",
    "EntryRevision",
    "ArchivedEntry",
    "JournalRecord",
    "MemoryEvent",
    "PlanMemoryStore",
    "StaleCandidateError",
]

_SCHEMA_VERSION = "1"


class StaleCandidateError(ValueError):
    """A candidate was built on a version that is no longer active; propose it again."""


# --------------------------------------------------------------------------------------------
# records the store answers with


@dataclass(frozen=True)
class Candidate:
    """A proposed edit set applied to ``base_version``, stored as undeployed ``version``."""

    version: int
    base_version: int
    edits: tuple[Edit, ...]
    entries: tuple[PlanEntry, ...]
    base_entries: tuple[PlanEntry, ...]
    source: str
    reason: str

    @property
    def text(self) -> str:
        """The candidate memory M_hat as one canonical text
        (:func:`~glove_ros.core.plan.plan_retrieval.memory_text`)."""
        return memory_text(self.entries)

    @property
    def base_text(self) -> str:
        """The memory the candidate was built on, M_{t-1}, as text."""
        return memory_text(self.base_entries)

    @property
    def changed(self) -> bool:
        """False when the edits leave the memory identical to the base."""
        if len(self.entries) != len(self.base_entries):
            return True
        pairs = zip(self.entries, self.base_entries, strict=True)
        return any(not a.same_content(b) for a, b in pairs)


@dataclass(frozen=True)
class VersionInfo:
    """One stored version. ``status``: "candidate", "deployed" (deployed at least once) or
    "rejected"."""

    version: int
    parent: int | None
    status: str
    source: str
    reason: str
    created_at: float
    deployed_at: float | None
    n_entries: int
    active: bool


@dataclass(frozen=True)
class EntryRevision:
    """One change to a named entry in a deployed version (:meth:`PlanMemoryStore.history`)."""

    version: int
    op: str
    entry: PlanEntry | None  # the new row (None for remove)
    previous: PlanEntry | None  # the row replaced or removed (None for add)
    reason: str
    deployed_at: float | None


@dataclass(frozen=True)
class ArchivedEntry:
    """An entry that was in some deployed version but is not in the version asked about."""

    entry: PlanEntry
    last_version: int  # last deployed version that held it
    removed_in: int | None  # version whose edit removed or replaced it (None: rollback)
    op: str  # "remove", "edit" or "rollback"
    reason: str


@dataclass(frozen=True)
class JournalRecord:
    """One fast write (:meth:`PlanMemoryStore.append`)."""

    record_id: int
    ts: float
    episode_id: str
    trace: Mapping[str, Any]
    entry: PlanEntry
    version: int | None  # version deployed with it, None when only journaled


@dataclass(frozen=True)
class MemoryEvent:
    """An audit-log event: propose, deploy, reject, rollback, append."""

    event_id: int
    ts: float
    event: str
    version: int | None
    detail: Mapping[str, Any]


# --------------------------------------------------------------------------------------------
# storage

_DDL = """
CREATE TABLE IF NOT EXISTS plan_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS plan_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('semantic', 'procedure', 'negative')),
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    episodes TEXT NOT NULL,
    transitions TEXT NOT NULL,
    meta TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS plan_versions (
    version INTEGER PRIMARY KEY AUTOINCREMENT,
    parent INTEGER,
    status TEXT NOT NULL CHECK (status IN ('candidate', 'deployed', 'rejected')),
    source TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    deployed_at REAL
);
CREATE TABLE IF NOT EXISTS plan_version_entries (
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    entry_id INTEGER NOT NULL,
    PRIMARY KEY (version, position)
);
CREATE TABLE IF NOT EXISTS plan_edits (
    version INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    op TEXT NOT NULL,
    name TEXT NOT NULL,
    old_entry_id INTEGER,
    new_entry_id INTEGER,
    reason TEXT NOT NULL,
    PRIMARY KEY (version, seq)
);
CREATE INDEX IF NOT EXISTS plan_edits_name ON plan_edits (name);
CREATE TABLE IF NOT EXISTS plan_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    event TEXT NOT NULL,
    version INTEGER,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS plan_journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    episode_id TEXT NOT NULL,
    trace TEXT NOT NULL,
    entry_id INTEGER NOT NULL,
    version INTEGER
);
"""


_OPEN_LOCKED_S = 10.0  # how long opening waits out another process holding the file


class PlanMemoryStore:
    """Versioned plan memory in SQLite (WAL).

    Args:
        path: database file (created if missing; may be shared with experience memory) or
            ``":memory:"`` for tests.
        synchronous: SQLite ``synchronous`` pragma: "FULL" (default: a deployed version
            survives a power cut) or "NORMAL" (faster; WAL still never corrupts).
        clock: time source (UNIX seconds), injectable for tests.

    All methods are thread-safe; several processes may open the same file (writes use
    ``BEGIN IMMEDIATE``). Every mutating method validates first and writes in one
    transaction: a bad input raises ``ValueError`` and changes nothing.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL' (got {synchronous!r})")
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().parent
            if not parent.is_dir():
                raise ValueError(f"directory of the plan-memory database does not exist: {parent}")
        self._clock = clock
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        self._db.row_factory = sqlite3.Row
        try:  # another process may be creating or switching the same file right now
            retry_while_busy(lambda: self._open(synchronous), _OPEN_LOCKED_S)
        except sqlite3.OperationalError:
            self._db.close()
            raise

    def _open(self, synchronous: str) -> None:
        """Switch to WAL and create or check the schema (idempotent, so safe to repeat)."""
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._tx() as db:
            for stmt in _DDL.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            row = db.execute("SELECT value FROM plan_meta WHERE key='schema'").fetchone()
            if row is None:
                db.execute("INSERT INTO plan_meta VALUES ('schema', ?)", (_SCHEMA_VERSION,))
            elif row["value"] != _SCHEMA_VERSION:
                raise ValueError(
                    f"{self.path}: plan-memory schema {row['value']} is not supported "
                    f"(this code reads schema {_SCHEMA_VERSION})"
                )
            if db.execute("SELECT value FROM plan_meta WHERE key='active'").fetchone() is None:
                now = self._clock()
                cur = db.execute(
                    "INSERT INTO plan_versions (parent, status, source, reason, created_at, "
                    "deployed_at) VALUES (NULL, 'deployed', 'init', 'empty memory', ?, ?)",
                    (now, now),
                )
                db.execute("INSERT INTO plan_meta VALUES ('active', ?)", (str(cur.lastrowid),))
                self._event(db, "deploy", cur.lastrowid, {"reason": "empty memory"})

    # -- plumbing
    class _Tx:
        def __init__(self, store: PlanMemoryStore) -> None:
            self.store = store

        def __enter__(self) -> sqlite3.Connection:
            self.store._lock.acquire()
            try:
                self.store._db.execute("BEGIN IMMEDIATE")
            except BaseException:
                self.store._lock.release()
                raise
            return self.store._db

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
            try:
                if exc_type is None:
                    self.store._db.execute("COMMIT")
                else:
                    self.store._db.execute("ROLLBACK")
            finally:
                self.store._lock.release()

    def _tx(self) -> PlanMemoryStore._Tx:
        return PlanMemoryStore._Tx(self)

    def _event(
        self, db: sqlite3.Connection, event: str, version: int | None, detail: Mapping[str, Any]
    ) -> None:
        db.execute(
            "INSERT INTO plan_events (ts, event, version, detail) VALUES (?, ?, ?, ?)",
            (self._clock(), event, version, json.dumps(dict(detail), sort_keys=True)),
        )

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.ProgrammingError:  # pragma: no cover
                pass

    def __enter__(self) -> PlanMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _row_entry(r: sqlite3.Row) -> PlanEntry:
        return PlanEntry(
            kind=r["kind"],
            name=r["name"],
            body=r["body"],
            provenance=Provenance(
                tuple(json.loads(r["episodes"])), tuple(json.loads(r["transitions"]))
            ),
            meta=json.loads(r["meta"]),
            source=r["source"],
            entry_id=r["id"],
            created_at=r["created_at"],
        )

    def _insert_entry(self, db: sqlite3.Connection, e: PlanEntry, now: float) -> int:
        cur = db.execute(
            "INSERT INTO plan_entries (kind, name, body, episodes, transitions, meta, source, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                e.kind,
                e.name,
                e.body,
                json.dumps(list(e.provenance.episodes)),
                json.dumps(list(e.provenance.transitions)),
                json.dumps(dict(e.meta), sort_keys=True),
                e.source,
                now,
            ),
        )
        return int(cur.lastrowid)

    def _active(self, db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT value FROM plan_meta WHERE key='active'").fetchone()[0])

    def _entries(self, db: sqlite3.Connection, version: int) -> list[PlanEntry]:
        rows = db.execute(
            "SELECT e.* FROM plan_version_entries v JOIN plan_entries e ON e.id = v.entry_id "
            "WHERE v.version = ? ORDER BY v.position",
            (version,),
        ).fetchall()
        return [self._row_entry(r) for r in rows]

    def _version_row(self, db: sqlite3.Connection, version: object) -> sqlite3.Row:
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"version must be an int, got {version!r}")
        row = db.execute("SELECT * FROM plan_versions WHERE version = ?", (version,)).fetchone()
        if row is None:
            raise ValueError(f"no plan-memory version {version}")
        return row

    def _store_version(
        self,
        db: sqlite3.Connection,
        parent: int,
        base: list[PlanEntry],
        new_entries: list[PlanEntry],
        edits: Sequence[Edit],
        status: str,
        source: str,
        reason: str,
    ) -> tuple[int, list[PlanEntry]]:
        now = self._clock()
        cur = db.execute(
            "INSERT INTO plan_versions (parent, status, source, reason, created_at, deployed_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (parent, status, source, reason, now, now if status == "deployed" else None),
        )
        version = int(cur.lastrowid)
        stored: list[PlanEntry] = []
        for pos, e in enumerate(new_entries):
            eid = e.entry_id if e.entry_id is not None else self._insert_entry(db, e, now)
            db.execute(
                "INSERT INTO plan_version_entries (version, position, entry_id) VALUES (?, ?, ?)",
                (version, pos, eid),
            )
            stored.append(e if e.entry_id is not None else replace(e, entry_id=eid,
                                                                    created_at=now))
        by_name_old = {e.name: e for e in base}
        by_name_new = {e.name: e for e in stored}
        for seq, ed in enumerate(edits):
            old = by_name_old.get(ed.name)
            new = by_name_new.get(ed.name) if ed.op != "remove" else None
            db.execute(
                "INSERT INTO plan_edits VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    version,
                    seq,
                    ed.op,
                    ed.name,
                    old.entry_id if old and ed.op != "add" else None,
                    new.entry_id if new else None,
                    ed.reason,
                ),
            )
        return version, stored

    # -- reading
    @property
    def active_version(self) -> int:
        """The deployed version the planner reads."""
        with self._lock:
            return self._active(self._db)

    def entries(self, version: int | None = None) -> list[PlanEntry]:
        """Entries of ``version`` (default: active) in version order."""
        with self._lock:
            v = self._active(self._db) if version is None else version
            self._version_row(self._db, v)
            return self._entries(self._db, v)

    def entry(self, name: str, version: int | None = None) -> PlanEntry | None:
        """The entry called ``name`` in ``version`` (default: active), or ``None``."""
        for e in self.entries(version):
            if e.name == name:
                return e
        return None

    def text(self, version: int | None = None) -> str:
        """The whole memory of ``version`` as canonical text
        (:func:`~glove_ros.core.plan.plan_retrieval.memory_text`)."""
        return memory_text(self.entries(version))

    def version_info(self, version: int | None = None) -> VersionInfo:
        """Metadata of ``version`` (default: active)."""
        with self._lock:
            active = self._active(self._db)
            v = active if version is None else version
            r = self._version_row(self._db, v)
            n = self._db.execute(
                "SELECT COUNT(*) FROM plan_version_entries WHERE version = ?", (v,)
            ).fetchone()[0]
            return self._info(r, n, active)

    @staticmethod
    def _info(r: sqlite3.Row, n: int, active: int) -> VersionInfo:
        return VersionInfo(
            r["version"], r["parent"], r["status"], r["source"], r["reason"],
            r["created_at"], r["deployed_at"], int(n), r["version"] == active,
        )

    def versions(self, status: str | None = None) -> list[VersionInfo]:
        """All versions, oldest first, optionally only one ``status``."""
        if status is not None and status not in ("candidate", "deployed", "rejected"):
            raise ValueError(f"status must be candidate, deployed or rejected (got {status!r})")
        with self._lock:
            active = self._active(self._db)
            rows = self._db.execute(
                "SELECT v.*, (SELECT COUNT(*) FROM plan_version_entries x "
                "WHERE x.version = v.version) AS n FROM plan_versions v ORDER BY v.version"
            ).fetchall()
            return [
                self._info(r, r["n"], active)
                for r in rows
                if status is None or r["status"] == status
            ]

    # -- writing
    def propose(
        self, edits: Sequence[Edit], *, source: str = "manual", reason: str = ""
    ) -> Candidate:
        """Apply ``edits`` to the active version and store the result as a candidate.

        The active version does not change. Raises ``ValueError`` (nothing written) for an
        invalid edit set (see :func:`~glove_ros.core.plan.plan_entries.apply_edits`).
        """
        _check_source(source)
        with self._tx() as db:
            base_v = self._active(db)
            base = self._entries(db, base_v)
            new = apply_edits(base, edits, source=source)
            version, stored = self._store_version(
                db, base_v, base, new, edits, "candidate", source, reason
            )
            self._event(
                db, "propose", version,
                {"base": base_v, "source": source, "reason": reason,
                 "edits": [f"{e.op} {e.name}" for e in edits]},
            )
        return Candidate(version, base_v, tuple(edits), tuple(stored), tuple(base), source,
                         reason)

    def deploy(self, candidate: Candidate | int, *, reason: str = "") -> int:
        """Make a candidate the active version. Returns its version.

        Raises:
            StaleCandidateError: the candidate's base is no longer the active version.
            ValueError: unknown version, or one that is not a candidate.
        """
        v = candidate.version if isinstance(candidate, Candidate) else candidate
        with self._tx() as db:
            r = self._version_row(db, v)
            if r["status"] != "candidate":
                raise ValueError(
                    f"version {v} is {r['status']}, not a candidate (use rollback() to return "
                    "to a deployed version)"
                )
            active = self._active(db)
            if r["parent"] != active:
                raise StaleCandidateError(
                    f"candidate {v} was built on version {r['parent']} but {active} is active; "
                    "propose the edits again"
                )
            db.execute(
                "UPDATE plan_versions SET status='deployed', deployed_at=? WHERE version=?",
                (self._clock(), v),
            )
            db.execute("UPDATE plan_meta SET value=? WHERE key='active'", (str(v),))
            self._event(db, "deploy", v, {"previous": active, "reason": reason})
        return v

    def reject(self, candidate: Candidate | int, reason: str) -> None:
        """Mark a candidate rejected (it stays stored for audit). The active version is
        unchanged. Raises ``ValueError`` if it is not a candidate or ``reason`` is empty."""
        v = candidate.version if isinstance(candidate, Candidate) else candidate
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("reject needs a reason")
        with self._tx() as db:
            r = self._version_row(db, v)
            if r["status"] != "candidate":
                raise ValueError(f"version {v} is {r['status']}, not a candidate")
            db.execute("UPDATE plan_versions SET status='rejected' WHERE version=?", (v,))
            self._event(db, "reject", v, {"reason": reason})

    def rollback(self, version: int, *, reason: str = "rollback") -> int:
        """Make a previously deployed ``version`` active again, in one call. Returns it.

        Newer versions stay stored (and can be rolled forward to the same way).
        Raises ``ValueError`` for an unknown or never-deployed version.
        """
        with self._tx() as db:
            r = self._version_row(db, version)
            if r["status"] != "deployed":
                raise ValueError(
                    f"version {version} is {r['status']}; only deployed versions can be rolled "
                    "back to"
                )
            active = self._active(db)
            db.execute("UPDATE plan_meta SET value=? WHERE key='active'", (str(version),))
            self._event(db, "rollback", version, {"previous": active, "reason": reason})
        return version

    def apply(self, edits: Sequence[Edit], *, source: str = "manual", reason: str = "") -> int:
        """:meth:`propose` then :meth:`deploy`, ungated. Returns the new active version."""
        return self.deploy(self.propose(edits, source=source, reason=reason), reason=reason)

    def append(
        self,
        entries: Sequence[PlanEntry],
        *,
        episode_id: str,
        trace: Mapping[str, Any] | None = None,
        deploy: bool = True,
    ) -> int | None:
        """The fast writer (Auto-Dreamer): append entries from one episode, no retrieval.

        Each entry is journaled with ``episode_id`` and ``trace`` (a JSON-able pointer to the
        raw episode trace, e.g. ``{"bag": "...", "transitions": [..]}``); ``episode_id`` is
        added to its provenance. With ``deploy=True`` a new version = active + these entries
        is deployed at once (append-only: existing entries are never changed; a name already
        taken gets a ``-2``, ``-3``... suffix). With ``deploy=False`` the entries are only
        journaled, for the dock-time consolidator to pick up (:meth:`journal`).

        Returns the new active version, or ``None`` when only journaled.
        Raises ``ValueError`` (nothing written) for invalid entries / arguments.
        """
        if not isinstance(episode_id, str) or not episode_id or len(episode_id) > 128:
            raise ValueError("episode_id must be a non-empty string <= 128 chars")
        trace = dict(trace or {})
        try:
            trace_json = json.dumps(trace, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"trace must be JSON-serialisable: {exc}") from exc
        items = list(entries)
        if not items:
            raise ValueError("append needs at least one entry")
        prepared = []
        for e in items:
            if not isinstance(e, PlanEntry):
                raise ValueError(f"append takes PlanEntry objects, got {type(e).__name__}")
            e = replace(
                e,
                provenance=e.provenance.merged(Provenance((episode_id,))),
                source=e.source if e.source != "manual" else "fast_writer",
                entry_id=None,
            ).validate()
            prepared.append(e)
        with self._tx() as db:
            version: int | None = None
            if deploy:
                base_v = self._active(db)
                base = self._entries(db, base_v)
                taken = {e.name for e in base}
                renamed = []
                for e in prepared:
                    name, k = e.name, 2
                    while name in taken:
                        suffix = f"-{k}"
                        name = e.name[: MAX_NAME - len(suffix)] + suffix
                        k += 1
                    taken.add(name)
                    renamed.append(replace(e, name=name))
                prepared = renamed
                edits = [
                    Edit("add", e.name, e.kind, e.body, e.provenance, e.meta,
                         f"fast write from episode {episode_id}")
                    for e in prepared
                ]
                version, stored = self._store_version(
                    db, base_v, base, base + prepared, edits, "deployed", "fast_writer",
                    f"episode {episode_id}",
                )
                db.execute("UPDATE plan_meta SET value=? WHERE key='active'", (str(version),))
                ids = [e.entry_id for e in stored[len(base):]]
            else:
                now = self._clock()
                ids = [self._insert_entry(db, e, now) for e in prepared]
            now = self._clock()
            for eid in ids:
                db.execute(
                    "INSERT INTO plan_journal (ts, episode_id, trace, entry_id, version) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (now, episode_id, trace_json, eid, version),
                )
            self._event(
                db, "append", version,
                {"episode": episode_id, "names": [e.name for e in prepared], "deployed": deploy},
            )
        return version

    # -- history
    def journal(self, since_id: int = 0, limit: int = 1000) -> list[JournalRecord]:
        """Fast writes with ``record_id > since_id``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT j.id AS jid, j.ts AS jts, j.episode_id, j.trace, j.version, e.* "
                "FROM plan_journal j JOIN plan_entries e ON e.id = j.entry_id "
                "WHERE j.id > ? ORDER BY j.id LIMIT ?",
                (int(since_id), int(limit)),
            ).fetchall()
        return [
            JournalRecord(r["jid"], r["jts"], r["episode_id"], json.loads(r["trace"]),
                          self._row_entry(r), r["version"])
            for r in rows
        ]

    def history(self, name: str) -> list[EntryRevision]:
        """Every deployed change to the entry ``name``, oldest first, with its reason."""
        _check_name(name)
        with self._lock:
            rows = self._db.execute(
                "SELECT d.*, v.deployed_at FROM plan_edits d JOIN plan_versions v "
                "ON v.version = d.version WHERE d.name = ? AND v.status = 'deployed' "
                "ORDER BY d.version, d.seq",
                (name,),
            ).fetchall()
            out = []
            for r in rows:
                new = self._entry_by_id(r["new_entry_id"])
                old = self._entry_by_id(r["old_entry_id"])
                out.append(EntryRevision(r["version"], r["op"], new, old, r["reason"],
                                         r["deployed_at"]))
            return out

    def _entry_by_id(self, eid: int | None) -> PlanEntry | None:
        if eid is None:
            return None
        r = self._db.execute("SELECT * FROM plan_entries WHERE id = ?", (eid,)).fetchone()
        return self._row_entry(r) if r else None

    def archived(self, version: int | None = None) -> list[ArchivedEntry]:
        """Entries held by some deployed version but not by ``version`` (default: active),
        each with the edit that removed or replaced it and its reason."""
        with self._lock:
            v = self._active(self._db) if version is None else version
            self._version_row(self._db, v)
            current = {
                r[0]
                for r in self._db.execute(
                    "SELECT entry_id FROM plan_version_entries WHERE version = ?", (v,)
                )
            }
            rows = self._db.execute(
                "SELECT x.entry_id, MAX(x.version) AS last FROM plan_version_entries x "
                "JOIN plan_versions v ON v.version = x.version WHERE v.status = 'deployed' "
                "GROUP BY x.entry_id ORDER BY x.entry_id"
            ).fetchall()
            out = []
            for r in rows:
                if r["entry_id"] in current:
                    continue
                entry = self._entry_by_id(r["entry_id"])
                assert entry is not None
                ed = self._db.execute(
                    "SELECT d.* FROM plan_edits d JOIN plan_versions v ON v.version = d.version "
                    "WHERE d.old_entry_id = ? AND v.status = 'deployed' ORDER BY d.version "
                    "LIMIT 1",
                    (r["entry_id"],),
                ).fetchone()
                if ed is None:
                    out.append(ArchivedEntry(entry, r["last"], None, "rollback",
                                             "not in this version (rolled back)"))
                else:
                    out.append(ArchivedEntry(entry, r["last"], ed["version"], ed["op"],
                                             ed["reason"]))
            return out

    def events(self, limit: int = 100) -> list[MemoryEvent]:
        """The most recent audit events, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM plan_events ORDER BY id DESC LIMIT ?", (int(limit),)
            ).fetchall()
        return [
            MemoryEvent(r["id"], r["ts"], r["event"], r["version"], json.loads(r["detail"]))
            for r in reversed(rows)
        ]

    # -- rendering
    def render(
        self,
        version: int | None = None,
        budget_tokens: int | None = None,
        *,
        query: str | None = None,
        count_tokens: Callable[[str], int] = approx_tokens,
        embedder: Any = None,
    ) -> RenderedMemory:
        """Retrieval (:func:`~glove_ros.core.plan.plan_retrieval.rank_entries`) then assembly
        (:func:`~glove_ros.core.plan.plan_retrieval.assemble_prompt`) of
        ``version`` (default: active) for the planner."""
        return assemble_prompt(
            rank_entries(self.entries(version), query, embedder=embedder),
            budget_tokens,
            count_tokens=count_tokens,
        )

    # -- small key/value state for other components (e.g. the Janus gate's momentum)
    def get_state(self, key: str) -> Any:
        """A JSON value saved with :meth:`set_state`, or ``None``."""
        _check_state_key(key)
        with self._lock:
            r = self._db.execute(
                "SELECT value FROM plan_meta WHERE key = ?", (f"state:{key}",)
            ).fetchone()
        return None if r is None else json.loads(r[0])

    def set_state(self, key: str, value: Any) -> None:
        """Persist a JSON-able ``value`` under ``key`` (atomically)."""
        _check_state_key(key)
        try:
            blob = json.dumps(value, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state {key!r} must be JSON-serialisable, no NaN: {exc}") from exc
        with self._tx() as db:
            db.execute(
                "INSERT INTO plan_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (f"state:{key}", blob),
            )


def _check_source(source: object) -> None:
    if not isinstance(source, str) or not source or len(source) > 64:
        raise ValueError(f"source must be a non-empty string <= 64 chars: {source!r}")


def _check_state_key(key: object) -> None:
    if not isinstance(key, str) or not key or len(key) > 64:
        raise ValueError(f"state key must be a non-empty string <= 64 chars: {key!r}")

