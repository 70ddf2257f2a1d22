"""Persistent experience memory D: a multiset of transitions in SQLite (DESIGN.md section 2).

:class:`ExperienceStore` keeps every transition ever recorded, with its verification state
(trusted, suppressed, replaced), the events that changed it, GLOVE's pending re-verification
queue P, and a small key-value table for the verifier's own state. Nothing is deleted:
replacing or suppressing an entry only changes its status and validity interval, so every
change can be explained (:meth:`ExperienceStore.explain`) and undone
(:meth:`ExperienceStore.restore`).

Durability. The database runs in WAL mode and every public write commits before it returns
(``synchronous=FULL`` by default, so an acknowledged write also survives power loss;
``NORMAL`` survives a killed process but may lose the last commits on power loss). Several
writes can be grouped into one atomic commit with :meth:`ExperienceStore.transaction`.
Entry ids are SQLite rowids and only grow: entries are never deleted, so no id is reused.

Indexes. Entries are indexed by (state_key, action, action_arg, status) and, for posed
entries, by (action, action_arg, grid cell); per (state_key, action, action_arg, outcome) the
store maintains the count of trusted entries, so Q_hist for key-based equivalence rules, the
number of matching trusted entries of a query, and the trusted total are answered without
scanning. Neighbourhood lookup and retrieval therefore stay flat from 10^3 to 10^6 rows,
growing only with B-tree depth like a bare indexed table (``glove-ros bench memory``). Scans
remain only for rare calls: queries by ``robot_id`` or ``action`` alone, and pose-rule
neighbourhoods, which read the candidates of a few grid cells. WAL checkpoints run every
16 MB of WAL instead of SQLite's 4 MB, so their copy + fsync lands on fewer writes.

Safety. Before an existing file is opened for writing, :func:`~glove_ros.core.memory.store_check.
check_file` reads it without writing it or its WAL (reading through the ``-wal`` file when it
holds frames, so rows left there by an interrupted checkpoint, a killed process or a full disk
count). :class:`StoreCorruptError` is raised only when SQLite itself reports damage; a
read-only location, a file that cannot be opened, a full disk, a zero-byte file without a WAL
and another application's SQLite file each raise :class:`StoreError` with their own message,
and every refused file is left byte-for-byte untouched. ``check=True`` also runs ``PRAGMA
quick_check`` at open. A new file is created 0600 (its directory 0700). Bad input (invalid
transitions, unknown ids) raises ``ValueError`` and changes nothing.

Threads. One connection guarded by a re-entrant lock; any thread may call any method.
Listeners (:meth:`ExperienceStore.add_listener`) receive each :class:`MemoryEvent` after the
commit that made it durable, outside the lock, in commit order per thread.

Layout. :class:`ExperienceStore` here keeps the connection, transactions, listeners, the
small key-value state and the statistics; the rest is mixed in from one module per concern:
:mod:`~glove_ros.core.memory.store_schema` (file format, opening, :func:`~glove_ros.core.memory.
store_schema.recover_store`), :mod:`~glove_ros.core.memory.store_rows` (row codec, shared
write steps), :mod:`~glove_ros.core.memory.store_queries` (reads, :class:`~glove_ros.core.
memory.store_queries.OutcomeGroup`) and :mod:`~glove_ros.core.memory.store_writes` (writes,
pending queue).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from glove_ros.core.memory.experience import MemoryEvent, Status
from glove_ros.core.memory.store_check import (
    RecoveryReport,
    StoreCorruptError,
    StoreError,
    describe_error,
    retry_while_busy,
)
from glove_ros.core.memory.store_queries import _QueryMixin
from glove_ros.core.memory.store_rows import _RowsMixin
from glove_ros.core.memory.store_schema import DEFAULT_CELL_SIZE, SCHEMA_VERSION, _SchemaMixin
from glove_ros.core.memory.store_writes import _WriteMixin

__all__ = [
    "ExperienceStore",
    "RecoveryReport",
    "StoreCorruptError",
    "StoreError",
]

_LOG = logging.getLogger(__name__)


class ExperienceStore(_SchemaMixin, _QueryMixin, _WriteMixin, _RowsMixin):
    """Experience memory D persisted in one SQLite file (see the module docstring).

    ``path`` is a file path (created with its parent directory if missing) or ``":memory:"``.
    ``cell_size`` (metres) fixes the grid of the pose index when the store is created; an
    existing store keeps its own, and a different explicit value raises ``ValueError``.
    ``synchronous`` is ``"FULL"`` (default: acknowledged writes survive power loss) or
    ``"NORMAL"``. ``clock`` gives seconds for stamps left at 0. ``check`` runs
    ``PRAGMA quick_check`` at open (reads the whole file).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        cell_size: float | None = None,
        synchronous: str = "FULL",
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
        check: bool = False,
    ) -> None:
        sync = str(synchronous).upper()
        if sync not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        if cell_size is not None and (
            isinstance(cell_size, bool)
            or not isinstance(cell_size, (int, float))
            or not math.isfinite(cell_size)
            or cell_size <= 0
        ):
            raise ValueError(f"cell_size must be a finite number of metres > 0, got {cell_size!r}")
        self.path = str(path)
        self.synchronous = sync
        self._clock = clock
        self._lock = threading.RLock()
        self._depth = 0
        self._savepoints = 0
        self._queued: list[MemoryEvent] = []
        self._listeners: list[Callable[[MemoryEvent], None]] = []
        #: called inside the write transaction for every event (see add_transaction_hook)
        self._tx_hooks: list[Callable[[MemoryEvent, Callable[..., Any]], None]] = []
        self._conn: sqlite3.Connection | None = None
        self.cell_size = DEFAULT_CELL_SIZE
        self._created = False  # this open created the file (a retry must not refuse it empty)
        # another process may be creating or switching the same file to WAL right now
        retry_while_busy(lambda: self._open(cell_size, timeout, check), max(timeout, 1.0))

    # ------------------------------------------------------------------ open / close

    def set_synchronous(self, synchronous: str) -> None:
        """Switch durability at run time: ``"FULL"`` (power-loss safe) or ``"NORMAL"``.

        Both keep every acknowledged write across a killed process; NORMAL may lose the last
        commits on power loss (never consistency) and saves one fsync per write.
        """
        sync = str(synchronous).upper()
        if sync not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        with self._lock:
            if self._depth:
                raise StoreError("set_synchronous() inside a transaction")
            self._db().execute(f"PRAGMA synchronous={sync}")
            self.synchronous = sync

    def checkpoint(self, truncate: bool = False) -> None:
        """Copy the WAL into the database file now (e.g. while docked or idle).

        ``truncate`` also empties the WAL file (waits for readers). Writes stay durable either
        way; this only moves the periodic copy cost to a moment of your choosing.
        """
        with self._lock:
            if self._depth:
                raise StoreError("checkpoint() inside a transaction")
            mode = "TRUNCATE" if truncate else "PASSIVE"
            try:
                self._db().execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    def close(self) -> None:
        """Close the database; further calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._conn is None

    def __enter__(self) -> ExperienceStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ExperienceStore({self.path!r})"

    # ------------------------------------------------------------------ plumbing

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"experience store {self.path} is closed")
        return self._conn

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        return describe_error(self.path, exc)

    @contextmanager
    def transaction(self) -> Iterator[ExperienceStore]:
        """Group writes into one atomic commit; nest freely (inner levels are savepoints).

        Events reach listeners only after the outermost commit. An exception rolls back
        everything written inside the block (and drops its events) and propagates.
        """
        emit: list[MemoryEvent] = []
        with self._lock:
            db = self._db()
            outer = self._depth == 0
            mark = len(self._queued)
            name = ""
            try:
                if outer:
                    db.execute("BEGIN IMMEDIATE")
                else:
                    self._savepoints += 1
                    name = f"sp{self._savepoints}"
                    db.execute(f"SAVEPOINT {name}")
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            self._depth += 1
            try:
                yield self
            except BaseException as exc:
                self._depth -= 1
                del self._queued[mark:]
                try:
                    if outer:
                        db.execute("ROLLBACK")
                    else:
                        db.execute(f"ROLLBACK TO {name}")
                        db.execute(f"RELEASE {name}")
                except sqlite3.Error:  # pragma: no cover - rollback after a dead connection
                    _LOG.exception("rollback failed on %s", self.path)
                if isinstance(exc, sqlite3.Error):
                    raise self._translate(exc) from exc
                raise
            else:
                self._depth -= 1
                try:
                    if outer:
                        db.execute("COMMIT")
                    else:
                        db.execute(f"RELEASE {name}")
                except sqlite3.Error as exc:
                    if outer:
                        self._queued.clear()
                        try:
                            db.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise self._translate(exc) from exc
                if outer:
                    emit, self._queued = self._queued, []
        for event in emit:
            self._emit(event)

    def _emit(self, event: MemoryEvent) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:
                _LOG.exception("memory event listener %r failed", fn)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        # only called inside transaction(), which holds the lock
        try:
            return self._db().execute(sql, params)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def add_listener(
        self, fn: Callable[[MemoryEvent], None]
    ) -> Callable[[MemoryEvent], None]:
        """Call ``fn(event)`` for every :class:`MemoryEvent` after its commit; returns ``fn``.

        Exceptions raised by ``fn`` are logged and ignored. RECORDED events are built only
        while at least one listener is registered.
        """
        if not callable(fn):
            raise ValueError(f"listener must be callable, got {fn!r}")
        with self._lock:
            self._listeners.append(fn)
        return fn

    def add_transaction_hook(
        self, fn: Callable[[MemoryEvent, Callable[..., Any]], None]
    ) -> Callable[[MemoryEvent, Callable[..., Any]], None]:
        """Call ``fn(event, execute)`` for every :class:`MemoryEvent` *inside* the write
        transaction that makes it, before the commit; ``execute(sql, params)`` runs SQL in
        that transaction (e.g. an outbox row that must commit with the change, or not at
        all). An exception raised by ``fn`` rolls the write back and propagates. Returns
        ``fn``."""
        if not callable(fn):
            raise ValueError(f"transaction hook must be callable, got {fn!r}")
        with self._lock:
            self._tx_hooks.append(fn)
        return fn

    def remove_listener(self, fn: Callable[[MemoryEvent], None]) -> None:
        """Stop calling ``fn``; unknown listeners are ignored."""
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    # ------------------------------------------------------------------ small state

    def get_state(self, name: str, default: Any = None) -> Any:
        """A JSON value saved with :meth:`set_state` (used by the verifier), or ``default``."""
        rows = self._query("SELECT value FROM kv WHERE key=?", (name,))
        return json.loads(rows[0][0]) if rows else default

    def set_state(self, name: str, value: Any) -> None:
        """Persist a JSON-serialisable value under ``name`` (inside any open transaction)."""
        text = json.dumps(value)
        with self.transaction():
            self._exec("INSERT OR REPLACE INTO kv(key, value) VALUES(?, ?)", (name, text))

    def delete_state(self, name: str) -> None:
        """Forget ``name``."""
        with self.transaction():
            self._exec("DELETE FROM kv WHERE key=?", (name,))

    def state_items(self, prefix: str = "") -> dict[str, Any]:
        """Every saved state value whose name starts with ``prefix``."""
        rows = self._query(
            "SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, prefix + "\U0010ffff"),
        )
        return {k: json.loads(v) for k, v in rows}

    # ------------------------------------------------------------------ statistics

    def counts(self) -> dict[str, int]:
        """Entries by status, plus pending items and stored events (no full scan)."""
        with self._lock:
            trusted = self._query("SELECT COALESCE(SUM(n), 0) FROM outcome_counts")[0][0]
            by_status = dict(
                self._query("SELECT status, COUNT(*) FROM entries WHERE status != 0 "
                            "GROUP BY status")
            )
            pending = self._query("SELECT COUNT(*) FROM pending")[0][0]
            events = self._query("SELECT COALESCE(MAX(id), 0) FROM events")[0][0]
        suppressed = int(by_status.get(int(Status.SUPPRESSED), 0))
        replaced = int(by_status.get(int(Status.REPLACED), 0))
        return {
            "total": int(trusted) + suppressed + replaced,
            "trusted": int(trusted),
            "suppressed": suppressed,
            "replaced": replaced,
            "pending": int(pending),
            "events": int(events),
        }

    def stats(self) -> dict[str, Any]:
        """:meth:`counts` plus path, file size, cell size and durability setting."""
        out: dict[str, Any] = dict(self.counts())
        size = 0
        if self.path != ":memory:":
            for suffix in ("", "-wal"):
                try:
                    size += os.path.getsize(self.path + suffix)
                except OSError:
                    pass
        out.update(
            path=self.path,
            bytes=size,
            cell_size=self.cell_size,
            synchronous=self.synchronous,
            schema_version=SCHEMA_VERSION,
        )
        return out
