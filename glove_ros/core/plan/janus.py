"""The Janus gate on plan-memory updates (DESIGN.md section 4, papers/janus.md).

After each task an updater proposes a candidate memory M_hat_t. The gate decides whether it
replaces M_{t-1}:

1. **Memory momentum trigger.** phi is the text embedding of the whole memory
   (:meth:`~glove_ros.core.llm.embedding.TextEmbedder.embed_document` of
   :func:`~glove_ros.core.plan.plan_retrieval.memory_text`). With z_t = phi(M_hat_t) - phi(M_{t-1})
   and the momentum m_t = beta m_{t-1} + (1 - beta) z_t, the gate compares the two memories
   only when cos(z_t, m_{t-1}) < tau -- an update that turns away from the recent direction
   of travel. Otherwise it accepts directly. The first ``warmup`` updates are accepted
   directly (the momentum needs a history). m moves only when memory moves: a rejected
   candidate leaves m as it was.
2. **Hybrid evaluation set** E_t = coverage (the task nearest each k-means centroid of all
   tasks seen, numpy k-means++ with a fixed seed) + boundary (tasks whose outcome flipped
   between memories: in earlier comparisons, or between two real runs under different
   versions) + fresh (tasks seen since the last comparison). Each task is counted once, in
   the first of those parts it belongs to.
3. **Comparison.** Both memories are scored on E_t with a pluggable
   ``scorer(memory_version, task) -> float | None`` (``None``: cannot judge that task; it is
   left out for both). The candidate is kept only if its mean score is higher (ties keep
   the old memory unless ``accept_ties``).

Scoring on a robot (:class:`RehearsalScorer`): a task cannot be re-driven to evaluate a
memory. Instead the planner's *decision* for the task is rehearsed under each memory (e.g.
"which waypoint first?") and scored against verified experience memory -- the relative truth
GLOVE maintains (e.g. "is the red block at that waypoint according to trusted
transitions?"). In simulation the scorer may instead run the simulator. Limits: a rehearsal
scores one decision, not a whole episode; truth is only as good and as complete as
experience memory (unknown -> ``None``, left out); a small LLM planner is noisy, so it should
run greedy (temperature 0) and decisions are cached per (version, task) -- versions are
immutable -- so the old memory's decisions cost nothing on the next comparison; each
comparison still costs up to |E_t| planner calls for the candidate.

Ablation triggers for the benchmark: :class:`AlwaysTrigger`, :class:`PeriodicTrigger`,
:class:`RandomTrigger`, :class:`NeverTrigger` (plain updater) next to the paper's
:class:`MomentumTrigger`. :class:`EvidenceTrigger` (not in the paper) compares when the
candidate is risky by what the robot already knows -- a ``risk(candidate) -> reason``
callable, e.g. :class:`~glove_ros.core.plan.plan_planner.ExperienceRisk`: the edit touches
(state, action) pairs the GLOVE verifier recently found dissonant, or contradicts trusted
experience -- optionally OR the momentum test (``evidence+momentum``). A trigger that needs
the candidate provides ``fires_on(candidate, update_index, cosine)``; the gate calls it
instead of ``fires``.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from glove_ros.core.llm.embedding import cosine as _cosine
from glove_ros.core.plan.plan_memory import Candidate, PlanMemoryStore, StaleCandidateError

__all__ = [
    "Verdict",
    "JanusConfig",
    "GateTask",
    "GateDecision",
    "CandidateLike",
    "Scorer",
    "MomentumTracker",
    "Trigger",
    "MomentumTrigger",
    "AlwaysTrigger",
    "PeriodicTrigger",
    "RandomTrigger",
    "NeverTrigger",
    "EvidenceTrigger",
    "make_trigger",
    "kmeans",
    "coverage_indices",
    "RehearsalScorer",
    "JanusGate",
]


class Verdict(IntEnum):
    """Gate verdicts; the values match the ``glove_ros/GateDecision`` message constants."""

    ACCEPTED_DIRECT = 0
    ACCEPTED_COMPARED = 1
    REJECTED = 2


# --------------------------------------------------------------------------------------------
# configuration and value types


@dataclass(frozen=True)
class JanusConfig:
    """Janus gate parameters.

    Attributes:
        beta: momentum decay in [0, 1).
        tau: compare when cos(z_t, m_{t-1}) < tau, in [-1, 1]. Lower compares less often.
            Measured with all-MiniLM whole-memory embeddings on maze memories of 1-5 entries
            (beta 0.9): additive updates gave cos -0.03 .. -0.23 (new topics are not
            parallel to the momentum), removing one fact -0.06, cutting the memory to one
            entry -0.41. So the default 0.0 compares nearly every update (safe, costly);
            about -0.3 compares only drastic turns. Tune it per deployment with the
            benchmark's comparison count.
        warmup: the first ``warmup`` memory-changing updates are accepted directly.
        coverage_k: k of the k-means coverage part of E_t (0 disables it).
        boundary_max: most boundary (flipped) tasks kept (0 disables the part).
        fresh_max: most fresh tasks kept since the last comparison (0 disables the part).
        seed: seed of k-means (and of the random ablation trigger via :func:`make_trigger`).
        accept_ties: keep the candidate when scores tie (default: keep the old memory).
        max_tasks: most tasks remembered for coverage (oldest forgotten first).
        kmeans_iters: Lloyd iterations.
    """

    beta: float = 0.9
    tau: float = 0.0
    warmup: int = 3
    coverage_k: int = 8
    boundary_max: int = 16
    fresh_max: int = 16
    seed: int = 0
    accept_ties: bool = False
    max_tasks: int = 5000
    kmeans_iters: int = 50

    def validate(self) -> JanusConfig:
        """Raise ``ValueError`` with an actionable message on a bad value. Returns ``self``."""
        if not _num(self.beta) or not 0.0 <= self.beta < 1.0:
            raise ValueError(f"beta must be in [0, 1) (got {self.beta!r})")
        if not _num(self.tau) or not -1.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be a cosine in [-1, 1] (got {self.tau!r})")
        for name in ("warmup", "coverage_k", "boundary_max", "fresh_max", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0 (got {v!r})")
        if self.coverage_k + self.boundary_max + self.fresh_max == 0:
            raise ValueError("coverage_k, boundary_max and fresh_max are all 0: E_t is empty")
        if not isinstance(self.accept_ties, bool):
            raise ValueError("accept_ties must be a bool")
        if isinstance(self.max_tasks, bool) or not isinstance(self.max_tasks, int) or (
            self.max_tasks < max(1, self.coverage_k)
        ):
            raise ValueError(
                f"max_tasks must be an int >= max(1, coverage_k) (got {self.max_tasks!r})"
            )
        if isinstance(self.kmeans_iters, bool) or not isinstance(self.kmeans_iters, int) or (
            self.kmeans_iters < 1
        ):
            raise ValueError(f"kmeans_iters must be an int >= 1 (got {self.kmeans_iters!r})")
        return self


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class GateTask:
    """A task the gate can evaluate memories on.

    Attributes:
        task_id: stable id (the same task seen twice keeps its id, e.g. "find:red").
        text: the instruction, embedded for coverage ("find the red block").
        data: JSON-able details the scorer needs (e.g. ``{"goal": "red"}``).
    """

    task_id: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def validate(self) -> GateTask:
        """Raise ``ValueError`` unless id and text are non-empty strings and data is JSON-able."""
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(f"task_id must be a non-empty string (got {self.task_id!r})")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"task {self.task_id!r}: text must be a non-empty string")
        if not isinstance(self.data, Mapping):
            raise ValueError(f"task {self.task_id!r}: data must be a dict")
        try:
            json.dumps(dict(self.data))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"task {self.task_id!r}: data must be JSON-serialisable") from exc
        return self


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided about one candidate (fields mirror ``glove_ros/GateDecision``).

    ``cosine`` is NaN during warm-up (and when undefined); ``score_old`` / ``score_new`` are
    NaN when no comparison ran. ``active_version`` is the plan-memory version deployed after
    the decision.
    """

    update_index: int
    verdict: Verdict
    triggered: bool
    cosine: float
    tau: float
    score_old: float
    score_new: float
    eval_coverage: int
    eval_boundary: int
    eval_fresh: int
    active_version: int
    candidate_version: int
    base_version: int
    reason: str
    eval_task_ids: tuple[str, ...] = ()
    scored_tasks: int = 0

    @property
    def accepted(self) -> bool:
        """True unless the verdict is REJECTED."""
        return self.verdict != Verdict.REJECTED

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict (verdict as int, NaN kept as float nan)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["verdict"] = int(self.verdict)
        d["eval_task_ids"] = list(self.eval_task_ids)
        return d


@runtime_checkable
class CandidateLike(Protocol):
    """What the gate needs from a candidate (a :class:`~glove_ros.core.plan.plan_memory.Candidate`
    fits)."""

    version: int
    base_version: int

    @property
    def text(self) -> str:
        """M_hat_t as text."""
        ...

    @property
    def base_text(self) -> str:
        """M_{t-1} as text."""
        ...


#: ``scorer(memory_version, task) -> score`` (higher is better, e.g. 1.0 correct / 0.0 wrong;
#: ``None`` when the task cannot be judged).
Scorer = Callable[[int, GateTask], "float | None"]


# --------------------------------------------------------------------------------------------
# momentum and triggers


class MomentumTracker:
    """The memory momentum m_t = beta m_{t-1} + (1 - beta) z_t (m_0 = 0)."""

    def __init__(self, beta: float) -> None:
        if not _num(beta) or not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1) (got {beta!r})")
        self.beta = float(beta)
        self.m: np.ndarray | None = None
        self.steps = 0

    def cosine(self, z: np.ndarray) -> float:
        """cos(z, m_{t-1}); NaN before the first step or when m or z is zero."""
        z = np.asarray(z, dtype=np.float64).ravel()
        if self.m is None or not np.any(self.m) or not np.any(z):
            return math.nan
        return _cosine(z, self.m)

    def update(self, z: np.ndarray) -> None:
        """Fold a realised update direction into m."""
        z = np.asarray(z, dtype=np.float64).ravel()
        if self.m is None:
            self.m = np.zeros_like(z)
        if self.m.shape != z.shape:
            raise ValueError(f"z has shape {z.shape}, momentum has {self.m.shape}")
        self.m = self.beta * self.m + (1.0 - self.beta) * z
        self.steps += 1


class Trigger(Protocol):
    """Decides whether to compare; ``uses_warmup`` says if warm-up applies to it."""

    name: str
    uses_warmup: bool

    def fires(self, update_index: int, cosine: float) -> bool:
        """True to compare the candidate with the current memory."""
        ...


@dataclass
class MomentumTrigger:
    """Janus: compare when cos(z_t, m_{t-1}) < tau (or is undefined)."""

    tau: float
    name: str = "momentum"
    uses_warmup: bool = True

    def fires(self, update_index: int, cosine: float) -> bool:
        """cos < tau; an undefined cosine (zero momentum) compares, to be safe."""
        return math.isnan(cosine) or cosine < self.tau


@dataclass
class AlwaysTrigger:
    """Ablation: compare every update."""

    name: str = "always"
    uses_warmup: bool = False

    def fires(self, update_index: int, cosine: float) -> bool:
        """Always."""
        return True


@dataclass
class NeverTrigger:
    """Ablation: never compare (the plain updater: every candidate deployed)."""

    name: str = "never"
    uses_warmup: bool = False

    def fires(self, update_index: int, cosine: float) -> bool:
        """Never."""
        return False


@dataclass
class PeriodicTrigger:
    """Ablation: compare every k-th update (update indices k, 2k, ...)."""

    k: int
    name: str = "periodic"
    uses_warmup: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"periodic trigger needs k >= 1 (got {self.k!r})")

    def fires(self, update_index: int, cosine: float) -> bool:
        """update_index % k == 0."""
        return update_index % self.k == 0


class RandomTrigger:
    """Ablation: compare with probability p (seeded, reproducible)."""

    name = "random"
    uses_warmup = False

    def __init__(self, p: float, seed: int = 0) -> None:
        if not _num(p) or not 0.0 <= p <= 1.0:
            raise ValueError(f"random trigger needs p in [0, 1] (got {p!r})")
        self.p = float(p)
        self._rng = np.random.default_rng(seed)

    def fires(self, update_index: int, cosine: float) -> bool:
        """One Bernoulli(p) draw per update."""
        return bool(self._rng.random() < self.p)


class EvidenceTrigger:
    """Compare when ``risk(candidate)`` names a reason (non-empty string) -- what the robot
    knows says the update may be wrong -- or, with ``tau`` set, also when the update turns
    away from the memory momentum (cos < tau). No warm-up: evidence is meaningful from the
    first update. ``last_reason`` says why it last fired (or did not)."""

    uses_warmup = False

    def __init__(self, risk: Callable[[Any], str], tau: float | None = None) -> None:
        if not callable(risk):
            raise ValueError("evidence trigger needs a callable risk(candidate) -> reason")
        if tau is not None and not _num(tau):
            raise ValueError(f"evidence trigger tau must be a finite number (got {tau!r})")
        self.risk = risk
        self.tau = tau
        self.name = "evidence" if tau is None else "evidence+momentum"
        self.last_reason = ""
        self.risk_fired = 0
        self.momentum_fired = 0

    def fires(self, update_index: int, cosine: float) -> bool:
        """Without the candidate only the momentum part can judge."""
        return self.tau is not None and (math.isnan(cosine) or cosine < self.tau)

    def fires_on(self, candidate: Any, update_index: int, cosine: float) -> bool:
        """True when the candidate is risky (or diverges from the momentum, with ``tau``).
        A failing risk check fires (compare when unsure)."""
        try:
            why = str(self.risk(candidate) or "")
        except Exception as exc:  # the check must never let an update through unseen
            why = f"risk check failed ({type(exc).__name__}: {exc})"
        if why:
            self.risk_fired += 1
            self.last_reason = why
            return True
        if self.fires(update_index, cosine):
            self.momentum_fired += 1
            self.last_reason = f"cos(z, m) = {cosine:.3f} < tau = {self.tau:.3f}"
            return True
        self.last_reason = "no evidence against the update"
        return False


def make_trigger(spec: str, config: JanusConfig | None = None,
                 risk: Callable[[Any], str] | None = None) -> Trigger:
    """A trigger from a benchmark spec: ``"momentum"``, ``"always"``, ``"never"``,
    ``"periodic:K"``, ``"random:P"`` (seeded with ``config.seed``), ``"evidence"`` or
    ``"evidence+momentum"`` (these two need ``risk``)."""
    cfg = config or JanusConfig()
    kind, _, arg = str(spec).partition(":")
    if kind in ("evidence", "evidence+momentum") and not arg:
        if risk is None:
            raise ValueError(f"trigger {spec!r} needs a risk check (what the robot knows)")
        return EvidenceTrigger(risk, cfg.tau if kind == "evidence+momentum" else None)
    try:
        if kind == "momentum" and not arg:
            return MomentumTrigger(cfg.tau)
        if kind == "always" and not arg:
            return AlwaysTrigger()
        if kind == "never" and not arg:
            return NeverTrigger()
        if kind == "periodic":
            return PeriodicTrigger(int(arg))
        if kind == "random":
            return RandomTrigger(float(arg), cfg.seed)
    except ValueError as exc:
        raise ValueError(f"bad trigger spec {spec!r}: {exc}") from exc
    raise ValueError(
        f"unknown trigger {spec!r}: use momentum, always, never, periodic:K, random:P, "
        "evidence or evidence+momentum"
    )


# --------------------------------------------------------------------------------------------
# k-means coverage


def kmeans(
    x: np.ndarray, k: int, *, seed: int = 0, iters: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """k-means (k-means++ initialisation, Lloyd iterations) in numpy.

    Returns ``(centroids (k', d), labels (n,))`` with ``k' = min(k, number of distinct
    rows)``. Deterministic for a given seed.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"kmeans needs a non-empty (n, d) array, got shape {x.shape}")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"kmeans needs k >= 1 (got {k!r})")
    uniq = np.unique(x, axis=0)
    k = min(k, uniq.shape[0])
    rng = np.random.default_rng(seed)
    centroids = np.empty((k, x.shape[1]))
    centroids[0] = uniq[rng.integers(uniq.shape[0])]
    d2 = ((uniq - centroids[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        total = d2.sum()
        idx = rng.choice(uniq.shape[0], p=d2 / total) if total > 0 else rng.integers(
            uniq.shape[0]
        )
        centroids[j] = uniq[idx]
        d2 = np.minimum(d2, ((uniq - centroids[j]) ** 2).sum(axis=1))
    labels = np.zeros(x.shape[0], dtype=np.int64)
    for it in range(iters):
        dist = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        new_labels = dist.argmin(axis=1)
        if it > 0 and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        for j in range(k):
            members = x[labels == j]
            if len(members):
                centroids[j] = members.mean(axis=0)
            else:  # re-seed an empty cluster at the farthest point
                centroids[j] = x[dist.min(axis=1).argmax()]
    return centroids, labels


def coverage_indices(x: np.ndarray, k: int, *, seed: int = 0, iters: int = 50) -> list[int]:
    """Indices of representative rows: the row nearest each k-means centroid (distinct,
    ascending). ``k >= n`` returns every row (duplicates collapsed)."""
    x = np.asarray(x, dtype=np.float64)
    if k <= 0 or x.shape[0] == 0:
        return []
    centroids, labels = kmeans(x, k, seed=seed, iters=iters)
    reps: set[int] = set()
    for j in range(centroids.shape[0]):
        members = np.flatnonzero(labels == j)
        if not len(members):
            continue
        d = ((x[members] - centroids[j]) ** 2).sum(axis=1)
        reps.add(int(members[d.argmin()]))
    return sorted(reps)


# --------------------------------------------------------------------------------------------
# rehearsal scorer


class RehearsalScorer:
    """Score a memory version on a task by rehearsing the planner's decision.

    ``score(version, task) = truth(task, decide(memory_for(version, task), task))``

    Args:
        decide: the planner's decision under a memory, e.g. ``(memory_text, task) ->
            waypoint`` (the planner with the LLM at temperature 0). Must not move the robot.
        truth: scores a decision against verified experience memory (the relative truth),
            e.g. ``(task, waypoint) -> 1.0 if trusted transitions put the goal there else
            0.0``; returns ``None`` when experience memory cannot tell.
        memory_for: ``(version, task) -> memory`` handed to ``decide``. Default with
            ``store``: the text :meth:`PlanMemoryStore.render` gives for the task as query
            under ``budget_tokens`` -- exactly what the planner would read.
        store: the plan-memory store (needed for the default ``memory_for``).
        budget_tokens: the planner's memory budget for the default ``memory_for``.
        cache_size: decisions cached per (version, task_id); versions are immutable, so a
            cached decision never goes stale (truth is re-evaluated every time).

    ``decide`` raising is caught and scored ``None`` (left out), so a flaky planner cannot
    make the gate accept or reject anything by itself; ``truth`` values are clipped to [0, 1]
    (bools become 0 / 1).
    """

    def __init__(
        self,
        decide: Callable[[Any, GateTask], Any],
        truth: Callable[[GateTask, Any], float | bool | None],
        memory_for: Callable[[int, GateTask], Any] | None = None,
        *,
        store: PlanMemoryStore | None = None,
        budget_tokens: int | None = None,
        cache_size: int = 4096,
    ) -> None:
        if memory_for is None:
            if store is None:
                raise ValueError("RehearsalScorer needs memory_for or a store")

            def memory_for(version: int, task: GateTask) -> str:
                return store.render(version, budget_tokens, query=task.text).text

        if not callable(decide) or not callable(truth):
            raise ValueError("decide and truth must be callables")
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError("cache_size must be an int >= 0")
        self.decide = decide
        self.truth = truth
        self.memory_for = memory_for
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[int, str], Any] = OrderedDict()
        self.decisions_made = 0
        self.errors: list[str] = []

    def decision(self, version: int, task: GateTask) -> Any:
        """The (cached) planner decision for ``task`` under ``version``."""
        key = (int(version), task.task_id)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        d = self.decide(self.memory_for(version, task), task)
        self.decisions_made += 1
        if self.cache_size:
            self._cache[key] = d
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return d

    def __call__(self, version: int, task: GateTask) -> float | None:
        """The score in [0, 1], or ``None`` if the decision failed or truth is unknown."""
        try:
            d = self.decision(version, task)
        except Exception as exc:  # the planner failing is "cannot judge", never a verdict
            self.errors.append(f"v{version} {task.task_id}: {exc}")
            del self.errors[:-100]
            return None
        t = self.truth(task, d)
        if t is None:
            return None
        return float(min(1.0, max(0.0, float(t))))


# --------------------------------------------------------------------------------------------
# the gate


@dataclass
class _TaskRec:
    task: GateTask
    vec: np.ndarray
    last_version: int | None = None
    last_outcome: float | None = None


class JanusGate:
    """The Janus gate.

    Args:
        config: :class:`JanusConfig` (validated here).
        embedder: a :class:`~glove_ros.core.llm.embedding.TextEmbedder` (phi and task vectors).
        scorer: ``scorer(memory_version, task) -> float | None``, e.g. a
            :class:`RehearsalScorer`.
        store: optional :class:`PlanMemoryStore`. When given, :meth:`propose` deploys an
            accepted candidate and rejects a rejected one, and the gate's state (momentum,
            tasks, pools) is saved in the store under ``state_key`` after every decision and
            restored on construction. Without a store the caller applies the decision.
        trigger: default :class:`MomentumTrigger` with ``config.tau``; the ablations are in
            :func:`make_trigger`.

    Typical loop (the plan-gate node)::

        gate.observe_task(GateTask("find:red", "find the red block", {"goal": "red"}), 1.0)
        cand = updater.propose(store, outcome)         # may be None
        if cand is not None:
            decision = gate.propose(cand)              # deployed or rejected in the store
    """

    def __init__(
        self,
        config: JanusConfig,
        embedder: Any,
        scorer: Scorer,
        *,
        store: PlanMemoryStore | None = None,
        trigger: Trigger | None = None,
        state_key: str = "janus",
    ) -> None:
        self.config = config.validate()
        if not hasattr(embedder, "embed_document") or not hasattr(embedder, "embed"):
            raise ValueError("embedder must provide embed() and embed_document() (TextEmbedder)")
        if not callable(scorer):
            raise ValueError("scorer must be a callable (memory_version, task) -> float | None")
        self.embedder = embedder
        self.scorer = scorer
        self.store = store
        self.trigger: Trigger = trigger or MomentumTrigger(self.config.tau)
        self.state_key = state_key
        self.momentum = MomentumTracker(self.config.beta)
        self.update_index = 0
        self.comparisons = 0
        self._tasks: OrderedDict[str, _TaskRec] = OrderedDict()
        self._fresh: deque[str] = deque(maxlen=max(1, self.config.fresh_max))
        self._boundary: deque[str] = deque(maxlen=max(1, self.config.boundary_max))
        self.decisions: deque[GateDecision] = deque(maxlen=200)
        if store is not None:
            saved = store.get_state(state_key)
            if saved is not None:
                self.load_state(saved)

    # -- tasks
    def observe_task(
        self, task: GateTask, outcome: float | bool | None = None, version: int | None = None
    ) -> None:
        """Record a task the robot did (fresh part; coverage pool).

        ``outcome`` (score of the real run, e.g. success 1.0 / 0.0) and ``version`` (the plan
        memory it ran under; default the store's active version) let the gate notice a flip:
        the same task with a different outcome under a different version joins the boundary
        part. Raises ``ValueError`` for an invalid task (nothing recorded).
        """
        task.validate()
        if outcome is not None:
            if not _num(float(outcome)):
                raise ValueError(f"outcome must be a finite number (got {outcome!r})")
            outcome = float(outcome)
        if version is None and self.store is not None:
            version = self.store.active_version
        rec = self._tasks.get(task.task_id)
        if rec is None or rec.task.text != task.text:
            vec = np.asarray(self.embedder.embed([task.text])[0], dtype=np.float64)
            rec = _TaskRec(task, vec, rec.last_version if rec else None,
                           rec.last_outcome if rec else None)
        else:
            rec = _TaskRec(task, rec.vec, rec.last_version, rec.last_outcome)
        if (
            outcome is not None
            and rec.last_outcome is not None
            and version is not None
            and rec.last_version is not None
            and version != rec.last_version
            and outcome != rec.last_outcome
        ):
            self._add_boundary(task.task_id)
        if outcome is not None:
            rec.last_outcome, rec.last_version = outcome, version
        self._tasks[task.task_id] = rec
        self._tasks.move_to_end(task.task_id)
        while len(self._tasks) > self.config.max_tasks:
            old, _ = self._tasks.popitem(last=False)
            for pool in (self._fresh, self._boundary):
                if old in pool:
                    pool.remove(old)
        if self.config.fresh_max:
            if task.task_id in self._fresh:
                self._fresh.remove(task.task_id)
            self._fresh.append(task.task_id)

    def _add_boundary(self, task_id: str) -> None:
        if not self.config.boundary_max:
            return
        if task_id in self._boundary:
            self._boundary.remove(task_id)
        self._boundary.append(task_id)

    @property
    def tasks_seen(self) -> int:
        """Tasks remembered for coverage."""
        return len(self._tasks)

    def evaluation_set(self) -> tuple[list[GateTask], list[GateTask], list[GateTask]]:
        """E_t as (coverage, boundary, fresh), disjoint, in that priority."""
        ids = list(self._tasks)
        cov_ids: list[str] = []
        if self.config.coverage_k and ids:
            x = np.stack([self._tasks[i].vec for i in ids])
            cov_ids = [ids[j] for j in coverage_indices(
                x, self.config.coverage_k, seed=self.config.seed, iters=self.config.kmeans_iters
            )]
        taken = set(cov_ids)
        bnd_ids = []
        if self.config.boundary_max:
            for i in reversed(self._boundary):  # most recent flips first
                if i not in taken and i in self._tasks:
                    bnd_ids.append(i)
                    taken.add(i)
        fresh_ids = []
        if self.config.fresh_max:
            for i in reversed(self._fresh):
                if i not in taken and i in self._tasks:
                    fresh_ids.append(i)
                    taken.add(i)
        get = self._tasks.__getitem__
        return (
            [get(i).task for i in cov_ids],
            [get(i).task for i in bnd_ids],
            [get(i).task for i in fresh_ids],
        )

    # -- the decision
    def _phi(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_document(text), dtype=np.float64)

    def propose(self, candidate: CandidateLike) -> GateDecision:
        """Decide on ``candidate`` (M_hat_t built on M_{t-1} = its base version).

        With a store, the decision is applied there (deploy or reject) before returning.
        The gate never raises on a scorer failure: it rejects the candidate (memory
        unchanged) and says why. Raises ``ValueError`` only for a malformed candidate.
        """
        for attr in ("version", "base_version", "text", "base_text"):
            if not hasattr(candidate, attr):
                raise ValueError(f"candidate has no {attr!r} (pass a plan_memory.Candidate)")
        self.update_index += 1
        t = self.update_index
        cfg = self.config
        z = self._phi(candidate.text) - self._phi(candidate.base_text)
        nan = math.nan

        def decide(verdict: Verdict, triggered: bool, cos: float, reason: str,
                   so: float = nan, sn: float = nan, parts: tuple[int, int, int] = (0, 0, 0),
                   eval_ids: tuple[str, ...] = (), scored: int = 0) -> GateDecision:
            return self._finish(
                candidate, z, GateDecision(
                    t, verdict, triggered, cos, float(cfg.tau), so, sn, *parts,
                    active_version=-1, candidate_version=int(candidate.version),
                    base_version=int(candidate.base_version), reason=reason,
                    eval_task_ids=eval_ids, scored_tasks=scored,
                ),
            )

        if not np.any(np.abs(z) > 1e-9):
            return decide(Verdict.ACCEPTED_DIRECT, False, nan,
                          "no change to the memory text: accepted without comparison")
        in_warmup = self.trigger.uses_warmup and self.momentum.steps < cfg.warmup
        if in_warmup:
            return decide(Verdict.ACCEPTED_DIRECT, False, nan,
                          f"warm-up update {self.momentum.steps + 1} of {cfg.warmup}: accepted")
        cos = self.momentum.cosine(z)
        fires_on = getattr(self.trigger, "fires_on", None)
        fired = fires_on(candidate, t, cos) if fires_on is not None else \
            self.trigger.fires(t, cos)
        detail = getattr(self.trigger, "last_reason", "")
        if not fired:
            why = (
                f"cos(z, m) = {cos:.3f} >= tau = {cfg.tau:.3f}: consistent with momentum"
                if self.trigger.name == "momentum"
                else f"{self.trigger.name} trigger did not fire"
                + (f" ({detail})" if detail else "")
            )
            return decide(Verdict.ACCEPTED_DIRECT, False, cos, why + "; accepted directly")

        # triggered: compare on E_t
        cov, bnd, fresh = self.evaluation_set()
        parts = (len(cov), len(bnd), len(fresh))
        tasks = cov + bnd + fresh
        eval_ids = tuple(x.task_id for x in tasks)
        self.comparisons += 1
        trig = (
            f"cos(z, m) = {cos:.3f} < tau = {cfg.tau:.3f}" if self.trigger.name == "momentum"
            else f"{self.trigger.name} trigger fired" + (f" ({detail})" if detail else "")
        )
        if not tasks:
            self._fresh.clear()
            return decide(Verdict.ACCEPTED_COMPARED, True, cos,
                          f"{trig}; no tasks seen yet to compare on: accepted", parts=parts)
        old_scores: list[float] = []
        new_scores: list[float] = []
        try:
            for task in tasks:
                so = self.scorer(int(candidate.base_version), task)
                sn = self.scorer(int(candidate.version), task)
                if so is None or sn is None:
                    continue
                so, sn = float(so), float(sn)
                if not (_num(so) and _num(sn)):
                    raise ValueError(f"non-finite score for task {task.task_id!r}")
                old_scores.append(so)
                new_scores.append(sn)
                if so != sn:
                    self._add_boundary(task.task_id)
        except Exception as exc:
            self._fresh.clear()
            return decide(Verdict.REJECTED, True, cos,
                          f"{trig}; scorer failed ({type(exc).__name__}: {exc}): "
                          "old memory kept", parts=parts, eval_ids=eval_ids)
        self._fresh.clear()
        n = len(old_scores)
        if n == 0:
            return decide(Verdict.ACCEPTED_COMPARED, True, cos,
                          f"{trig}; none of the {len(tasks)} evaluation tasks could be "
                          "judged: accepted", parts=parts, eval_ids=eval_ids)
        so_m, sn_m = float(np.mean(old_scores)), float(np.mean(new_scores))
        wins = sn_m > so_m or (sn_m == so_m and cfg.accept_ties)
        summary = (
            f"{trig}; on {n} judged of {len(tasks)} evaluation tasks (coverage {parts[0]}, "
            f"boundary {parts[1]}, fresh {parts[2]}) new {sn_m:.3f} vs old {so_m:.3f}"
        )
        if wins:
            return decide(Verdict.ACCEPTED_COMPARED, True, cos, summary + ": candidate wins",
                          so_m, sn_m, parts, eval_ids, n)
        tie = " (tie keeps the old memory)" if sn_m == so_m else ""
        return decide(Verdict.REJECTED, True, cos, summary + f": old memory kept{tie}",
                      so_m, sn_m, parts, eval_ids, n)

    def _finish(self, candidate: CandidateLike, z: np.ndarray, d: GateDecision) -> GateDecision:
        verdict, reason = d.verdict, d.reason
        if self.store is not None and isinstance(candidate, Candidate):
            if verdict != Verdict.REJECTED:
                try:
                    self.store.deploy(candidate, reason=f"janus t={d.update_index}: {reason}")
                except StaleCandidateError as exc:
                    verdict, reason = Verdict.REJECTED, f"{reason}; but not deployed: {exc}"
            if verdict == Verdict.REJECTED:
                try:
                    self.store.reject(candidate, reason=f"janus t={d.update_index}: {reason}")
                except ValueError:
                    pass  # already not a candidate (e.g. deployed or rejected elsewhere)
            active = self.store.active_version
        else:
            active = int(candidate.version if verdict != Verdict.REJECTED
                         else candidate.base_version)
        if verdict != Verdict.REJECTED and np.any(np.abs(z) > 1e-9):
            self.momentum.update(z)
        d = GateDecision(
            d.update_index, verdict, d.triggered, d.cosine, d.tau, d.score_old, d.score_new,
            d.eval_coverage, d.eval_boundary, d.eval_fresh, active, d.candidate_version,
            d.base_version, reason, d.eval_task_ids, d.scored_tasks,
        )
        self.decisions.append(d)
        if self.store is not None:
            self.store.set_state(self.state_key, self.state_dict())
        return d

    # -- explanation and state
    @staticmethod
    def explain(decision: GateDecision) -> str:
        """One paragraph a person can read."""
        v = Verdict(decision.verdict)
        head = {
            Verdict.ACCEPTED_DIRECT: "accepted without comparison",
            Verdict.ACCEPTED_COMPARED: "accepted after comparison",
            Verdict.REJECTED: "rejected",
        }[v]
        cos = "n/a" if math.isnan(decision.cosine) else f"{decision.cosine:.3f}"
        text = (
            f"Update {decision.update_index}: candidate version {decision.candidate_version} "
            f"(built on version {decision.base_version}) was {head}. "
            f"Momentum cosine {cos} against tau {decision.tau:.3f}; "
            f"{'compared' if decision.triggered else 'not compared'}. "
        )
        if decision.triggered:
            n = decision.eval_coverage + decision.eval_boundary + decision.eval_fresh
            if math.isnan(decision.score_old):
                text += f"Evaluation set of {n} tasks gave no scores. "
            else:
                text += (
                    f"Evaluation set of {n} tasks ({decision.eval_coverage} coverage, "
                    f"{decision.eval_boundary} boundary, {decision.eval_fresh} fresh; "
                    f"{decision.scored_tasks} judged): old memory scored "
                    f"{decision.score_old:.3f}, candidate {decision.score_new:.3f}. "
                )
        text += f"Active version is now {decision.active_version}. Reason: {decision.reason}."
        return text

    def state_dict(self) -> dict[str, Any]:
        """JSON-able gate state (momentum, counters, tasks, pools)."""
        m = self.momentum.m
        return {
            "m": None if m is None else [float(x) for x in m],
            "steps": self.momentum.steps,
            "update_index": self.update_index,
            "comparisons": self.comparisons,
            "tasks": [
                {"id": r.task.task_id, "text": r.task.text, "data": dict(r.task.data),
                 "last_version": r.last_version, "last_outcome": r.last_outcome}
                for r in self._tasks.values()
            ],
            "fresh": list(self._fresh),
            "boundary": list(self._boundary),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (task vectors are re-embedded).

        Raises ``ValueError`` on a malformed state (the gate is left unchanged).
        """
        try:
            m = state["m"]
            m_arr = None if m is None else np.asarray(m, dtype=np.float64)
            steps, t, comps = int(state["steps"]), int(state["update_index"]), int(
                state["comparisons"]
            )
            tasks = [
                (GateTask(x["id"], x["text"], dict(x.get("data", {}))).validate(),
                 x.get("last_version"), x.get("last_outcome"))
                for x in state["tasks"]
            ]
            fresh, boundary = list(state["fresh"]), list(state["boundary"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed Janus gate state: {exc}") from exc
        vecs = self.embedder.embed([x[0].text for x in tasks]) if tasks else []
        recs: OrderedDict[str, _TaskRec] = OrderedDict()
        for (task, lv, lo), vec in zip(tasks, vecs, strict=True):
            recs[task.task_id] = _TaskRec(task, np.asarray(vec, dtype=np.float64), lv, lo)
        self.momentum.m, self.momentum.steps = m_arr, steps
        self.update_index, self.comparisons = t, comps
        self._tasks = recs
        self._fresh = deque((i for i in fresh if i in recs), maxlen=self._fresh.maxlen)
        self._boundary = deque((i for i in boundary if i in recs), maxlen=self._boundary.maxlen)

