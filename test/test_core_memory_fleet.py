"""Tests of glove_ros.core.memory.fleet: hybrid logical clocks, fleet events on the wire, the
deterministic fold, and the outbox written in the store's own transaction."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.fleet import (
    FleetError,
    FleetEvent,
    Hlc,
    HlcClock,
    Outbox,
    digest,
    fold,
)
from glove_ros.core.memory.store import ExperienceStore


class _Wall:
    """A settable wall clock in milliseconds."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


# ----------------------------------------------------------------------------- clocks


def test_clock_is_monotonic_when_the_wall_clock_stalls_or_steps_back():
    wall = _Wall(1_000)
    clock = HlcClock("r1", now_ms=wall)
    a, b = clock.now(), clock.now()
    wall.ms = 900  # NTP stepped the clock back
    c = clock.now()
    wall.ms = 2_000
    d = clock.now()
    assert a < b < c < d
    assert (a.wall_ms, a.counter, b.counter, c.wall_ms, c.counter) == (1000, 0, 1, 1000, 2)
    assert d == Hlc(2000, 0, "r1")


def test_a_remote_clock_orders_later_local_events_after_it_unless_skewed():
    wall = _Wall(1_000)
    clock = HlcClock("slow", now_ms=wall, max_skew_ms=2_000)
    ahead = Hlc(2_500, 7, "fast")  # 1.5 s ahead: within the bound
    assert clock.observe(ahead) is False
    after = clock.now()
    assert after > ahead and after.robot_id == "slow"
    # 5 s ahead: flagged, kept out of the local clock
    assert clock.observe(Hlc(9_000, 0, "wrong")) is True
    assert clock.skew_flags == 1
    assert clock.now() < Hlc(9_000, 0, "wrong")


def test_clock_state_survives_a_restart_with_the_wall_clock_behind():
    wall = _Wall(5_000)
    first = HlcClock("r1", now_ms=wall)
    issued = [first.now() for _ in range(3)]
    wall.ms = 4_000
    again = HlcClock("r1", now_ms=wall, state=first.state)
    assert again.now() > issued[-1]


def test_clock_text_sorts_like_the_clock_and_bad_text_is_refused():
    values = [Hlc(10, 2, "b"), Hlc(10, 2, "a"), Hlc(9, 999, "z"), Hlc(11, 0, "a")]
    assert sorted(values) == sorted(values, key=Hlc.text)
    assert all(Hlc.parse(v.text()) == v for v in values)
    for bad in ("", "12-3-r", "0000000000010-000002-", "0000000000010-000002-a b", None, 5):
        with pytest.raises(FleetError, match="clock must look like"):
            Hlc.parse(bad)
    with pytest.raises(FleetError, match="robot_id"):
        HlcClock("robot one")


# ----------------------------------------------------------------------------- events


def _ev(ms, robot, kind, entry="r1/1", counter=0, reason=""):
    return FleetEvent(Hlc(ms, counter, robot), kind, entry, ("room_a", "look", ""),
                      reason=reason)


def test_events_round_trip_and_malformed_ones_name_the_field():
    e = FleetEvent(Hlc(1_733_300_000_000, 3, "r2"), "replaced", "r2/17",
                   ("hall", "navigate_to", "room_b"), "blocked", "dissonance: 2 surprises",
                   {"replaced_by": ["r2/20"]})
    assert FleetEvent.from_json(e.to_json()) == e
    assert e.event_id == "r2/1733300000000-000003-r2"
    good = json.loads(e.to_json())
    cases = {
        b"\xff": "not JSON",
        "[1]": "JSON object",
        json.dumps({**good, "colour": 1}): "unknown field",
        json.dumps({**good, "kind": "deleted"}): "kind must be one of",
        json.dumps({**good, "entry": "17"}): "entry must be",
        json.dumps({**good, "clock": "yesterday"}): "clock must look like",
        json.dumps({**good, "place": "hall"}): "place must be",
        json.dumps({**good, "place": ["hall", 1, ""]}): "place must be",
        json.dumps({**good, "reason": 5}): "reason must be a string",
        json.dumps({**good, "extra": []}): "extra must be",
    }
    for text, message in cases.items():
        with pytest.raises(FleetError, match=message):
            FleetEvent.from_json(text)


# ----------------------------------------------------------------------------- fold


def test_fold_converges_in_any_delivery_order_and_ignores_duplicates():
    """The issue's conflict case: robot A (offline) suppresses entry E; robot B, whose clock
    is behind, re-trusts E with an older clock, and its "recorded" arrives late too. Every
    robot, whatever order the events reach it in (duplicates included), folds the same
    status: E stays suppressed. Only a re-verification newer than the suppression brings E
    back."""
    events = [
        _ev(1_000, "r1", "recorded"),
        _ev(5_000, "rA", "suppressed", reason="dissonance at room_a"),
        _ev(4_000, "rB", "restored", reason="looked again"),  # older than A's suppression
        _ev(1_000, "r1", "recorded"),  # a duplicate (same id)
        _ev(2_000, "r2", "recorded", entry="r2/9"),
    ]
    digests = set()
    for order in itertools.permutations(events):
        statuses = fold(order)
        assert statuses["r1/1"].status == "suppressed"
        assert statuses["r2/9"].status == "trusted"
        digests.add(digest(statuses))
    assert len(digests) == 1
    later = fold([*events, _ev(6_000, "rB", "restored", reason="re-verified")])
    assert later["r1/1"].status == "trusted" and later["r1/1"].reason == "re-verified"


def test_fold_follows_the_stores_own_rules():
    assert fold([_ev(1, "r1", "recorded"), _ev(2, "r1", "replaced"),
                 _ev(3, "r1", "suppressed")])["r1/1"].status == "replaced"
    assert fold([_ev(1, "r1", "recorded"), _ev(2, "r1", "replaced"),
                 _ev(3, "r1", "restored")])["r1/1"].status == "trusted"
    # a restore of an entry never suppressed changes nothing; an unknown entry stays unknown
    assert fold([_ev(1, "r1", "recorded"), _ev(2, "r1", "restored")])["r1/1"].clock.wall_ms == 1
    assert fold([_ev(2, "r1", "restored")]) == {}
    # equal wall time and counter: the robot id decides, the same way everywhere
    tie = [_ev(7, "rA", "suppressed"), _ev(7, "rB", "restored")]
    assert fold(tie)["r1/1"].status == fold(tie[::-1])["r1/1"].status


def test_a_skewed_robot_is_flagged_and_the_fleet_still_converges():
    """One robot's clock is 5 s ahead: receivers flag its events (not merged into their
    clocks) but keep them, and every robot folds the same digest."""
    wall = _Wall(10_000)
    receivers = [HlcClock(f"r{i}", now_ms=wall, max_skew_ms=2_000) for i in range(3)]
    skewed = _ev(15_000, "rX", "suppressed", entry="r0/1")
    others = [_ev(9_000, "r0", "recorded", entry="r0/1"),
              _ev(9_500, "r1", "recorded", entry="r1/1")]
    flags = [rc.observe(skewed.clock) for rc in receivers]
    assert flags == [True, True, True]
    assert all(rc.now().wall_ms == 10_000 for rc in receivers)
    views = [fold(others + [skewed]), fold([skewed] + others), fold(others[::-1] + [skewed])]
    assert len({digest(v) for v in views}) == 1
    assert views[0]["r0/1"].status == "suppressed"


# ----------------------------------------------------------------------------- outbox


def _t(state, outcome, action="look"):
    return Transition(state, action, outcome, robot_id="r1", episode_id="e1")


def test_outbox_rows_commit_with_the_change_and_fold_to_the_stores_status(tmp_path):
    wall = _Wall(1_000_000)
    with ExperienceStore(str(tmp_path / "m.db")) as store:
        box = Outbox(store, "r1", now_ms=wall)
        a = store.record(_t("room_a", "colors=red"))
        b = store.record(_t("room_b", "colors=blue"))
        store.suppress([a], "dissonance at room_a")
        store.restore([a], "looked again: red")
        store.suppress([b], "dissonance at room_b")
        new = store.replace([b], [_t("room_b", "colors=")], "re-verified: empty")
        sent = box.pending()
        kinds = [(e.kind, e.entry) for _, e in sent]
        assert kinds == [("recorded", "r1/1"), ("recorded", "r1/2"), ("suppressed", "r1/1"),
                         ("restored", "r1/1"), ("suppressed", "r1/2"),
                         ("recorded", f"r1/{new[0]}"), ("replaced", "r1/2")]
        assert [e.event_id for _, e in sent] == sorted(e.event_id for _, e in sent)
        local = {f"r1/{e.id}": e.status.name.lower() for e in store.query(
            include_suppressed=True, limit=None)[0]}
        assert {k: v.status for k, v in fold(e for _, e in sent).items()} == local
        # a write that fails rolls its outbox row back with it
        with pytest.raises(ValueError):
            store.suppress([999], "unknown entry")
        with pytest.raises(RuntimeError), store.transaction():
            store.record(_t("hall", "colors="))
            raise RuntimeError("crash inside the transaction")
        assert len(box.pending()) == len(sent)
        assert box.mark_sent([seq for seq, _ in sent[:3]]) == 3
        assert box.mark_sent([seq for seq, _ in sent[:3]]) == 0  # idempotent
        assert [e.event_id for _, e in box.pending()] == [e.event_id for _, e in sent[3:]]


_KILLED = r"""
import os, sys
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.fleet import Outbox
from glove_ros.core.memory.store import ExperienceStore
store = ExperienceStore(sys.argv[1])
box = Outbox(store, "r1")
for i in range(5):
    store.record(Transition(f"wp{i}", "look", "colors=red", robot_id="r1", episode_id="e"))
print(" ".join(e.event_id for _, e in box.pending()), flush=True)
os._exit(9)  # killed between the commit and the publish: nothing closed, nothing sent
"""


def test_events_committed_before_a_crash_are_sent_after_the_restart(tmp_path):
    db = tmp_path / "m.db"
    out = subprocess.run([sys.executable, "-c", _KILLED, str(db)], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 9, out.stderr
    committed = out.stdout.split()
    assert len(committed) == 5
    with ExperienceStore(str(db)) as store:
        box = Outbox(store, "r1")
        assert [e.event_id for _, e in box.pending()] == committed  # the same ids again
        store.record(_t("wp9", "colors="))
        newest = box.pending()[-1][1]
        assert newest.event_id not in committed
        assert newest.clock > max(Hlc.parse(i.split("/", 1)[1]) for i in committed)


def test_another_robots_suppression_hides_the_same_memory_here_once(tmp_path):
    """Robot B remembers the red block at room_a, as robot A did; A's verifier found it
    gone. Applying A's event suppresses B's matching trusted memory and queues room_a for
    B's own re-verification; a redelivery, B's own events, a fleet-applied suppression and
    other kinds change nothing."""
    with ExperienceStore(str(tmp_path / "a.db")) as a_store, \
            ExperienceStore(str(tmp_path / "b.db")) as b_store:
        a, b = Outbox(a_store, "rA"), Outbox(b_store, "rB")
        ea = a_store.record(_t("room_a", "colors=red"))
        red = [b_store.record(_t("room_a", "colors=red")) for _ in range(2)]
        other = b_store.record(_t("room_b", "colors=red"))
        a_store.suppress([ea], "dissonance: saw colors=blue")
        events = [e for _, e in a.pending()]
        assert [e.kind for e in events] == ["recorded", "suppressed"]
        assert events[1].outcome == "colors=red"
        assert b.apply_remote(events[0]) == []  # a recording from A: nothing to hide
        assert b.apply_remote(events[1]) == red
        assert b.apply_remote(events[1]) == []  # redelivered: applied once
        entries = {e.id: e for e in b_store.query(include_suppressed=True, limit=None)[0]}
        assert all(entries[i].status.name == "SUPPRESSED" for i in red)
        assert entries[other].status.name == "TRUSTED"
        assert "fleet: rA found 'colors=red' at room_a look stale" in entries[red[0]].reason
        assert b_store.pending_for("room_a", "look") is not None
        # B's own suppression (taken over from the fleet) goes out, but is never applied again
        echo = [e for _, e in b.pending() if e.kind == "suppressed"]
        assert len(echo) == 2 and all(e.reason.startswith("fleet:") for e in echo)
        assert a.apply_remote(echo[0]) == [] and b.apply_remote(echo[0]) == []


def test_applying_a_remote_event_merges_its_clock_or_flags_a_skewed_one(tmp_path):
    """Robot B's wall clock is behind A's by 1 s: after applying A's event, B's next event
    still sorts after it (the HLC merge). Robot X's clock is 5 s ahead (more than the 2 s
    bound): its event is applied, flagged once, and does not drag B's clock forward."""
    wall = _Wall(100_000)
    with ExperienceStore(str(tmp_path / "b.db")) as b_store:
        b = Outbox(b_store, "rB", now_ms=wall, max_skew_ms=2_000)
        b_store.record(_t("room_a", "colors=red"))
        ahead = _ev(101_000, "rA", "suppressed")  # 1 s ahead: merged
        b.apply_remote(ahead)
        b_store.record(_t("hall", "colors="))
        assert b.events()[-1].clock > ahead.clock and b.clock.skew_flags == 0
        skewed = FleetEvent(Hlc(105_000, 0, "rX"), "suppressed", "rX/1",
                            ("room_a", "look", ""), "colors=red", "dissonance")
        assert b.apply_remote(skewed) != []  # kept and applied: B's red memory is hidden
        assert b.clock.skew_flags == 1
        b_store.record(_t("hall", "colors="))
        assert b.events()[-1].clock.wall_ms < 105_000  # not dragged 5 s ahead
