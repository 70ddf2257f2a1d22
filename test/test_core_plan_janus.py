"""Tests of glove_ros.core.plan.janus: trigger math, warm-up, evaluation set, verdicts, rollback."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pytest

from glove_ros.core.llm.embedding import HashingEmbedder
from glove_ros.core.plan.janus import (
    AlwaysTrigger,
    GateTask,
    JanusConfig,
    JanusGate,
    MomentumTracker,
    MomentumTrigger,
    NeverTrigger,
    PeriodicTrigger,
    RandomTrigger,
    RehearsalScorer,
    Verdict,
    coverage_indices,
    kmeans,
    make_trigger,
)
from glove_ros.core.plan.plan_entries import Edit
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, RuleUpdater

# ---------------------------------------------------------------------------- doubles


class VecEmbedder:
    """Maps whole texts to hand-made vectors (phi), tasks to their own vectors."""

    def __init__(self, table: dict[str, list[float]], dim: int = 3) -> None:
        self.table = {k: np.asarray(v, dtype=np.float64) for k, v in table.items()}
        self.dim = dim

    def embed_document(self, text: str) -> np.ndarray:
        return self.table[text]

    def embed(self, texts):
        return np.stack([self.table.get(t, np.zeros(self.dim)) for t in texts])


@dataclass
class Cand:
    version: int
    base_version: int
    text: str
    base_text: str


def const_scorer(scores: dict[int, float]):
    calls = []

    def scorer(version, task):
        calls.append((version, task.task_id))
        return scores[version]

    scorer.calls = calls
    return scorer


# ---------------------------------------------------------------------------- config / math


@pytest.mark.parametrize(
    "kwargs",
    [
        {"beta": 1.0},
        {"beta": -0.1},
        {"tau": 1.5},
        {"tau": float("nan")},
        {"warmup": -1},
        {"coverage_k": 0, "boundary_max": 0, "fresh_max": 0},
        {"seed": 1.5},
        {"accept_ties": 1},
        {"max_tasks": 0},
        {"coverage_k": 10, "max_tasks": 5},
        {"kmeans_iters": 0},
    ],
)
def test_config_validate_rejects(kwargs):
    with pytest.raises(ValueError):
        JanusConfig(**kwargs).validate()


def test_momentum_math_on_hand_vectors():
    mt = MomentumTracker(beta=0.5)
    assert math.isnan(mt.cosine(np.array([1.0, 0.0])))  # no history
    mt.update(np.array([1.0, 0.0]))
    np.testing.assert_allclose(mt.m, [0.5, 0.0])  # m1 = 0.5*0 + 0.5*z1
    assert mt.cosine(np.array([0.0, 1.0])) == pytest.approx(0.0)
    assert mt.cosine(np.array([-1.0, 0.0])) == pytest.approx(-1.0)
    assert mt.cosine(np.array([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    mt.update(np.array([0.0, 1.0]))
    np.testing.assert_allclose(mt.m, [0.25, 0.5])  # m2 = 0.5*m1 + 0.5*z2
    assert math.isnan(mt.cosine(np.zeros(2)))
    with pytest.raises(ValueError):
        mt.update(np.zeros(3))


def test_triggers():
    m = MomentumTrigger(tau=0.2)
    assert m.fires(1, 0.1) and not m.fires(1, 0.2) and m.fires(1, math.nan)
    assert AlwaysTrigger().fires(1, 1.0) and not NeverTrigger().fires(1, -1.0)
    p = PeriodicTrigger(3)
    assert [p.fires(t, 0.0) for t in range(1, 7)] == [False, False, True, False, False, True]
    r1, r = RandomTrigger(0.5, seed=7), RandomTrigger(0.5, seed=7)
    a = [r1.fires(t, 0.0) for t in range(50)]
    assert [r.fires(t, 0.0) for t in range(50)] == a and 10 < sum(a) < 40
    assert isinstance(make_trigger("periodic:4"), PeriodicTrigger)
    assert isinstance(make_trigger("random:0.3"), RandomTrigger)
    assert make_trigger("momentum", JanusConfig(tau=0.3)).tau == 0.3
    for bad in ("sometimes", "periodic:0", "random:2", "periodic:x", "always:3"):
        with pytest.raises(ValueError):
            make_trigger(bad)


def test_kmeans_and_coverage():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = np.concatenate([c + rng.normal(0, 0.3, size=(20, 2)) for c in centres])
    cents, labels = kmeans(x, 3, seed=1)
    assert sorted(np.bincount(labels).tolist()) == [20, 20, 20]
    reps = coverage_indices(x, 3, seed=1)
    assert sorted(r // 20 for r in reps) == [0, 1, 2]  # one representative per blob
    assert coverage_indices(x, 3, seed=1) == reps  # seeded: reproducible
    assert coverage_indices(x[:2], 5) == [0, 1]  # k > n
    assert coverage_indices(np.ones((4, 2)), 3) == [0]  # duplicates collapse
    with pytest.raises(ValueError):
        kmeans(np.zeros((0, 2)), 2)


# ---------------------------------------------------------------------------- the gate


def gate_with(table, scores, **cfg):
    scorer = const_scorer(scores)
    config = JanusConfig(**{"beta": 0.5, "tau": 0.0, "warmup": 2, **cfg})
    g = JanusGate(config, VecEmbedder(table), scorer)
    return g, scorer


TABLE = {
    "M0": [0.0, 0.0, 0.0],
    "M1": [1.0, 0.0, 0.0],  # z = +x
    "M2": [2.0, 0.0, 0.0],  # z = +x
    "M3": [3.0, 0.1, 0.0],  # z ~ +x: consistent
    "BAD": [2.0, 0.0, 0.0],  # from M3: z ~ -x: reversal
    "SIDE": [3.0, 1.1, 0.0],  # from M3: z = +y: orthogonal (cos 0, not < 0)
    "task:red": [1.0, 0.0, 0.0],
}


def test_warmup_then_momentum_accepts_consistent_and_compares_reversal():
    g, scorer = gate_with(TABLE, {3: 1.0, 4: 0.0})
    g.observe_task(GateTask("task:red", "task:red"))
    d1 = g.propose(Cand(1, 0, "M1", "M0"))
    d2 = g.propose(Cand(2, 1, "M2", "M1"))
    assert [d1.verdict, d2.verdict] == [Verdict.ACCEPTED_DIRECT] * 2
    assert math.isnan(d1.cosine) and math.isnan(d2.cosine) and not d1.triggered
    assert "warm-up" in d1.reason
    np.testing.assert_allclose(g.momentum.m, [0.75, 0.0, 0.0])  # 0.5*(0.5*x) + 0.5*x
    d3 = g.propose(Cand(3, 2, "M3", "M2"))
    assert d3.verdict == Verdict.ACCEPTED_DIRECT and d3.cosine > 0.99 and not d3.triggered
    assert scorer.calls == []  # no comparison so far
    m_before = g.momentum.m.copy()
    d4 = g.propose(Cand(4, 3, "BAD", "M3"))
    assert d4.triggered and d4.cosine < 0
    assert d4.verdict == Verdict.REJECTED and not d4.accepted
    assert d4.score_old == 1.0 and d4.score_new == 0.0 and d4.active_version == 3
    np.testing.assert_array_equal(g.momentum.m, m_before)  # rejected: m does not move
    assert g.comparisons == 1
    assert "rejected" in JanusGate.explain(d4) and "tau" in JanusGate.explain(d4)
    # near-orthogonal update (m has a small +y part from M3): cos >= tau = 0 -> direct
    d5 = g.propose(Cand(5, 3, "SIDE", "M3"))
    assert d5.verdict == Verdict.ACCEPTED_DIRECT and 0.0 <= d5.cosine < 0.1


def test_triggered_candidate_that_scores_higher_is_accepted():
    g, _ = gate_with(TABLE, {3: 0.0, 4: 1.0}, warmup=0)
    g.observe_task(GateTask("task:red", "task:red"))
    d = g.propose(Cand(4, 3, "BAD", "M3"))  # warmup 0, no momentum yet: cos NaN -> compare
    assert d.triggered and math.isnan(d.cosine)
    assert d.verdict == Verdict.ACCEPTED_COMPARED and d.active_version == 4
    assert (d.eval_coverage, d.eval_boundary, d.eval_fresh) == (1, 0, 0)


def test_ties_keep_old_memory_unless_configured():
    g, _ = gate_with(TABLE, {3: 0.5, 4: 0.5}, warmup=0)
    g.observe_task(GateTask("task:red", "task:red"))
    assert g.propose(Cand(4, 3, "BAD", "M3")).verdict == Verdict.REJECTED
    g, _ = gate_with(TABLE, {3: 0.5, 4: 0.5}, warmup=0, accept_ties=True)
    g.observe_task(GateTask("task:red", "task:red"))
    assert g.propose(Cand(4, 3, "BAD", "M3")).verdict == Verdict.ACCEPTED_COMPARED


def test_no_change_and_no_tasks():
    g, scorer = gate_with(TABLE, {}, warmup=0)
    d = g.propose(Cand(2, 1, "M1", "M1"))
    assert d.verdict == Verdict.ACCEPTED_DIRECT and "no change" in d.reason
    d = g.propose(Cand(2, 1, "M2", "M1"))  # triggered (no momentum) but no tasks seen
    assert d.verdict == Verdict.ACCEPTED_COMPARED and "no tasks" in d.reason
    assert scorer.calls == []


def test_scorer_failure_rejects_and_none_scores_are_left_out():
    def boom(version, task):
        raise RuntimeError("planner crashed")

    g = JanusGate(JanusConfig(warmup=0), VecEmbedder(TABLE), boom)
    g.observe_task(GateTask("task:red", "task:red"))
    d = g.propose(Cand(4, 3, "BAD", "M3"))
    assert d.verdict == Verdict.REJECTED and "scorer failed" in d.reason

    g = JanusGate(JanusConfig(warmup=0), VecEmbedder(TABLE), lambda v, t: None)
    g.observe_task(GateTask("task:red", "task:red"))
    d = g.propose(Cand(4, 3, "BAD", "M3"))
    assert d.verdict == Verdict.ACCEPTED_COMPARED and "could be judged" in d.reason


def test_ablation_triggers_in_the_gate():
    table = dict(TABLE)
    g = JanusGate(JanusConfig(warmup=5), VecEmbedder(table), const_scorer({1: 1.0, 0: 0.0}),
                  trigger=AlwaysTrigger())
    g.observe_task(GateTask("task:red", "task:red"))
    d = g.propose(Cand(1, 0, "M1", "M0"))
    assert d.triggered and d.verdict == Verdict.ACCEPTED_COMPARED  # no warm-up for ablations
    g = JanusGate(JanusConfig(), VecEmbedder(table), const_scorer({}), trigger=NeverTrigger())
    for v, (a, b) in enumerate([("M1", "M0"), ("M2", "M1"), ("BAD", "M3")], start=1):
        d = g.propose(Cand(v, v - 1, a, b))
        assert d.verdict == Verdict.ACCEPTED_DIRECT and not d.triggered
    assert g.comparisons == 0


def test_evidence_trigger_compares_only_risky_candidates():
    from glove_ros.core.plan.janus import EvidenceTrigger

    table = dict(TABLE)
    risky = {"BAD"}
    trig = make_trigger("evidence", JanusConfig(),
                        risk=lambda c: "contradicts trusted looks" if c.text in risky else "")
    assert isinstance(trig, EvidenceTrigger) and not trig.uses_warmup
    g = JanusGate(JanusConfig(warmup=5), VecEmbedder(table), const_scorer({3: 1.0, 4: 0.0}),
                  trigger=trig)
    g.observe_task(GateTask("task:red", "task:red"))
    d = g.propose(Cand(1, 0, "M1", "M0"))  # no evidence against it: accepted directly
    assert d.verdict == Verdict.ACCEPTED_DIRECT and not d.triggered
    assert "no evidence against the update" in d.reason
    d = g.propose(Cand(4, 3, "BAD", "M3"))  # risky from the first update (no warm-up)
    assert d.triggered and d.verdict == Verdict.REJECTED
    assert "contradicts trusted looks" in d.reason and g.comparisons == 1
    # a failing risk check compares rather than letting the update through unseen
    boom = EvidenceTrigger(lambda c: 1 / 0)
    assert boom.fires_on(Cand(1, 0, "M1", "M0"), 1, 1.0) and "risk check failed" in \
        boom.last_reason
    both = make_trigger("evidence+momentum", JanusConfig(tau=0.2), risk=lambda c: "")
    assert both.fires_on(Cand(1, 0, "M1", "M0"), 1, 0.1)
    assert not both.fires_on(Cand(1, 0, "M1", "M0"), 1, 0.5)
    with pytest.raises(ValueError, match="needs a risk check"):
        make_trigger("evidence")


# ---------------------------------------------------------------------------- evaluation set


def test_evaluation_set_parts():
    emb = HashingEmbedder(dim=64)
    cfg = JanusConfig(coverage_k=2, boundary_max=4, fresh_max=3, warmup=0)
    g = JanusGate(cfg, emb, lambda v, t: {10: 0.0, 11: 1.0}[v] if t.task_id != "t2" else 0.5)
    reds = [GateTask(f"r{i}", f"find the red block near wp {i}") for i in range(4)]
    blues = [GateTask(f"b{i}", f"report blue cube colour in kitchen {i}") for i in range(4)]
    for t in reds + blues:
        g.observe_task(t)
    cov, bnd, fresh = g.evaluation_set()
    assert len(cov) == 2
    assert {t.task_id[0] for t in cov} == {"r", "b"}  # one representative per cluster
    assert bnd == []
    assert len(fresh) == 3 and not {t.task_id for t in fresh} & {t.task_id for t in cov}
    # a flip between real runs under two versions makes a boundary task
    g.observe_task(GateTask("t2", "go to wp 2"), outcome=1.0, version=1)
    g.observe_task(GateTask("t2", "go to wp 2"), outcome=0.0, version=2)
    cov, bnd, fresh = g.evaluation_set()
    assert [t.task_id for t in bnd] == ["t2"] or "t2" in [t.task_id for t in cov]
    # a comparison empties the fresh part and flips join the boundary part
    g.embedder = VecEmbedder({"A": [1, 0, 0], "B": [0, 1, 0]})
    d = g.propose(Cand(11, 10, "B", "A"))
    assert d.triggered and d.verdict == Verdict.ACCEPTED_COMPARED
    assert d.eval_coverage + d.eval_boundary + d.eval_fresh == len(d.eval_task_ids)
    cov, bnd, fresh = g.evaluation_set()
    assert fresh == []
    # every task but t2 flipped (0.0 -> 1.0); those not already in coverage are boundary
    flipped = {t.task_id for t in reds + blues}
    assert bnd and {t.task_id for t in bnd} <= flipped
    assert len(bnd) + len([t for t in cov if t.task_id in flipped]) >= min(4, len(flipped))
    with pytest.raises(ValueError):
        g.observe_task(GateTask("", "x"))
    with pytest.raises(ValueError):
        g.observe_task(GateTask("x", "y", {"bad": object()}))


def test_max_tasks_forgets_oldest():
    g = JanusGate(JanusConfig(coverage_k=1, max_tasks=3), HashingEmbedder(16), lambda v, t: 0.0)
    for i in range(5):
        g.observe_task(GateTask(f"t{i}", f"task number {i}"))
    assert g.tasks_seen == 3
    assert {t.task_id for t in g.evaluation_set()[2]} <= {"t2", "t3", "t4"}


# ---------------------------------------------------------------------------- with a store


def find_scorer(store: PlanMemoryStore, truth: dict[str, str]) -> RehearsalScorer:
    """Planner rehearsal: read 'The <colour> block was seen at <wp>' from the memory text."""

    def decide(memory_text: str, task: GateTask) -> str | None:
        m = re.search(rf"The {task.data['goal']} block was seen at (\w+)", memory_text)
        return m.group(1) if m else None

    def judge(task: GateTask, waypoint: str | None) -> float | None:
        return float(waypoint == truth[task.data["goal"]])

    return RehearsalScorer(decide, judge, store=store, budget_tokens=200)


def test_gate_with_store_accepts_drift_fix_rejects_bad_edit_and_rolls_back(tmp_path):
    store = PlanMemoryStore(tmp_path / "m.db")
    truth = {"red": "wp_3"}
    scorer = find_scorer(store, truth)
    cfg = JanusConfig(warmup=1, tau=0.5, beta=0.5)
    gate = JanusGate(cfg, HashingEmbedder(), scorer, store=store)
    red = GateTask("find:red", "find the red block", {"goal": "red"})
    updater = RuleUpdater()

    def episode(eid, wp, colours):
        gate.observe_task(red)
        return updater.propose(store, EpisodeOutcome(
            eid, "find the red block", "red", True, wp, (Observation(wp, colours),)))

    d1 = gate.propose(episode("e1", "wp_3", ("red",)))  # warm-up
    assert d1.verdict == Verdict.ACCEPTED_DIRECT and store.active_version == d1.active_version
    v_good = store.active_version
    # a harmful candidate (removes the true fact): triggered and rejected
    bad = store.propose([Edit.remove("block_red", reason="llm whim")], source="llm")
    d2 = gate.propose(bad)
    assert d2.triggered and d2.verdict == Verdict.REJECTED
    assert store.active_version == v_good and store.version_info(bad.version).status == "rejected"
    assert d2.score_old == 1.0 and d2.score_new == 0.0
    # semantic drift: the red block moved to wp_5; truth (verified experience) follows
    truth["red"] = "wp_5"
    d3 = gate.propose(episode("e2", "wp_5", ("red",)))
    assert d3.verdict in (Verdict.ACCEPTED_DIRECT, Verdict.ACCEPTED_COMPARED)
    assert "wp_5" in store.text()
    # rollback is one call on the store; the gate follows the store's pointer
    store.rollback(v_good)
    assert "wp_3" in store.text()
    # state survives a restart
    gate2 = JanusGate(cfg, HashingEmbedder(), scorer, store=store)
    assert gate2.update_index == gate.update_index and gate2.comparisons == gate.comparisons
    np.testing.assert_allclose(gate2.momentum.m, gate.momentum.m)
    assert gate2.tasks_seen == 1
    store.close()


def test_stale_candidate_is_rejected_not_raised(tmp_path):
    store = PlanMemoryStore(tmp_path / "m.db")
    gate = JanusGate(JanusConfig(), HashingEmbedder(), lambda v, t: 1.0, store=store)
    c1 = store.propose([Edit.add("semantic", "a", "fact a")])
    c2 = store.propose([Edit.add("semantic", "b", "fact b")])
    assert gate.propose(c1).accepted
    d = gate.propose(c2)
    assert d.verdict == Verdict.REJECTED and "not deployed" in d.reason
    assert store.active_version == c1.version
    store.close()


def test_rehearsal_scorer_caches_decisions_and_handles_unknowns():
    calls = []

    def decide(memory, task):
        calls.append((memory, task.task_id))
        if task.task_id == "crash":
            raise RuntimeError("llm timeout")
        return memory

    def truth(task, decision):
        return None if task.task_id == "unknown" else decision == "v2"

    s = RehearsalScorer(decide, truth, memory_for=lambda v, t: f"v{v}")
    t = GateTask("t", "task")
    assert s(2, t) == 1.0 and s(1, t) == 0.0 and s(2, t) == 1.0
    assert len(calls) == 2 and s.decisions_made == 2  # cached per (version, task)
    assert s(1, GateTask("unknown", "x")) is None
    assert s(1, GateTask("crash", "x")) is None and s.errors
    with pytest.raises(ValueError):
        RehearsalScorer(decide, truth)  # needs memory_for or store
