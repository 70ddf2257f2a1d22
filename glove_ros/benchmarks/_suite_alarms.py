"""One definition of a false alarm for every method of the drift suite, with exact intervals.

**Definition.** A false alarm is an observed transition (the agent's own move, or a probe's
sample) after which the method's belief about a place the world did *not* change goes from
right to wrong. It is read from what the agent plans on, the rule's believed outcome
(:meth:`~glove_ros.core.verify.memory_rules.MemoryRule.distribution`), never from a rule's
own alert counter, so GLOVE, every baseline (bare or ``+retest``), Static, the Oracle and
LearnerReference are counted alike:

* **right**: the rule believes something there, and its most likely believed outcome is
  one of the true most likely outcomes (FrozenLake, a (state, action) pair: every outcome
  the belief ranks first, ties included, is one the world ranks first; on slippery ice the
  intended move, so a belief that a slide is as likely as the intended move is not right);
  waypoint worlds, a place (a waypoint's look, a corridor): the colours the agent believes
  at the waypoint are the true ones / the corridor is believed blocked exactly when it is
  (the agent's own thresholds);
* **wrong**: the rule believes something there, and it is not right;
* **unknown**: the rule believes nothing there (never seen, or forgotten by a reset, a
  refresh, a re-test). Unknown is neither: forgetting a right belief is not a false alarm
  (the agent explores an unknown move, it is not misled), nor is a first sighting that
  forms a wrong belief (learning from a noisy look, not reacting to a change). A reset's
  or an alert's cost shows where it matters, in success and steps.
* **unchanged place**: no drift has touched it so far in the run (FrozenLake: the pair's
  true outcome distribution has been the same in every phase so far; waypoint worlds:
  no drift changed the waypoint's blocks or the corridor). Where a drift did touch, a
  change of belief is detection or a correction, never a false alarm.

One transition that turns several right beliefs wrong (a rule that rewrites what it
believes about a place, a reset) counts once. Belief changes made by a hook between
transitions (the stuck / detour re-test, a reset when stuck) are not observations and
are not counted.

**Rates.** Per 1,000 transitions (every transition the method learnt from, in every phase,
source included) and, on waypoint worlds, per 1,000 looks (the agent's and probes').
With ``k`` false alarms in ``n`` transitions the 95% interval is the exact (Garwood)
Poisson interval on the count, ``[chi2(0.025; 2k) / 2, chi2(0.975; 2k + 2) / 2]``, scaled
to 1,000 (0 in 1,000 transitions: [0, 3.69] per 1,000).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

__all__ = [
    "BeliefFlips",
    "RIGHT",
    "UNKNOWN",
    "WRONG",
    "alarm_table",
    "belief_state",
    "poisson_interval",
    "rate_summary",
    "top_outcomes",
    "worlds_for_upper",
]

RIGHT, WRONG, UNKNOWN = "right", "wrong", "unknown"
_TOL = 1e-9


# --------------------------------------------------------------------------- intervals


def _poisson_cdf(k: int, lam: float) -> float:
    """P(X <= k) for X ~ Poisson(lam), summed in log space (no overflow for large lam)."""
    if k < 0:
        return 0.0
    if lam <= 0:
        return 1.0
    log_term = -lam  # log P(X = 0)
    log_terms = [log_term]
    for i in range(1, k + 1):
        log_term += math.log(lam) - math.log(i)
        log_terms.append(log_term)
    top = max(log_terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in log_terms))


def _solve(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The lam in [lo, hi] with f(lam) = target for a decreasing f (bisection)."""
    while f(hi) > target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def poisson_interval(count: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Garwood) two-sided interval for a Poisson mean, given ``count`` events.

    Lower end: the mean under which ``count`` or more events have probability (1-level)/2
    (0 for no event); upper end: the mean under which ``count`` or fewer do. Equal to
    ``chi2.ppf(a/2, 2k)/2`` and ``chi2.ppf(1-a/2, 2k+2)/2``; 0 events: [0, 3.689]."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    tail = (1.0 - level) / 2.0
    hi = _solve(lambda lam: _poisson_cdf(count, lam), tail, 0.0, count + 10.0)
    if count == 0:
        return 0.0, hi
    # P(X >= k) = 1 - P(X <= k-1) rises with lam: solve P(X <= k-1) = 1 - tail
    lo = _solve(lambda lam: _poisson_cdf(count - 1, lam), 1.0 - tail, 0.0, count + 10.0)
    return lo, hi


def rate_summary(count: int, transitions: int, looks: int | None = None) -> dict[str, Any]:
    """``{count, transitions, per_1000, ci95}`` (rates per 1,000 transitions, the exact
    Poisson interval), plus ``looks``, ``per_1000_looks`` and ``ci95_looks`` when looks
    are given. A rate over no transition is None."""
    lo, hi = poisson_interval(int(count))
    out: dict[str, Any] = {
        "count": int(count),
        "transitions": int(transitions),
        "per_1000": 1000.0 * count / transitions if transitions else None,
        "ci95": [1000.0 * lo / transitions, 1000.0 * hi / transitions]
        if transitions else [None, None],
    }
    if looks is not None:
        out["looks"] = int(looks)
        out["per_1000_looks"] = 1000.0 * count / looks if looks else None
        out["ci95_looks"] = ([1000.0 * lo / looks, 1000.0 * hi / looks] if looks
                             else [None, None])
    return out


def worlds_for_upper(rate_per_1000: float, transitions_per_world: float,
                     upper: float = 1.5, level: float = 0.95,
                     max_worlds: int = 100_000) -> int | None:
    """The fewest worlds whose interval's upper end falls below ``upper`` per 1,000
    transitions if false alarms come at ``rate_per_1000`` (the count expected at that
    rate, rounded up). None when no number up to ``max_worlds`` does (a rate at or above
    ``upper`` never gets there)."""
    if transitions_per_world <= 0:
        raise ValueError("transitions_per_world must be > 0")
    if rate_per_1000 >= upper:
        return None
    lo, hi = 1, 1
    while hi <= max_worlds:
        n = hi * transitions_per_world
        if 1000.0 * poisson_interval(math.ceil(rate_per_1000 * n / 1000.0), level)[1] \
                / n < upper:
            break
        lo, hi = hi, hi * 2
    else:
        return None
    while lo < hi:  # the upper end falls with more worlds (up to rounding of the count)
        mid = (lo + hi) // 2
        n = mid * transitions_per_world
        if 1000.0 * poisson_interval(math.ceil(rate_per_1000 * n / 1000.0), level)[1] \
                / n < upper:
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------------- beliefs


def top_outcomes(dist: Mapping[Hashable, float] | None) -> frozenset[Hashable]:
    """The outcomes a distribution ranks first (ties included); empty for none."""
    if not dist:
        return frozenset()
    best = max(dist.values())
    return frozenset(o for o, p in dist.items() if p >= best - _TOL)


def belief_state(believed: Mapping[Hashable, float] | None,
                 true_top: frozenset[Hashable]) -> str:
    """RIGHT, WRONG or UNKNOWN for a believed distribution against the world's most likely
    outcomes (see the module docstring)."""
    top = top_outcomes(believed)
    if not top:
        return UNKNOWN
    return RIGHT if top <= true_top else WRONG


class BeliefFlips:
    """Counts false alarms of a (state, action) memory rule (FrozenLake, gym).

    Wraps the rule's ``observe`` and ``apply_probes`` (every transition it learns from) and
    marks the beliefs dirty on the hooks (``on_stuck``, ``on_blocked``, ``begin_phase``,
    ``set_world``): after each transition every pair the world has not changed that was
    right before is checked, and one that is wrong now makes the transition a false alarm.
    :meth:`set_world` gives the true model of each phase (before the phase's first
    transition); a pair whose true distribution differs from any earlier phase's is
    touched for the rest of the run.
    """

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.transitions = 0
        self.false_alarms = 0
        self._truth: dict[Any, frozenset[Hashable]] = {}
        self._first: dict[Any, Mapping[Hashable, float]] = {}
        self._touched: set[Any] = set()
        self._right: set[Any] = set()
        self._dirty = True
        self._orig_observe = rule.observe
        rule.observe = self._observe
        self._orig_probes = rule.apply_probes
        rule.apply_probes = self._apply_probes
        for hook in ("on_stuck", "on_blocked", "begin_phase", "set_world"):
            orig = getattr(rule, hook, None)
            if orig is not None:
                setattr(rule, hook, self._marking(orig))

    def _marking(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._dirty = True
            return fn(*args, **kwargs)
        return call

    def set_world(self, model: Mapping[Any, Mapping[Hashable, float]]) -> None:
        """The world's true outcome distribution of every pair from now on."""
        for pair, dist in model.items():
            first = self._first.setdefault(pair, dict(dist))
            if pair not in self._touched and not _same(first, dist):
                self._touched.add(pair)
        for pair in self._first:
            if pair not in model:
                self._touched.add(pair)
        self._truth = {p: top_outcomes(d) for p, d in model.items() if p not in self._touched}
        self._dirty = True

    def _states(self, pairs: Iterable[Any]) -> dict[Any, str]:
        dist = self.rule.distribution
        return {p: belief_state(dist(*p), self._truth[p]) for p in pairs}

    def _refresh(self) -> None:
        self._right = {p for p, s in self._states(self._truth).items() if s == RIGHT}
        self._dirty = False

    def _check(self, n: int) -> None:
        """After ``n`` observed transitions: count a false alarm if a right belief at an
        unchanged pair is wrong now; remember which are right."""
        self.transitions += n
        before = self._right
        now = self._states(self._truth)
        if any(now[p] == WRONG for p in before):
            self.false_alarms += 1
        self._right = {p for p, s in now.items() if s == RIGHT}

    def _observe(self, state: Any, action: Any, outcome: Any, reward: float = 0.0,
                 step: int = 0) -> None:
        if self._dirty:
            self._refresh()
        self._orig_observe(state, action, outcome, reward, step)
        self._check(1)

    def _apply_probes(self, target: Any, outcomes: Any) -> None:
        if self._dirty:
            self._refresh()
        self._orig_probes(target, outcomes)
        if outcomes:
            self._check(len(outcomes))
        else:
            self._dirty = True

    def summary(self) -> dict[str, Any]:
        """``{count, transitions, per_1000, ci95}`` of this run."""
        return rate_summary(self.false_alarms, self.transitions)


def _same(a: Mapping[Hashable, float], b: Mapping[Hashable, float]) -> bool:
    keys = set(a) | set(b)
    return all(abs(a.get(k, 0.0) - b.get(k, 0.0)) <= _TOL for k in keys)


def _num(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def alarm_table(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The false-alarm lines of a family's table: per method the count, the transitions
    (and looks) it is over, the rate per 1,000 and its exact 95% interval."""
    rows = [(m, r["false_alarms"]) for m, r in methods.items()
            if isinstance(r.get("false_alarms"), Mapping)]
    if not rows:
        return []
    looks = any("looks" in fa for _, fa in rows)
    head = (f"{'false alarms (one definition)':<30} {'count':>5} {'transitions':>11} "
            f"{'/1k':>6} {'95% CI':>15}")
    if looks:
        head += f" {'looks':>6} {'/1k looks':>9} {'95% CI':>15}"
    out = [head]
    for m, fa in rows:
        ci = fa.get("ci95") or [None, None]
        line = (f"{m:<30} {fa['count']:>5} {fa['transitions']:>11} "
                f"{_num(fa.get('per_1000')):>6} "
                f"{'[' + _num(ci[0]) + ', ' + _num(ci[1]) + ']':>15}")
        if looks:
            cl = fa.get("ci95_looks") or [None, None]
            line += (f" {fa.get('looks', 0):>6} {_num(fa.get('per_1000_looks')):>9} "
                     f"{'[' + _num(cl[0]) + ', ' + _num(cl[1]) + ']':>15}")
        out.append(line)
    return out
