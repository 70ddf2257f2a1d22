"""Read-only checks and recovery of a memory database file (SQLite, WAL).

The experience store calls :func:`check_file` before it opens an existing file for writing.
The check never writes the database or its write-ahead log, and it says "damaged" only when
SQLite itself reports corruption (``SQLITE_CORRUPT`` / ``SQLITE_NOTADB``, or a failed
``PRAGMA quick_check``; ``full=True`` runs ``PRAGMA integrity_check``, which also compares
every index with its table and so notices a few overwritten bytes inside a row that
quick_check passes). Its advice is one that works: ``glove-ros memory recover`` only when
recovery can read rows of the file, otherwise restore a backup or move the file aside.
Everything else (a read-only location, a file that cannot be opened, a full disk, another
application's database) gets its own message, because the remedy differs: telling an
operator to throw away a healthy memory is the worst outcome.

WAL awareness. A crash can leave committed rows only in the ``-wal`` file (an interrupted
checkpoint, a killed process, a full disk): the main file alone then looks stale or even
empty. When the ``-wal`` file holds frames the check reads through it with a normal
read-only connection, exactly as the next writer will; only when there is no WAL content
is the main file read with ``immutable=1`` (no locks, no side files).

:func:`recover` copies every readable row of a damaged file into a new database, skipping
unreadable pages by bisecting row-id ranges, and reports how many rows each table kept. It
never goes backwards: a damaged page whose cells point at row ids already copied (a
truncation in the middle of a page reads as zeros) ends that range instead of looping.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from glove_ros.paths import make_private_dirs

_T = TypeVar("_T")

__all__ = [
    "RecoveryReport",
    "StoreCorruptError",
    "StoreError",
    "check_file",
    "create_private",
    "is_corruption",
    "recover",
    "is_disk_full",
    "retry_while_busy",
]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER = 100
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_FULL_CODE = 13  # SQLITE_FULL
_READONLY_CODE = 8  # SQLITE_READONLY
_CANTOPEN_CODE = 14  # SQLITE_CANTOPEN
_IOERR_CODE = 10  # SQLITE_IOERR (a failed read / write / fsync, e.g. a full disk)


class StoreError(RuntimeError):
    """The store cannot be used (wrong file, read-only, locked, closed, newer schema)."""


class StoreCorruptError(StoreError):
    """SQLite reports the database file as damaged; it was left untouched."""

    #: SQLite's words for the damage, when :func:`check_file` may still re-word the advice
    detail: str | None = None


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    return None if code is None else int(code) & 0xFF


def is_corruption(exc: BaseException) -> bool:
    """True when SQLite reports corruption (by result code; by message on Python 3.10)."""
    code = _code(exc)
    if code is not None:
        return code in _CORRUPT_CODES
    text = str(exc).lower()
    return any(s in text for s in ("malformed", "not a database", "file is encrypted"))


def is_disk_full(exc: BaseException) -> bool:
    """True for SQLITE_FULL / SQLITE_IOERR: a write the disk did not take (full or failing)."""
    if _code(exc) in (_FULL_CODE, _IOERR_CODE):
        return True
    text = str(exc).lower()
    return "disk is full" in text or "disk i/o error" in text


def _is_busy(exc: BaseException | None) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


def retry_while_busy(attempt: Callable[[], _T], seconds: float) -> _T:
    """``attempt()``, repeated every 0.1 s for up to ``seconds`` while it fails with
    "database is locked" / busy (raised as is, or as a :class:`StoreError` caused by it).

    SQLite answers a journal-mode switch or WAL recovery racing another process's with
    SQLITE_BUSY at once, without its busy handler: two nodes opening one file at start-up.
    Any other error, or busy past the deadline, is raised."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return attempt()
        except (sqlite3.OperationalError, StoreError) as exc:
            if not (_is_busy(exc) or _is_busy(exc.__cause__)) or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def describe_error(path: str, exc: BaseException, known: str = "") -> StoreError:
    """One actionable :class:`StoreError` for an SQLite error on ``path``.

    ``known`` is what the caller already found wrong (e.g. a truncation), quoted with damage.
    """
    code = _code(exc)
    text = str(exc).lower()
    if is_corruption(exc):
        return StoreCorruptError(damaged_message(path, f"{known}; {exc}" if known else str(exc)))
    if is_disk_full(exc):
        return StoreError(
            f"{path}: the disk did not take the write ({exc}: full or failing); the write was "
            "not stored and earlier memory is intact. Free space and retry."
        )
    if code == _READONLY_CODE or "readonly" in text or "read-only" in text:
        return StoreError(read_only_message(path, str(exc)))
    if code == _CANTOPEN_CODE or "unable to open" in text:
        return StoreError(
            f"cannot open {path} ({exc}); check that its directory exists and is accessible. "
            "The file was not changed."
        )
    return StoreError(f"memory database {path}: {exc}")


def damaged_message(path: str, detail: str, recoverable: bool = True) -> str:
    """The one message for a file SQLite reports as damaged.

    ``recoverable`` False when no memory row of the file can be read: then
    ``glove-ros memory recover`` would keep nothing, and the advice is what still works.
    """
    if recoverable:
        advice = (f"Copy its readable rows into a new file with `glove-ros memory recover "
                  f"{path} NEW.db`, or restore a backup.")
    else:
        advice = (f"No memory rows of it can be read, so `glove-ros memory recover` would "
                  f"keep nothing: restore a backup, or move it aside (`mv {path} "
                  f"{path}.damaged`) to start an empty memory.")
    return f"{path} is damaged (SQLite: {detail}); it was left untouched. {advice}"


def unrecoverable_message(path: str, detail: str) -> str:
    """What ``glove-ros memory recover`` says about a file it cannot read at all."""
    return (
        f"cannot read the table list of {path} (SQLite: {detail}); no rows can be recovered "
        f"from it and it was left untouched. Restore a backup, or move it aside "
        f"(`mv {path} {path}.damaged`) to start an empty memory."
    )


def read_only_message(path: str, detail: str) -> str:
    """The one message for a database in a read-only location."""
    return (
        f"cannot write {path}: the file or its directory is read-only ({detail}); the memory was "
        "not changed. Fix the permissions or choose a writable db_path."
    )


def create_private(path: Path) -> None:
    """Create the parent directory (0700) and an empty database file (0600) if absent.

    SQLite gives its ``-wal`` and ``-shm`` files the mode of the database file, so memory
    stays private to its owner. Existing files and directories keep their modes.
    """
    if not path.parent.exists():
        make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _wal_frames(path: Path) -> bool:
    wal = Path(str(path) + "-wal")
    try:
        return wal.stat().st_size > 32  # a WAL header alone holds no frames
    except OSError:
        return False


def _header_pages(path: Path) -> tuple[int, int] | None:
    """(page size, page count) recorded in the header, or None when the count is not valid."""
    with open(path, "rb") as f:
        head = f.read(_HEADER)
    if len(head) < _HEADER:
        return None
    page = struct.unpack(">H", head[16:18])[0]
    page = 65536 if page == 1 else page
    change, pages = struct.unpack(">II", head[24:32])
    valid_for = struct.unpack(">I", head[92:96])[0]
    if valid_for != change or pages == 0:
        return None
    return page, pages


_CREATING_S = 1.0  # how long an empty file may be a database another process is creating


def check_file(
    path: str | os.PathLike[str],
    *,
    check: bool = False,
    full: bool = False,
    identity: Callable[[set[str], int], None] | None = None,
) -> None:
    """Check an existing database file without writing it or its WAL.

    Raises :class:`StoreCorruptError` only when SQLite reports damage (``check`` adds a
    ``PRAGMA quick_check`` of every page; ``full`` a ``PRAGMA integrity_check``, which
    also compares every index with its table), :class:`StoreError` for everything else
    that prevents use. ``identity(tables, application_id)`` may raise to refuse a foreign
    file. The message of a damaged file advises ``glove-ros memory recover`` only when
    recovery can read rows of the file.
    """
    try:
        _check_file(Path(path), check or full, full, identity)
    except StoreCorruptError as exc:
        detail = exc.detail
        if detail is None or _salvageable(Path(path)):
            raise
        raise StoreCorruptError(damaged_message(str(path), detail, recoverable=False)) from exc


def _damaged(path: Path, detail: str) -> StoreCorruptError:
    exc = StoreCorruptError(damaged_message(str(path), detail))
    exc.detail = detail
    return exc


def _check_file(
    p: Path,
    check: bool,
    full: bool,
    identity: Callable[[set[str], int], None] | None,
) -> None:
    size = p.stat().st_size
    frames = _wal_frames(p)
    # another process may be creating this database right now (SQLite creates the file
    # empty and writes its header a moment later): give it that moment before refusing
    deadline = time.monotonic() + _CREATING_S
    while size == 0 and not frames and time.monotonic() < deadline:
        time.sleep(0.05)
        size = p.stat().st_size
        frames = _wal_frames(p)
    if size == 0 and not frames:
        raise StoreError(
            f"{p} is empty (0 bytes) and has no write-ahead log: it holds no memory (a crash "
            "or a full disk may have truncated it); it was left untouched. Delete it to start "
            "an empty memory, or restore it from a backup."
        )
    if size > 0:
        with open(p, "rb") as f:
            header = f.read(len(_SQLITE_MAGIC))
        if header != _SQLITE_MAGIC:
            raise StoreCorruptError(
                f"{p} is not an SQLite database (header {header[:16]!r}); it was left "
                "untouched. Move it aside or restore it from a backup."
            )
    truncated = ""
    if not frames and size > 0:
        pages = _header_pages(p)
        if pages is not None and pages[0] * pages[1] > size:
            truncated = (
                f"truncated: the header records {pages[1]} pages of {pages[0]} bytes, the file "
                f"has {size} bytes"
            )
            check = True  # let SQLite itself confirm the damage
    pragma = "integrity_check" if full else "quick_check"
    with _reader(p, frames, truncated) as conn:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
            result = conn.execute(f"PRAGMA {pragma}").fetchall() if check else [("ok",)]
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise _damaged(p, f"{truncated}; {exc}" if truncated else str(exc)) from exc
            raise describe_error(str(p), exc, truncated) from exc
    if identity is not None:
        identity(tables, app_id)
    if [r[0] for r in result] != ["ok"]:
        detail = "; ".join(" ".join(str(r[0]).replace("*** in database main ***", "").split())
                           for r in result[:3])
        if len(result) > 3:
            detail += f"; ... ({len(result)} problems)"
        if truncated:
            detail = f"{truncated}; {detail}"
        raise _damaged(p, f"{pragma}: {detail}")


class _reader:
    """A read-only connection that never writes the database or its WAL."""

    def __init__(
        self, path: Path, through_wal: bool, known: str = "", salvage: bool = False
    ) -> None:
        self.path = path
        self.through_wal = through_wal
        self.known = known
        self.salvage = salvage
        self.conn: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        uri = self.path.absolute().as_uri() + (
            "?mode=ro" if self.through_wal else "?mode=ro&immutable=1"
        )
        try:
            self.conn = sqlite3.connect(uri, uri=True, timeout=10.0)
            if self.salvage:  # read what is there even when the header's page count is wrong
                self.conn.execute("PRAGMA writable_schema=ON")
            # a WAL read needs the -shm index; in a read-only directory it cannot be created
            self.conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            if self.conn is not None:
                self.conn.close()
            if is_corruption(exc):
                raise _damaged(self.path, f"{self.known}; {exc}" if self.known else str(exc)
                               ) from exc
            raise describe_error(str(self.path), exc, self.known) from exc
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        if self.conn is not None:
            self.conn.close()


# --------------------------------------------------------------------------- recovery

_SCHEMA_SQL = (
    "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
    "AND name NOT LIKE 'sqlite_%' ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END"
)


@contextmanager
def _recovery_reader(path: Path) -> Iterator[sqlite3.Connection]:
    """The salvage reader of ``path``; a file it cannot open at all is unrecoverable."""
    reader = _reader(path, _wal_frames(path), salvage=True)
    try:
        conn = reader.__enter__()
    except StoreCorruptError as exc:
        detail = exc.detail or str(exc)
        raise StoreError(unrecoverable_message(str(path), detail)) from exc
    try:
        yield conn
    finally:
        reader.__exit__(None, None, None)


def _salvageable(path: Path) -> bool:
    """Whether :func:`recover` would copy any memory from ``path`` (a read-only probe): its
    table list is readable and at least one row of ``entries`` (of any table in a file
    without experience memory) can be read."""
    try:
        with _reader(path, _wal_frames(path), salvage=True) as conn:
            tables = [name for kind, name, sql in conn.execute(_SCHEMA_SQL).fetchall()
                      if kind == "table" and "without rowid" not in " ".join(sql.lower().split())]
            for table in ["entries"] if "entries" in tables else tables:
                if next(_readable_rows(conn, table, []), None) is not None:
                    return True
    except (StoreError, sqlite3.Error, OSError):
        pass
    return False


@dataclass
class RecoveryReport:
    """What :func:`recover` kept: rows per table, unreadable row-id ranges, skipped tables."""

    rows: dict[str, int] = field(default_factory=dict)
    lost_ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    skipped_tables: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Rows copied over all tables."""
        return sum(self.rows.values())

    def summary(self) -> str:
        """One line per table."""
        lines = [f"{t}: {n} row(s) kept" + (
            f", unreadable ids {_ranges_text(self.lost_ranges[t])}" if self.lost_ranges.get(t)
            else "") for t, n in self.rows.items()]
        lines += [f"{t}: not copied ({why})" for t, why in self.skipped_tables.items()]
        return "\n".join(lines)


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    """``[(1297, -1)]`` -> ``1297..end``; a range from the first possible id -> ``start..``."""
    def one(lo: int, hi: int) -> str:
        return (f"{'start' if lo <= _FIRST_ID else lo}.."
                f"{'end' if hi == -1 else hi}")

    text = ", ".join(one(lo, hi) for lo, hi in ranges[:5])
    return text + (f" (+{len(ranges) - 5} more)" if len(ranges) > 5 else "")


_FIRST_ID = -(1 << 62)  # where a by-rowid scan starts


def _forward(rows: list[tuple[Any, ...]], start: int) -> list[tuple[Any, ...]]:
    """The leading rows whose row ids rise from ``start``; a damaged b-tree may hand back
    ids already read (a zero-filled page), and a scan that follows them never ends.
    Raises ``sqlite3.DatabaseError`` when not even the first row moves forward."""
    out: list[tuple[Any, ...]] = []
    last = start - 1
    for row in rows:
        if int(row[0]) <= last:
            break
        out.append(row)
        last = int(row[0])
    if rows and not out:
        raise sqlite3.DatabaseError("database disk image is malformed (row ids out of order)")
    return out


def _first_readable(conn: sqlite3.Connection, sql: str, after: int) -> int | None:
    """Smallest ``start > after`` from which a row can be read again, or None past the end.

    Steps forward exponentially over the unreadable region, then bisects back, so a damaged
    region costs O(log n) probes and no readable row past it is skipped by more than the
    region's own extent.
    """
    step, ok = 1, None
    while after + step < 1 << 62:
        try:
            _forward(conn.execute(sql, (after + step, 1)).fetchall(), after + step)
        except sqlite3.DatabaseError:
            step *= 2
            continue
        ok = after + step
        break
    if ok is None:
        return None
    lo = after + step // 2 + 1  # unreadable from after+step//2; readable from ok
    while lo < ok:
        mid = (lo + ok) // 2
        try:
            _forward(conn.execute(sql, (mid, 1)).fetchall(), mid)
            ok = mid
        except sqlite3.DatabaseError:
            lo = mid + 1
    return ok


def _readable_rows(
    conn: sqlite3.Connection, table: str, lost: list[tuple[int, int]]
) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` SQLite can read, by rowid; unreadable gaps go to ``lost``."""
    sql = f'SELECT rowid, * FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT ?'
    start, batch = _FIRST_ID, 512
    while True:
        try:
            rows = _forward(conn.execute(sql, (start, batch)).fetchall(), start)
        except sqlite3.DatabaseError:
            if batch > 1:
                batch //= 2
                continue
            nxt = _first_readable(conn, sql, start)
            lost.append((start, nxt - 1 if nxt is not None else -1))
            if nxt is None:
                return
            start, batch = nxt, 512
            continue
        if not rows:
            return
        yield from rows
        start = int(rows[-1][0]) + 1
        batch = 512


def recover(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    after: Callable[[sqlite3.Connection], None] | None = None,
) -> RecoveryReport:
    """Copy every readable row of ``src`` (left untouched) into a new database ``dst``.

    Tables are re-created from ``src``'s schema; rows are read by row-id range, and a range
    SQLite cannot read is bisected until only unreadable ids are left out. ``after(conn)``
    runs on ``dst`` before its commit (e.g. to rebuild derived tables). ``dst`` must not
    exist. Raises :class:`StoreError` when ``src``'s schema itself cannot be read.
    """
    s, d = Path(src), Path(dst)
    if d.exists():
        raise StoreError(f"{d} exists; recover into a new file")
    report = RecoveryReport()
    if not s.is_file():
        raise StoreError(f"no database file at {s}")
    if s.stat().st_size == 0 and not _wal_frames(s):
        raise StoreError(unrecoverable_message(str(s), "the file is empty (0 bytes)"))
    with _recovery_reader(s) as conn:
        try:
            schema = conn.execute(_SCHEMA_SQL).fetchall()
            app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise StoreError(unrecoverable_message(str(s), str(exc))) from exc
        if not any(kind == "table" for kind, _name, _sql in schema):
            raise StoreError(unrecoverable_message(str(s), "its table list is empty"))
        create_private(d)
        out = sqlite3.connect(d, isolation_level=None)
        try:
            out.execute("PRAGMA journal_mode=WAL")
            out.execute("BEGIN")
            for _kind, _name, sql in schema:
                out.execute(sql)
            for kind, name, sql in schema:
                if kind != "table":
                    continue
                without_rowid = "without rowid" in " ".join(sql.lower().split())
                n = 0
                if without_rowid:
                    try:
                        rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
                    except sqlite3.DatabaseError as exc:
                        report.skipped_tables[name] = str(exc)
                        continue
                    if rows:
                        marks = ",".join("?" * len(rows[0]))
                        out.executemany(f'INSERT OR IGNORE INTO "{name}" VALUES({marks})', rows)
                    n = len(rows)
                else:
                    lost: list[tuple[int, int]] = []
                    cols = _cols(conn, name)
                    insert = (f'INSERT OR IGNORE INTO "{name}"(rowid, {cols}) '
                              f"VALUES(?, {','.join('?' * cols.count(','))}, ?)")
                    for row in _readable_rows(conn, name, lost):
                        out.execute(insert, row)
                        n += 1
                    if lost:
                        report.lost_ranges[name] = lost
                report.rows[name] = n
            if after is not None:
                after(out)
            out.execute(f"PRAGMA application_id={app_id}")
            out.execute(f"PRAGMA user_version={version}")
            out.execute("COMMIT")
        except BaseException:
            out.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(d) + suffix).unlink(missing_ok=True)
            raise
        out.close()
    return report


def _cols(conn: sqlite3.Connection, table: str) -> str:
    names = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    return ", ".join(f'"{n}"' for n in names)
