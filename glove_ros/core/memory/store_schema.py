"""File format of the SQLite experience store: layout version, DDL, opening and identity.

Holds what fixes the file of :class:`~glove_ros.core.memory.store.ExperienceStore`: the
``PRAGMA user_version`` and ``application_id`` it writes, the tables and indexes, the column
list rows are read with, and the code that opens a file (refusing another application's
database or a newer layout, switching to WAL, setting the pragmas, creating the tables of a
new file). :func:`recover_store` is here because it rebuilds this schema's derived tables.
Separate from the store's reads and writes so the format, and any change to it with its
version, sits in one place; the file checks that run before an open are in
:mod:`glove_ros.core.memory.store_check`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from glove_ros.core.memory.store_check import (
    RecoveryReport,
    StoreError,
    check_file,
    create_private,
    describe_error,
    read_only_message,
    recover,
)

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_CELL_SIZE",
    "SCHEMA_VERSION",
    "recover_store",
]

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


class _SchemaMixin:
    """Opening half of :class:`~glove_ros.core.memory.store.ExperienceStore` (mixed into it):
    checks, pragmas and table creation of :meth:`_open`, and :meth:`_identity`."""

    path: str
    synchronous: str
    cell_size: float
    _clock: Callable[[], float]
    _created: bool
    _conn: sqlite3.Connection | None

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
