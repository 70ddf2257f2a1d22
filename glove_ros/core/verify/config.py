"""GLOVE verifier configuration: :class:`VerifierConfig` with its ``validate()``, and the
sample bounds alpha comes from (:func:`hoeffding_bound`, :func:`probe_budget`).

Separate from the verifier (:mod:`glove_ros.core.verify.verifier`) because parameters are
read, checked and documented (YAML sections, ROS parameters, benchmark scenarios,
``glove-ros bag drift-test``) by code that never runs a verifier; nothing here needs a store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from glove_ros.core.memory.equivalence import RULE_NAMES, EquivalenceRule, make_rule

__all__ = [
    "DEFAULT_NEGATIVE_OUTCOMES",
    "DETECTORS",
    "VerifierConfig",
    "hoeffding_bound",
    "probe_budget",
]

#: outcome signatures treated as negative (failure) by default
DEFAULT_NEGATIVE_OUTCOMES = ("hole", "blocked", "collision", "failed", "unreachable")

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
    ``min_extra_rate``: nor a class that memory has never held (no remembered look showed
    it anywhere) reported where memory shows none as less likely than this: a detector's
    rare confusions are a long tail of classes, each seen about once, so a class never seen
    before has no tally of its own to say how rare it is (a class memory holds somewhere
    keeps its learnt false-detection rate).
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
    min_extra_rate: float = 0.02
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
        for name in ("alarm_delta", "min_miss_rate", "min_extra_rate", "noise_prior_rate"):
            value = getattr(self, name)
            if not is_num(value) or not 0 < value < 0.5:
                raise ValueError(f"{name} must be in (0, 0.5), got {value!r}")
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
                     "min_miss_rate", "min_extra_rate"):
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
