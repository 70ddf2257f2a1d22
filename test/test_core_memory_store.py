"""ExperienceStore: persistence, indexes, history, pending queue, crash safety, corruption."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from glove_ros.core.memory.equivalence import make_rule
from glove_ros.core.memory.experience import EventKind, Source, Status, Transition
from glove_ros.core.memory.store import ExperienceStore, StoreCorruptError, StoreError

ROOT = Path(__file__).resolve().parents[1]


def T(state="wp1", action="look_at", outcome="colors=red", **kw) -> Transition:
    return Transition(state_key=state, action=action, outcome=outcome, **kw)


@pytest.fixture
def store(tmp_path):
    s = ExperienceStore(tmp_path / "memory.db")
    yield s
    s.close()


def trusted_counts(store: ExperienceStore, t: Transition) -> Counter:
    entries, _ = store.query(t.state_key, t.action, t.action_arg, limit=None)
    return Counter(e.transition.outcome for e in entries)


# ----------------------------------------------------------------------------- basics


def test_record_get_round_trip_keeps_every_field(store):
    t = T(
        action_arg="wp_lab", robot_id="jetrover_1", episode_id="ep7", pose=(1.5, -2.0, 0.3),
        context="find red", reward=-0.5, source=Source.IMPORTED, stamp=123.25,
    )
    eid = store.record(t)
    e = store.get(eid)
    assert e.transition == t
    assert e.status is Status.TRUSTED and e.valid_from == 123.25 and e.valid_until is None
    assert e.replaced_by is None
    assert store.get(eid + 100) is None


def test_zero_stamp_uses_the_store_clock(tmp_path):
    with ExperienceStore(tmp_path / "m.db", clock=lambda: 42.0) as s:
        assert s.get(s.record(T())).valid_from == 42.0


def test_invalid_transition_is_rejected_and_nothing_is_stored(store):
    store.record(T())
    before = store.counts()
    with pytest.raises(ValueError, match="pose x"):
        store.record(T(pose=(float("nan"), 0.0, 0.0)))
    with pytest.raises(ValueError, match="item 2"):
        store.record_many([T(), T(), T(outcome=""), T()])
    with pytest.raises(ValueError):
        store.record("not a transition")
    assert store.counts() == before
    assert store.max_id() == 1


def test_find_resent_names_only_the_same_stamped_observation(store):
    t = T(robot_id="r1", episode_id="e1", stamp=1700000000.25, action_arg="x")
    eid = store.record(t)
    assert store.find_resent(t) == eid
    # any field that differs makes it another observation
    for change in ({"stamp": 1700000000.5}, {"outcome": "colors=blue"}, {"episode_id": "e2"},
                   {"robot_id": "r2"}, {"action_arg": "y"}, {"state": "wp2"},
                   {"source": Source.PROBED}):
        assert store.find_resent(T(**{"robot_id": "r1", "episode_id": "e1",
                                       "stamp": 1700000000.25, "action_arg": "x",
                                       **change})) is None, change
    # unstamped transitions take the store clock: never recognised as re-sent
    unstamped = T(robot_id="r1", episode_id="e1")
    store.record(unstamped)
    assert store.find_resent(unstamped) is None


def test_record_many_is_one_transaction_with_contiguous_ids(store):
    seen = []
    store.add_listener(seen.append)
    ids = store.record_many([T(outcome=f"o{i % 3}", stamp=i + 1.0) for i in range(10)])
    assert ids == list(range(1, 11))
    assert [e.transition.stamp for e in store.get_many(ids)] == [float(i + 1) for i in range(10)]
    assert store.outcome_counts(T()) == {"o0": 4, "o1": 3, "o2": 3}
    assert [ev.entry_ids for ev in seen] == [(i,) for i in ids]
    assert all(ev.kind is EventKind.RECORDED for ev in seen)
    assert store.record_many([]) == []


def test_query_filters_order_limit_and_total(store):
    store.record(T("wp1", "look_at", "red", robot_id="a"))
    store.record(T("wp1", "look_at", "red", robot_id="b"))
    store.record(T("wp1", "navigate_to", "reached", action_arg="wp2"))
    store.record(T("wp2", "look_at", "blue"))
    entries, total = store.query(state_key="wp1")
    assert total == 3 and [e.id for e in entries] == [3, 2, 1]  # newest first
    assert store.query(action="look_at", limit=1)[1] == 3
    assert [e.id for e in store.query(action="look_at", limit=1)[0]] == [4]
    assert store.query(state_key="wp1", robot_id="b")[1] == 1
    assert store.query(action="navigate_to", action_arg="wp2")[1] == 1
    assert store.query(action="navigate_to", action_arg="")[1] == 0
    assert store.query(limit=0) == ([], 4)
    assert [e.id for e in store.query(limit=2, offset=1)[0]] == [3, 2]
    with pytest.raises(ValueError, match="limit"):
        store.query(limit=-1)


# ----------------------------------------------------------------------------- history


def test_suppress_hides_from_query_but_history_and_explain_keep_it(store):
    ids = store.record_many([T(outcome="red") for _ in range(3)])
    changed = store.suppress(ids[:2], "dissonance: test", stamp=50.0)
    assert changed == ids[:2]
    entries, total = store.query(state_key="wp1")
    assert [e.id for e in entries] == [ids[2]] and total == 1
    everything, total_all = store.query(state_key="wp1", include_suppressed=True)
    assert total_all == 3
    e = store.get(ids[0])
    assert e.status is Status.SUPPRESSED and e.valid_until == 50.0 and "dissonance" in e.reason
    kinds = [h.kind for h in store.history(ids[0])]
    assert kinds == [EventKind.RECORDED, EventKind.SUPPRESSED]
    text = store.explain(ids[0]).text
    assert "SUPPRESSED" in text and "dissonance: test" in text
    assert store.suppress(ids[:2], "again") == []  # idempotent, no new event
    assert len(store.history(ids[0])) == 2


def test_replace_keeps_old_entries_as_history(store):
    old = store.record_many([T(outcome="red") for _ in range(3)])
    new = store.replace(old, [T(outcome="blue"), T(outcome="blue")], "probed", 2, stamp=9.0)
    assert len(new) == 2
    for eid in old:
        e = store.get(eid)
        assert e.status is Status.REPLACED and e.replaced_by == new[0] and e.valid_until == 9.0
    assert store.outcome_counts(T()) == {"blue": 2}
    assert store.counts()["total"] == 5  # nothing deleted
    ev = store.history(old[0])[-1]
    assert ev.kind is EventKind.REPLACED and ev.new_entry_ids == tuple(new)
    assert ev.evidence_count == 2
    ex = store.explain(old[0])
    assert "REPLACED" in ex.text and str(new[0]) in ex.text
    ex_new = store.explain(new[0])
    assert ex_new.neighbourhood_size == 1 and ex_new.agreeing == 1
    assert store.get(new[0]).transition.source is Source.OBSERVED


def test_replace_rejects_bad_input_and_changes_nothing(store):
    old = store.record_many([T(outcome="red") for _ in range(2)])
    store.replace(old[:1], [T(outcome="blue")], "x")
    snapshot = (store.counts(), [store.get(i) for i in range(1, store.max_id() + 1)])
    with pytest.raises(ValueError, match="already replaced"):
        store.replace(old, [T(outcome="green")], "y")
    with pytest.raises(ValueError, match="unknown memory entry"):
        store.replace([old[1], 999], [T(outcome="green")], "y")
    with pytest.raises(ValueError, match="at least one"):
        store.replace([old[1]], [], "y")
    with pytest.raises(ValueError, match="replacement 1"):
        store.replace([old[1]], [T(outcome="green"), T(outcome="")], "y")
    with pytest.raises(ValueError, match="both replaced and replacing"):
        store.replace([old[1]], [old[1]], "y")
    with pytest.raises(ValueError, match="unknown memory entry"):
        store.suppress([12345], "y")
    assert (store.counts(), [store.get(i) for i in range(1, store.max_id() + 1)]) == snapshot


def test_replace_can_promote_existing_evidence_entries(store):
    old = store.record(T(outcome="red"))
    fresh = store.record(T(outcome="blue"))
    store.suppress([fresh], "hold")
    assert store.replace([old], [fresh], "verified", 1) == [fresh]
    assert store.get(fresh).status is Status.TRUSTED
    assert store.get(old).status is Status.REPLACED
    assert store.outcome_counts(T()) == {"blue": 1}


def test_restore_undoes_suppression_and_replacement(store):
    ids = store.record_many([T(outcome="red") for _ in range(2)])
    store.suppress(ids[:1], "x")
    store.replace(ids[1:], [T(outcome="blue")], "y")
    assert store.restore(ids, "operator undo") == ids
    for eid in ids:
        e = store.get(eid)
        assert e.status is Status.TRUSTED and e.valid_until is None and e.replaced_by is None
    assert store.history(ids[1])[-1].kind is EventKind.RESTORED
    assert "restored" in store.explain(ids[0]).text
    assert store.outcome_counts(T()) == {"red": 2, "blue": 1}


def test_listener_gets_events_after_commit_and_failures_are_isolated(store):
    got = []

    def bad(_event):
        raise RuntimeError("listener bug")

    store.add_listener(bad)
    store.add_listener(got.append)
    ids = store.record_many([T(), T()])
    store.suppress(ids, "x")
    assert [e.kind for e in got] == [EventKind.RECORDED, EventKind.RECORDED, EventKind.SUPPRESSED]
    with pytest.raises(RuntimeError, match="boom"), store.transaction():
        store.record(T())
        raise RuntimeError("boom")
    assert len(got) == 3  # the rolled-back RECORDED event was never delivered
    assert store.max_id() == 2
    store.remove_listener(got.append)
    store.record(T())
    assert len(got) == 3


def test_nested_transaction_rolls_back_only_the_inner_block(store):
    with store.transaction():
        store.record(T(outcome="a"))
        with pytest.raises(KeyError), store.transaction():
            store.record(T(outcome="b"))
            raise KeyError("inner")
        store.record(T(outcome="c"))
    assert store.outcome_counts(T()) == {"a": 1, "c": 1}


def test_outcome_counts_match_a_brute_force_count_after_random_operations(store):
    rng = random.Random(3)
    keys = [("wp1", "look_at"), ("wp2", "look_at"), ("wp1", "navigate_to")]
    for step in range(300):
        op = rng.random()
        live = [e.id for e in store.query(limit=None, include_suppressed=True)[0]]
        if op < 0.6 or not live:
            s, a = rng.choice(keys)
            store.record(T(s, a, rng.choice(["red", "blue", "hole"]), reward=rng.random()))
        elif op < 0.75:
            store.suppress(rng.sample(live, min(3, len(live))), f"s{step}")
        elif op < 0.9:
            pool = [i for i in live if store.get(i).status != Status.REPLACED]
            if pool:
                s, a = rng.choice(keys)
                store.replace(rng.sample(pool, min(2, len(pool))), [T(s, a, "green")], "r")
        else:
            store.restore(rng.sample(live, min(2, len(live))), "u")
    for s, a in keys:
        assert store.outcome_counts(T(s, a)) == dict(trusted_counts(store, T(s, a)))
    all_entries = store.query(limit=None, include_suppressed=True)[0]
    by_status = Counter(e.status for e in all_entries)
    c = store.counts()
    assert c["trusted"] == by_status[Status.TRUSTED]
    assert c["suppressed"] == by_status[Status.SUPPRESSED]
    assert c["replaced"] == by_status[Status.REPLACED]
    assert c["total"] == len(all_entries) == store.max_id()
    assert store.query()[1] == by_status[Status.TRUSTED]


# ----------------------------------------------------------------------------- neighbourhood


def test_neighbourhood_under_state_and_pose_rules(store):
    near = store.record(T("wp1", pose=(1.0, 1.0, 0.0)))
    jitter = store.record(T("wp1b", pose=(1.1, 0.9, 2.0)))
    far = store.record(T("wp1", pose=(3.0, 1.0, 0.0)))
    unposed = store.record(T("wp1"))
    other_action = store.record(T("wp1", action="navigate_to", pose=(1.0, 1.0, 0.0)))
    other_arg = store.record(T("wp1", action_arg="x", pose=(1.0, 1.0, 0.0)))
    probe = T("wp1", outcome="?", pose=(1.05, 1.0, 0.0))
    state_ids = {e.id for e in store.neighbourhood(probe, make_rule("state"))}
    assert state_ids == {near, far, unposed}
    pose_ids = [e.id for e in store.neighbourhood(probe, make_rule("pose", radius=0.3))]
    assert pose_ids == [unposed, jitter, near]  # newest first
    assert other_action not in pose_ids and other_arg not in pose_ids
    assert store.outcome_counts(probe, make_rule("pose", radius=0.3)) == {"colors=red": 3}
    store.suppress([near], "x")
    assert near not in {e.id for e in store.neighbourhood(probe, make_rule("pose", radius=0.3))}
    assert near in {
        e.id
        for e in store.neighbourhood(probe, make_rule("pose", radius=0.3), include_suppressed=True)
    }


def test_pose_neighbourhood_across_cell_borders_and_negative_coordinates(tmp_path):
    with ExperienceStore(tmp_path / "m.db", cell_size=0.5) as s:
        rng = random.Random(11)
        pts = [(rng.uniform(-3, 3), rng.uniform(-3, 3)) for _ in range(400)]
        s.record_many([T("c", pose=(x, y, 0.0)) for x, y in pts])
        rule = make_rule("pose", radius=0.7)
        for _ in range(30):
            qx, qy = rng.uniform(-3, 3), rng.uniform(-3, 3)
            got = {e.id for e in s.neighbourhood(T("z", pose=(qx, qy, 0.0)), rule)}
            want = {
                i + 1 for i, (x, y) in enumerate(pts) if (x - qx) ** 2 + (y - qy) ** 2 <= 0.49
            }
            assert got == want


def test_cell_size_is_fixed_at_creation(tmp_path):
    path = tmp_path / "m.db"
    ExperienceStore(path, cell_size=0.25).close()
    with ExperienceStore(path) as s:
        assert s.cell_size == 0.25
    with pytest.raises(ValueError, match="cell_size=0.25"):
        ExperienceStore(path, cell_size=1.0)
    with pytest.raises(ValueError, match="cell_size"):
        ExperienceStore(tmp_path / "n.db", cell_size=-1)


# ----------------------------------------------------------------------------- pending queue


def test_pending_queue_persists_and_merges(tmp_path):
    path = tmp_path / "m.db"
    with ExperienceStore(path) as s:
        ids = s.record_many([T(outcome="red") for _ in range(3)])
        s.suppress(ids, "dissonance")
        key = s.add_pending("wp1", "look_at", "", ids[:2], stamp=5.0, reason="dissonance")
        fresh = s.record(T(outcome="blue"))
        assert s.add_pending_evidence(key, "blue", fresh) == 1
        assert s.add_pending_evidence(key, "blue") == 2
        with pytest.raises(ValueError, match="no pending"):
            s.add_pending_evidence(key + 1, "blue")
        with pytest.raises(ValueError, match="unknown memory entry"):
            s.add_pending_evidence(key, "blue", 999)
    with ExperienceStore(path) as s:
        (item,) = s.pending()
        assert item.key == key and item.pair == ("wp1", "look_at", "")
        assert item.suppressed_ids == tuple(ids[:2]) and item.stamp == 5.0
        assert item.evidence == ("blue", "blue") and item.evidence_ids == (fresh, None)
        assert s.pending_for("wp1", "look_at") == item
        assert s.explain(ids[0]).pending_evidence == 2
        assert "2 fresh sample" in s.explain(ids[0]).text
        # the world changed again: suppressed ids merge, evidence restarts
        assert s.add_pending("wp1", "look_at", "", ids[1:], reason="again") == key
        item = s.get_pending(key)
        assert item.suppressed_ids == tuple(ids) and item.evidence == ()
        assert s.history(ids[2])[-1].kind is EventKind.QUEUED
        assert s.counts()["pending"] == 1
        # restoring every suppressed id drops the item
        s.restore(ids, "undo")
        assert s.pending() == []
        key2 = s.add_pending("wp2", "look_at", "", [])
        assert s.clear_pending(key2) and not s.clear_pending(key2)


def test_state_values_round_trip(store):
    store.set_state("glove.x", {"a": [1, 2]})
    store.set_state("glove.y", 3)
    store.set_state("other", 1)
    assert store.get_state("glove.x") == {"a": [1, 2]}
    assert store.state_items("glove.") == {"glove.x": {"a": [1, 2]}, "glove.y": 3}
    store.delete_state("glove.x")
    assert store.get_state("glove.x", "gone") == "gone"


# ----------------------------------------------------------------------------- durability


def test_store_survives_reopen(tmp_path):
    path = tmp_path / "sub" / "memory.db"
    with ExperienceStore(path) as s:
        ids = s.record_many([T(outcome=f"o{i}", pose=(i, 0.0, 0.0)) for i in range(20)])
        s.suppress(ids[:5], "x")
        s.replace(ids[5:7], [T(outcome="new")], "y", 1)
        before = [s.get(i) for i in range(1, s.max_id() + 1)]
        history = s.history(ids[5])
        counts = s.counts()
    with ExperienceStore(path) as s:
        assert [s.get(i) for i in range(1, s.max_id() + 1)] == before
        assert s.history(ids[5]) == history
        assert s.counts() == counts
        assert s.record(T()) == len(before) + 1


_WRITER = r"""
import sys
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore
store = ExperienceStore(sys.argv[1])
i = 0
while True:
    eid = store.record(Transition("wp%d" % (i % 7), "look_at", "o%d" % i, stamp=i + 1.0))
    sys.stdout.write("%d %d\n" % (eid, i))
    sys.stdout.flush()
    i += 1
"""


def test_sigkill_mid_stream_loses_no_acknowledged_record(tmp_path):
    path = tmp_path / "kill.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    acked: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            eid, i = map(int, line.split())
            acked[eid] = i
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert len(acked) >= 300, "writer did not produce enough records"
    with ExperienceStore(path, check=True) as s:
        for eid, i in acked.items():
            e = s.get(eid)
            assert e is not None, f"acknowledged id {eid} lost"
            assert e.transition.outcome == f"o{i}" and e.transition.stamp == i + 1.0
        assert s.max_id() >= max(acked)
        assert s.counts()["total"] == s.max_id()


def test_concurrent_writers_from_threads(store):
    ids: list[int] = []
    lock = threading.Lock()

    def work(n):
        for j in range(50):
            eid = store.record(T(f"wp{n}", outcome=f"o{j}"))
            with lock:
                ids.append(eid)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(ids) == list(range(1, 201))
    assert store.counts()["trusted"] == 200


# ----------------------------------------------------------------------------- corruption


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


def test_garbage_file_raises_corrupt_error_and_is_untouched(tmp_path):
    path = tmp_path / "memory.db"
    path.write_bytes(os.urandom(8192))
    before = _files(path)
    with pytest.raises(StoreCorruptError, match="not an SQLite database"):
        ExperienceStore(path)
    assert _files(path) == before


def test_damaged_database_raises_corrupt_error_and_is_untouched(tmp_path):
    path = tmp_path / "memory.db"
    with ExperienceStore(path) as s:
        s.record_many([T(outcome=f"o{i}") for i in range(200)])
    with sqlite3.connect(path) as c:  # fold the WAL in so the main file holds everything
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for p in tmp_path.glob("memory.db-*"):
        p.unlink()
    data = bytearray(path.read_bytes())
    data[100:4096] = os.urandom(3996)  # the schema page, past the header magic
    path.write_bytes(bytes(data))
    before = _files(path)
    with pytest.raises(StoreCorruptError, match="damaged"):
        ExperienceStore(path)
    assert _files(path) == before


def test_damaged_data_page_is_found_by_the_check(tmp_path):
    path = tmp_path / "memory.db"
    with ExperienceStore(path) as s:
        s.record_many([T(outcome="x" * 200) for _ in range(500)])
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = c.execute("PRAGMA page_size").fetchone()[0]
    for p in tmp_path.glob("memory.db-*"):
        p.unlink()
    data = bytearray(path.read_bytes())
    start = len(data) // 2 // page * page
    data[start : start + page] = b"\xff" * page
    path.write_bytes(bytes(data))
    before = _files(path)
    with pytest.raises(StoreCorruptError):
        ExperienceStore(path, check=True)
    assert _files(path) == before


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT)")
    before = _files(path)
    with pytest.raises(StoreError, match="another application"):
        ExperienceStore(path)
    assert _files(path) == before


def test_closed_store_raises(tmp_path):
    s = ExperienceStore(tmp_path / "m.db")
    s.close()
    assert s.closed
    with pytest.raises(StoreError, match="closed"):
        s.record(T())
    with pytest.raises(StoreError, match="directory"):
        ExperienceStore(tmp_path)


def test_opens_a_file_plan_memory_created_first(tmp_path):
    """The plan-gate and consolidation nodes share the memory file and may start first."""
    from glove_ros.core.plan.plan_entries import Edit
    from glove_ros.core.plan.plan_memory import PlanMemoryStore

    path = tmp_path / "shared.db"
    plan = PlanMemoryStore(str(path))
    plan.apply([Edit.add("semantic", "block_red", "red block at kitchen")])
    plan.close()
    store = ExperienceStore(str(path))
    eid = store.record(Transition("kitchen", "look", "colors=red"))
    store.close()
    again = ExperienceStore(str(path))
    assert again.get(eid).transition.outcome == "colors=red"
    again.close()
    assert [e.name for e in PlanMemoryStore(str(path)).entries()] == ["block_red"]
