"""GLOVE verifier: detection, nuisance rejection, both realignment modes, deadlock breaking."""

from __future__ import annotations

import math
import random

import pytest

from glove_ros.core.memory.experience import EventKind, Source, Status, Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.verify.config import VerifierConfig, hoeffding_bound, probe_budget
from glove_ros.core.verify.events import Realignment
from glove_ros.core.verify.verifier import GloveVerifier


def T(state="wp3", action="look_at", outcome="colors=red", **kw) -> Transition:
    return Transition(state_key=state, action=action, outcome=outcome, **kw)


@pytest.fixture
def store(tmp_path):
    s = ExperienceStore(tmp_path / "memory.db")
    yield s
    s.close()


def verifier(store, **cfg) -> GloveVerifier:
    """Tests written against the paper's rule (``p_th``) run it explicitly; the calibrated
    default detector has its own tests in test_core_verify_detection.py."""
    cfg.setdefault("detector", "p_th")
    cfg.setdefault("symmetric_actions", ())
    return GloveVerifier(store, VerifierConfig(**cfg))


def learn(v: GloveVerifier, t: Transition, n: int) -> list[int]:
    ids = []
    for _ in range(n):
        r = v.observe(t)
        assert r.alert is None
        ids.append(r.entry_id)
    return ids


# ----------------------------------------------------------------------------- formulas


def test_hoeffding_bound_values():
    assert hoeffding_bound(100, 0.05) == pytest.approx(math.sqrt(math.log(40) / 200))
    assert hoeffding_bound(100, 0.05) == pytest.approx(0.135810, abs=1e-6)
    assert hoeffding_bound(1, 0.1) == pytest.approx(math.sqrt(math.log(20) / 2))
    assert hoeffding_bound(0, 0.05) == math.inf
    assert hoeffding_bound(400, 0.05) == pytest.approx(hoeffding_bound(100, 0.05) / 2)
    for n, d in ((-1, 0.05), (10, 0.0), (10, 1.0), (1.5, 0.05)):
        with pytest.raises(ValueError):
            hoeffding_bound(n, d)


def test_probe_budget_alpha_values():
    assert probe_budget(1, 0.1, 0.05) == 1  # deterministic: one re-test suffices
    assert probe_budget(1, 0.01, 1e-9) == 1
    # 2 (2 ln 2 + ln 20) / 0.01 = 876.405...
    assert probe_budget(2, 0.1, 0.05) == 877
    # 2 (4 ln 2) / 0.25 = 22.18
    assert probe_budget(2, 0.5, 0.25) == 23
    # 2 (3 ln 2 + ln 10) / 0.04 = 219.10
    assert probe_budget(3, 0.2, 0.1) == 220
    assert probe_budget(3, 0.2, 0.1) > probe_budget(2, 0.2, 0.1)
    assert probe_budget(2, 0.2, 0.01) > probe_budget(2, 0.2, 0.1)
    for args in ((0, 0.1, 0.05), (2, 0.0, 0.05), (2, 0.1, 1.0), (2, 1.5, 0.05)):
        with pytest.raises(ValueError):
            probe_budget(*args)
    assert VerifierConfig(k_modes=2, epsilon=0.1, delta=0.05).alpha == 877
    assert VerifierConfig(k_modes=2, epsilon=0.1, probe_epsilon=0.5, delta=0.25).alpha == 23


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"mode": "lazy"}, "mode"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 1.0}, "epsilon"),
        ({"p_th": 0}, "p_th"),
        ({"p_th": 2.5}, "p_th"),
        ({"delta": 1.0}, "delta"),
        ({"k_modes": 0}, "k_modes"),
        ({"rule": "nearby"}, "rule"),
        ({"radius": -0.1}, "radius"),
        ({"never_probe": ["grasp"]}, "never_probe"),
        ({"max_probe_budget": -1}, "max_probe_budget"),
        ({"evidence_threshold": -2}, "evidence_threshold"),
        ({"negative_reward_at_most": float("nan")}, "negative_reward_at_most"),
        ({"stale_negative_after": -1}, "stale_negative_after"),
    ],
)
def test_config_validation_names_the_field(changes, needle):
    with pytest.raises(ValueError, match=needle):
        VerifierConfig(**changes).validate()


def test_config_from_dict_round_trip():
    cfg = VerifierConfig.from_dict(
        {"mode": "sync", "p_th": 2, "never_probe": ["grasp", "push"], "rule": "pose",
         "radius": 1, "negative_outcomes": "hole, blocked"}
    )
    assert cfg.never_probe == ("grasp", "push") and cfg.radius == 1.0
    assert cfg.negative_outcomes == ("hole", "blocked")
    assert VerifierConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown verifier config key"):
        VerifierConfig.from_dict({"p_threshold": 3})
    with pytest.raises(ValueError, match="p_th"):
        VerifierConfig.from_dict({"p_th": 0})


# ----------------------------------------------------------------------------- detection


@pytest.mark.parametrize("p_th", [1, 2, 3, 5])
def test_deterministic_drift_fires_exactly_at_p_th(store, p_th):
    v = verifier(store, p_th=p_th)
    learn(v, T(outcome="colors=red"), 4)
    for k in range(1, p_th + 1):
        r = v.observe(T(outcome="colors=blue"))
        assert r.surprise and r.consecutive_surprises == k
        assert r.observed_probability == 0.0 and r.history_size == 4
        if k < p_th:
            assert r.alert is None and r.decision is Realignment.NONE
    alert = r.alert
    assert alert is not None
    assert alert.consecutive_surprises == p_th
    assert alert.expected == (("colors=red", 1.0),)
    assert alert.observed_outcome == "colors=blue" and alert.observed_probability == 0.0
    assert alert.history_size == 4
    assert alert.hoeffding_bound == pytest.approx(hoeffding_bound(4, 0.05))
    assert set(alert.suppressed_ids) == {1, 2, 3, 4}
    assert v.stats()["alerts"] == 1


def test_surprises_are_not_diluted_by_the_new_outcomes_themselves(store):
    """With only two old samples, three new ones must still read as three surprises."""
    v = verifier(store, p_th=3, epsilon=0.3)
    learn(v, T(outcome="red"), 2)
    results = [v.observe(T(outcome="blue")) for _ in range(3)]
    assert [r.surprise for r in results] == [True, True, True]
    assert results[-1].alert is not None


def test_single_missed_detection_is_not_drift(store):
    v = verifier(store, p_th=2)
    learn(v, T(outcome="colors=red"), 5)
    first = v.observe(T(outcome="colors="))  # perception missed the block once
    assert first.surprise and first.consecutive_surprises == 1 and first.alert is None
    for _ in range(4):  # isolated misses, each followed by a normal look
        assert v.observe(T(outcome="colors=red")).consecutive_surprises == 0
        miss = v.observe(T(outcome="colors="))
        assert miss.alert is None and miss.consecutive_surprises <= 1
        ok = v.observe(T(outcome="colors=red"))
        assert not ok.surprise and ok.consecutive_surprises == 0
    assert v.stats()["alerts"] == 0 and store.counts()["suppressed"] == 0


def test_pose_jitter_inside_the_radius_is_not_drift(store):
    v = verifier(store, rule="pose", radius=0.3, p_th=2)
    rng = random.Random(5)
    for _ in range(5):
        v.observe(T("cell_4_2", pose=(4.0, 2.0, 0.0)))
    for _ in range(50):  # a block shifted a few centimetres, a bumpy wall: same outcome
        jx, jy = rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2)
        r = v.observe(T(f"cell_{rng.randint(0, 9)}", pose=(4.0 + jx, 2.0 + jy, rng.random())))
        assert not r.surprise and r.history_size >= 5
    far = v.observe(T("cell_4_2", outcome="colors=blue", pose=(6.0, 2.0, 0.0)))
    assert far.history_size == 0 and not far.surprise  # a new place, not a contradiction
    assert v.stats()["alerts"] == 0


def test_stochastic_outcomes_within_epsilon_do_not_fire(store):
    v = verifier(store, p_th=2, epsilon=0.1)
    rng = random.Random(1)
    for _ in range(400):
        v.observe(T(outcome=rng.choice(["heads", "tails"])))
    assert v.stats()["alerts"] == 0


def test_novel_pairs_are_not_surprising(store):
    v = verifier(store, p_th=1)
    r = v.observe(T("wp_new", outcome="anything"))
    assert r.observed_probability is None and not r.surprise


def test_invalid_transition_is_rejected_with_nothing_stored(store):
    v = verifier(store)
    with pytest.raises(ValueError, match="outcome"):
        v.observe(T(outcome=""))
    with pytest.raises(ValueError, match="reward"):
        v.observe(T(reward=float("inf")))
    assert store.max_id() == 0 and v.stats()["observations"] == 0


def test_surprise_counter_survives_a_restart(tmp_path):
    path = tmp_path / "m.db"
    with ExperienceStore(path) as s:
        v = verifier(s, p_th=3)
        learn(v, T(outcome="red"), 3)
        v.observe(T(outcome="blue"))
        v.observe(T(outcome="blue"))
    with ExperienceStore(path) as s:
        r = verifier(s, p_th=3).observe(T(outcome="blue"))
        assert r.consecutive_surprises == 3 and r.alert is not None


# ----------------------------------------------------------------------------- async mode


def test_async_suppresses_at_once_hides_from_query_and_keeps_history(store):
    v = verifier(store, mode="async", p_th=2, evidence_threshold=3)
    old = learn(v, T(outcome="red"), 4)
    v.observe(T(outcome="blue"))
    r = v.observe(T(outcome="blue"))
    assert r.decision is Realignment.SUPPRESS and r.probe_requests == ()
    assert r.alert.mode == "async" and r.alert.probes_requested == 0
    assert set(r.suppressed_ids) == set(old)
    entries, total = store.query(state_key="wp3", action="look_at")
    assert {e.transition.outcome for e in entries} == {"blue"} and total == 2
    for eid in old:
        e = store.get(eid)
        assert e.status is Status.SUPPRESSED
        kinds = [h.kind for h in store.history(eid)]
        assert kinds == [EventKind.RECORDED, EventKind.SUPPRESSED, EventKind.QUEUED]
        ex = store.explain(eid)
        assert "SUPPRESSED" in ex.text and "dissonance" in ex.text
    (item,) = store.pending()
    assert item.pair == ("wp3", "look_at", "") and set(item.suppressed_ids) == set(old)
    assert v.stats()["probes"] == 0 and v.stats()["probe_requests"] == 0


def test_async_replaces_after_enough_natural_evidence(store):
    v = verifier(store, mode="async", p_th=2, evidence_threshold=3)
    old = learn(v, T(outcome="red"), 4)
    streak = [v.observe(T(outcome="blue")).entry_id for _ in range(2)]
    fresh = []
    for k in (1, 2):
        r = v.observe(T(outcome="blue"))
        fresh.append(r.entry_id)
        assert r.decision is Realignment.EVIDENCE and r.pending_evidence == k
        assert all(store.get(i).status is Status.SUPPRESSED for i in old)
    r = v.observe(T(outcome="blue"))
    fresh.append(r.entry_id)
    assert r.decision is Realignment.REPLACE
    assert set(r.replaced_ids) == set(old) and list(r.new_ids) == fresh
    for eid in old:
        e = store.get(eid)
        assert e.status is Status.REPLACED and e.replaced_by == fresh[0]
        assert store.history(eid)[-1].evidence_count == 3
    assert store.pending() == []
    assert v.distribution("wp3", "look_at") == {"blue": 1.0}
    assert all(store.get(i).trusted for i in streak + fresh)
    assert "REPLACED" in store.explain(old[0]).text
    assert v.stats()["probes"] == 0


def test_async_default_evidence_is_alpha(store):
    v = verifier(store, mode="async", p_th=2)  # K = 1 -> alpha = 1
    learn(v, T(outcome="red"), 3)
    v.observe(T(outcome="blue"))
    v.observe(T(outcome="blue"))
    r = v.observe(T(outcome="blue"))
    assert r.decision is Realignment.REPLACE and store.counts()["replaced"] == 3


def test_pending_survives_restart_and_completes(tmp_path):
    path = tmp_path / "m.db"
    with ExperienceStore(path) as s:
        v = verifier(s, p_th=2, evidence_threshold=2)
        learn(v, T(outcome="red"), 3)
        v.observe(T(outcome="blue"))
        v.observe(T(outcome="blue"))
        v.observe(T(outcome="blue"))
    with ExperienceStore(path) as s:
        v = verifier(s, p_th=2, evidence_threshold=2)
        assert s.pending()[0].evidence_count == 1
        assert v.observe(T(outcome="blue")).decision is Realignment.REPLACE
        assert s.counts()["replaced"] == 3 and s.pending() == []


# ----------------------------------------------------------------------------- sync mode


def test_sync_requests_alpha_probes_and_replaces_by_the_multiset(store):
    v = verifier(store, mode="sync", p_th=2, k_modes=2, probe_epsilon=0.5, delta=0.25,
                 max_probe_budget=100)
    old = learn(v, T(outcome="red", pose=(1.0, 1.0, 0.0)), 4)
    first = v.observe(T(outcome="blue", pose=(1.0, 1.0, 0.0)))
    second = v.observe(T(outcome="blue", pose=(1.0, 1.0, 0.0)))
    streak = [first.entry_id, second.entry_id]
    assert first.alert is None and second.decision is Realignment.PROBE
    req = second.probe_request
    assert v.outstanding_probes() == [req]
    assert req.alpha == 23 and req.reason == "dissonance" and req.pair == ("wp3", "look_at", "")
    assert second.alert.probes_requested == 23 and v.probe_budget_left == 77
    with pytest.raises(ValueError, match="alpha=23"):
        v.apply_probes(req, ["blue"] * 22)
    assert store.counts()["replaced"] == 0  # nothing changed
    outcomes = ["blue"] * 15 + ["green"] * 8
    new_ids = v.apply_probes(req, outcomes)
    assert len(new_ids) == 23
    probes = store.get_many(new_ids)
    assert all(e.transition.source is Source.PROBED and e.trusted for e in probes)
    assert all(e.transition.pose == (1.0, 1.0, 0.0) for e in probes)  # same precondition
    dist = v.distribution("wp3", "look_at")
    assert dist == pytest.approx({"blue": 15 / 23, "green": 8 / 23})
    for eid in old + streak:
        assert store.get(eid).status is Status.REPLACED
    assert store.pending() == []
    assert v.stats()["probes"] == 23 and v.probe_budget_left == 77
    with pytest.raises(ValueError, match="unknown probe request"):
        v.apply_probes(req, outcomes)


def test_sync_deterministic_probe_is_one_sample(store):
    v = verifier(store, mode="sync", p_th=2)
    learn(v, T(outcome="red"), 3)
    v.observe(T(outcome="blue"))
    r = v.observe(T(outcome="blue"))
    assert r.decision is Realignment.PROBE and r.alert.mode == "sync"
    assert r.probe_request.alpha == 1 and r.alert.probes_requested == 1
    # suppressed at once, even before the probe runs
    assert {e.transition.outcome for e in store.query("wp3", "look_at")[0]} == {"blue"}
    new = v.apply_probes(r.probe_request, ["blue"])
    assert store.outcome_counts(T()) == {"blue": 1}
    assert store.get(new[0]).transition.source is Source.PROBED


def test_never_probe_actions_fall_back_to_async(store):
    v = verifier(store, mode="sync", p_th=2, never_probe=("grasp",))
    learn(v, T("wp1", "grasp", "holding"), 3)
    v.observe(T("wp1", "grasp", "slipped"))
    r = v.observe(T("wp1", "grasp", "slipped"))
    assert r.alert is not None and r.probe_requests == ()
    assert r.decision is Realignment.SUPPRESS and r.alert.mode == "async"
    assert "never probed" in r.alert.reason
    assert store.pending()[0].pair == ("wp1", "grasp", "")
    assert v.stats()["probe_requests"] == 0 and v.outstanding_probes() == []


def test_exhausted_budget_falls_back_to_async_and_cancel_refunds(store):
    v = verifier(store, mode="sync", p_th=1, max_probe_budget=1)
    learn(v, T("a"), 2)
    learn(v, T("b"), 2)
    first = v.observe(T("a", outcome="blue"))
    assert first.decision is Realignment.PROBE and v.probe_budget_left == 0
    second = v.observe(T("b", outcome="blue"))
    assert second.decision is Realignment.SUPPRESS and "budget" in second.alert.reason
    v.cancel_probe(first.probe_request)
    assert v.probe_budget_left == 1
    with pytest.raises(ValueError):
        v.apply_probes(first.probe_request, ["blue"])
    # the cancelled pair is still pending and resolves from a natural visit
    assert {p.state_key for p in store.pending()} == {"a", "b"}
    assert v.observe(T("a", outcome="blue")).decision is Realignment.REPLACE


def test_verification_cost_is_zero_in_steady_state(store):
    v = verifier(store, mode="sync", p_th=2)
    v.phase = "source"
    for s in ("wp1", "wp2", "wp3"):
        learn(v, T(s, outcome=f"{s}-red"), 5)
    v.phase = "drift"
    v.observe(T("wp2", outcome="wp2-blue"))
    r = v.observe(T("wp2", outcome="wp2-blue"))
    v.apply_probes(r.probe_request, ["wp2-blue"])
    v.phase = "steady"
    rng = random.Random(0)
    for _ in range(200):
        s = rng.choice(["wp1", "wp2", "wp3"])
        out = "wp2-blue" if s == "wp2" else f"{s}-red"
        assert v.observe(T(s, outcome=out)).decision is Realignment.NONE
    stats = v.stats()["phases"]
    assert stats["source"]["probes"] == 0 and stats["source"]["alerts"] == 0
    assert stats["drift"]["probes"] == 1 and stats["drift"]["alerts"] == 1
    assert stats["steady"] == {**stats["steady"], "probes": 0, "alerts": 0, "suppressions": 0,
                               "replacements": 0, "probe_requests": 0, "surprises": 0}
    assert stats["steady"]["observations"] == 200


# ----------------------------------------------------------------------------- deadlock


def _frozenlake_drift_one(v: GloveVerifier) -> None:
    """s5 --down--> ice, then drift I turns it into a hole; the agent then avoids it."""
    learn(v, T("s5", "down", "ice"), 3)
    v.observe(T("s5", "down", "hole"))
    r = v.observe(T("s5", "down", "hole"))
    assert r.alert is not None


def _work_elsewhere(v: GloveVerifier, n: int) -> None:
    for i in range(n):
        assert v.observe(T(f"s{i % 4}", "right", "ice")).alert is None


def test_fresh_negative_is_not_doubted_and_stale_one_is(store):
    v = verifier(store, mode="async", p_th=2, stale_negative_after=20)
    _frozenlake_drift_one(v)
    assert v.stale_negative_candidates() == []
    assert v.stale_negative_candidates(stuck=True) == []  # just confirmed twice
    _work_elsewhere(v, 25)
    stale = v.stale_negative_candidates(["s5"], stuck=True)
    assert {e.transition.outcome for e in stale} == {"hole"} and len(stale) == 2
    assert v.stale_negative_candidates(["s1"], stuck=True) == []


def test_deadlock_broken_in_async_mode_by_a_natural_retry(store):
    v = verifier(store, mode="async", p_th=2, stale_negative_after=20)
    _frozenlake_drift_one(v)
    _work_elsewhere(v, 25)
    # drift II re-opens s5/down; the planner avoids holes, so it is stuck
    res = v.recheck_negatives(["s5"], stuck=True)
    assert res.pairs == (("s5", "down", ""),) and res.probe_requests == ()
    assert store.query("s5", "down")[0] == []  # the planner may now try the action
    assert v.distribution("s5", "down") is None
    r = v.observe(T("s5", "down", "ice"))  # the natural retry shows it open again
    assert r.decision is Realignment.REPLACE
    assert v.distribution("s5", "down") == {"ice": 1.0}
    for e in res.candidates:
        assert store.get(e.id).status is Status.REPLACED
        assert any(h.kind is EventKind.SUPPRESSED and "stale negative" in h.reason
                   for h in store.history(e.id))
    assert v.stale_negative_candidates(stuck=True) == []
    assert v.stats()["rechecks"] == 1


def test_deadlock_broken_in_sync_mode_by_a_probe(store):
    v = verifier(store, mode="sync", p_th=2, stale_negative_after=20)
    _frozenlake_drift_one(v)
    (req,) = v.outstanding_probes()
    v.apply_probes(req, ["hole"])  # drift I verified: it really is a hole now
    _work_elsewhere(v, 25)
    res = v.recheck_negatives(["s5"], stuck=True)
    (probe,) = res.probe_requests
    assert probe.reason == "stale_negative" and probe.pair == ("s5", "down", "")
    v.apply_probes(probe, ["ice"])
    assert v.distribution("s5", "down") == {"ice": 1.0}
    assert v.stats()["probes"] == 2


def test_recheck_that_reconfirms_is_not_repeated(store):
    v = verifier(store, mode="async", p_th=2, stale_negative_after=20)
    _frozenlake_drift_one(v)
    _work_elsewhere(v, 25)
    v.recheck_negatives(["s5"], stuck=True)
    v.observe(T("s5", "down", "hole"))  # still a hole
    assert v.distribution("s5", "down") == {"hole": 1.0}
    assert v.stale_negative_candidates(stuck=True) == []
    assert v.recheck_negatives(stuck=True).pairs == ()


def test_dissonance_elsewhere_makes_older_negatives_suspect(store):
    v = verifier(store, mode="async", p_th=2)
    learn(v, T("c1", "navigate_to", "blocked", action_arg="c2"), 2)
    learn(v, T("c3", "navigate_to", "reached", action_arg="c4"), 2)
    learn(v, T("c5", "navigate_to", "reached", action_arg="c6"), 1)
    learn(v, T("c5", "navigate_to", "blocked", action_arg="c6"), 1)  # mixed: not deadlocked
    assert v.stale_negative_candidates() == []  # no sign the world changed
    learn(v, T("wp3", outcome="red"), 3)
    v.observe(T("wp3", outcome="blue"))
    assert v.observe(T("wp3", outcome="blue")).alert is not None  # blocks swapped
    stale = v.stale_negative_candidates()
    assert {(e.transition.state_key, e.transition.outcome) for e in stale} == {("c1", "blocked")}
    v.recheck_negatives()
    v.observe(T("c1", "navigate_to", "blocked", action_arg="c2"))  # re-confirmed
    assert v.stale_negative_candidates() == []


def test_recheck_on_dissonance_and_never_probe(store):
    v = verifier(store, mode="sync", p_th=2, recheck_on_dissonance=True,
                 never_probe=("jump",))
    learn(v, T("c1", "navigate_to", "blocked", action_arg="c2"), 1)
    learn(v, T("ledge", "jump", "fell"), 1)
    learn(v, T("wp3", outcome="red"), 2)
    v.observe(T("wp3", outcome="blue"))
    r = v.observe(T("wp3", outcome="blue"))
    assert r.recheck is not None and r.recheck.pairs == (("c1", "navigate_to", "c2"),)
    assert [p.reason for p in r.probe_requests] == ["dissonance", "stale_negative"]
    assert store.query("ledge", "jump")[1] == 1  # never_probe: left alone


def test_reward_based_negativity(store):
    v = GloveVerifier(store, VerifierConfig(negative_reward_at_most=0.0, p_th=2, detector="p_th",
                                            stale_negative_after=0))
    learn(v, T("s7", "left", "done", reward=0.0), 1)
    learn(v, T("s8", "left", "done", reward=1.0), 1)
    stale = v.stale_negative_candidates(stuck=True)
    assert [e.transition.state_key for e in stale] == ["s7"]
    custom = GloveVerifier(store, VerifierConfig(stale_negative_after=0),
                           is_negative=lambda outcome, reward: outcome == "done")
    assert {e.transition.state_key for e in custom.stale_negative_candidates(stuck=True)} == {
        "s7", "s8"}


# ----------------------------------------------------------------------------- atomicity


def test_a_failure_mid_observe_rolls_everything_back(store, monkeypatch):
    v = verifier(store, mode="sync", p_th=2)
    learn(v, T(outcome="red"), 3)
    v.observe(T(outcome="blue"))
    before = (store.counts(), store.state_items(), v.stats())

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "add_pending", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        v.observe(T(outcome="blue"))
    assert (store.counts(), store.state_items(), v.stats()) == before
    assert v.outstanding_probes() == [] and v.probe_budget_left == 30
    monkeypatch.undo()
    r = v.observe(T(outcome="blue"))  # the same observation again: now it goes through
    assert r.consecutive_surprises == 2 and r.decision is Realignment.PROBE


def test_probe_outcomes_must_match_the_request(store):
    v = verifier(store, mode="sync", p_th=1)
    learn(v, T(outcome="red"), 2)
    req = v.observe(T(outcome="blue")).probe_request
    with pytest.raises(ValueError, match="request is for"):
        v.apply_probes(req, [T("elsewhere", outcome="blue")])
    with pytest.raises(ValueError, match="probe outcome 0"):
        v.apply_probes(req, [""])
    new = v.apply_probes(req, [T(outcome="blue", reward=2.0)])
    assert store.get(new[0]).transition.reward == 2.0


def test_pose_rule_drift_suppresses_the_whole_neighbourhood(store):
    v = verifier(store, mode="async", p_th=2, rule="pose", radius=0.5, evidence_threshold=5)
    a = learn(v, T("wp3", outcome="red", pose=(2.0, 2.0, 0.0)), 2)
    b = learn(v, T("wp3_b", outcome="red", pose=(2.3, 2.0, 0.0)), 2)  # same spot, other label
    far = learn(v, T("wp9", outcome="red", pose=(9.0, 9.0, 0.0)), 2)
    v.observe(T("wp3", outcome="blue", pose=(2.1, 2.0, 0.0)))
    r = v.observe(T("wp3", outcome="blue", pose=(2.05, 1.95, 0.0)))
    assert r.alert is not None and set(r.alert.suppressed_ids) == set(a + b)
    assert all(store.get(i).trusted for i in far)
    assert v.distribution("wp3", "look_at", pose=(2.0, 2.0, 0.0)) == {"blue": 1.0}


def test_detour_rechecks_only_places_that_changed_and_stuck_rechecks_them_first(store):
    """With ``pairs`` (the detour hook) only a negative at a place whose memory an alarm
    overturned is re-tested; stuck, those first, the others once they are re-confirmed or
    when none is suspect; the ablation re-tests all."""
    v = verifier(store, mode="async", p_th=1)
    learn(v, T("a", "go", "blocked"), 3)  # blocked since the start
    learn(v, T("b", "go", "reached"), 3)
    assert v.observe(T("b", "go", "blocked")).alert is not None  # b changed: volatile
    learn(v, T("c", "go", "reached"), 3)
    assert v.observe(T("c", "go", "blocked")).alert is not None  # newer world mark
    v.observe(T("c", "go", "blocked"))
    res = v.recheck_negatives(pairs=[("a", "go"), ("b", "go")])
    assert [p[0] for p in res.pairs] == ["b"]
    assert v.distribution("a", "go") == {"blocked": 1.0}  # kept
    res = v.recheck_negatives(stuck=True, pairs=[("a", "go")])
    assert [p[0] for p in res.pairs] == ["a"]  # no place that changed is in the way


def test_outside_evidence_of_change_makes_the_latest_dissonance_suspect(store):
    """A failure that was itself the latest dissonance counts as re-confirmed since it, so
    a door that closed and then silently re-opened would block the route for good. A change
    seen elsewhere afterwards (``note_world_change``, e.g. a place seen as another kind) is
    evidence the world moved on: the door is re-tested, once; a wall that never changed is
    not; nothing is deleted and a mark older than the current one changes nothing."""
    v = verifier(store, mode="async", p_th=1)
    learn(v, T("w", "go", "blocked"), 2)  # a wall, never changed
    learn(v, T("d", "go", "reached"), 3)
    assert v.observe(T("d", "go", "blocked")).alert is not None  # the door closed
    door = v.observe(T("d", "go", "blocked")).entry_id
    assert not v.recheck_negatives(pairs=[("d", "go"), ("w", "go")]).pairs  # fresh
    elsewhere = v.observe(T("e", "look", "red")).entry_id
    v.note_world_change(door - 1, "older than the current mark")
    assert not v.recheck_negatives(pairs=[("d", "go")]).pairs
    v.note_world_change(elsewhere, "place e seen as another kind")
    res = v.recheck_negatives(pairs=[("d", "go"), ("w", "go")])
    assert [p[0] for p in res.pairs] == ["d"]  # the wall never changed: kept
    assert v.distribution("d", "go") is None  # suppressed until re-verified
    assert v.distribution("w", "go") == {"blocked": 1.0}
    assert store.get(door) is not None  # nothing deleted
    v.observe(T("d", "go", "blocked"))  # re-tested: still closed, re-confirmed
    assert v.distribution("d", "go") == {"blocked": 1.0}
    assert not v.recheck_negatives(pairs=[("d", "go")]).pairs  # bounded: once per change
    assert v.stats()["world_changes"] == 1
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="entry_id"):
            v.note_world_change(bad)


def test_a_pair_that_saw_a_place_change_is_retested_first_after_the_next_change(store):
    """A first contact with a place that changed (a new pair falls into a tile that was
    ice before) raises no alarm and so marks no place as changed. Noted with its pair, it
    joins the places that changed before: when the world changes again and it blocks the
    planner's route, the detour re-tests it. A first contact noted without a pair is left
    alone, as before."""
    v = verifier(store, mode="async", p_th=1)
    other = v.observe(T("m", "go", "blocked")).entry_id  # first contact, no pair noted
    v.note_world_change(other, "place seen as another kind")
    fall = v.observe(T("n", "go", "blocked")).entry_id  # new pair: no history, no alarm
    v.note_world_change(fall, "place seen as another kind", ("n", "go", ""))
    # n is fresh; m is older than the change but never changed itself: both kept
    assert not v.recheck_negatives(pairs=[("n", "go"), ("m", "go")]).pairs
    later = v.observe(T("e", "look", "red")).entry_id
    v.note_world_change(later, "another place changed")
    res = v.recheck_negatives(pairs=[("n", "go"), ("m", "go")])
    assert [p[0] for p in res.pairs] == ["n"]
    assert v.distribution("m", "go") == {"blocked": 1.0}
    with pytest.raises(ValueError, match="pair"):
        v.note_world_change(later + 1, "", ("n", "go"))


def test_a_pair_noted_as_changed_before_is_retested_first_and_nothing_else_moves(store):
    """``note_changed_before``: outside evidence that a pair's remembered outcome lies at a
    place that changed before (an adapter saw the place change through another pair). It
    marks the pair only: no mark moves, nothing is suppressed; after the next change the
    detour re-tests it, and a pair not noted stays kept."""
    v = verifier(store, mode="async", p_th=1)
    v.observe(T("n", "go", "blocked"))
    v.observe(T("m", "go", "blocked"))
    later = v.observe(T("e", "look", "red")).entry_id
    v.note_world_change(later, "another place changed")
    assert not v.recheck_negatives(pairs=[("n", "go"), ("m", "go")]).pairs
    v.note_changed_before([("n", "go", "")])
    assert v.distribution("n", "go") == {"blocked": 1.0}  # nothing suppressed by the note
    assert v.stats()["world_changes"] == 1  # no mark moved
    res = v.recheck_negatives(pairs=[("n", "go"), ("m", "go")])
    assert [p[0] for p in res.pairs] == ["n"]
    assert v.distribution("m", "go") == {"blocked": 1.0}
    with pytest.raises(ValueError, match="pair"):
        v.note_changed_before([("n", "go")])


def test_a_detour_with_no_route_left_retests_suspects_at_places_never_seen_to_change(store):
    """``no_route``: the named pairs block every route the planner knows, so a re-test is the
    only way on. Suspects at places that changed before still go first; when there are
    none, the others (not re-confirmed since the change) are re-tested, as for a stuck
    planner. A memory re-confirmed since the change stays kept, and nothing is deleted."""
    v = verifier(store, mode="async", p_th=1)
    v.observe(T("n", "go", "blocked"))  # one remembered failure, never seen to change
    later = v.observe(T("e", "look", "red")).entry_id
    v.note_world_change(later, "another place changed")
    assert not v.recheck_negatives(pairs=[("n", "go")]).pairs  # a detour keeps it
    assert v.distribution("n", "go") == {"blocked": 1.0}
    res = v.recheck_negatives(pairs=[("n", "go")], no_route=True)
    assert [p[0] for p in res.pairs] == ["n"]
    assert v.distribution("n", "go") is None  # suppressed until re-verified
    assert store.get(1) is not None  # nothing deleted
    v.observe(T("n", "go", "blocked"))  # re-tested: still blocked, re-confirmed
    assert not v.recheck_negatives(pairs=[("n", "go")], no_route=True).pairs
    assert v.distribution("n", "go") == {"blocked": 1.0}


def test_stuck_rechecks_places_that_changed_before_the_others(store):
    v = verifier(store, mode="async", p_th=1)
    learn(v, T("a", "go", "blocked"), 3)  # a wall that never moved
    learn(v, T("b", "go", "reached"), 3)
    assert v.observe(T("b", "go", "blocked")).alert is not None  # a door that closed
    learn(v, T("c", "go", "reached"), 3)
    assert v.observe(T("c", "go", "blocked")).alert is not None  # newer world mark
    res = v.recheck_negatives(stuck=True)
    assert [p[0] for p in res.pairs] == ["b"]
    assert v.distribution("a", "go") == {"blocked": 1.0}  # not re-tested yet
    v.observe(T("b", "go", "blocked"))  # the door is still closed: re-confirmed
    assert v.distribution("b", "go") == {"blocked": 1.0}
    res = v.recheck_negatives(stuck=True)
    assert [p[0] for p in res.pairs] == ["a"]  # only now the wall
    assert v.distribution("a", "go") is None  # suppressed until re-verified
    assert len(v.stale_negative_candidates(stuck=True)) == 0
    assert all(store.get(i) is not None for i in range(1, 4))  # nothing deleted


def test_detour_recheck_ablation_retests_every_stale_negative(store):
    v = verifier(store, mode="async", p_th=1, recheck_volatile_first=False)
    learn(v, T("a", "go", "blocked"), 3)
    learn(v, T("c", "go", "reached"), 3)
    assert v.observe(T("c", "go", "blocked")).alert is not None
    res = v.recheck_negatives(pairs=[("a", "go")])
    assert [p[0] for p in res.pairs] == ["a"]
    with pytest.raises(ValueError, match="recheck_volatile_first"):
        VerifierConfig(recheck_volatile_first="yes").validate()


def test_detour_rechecks_a_named_place_remembered_both_ways(store):
    """A route remembered once open and once failed, with no alarm (one earlier sample is
    too little history): the planner that avoids it names it as blocking its detour, and it
    is re-tested although no alarm marked it volatile (a slippery FrozenLake world kept such
    a re-opened tile believed a hole for a whole phase); a wall remembered only as failed
    is still kept, and without the planner naming it an even split is not suspect."""
    v = verifier(store, mode="async")  # the calibrated default detector
    learn(v, T("a", "go", "blocked"), 3)  # a wall that never moved
    learn(v, T("m", "go", "reached"), 1)
    assert v.observe(T("m", "go", "blocked")).alert is None  # too little history
    learn(v, T("c", "go", "reached"), 5)
    alerts = [v.observe(T("c", "go", "blocked")).alert for _ in range(4)]
    assert any(a is not None for a in alerts)  # the world changed
    assert [e.transition.state_key for e in v.stale_negative_candidates()] == ["a"] * 3
    res = v.recheck_negatives(pairs=[("a", "go"), ("m", "go")])
    assert [p[0] for p in res.pairs] == ["m"]
    assert v.distribution("m", "go") is None  # suppressed until re-verified, not deleted
    assert v.distribution("a", "go") == {"blocked": 1.0}
    assert all(store.get(i) is not None for i in range(1, 15))
