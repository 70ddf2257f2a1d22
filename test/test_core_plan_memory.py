"""Tests of glove_ros.core.plan.plan_memory: storage, versioning, retrieval, prompt assembly."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from glove_ros.core.llm.embedding import HashingEmbedder
from glove_ros.core.plan.plan_entries import Edit, PlanEntry, Provenance, apply_edits, slugify
from glove_ros.core.plan.plan_memory import PlanMemoryStore, StaleCandidateError
from glove_ros.core.plan.plan_retrieval import (
    assemble_prompt,
    format_entry,
    memory_text,
    rank_entries,
)

RED = Edit.add(
    "semantic", "block_red", "The red block was seen at wp_3.", Provenance(("ep1",), (4,))
)
BLOCKED = Edit.add("negative", "blocked_wp_2_wp_5", "The corridor wp_2 - wp_5 is blocked.")


@pytest.fixture
def store(tmp_path):
    s = PlanMemoryStore(tmp_path / "memory.db")
    yield s
    s.close()


def snapshot(s: PlanMemoryStore):
    """Everything observable, to check that a failed call changed nothing."""
    return (s.active_version, [v.__dict__ for v in s.versions()], s.entries(), len(s.events()))


# ---------------------------------------------------------------------------- versioning


def test_new_store_has_empty_deployed_version(store):
    assert store.active_version == 1
    assert store.entries() == [] and store.text() == ""
    info = store.version_info()
    assert info.status == "deployed" and info.active and info.n_entries == 0


def test_candidate_is_not_deployed(store):
    c = store.propose([RED], source="rule", reason="ep1")
    assert c.base_version == 1 and c.version == 2 and c.changed
    assert store.active_version == 1 and store.entries() == []
    assert store.version_info(c.version).status == "candidate"
    assert [e.name for e in store.entries(c.version)] == ["block_red"]
    assert c.text == "- [semantic] block_red: The red block was seen at wp_3."
    assert c.base_text == ""


def test_deploy_edit_remove_and_rollback(store):
    v2 = store.apply([RED, BLOCKED], source="rule", reason="ep1")
    assert store.active_version == v2
    v3 = store.apply(
        [
            Edit.change("block_red", body="The red block was seen at wp_5.", reason="swap ep2"),
            Edit.remove("blocked_wp_2_wp_5", reason="corridor re-opened in ep2"),
        ]
    )
    assert [e.body for e in store.entries()] == ["The red block was seen at wp_5."]
    # edit keeps position, old provenance when none is given
    assert store.entry("block_red").provenance == Provenance(("ep1",), (4,))
    # one call rolls back; every deployed version is kept
    assert store.rollback(v2) == v2
    assert store.active_version == v2
    assert {e.name for e in store.entries()} == {"block_red", "blocked_wp_2_wp_5"}
    assert store.entry("block_red").body == "The red block was seen at wp_3."
    assert store.rollback(v3) == v3  # roll forward again
    assert [v.version for v in store.versions("deployed")] == [1, v2, v3]
    assert [e.event for e in store.events()][-2:] == ["rollback", "rollback"]


def test_reject_keeps_candidate_for_audit(store):
    c = store.propose([RED])
    store.reject(c, reason="lost on evaluation set")
    assert store.active_version == 1
    assert store.version_info(c.version).status == "rejected"
    with pytest.raises(ValueError):
        store.deploy(c)
    with pytest.raises(ValueError):
        store.rollback(c.version)


def test_stale_candidate_cannot_be_deployed(store):
    c1 = store.propose([RED])
    c2 = store.propose([BLOCKED])
    store.deploy(c1)
    before = snapshot(store)
    with pytest.raises(StaleCandidateError):
        store.deploy(c2)
    assert snapshot(store) == before


def test_persistence_across_reopen(tmp_path):
    path = tmp_path / "shared.db"
    with PlanMemoryStore(path) as s:
        v2 = s.apply([RED], source="rule")
        c = s.propose([BLOCKED])
        s.set_state("janus", {"m": [0.1, 0.2], "t": 3})
    with PlanMemoryStore(path) as s:
        assert s.active_version == v2
        assert s.entry("block_red").provenance.transitions == (4,)
        assert s.version_info(c.version).status == "candidate"
        assert s.get_state("janus") == {"m": [0.1, 0.2], "t": 3}
        s.deploy(c)
        assert len(s.entries()) == 2
    # WAL mode and only plan_ tables (the file can be shared with experience memory)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert all(n.startswith("plan_") or n == "sqlite_sequence" for n in names)
    db.close()


def test_shares_a_file_with_other_tables(tmp_path):
    path = tmp_path / "memory.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE exp_transitions (id INTEGER PRIMARY KEY, s TEXT)")
    db.execute("INSERT INTO exp_transitions (s) VALUES ('wp_1')")
    db.commit()
    db.close()
    with PlanMemoryStore(path) as s:
        s.apply([RED])
    db = sqlite3.connect(path)
    assert db.execute("SELECT s FROM exp_transitions").fetchall() == [("wp_1",)]
    db.close()


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "edits",
    [
        [],
        [Edit.add("semantic", "bad name!", "x")],
        [Edit.add("opinion", "k", "x")],
        [Edit.add("semantic", "k", "")],
        [Edit.add("semantic", "k", "two\nlines")],
        [Edit.add("semantic", "k", "x" * 601)],
        [Edit("add", "k", "semantic", None)],
        [Edit("rename", "k")],
        [Edit.change("missing", body="x")],
        [Edit.remove("missing", reason="gone")],
        [Edit("remove", "block_red")],  # no reason: never silently
        [RED],  # already exists
        [Edit.change("block_red", body="a"), Edit.remove("block_red", reason="b")],
        [Edit.add("semantic", "k", "x", Provenance(("",)))],
        [Edit.add("semantic", "k", "x", Provenance((), (-1,)))],
        [Edit.add("semantic", "k", "x", meta={"f": object()})],
        ["not an edit"],
    ],
)
def test_bad_edit_sets_change_nothing(store, edits):
    store.apply([RED])
    before = snapshot(store)
    with pytest.raises(ValueError):
        store.propose(edits)
    assert snapshot(store) == before


def test_bad_calls_change_nothing(store, tmp_path):
    store.apply([RED])
    before = snapshot(store)
    for call in (
        lambda: store.rollback(99),
        lambda: store.rollback("2"),
        lambda: store.deploy(99),
        lambda: store.deploy(store.active_version),
        lambda: store.reject(1, reason="x"),
        lambda: store.reject(store.propose([BLOCKED]), reason=""),
        lambda: store.propose([BLOCKED], source=""),
        lambda: store.append([], episode_id="ep"),
        lambda: store.append([PlanEntry("semantic", "k", "x")], episode_id=""),
        lambda: store.append([PlanEntry("semantic", "k", "")], episode_id="ep"),
        lambda: store.append([PlanEntry("semantic", "k", "x")], episode_id="e", trace={"x": {1}}),
        lambda: store.set_state("k", float("nan")),
        lambda: store.versions("active"),
    ):
        with pytest.raises(ValueError):
            call()
    after = snapshot(store)
    # the one valid propose() inside the list adds a candidate, nothing else moved
    assert after[0] == before[0] and after[2] == before[2]
    assert [v for v in after[1] if v["status"] != "candidate"] == before[1]
    with pytest.raises(ValueError):
        PlanMemoryStore(tmp_path / "no" / "such" / "dir.db")


# ---------------------------------------------------------------------------- fast writer / history


def test_fast_writer_appends_with_provenance_and_journal(store):
    store.apply([RED])
    v = store.append(
        [PlanEntry("semantic", "block_red", "Red block seen at wp_4."),
         PlanEntry("procedure", "look_twice", "Look twice before reporting.")],
        episode_id="ep7",
        trace={"bag": "ep7.mcap", "transitions": [11, 12]},
    )
    assert store.active_version == v
    names = [e.name for e in store.entries()]
    assert names == ["block_red", "block_red-2", "look_twice"]  # nothing overwritten
    assert store.entry("block_red").body == "The red block was seen at wp_3."
    added = store.entry("look_twice")
    assert added.provenance.episodes == ("ep7",) and added.source == "fast_writer"
    recs = store.journal()
    assert [r.entry.name for r in recs] == ["block_red-2", "look_twice"]
    assert recs[0].trace["bag"] == "ep7.mcap" and recs[0].version == v
    # journal only: nothing deployed, still visible to the consolidator
    assert store.append([PlanEntry("semantic", "x", "y")], episode_id="ep8", deploy=False) is None
    assert store.active_version == v
    assert store.journal(since_id=recs[-1].record_id)[0].version is None


def test_history_and_archive_explain_every_change(store):
    store.apply([RED, BLOCKED], reason="ep1")
    store.apply([Edit.change("block_red", body="The red block was seen at wp_5.", reason="swap")])
    store.apply([Edit.remove("blocked_wp_2_wp_5", reason="re-opened in ep3")])
    rej = store.propose([Edit.remove("block_red", reason="llm whim")])
    store.reject(rej, reason="lost")
    hist = store.history("block_red")
    assert [h.op for h in hist] == ["add", "edit"]  # rejected candidate is not history
    assert hist[1].previous.body.endswith("wp_3.") and hist[1].reason == "swap"
    arch = {a.entry.body: a for a in store.archived()}
    assert arch["The red block was seen at wp_3."].op == "edit"
    assert arch["The corridor wp_2 - wp_5 is blocked."].reason == "re-opened in ep3"


# ---------------------------------------------------------------------------- pure pieces


def test_apply_edits_is_pure():
    base = [PlanEntry("semantic", "a", "A"), PlanEntry("negative", "b", "B")]
    out = apply_edits(base, [Edit.change("a", body="A2"), Edit.add("procedure", "c", "C")])
    assert [e.body for e in base] == ["A", "B"]
    assert [(e.name, e.body) for e in out] == [("a", "A2"), ("b", "B"), ("c", "C")]


def test_slugify():
    assert slugify("Red Block @ WP 3!") == "red_block_wp_3"
    assert slugify("!!!") == ""
    assert len(slugify("x" * 200)) == 64


def test_rank_entries_query_and_kind_priority():
    es = [
        PlanEntry("semantic", "block_red", "The red block was seen at wp_3.", entry_id=1),
        PlanEntry("semantic", "block_blue", "The blue block was seen at wp_1.", entry_id=2),
        PlanEntry("negative", "blocked_wp_2_wp_5", "Corridor wp_2 - wp_5 is blocked.", entry_id=3),
    ]
    assert rank_entries(es)[0][0].kind == "negative"  # no query: lessons first
    ranked = rank_entries(es, "find the red block")
    assert ranked[0][0].name == "block_red"
    ranked = rank_entries(es, "find the red block", embedder=HashingEmbedder())
    assert ranked[0][0].name == "block_red"
    assert rank_entries([], "x") == []


def test_assemble_prompt_respects_budget():
    es = [PlanEntry("semantic", f"fact_{i}", f"The block {i} is at wp_{i}.") for i in range(20)]
    full = assemble_prompt(es)
    assert full.text.startswith("Plan memory:") and len(full.included) == 20
    assert full.text.splitlines()[1] == format_entry(es[0])
    for budget in (0, 3, 30, 60, 120):
        r = assemble_prompt(es, budget)
        assert r.tokens <= budget
        assert set(r.included) | set(r.dropped) == {e.name for e in es}
        assert list(r.included) == [e.name for e in es if e.name in r.included]
    assert assemble_prompt(es, 0).text == ""
    assert assemble_prompt([], 100).text == ""
    with pytest.raises(ValueError):
        assemble_prompt(es, -1)
    # exact token counter works too
    r = assemble_prompt(es, 50, count_tokens=lambda t: len(t.split()))
    assert len(r.text.split()) <= 50


def test_render_uses_query(store):
    store.apply([RED, BLOCKED, Edit.add("semantic", "block_blue", "The blue block is at wp_1.")])
    r = store.render(budget_tokens=35, query="find the blue block")
    assert r.included[0] == "block_blue" and r.tokens <= 35
    assert memory_text(store.entries()) == store.text()


def test_concurrent_writers_serialise(tmp_path):
    path = tmp_path / "m.db"
    stores = [PlanMemoryStore(path) for _ in range(2)]
    errors: list[Exception] = []

    def writer(s: PlanMemoryStore, k: int) -> None:
        for i in range(10):
            try:
                s.append([PlanEntry("semantic", f"w{k}_{i}", "x")], episode_id=f"e{k}{i}")
            except Exception as exc:  # pragma: no cover - would fail below
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, k)) for k, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(stores[0].entries()) == 20 and len(stores[0].journal()) == 20
    for s in stores:
        s.close()


def test_opening_waits_out_another_process_locking_the_file(tmp_path, monkeypatch):
    """SQLite answers a WAL switch racing another process with 'database is locked' at
    once (seen with the memory node and a second robot's planner opening one file): the
    open retries, and a file that stays locked is still a clear error, not a hang."""
    import glove_ros.core.plan.plan_memory as pm

    real = pm.PlanMemoryStore._open
    calls = []

    def flaky(self, synchronous):
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        return real(self, synchronous)

    monkeypatch.setattr(pm.PlanMemoryStore, "_open", flaky)
    s = PlanMemoryStore(tmp_path / "shared.db")
    assert len(calls) == 3 and s.active_version is not None
    s.close()

    monkeypatch.setattr(pm, "_OPEN_LOCKED_S", 0.3)
    monkeypatch.setattr(pm.PlanMemoryStore, "_open", lambda self, sync: (_ for _ in ()).throw(
        sqlite3.OperationalError("database is locked")))
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        PlanMemoryStore(tmp_path / "shared.db")
    monkeypatch.setattr(pm.PlanMemoryStore, "_open", real)
    with PlanMemoryStore(tmp_path / "shared.db") as again:  # nothing was lost or broken
        assert again.active_version == 1
