"""`glove-ros memory`: one-line errors on bad files and ids; the file is never changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from glove_ros.cli import main as cli
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore


def _bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())
            if p.name.startswith(path.name) and not p.name.endswith("-shm")}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["memory", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("command", ["stats", "query", "pending", "explain"])
def test_zero_byte_file_gets_one_line_and_stays_empty(tmp_path, capsys, command):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    code, out, err = _run(capsys, command, str(path), *(["1"] if command == "explain" else []))
    assert code == 2
    assert err == (f"glove-ros memory {command}: error: {path} is empty (0 bytes) and has no "
                   "write-ahead log: it holds no memory (a crash or a full disk may have "
                   "truncated it); it was left untouched. Delete it to start an empty memory, "
                   "or restore it from a backup.\n")
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == [
        "empty.db"]


def test_garbage_and_foreign_files_get_one_line_and_are_untouched(tmp_path, capsys):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x01" * 5000)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY)")
    for path, text in ((garbage, "is not an SQLite database"),
                       (foreign, "an SQLite database of another application")):
        before = _bytes(path)
        code, out, err = _run(capsys, "stats", str(path))
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and text in err and "Traceback" not in err
        assert _bytes(path) == before


def test_overflowing_and_negative_ids_are_unknown_not_a_crash(tmp_path, capsys):
    path = tmp_path / "m.db"
    with ExperienceStore(path) as s:
        s.record(Transition("dock", "look", "blue"))
    for bad in (str(2**63), str(2**64 + 5), "-1", "0"):
        code, out, err = _run(capsys, "explain", str(path), bad)
        assert code == 1
        assert err == f"no memory entry with id {bad}\n"
    code, out, err = _run(capsys, "explain", str(path), "1")
    assert code == 0 and "Entry 1" in out


def test_recover_copies_readable_rows_and_leaves_the_source(tmp_path, capsys):
    path = tmp_path / "m.db"
    with ExperienceStore(path) as s:
        s.record_many([Transition(f"wp{i}", "look", "red") for i in range(1000)])
        s.checkpoint(truncate=True)
    for p in tmp_path.glob("m.db-*"):
        p.unlink()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 // 4096 * 4096])
    before = _bytes(path)
    code, out, err = _run(capsys, "stats", str(path))
    assert code == 2 and "is damaged" in err and "glove-ros memory recover" in err
    code, out, err = _run(capsys, "recover", str(path), str(tmp_path / "new.db"))
    assert code == 0, err
    assert _bytes(path) == before
    kept = int(out.splitlines()[-1].split()[0])
    assert kept > 0
    code, out, err = _run(capsys, "stats", str(tmp_path / "new.db"))
    assert code == 0 and "trusted" in out


def _memory_file(path: Path, n: int = 1000) -> bytes:
    with ExperienceStore(path) as s:
        s.record_many([Transition(f"wp{i % 50}", "look", f"o{i % 7}", context="x" * 40)
                       for i in range(n)])
        s.checkpoint(truncate=True)
    for p in path.parent.glob(path.name + "-*"):
        p.unlink()
    return path.read_bytes()


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cut", ["header", "first page", "mid-page", "half"])
def test_the_advice_for_a_truncated_file_works(tmp_path, capsys, cut):
    """stats refuses a truncated file in one line; what the line advises succeeds."""
    path = tmp_path / "m.db"
    data = _memory_file(path)
    size = {"header": 100, "first page": 4096, "mid-page": len(data) // 2 + 17,
            "half": len(data) // 2 // 4096 * 4096}[cut]
    path.write_bytes(data[:size])
    before, names = _bytes(path), _listing(tmp_path)
    code, out, err = _run(capsys, "stats", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"glove-ros memory stats: error: {path} is damaged (SQLite: ")
    assert _bytes(path) == before and _listing(tmp_path) == names
    new = tmp_path / "new.db"
    code, out, err2 = _run(capsys, "recover", str(path), str(new))
    assert _bytes(path) == before
    if f"glove-ros memory recover {path} NEW.db" in err:
        assert cut in ("mid-page", "half")
        assert code == 0, err2
        code, out, err2 = _run(capsys, "stats", str(new))
        assert code == 0 and int(out.split("total:")[1].split()[0]) > 0
    else:  # nothing can be read: the advice is a backup or a fresh memory, not recover
        assert cut in ("header", "first page")
        assert "restore a backup, or move it aside" in err and f"mv {path} " in err
        if cut == "header":  # recover agrees: one line, no advice to run itself, no file
            assert code == 2 and err2.count("\n") == 1
            assert "memory recover" not in err2.split("error:")[1] and not new.exists()
        else:  # the table list is there, the rows are not: an empty memory, said so
            assert code == 0 and f"no memory entry of {path} could be read" in out


def _overwrite_14_bytes(data: bytes, tmp: Path) -> bytes:
    """14 bytes overwritten in the middle of a data page, where SQLite's quick_check still
    passes and its integrity_check does not (an index no longer matches its row)."""
    for page in range(len(data) // 4096 // 2, len(data) // 4096):
        damaged = bytearray(data)
        damaged[page * 4096 + 2048: page * 4096 + 2062] = b"\xa5" * 14
        probe = tmp / "probe.db"
        probe.write_bytes(bytes(damaged))
        with sqlite3.connect(f"{probe.as_uri()}?mode=ro&immutable=1", uri=True) as c:
            try:
                ok = (c.execute("PRAGMA quick_check").fetchall() == [("ok",)]
                      and c.execute("PRAGMA integrity_check").fetchall() != [("ok",)])
            except sqlite3.DatabaseError:
                ok = False
        probe.unlink()
        if ok:
            return bytes(damaged)
    raise AssertionError("no page where 14 overwritten bytes pass quick_check")


def test_stats_and_check_report_fourteen_overwritten_bytes(tmp_path, capsys):
    path = tmp_path / "m.db"
    path.write_bytes(_overwrite_14_bytes(_memory_file(path, 3000), tmp_path))
    before, names = _bytes(path), _listing(tmp_path)
    for command in ("stats", "check"):
        code, out, err = _run(capsys, command, str(path))
        assert code == 2 and out == "", (command, out, err)
        assert err.startswith(f"glove-ros memory {command}: error: {path} is damaged (SQLite: "
                              "integrity_check: row ")
        assert "missing from index" in err and err.count("\n") == 1
        assert f"glove-ros memory recover {path} NEW.db" in err
        assert _bytes(path) == before and _listing(tmp_path) == names  # nothing written
    # the advice works: the recovered copy is sound and keeps every entry
    new = tmp_path / "new.db"
    assert _run(capsys, "recover", str(path), str(new))[0] == 0
    code, out, err = _run(capsys, "check", str(new))
    assert code == 0 and out == f"{new}: sound (SQLite integrity_check: ok); 3000 entries, " \
        "3000 trusted\n"
    code, out, err = _run(capsys, "stats", str(new))
    assert code == 0 and "total: 3000" in out.replace("  ", "")
