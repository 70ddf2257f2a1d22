"""Inspect an experience-memory database (SQLite) without ROS.

  glove-ros memory check   DB                    is the file sound? (reads every page)
  glove-ros memory stats   DB                    counts by status, pending queue, events
  glove-ros memory query   DB [--state S] [--action A] [--all] [--limit N]
  glove-ros memory explain DB ID                 why entry ID is trusted / suppressed / replaced
  glove-ros memory pending DB                    (state, action) pairs awaiting re-verification
  glove-ros memory recover DB NEW               copy every readable row of a damaged DB

The database is opened read-mostly: these commands never change memory. A damaged, empty,
foreign or unreadable file is reported in one line (exit status 2) and left as it is; the
line says what to do (recover its rows, or restore a backup when no row can be read).
check and stats read every page and compare every index with its table (SQLite's
PRAGMA integrity_check: about 2 s per million entries), so a few damaged bytes inside a
row are reported too; query, explain and pending read only the rows they show.
"""

from __future__ import annotations

import argparse
import functools
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from glove_ros.core.memory.experience import Status
from glove_ros.core.memory.store import ExperienceStore, StoreError
from glove_ros.core.memory.store_check import check_file
from glove_ros.core.memory.store_schema import recover_store


def _one_line_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Report a store or input error as one line on stderr (exit 2) instead of a traceback."""
    @functools.wraps(fn)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (StoreError, ValueError, OverflowError, OSError, sqlite3.Error) as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            print(f"glove-ros memory {args.memory_command}: error: {text}", file=sys.stderr)
            return 2

    return wrapped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the memory subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="memory_command", metavar="COMMAND", required=True)
    p = sub.add_parser("check", help="check the whole file (SQLite integrity_check)",
                       description="Read every page of DB and compare every index with its "
                       "table (SQLite's PRAGMA integrity_check), without writing it. Exit 0 "
                       "when it is sound, 2 with one line saying what to do when it is not.")
    p.add_argument("db", type=Path)
    p.set_defaults(func=_one_line_errors(_check))
    p = sub.add_parser("stats", help="check the file, then counts by status, pending queue "
                       "and events")
    p.add_argument("db", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-check", action="store_true",
                   help="skip the integrity check of the whole file (faster on big files)")
    p.set_defaults(func=_one_line_errors(_stats))
    p = sub.add_parser("query", help="list entries (trusted only unless --all)")
    p.add_argument("db", type=Path)
    p.add_argument("--state", help="state key (waypoint) filter")
    p.add_argument("--action", help="action filter")
    p.add_argument("--all", action="store_true", help="include suppressed and replaced history")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=_one_line_errors(_query))
    p = sub.add_parser("explain", help="why an entry is trusted, suppressed or replaced")
    p.add_argument("db", type=Path)
    p.add_argument("id", type=int)
    p.set_defaults(func=_one_line_errors(_explain))
    p = sub.add_parser("pending", help="pairs awaiting re-verification (async GLOVE queue)")
    p.add_argument("db", type=Path)
    p.set_defaults(func=_one_line_errors(_pending))
    p = sub.add_parser("recover", help="copy every readable row of a damaged DB into NEW")
    p.add_argument("db", type=Path)
    p.add_argument("new", type=Path, help="new database file (must not exist)")
    p.set_defaults(func=_one_line_errors(_recover))


def _open(path: Path, full_check: bool = False) -> ExperienceStore:
    """The store at ``path``; ``full_check`` first runs SQLite's integrity_check on the file
    (read-only: a damaged file is refused before anything opens it for writing)."""
    if not path.is_file():
        raise FileNotFoundError(f"no memory database at {path}")
    if full_check:
        check_file(path, full=True)
    return ExperienceStore(str(path))


def _check(args: argparse.Namespace) -> int:
    store = _open(args.db, full_check=True)
    try:
        counts = store.counts()
    finally:
        store.close()
    print(f"{args.db}: sound (SQLite integrity_check: ok); {counts['total']} "
          f"entr{'y' if counts['total'] == 1 else 'ies'}, {counts['trusted']} trusted")
    return 0


def _stats(args: argparse.Namespace) -> int:
    store = _open(args.db, full_check=not args.no_check)
    try:
        stats = store.stats()
    finally:
        store.close()
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True, default=str))
    else:
        for key, value in stats.items():
            print(f"{key:>24}: {value}")
    return 0


def _query(args: argparse.Namespace) -> int:
    store = _open(args.db)
    try:
        entries, total = store.query(state_key=args.state, action=args.action,
                                     include_suppressed=args.all, limit=args.limit)
    finally:
        store.close()
    print(f"{total} matching entr{'y' if total == 1 else 'ies'}"
          + (f", showing {len(entries)}" if len(entries) < total else ""))
    for e in entries:
        t = e.transition
        arg = f" {t.action_arg}" if t.action_arg else ""
        print(f"#{e.id:<7} {Status(e.status).name:<10} ({t.state_key}, {t.action}{arg}) -> "
              f"{t.outcome}   [{t.source.name.lower()}, robot {t.robot_id or '-'}, "
              f"episode {t.episode_id or '-'}]")
    return 0


def _explain(args: argparse.Namespace) -> int:
    store = _open(args.db)
    try:
        expl = store.explain(args.id)
    finally:
        store.close()
    if expl is None:
        print(f"no memory entry with id {args.id}", file=sys.stderr)
        return 1
    print(expl.text)
    print(f"neighbourhood {expl.neighbourhood_size}, agreeing {expl.agreeing}, "
          f"pending evidence {expl.pending_evidence}")
    for ev in expl.history:
        print(f"  - {ev.kind.name.lower():<10} {ev.reason}")
    return 0


def _pending(args: argparse.Namespace) -> int:
    store = _open(args.db)
    try:
        items = store.pending()
    finally:
        store.close()
    if not items:
        print("nothing pending: every remembered (state, action) is trusted or replaced")
    for it in items:
        print(f"({it.state_key}, {it.action} {it.action_arg}) suppressed "
              f"{len(it.suppressed_ids)} entries; evidence {list(it.evidence)}; {it.reason}")
    return 0


def _recover(args: argparse.Namespace) -> int:
    if not args.db.is_file():
        raise FileNotFoundError(f"no memory database at {args.db}")
    report = recover_store(args.db, args.new)
    print(report.summary())
    print(f"{report.total} row(s) copied into {args.new}; {args.db} was left untouched")
    if "entries" in report.rows and report.rows["entries"] == 0:
        print(f"no memory entry of {args.db} could be read: {args.new} holds an empty memory; "
              "restore a backup if there is one")
    return 0
