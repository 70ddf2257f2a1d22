"""The GLOVE verifier: detect memory-environment drift, build relative truth, realign memory.

Implements papers/glove.md ("关键设计") as DESIGN.md section 3 states it, over an
:class:`~glove_ros.core.memory.store.ExperienceStore`. For each new transition
e_t = (s_t, a_t, s'_t)
:meth:`GloveVerifier.observe`:

1. finds the neighbourhood N(e_t) = { trusted e_k : s_k ~ s_t, a_k = a_t, same action_arg }
   under the configured equivalence rule (:mod:`glove_ros.core.memory.equivalence`);
2. if N is non-empty, computes Q_hist(. | s_t, a_t), the empirical outcome distribution of N
   (outcome signatures, never raw data);
3. surprise: Q_hist(s'_t) < epsilon. A per-(s, a) counter counts consecutive surprises and
   resets on a non-surprise; dissonance fires at ``p_th`` consecutive surprises. The
   surprising transitions of the current run (the "streak") are stored but left out of
   Q_hist until the run ends, so that p_th new-world samples cannot dilute the old
   distribution below detection. The counter is persisted in the store (written only when it
   changes, so steady state costs nothing) and survives restarts;
4. on dissonance, the refuted part of N (every trusted neighbour except the streak) is
   suppressed from retrieval at once and (s, a) joins the persistent pending queue P;
5. realignment, by mode:

   - ``sync`` (simulation, or actions declared safe and repeatable): the result carries a
     :class:`ProbeRequest` for alpha fresh samples; :meth:`GloveVerifier.apply_probes`
     performs D <- (D -_m N(e_t)) +_m {(s_t, a_t, s'_j)}_{j<=alpha}: the suppressed entries
     and the current trusted neighbourhood become REPLACED by exactly the probed outcomes
     (source PROBED). Actions in ``never_probe``, or a request that does not fit the
     remaining ``max_probe_budget``, fall back to async handling; so does a cancelled probe.
   - ``async`` (replay-relaxed, the physical-robot default): no probe is ever requested.
     Later natural visits of the same (state_key, action, action_arg) are recorded as
     ordinary trusted entries and added as evidence to the pending item; when the evidence
     is significant, i.e. it holds ``evidence_threshold`` samples (default alpha, the
     paper's sample complexity 2 (K ln 2 + ln(1/delta)) / epsilon^2, which is 1 in a
     deterministic world), the suppressed entries become REPLACED by the evidence entries
     and the item leaves P. The streak itself is not counted as evidence: like the paper's
     probes, evidence is gathered after the alarm. With the bayes detector, when the
     evidence shows the very outcome the alarm contradicted (the alarm was noise: two
     missed detections in a row, a slip), the suppressed entries are *restored* instead
     (decision RESTORE, history weight kept), the alarm's run enters the noise tally it
     was kept out of, and that outcome seen again during the re-verification is evidence,
     never a second alarm. The pending queue lives in the store and
     survives restarts; probe requests are in memory only (after a restart the pair simply
     completes asynchronously).

Alpha uses ``probe_epsilon`` (default: ``epsilon``), K = ``k_modes`` and ``delta``. Nuisance
does not fire: a single missed detection is one surprise (below p_th >= 2), and pose jitter
inside the pose rule's radius keeps the same neighbourhood. Verification cost (probes,
suppressions) is zero in steady state: a non-surprising transition writes only itself.

The self-confirming deadlock, and the rule that breaks it
----------------------------------------------------------
A negative memory (an outcome signalling failure: ``negative_outcomes`` such as ``hole`` or
``blocked``, or a reward <= ``negative_reward_at_most``; both configurable, or pass
``is_negative``) makes the planner avoid its action, so natural interaction never produces
the sample that would refute it; after the world re-opens the action, local update rules stay
wrong forever (papers/glove.md, "自确认探索死锁"). The verifier therefore re-tests negative
memories whose evidence is stale, in two situations:

- after any dissonance (the world demonstrably changed at the streak's first surprise T_w;
  the planner calls :meth:`GloveVerifier.recheck_negatives`, or set
  ``recheck_on_dissonance``): a (state, action) group is *suspect* if its trusted entries are
  all negative and its newest trusted entry is older than T_w (not re-confirmed since);
- when the planner is stuck (``stuck=True``: its trusted memory allows no route), a group is
  also suspect if it is all-negative and has not been re-confirmed within the last
  ``stale_negative_after`` recorded transitions.

Groups are (state_key, action, action_arg); mixed groups (some positive outcome) are not
deadlocked, since the planner still sees a chance of success and keeps sampling them.

Suspect groups whose action is in ``never_probe`` are never touched. The others are suppressed
and queued in P (so the planner may try them again; nothing is forced), and in ``sync`` mode a
ProbeRequest is issued within the remaining probe budget. Why this is sound: (1) only staleness
relative to positive evidence of change (a dissonance) or to a bounded interaction window is
acted on, so a fresh negative, just observed, is never doubted; (2) each re-test either
refutes the memory (replaced by the fresh outcome) or re-confirms it with a new entry, which
makes it non-suspect again until the next dissonance or ``stale_negative_after`` more
interactions, so re-tests are bounded (at most one per negative group per dissonance, plus one
per window while stuck) and zero in steady state; (3) nothing is deleted: suppressed negatives
stay in history and are restored by :meth:`ExperienceStore.restore`; (4) dangerous actions
(``never_probe``) are excluded, so breaking the deadlock never exposes a physical robot to
an action declared unsafe.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from glove_ros.core.memory.equivalence import RULE_NAMES, EquivalenceRule, make_rule
from glove_ros.core.memory.experience import MemoryEntry, Source, Status, Transition
from glove_ros.core.memory.store import ExperienceStore, OutcomeGroup
from glove_ros.core.verify.detection import NoiseEstimate, history_mode, log_bayes_factor

__all__ = [
    "DEFAULT_NEGATIVE_OUTCOMES",
    "DETECTORS",
    "DissonanceAlert",
    "GloveVerifier",
    "ProbeRequest",
    "Realignment",
    "RecheckResult",
    "VerifierConfig",
    "VerifyResult",
    "hoeffding_bound",
    "probe_budget",
]

#: outcome signatures treated as negative (failure) by default
DEFAULT_NEGATIVE_OUTCOMES = ("hole", "blocked", "collision", "failed", "unreachable")

_STREAK = "glove.streak:"
_WORLD_MARK = "glove.world_mark"
_CHANGE_MARK = "glove.change_mark"  # outside evidence of change (note_world_change)
_NOISE = "glove.noise"
_NOISE_EVERY = 64  # agreeing comparisons between two writes of the noise tally
_ALARM_RUN = "glove.alarm_run:"  # + pending key: the relation kinds of an alarm's run
_VOLATILE = "glove.volatile"  # pairs whose memory a (not refuted) alarm overturned
_VOLATILE_MAX = 512
#: detection rules: the calibrated Bayes-factor test (default) and the paper's p_th count
DETECTORS = ("bayes", "p_th")
_TUPLE_FIELDS = ("never_probe", "negative_outcomes", "unique_objects", "symmetric_actions")


def hoeffding_bound(n: int, delta: float) -> float:
    """sqrt(ln(2 / delta) / (2 n)): with probability >= 1 - delta, |Q_hist - Q| is below it.

    ``n`` samples (infinite for n = 0), 0 < delta < 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"hoeffding_bound needs an integer n >= 0, got {n!r}")
    if not 0 < delta < 1:
        raise ValueError(f"hoeffding_bound needs 0 < delta < 1, got {delta!r}")
    if n == 0:
        return math.inf
    return math.sqrt(math.log(2.0 / delta) / (2.0 * n))


def probe_budget(k: int, epsilon: float, delta: float) -> int:
    """alpha = ceil(2 (K ln 2 + ln(1/delta)) / epsilon^2); 1 for K = 1 (deterministic)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"probe_budget needs an integer number of outcome modes K >= 1, got {k!r}")
    if not 0 < epsilon <= 1:
        raise ValueError(f"probe_budget needs 0 < epsilon <= 1, got {epsilon!r}")
    if not 0 < delta < 1:
        raise ValueError(f"probe_budget needs 0 < delta < 1, got {delta!r}")
    if k == 1:
        return 1
    value = 2.0 * (k * math.log(2.0) + math.log(1.0 / delta)) / (epsilon * epsilon)
    return max(1, math.ceil(value - 1e-9))


def _objects(outcome: str) -> set[str]:
    """Objects named by an outcome signature ``key=a,b`` (or ``a,b``)."""
    body = outcome.split("=", 1)[1] if "=" in outcome else outcome
    return {p.strip() for p in body.split(",") if p.strip()}


def _pair_name(state_key: str, action: str, action_arg: str) -> str:
    return f"({state_key!r}, {action}{'(' + action_arg + ')' if action_arg else ''})"


@dataclass(frozen=True)
class VerifierConfig:
    """Verifier parameters (DESIGN.md section 3); ``validate()`` explains bad values.

    ``mode``: ``"async"`` (replay-relaxed, default for physical robots) or ``"sync"``.
    ``epsilon``: surprise threshold on Q_hist(s'). ``p_th``: consecutive surprises that make a
    dissonance. ``delta``: confidence failure rate. ``k_modes``: outcome modes K per
    (s, a). ``probe_epsilon``: target error of the relative truth in alpha (None: epsilon).
    ``rule`` / ``radius``: equivalence rule (radius in metres, used by ``pose`` only).
    ``never_probe``: actions never probed nor re-tested (unsafe or irreversible).
    ``max_probe_budget``: total probe samples this verifier instance may request (None:
    unlimited; 0: never probe; :meth:`GloveVerifier.reset_probe_budget` refills it).
    ``evidence_threshold``: fresh samples that complete an async re-verification (0: alpha).
    ``min_history``: smallest |N(e)| at which surprise counts.
    ``negative_outcomes`` / ``negative_reward_at_most``: what counts as a negative memory.
    ``recheck_on_dissonance``: re-test stale negatives automatically after each dissonance
    (off by default: a semantic drift need not re-open every known wall; the planner calls
    :meth:`GloveVerifier.recheck_negatives` when an alert concerns its routes).
    ``stale_negative_after``: recorded transitions after which a stuck planner may re-test a
    negative memory that was not re-confirmed.
    ``detector``: ``"bayes"`` (default: the calibrated sequential test of
    :mod:`glove_ros.core.verify.detection`, no tuning) or ``"p_th"`` (the paper's rule: ``p_th``
    consecutive surprises). ``alarm_delta``: the bayes test's false-alarm probability per
    test (threshold ln(1 / alarm_delta) on the log Bayes factor).
    ``noise_prior_rate`` / ``noise_prior_weight``: prior of the observation-noise rate the
    bayes test estimates online per action kind (a rate, and its weight in pseudo-samples).
    ``min_miss_rate``: the bayes test never takes a missed object (an ``object_action``
    outcome that only lacks objects memory shows) as less likely than this.
    With the bayes detector an async re-verification also needs as many fresh samples as
    it takes for the action's noise to be ruled out (eta^k <= alarm_delta; 1 in a
    deterministic world, 3 with 10% missed detections).
    ``unique_objects``: objects (e.g. colours of blocks) known to exist once in the world;
    an ``object_action`` outcome ``key=a,b`` that shows one at a new state is evidence
    against every other state's memory of it (suppressed at once).
    ``symmetric_actions``: actions whose outcome is the same in both directions of an
    undirected link (``navigate_to`` a neighbour): (s, a, t) and (t, a, s) share evidence.
    ``stale_negative_recheck``: the deadlock rule (a project extension; off = ablation).
    ``recheck_volatile_first``: re-test first the remembered failures at places where an
    alarm already overturned memory or whose memory holds a success besides the failures
    (a door that closed once is likelier to re-open than a wall that never changed).
    A detour (remembered failures block a shorter route) re-tests
    only those; a stuck planner re-tests those first and the others once they are
    re-confirmed, or at once when no such place is suspect (a project extension; off =
    ablation).
    ``structured_noise``: learn a noise rate per kind of disagreement where the caller
    gives a ``noise_relation`` (structured outcomes of the in-process adapters; a project
    extension, off = ablation); no effect on the memory node's string outcomes.
    """

    mode: str = "async"
    epsilon: float = 0.1
    p_th: int = 3
    delta: float = 0.05
    k_modes: int = 1
    probe_epsilon: float | None = None
    rule: str = "waypoint"
    radius: float = 0.3
    never_probe: tuple[str, ...] = ()
    max_probe_budget: int | None = 30
    evidence_threshold: int = 0
    min_history: int = 1
    negative_outcomes: tuple[str, ...] = DEFAULT_NEGATIVE_OUTCOMES
    negative_reward_at_most: float | None = None
    recheck_on_dissonance: bool = False
    stale_negative_after: int = 50
    detector: str = "bayes"
    alarm_delta: float = 0.005
    min_miss_rate: float = 0.02
    noise_prior_rate: float = 0.05
    noise_prior_weight: float = 5.0
    unique_objects: tuple[str, ...] = ()
    object_action: str = "look"
    symmetric_actions: tuple[str, ...] = ("navigate_to",)
    stale_negative_recheck: bool = True
    recheck_volatile_first: bool = True
    structured_noise: bool = True

    def validate(self) -> VerifierConfig:
        """Raise ``ValueError`` with an actionable message; return ``self`` when valid."""

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if self.mode not in ("async", "sync"):
            raise ValueError(
                f"verifier mode must be 'async' (physical robot) or 'sync' (replayable), "
                f"got {self.mode!r}"
            )
        if not is_num(self.epsilon) or not 0 < self.epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {self.epsilon!r}")
        if not is_int(self.p_th) or self.p_th < 1:
            raise ValueError(f"p_th must be an integer >= 1, got {self.p_th!r}")
        if not is_num(self.delta) or not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if not is_int(self.k_modes) or self.k_modes < 1:
            raise ValueError(f"k_modes must be an integer >= 1, got {self.k_modes!r}")
        if self.probe_epsilon is not None and (
            not is_num(self.probe_epsilon) or not 0 < self.probe_epsilon <= 1
        ):
            raise ValueError(f"probe_epsilon must be in (0, 1] or None, got {self.probe_epsilon!r}")
        if self.rule not in RULE_NAMES:
            raise ValueError(
                f"rule must be one of {', '.join(RULE_NAMES)}, got {self.rule!r}"
            )
        if not is_num(self.radius) or self.radius <= 0:
            raise ValueError(f"radius must be a number of metres > 0, got {self.radius!r}")
        for name in ("never_probe", "negative_outcomes"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(
                isinstance(v, str) and v for v in value
            ):
                raise ValueError(f"{name} must be a tuple of non-empty strings, got {value!r}")
        if self.max_probe_budget is not None and (
            not is_int(self.max_probe_budget) or self.max_probe_budget < 0
        ):
            raise ValueError(
                f"max_probe_budget must be an integer >= 0 or None (unlimited), "
                f"got {self.max_probe_budget!r}"
            )
        if not is_int(self.evidence_threshold) or self.evidence_threshold < 0:
            raise ValueError(
                f"evidence_threshold must be an integer >= 0 (0: alpha), "
                f"got {self.evidence_threshold!r}"
            )
        if not is_int(self.min_history) or self.min_history < 1:
            raise ValueError(f"min_history must be an integer >= 1, got {self.min_history!r}")
        if self.negative_reward_at_most is not None and not is_num(self.negative_reward_at_most):
            raise ValueError(
                f"negative_reward_at_most must be a finite number or None, "
                f"got {self.negative_reward_at_most!r}"
            )
        if not isinstance(self.recheck_on_dissonance, bool):
            raise ValueError("recheck_on_dissonance must be true or false")
        if self.detector not in DETECTORS:
            raise ValueError(
                f"detector must be one of {', '.join(DETECTORS)} ('bayes': calibrated, "
                f"'p_th': the paper's consecutive-surprise count), got {self.detector!r}"
            )
        if not is_num(self.alarm_delta) or not 0 < self.alarm_delta < 0.5:
            raise ValueError(f"alarm_delta must be in (0, 0.5), got {self.alarm_delta!r}")
        if not is_num(self.min_miss_rate) or not 0 < self.min_miss_rate < 0.5:
            raise ValueError(f"min_miss_rate must be in (0, 0.5), got {self.min_miss_rate!r}")
        if not is_num(self.noise_prior_rate) or not 0 < self.noise_prior_rate < 0.5:
            raise ValueError(
                f"noise_prior_rate must be in (0, 0.5), got {self.noise_prior_rate!r}")
        if not is_num(self.noise_prior_weight) or self.noise_prior_weight <= 0:
            raise ValueError(
                f"noise_prior_weight must be > 0 pseudo-samples, got {self.noise_prior_weight!r}")
        for name in ("unique_objects", "symmetric_actions"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{name} must be a tuple of non-empty strings, got {value!r}")
        if not isinstance(self.object_action, str) or not self.object_action:
            raise ValueError("object_action must be a non-empty action name")
        if not isinstance(self.stale_negative_recheck, bool):
            raise ValueError("stale_negative_recheck must be true or false")
        if not isinstance(self.recheck_volatile_first, bool):
            raise ValueError("recheck_volatile_first must be true or false")
        if not isinstance(self.structured_noise, bool):
            raise ValueError("structured_noise must be true or false")
        if not is_int(self.stale_negative_after) or self.stale_negative_after < 0:
            raise ValueError(
                f"stale_negative_after must be an integer >= 0, got {self.stale_negative_after!r}"
            )
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerifierConfig:
        """Build from a mapping (a YAML section or ROS parameters); validates.

        Lists become tuples; a comma-separated string is accepted for the tuple fields.
        Unknown keys raise ``ValueError`` listing the accepted ones.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"verifier config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown verifier config key(s): {', '.join(unknown)}; "
                f"accepted: {', '.join(sorted(known))}"
            )
        values = dict(data)
        for name in _TUPLE_FIELDS:
            v = values.get(name)
            if isinstance(v, str):
                values[name] = tuple(p.strip() for p in v.split(",") if p.strip())
            elif isinstance(v, (list, tuple)):
                values[name] = tuple(v)
        for name in ("epsilon", "delta", "radius", "probe_epsilon", "negative_reward_at_most",
                     "alarm_delta", "noise_prior_rate", "noise_prior_weight",
                     "min_miss_rate"):
            v = values.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                values[name] = float(v)
        return cls(**values).validate()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (tuples as lists), the inverse of :meth:`from_dict`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _TUPLE_FIELDS:
            out[name] = list(out[name])
        return out

    @property
    def alpha(self) -> int:
        """Samples needed for relative truth: :func:`probe_budget` of this config."""
        eps = self.probe_epsilon if self.probe_epsilon is not None else self.epsilon
        return probe_budget(self.k_modes, eps, self.delta)

    @property
    def required_evidence(self) -> int:
        """Fresh samples that complete an async re-verification."""
        return self.evidence_threshold or self.alpha

    def make_rule(self) -> EquivalenceRule:
        """The configured equivalence rule."""
        return make_rule(self.rule, radius=self.radius if self.rule == "pose" else None)

    def is_negative(self, outcome: str, reward: float = 0.0) -> bool:
        """Default negativity predicate: a negative outcome signature or a low reward."""
        if outcome in self.negative_outcomes:
            return True
        return self.negative_reward_at_most is not None and reward <= self.negative_reward_at_most


class Realignment(str, Enum):
    """What :meth:`GloveVerifier.observe` did to memory."""

    NONE = "none"  # nothing beyond recording
    EVIDENCE = "evidence"  # added fresh evidence to a pending re-verification
    REPLACE = "replace"  # evidence became significant: stale entries replaced
    RESTORE = "restore"  # evidence brought back what an alarm doubted: it was noise
    SUPPRESS = "suppress"  # dissonance: stale entries suppressed and queued (async handling)
    PROBE = "probe"  # dissonance: suppressed, queued and a probe requested (sync)


@dataclass(frozen=True)
class DissonanceAlert:
    """p_th consecutive surprises for one (state, action): memory contradicts the world.

    Mirrors ``msg/DissonanceAlert.msg``; ``expected`` is Q_hist as (outcome, probability)
    pairs, most likely first. ``mode`` is the handling actually applied (``"sync"`` only
    when a probe was requested).
    """

    state_key: str
    action: str
    action_arg: str
    observed_outcome: str
    expected: tuple[tuple[str, float], ...]
    observed_probability: float
    history_size: int
    hoeffding_bound: float
    consecutive_surprises: int
    mode: str
    suppressed_ids: tuple[int, ...]
    probes_requested: int
    entry_id: int = 0
    stamp: float = 0.0
    reason: str = ""
    log_bayes_factor: float | None = None
    noise_rate: float | None = None
    kind: str = "dissonance"

    @property
    def expected_outcomes(self) -> list[str]:
        """Outcome modes of Q_hist, most likely first."""
        return [o for o, _ in self.expected]

    @property
    def expected_probabilities(self) -> list[float]:
        """Their probabilities, same order."""
        return [p for _, p in self.expected]


@dataclass(frozen=True)
class ProbeRequest:
    """Ask the caller to repeat (state, action) ``alpha`` times now (sync mode).

    ``transition`` is the template precondition (pose included); ``reason`` is
    ``"dissonance"`` or ``"stale_negative"``; ``pending_key`` the queue item it resolves.
    Hand the outcomes back with :meth:`GloveVerifier.apply_probes` or give up with
    :meth:`GloveVerifier.cancel_probe` (the pair then stays suppressed and pending).
    """

    request_id: int
    state_key: str
    action: str
    action_arg: str
    alpha: int
    reason: str
    transition: Transition
    pending_key: int

    @property
    def pair(self) -> tuple[str, str, str]:
        """``(state_key, action, action_arg)``."""
        return (self.state_key, self.action, self.action_arg)


@dataclass(frozen=True)
class RecheckResult:
    """Stale negative memories found by the deadlock rule and what was done with them."""

    candidates: tuple[MemoryEntry, ...] = ()
    pairs: tuple[tuple[str, str, str], ...] = ()
    suppressed_ids: tuple[int, ...] = ()
    probe_requests: tuple[ProbeRequest, ...] = ()


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :meth:`GloveVerifier.observe` for one transition.

    ``observed_probability`` is Q_hist(s') (None when N(e) was empty), ``history_size`` the
    |N(e)| it was computed on. ``decision`` says what memory realignment happened;
    ``suppressed_ids`` / ``replaced_ids`` / ``new_ids`` list the entries it touched (including
    stale negatives re-tested after a dissonance, see ``recheck``).
    """

    entry_id: int
    surprise: bool
    observed_probability: float | None
    history_size: int
    consecutive_surprises: int
    decision: Realignment = Realignment.NONE
    alert: DissonanceAlert | None = None
    probe_requests: tuple[ProbeRequest, ...] = ()
    suppressed_ids: tuple[int, ...] = ()
    replaced_ids: tuple[int, ...] = ()
    new_ids: tuple[int, ...] = ()
    pending_evidence: int = 0
    recheck: RecheckResult | None = None
    object_alerts: tuple[DissonanceAlert, ...] = ()
    log_bayes_factor: float | None = None

    @property
    def alerts(self) -> tuple[DissonanceAlert, ...]:
        """Every alert this observation raised: the pair's own, then object-level ones."""
        return ((self.alert,) if self.alert is not None else ()) + self.object_alerts

    @property
    def probe_request(self) -> ProbeRequest | None:
        """The first probe request (the dissonance's own, if any), or None."""
        return self.probe_requests[0] if self.probe_requests else None


_COUNTERS = (
    "observations",
    "surprises",
    "alerts",
    "object_alerts",
    "probe_requests",
    "probes",
    "suppressions",
    "replacements",
    "evidence",
    "rechecks",
    "restorations",
    "false_alarms_learnt",
    "world_changes",
)


class GloveVerifier:
    """GLOVE verifier over an experience store (see the module docstring).

    ``is_negative(outcome, reward) -> bool`` overrides the config's negativity predicate; for
    groups it receives the largest reward among the entries with that outcome.
    ``noise_relation(outcome, mode) -> str | None`` names the kind of a disagreement between
    an observed outcome and the remembered mode (e.g. which fields of a structured outcome
    differ); the bayes detector then learns a noise rate per kind (None: no structure, the
    action's one rate), so a kind of disagreement noise never produced is strong evidence
    at once while common ones (slips) still need a run. Thread-safe.
    """

    def __init__(
        self,
        store: ExperienceStore,
        config: VerifierConfig | None = None,
        *,
        is_negative: Callable[[str, float], bool] | None = None,
        noise_relation: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self.store = store
        self._relation = noise_relation
        self.config = (config or VerifierConfig()).validate()
        self.rule = self.config.make_rule()
        self._is_negative = is_negative or self.config.is_negative
        self._lock = threading.RLock()
        self._phase = "default"
        self._stats: dict[str, Counter[str]] = {self._phase: Counter()}
        self._requests: dict[int, ProbeRequest] = {}
        self._next_request = 1
        self._probes_used = 0
        self._streaks: dict[tuple[str, str, str], list[int]] = {}
        self._noise_saved: tuple[int, int] = (-1, -1)  # (disagreements, comparisons) stored
        self._noise = NoiseEstimate.from_json(
            store.get_state(_NOISE), self.config.noise_prior_rate, self.config.noise_prior_weight
        )
        for name, value in store.state_items(_STREAK).items():
            key = tuple(json.loads(name[len(_STREAK):]))
            if len(key) == 3 and isinstance(value, list):
                self._streaks[key] = [int(i) for i in value]  # type: ignore[index]

    # ------------------------------------------------------------------ bookkeeping

    @property
    def phase(self) -> str:
        """Label the statistics are counted under (e.g. ``"source"``, ``"drift_1"``)."""
        return self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("phase must be a non-empty string")
        with self._lock:
            self._phase = value
            self._stats.setdefault(value, Counter())

    def reconfigure(self, config: VerifierConfig) -> None:
        """Apply a new config from the next observation on (live parameter changes).

        Validates first (``ValueError``, nothing changed). Streaks, pending items and
        outstanding probe requests are kept; the equivalence rule is rebuilt.
        """
        config = config.validate()
        rule = config.make_rule()
        with self._lock:
            custom = self._is_negative != self.config.is_negative
            old = self.config
            self.config, self.rule = config, rule
            if (old.noise_prior_rate, old.noise_prior_weight) != (
                    config.noise_prior_rate, config.noise_prior_weight):
                self._noise = NoiseEstimate.from_json(
                    self.store.get_state(_NOISE), config.noise_prior_rate,
                    config.noise_prior_weight)
            self._noise.prior_rate = config.noise_prior_rate
            self._noise.prior_weight = config.noise_prior_weight
            if not custom:
                self._is_negative = config.is_negative

    def _count(self, name: str, n: int = 1) -> None:
        if n:
            self._stats[self._phase][name] += n

    def stats(self) -> dict[str, Any]:
        """Totals and per-phase counts of observations, surprises, alerts, probes, ...

        ``probes`` counts probe samples actually applied, ``probe_requests`` requests issued,
        ``suppressions`` / ``replacements`` / ``restorations`` entries, ``rechecks``
        stale-negative groups, ``false_alarms_learnt`` alarms whose re-verification brought
        the doubted memory back (their run then counts as observation noise),
        ``world_changes`` outside evidence of change (:meth:`note_world_change`).
        """
        with self._lock:
            total: Counter[str] = Counter()
            for c in self._stats.values():
                total.update(c)
            out: dict[str, Any] = {k: int(total.get(k, 0)) for k in _COUNTERS}
            out["phase"] = self._phase
            out["phases"] = {
                p: {k: int(c.get(k, 0)) for k in _COUNTERS} for p, c in self._stats.items()
            }
            out["probe_budget_left"] = self.probe_budget_left
            out["outstanding_probes"] = len(self._requests)
            return out

    @property
    def probe_budget_left(self) -> int | None:
        """Probe samples this verifier may still request (None: unlimited)."""
        if self.config.max_probe_budget is None:
            return None
        return max(0, self.config.max_probe_budget - self._probes_used)

    def reset_probe_budget(self) -> None:
        """Make the full ``max_probe_budget`` available again (e.g. a new run)."""
        with self._lock:
            self._probes_used = 0

    def _reserve(self, n: int) -> bool:
        budget = self.config.max_probe_budget
        if budget is not None and self._probes_used + n > budget:
            return False
        self._probes_used += n
        return True

    def _save_streak(self, key: tuple[str, str, str], ids: list[int] | None) -> None:
        name = _STREAK + json.dumps(list(key))
        if ids:
            self._streaks[key] = ids
            self.store.set_state(name, ids)
        elif key in self._streaks:
            del self._streaks[key]
            self.store.delete_state(name)

    def outstanding_probes(self) -> list[ProbeRequest]:
        """Probe requests issued and not yet applied or cancelled (lost on restart)."""
        with self._lock:
            return list(self._requests.values())

    def _new_request(
        self, template: Transition, alpha: int, reason: str, pending_key: int
    ) -> ProbeRequest:
        req = ProbeRequest(
            request_id=self._next_request,
            state_key=template.state_key,
            action=template.action,
            action_arg=template.action_arg,
            alpha=alpha,
            reason=reason,
            transition=template,
            pending_key=pending_key,
        )
        self._next_request += 1
        self._requests[req.request_id] = req
        self._count("probe_requests")
        return req

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """One store transaction; on failure the in-memory state is rolled back with it."""
        snapshot = (
            dict(self._streaks),
            dict(self._requests),
            self._next_request,
            self._probes_used,
            {p: Counter(c) for p, c in self._stats.items()},
            {a: list(c) for a, c in self._noise.counts.items()},
            self._noise_saved,
        )
        try:
            with self.store.transaction():
                yield
        except BaseException:
            (
                self._streaks, self._requests, self._next_request, self._probes_used,
                self._stats, self._noise.counts, self._noise_saved,
            ) = snapshot
            raise

    def _may_probe(self, action: str) -> bool:
        return self.config.mode == "sync" and action not in self.config.never_probe

    # ------------------------------------------------------------------ Q_hist

    def _mirror(self, t: Transition) -> Transition | None:
        """The other direction of a symmetric action (``navigate_to`` B from A: A from B)."""
        if (t.action in self.config.symmetric_actions and t.action_arg
                and t.action_arg != t.state_key and self.rule.key_based):
            return Transition(t.action_arg, t.action, "?", action_arg=t.state_key)
        return None

    def _q_counts(
        self, t: Transition, streak: Sequence[int]
    ) -> dict[str, int]:
        counts = self.store.outcome_counts(t, self.rule)
        mirror = self._mirror(t)
        if mirror is not None:
            for o, c in self.store.outcome_counts(mirror, self.rule).items():
                counts[o] = counts.get(o, 0) + c
        if streak:
            for e in self.store.get_many(streak):
                if e.trusted and e.transition.action == t.action and (
                    e.transition.action_arg == t.action_arg
                ) and self.rule.equivalent(t, e.transition):
                    o = e.transition.outcome
                    if counts.get(o, 0) > 1:
                        counts[o] -= 1
                    else:
                        counts.pop(o, None)
        return counts

    def _evidence_needed(self, action: str) -> int:
        """Fresh samples that complete an async re-verification of ``action``."""
        cfg = self.config
        need = cfg.required_evidence
        if cfg.detector == "bayes" and not cfg.evidence_threshold:
            kinds = ((f"{action}:loss", f"{action}:other") if action == cfg.object_action
                     else (action,))
            eta = max(self._noise.rate(k) for k in kinds)
            k = math.ceil(math.log(cfg.alarm_delta) / math.log(eta) - 1e-9)
            need = max(need, min(5, k))
        return need

    def noise_rate(self, action: str, kind: str = "") -> float:
        """The observation-noise rate the bayes detector assumes for ``action``; for the
        ``object_action`` give ``kind`` ``"loss"`` (missed objects) or ``"other"``."""
        with self._lock:
            return self._noise.rate(f"{action}:{kind}" if kind else action)

    def _run_outcomes(self, streak: Sequence[int], current: str) -> list[str]:
        """Outcomes of the surprise run: the stored streak entries, then the current one."""
        by_id = {e.id: e.transition.outcome for e in self.store.get_many(streak[:-1])}
        return [by_id[i] for i in streak[:-1] if i in by_id] + [current]

    def distribution(
        self,
        state_key: str,
        action: str,
        action_arg: str = "",
        pose: tuple[float, float, float] | None = None,
    ) -> dict[str, float] | None:
        """Q_hist over the trusted neighbourhood of (state, action): what memory believes.

        None when no trusted entry matches (the planner knows nothing).
        """
        probe = Transition(state_key, action, "?", action_arg=action_arg, pose=pose)
        counts = self.store.outcome_counts(probe, self.rule)
        n = sum(counts.values())
        if not n:
            return None
        return {o: c / n for o, c in sorted(counts.items(), key=lambda kv: -kv[1])}

    # ------------------------------------------------------------------ observe

    def observe(self, transition: Transition) -> VerifyResult:
        """Record ``transition`` and run the verifier on it (see the module docstring).

        Everything this call changes commits atomically with the recorded entry. An invalid
        transition raises ``ValueError`` and nothing is stored.
        """
        if not isinstance(transition, Transition):
            raise ValueError(f"observe() needs a Transition, got {type(transition).__name__}")
        t = transition.validate()
        cfg = self.config
        key = t.key
        with self._lock, self._atomic():
            streak = list(self._streaks.get(key, ()))
            counts = self._q_counts(t, streak)
            n = sum(counts.values())
            p_obs = counts.get(t.outcome, 0) / n if n else None
            bayes = cfg.detector == "bayes"
            if bayes:
                surprise = n >= cfg.min_history and t.outcome not in history_mode(counts)
            else:
                surprise = p_obs is not None and n >= cfg.min_history and p_obs < cfg.epsilon
            entry_id = self.store.record(t)
            stamp = t.stamp if t.stamp > 0 else self.store.now()
            self._count("observations")
            if bayes and n and not surprise:
                for k in self._noise_kinds(t.action, counts):
                    self._noise.add(k, False)
                if streak:  # the run ended without an alarm: it was observation noise
                    for o in self._run_outcomes(streak + [entry_id], t.outcome)[:-1]:
                        self._noise.add(self._noise_key(t.action, o, counts), True)
                        o_rel = self._relation_of(t.action, o, counts)
                        if o_rel is not None:
                            self._noise.add_relation(t.action, o_rel)
            decision = Realignment.NONE
            replaced: list[int] = []
            new_ids: list[int] = []
            suppressed: list[int] = []
            requests: list[ProbeRequest] = []
            alert = None
            recheck = None
            evidence = 0
            lbf = None

            pending = self.store.pending_for(*key)
            reverting = False
            if pending is not None:
                # the very outcome an alarm contradicted, seen again while its
                # re-verification runs: evidence that the alarm was noise, not a new alarm
                alarm = self.store.get_state(f"{_ALARM_RUN}{pending.key}")
                reverting = (surprise and isinstance(alarm, dict)
                             and alarm.get("mode") == t.outcome)
                evidence = self.store.add_pending_evidence(pending.key, t.outcome, entry_id, stamp)
                self._count("evidence")
                decision = Realignment.EVIDENCE
                if evidence >= self._evidence_needed(t.action):
                    replaced, new_ids = self._resolve_pending(pending.key, stamp)
                    decision = Realignment.REPLACE if replaced or new_ids else (
                        Realignment.RESTORE)
            if reverting:
                surprise = False
                streak = []
                self._save_streak(key, None)

            rel = self._relation_of(t.action, t.outcome, counts) if surprise else None
            if surprise:
                self._count("surprises")
                streak.append(entry_id)
                if bayes:
                    run = self._run_outcomes(streak, t.outcome)
                    if t.action == cfg.object_action:
                        eta = self._noise.rate(f"{t.action}:other")
                        # a sensor can always miss an object: never surer than min_miss_rate
                        loss = max(self._noise.rate(f"{t.action}:loss"), cfg.min_miss_rate)
                        lbf = log_bayes_factor(counts, run, eta, loss_eta=loss,
                                               objects=_objects)
                        if self._noise_key(t.action, t.outcome, counts).endswith(":loss"):
                            eta = loss
                    else:
                        eta = self._noise.rate(t.action)
                        pair_eta = self._pair_eta(t.action)
                        lbf = log_bayes_factor(counts, run, eta, pair_eta=pair_eta)
                        if rel is not None:
                            eta = self._noise.relation_rate(t.action, rel)
                    fire = lbf >= math.log(1.0 / cfg.alarm_delta)
                else:
                    eta = None
                    fire = len(streak) >= cfg.p_th
                if fire:  # the run was drift: it never enters the noise tally
                    alert, reqs, supp = self._dissonance(t, entry_id, counts, n, p_obs, streak,
                                                         stamp, lbf, eta)
                    suppressed += supp
                    requests += reqs
                    decision = Realignment.PROBE if reqs else Realignment.SUPPRESS
                    evidence = 0
                    self._save_streak(key, None)
                    if cfg.recheck_on_dissonance:
                        recheck = self._recheck(None, stuck=False, stamp=stamp)
                        suppressed += recheck.suppressed_ids
                        requests += recheck.probe_requests
                elif bayes and len(streak) > n:
                    # no alarm, but the run now outnumbers the history it contradicts: the
                    # new outcome is what memory mostly says; nothing stale is left to doubt
                    self._save_streak(key, None)
                else:
                    self._save_streak(key, streak)
            elif streak:
                self._save_streak(key, None)

            object_alerts: list[DissonanceAlert] = []
            if cfg.unique_objects and t.action == cfg.object_action:
                object_alerts = self._object_evidence(t, entry_id, stamp)
                for a in object_alerts:
                    suppressed += a.suppressed_ids
                if object_alerts and decision in (Realignment.NONE, Realignment.EVIDENCE):
                    decision = Realignment.SUPPRESS
            if bayes and n:
                self._persist_noise()

            return VerifyResult(
                entry_id=entry_id,
                surprise=surprise,
                observed_probability=p_obs,
                history_size=n,
                consecutive_surprises=len(streak) if surprise else 0,
                decision=decision,
                alert=alert,
                probe_requests=tuple(requests),
                suppressed_ids=tuple(suppressed),
                replaced_ids=tuple(replaced),
                new_ids=tuple(new_ids),
                pending_evidence=evidence,
                recheck=recheck,
                object_alerts=tuple(object_alerts),
                log_bayes_factor=lbf,
            )

    def _false_alarm(self, pkey: int, fresh: Sequence[str]) -> bool:
        """Whether an alarm's re-verification shows it was noise: the fresh samples bring
        back the very mode it contradicted and no other dissonance came in between (after
        one, the old outcome's return may be the world changing back, e.g. a corridor that
        re-opened, which is drift twice, not noise)."""
        run = self.store.get_state(f"{_ALARM_RUN}{pkey}")
        counts = Counter(fresh)
        if not isinstance(run, dict) or not counts:
            return False
        if run.get("mode") not in history_mode(dict(counts)):
            return False
        mark = self.store.get_state(_WORLD_MARK)
        return not (isinstance(mark, dict)
                    and int(mark.get("id", 0)) > int(run.get("mark", 0)))

    def _confirm_drift(self, pkey: int, fresh: Sequence[str]) -> None:
        """An alarm's re-verification ended. If it was a false alarm (:meth:`_false_alarm`)
        its run was noise and enters the noise tallies after all (a run confirmed as drift
        never does), so a rate learnt too low (misses that alarmed never counted as
        misses) corrects itself."""
        name = f"{_ALARM_RUN}{pkey}"
        false = self._false_alarm(pkey, fresh)
        run = self.store.get_state(name)
        if run is not None:
            self.store.delete_state(name)
        if not false or not isinstance(run, dict):
            return
        self._count("false_alarms_learnt")
        if isinstance(run.get("pair"), list) and len(run["pair"]) == 3:
            self._mark_volatile([tuple(map(str, run["pair"]))], on=False)
        for k in run.get("noise") or []:
            if isinstance(k, str):
                self._noise.add(k, True)
        for rel in run.get("relations") or []:
            if isinstance(rel, str):
                self._noise.add_relation(str(run.get("action")), rel)

    def _volatile(self) -> list[list[str]]:
        got = self.store.get_state(_VOLATILE)
        return [list(map(str, p)) for p in got if isinstance(p, list) and len(p) == 3] \
            if isinstance(got, list) else []

    def _mark_volatile(self, keys: Sequence[tuple[str, str, str]], on: bool = True) -> None:
        """Remember (or forget) pairs whose memory an alarm overturned: a place that
        changed once is the first suspect when remembered failures block a route again."""
        now = [p for p in self._volatile() if tuple(p) not in {tuple(k) for k in keys}]
        if on:
            now += [list(k) for k in keys]
        self.store.set_state(_VOLATILE, now[-_VOLATILE_MAX:])

    def flush(self) -> None:
        """Store the noise tally now (call before closing the store: between two writes up
        to ``_NOISE_EVERY`` agreeing comparisons live in memory only)."""
        with self._lock:
            if self.store.closed:
                return
            self.store.set_state(_NOISE, self._noise.to_json())
            self._noise_saved = (sum(c[1] for c in self._noise.counts.values()),
                                 sum(c[0] for c in self._noise.counts.values()))

    def _persist_noise(self) -> None:
        """Store the noise tally when a disagreement count changed, else every
        ``_NOISE_EVERY`` comparisons: an agreeing observation adds one comparison, and a
        write per observation cost more than the rest of observe (bench memory). A crash
        loses at most that many agreeing comparisons, never a disagreement."""
        d = sum(c[1] for c in self._noise.counts.values())
        m = sum(c[0] for c in self._noise.counts.values())
        if d != self._noise_saved[0] or m - self._noise_saved[1] >= _NOISE_EVERY:
            self.store.set_state(_NOISE, self._noise.to_json())
            self._noise_saved = (d, m)

    def _relation_of(self, action: str, outcome: str,
                     counts: Mapping[str, int]) -> str | None:
        """The kind of ``outcome``'s disagreement with the history's mode (None: the
        action's outcomes have no structure, or it is the ``object_action``)."""
        if (self._relation is None or not self.config.structured_noise
                or action == self.config.object_action or not counts):
            return None
        return self._relation(outcome, min(history_mode(counts)))

    def _pair_eta(self, action: str) -> Callable[[str, str], float | None] | None:
        if (self._relation is None or not self.config.structured_noise
                or action == self.config.object_action):
            return None
        relation, noise = self._relation, self._noise

        def eta(outcome: str, mode: str) -> float | None:
            rel = relation(outcome, mode)
            return None if rel is None else noise.relation_rate(action, rel)

        return eta

    def _noise_kinds(self, action: str, counts: Mapping[str, int]) -> tuple[str, ...]:
        """The noise tallies an agreeing observation of ``action`` counts toward (a loss
        tally only where the remembered outcome shows an object that could be missed)."""
        if action == self.config.object_action:
            if any(_objects(o) for o in history_mode(counts)):
                return (f"{action}:loss", f"{action}:other")
            return (f"{action}:other",)
        return (action,)

    def _noise_key(self, action: str, outcome: str, counts: Mapping[str, int]) -> str:
        """Which noise tally a disagreement belongs to. For ``object_action`` a *loss* (the
        outcome only lacks objects the history's mode shows: a missed detection, a dropout)
        is counted apart from other disagreements (an object that was not there): detectors
        miss far more often than they hallucinate."""
        if action != self.config.object_action:
            return action
        now = _objects(outcome)
        loss = any(now < _objects(o) for o in history_mode(counts))
        return f"{action}:loss" if loss else f"{action}:other"

    def _object_evidence(
        self, t: Transition, entry_id: int, stamp: float
    ) -> list[DissonanceAlert]:
        """A unique object seen at a new state refutes every other state's memory of it.

        ``t`` is an ``object_action`` observation (``key=a,b``). For each unique object in
        it that this state's trusted history never showed, the trusted memories of other
        states whose most frequent outcome contains the object are suppressed at once and
        queued for re-verification by natural visits (the object cannot be in two places).
        """
        cfg = self.config
        unique = set(cfg.unique_objects)
        seen = _objects(t.outcome) & unique
        if not seen:
            return []
        # everything ever seen here (suppressed and replaced history too), but t itself
        before, _ = self.store.query(t.state_key, t.action, t.action_arg,
                                     include_suppressed=True, limit=500)
        known_here: set[str] = set()
        for e in before:
            if e.id != entry_id:
                known_here |= _objects(e.transition.outcome)
        new_here = seen - known_here
        if not new_here:
            return []
        alerts: list[DissonanceAlert] = []
        for g in self.store.outcome_groups():
            if g.action != cfg.object_action or g.state_key == t.state_key:
                continue
            modes = history_mode(g.counts)
            moved = sorted(x for x in new_here if any(x in _objects(o) for o in modes))
            if not moved:
                continue
            entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
            if not entries:
                continue
            reason = (
                f"object-level evidence: {', '.join(moved)} (unique) seen at {t.state_key!r} "
                f"(entry {entry_id}), so memory of it at {g.state_key!r} is stale"
            )
            ids = self.store.suppress([e.id for e in entries], reason, stamp)
            self._count("suppressions", len(ids))
            self.store.add_pending(*g.pair, ids, stamp, reason)
            self._count("alerts")
            self._count("object_alerts")
            n = g.size
            alerts.append(DissonanceAlert(
                state_key=g.state_key,
                action=g.action,
                action_arg=g.action_arg,
                observed_outcome=t.outcome,
                expected=tuple((o, c / n) for o, c in sorted(
                    g.counts.items(), key=lambda kv: (-kv[1], kv[0]))),
                observed_probability=0.0,
                history_size=n,
                hoeffding_bound=hoeffding_bound(n, cfg.delta),
                consecutive_surprises=0,
                mode="async",
                suppressed_ids=tuple(ids),
                probes_requested=0,
                entry_id=entry_id,
                stamp=stamp,
                reason=reason,
                kind="object",
            ))
        return alerts

    def _dissonance(
        self,
        t: Transition,
        entry_id: int,
        counts: Mapping[str, int],
        n: int,
        p_obs: float | None,
        streak: Sequence[int],
        stamp: float,
        lbf: float | None = None,
        eta: float | None = None,
    ) -> tuple[DissonanceAlert, list[ProbeRequest], list[int]]:
        cfg = self.config
        in_streak = set(streak)
        stale = sorted(
            e.id for e in self.store.neighbourhood(t, self.rule) if e.id not in in_streak
        )
        p_obs = p_obs or 0.0
        if lbf is None:
            reason = (
                f"dissonance: {len(streak)} consecutive surprises at "
                f"{_pair_name(*t.key)}: observed {t.outcome!r} with Q_hist={p_obs:.2f} < "
                f"epsilon={cfg.epsilon:g} over n={n} trusted neighbours"
            )
        else:
            reason = (
                f"dissonance: {len(streak)} consecutive contradiction(s) at "
                f"{_pair_name(*t.key)}: observed {t.outcome!r} with Q_hist={p_obs:.2f} over "
                f"n={n} trusted neighbours; log Bayes factor {lbf:.2f} >= "
                f"ln(1/{cfg.alarm_delta:g}) at noise rate {eta:.3f}"
            )
        suppressed = self.store.suppress(stale, reason, stamp) if stale else []
        self._count("suppressions", len(suppressed))
        pkey = self.store.add_pending(*t.key, suppressed, stamp, reason)
        if lbf is not None and counts:  # bayes: remember what the alarm contradicted
            run = self._run_outcomes(streak, t.outcome)
            mode = min(history_mode(counts))
            self.store.set_state(f"{_ALARM_RUN}{pkey}", {
                "action": t.action, "mode": mode, "mark": min(streak), "pair": list(t.key),
                "noise": [self._noise_key(t.action, o, counts) for o in run],
                "relations": [self._relation_of(t.action, o, counts) for o in run]})
        mirror = self._mirror(t)
        if mirror is not None:  # the other direction of the same corridor
            back, _ = self.store.query(mirror.state_key, mirror.action, mirror.action_arg,
                                       limit=None)
            back_ids = [e.id for e in back if e.transition.outcome != t.outcome]
            if back_ids:
                why = reason + f" (same link, other direction {_pair_name(*mirror.key)})"
                ids = self.store.suppress(back_ids, why, stamp)
                self._count("suppressions", len(ids))
                self.store.add_pending(*mirror.key, ids, stamp, why)
                suppressed += ids
        self.store.set_state(
            _WORLD_MARK,
            {"id": min(streak), "stamp": stamp, "pair": list(t.key)},
        )
        self._mark_volatile([t.key] + ([mirror.key] if mirror is not None else []))
        self._count("alerts")
        requests: list[ProbeRequest] = []
        note = ""
        if self._may_probe(t.action):
            alpha = cfg.alpha
            if self._reserve(alpha):
                requests.append(self._new_request(t, alpha, "dissonance", pkey))
            else:
                note = f"; probe budget exhausted (alpha={alpha}), handled asynchronously"
        elif cfg.mode == "sync":
            note = f"; {t.action!r} is never probed, handled asynchronously"
        expected = tuple(
            (o, c / n) for o, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        alert = DissonanceAlert(
            state_key=t.state_key,
            action=t.action,
            action_arg=t.action_arg,
            observed_outcome=t.outcome,
            expected=expected,
            observed_probability=p_obs,
            history_size=n,
            hoeffding_bound=hoeffding_bound(n, cfg.delta),
            consecutive_surprises=len(streak),
            mode="sync" if requests else "async",
            suppressed_ids=tuple(suppressed),
            probes_requested=requests[0].alpha if requests else 0,
            entry_id=entry_id,
            stamp=stamp,
            reason=reason + note,
            log_bayes_factor=lbf,
            noise_rate=eta,
        )
        return alert, requests, suppressed

    def _resolve_pending(self, key: int, stamp: float) -> tuple[list[int], list[int]]:
        """Replace a pending item's suppressed entries by its evidence; clear it."""
        item = self.store.get_pending(key)
        if item is None or not item.evidence:
            return [], []
        live = [e.id for e in self.store.get_many(item.suppressed_ids)
                if e.status != Status.REPLACED]
        if self._false_alarm(key, item.evidence):
            # the fresh samples say what memory said before the alarm: a false alarm. The
            # old memory comes back whole (its weight too); the fresh samples stay trusted.
            self.store.restore(live, f"re-verified {_pair_name(*item.pair)}: "
                               f"{item.evidence_count} fresh observation(s) agree with the "
                               f"memory the alarm doubted; was: {item.reason}", stamp)
            self._confirm_drift(key, item.evidence)
            if self.store.get_pending(key) is not None:
                self.store.clear_pending(key)
            self._count("restorations", len(live))
            return [], []
        new: list[Transition | int] = []
        seen: set[int] = set()
        for outcome, eid in zip(item.evidence, item.evidence_ids, strict=True):
            if eid is not None and eid not in seen and eid not in live:
                seen.add(eid)
                new.append(eid)
            elif eid is None:
                new.append(Transition(item.state_key, item.action, outcome,
                                      action_arg=item.action_arg, stamp=stamp))
        reason = (
            f"re-verified {_pair_name(*item.pair)} from {item.evidence_count} natural "
            f"observation(s) (needed {self.config.required_evidence}); was: {item.reason}"
        )
        new_ids = self.store.replace(live, new, reason, item.evidence_count, stamp) if new else []
        self._confirm_drift(key, item.evidence)
        self.store.clear_pending(key)
        self._count("replacements", len(live))
        return live, new_ids

    # ------------------------------------------------------------------ probes

    def apply_probes(
        self, request: ProbeRequest, outcomes: Iterable[str | Transition]
    ) -> list[int]:
        """Realign with the probed outcomes: D <- (D -_m N(e)) +_m {probes}; returns new ids.

        ``outcomes`` are outcome signatures (or full transitions) of at least ``alpha``
        probes. The suppressed entries and the current trusted neighbourhood become REPLACED
        by exactly these samples (source PROBED). Unknown requests or too few outcomes raise
        ``ValueError`` and change nothing.
        """
        items = list(outcomes)
        with self._lock:
            req = self._requests.get(getattr(request, "request_id", -1))
            if req is None:
                raise ValueError(
                    "unknown probe request (already applied, cancelled, or from before a restart)"
                )
            if len(items) < req.alpha:
                raise ValueError(
                    f"{len(items)} probe outcome(s) for a request of alpha={req.alpha}; run all "
                    "probes or call cancel_probe() to fall back to asynchronous re-verification"
                )
            stamp = self.store.now()
            probes: list[Transition] = []
            for i, item in enumerate(items):
                if isinstance(item, Transition):
                    if item.key != req.pair:
                        raise ValueError(
                            f"probe outcome {i} is for {_pair_name(*item.key)}, the request is "
                            f"for {_pair_name(*req.pair)}"
                        )
                    probe = item.with_(source=Source.PROBED)
                elif isinstance(item, str):
                    probe = req.transition.with_(
                        outcome=item, source=Source.PROBED, stamp=stamp, reward=0.0,
                        episode_id=req.transition.episode_id,
                    )
                else:
                    raise ValueError(f"probe outcome {i} must be a string or Transition: {item!r}")
                try:
                    probe.validate()
                except ValueError as exc:
                    raise ValueError(f"probe outcome {i}: {exc}") from None
                probes.append(probe)
            with self._atomic():
                item = self.store.get_pending(req.pending_key)
                old = [e.id for e in self.store.neighbourhood(req.transition, self.rule)]
                if item is not None:
                    old += [
                        e.id for e in self.store.get_many(item.suppressed_ids)
                        if e.status != Status.REPLACED and e.id not in set(old)
                    ]
                reason = (
                    f"relative truth for {_pair_name(*req.pair)} from {len(probes)} probe(s) "
                    f"(alpha={req.alpha}, {req.reason})"
                )
                new_ids = self.store.replace(old, probes, reason, len(probes), stamp)
                if item is not None:
                    self._confirm_drift(item.key, [p.outcome for p in probes])
                    self.store.clear_pending(item.key)
                self._save_streak(req.pair, None)
            self._probes_used += len(probes) - req.alpha  # extra samples count too
            del self._requests[req.request_id]
            self._count("probes", len(probes))
            self._count("replacements", len(old))
            return new_ids

    def cancel_probe(self, request: ProbeRequest, reason: str = "") -> None:
        """Give up a probe request: its budget is refunded and the (state, action) stays
        suppressed and pending, to be re-verified asynchronously by natural visits."""
        with self._lock:
            req = self._requests.pop(getattr(request, "request_id", -1), None)
            if req is None:
                raise ValueError("unknown probe request (already applied or cancelled)")
            self._probes_used = max(0, self._probes_used - req.alpha)

    # ------------------------------------------------------------------ deadlock

    def _negatives(self, g: OutcomeGroup) -> int:
        return sum(c for o, c in g.counts.items()
                   if self._is_negative(o, g.max_rewards.get(o, 0.0)))

    def _group_negative(self, g: OutcomeGroup, named: bool = False) -> bool:
        """Mostly negative: more than half the group's trusted samples are failures (a slip
        or a missed detection among them must not hide a stale negative memory). ``named``:
        the planner named the pair as blocking its route, so an even split counts too (it
        avoids a move as likely to fail as not)."""
        neg = self._negatives(g)
        return 2 * neg >= g.size if named else 2 * neg > g.size

    def _remembered_both_ways(self, g: OutcomeGroup) -> bool:
        """The group's trusted memory holds a success besides its failures: the place
        worked before it failed (or works only sometimes), so a re-test is not wasted."""
        return 0 < self._negatives(g) < g.size

    def _suspect_groups(
        self, state_keys: Iterable[str] | None, stuck: bool,
        pairs: Iterable[tuple[str, str]] | None = None, no_route: bool = False,
    ) -> list[OutcomeGroup]:
        cfg = self.config
        if not cfg.stale_negative_recheck:
            return []
        threshold = self._world_changed_at()
        if stuck:
            window = self.store.max_id() + 1 - cfg.stale_negative_after
            threshold = max(threshold, window)
        if threshold <= 0:
            return []
        keys = None if state_keys is None else list(state_keys)
        wanted = None if pairs is None else {(str(s), str(a)) for s, a in pairs}
        if wanted is not None:
            keys = sorted({s for s, _ in wanted} & set(keys) if keys is not None
                          else {s for s, _ in wanted})
        out = []
        for g in self.store.outcome_groups(keys):
            if g.action in cfg.never_probe or not g.counts:
                continue
            if wanted is not None and (g.state_key, g.action) not in wanted:
                continue
            if g.last_id < threshold and self._group_negative(g, named=wanted is not None):
                out.append(g)
        if cfg.recheck_volatile_first and out:
            volatile = {tuple(p) for p in self._volatile()}
            first = [g for g in out if g.pair in volatile or self._remembered_both_ways(g)]
            # a detour re-tests only places that changed before (an alarm overturned
            # memory there, or memory holds both a success and a failure); a stuck planner
            # re-tests those first and the rest once they are re-confirmed (they then stop
            # being suspect) or when there are none, and so does a detour hook whose pairs
            # leave no route at all (a re-test is the only way on)
            if wanted is not None and not stuck and not no_route:
                return first
            return first or out
        return out

    def _world_changed_at(self) -> int:
        """Id of the newest evidence that the world changed: an alarm's streak start
        (``_WORLD_MARK``) or outside evidence (``_CHANGE_MARK``); 0 when none."""
        marks = (self.store.get_state(_WORLD_MARK), self.store.get_state(_CHANGE_MARK))
        return max((int(m.get("id", 0)) for m in marks if isinstance(m, dict)), default=0)

    def note_world_change(self, entry_id: int, reason: str = "",
                          pair: tuple[str, str, str] | None = None) -> None:
        """Evidence from outside the pair tests that the world changed at recorded
        transition ``entry_id`` (e.g. an adapter saw a place as another kind than before:
        what a place is does not depend on how it was reached). Like an alarm, it makes
        the negative memories not re-confirmed since suspect for the deadlock rule
        (:meth:`recheck_negatives`), and ``pair`` (state_key, action, action_arg), the one
        that saw the change, joins the places that changed before (re-tested first when
        they block a route again); it suppresses nothing and does not count as an alarm.
        An older mark than the current one moves nothing. Give the earliest id the change
        can be dated to (e.g. just after the last transition that saw the place as it
        was), not the one that saw it: a failure confirmed in between is no staler for it."""
        if isinstance(entry_id, bool) or not isinstance(entry_id, int) or entry_id < 1:
            raise ValueError(f"entry_id must be a recorded transition id >= 1, got {entry_id!r}")
        keys = self._pair_keys([] if pair is None else [pair])
        with self._lock, self._atomic():
            if keys:
                self._mark_volatile(keys)
            if self._world_changed_at() >= entry_id:
                return
            self.store.set_state(_CHANGE_MARK, {"id": entry_id, "reason": str(reason)[:200]})
            self._count("world_changes")

    def note_changed_before(self, pairs: Iterable[tuple[str, str, str]]) -> None:
        """Outside evidence that each of ``pairs`` ((state_key, action, action_arg)) leads to
        a place that changed before (e.g. an adapter saw the place as another kind, through
        whichever pair): they join the places that changed before, which the deadlock rule
        re-tests first when they block a route (:meth:`recheck_negatives`). It moves no
        mark and suppresses nothing."""
        keys = self._pair_keys(pairs)
        if keys:
            with self._lock, self._atomic():
                self._mark_volatile(keys)

    @staticmethod
    def _pair_keys(pairs: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """``pairs`` as (state_key, action, action_arg) tuples; ValueError on anything else."""
        keys = [tuple(p) for p in pairs]
        for pair in keys:
            if len(pair) != 3 or not all(isinstance(x, str) for x in pair):
                raise ValueError(f"pair must be (state_key, action, action_arg), got {pair!r}")
        return keys

    def stale_negative_candidates(
        self, state_keys: Iterable[str] | None = None, *, stuck: bool = False
    ) -> list[MemoryEntry]:
        """Trusted negative entries the deadlock rule finds suspect (no side effects).

        ``stuck=False``: all-negative groups not re-confirmed since the latest dissonance.
        ``stuck=True`` (the planner has no route): also those not re-confirmed within the
        last ``stale_negative_after`` recorded transitions. ``state_keys`` limits the search
        (e.g. to the states around the blocked frontier). never_probe actions are excluded.
        """
        with self._lock:
            out: list[MemoryEntry] = []
            for g in self._suspect_groups(state_keys, stuck):
                entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
                out += entries
            return out

    def recheck_negatives(
        self,
        state_keys: Iterable[str] | None = None,
        *,
        stuck: bool = False,
        stamp: float | None = None,
        pairs: Iterable[tuple[str, str]] | None = None,
        no_route: bool = False,
    ) -> RecheckResult:
        """Break the self-confirming deadlock: re-test the stale negative memories.

        Suspect groups (see :meth:`stale_negative_candidates`) are suppressed and queued for
        re-verification, so the planner may try them again; in sync mode a ProbeRequest per
        group is also returned while the probe budget allows. ``pairs`` ((state_key,
        action) tuples) limits the search to the memories that stand in the planner's way,
        e.g. the remembered failures that force a detour (``stuck=False``: only those not
        re-confirmed since the latest dissonance are suspect, so a detour in a world that
        never changed re-tests nothing; with ``recheck_volatile_first`` only those at
        places where an alarm already overturned memory, since a re-test of a failure can
        cost as much as the failure). ``no_route``: ``pairs`` block every route the planner
        knows, not only a shorter one; a re-test is then the only way on, so when none of
        the suspects is at such a place the others are re-tested, as for a stuck planner.
        """
        with self._lock, self._atomic():
            when = stamp if stamp else self.store.now()
            return self._recheck(state_keys, stuck=stuck, stamp=when, pairs=pairs,
                                 no_route=no_route)

    def _recheck(
        self, state_keys: Iterable[str] | None, *, stuck: bool, stamp: float,
        pairs: Iterable[tuple[str, str]] | None = None, no_route: bool = False,
    ) -> RecheckResult:
        groups = self._suspect_groups(state_keys, stuck, pairs, no_route)
        if not groups:
            return RecheckResult()
        candidates: list[MemoryEntry] = []
        suppressed: list[int] = []
        requests: list[ProbeRequest] = []
        pairs = []
        why = ("the planner is stuck" if stuck else
               "a dissonance showed the world changed and it blocks the planner's route"
               if pairs is not None else "a dissonance showed the world changed")
        for g in groups:
            entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
            if not entries:
                continue
            candidates += entries
            outcomes = ", ".join(sorted(g.counts))
            reason = (
                f"stale negative memory {_pair_name(*g.pair)} -> {outcomes}: not re-confirmed "
                f"since {why}; re-testing to break the self-confirming deadlock"
            )
            ids = self.store.suppress([e.id for e in entries], reason, stamp)
            self._count("suppressions", len(ids))
            pkey = self.store.add_pending(*g.pair, ids, stamp, reason)
            suppressed += ids
            pairs.append(g.pair)
            self._count("rechecks")
            if self._may_probe(g.action) and self._reserve(self.config.alpha):
                template = entries[0].transition.with_(
                    outcome="?", source=Source.PROBED, reward=0.0, stamp=0.0
                )
                requests.append(self._new_request(template, self.config.alpha,
                                                  "stale_negative", pkey))
        return RecheckResult(
            candidates=tuple(candidates),
            pairs=tuple(pairs),
            suppressed_ids=tuple(suppressed),
            probe_requests=tuple(requests),
        )
