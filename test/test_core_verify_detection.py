"""The calibrated drift detector (core/detection.py) and the verifier's evidence rules.

What must hold: a deterministic world with a consistent history alarms on the first
contradiction; 10% missed detections never alarm on one miss and alarm within 3 visits of
a real change; one earlier observation is not history enough; the false-alarm rate on
nuisance-only streams stays under the test's bound; a unique object seen at a new place
suppresses its old place at once; a blocked corridor is evidence for both directions.
"""

from __future__ import annotations

import math
import random

import pytest

from glove_ros.core.memory.experience import Status, Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.detection import (
    NoiseEstimate,
    log_bayes_factor,
    min_history_for_alarm,
    run_length_for_alarm,
)
from glove_ros.core.verify.verifier import GloveVerifier

THRESHOLD = math.log(1 / 0.02)  # the default alarm_delta


@pytest.fixture
def store(tmp_path):
    s = ExperienceStore(str(tmp_path / "memory.db"), synchronous="NORMAL")
    yield s
    s.close()


def look(wp: str, colors: str, stamp: float = 0.0) -> Transition:
    return Transition(wp, "look", f"colors={colors}", stamp=stamp)


# ----------------------------------------------------------------------------- the test


def test_bayes_factor_statements_of_the_module_docstring():
    # n >> 1 consistent samples: one contradiction alarms iff eta <= ~1/101
    assert run_length_for_alarm(0.005, 0.02) == 1
    assert run_length_for_alarm(0.02, 0.02) == 2
    assert run_length_for_alarm(0.05, 0.02) == 2
    assert run_length_for_alarm(0.10, 0.02) == 3
    # against ONE earlier sample: only a near-noiseless sensor alarms on one contradiction
    assert min_history_for_alarm(0.004, 0.02) == 1
    assert min_history_for_alarm(0.10, 0.02) is None
    assert run_length_for_alarm(0.10, 0.02, history=1) is None
    # more history, more evidence; a longer run, more evidence
    lbf = [log_bayes_factor({"a": n}, ["b"], 0.05) for n in (1, 2, 5, 20)]
    assert lbf == sorted(lbf)
    runs = [log_bayes_factor({"a": 10}, ["b"] * k, 0.05) for k in (1, 2, 3)]
    assert runs == sorted(runs) and runs[0] > 0
    # agreeing data is evidence against drift; bad eta is an error
    assert log_bayes_factor({"a": 10, "b": 10}, ["b"], 0.05) < THRESHOLD
    with pytest.raises(ValueError, match="eta"):
        log_bayes_factor({"a": 1}, ["b"], 0.0)


def test_noise_estimate_shrinks_toward_pooled_and_prior_and_round_trips():
    est = NoiseEstimate(prior_rate=0.05, prior_weight=5)
    assert est.rate("look") == pytest.approx(0.05)
    for _ in range(200):
        est.add("navigate_to", False)
    assert est.rate("navigate_to") < 0.002  # a deterministic action kind
    for i in range(100):
        est.add("look", i % 10 == 0)
    assert 0.08 < est.rate("look") < 0.11  # 10% misses, learnt
    back = NoiseEstimate.from_json(est.to_json(), 0.05, 5)
    assert back.rate("look") == est.rate("look")
    assert NoiseEstimate.from_json({"x": "garbage"}, 0.05, 5).counts == {}


# ----------------------------------------------------------------------------- verifier


def learn_world(v: GloveVerifier, places: dict[str, str], rounds: int, miss: float = 0.0,
                rng: random.Random | None = None) -> int:
    """Look at every place ``rounds`` times (a miss empties a look); returns alerts."""
    rng = rng or random.Random(0)
    alerts = 0
    for _ in range(rounds):
        for wp, colors in places.items():
            seen = "" if colors and rng.random() < miss else colors
            alerts += len(v.observe(look(wp, seen)).alerts)
    return alerts


PLACES = {f"wp{i}": c for i, c in enumerate(["red", "blue", "", "green", "", "yellow"])}


def test_deterministic_history_alarms_on_the_first_contradiction(store):
    v = GloveVerifier(store, VerifierConfig())
    assert learn_world(v, PLACES, 20) == 0
    r = v.observe(look("wp0", "blue"))  # red and blue swapped
    assert r.alert is not None and r.consecutive_surprises == 1
    assert r.alert.log_bayes_factor >= THRESHOLD and r.alert.noise_rate < 0.01
    assert "log Bayes factor" in r.alert.reason


def test_ten_percent_misses_never_alarm_on_one_miss_and_detect_within_three(store):
    rng = random.Random(1)
    v = GloveVerifier(store, VerifierConfig())
    learn_world(v, PLACES, 30, miss=0.1, rng=rng)
    assert 0.05 < v.noise_rate("look", "loss") < 0.2  # misses, learnt
    assert v.noise_rate("look", "other") < 0.01  # the detector never saw a wrong colour
    assert v.observe(look("wp0", "")).alert is None  # one miss is not drift
    v.observe(look("wp0", "red"))  # the run ends: it was noise
    # the red block really left wp0: empty looks from now on
    delays = [k for k in range(1, 4) if v.observe(look("wp0", "")).alert is not None]
    assert delays and delays[0] <= 3


def test_a_single_earlier_observation_is_not_history_enough(store):
    # the warehouse false alarm: one earlier look (a miss) contradicted by the block
    v = GloveVerifier(store, VerifierConfig())
    learn_world(v, PLACES, 20, miss=0.1, rng=random.Random(2))
    v.observe(look("new_place", ""))
    for _ in range(5):
        assert v.observe(look("new_place", "red")).alert is None
    # the new outcome simply outnumbers the old one in memory: nothing was suppressed
    entries, _ = store.query("new_place", "look", include_suppressed=True, limit=None)
    assert all(e.status == Status.TRUSTED for e in entries)


@pytest.mark.parametrize("miss", [0.0, 0.02, 0.05, 0.10, 0.15])
def test_false_alarm_rate_on_nuisance_only_streams_stays_under_its_bound(store, miss):
    """A patrol of 12 waypoints (8 with a block), each visit a drive and a look, nothing
    ever changes; misses empty a look. Bound: <= 1 alarm per 1,000 transitions."""
    v = GloveVerifier(store, VerifierConfig())
    rng = random.Random(int(miss * 1000) + 7)
    colors = ["red", "blue", "green", "yellow", "", "", "purple", "", "orange", "cyan",
              "", "white"]
    places = {f"wp{i}": c for i, c in enumerate(colors)}
    transitions = alerts = 0
    here = "wp0"
    for _ in range(150):  # 3,600 transitions
        for wp in rng.sample(sorted(places), len(places)):
            alerts += len(v.observe(Transition(here, "navigate_to", "reached",
                                               action_arg=wp)).alerts)
            seen = "" if places[wp] and rng.random() < miss else places[wp]
            alerts += len(v.observe(look(wp, seen)).alerts)
            transitions += 2
            here = wp
    assert 1000 * alerts / transitions <= 1.0, (alerts, transitions, v.stats()["surprises"])


def test_unique_object_seen_elsewhere_suppresses_its_old_place_at_once(store):
    v = GloveVerifier(store, VerifierConfig(unique_objects=("red", "blue")))
    for _ in range(5):
        v.observe(look("kitchen", "red"))
        v.observe(look("office", "blue"))
        v.observe(look("hall", ""))
    r = v.observe(look("hall", "red"))  # red moved to the hall
    kinds = sorted((a.kind, a.state_key) for a in r.alerts)
    assert ("object", "kitchen") in kinds
    assert store.query("kitchen", "look")[0] == []  # no trusted red at the kitchen any more
    assert store.pending_for("kitchen", "look") is not None  # re-verified by the next visit
    assert store.query("office", "look")[0]  # blue untouched
    # the kitchen's next look re-verifies: empty now, and that is what memory says
    v.observe(look("kitchen", ""))
    (entry,), _ = store.query("kitchen", "look")
    assert entry.transition.outcome == "colors="
    # without the declaration, nothing happens at the kitchen
    s2 = ExperienceStore(":memory:")
    v2 = GloveVerifier(s2, VerifierConfig())
    for _ in range(5):
        v2.observe(look("kitchen", "red"))
        v2.observe(look("hall", ""))
    v2.observe(look("hall", "red"))
    assert s2.query("kitchen", "look")[0]
    s2.close()


def test_object_evidence_touches_only_memories_of_that_object(store):
    # the demo's swap: red and blue trade places. The fresh, correct look at the kitchen
    # (blue) must survive red being seen at the office; the alert names where red was seen.
    v = GloveVerifier(store, VerifierConfig(unique_objects=("red", "blue")))
    for _ in range(6):
        v.observe(look("kitchen", "red"))
        v.observe(look("office", "blue"))
    fresh = v.observe(look("kitchen", "blue"))  # one look: not yet an alarm on its own
    r = v.observe(look("office", "red"))
    (alert,) = [a for a in r.alerts if a.kind == "object" and a.state_key == "kitchen"]
    assert alert.observed_at == "office" and alert.observed_outcome == "colors=red"
    kept = {e.id: e.transition.outcome for e in store.query("kitchen", "look")[0]}
    assert fresh.entry_id in kept and set(kept.values()) == {"colors=blue"}, kept
    assert fresh.entry_id not in alert.suppressed_ids
    assert all(store.get(i).transition.outcome == "colors=red" for i in alert.suppressed_ids)


def test_a_seen_object_that_was_always_visible_from_two_places_is_not_evidence(store):
    v = GloveVerifier(store, VerifierConfig(unique_objects=("red",)))
    for _ in range(5):
        v.observe(look("a", "red"))
        v.observe(look("b", "red"))  # same block, visible from both waypoints
    assert all(not v.observe(look(w, "red")).alerts for w in ("a", "b"))


def test_blocked_corridor_is_evidence_for_both_directions(store):
    v = GloveVerifier(store, VerifierConfig())
    for _ in range(20):
        v.observe(Transition("hall", "navigate_to", "reached", action_arg="lab"))
        v.observe(Transition("lab", "navigate_to", "reached", action_arg="hall"))
    r = v.observe(Transition("hall", "navigate_to", "blocked", action_arg="lab"))
    assert r.alert is not None
    assert store.query("lab", "navigate_to", "hall")[0] == []  # the other direction too
    assert store.pending_for("lab", "navigate_to", "hall") is not None
    # a one-way world can switch it off
    s2 = ExperienceStore(":memory:")
    v2 = GloveVerifier(s2, VerifierConfig(symmetric_actions=()))
    for _ in range(20):
        v2.observe(Transition("hall", "navigate_to", "reached", action_arg="lab"))
        v2.observe(Transition("lab", "navigate_to", "reached", action_arg="hall"))
    v2.observe(Transition("hall", "navigate_to", "blocked", action_arg="lab"))
    assert s2.query("lab", "navigate_to", "hall")[0]
    s2.close()


def test_noise_tally_survives_a_restart(tmp_path):
    path = str(tmp_path / "m.db")
    s = ExperienceStore(path)
    v = GloveVerifier(s, VerifierConfig())
    learn_world(v, PLACES, 10)
    rate = v.noise_rate("look", "other")
    assert rate < 0.05
    counts = {k: list(c) for k, c in v._noise.counts.items()}
    s.close()  # killed: no flush
    s = ExperienceStore(path)
    back = GloveVerifier(s, VerifierConfig())
    # every disagreement was stored; at most _NOISE_EVERY agreeing comparisons are lost
    for k, (m, d) in counts.items():
        assert back._noise.counts[k][1] == d
        assert m - 64 <= back._noise.counts[k][0] <= m
    back.observe(look("wp0", "red"))
    back.flush()  # what the memory node does before it closes the store
    want = {k: list(c) for k, c in back._noise.counts.items()}
    s.close()
    s = ExperienceStore(path)
    assert {k: list(c) for k, c in GloveVerifier(s, VerifierConfig())._noise.counts.items()} \
        == want
    s.close()


def test_paper_detector_is_still_available_and_validated():
    cfg = VerifierConfig(detector="p_th", p_th=2).validate()
    assert cfg.detector == "p_th"
    with pytest.raises(ValueError, match="detector"):
        VerifierConfig(detector="magic").validate()
    with pytest.raises(ValueError, match="alarm_delta"):
        VerifierConfig(alarm_delta=0.7).validate()
    assert VerifierConfig.from_dict({"unique_objects": "red, blue"}).unique_objects == (
        "red", "blue")


# ----------------------------------------------------------------------------- structured noise


def test_relation_rate_is_a_kinds_share_of_the_actions_comparisons_and_round_trips():
    noise = NoiseEstimate(prior_rate=0.05, prior_weight=5.0)
    for _ in range(400):
        noise.add("right", False)
    for _ in range(40):
        noise.add_relation("right", "slip")
    # a kind seen in 10% of the comparisons has about that rate; a kind never seen in 400
    # comparisons is rare enough for one sighting to count as evidence
    assert 0.07 < noise.relation_rate("right", "slip") < 0.12
    assert noise.relation_rate("right", "flip") < 0.002
    # the relation tallies stay out of the action's own rate
    assert noise.rate("right") == pytest.approx(NoiseEstimate(0.05, 5.0, {"right": [400, 0]})
                                                .rate("right"))
    back = NoiseEstimate.from_json(noise.to_json(), 0.05, 5.0)
    assert back.relation_rate("right", "slip") == noise.relation_rate("right", "slip")
    assert back.counts["right~slip"] == [0, 40]  # disagreements above its 0 comparisons kept


def test_pair_eta_makes_a_never_seen_kind_of_disagreement_alarm_at_once():
    history = {"(18, ice)": 20}

    def kinds(o: str, t: str) -> float:
        return 0.1 if o.startswith("(22") else 0.001  # slips common, a tile flip never seen

    slip = log_bayes_factor(history, ["(22, ice)"], 0.1, pair_eta=kinds)
    flip = log_bayes_factor(history, ["(18, hole)"], 0.1, pair_eta=kinds)
    assert slip < THRESHOLD <= flip
    # without the relation the same flip needs a run, like any other 10%-noise disagreement
    assert log_bayes_factor(history, ["(18, hole)"], 0.1) < THRESHOLD


def _relation(o: str, m: str) -> str:
    """Which field of 'tile,kind' outcomes differs."""
    (a0, a1), (b0, b1) = o.split(","), m.split(",")
    return "+".join(str(i) for i, (x, y) in enumerate(((a0, b0), (a1, b1))) if x != y)


def test_structured_noise_detects_a_flip_at_once_and_slips_never_alarm(store):
    """Slips (another tile) happen 10% of the time; a tile turning into a hole never is noise.

    After warm-up, slips alone raise no alarm in 2,000 transitions, and the first flip of
    a remembered tile alarms at its first observation; with ``structured_noise`` off the same
    flip needs a run (the action has one 10% noise rate)."""
    rng = random.Random(3)
    cfg = VerifierConfig(rule="state")
    v = GloveVerifier(store, cfg, noise_relation=_relation)
    alarms = 0
    for i in range(2000):
        s = f"s{i % 20}"
        out = f"t{i % 20}b,ice" if rng.random() < 0.1 else f"t{i % 20},ice"
        alarms += v.observe(Transition(s, "right", out)).alert is not None
    assert alarms <= 2000 * 0.02 * 0.05  # well under the test's bound (alarm_delta per test)
    assert v.observe(Transition("s3", "right", "t3,hole")).alert is not None
    assert v.noise_rate("right") > 0.05  # the slips were learnt as noise

    off = ExperienceStore(":memory:")
    try:
        w = GloveVerifier(off, VerifierConfig(rule="state", structured_noise=False),
                          noise_relation=_relation)
        rng = random.Random(3)
        for i in range(2000):
            s = f"s{i % 20}"
            out = f"t{i % 20}b,ice" if rng.random() < 0.1 else f"t{i % 20},ice"
            w.observe(Transition(s, "right", out))
        assert w.observe(Transition("s3", "right", "t3,hole")).alert is None
    finally:
        off.close()


def test_a_false_alarm_that_re_verification_refutes_is_learnt_as_noise(store):
    """An alarm whose fresh samples show the old mode again was noise: its kind's rate rises;
    one confirmed as drift (the fresh samples keep the new outcome) never enters the tally."""
    v = GloveVerifier(store, VerifierConfig(rule="state"), noise_relation=_relation)
    for _ in range(100):
        v.observe(Transition("a", "right", "x,ice"))
    before = v._noise.relation_rate("right", "0")
    assert v.observe(Transition("a", "right", "y,ice")).alert is not None  # rare kind so far
    for _ in range(3):
        v.observe(Transition("a", "right", "x,ice"))  # the old mode is back: a false alarm
    assert v._noise.relation_rate("right", "0") > before
    assert not store.state_items("glove.alarm_run:")  # resolved and forgotten
    # a real change: the fresh samples keep the new outcome, the tally does not move
    for _ in range(100):
        v.observe(Transition("b", "right", "z,ice"))
    assert v.observe(Transition("b", "right", "z,hole")).alert is not None
    tally = dict(v._noise.counts)
    for _ in range(3):
        v.observe(Transition("b", "right", "z,hole"))
    assert v._noise.counts.get("right~1") == tally.get("right~1")


def test_a_miss_run_that_alarmed_is_re_verified_without_a_second_alarm(store):
    """Two misses in a row can alarm while the miss rate is still learnt too low. The block
    seen again is evidence for the old memory, not a second alarm, and once the
    re-verification brings the old memory back the two misses count as misses."""
    v = GloveVerifier(store, VerifierConfig(unique_objects=("orange",)))
    for i in range(200):  # a reliable camera so far: every look sees its block
        v.observe(look(f"wp{i % 10}", "orange" if i % 10 == 4 else "", stamp=i + 1.0))
    loss_before = v.noise_rate("look", "loss")
    first = v.observe(look("wp4", "", stamp=300.0))
    second = v.observe(look("wp4", "", stamp=301.0))
    assert first.alert is None and second.alert is not None  # a (false) alarm
    again = [v.observe(look("wp4", "orange", stamp=302.0 + k)) for k in range(3)]
    assert all(r.alert is None for r in again), [r.reason for r in again if r.alert]
    # re-verified: the old memory comes back whole (restored, not replaced by 2 samples)
    assert [r.decision.value for r in again].count("restore") == 1
    dist = v.distribution("wp4", "look")
    assert dist["colors=orange"] > 0.9, dist
    assert v.noise_rate("look", "loss") > loss_before
    assert v.stats()["false_alarms_learnt"] == 1


def test_a_change_back_after_another_dissonance_is_not_taken_for_noise(store):
    """A corridor blocks, the world changes elsewhere, then the corridor re-opens: the old
    outcome's return is drift twice, not a false alarm. Memory is realigned to the fresh
    samples (replaced, not restored) and the noise tally does not move."""
    v = GloveVerifier(store, VerifierConfig(rule="state"))
    for _ in range(100):
        v.observe(Transition("hall", "navigate_to", "reached", action_arg="goal"))
        v.observe(Transition("kitchen", "navigate_to", "reached", action_arg="office"))
    assert v.observe(Transition("hall", "navigate_to", "blocked", action_arg="goal")).alert
    assert v.observe(Transition("kitchen", "navigate_to", "blocked",
                                action_arg="office")).alert  # the world changes again
    tally = {k: list(c) for k, c in v._noise.counts.items()}
    results = [v.observe(Transition("hall", "navigate_to", "reached", action_arg="goal"))
               for _ in range(3)]
    assert "replace" in [r.decision.value for r in results]
    assert "restore" not in [r.decision.value for r in results]
    assert v.stats()["false_alarms_learnt"] == 0
    assert v._noise.counts["navigate_to"][1] == tally["navigate_to"][1]
