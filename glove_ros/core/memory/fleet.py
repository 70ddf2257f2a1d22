"""Fleet memory, the part every robot computes alike (ROS-free, no transport).

Robots that share one building share what their verifiers found. This module holds what
must be identical on every robot, whatever order events arrive in:

* :class:`Hlc` / :class:`HlcClock` -- a hybrid logical clock per robot: physical
  milliseconds plus a counter, with the robot id as the last tie-break. A robot that has
  seen a remote event stamps its own later events after it, even when its wall clock is
  behind; a remote clock further ahead than ``max_skew_ms`` is *flagged* (the event is kept)
  and never drags the local clock forward.
* :class:`FleetEvent` -- an immutable memory event (an entry recorded, suppressed,
  replaced, or restored by a re-verification) with a global id
  (``<robot>/<clock>``), serialised as JSON for the wire; malformed input is a
  :class:`FleetError` naming the field.
* :func:`fold` -- the deterministic fold: events de-duplicated by id and ordered by clock
  give every entry's fleet status. A suppression is undone only by a *newer*
  re-verification (``restored``), never by a "trusted" claim (``recorded``)
  from a robot that was offline, however late it arrives. :func:`digest` hashes the result
  so robots can compare status cheaply.
* :class:`Outbox` -- every event of an :class:`~glove_ros.core.memory.store.ExperienceStore`
  written, in the same SQLite transaction as the change, to an outbox table with its global
  id and clock; a publisher drains it (:meth:`Outbox.pending`, :meth:`Outbox.mark_sent`).
  A crash between the commit and the publish re-sends the same ids (receivers de-duplicate
  by id), never loses one.

The transport (NATS JetStream leaf nodes and the building hub) builds on this; see
``docs/fleet.md`` for what exists today.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from glove_ros.core.memory.experience import EventKind, MemoryEvent

__all__ = [
    "KINDS",
    "EntryStatus",
    "FleetError",
    "FleetEvent",
    "Hlc",
    "HlcClock",
    "Outbox",
    "digest",
    "fold",
]

#: event kinds on the wire; the fleet status each one leads to is in :func:`fold`
KINDS = ("recorded", "suppressed", "replaced", "restored")
_ROBOT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_CLOCK = re.compile(r"^(\d{13})-(\d{6})-([A-Za-z0-9_.-]{1,64})$")
_MAX_COUNTER = 999_999


class FleetError(ValueError):
    """A malformed fleet event or clock (the message names the field)."""


def check_robot_id(robot_id: Any) -> str:
    """``robot_id`` when it is a valid robot id (a JetStream domain); FleetError if not."""
    if not isinstance(robot_id, str) or not _ROBOT.match(robot_id):
        raise FleetError(f"robot_id must be 1-64 of [A-Za-z0-9_.-], got {robot_id!r}")
    return robot_id


@dataclass(frozen=True, order=True)
class Hlc:
    """A hybrid logical clock value; orders by (wall_ms, counter, robot_id)."""

    wall_ms: int
    counter: int
    robot_id: str

    def __post_init__(self) -> None:
        check_robot_id(self.robot_id)
        if not isinstance(self.wall_ms, int) or not 0 <= self.wall_ms < 10**13:
            raise FleetError(f"clock wall_ms must be an integer in [0, 1e13), got "
                             f"{self.wall_ms!r}")
        if not isinstance(self.counter, int) or not 0 <= self.counter <= _MAX_COUNTER:
            raise FleetError(f"clock counter must be an integer in [0, {_MAX_COUNTER}], got "
                             f"{self.counter!r}")

    def text(self) -> str:
        """Fixed-width text that sorts like the clock: ``<13 digits>-<6 digits>-<robot>``."""
        return f"{self.wall_ms:013d}-{self.counter:06d}-{self.robot_id}"

    @classmethod
    def parse(cls, text: Any) -> Hlc:
        """The clock written by :meth:`text`; :class:`FleetError` otherwise."""
        m = _CLOCK.match(text) if isinstance(text, str) else None
        if m is None:
            raise FleetError(f"clock must look like 0001733300000000-000000-robot1, got "
                             f"{text!r}")
        return cls(int(m.group(1)), int(m.group(2)), m.group(3))


def _wall_ms() -> int:
    return int(time.time() * 1000)


class HlcClock:
    """One robot's hybrid logical clock (thread-safe).

    :meth:`now` stamps a local event; :meth:`observe` merges a remote clock so that later
    local events order after it. A remote clock more than ``max_skew_ms`` ahead of this
    robot's wall clock is flagged (returns True) and not merged: the event is kept, the
    skew is reported, and a robot with a wrong clock cannot drag the fleet into its future.
    """

    def __init__(self, robot_id: str, *, max_skew_ms: int = 2000,
                 now_ms: Callable[[], int] = _wall_ms, state: str | None = None) -> None:
        self.robot_id = check_robot_id(robot_id)
        if not isinstance(max_skew_ms, int) or max_skew_ms < 0:
            raise FleetError(f"max_skew_ms must be an integer >= 0, got {max_skew_ms!r}")
        self.max_skew_ms = max_skew_ms
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._last = Hlc(0, 0, self.robot_id)
        if state:
            saved = Hlc.parse(state)
            self._last = Hlc(saved.wall_ms, saved.counter, self.robot_id)
        self.skew_flags = 0

    @property
    def state(self) -> str:
        """The last value issued, to persist across restarts (``state=`` restores it)."""
        return self._last.text()

    def now(self) -> Hlc:
        """A clock for a local event, after every clock issued or merged before."""
        with self._lock:
            pt = int(self._now_ms())
            last = self._last
            if pt > last.wall_ms:
                nxt = Hlc(pt, 0, self.robot_id)
            elif last.counter < _MAX_COUNTER:
                nxt = Hlc(last.wall_ms, last.counter + 1, self.robot_id)
            else:  # a million events in one millisecond: borrow the next millisecond
                nxt = Hlc(last.wall_ms + 1, 0, self.robot_id)
            self._last = nxt
            return nxt

    def observe(self, remote: Hlc) -> bool:
        """Merge a remote clock; True when it is more than ``max_skew_ms`` ahead (flagged,
        not merged)."""
        with self._lock:
            pt = int(self._now_ms())
            if remote.wall_ms > pt + self.max_skew_ms:
                self.skew_flags += 1
                return True
            last = self._last
            if remote.wall_ms > last.wall_ms or (
                    remote.wall_ms == last.wall_ms and remote.counter > last.counter):
                self._last = Hlc(remote.wall_ms, remote.counter, self.robot_id)
            return False


@dataclass(frozen=True)
class FleetEvent:
    """One immutable memory event of one robot.

    ``entry``: the global key of the entry it concerns (``<robot>/<local id>``); ``place``:
    (state_key, action, action_arg) of the memory; ``outcome``: the outcome concerned, where
    the writer knows it; ``reason``: why (the verifier's words); ``extra``: e.g. the entries
    that replaced it.
    """

    clock: Hlc
    kind: str
    entry: str = ""
    place: tuple[str, str, str] = ("", "", "")
    outcome: str = ""
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FleetError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not (isinstance(self.entry, str) and "/" in self.entry):
            raise FleetError(f"entry must be '<robot>/<local id>', got {self.entry!r}")
        if not (isinstance(self.place, tuple) and len(self.place) == 3
                and all(isinstance(p, str) for p in self.place)):
            raise FleetError(f"place must be [state_key, action, action_arg], got "
                             f"{self.place!r}")
        for name in ("outcome", "reason"):
            if not isinstance(getattr(self, name), str):
                raise FleetError(f"{name} must be a string")

    @property
    def robot_id(self) -> str:
        """The robot that wrote the event."""
        return self.clock.robot_id

    @property
    def event_id(self) -> str:
        """Global id: ``<robot>/<clock text>`` (unique: one clock value per event)."""
        return f"{self.clock.robot_id}/{self.clock.text()}"

    def to_json(self) -> str:
        """The wire form (compact JSON, keys sorted)."""
        return json.dumps({"clock": self.clock.text(), "kind": self.kind, "entry": self.entry,
                           "place": list(self.place), "outcome": self.outcome,
                           "reason": self.reason, "extra": dict(self.extra)},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> FleetEvent:
        """Parse the wire form; :class:`FleetError` names what is wrong."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FleetError(f"fleet event is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise FleetError("fleet event must be a JSON object")
        unknown = set(doc) - {"clock", "kind", "entry", "place", "outcome", "reason", "extra"}
        if unknown:
            raise FleetError(f"fleet event has unknown field(s): {', '.join(sorted(unknown))}")
        place = doc.get("place", ["", "", ""])
        extra = doc.get("extra", {})
        if not isinstance(place, list):
            raise FleetError(f"place must be [state_key, action, action_arg], got {place!r}")
        if not isinstance(extra, dict):
            raise FleetError("extra must be a JSON object")
        return cls(Hlc.parse(doc.get("clock")), doc.get("kind"), doc.get("entry", ""),
                   tuple(place), doc.get("outcome", ""), doc.get("reason", ""), extra)


@dataclass(frozen=True)
class EntryStatus:
    """An entry's fleet status and the event that set it."""

    status: str  # trusted | suppressed | replaced
    clock: Hlc
    reason: str = ""


def fold(events: Iterable[FleetEvent]) -> dict[str, EntryStatus]:
    """Every entry's fleet status from any set of events (duplicates and order ignored).

    Events are taken once per id, in clock order. ``recorded`` makes an unknown entry
    trusted and changes nothing else (a late "trusted" from an offline robot never undoes a
    suppression); ``suppressed`` hides a trusted entry (a replaced one stays replaced),
    ``replaced`` retires it; ``restored`` makes a suppressed or replaced entry trusted
    again, and only because it comes after them in clock order (an older re-verification
    that arrives late sorts before the suppression). These are the store's own rules
    (:meth:`~glove_ros.core.memory.store.ExperienceStore.suppress` / ``replace`` / ``restore``), so
    the fold of one robot's outbox equals its own store.
    """
    unique = {e.event_id: e for e in events}
    out: dict[str, EntryStatus] = {}
    for e in sorted(unique.values(), key=lambda e: e.clock):
        cur = out.get(e.entry)
        if e.kind == "recorded":
            if cur is None:
                out[e.entry] = EntryStatus("trusted", e.clock, e.reason)
        elif e.kind == "suppressed":
            if cur is None or cur.status == "trusted":
                out[e.entry] = EntryStatus("suppressed", e.clock, e.reason)
        elif e.kind == "replaced":
            out[e.entry] = EntryStatus("replaced", e.clock, e.reason)
        elif cur is not None and cur.status != "trusted":  # restored
            out[e.entry] = EntryStatus("trusted", e.clock, e.reason)
    return out


def digest(statuses: Mapping[str, EntryStatus]) -> str:
    """A short hash of a fold's result: equal on robots that agree on every entry."""
    h = hashlib.sha256()
    for entry in sorted(statuses):
        s = statuses[entry]
        h.update(f"{entry}={s.status}@{s.clock.text()}\n".encode())
    return h.hexdigest()[:16]


_OUTBOX_SQL = """
CREATE TABLE IF NOT EXISTS fleet_outbox(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fleet_clock(robot_id TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_applied(event_id TEXT PRIMARY KEY, applied INTEGER NOT NULL)
"""

#: reason prefix of a suppression applied from another robot's event (never re-applied)
FLEET_REASON = "fleet:"

_KIND_NAMES = {EventKind.RECORDED: "recorded", EventKind.SUPPRESSED: "suppressed",
               EventKind.REPLACED: "replaced", EventKind.RESTORED: "restored"}


class Outbox:
    """The outbox of one robot's store: every memory event, in the transaction that makes
    it, as a :class:`FleetEvent` row with its global id (see the module docstring).

    The robot's clock state is saved in the same transaction, so a restart never issues a
    clock value twice even if the wall clock stepped back.
    """

    def __init__(self, store: Any, robot_id: str, *, max_skew_ms: int = 2000,
                 now_ms: Callable[[], int] = _wall_ms) -> None:
        self.store = store
        self.robot_id = check_robot_id(robot_id)
        with store.transaction():
            for stmt in filter(None, (s.strip() for s in _OUTBOX_SQL.split(";"))):
                store._exec(stmt)
            row = store._exec("SELECT state FROM fleet_clock WHERE robot_id=?",
                              (self.robot_id,)).fetchone()
        self.clock = HlcClock(self.robot_id, max_skew_ms=max_skew_ms, now_ms=now_ms,
                              state=row[0] if row else None)
        store.add_transaction_hook(self._write)

    def _write(self, event: MemoryEvent, execute: Callable[..., Any]) -> None:
        kind = _KIND_NAMES.get(event.kind)
        if kind is None:
            return
        ids = event.new_entry_ids if event.kind == EventKind.REPLACED else ()
        for entry_id in event.entry_ids:
            clock = self.clock.now()
            row = execute("SELECT outcome FROM entries WHERE id=?", (int(entry_id),)).fetchone()
            fe = FleetEvent(clock, kind, f"{self.robot_id}/{entry_id}",
                            (event.state_key, event.action, event.action_arg),
                            outcome=str(row[0]) if row else "", reason=event.reason,
                            extra={"replaced_by": [f"{self.robot_id}/{i}" for i in ids]}
                            if ids else {})
            execute("INSERT INTO fleet_outbox(event_id, body) VALUES(?, ?)",
                    (fe.event_id, fe.to_json()))
        execute("INSERT INTO fleet_clock(robot_id, state) VALUES(?, ?) ON CONFLICT(robot_id) "
                "DO UPDATE SET state=excluded.state", (self.robot_id, self.clock.state))

    def pending(self, limit: int = 500) -> list[tuple[int, FleetEvent]]:
        """Events not yet confirmed sent, oldest first, as (seq, event)."""
        rows = self.store._query(
            "SELECT seq, body FROM fleet_outbox WHERE sent=0 ORDER BY seq LIMIT ?",
            (int(limit),))
        return [(int(seq), FleetEvent.from_json(body)) for seq, body in rows]

    def mark_sent(self, seqs: Iterable[int]) -> int:
        """Mark rows acknowledged by the transport; returns how many changed."""
        seqs = [int(s) for s in seqs]
        if not seqs:
            return 0
        with self.store.transaction():
            cur = self.store._exec(
                f"UPDATE fleet_outbox SET sent=1 WHERE sent=0 AND seq IN "
                f"({','.join('?' * len(seqs))})", seqs)
            return int(cur.rowcount)

    def apply_remote(self, event: FleetEvent) -> list[int]:
        """Apply another robot's event to this robot's memory, once per event id.

        A suppression another robot's verifier made (not one it took over from the fleet)
        hides this robot's trusted memories of the same place with the same outcome and
        queues the place for re-verification by this robot's own next visit: one robot's
        discovery protects the others, and each still checks for itself. Every other kind
        only records that the event was seen (restores and replacements are each robot's
        own re-verification). Returns the ids suppressed here (empty for a duplicate, this
        robot's own event, or nothing to hide). The suppression and the "applied" mark
        commit in one transaction, so a redelivery after a crash changes nothing twice.

        Every other robot's event also moves this robot's clock past it (so what this robot
        writes next sorts after what it has seen), unless that clock is more than
        ``max_skew_ms`` ahead of this robot's wall clock: then it is flagged
        (``clock.skew_flags``), not merged, and the event is applied all the same.
        """
        if event.robot_id != self.robot_id:
            self.clock.observe(event.clock)
        if (event.robot_id == self.robot_id or event.kind != "suppressed"
                or not event.outcome or event.reason.startswith(FLEET_REASON)):
            return []  # nothing to apply (and nothing to remember having applied)
        store = self.store
        with store.transaction():
            cur = store._exec("INSERT OR IGNORE INTO fleet_applied(event_id, applied) "
                              "VALUES(?, 0)", (event.event_id,))
            if cur.rowcount == 0:
                return []
            state_key, action, action_arg = event.place
            rows = store._exec(
                "SELECT id FROM entries WHERE state_key=? AND action=? AND action_arg=? AND "
                "outcome=? AND status=0", (state_key, action, action_arg, event.outcome)
            ).fetchall()
            ids = [int(r[0]) for r in rows]
            if not ids:
                return []
            reason = (f"{FLEET_REASON} {event.robot_id} found {event.outcome!r} at "
                      f"{state_key} {action} {action_arg}".rstrip() + f" stale ({event.reason})")
            done = store.suppress(ids, reason)
            if done:
                store.add_pending(state_key, action, action_arg, done, reason=reason)
            store._exec("UPDATE fleet_applied SET applied=? WHERE event_id=?",
                        (len(done), event.event_id))
            return done

    def events(self) -> list[FleetEvent]:
        """Every event this robot ever wrote, sent or not, in order."""
        rows = self.store._query("SELECT body FROM fleet_outbox ORDER BY seq")
        return [FleetEvent.from_json(body) for (body,) in rows]
