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
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glove_ros.core.memory.equivalence import EquivalenceRule, ExactStateRule, cell_of
from glove_ros.core.memory.experience import (
    EventKind,
    Explanation,
    MemoryEntry,
    MemoryEvent,
    PendingItem,
    Source,
    Status,
    Transition,
)
from glove_ros.core.memory.store_check import (
    RecoveryReport,
    StoreCorruptError,
    StoreError,
    check_file,
    create_private,
    describe_error,
    read_only_message,
    recover,
    retry_while_busy,
)

__all__ = [
    "DEFAULT_CELL_SIZE",
    "SCHEMA_VERSION",
    "ExperienceStore",
    "OutcomeGroup",
    "RecoveryReport",
    "recover_store",
    "StoreCorruptError",
    "StoreError",
]

_LOG = logging.getLogger(__name__)

#: version of the database layout (``PRAGMA user_version``)
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of a glove_ros experience store ("GLVE")
APPLICATION_ID = 0x474C5645
#: grid cell side (metres) of a new store; used by the pose equivalence rule's index
DEFAULT_CELL_SIZE = 0.5
#: WAL pages between automatic checkpoints (16 MB with 4 KiB pages; SQLite's default is 1000).
#: A checkpoint copies the WAL into the database and fsyncs it inside whichever commit
#: crosses the mark; fewer, larger checkpoints keep that cost out of the p99 of writes.
_WAL_AUTOCHECKPOINT = 4000
_CHUNK = 500  # ids per IN (...) clause; below every SQLite variable limit
_SOURCES = {int(v): v for v in Source}
_STATUSES = {int(v): v for v in Status}

_COLUMNS = (
    "id, state_key, action, action_arg, outcome, robot_id, episode_id, context, "
    "px, py, pyaw, reward, source, stamp, status, valid_from, valid_until, reason, replaced_by"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries(
    id INTEGER PRIMARY KEY,
    state_key TEXT NOT NULL,
    action TEXT NOT NULL,
    action_arg TEXT NOT NULL,
    outcome TEXT NOT NULL,
    robot_id TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    context TEXT NOT NULL,
    px REAL, py REAL, pyaw REAL,
    cx INTEGER, cy INTEGER,
    reward REAL NOT NULL,
    source INTEGER NOT NULL,
    stamp REAL NOT NULL,
    status INTEGER NOT NULL,
    valid_from REAL NOT NULL,
    valid_until REAL,
    reason TEXT NOT NULL,
    replaced_by INTEGER
);
CREATE INDEX IF NOT EXISTS ix_entries_key ON entries(state_key, action, action_arg, status);
CREATE INDEX IF NOT EXISTS ix_entries_cell ON entries(action, action_arg, cx, cy)
    WHERE cx IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_entries_inactive ON entries(status) WHERE status != 0;
CREATE TABLE IF NOT EXISTS outcome_counts(
    state_key TEXT NOT NULL,
    action TEXT NOT NULL,
    action_arg TEXT NOT NULL,
    outcome TEXT NOT NULL,
    n INTEGER NOT NULL,
    last_id INTEGER NOT NULL,
    max_reward REAL NOT NULL,
    PRIMARY KEY(state_key, action, action_arg, outcome)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind INTEGER NOT NULL,
    state_key TEXT NOT NULL,
    action TEXT NOT NULL,
    action_arg TEXT NOT NULL,
    entry_ids TEXT NOT NULL,
    new_entry_ids TEXT NOT NULL,
    reason TEXT NOT NULL,
    evidence_count INTEGER NOT NULL,
    stamp REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS event_entries(
    entry_id INTEGER NOT NULL,
    event_id INTEGER NOT NULL,
    PRIMARY KEY(entry_id, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state_key TEXT NOT NULL,
    action TEXT NOT NULL,
    action_arg TEXT NOT NULL,
    suppressed_ids TEXT NOT NULL,
    stamp REAL NOT NULL,
    reason TEXT NOT NULL,
    UNIQUE(state_key, action, action_arg)
);
CREATE TABLE IF NOT EXISTS pending_evidence(
    id INTEGER PRIMARY KEY,
    pending_id INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    entry_id INTEGER,
    stamp REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_pending_evidence ON pending_evidence(pending_id);
CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""


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


def _chunks(seq: Sequence[int], size: int = _CHUNK) -> Iterator[Sequence[int]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _glove_tables_only(tables: set[str]) -> bool:
    """True for an empty file or one holding only glove_ros plan memory (``plan_*`` tables,
    :mod:`glove_ros.core.plan.plan_memory`), which shares the file with experience memory: the
    nodes sharing it may start in any order."""
    return all(t.startswith(("plan_", "sqlite_")) for t in tables)


def recover_store(
    src: str | os.PathLike[str], dst: str | os.PathLike[str]
) -> RecoveryReport:
    """Copy every readable row of a damaged memory file ``src`` into a new file ``dst``.

    ``src`` is only read. Derived tables (trusted-outcome counts) are rebuilt from the
    recovered entries, so ``dst`` opens as a consistent store; plan-memory tables sharing
    the file are copied row by row like the rest.
    """
    def rebuild(conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if {"entries", "outcome_counts"} <= tables:
            conn.execute("DELETE FROM outcome_counts")
            conn.execute(
                "INSERT INTO outcome_counts(state_key, action, action_arg, outcome, n, last_id, "
                "max_reward) SELECT state_key, action, action_arg, outcome, COUNT(*), MAX(id), "
                "MAX(reward) FROM entries WHERE status=0 "
                "GROUP BY state_key, action, action_arg, outcome"
            )

    return recover(src, dst, after=rebuild)


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


def _fmt_stamp(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    if stamp > 1e9:  # wall clock: readable local time
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
    return f"t={stamp:g}s"


class ExperienceStore:
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

    def _open(self, cell_size: float | None, timeout: float, check: bool) -> None:
        memory = self.path == ":memory:"
        existing = False
        if not memory:
            p = Path(self.path)
            if p.is_dir():
                raise StoreError(f"{p} is a directory; give the path of a database file")
            ours = self._created and p.exists() and p.stat().st_size == 0  # a retried open
            if (p.exists() or Path(self.path + "-wal").exists()) and not ours:
                existing = True
                check_file(p, check=check, identity=self._identity)
                if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK):
                    raise StoreError(read_only_message(str(p), "permission denied"))
            elif not ours:
                try:
                    create_private(p)
                    self._created = True
                except OSError as exc:
                    raise StoreError(f"cannot create experience store {p}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open experience store {self.path}: {exc}") from exc
        try:
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise describe_error(self.path, exc) from exc
            if existing and app_id != APPLICATION_ID and not _glove_tables_only(tables):
                raise StoreError(
                    f"{self.path} is an SQLite database of another application (application_id "
                    f"{app_id:#x}); refusing to use or modify it"
                )
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this glove_ros understands up "
                    f"to {SCHEMA_VERSION}. Upgrade glove_ros."
                )
            if not memory:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"cannot switch {self.path} to WAL mode (got {mode})")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT}")
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("BEGIN IMMEDIATE")
            try:
                # re-read under the write lock: another process may have created it meanwhile
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if "entries" not in tables:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    size = DEFAULT_CELL_SIZE if cell_size is None else float(cell_size)
                    conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES('cell_size', ?)",
                        (repr(size),),
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES('created', ?)",
                        (repr(self._clock()),),
                    )
                row = conn.execute("SELECT value FROM meta WHERE key='cell_size'").fetchone()
                stored = float(row[0]) if row else DEFAULT_CELL_SIZE
                if cell_size is not None and float(cell_size) != stored:
                    raise ValueError(
                        f"{self.path} was created with cell_size={stored:g} m; open it without "
                        f"cell_size or with that value (got {cell_size:g})"
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self.cell_size = stored
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise describe_error(self.path, exc) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _identity(self, tables: set[str], app_id: int) -> None:
        """Refuse another application's SQLite file (raises :class:`StoreError`)."""
        if app_id not in (0, APPLICATION_ID) and not _glove_tables_only(tables):
            raise StoreError(
                f"{self.path} is an SQLite database of another application (application_id "
                f"{app_id:#x}); refusing to use or modify it"
            )
        if app_id == 0 and "entries" not in tables and not _glove_tables_only(tables):
            raise StoreError(
                f"{self.path} is an SQLite database of another application (tables "
                f"{', '.join(sorted(tables)[:5])}); refusing to use or modify it"
            )

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

    # ------------------------------------------------------------------ rows

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

    # ------------------------------------------------------------------ writes

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

    # ------------------------------------------------------------------ reads

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
