"""Tests of glove_ros.core.plan.updater: RuleUpdater and LlmUpdater (scripted and real GGUF)."""

from __future__ import annotations

import pytest

from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmResult, ScriptedLlm
from glove_ros.core.plan.plan_entries import KINDS, Edit, Provenance
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import (
    EpisodeOutcome,
    LlmUpdater,
    LlmUpdaterConfig,
    Observation,
    RuleUpdater,
    RuleUpdaterConfig,
    Traversal,
    blocked_name,
    edit_list_schema,
    summarize_episode,
)


@pytest.fixture
def store(tmp_path):
    s = PlanMemoryStore(tmp_path / "m.db")
    yield s
    s.close()


def snapshot(s: PlanMemoryStore):
    return (s.active_version, s.entries(), [v.version for v in s.versions()])


def run(updater, store, outcome):
    """Propose and deploy (ungated) -- the gate is tested in test_core_plan_janus."""
    cand = updater.propose(store, outcome)
    if cand is not None:
        store.deploy(cand)
    return cand


def ep(eid, goal="red", success=True, obs=(), trav=(), reported=None, why=""):
    return EpisodeOutcome(eid, f"find the {goal} block", goal, success, reported,
                          tuple(obs), tuple(trav), why)


# ---------------------------------------------------------------------------- rule updater


def test_rule_updater_facts_routes_and_provenance(store):
    u = RuleUpdater()
    obs = [Observation("wp_2", (), 11), Observation("wp_3", ("red",), 12)]
    trav = [Traversal("wp_1", "wp_2", False, 13), Traversal("wp_2", "wp_3", False, 14)]
    run(u, store, ep("e1", obs=obs, trav=trav, reported="wp_3"))
    fact = store.entry("block_red")
    assert fact.body == "The red block was seen at wp_3."
    assert fact.provenance == Provenance(("e1",), (12,))
    assert fact.meta["waypoints"] == ["wp_3"]
    route = store.entry("route_wp_1_wp_3")
    assert route.kind == "procedure" and "wp_1 -> wp_2 -> wp_3" in route.body
    assert route.provenance.transitions == (13, 14)
    # a plain confirmation changes nothing -> no candidate
    assert u.propose(store, ep("e2", obs=[Observation("wp_3", ("red",), 20)])) is None


def test_rule_updater_semantic_drift_swap(store):
    u = RuleUpdater()
    run(u, store, ep("e1", obs=[Observation("wp_3", ("red",)), Observation("wp_5", ("blue",))]))
    # the blocks swap places
    swapped = [Observation("wp_3", ("blue",), 30), Observation("wp_5", ("red",))]
    cand = run(u, store, ep("e2", goal="blue", obs=swapped))
    assert cand is not None
    assert store.entry("block_red").body == "The red block was seen at wp_5."
    assert store.entry("block_blue").body == "The blue block was seen at wp_3."
    assert store.entry("block_blue").provenance == Provenance(("e2",), (30,))
    hist = store.history("block_red")
    assert hist[-1].op == "edit" and "e2" in hist[-1].reason


def test_rule_updater_single_miss_is_nuisance(store):
    u = RuleUpdater(RuleUpdaterConfig(miss_threshold=2))
    run(u, store, ep("e1", obs=[Observation("wp_3", ("red",))]))
    run(u, store, ep("e2", obs=[Observation("wp_3", ())]))  # missed once
    assert store.entry("block_red") is not None
    assert store.entry("block_red").meta["misses"] == {"wp_3": 1}
    run(u, store, ep("e3", obs=[Observation("wp_3", ("red",))]))  # seen again: misses reset
    assert store.entry("block_red").meta["misses"] == {}
    run(u, store, ep("e4", obs=[Observation("wp_3", ())]))
    run(u, store, ep("e5", obs=[Observation("wp_3", ())]))  # second miss in a row
    assert store.entry("block_red") is None
    assert "2 misses" in store.history("block_red")[-1].reason
    # another block seen there removes at once
    run(u, store, ep("e6", obs=[Observation("wp_4", ("green",))]))
    run(u, store, ep("e7", obs=[Observation("wp_4", ("yellow",))]))
    assert store.entry("block_green") is None and store.entry("block_yellow") is not None


def test_rule_updater_corridor_blocked_then_reopened(store):
    u = RuleUpdater()
    run(u, store, ep("e1", obs=[Observation("wp_3", ("red",))],
                     trav=[Traversal("wp_1", "wp_2"), Traversal("wp_2", "wp_3")]))
    assert store.entry("route_wp_1_wp_3") is not None
    run(u, store, ep("e2", success=False, trav=[Traversal("wp_2", "wp_1", True, 40)],
                     why="budget exhausted"))
    name = blocked_name("wp_1", "wp_2")
    lesson = store.entry(name)
    assert lesson.kind == "negative" and lesson.provenance.transitions == (40,)
    assert store.entry("route_wp_1_wp_3") is None  # route through the blocked corridor
    failed = store.entry("failed_red")
    assert failed.kind == "negative" and "budget exhausted" in failed.body
    # drift II: the corridor re-opens; trying it again removes the lesson (no deadlock)
    run(u, store, ep("e3", obs=[Observation("wp_3", ("red",))],
                     trav=[Traversal("wp_1", "wp_2")]))
    assert store.entry(name) is None and store.entry("failed_red") is None
    assert "re-opened" in store.history(name)[-1].reason


def test_rule_updater_non_unique_blocks_keeps_sets(store):
    u = RuleUpdater(RuleUpdaterConfig(unique_blocks=False))
    run(u, store, ep("e1", obs=[Observation("wp_3", ("red",))]))
    run(u, store, ep("e2", obs=[Observation("wp_7", ("red",))]))
    assert store.entry("block_red").body == "The red block was seen at wp_3 and wp_7."


def test_rule_updater_bad_input(store):
    before = snapshot(store)
    with pytest.raises(ValueError):
        RuleUpdater().propose(store, EpisodeOutcome("", "task"))
    with pytest.raises(ValueError):
        RuleUpdater().propose(store, ep("e", obs=[Observation("wp_1", "red")]))
    with pytest.raises(ValueError):
        RuleUpdaterConfig(miss_threshold=0).validate()
    assert snapshot(store) == before


def test_summarize_episode():
    text = summarize_episode(ep("e9", success=False, obs=[Observation("wp_2", ())],
                                trav=[Traversal("wp_1", "wp_2", True)], why="blocked"))
    assert "e9" in text and "BLOCKED" in text and "no block" in text and "FAILED" in text


# ---------------------------------------------------------------------------- LLM updater


EPISODE = ep("e5", obs=[Observation("wp_2", ()), Observation("wp_3", ("red",), 7)],
             trav=[Traversal("wp_1", "wp_2", True, 8)], reported="wp_3")


@pytest.mark.parametrize(
    "reply",
    [
        "not json at all {",
        '{"edits": [{"op": "explode", "kind": "semantic", "name": "x", "body": "y"}]}',
        {"edits": [{"op": "add", "kind": "semantic", "name": "x"}]},  # missing body
        {"edits": []},
        {"edits": [{"op": "remove", "kind": "semantic", "name": "nothing_here", "body": "r"}]},
        {"edits": [{"op": "add", "kind": "semantic", "name": "!!!", "body": "y"}]},
        LlmResult(None, "", 0, "timeout after 1 s", finish_reason="timeout"),
    ],
)
def test_llm_updater_garbage_gives_no_candidate(store, reply):
    store.apply([Edit.add("semantic", "block_red", "The red block was seen at wp_3.")])
    before = snapshot(store)
    u = LlmUpdater(ScriptedLlm([reply]))
    assert u.propose(store, EPISODE) is None
    assert u.last.error
    assert snapshot(store) == before


def test_llm_updater_normalises_valid_edits(store):
    store.apply([Edit.add("semantic", "block_red", "The red block was seen at wp_2."),
                 Edit.add("negative", "old_lesson", "Avoid wp_9.")])
    llm = ScriptedLlm([{
        "edits": [
            {"op": "add", "kind": "semantic", "name": "block_red",  # exists -> edit
             "body": "The red block   is at wp_3."},
            {"op": "add", "kind": "negative", "name": "Blocked WP 1-2",
             "body": "Corridor wp_1 to wp_2 is blocked."},
            {"op": "remove", "kind": "negative", "name": "old_lesson", "body": "not relevant"},
        ]
    }])
    u = LlmUpdater(llm, LlmUpdaterConfig(max_edits=3))
    cand = u.propose(store, EPISODE)
    assert cand is not None and store.active_version == cand.base_version  # not deployed
    by = {e.name: e for e in cand.entries}
    assert by["block_red"].body == "The red block is at wp_3."
    assert by["blocked_wp_1-2"].kind == "negative"
    assert by["blocked_wp_1-2"].provenance == Provenance(("e5",), (7, 8))
    assert "old_lesson" not in by
    assert [e.op for e in cand.edits] == ["edit", "add", "remove"]
    # the prompt carried the memory and the episode, and the schema bounded the edits
    msgs, schema, max_tokens = llm.calls[0]
    assert "block_red" in msgs[-1]["content"] and "e5" in msgs[-1]["content"]
    # worked examples before it: a moved block is an edit, a new sighting an add
    shots = [m["content"] for m in msgs[1:-1] if m["role"] == "assistant"]
    assert any('"op": "edit"' in a for a in shots) and any('"op": "add"' in a for a in shots)
    assert schema["properties"]["edits"]["maxItems"] == 3
    assert max_tokens == u.config.max_tokens


def test_llm_updater_drops_duplicates_and_unchanged(store):
    store.apply([Edit.add("semantic", "block_red", "The red block was seen at wp_3.")])
    llm = ScriptedLlm([{"edits": [
        {"op": "edit", "kind": "semantic", "name": "block_red",
         "body": "The red block was seen at wp_3."},
        {"op": "add", "kind": "procedure", "name": "look", "body": "Look twice."},
        {"op": "add", "kind": "procedure", "name": "look", "body": "Look thrice."},
        {"op": "edit", "kind": "semantic", "name": "ghost", "body": "Invented entry."},
        {"op": "add", "kind": "semantic", "name": "copy",
         "body": "The red block was seen at wp_3."},
        {"op": "add", "kind": "semantic", "name": "short_name", "body": "one line"},
    ]}])
    u = LlmUpdater(llm, LlmUpdaterConfig(max_edits=6, max_tokens=1024))
    prop = u.propose_edits(store.entries(), EPISODE)
    assert [e.name for e in prop.edits] == ["look"]
    assert len(prop.dropped) == 5


def test_llm_updater_config_and_schema():
    with pytest.raises(ValueError):
        LlmUpdaterConfig(max_edits=0).validate()
    with pytest.raises(ValueError):
        LlmUpdater(object())
    s = edit_list_schema(2)
    assert s["properties"]["edits"]["items"]["properties"]["kind"]["enum"] == list(KINDS)


@pytest.mark.llm
def test_llm_updater_real_gguf_valid_candidate_or_clean_rejection(store):
    pytest.importorskip("llama_cpp")
    store.apply([Edit.add("semantic", "block_red", "The red block was seen at wp_2.")])
    before = snapshot(store)
    backend = LlamaBackend(LlmConfig(n_ctx=1024, n_threads=1, max_tokens=160, timeout_s=60))
    try:
        u = LlmUpdater(backend, LlmUpdaterConfig(max_edits=2, max_tokens=160, body_max=80))
        cand = u.propose(store, EPISODE)
        assert u.last.llm is not None and u.last.llm.tokens <= 160
        assert snapshot(store)[0] == before[0]  # never deployed by the updater
        if cand is None:
            assert u.last.error  # clean rejection, with a reason
            assert snapshot(store) == before
        else:
            assert store.version_info(cand.version).status == "candidate"
            for e in cand.entries:
                e.validate()
            assert 1 <= len(cand.edits) <= 2
    finally:
        backend.close()


@pytest.mark.parametrize("field", ["task", "goal", "reported_waypoint", "episode_id",
                                   "failure_reason"])
def test_oversized_or_nul_strings_are_refused(field):
    from glove_ros.core.plan.updater import MAX_TASK_CHARS, EpisodeOutcome

    base = {"episode_id": "e1", "task": "find the red block", "goal": "red"}
    big = dict(base, **{field: "r" * (1 << 20)})
    with pytest.raises(ValueError, match=f"{field} is 1048576 characters long; the limit is"):
        EpisodeOutcome(**big).validate()
    nul = dict(base, **{field: "re\x00d"})
    with pytest.raises(ValueError, match=f"{field} contains a NUL"):
        EpisodeOutcome(**nul).validate()
    EpisodeOutcome(**dict(base, task="t" * MAX_TASK_CHARS)).validate()
