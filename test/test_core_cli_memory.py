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
