"""Group commit: acknowledged only after the commit; a bad item alone is rejected; a failed
batch acknowledges nothing and stores nothing; a full queue is counted, never silent."""

from __future__ import annotations

import pytest

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.ingest import GroupCommitter, IngestConfig
from glove_ros.core.memory.store import ExperienceStore


def _apply(store):
    def apply(item):
        if item == "bad":
            raise ValueError("bad item")
        if item == "boom":
            raise RuntimeError("disk gone")
        return store.record(Transition(item, "look", "colors=red")), "recorded", None
    return apply


def test_tickets_complete_after_commit_and_bad_items_alone_are_rejected(tmp_path):
    store = ExperienceStore(tmp_path / "m.db")
    seen_at_ack: list[int] = []
    probe = ExperienceStore(tmp_path / "m.db")  # a second connection sees only commits

    def committed(tickets):
        seen_at_ack.append(probe.counts()["total"])

    gc = GroupCommitter(store.transaction, _apply(store), committed=committed,
                        config=IngestConfig(max_batch=8, max_delay=0.05))
    tickets = [gc.submit(x) for x in ["a", "b", "bad", "c"]]
    assert all(t.wait(10) for t in tickets)
    assert [t.accepted for t in tickets] == [True, True, False, True]
    assert tickets[2].message == "bad item"
    assert seen_at_ack and seen_at_ack[-1] == 3  # durable before anyone was told
    gc.close()
    assert gc.stats()["committed"] == 3 and gc.stats()["rejected"] == 1


def test_a_failed_batch_acknowledges_and_stores_nothing(tmp_path):
    store = ExperienceStore(tmp_path / "m.db")
    failures = []
    gc = GroupCommitter(store.transaction, _apply(store), failed=lambda e, b: failures.append(e),
                        config=IngestConfig(max_batch=8, max_delay=0.2))
    tickets = [gc.submit(x) for x in ["a", "b", "boom"]]
    assert all(t.wait(10) for t in tickets)
    assert not any(t.accepted for t in tickets)
    assert all("nothing stored" in t.message for t in tickets)
    assert store.counts()["total"] == 0 and len(failures) == 1
    gc.close()


def test_full_queue_is_counted(tmp_path):
    store = ExperienceStore(tmp_path / "m.db")
    gc = GroupCommitter(store.transaction, _apply(store),
                        config=IngestConfig(max_batch=64, max_delay=0.5, queue_size=2))
    results = [gc.submit(f"w{i}") for i in range(10)]
    refused = sum(r is None for r in results)
    assert refused >= 7
    gc.close()
    s = gc.stats()
    assert s["dropped"] == refused and s["committed"] + s["dropped"] == 10
    assert store.counts()["total"] == s["committed"]


def test_limits_are_validated():
    with pytest.raises(ValueError, match="max_batch"):
        IngestConfig(max_batch=0).validate()
    with pytest.raises(ValueError, match="max_delay"):
        IngestConfig(max_delay=5.0).validate()


def _run(sync, offered, sustained, unreported=0, p99=5.0):
    return {"synchronous": sync, "offered_rate": offered, "sustained_rate": sustained,
            "unreported_loss": unreported, "query_p99_ms": p99}


def test_ingest_verdict_needs_every_setting_above_the_target_and_no_loss():
    from glove_ros.benchmarks.ingest import verdict

    ok = [_run("FULL", 1000, 985), _run("FULL", 1500, 1485), _run("NORMAL", 1500, 1480)]
    assert verdict(ok)[0]
    # offered exactly 1000/s: the last commit lands after the last publish, never >= 1000/s
    met, why = verdict([_run("FULL", 1000, 990)])
    assert not met and "best sustained 990/s" in why
    met, why = verdict(ok + [_run("NORMAL", 1000, 995, unreported=3)])
    assert not met and "unreported 3" in why
    met, why = verdict(ok + [_run("NORMAL", 1000, 995, p99=50.0)])
    assert not met and "p99 50.0" in why
    met, why = verdict([_run("FULL", 1500, 1485), _run("NORMAL", 1500, 950)])
    assert not met and "NORMAL: best sustained 950/s" in why
    assert verdict([]) == (False, "no runs")
