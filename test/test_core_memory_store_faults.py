"""ExperienceStore under file faults: one test per failure mode of issue 13.

Each refused file gets its exact message and is byte-identical afterwards; a healthy file
(rows still in the WAL after an interrupted checkpoint or a full disk) is never called damaged.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import (
    ExperienceStore,
    StoreCorruptError,
    StoreError,
)
from glove_ros.core.memory.store_schema import recover_store


def T(i: int) -> Transition:
    return Transition(state_key=f"wp{i % 50}", action="look", outcome=f"o{i % 7}",
                      context="x" * 40)


def _files(path: Path) -> dict[str, bytes]:
    """Database and WAL bytes (the -shm index is a cache SQLite may rebuild)."""
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())
            if p.name.startswith(path.name) and not p.name.endswith("-shm")}


def _refused(path: Path, exc_type: type[Exception], message: str, **kw) -> None:
    before = _files(path)
    with pytest.raises(exc_type) as info:
        ExperienceStore(path, **kw)
    assert str(info.value) == message
    assert _files(path) == before


def _crash_copy(src: Path, dst: Path) -> None:
    """What a kill -9 leaves: the database and its WAL as they are on disk right now."""
    for suffix in ("", "-wal"):
        if Path(str(src) + suffix).exists():
            shutil.copyfile(str(src) + suffix, str(dst) + suffix)


# ----------------------------------------------------------------- healthy files, WAL content


def test_interrupted_checkpoint_is_not_called_damaged_and_keeps_every_row(tmp_path):
    live = tmp_path / "live.db"
    store = ExperienceStore(live)
    store._db().execute("PRAGMA wal_autocheckpoint=0")  # keep everything in the WAL
    ids = store.record_many([T(i) for i in range(2500)])
    before_ckpt = tmp_path / "before.db"
    _crash_copy(live, before_ckpt)
    store.checkpoint()  # copies the WAL into the main file (WAL kept: not truncated)
    after_ckpt = live.read_bytes()
    store.close()
    # An interrupted checkpoint: the first pages of the main file already hold the new
    # content, the rest is old; the WAL is complete.
    old = before_ckpt.read_bytes()
    page = 4096
    for cut in (1, len(after_ckpt) // page // 2, len(after_ckpt) // page - 1):
        crashed = tmp_path / f"crashed{cut}.db"
        crashed.write_bytes(after_ckpt[: cut * page] + old[cut * page:])
        shutil.copyfile(str(before_ckpt) + "-wal", str(crashed) + "-wal")
        with ExperienceStore(crashed, check=True) as s:
            assert s.counts()["total"] == 2500
            assert s.get(ids[-1]) is not None


_DISK_FULL_WRITER = r"""
import os, resource, signal, sys
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path = sys.argv[1]
s = ExperienceStore(path)
s.record(Transition("a", "look", "x"))
limit = os.path.getsize(path) + os.path.getsize(path + "-wal") + 120_000
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # the disk is full past here
i = 0
while True:
    try:
        eid = s.record(Transition(f"wp{i}", "look", "o" * 100, context="c" * 200))
    except Exception as exc:
        print("ERROR", exc, flush=True)
        break
    print(eid, flush=True)
    i += 1
os._exit(0)  # no clean close: the process dies with the disk still full
"""


def test_disk_full_then_freed_reports_the_disk_and_keeps_every_acknowledged_row(tmp_path):
    path = tmp_path / "full.db"
    out = subprocess.run([sys.executable, "-c", _DISK_FULL_WRITER, str(path)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[-1] == (
        f"ERROR {path}: the disk did not take the write (disk I/O error: full or failing); "
        "the write was not stored and earlier memory is intact. Free space and retry.")
    acked = [int(x) for x in lines[:-1]]
    assert len(acked) >= 5
    # space freed (no limit in this process): the file is healthy, every acknowledged row kept
    with ExperienceStore(path, check=True) as s:
        for eid in acked:
            assert s.get(eid) is not None
        assert s.counts()["total"] == len(acked) + 1
        s.record(T(1))  # and it takes writes again


# ----------------------------------------------------------------- refused files, untouched


def test_zero_byte_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    _refused(path, StoreError,
             f"{path} is empty (0 bytes) and has no write-ahead log: it holds no memory (a "
             "crash or a full disk may have truncated it); it was left untouched. Delete it to "
             "start an empty memory, or restore it from a backup.")


def test_an_empty_file_another_process_is_creating_is_not_refused(tmp_path):
    """Two nodes sharing one file (the demo's memory and plan gate): the second may look
    while SQLite has created the file but not yet written its header."""
    import threading

    from glove_ros.core.memory.store_check import check_file

    path = tmp_path / "shared.db"
    path.write_bytes(b"")

    def create() -> None:
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()

    writer = threading.Timer(0.2, create)
    writer.start()
    check_file(path)  # waits for the header instead of calling the file empty
    writer.join()
    assert path.stat().st_size > 0


def test_truncated_file_is_damaged_untouched_and_recoverable(tmp_path):
    path = tmp_path / "memory.db"
    with ExperienceStore(path) as s:
        s.record_many([T(i) for i in range(3000)])
        s.checkpoint(truncate=True)
    for p in tmp_path.glob("memory.db-*"):
        p.unlink()
    data = path.read_bytes()
    pages = len(data) // 4096
    path.write_bytes(data[: (pages * 3 // 4) * 4096])
    before = _files(path)
    with pytest.raises(StoreCorruptError) as info:
        ExperienceStore(path)
    assert str(info.value) == (
        f"{path} is damaged (SQLite: truncated: the header records {pages} pages of 4096 "
        f"bytes, the file has {pages * 3 // 4 * 4096} bytes; database disk image is "
        f"malformed); it was left untouched. Copy its readable rows into a new file with "
        f"`glove-ros memory recover {path} NEW.db`, or restore a backup.")
    assert _files(path) == before
    report = recover_store(path, tmp_path / "new.db")
    assert _files(path) == before
    assert 0 < report.rows["entries"] < 3000
    with ExperienceStore(tmp_path / "new.db", check=True) as s:
        c = s.counts()
        assert c["total"] == report.rows["entries"] == c["trusted"]
        # the rebuilt trusted counts agree with the recovered rows
        assert s.query(state_key="wp1", limit=0)[1] == len(s.query(state_key="wp1",
                                                                   limit=None)[0])


def test_foreign_database_in_wal_mode_is_refused_and_untouched(tmp_path):
    path = tmp_path / "other.db"
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT)")
    c.commit()
    _crash_copy(path, tmp_path / "crashed.db")  # its tables exist only in the WAL
    c.close()
    crashed = tmp_path / "crashed.db"
    _refused(crashed, StoreError,
             f"{crashed} is an SQLite database of another application (tables accounts); "
             "refusing to use or modify it")


def test_unreadable_schema_is_damaged_and_untouched(tmp_path):
    path = tmp_path / "memory.db"
    with ExperienceStore(path) as s:
        s.record_many([T(i) for i in range(200)])
        s.checkpoint(truncate=True)
    for p in tmp_path.glob("memory.db-*"):
        p.unlink()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\x5a" * 3996  # the schema page, past the header
    path.write_bytes(bytes(data))
    # no row can be read, so the message does not send the user to `memory recover`
    _refused(path, StoreCorruptError,
             f"{path} is damaged (SQLite: database disk image is malformed); it was left "
             f"untouched. No memory rows of it can be read, so `glove-ros memory recover` "
             f"would keep nothing: restore a backup, or move it aside (`mv {path} "
             f"{path}.damaged`) to start an empty memory.")
    before = _files(path)
    with pytest.raises(StoreError) as info:
        recover_store(path, tmp_path / "new.db")
    assert str(info.value) == (
        f"cannot read the table list of {path} (SQLite: database disk image is malformed); "
        f"no rows can be recovered from it and it was left untouched. Restore a backup, or "
        f"move it aside (`mv {path} {path}.damaged`) to start an empty memory.")
    assert "memory recover" not in str(info.value)
    assert _files(path) == before and not (tmp_path / "new.db").exists()


def _memory_file(path: Path, n: int = 3000) -> bytes:
    """A checkpointed memory file of ``n`` entries with no WAL beside it; its bytes."""
    with ExperienceStore(path) as s:
        s.record_many([T(i) for i in range(n)])
        s.checkpoint(truncate=True)
    for p in path.parent.glob(path.name + "-*"):
        p.unlink()
    return path.read_bytes()


@pytest.mark.timeout(60)
def test_recovery_of_a_file_truncated_inside_a_page_ends_and_keeps_the_rows_before(tmp_path):
    # the last page is cut short: SQLite reads its missing part as zeros, and the damaged
    # b-tree hands back row ids already copied; recovery used to loop on them for ever
    path = tmp_path / "memory.db"
    data = _memory_file(path)
    path.write_bytes(data[: len(data) // 2 + 17])
    before = _files(path)
    report = recover_store(path, tmp_path / "new.db")
    assert _files(path) == before
    assert 0 < report.rows["entries"] < 3000
    [(first_lost, last_lost)] = report.lost_ranges["entries"]
    assert first_lost == report.rows["entries"] + 1 and last_lost == -1
    assert f"unreadable ids {first_lost}..end" in report.summary()
    with ExperienceStore(tmp_path / "new.db", check=True) as s:
        assert s.counts()["total"] == report.rows["entries"]


def _overwrite_14_bytes(data: bytes, tmp: Path) -> bytes:
    """``data`` with 14 bytes overwritten in the middle of one page, chosen so that
    SQLite's quick_check still passes and its integrity_check does not (an index no longer
    matches its row): the damage only a full check sees."""
    for page in range(len(data) // 4096 // 2, len(data) // 4096):
        damaged = bytearray(data)
        damaged[page * 4096 + 2048: page * 4096 + 2062] = b"\xa5" * 14
        probe = tmp / f"probe{page}.db"
        probe.write_bytes(bytes(damaged))
        with sqlite3.connect(f"{probe.as_uri()}?mode=ro&immutable=1", uri=True) as c:
            try:
                quick = c.execute("PRAGMA quick_check").fetchall()
                full = c.execute("PRAGMA integrity_check").fetchall()
            except sqlite3.DatabaseError:
                continue
        probe.unlink()
        if quick == [("ok",)] and full != [("ok",)]:
            return bytes(damaged)
    raise AssertionError("no page where 14 overwritten bytes pass quick_check")


def test_fourteen_overwritten_bytes_are_damage_to_a_full_check_not_to_quick_check(tmp_path):
    from glove_ros.core.memory.store_check import check_file

    path = tmp_path / "memory.db"
    data = _memory_file(path)
    path.write_bytes(_overwrite_14_bytes(data, tmp_path))
    before = _files(path)
    check_file(path, check=True)  # quick_check: every page is well-formed
    with pytest.raises(StoreCorruptError) as info:
        check_file(path, full=True)
    text = str(info.value)
    assert text.startswith(f"{path} is damaged (SQLite: integrity_check: row ")
    assert "missing from index" in text and "glove-ros memory recover" in text
    assert _files(path) == before
    # the advice works: every row is copied, into a file that passes the full check
    report = recover_store(path, tmp_path / "new.db")
    assert report.rows["entries"] == 3000
    check_file(tmp_path / "new.db", full=True)


_OPEN_AS_NOBODY = r"""
import os, sys
from glove_ros.core.memory.store import ExperienceStore, StoreError
if os.getuid() == 0:  # root may write anywhere: drop to nobody after the imports
    os.setgid(65534); os.setuid(65534)
try:
    ExperienceStore(sys.argv[1])
except StoreError as exc:
    print(type(exc).__name__, exc)
"""


def test_read_only_location_is_reported_as_read_only_not_damaged():
    root = Path(tempfile.mkdtemp(prefix="glove_ro_"))
    try:
        os.chmod(root, 0o755)
        loc = root / "ro"
        loc.mkdir()
        path = loc / "memory.db"
        with ExperienceStore(path) as s:
            s.record(T(1))
        os.chmod(path, 0o644)
        os.chmod(loc, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP
                 | stat.S_IROTH | stat.S_IXOTH)
        before = _files(path)
        out = subprocess.run([sys.executable, "-c", _OPEN_AS_NOBODY, str(path)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert out.strip() == (
            f"StoreError cannot write {path}: the file or its directory is read-only "
            "(permission denied); the memory was not changed. Fix the permissions or choose a "
            "writable db_path.")
        assert _files(path) == before
    finally:
        os.chmod(root / "ro", 0o755)
        shutil.rmtree(root)


def test_new_files_are_private(tmp_path):
    os.umask(0o022)
    path = tmp_path / "deep" / "er" / "memory.db"
    with ExperienceStore(path) as s:
        s.record(T(1))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(str(path) + "-wal").stat().st_mode) == 0o600
    # every folder created, not only the last (issue 31: the parents were 0755)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


def test_opening_retries_while_another_process_switches_the_file(tmp_path, monkeypatch):
    """'database is locked' at once from a racing WAL switch is waited out; the file this
    open created empty is not then refused as an empty file; a file that stays locked is
    a clear StoreError."""
    from glove_ros.core.memory.store_check import StoreError

    real = ExperienceStore._open
    calls = []

    def flaky(self, cell_size, timeout, check):
        calls.append(1)
        if len(calls) == 1:
            Path(self.path).touch()  # as far as the first try got: the file exists, empty
            self._created = True
            raise StoreError("locked") from sqlite3.OperationalError("database is locked")
        return real(self, cell_size, timeout, check)

    monkeypatch.setattr(ExperienceStore, "_open", flaky)
    path = tmp_path / "shared.db"
    with ExperienceStore(path) as s:
        s.record_many([T(0)])
    assert len(calls) == 2
    monkeypatch.setattr(ExperienceStore, "_open", real)
    with ExperienceStore(path) as s:
        assert s.max_id() == 1

    def always(self, cell_size, timeout, check):
        raise StoreError("locked") from sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(ExperienceStore, "_open", always)
    with pytest.raises(StoreError, match="locked"):
        ExperienceStore(path, timeout=0.2)
