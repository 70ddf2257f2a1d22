"""The calibrated drift test behind GLOVE's default detector (no ``p_th`` to tune).

The paper's rule fires after ``p_th`` consecutive surprises. The right ``p_th`` depends on
how noisy the robot's observations are (one contradiction is proof in a deterministic world,
nothing in a world with 10% missed detections) and on how much history the contradicted
memory rests on (one earlier look is weak evidence). This module decides from both, as a
Bayes-factor sequential test with an online noise estimate.

Model of one (state, action) pair. Without drift (H0) the pair has one true outcome mode t;
each observation equals t with probability 1 - eta and is a noise outcome otherwise (a
missed detection, a slip). With drift (H1) the history (the pair's trusted samples before the
current run of surprises) came from a mode t0 and the run (the consecutive surprises, this
observation included) from another mode t1 != t0. Modes range over the outcomes seen plus one
"other"; priors are uniform. Both likelihoods are sums over modes; the test is

    log BF = log P(history, run | H1) - log P(history, run | H0)  >=  ln(1 / alarm_delta).

Noise ``eta`` is how often an action kind's repeated observations of unchanged pairs
disagree (:class:`NoiseEstimate`): an observation that agrees with its history's mode is one
agreeing comparison; a run of surprises enters the tally only when it ends without an alarm
(an agreeing observation closes it: it was noise), as that many disagreements; a run that
ends in an alarm was drift and never enters it. The estimate is shrunk toward the pooled
rate of all actions, which is shrunk toward ``noise_prior_rate`` (weight
``noise_prior_weight`` pseudo-comparisons), so a fresh robot starts cautious and learns how
reliable each sensor is.
The verifier never takes a *loss* (a look that only lacks objects its memory shows: a
missed detection, a camera dropout) as more certain than ``noise_prior_rate``: a sensor can
always miss, whereas a new or different object is positive evidence. A block that really
left is confirmed by a second empty look, or at once by object-level evidence when it is
seen at its new place.

Object looks (``objects=cup,person*2``) also learn each class's own rates: a detector that
misses a small cup one look in five but a person almost never must not make a missing
person as unsurprising as a missing cup. A tally key ``kind@class`` (e.g. ``look:loss@cup``:
looks whose remembered mode shows a cup, and how many of them lost it; ``look:other@dog``:
how many showed a dog that the mode lacks) is kept beside the kind's tally; a compound key
``look:loss@cup+person`` counts once toward the kind and once toward each class
(:meth:`NoiseEstimate.add`). A class's rate is shrunk toward its kind's rate with the
prior's weight (:meth:`NoiseEstimate.class_rate`), so a class with little data falls back to
the kind's pooled estimate; class tallies never enter :meth:`NoiseEstimate.pooled`. In the
test (``class_loss`` / ``class_extra`` of :func:`log_bayes_factor`) losing the classes S of
a mode has probability prod_{c in S} miss_c, and showing classes E the mode lacks prod_{c in
E} false_c. Colour looks and every other action keep the kind-level rates: their tallies and
tests are unchanged.

What this gives, for a history of n >> 1 consistent samples (``alarm_delta`` 0.02,
threshold ln 50): one contradiction alarms when eta <= 1/101 (log BF ~ ln((1 - eta) /
(2 eta))), i.e. a deterministic world after ~100 consistent comparisons; with eta = 0.1 (10%
missed detections) it takes 3 consecutive contradictions; with eta = 0.05, 2. Against a single
earlier sample the evidence is at most ln(1 / (4 eta)): one contradiction alarms only when
eta <= 1/200, and never with 10% noise however long the run (one old look against many new
ones is better explained by that old look having been the noise; the new samples then
simply outnumber it in memory). These are :func:`min_history_for_alarm`'s statements, tested.
Under H0, the Bayes factor is a non-negative martingale with mean 1, so the probability that
a test that starts at a surprise ever reaches 1 / alarm_delta is at most alarm_delta (Ville's
inequality) when eta is right; the false-alarm rate per transition is measured on
nuisance-only streams in the tests and the benchmark suite.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CLASS_MARK",
    "NoiseEstimate",
    "class_key",
    "history_mode",
    "log_bayes_factor",
    "min_history_for_alarm",
    "run_length_for_alarm",
]

_OTHER = object()  # the "some outcome not seen yet" mode

#: separates a noise kind from its classes in a tally key: ``look:loss@cup+person``
CLASS_MARK = "@"


def class_key(kind: str, classes: Sequence[str] | frozenset[str] | set[str]) -> str:
    """The tally key that counts toward ``kind`` and each of ``classes`` (sorted), or
    ``kind`` itself when there are none: ``class_key("look:loss", {"person", "cup"})`` is
    ``"look:loss@cup+person"``. A class name with ``@``, ``+`` or ``~`` is refused."""
    names = sorted(set(classes))
    for n in names:
        if not n or CLASS_MARK in n or "+" in n or "~" in n:
            raise ValueError(f"class name {n!r} cannot be a noise tally key (it must be "
                             "non-empty, without '@', '+' or '~')")
    return f"{kind}{CLASS_MARK}{'+'.join(names)}" if names else kind


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def history_mode(counts: Mapping[str, int]) -> set[str]:
    """The most frequent outcomes of a history (several on a tie; empty for no history)."""
    if not counts:
        return set()
    top = max(counts.values())
    return {o for o, c in counts.items() if c == top}


def log_bayes_factor(
    history: Mapping[str, int],
    run: Sequence[str],
    eta: float,
    *,
    loss_eta: float | None = None,
    objects: Callable[[str], frozenset[str] | set[str]] | None = None,
    pair_eta: Callable[[str, str], float | None] | None = None,
    class_loss: Callable[[str], float] | None = None,
    class_extra: Callable[[str], float] | None = None,
) -> float:
    """log P(data | drift before ``run``) - log P(data | no drift); see the module docstring.

    ``history``: outcome -> count of the pair's trusted samples before the run; ``run``: the
    consecutive surprising outcomes (oldest first, the current one last); ``eta``: the noise
    rate in (0, 0.5). With ``loss_eta`` and ``objects`` (outcome -> the objects it shows),
    an observation that only lacks objects of the true mode (a miss) has probability
    ``loss_eta`` and any other mismatch ``eta``. With ``pair_eta(outcome, mode)`` a
    mismatch against a seen mode has the rate of its kind (None: ``eta``), e.g. a slip to
    a neighbour (common) apart from the same tile turning into a hole (never noise).
    With ``class_loss(c)`` (class -> its miss rate; needs ``loss_eta`` and ``objects``) an
    observation that only lacks the classes S of the mode has probability prod_{c in S}
    class_loss(c) instead of ``loss_eta``, and a mode keeps all its classes with
    probability 1 - eta - (1 - prod_{c in mode} (1 - class_loss(c))); with
    ``class_extra(c)`` one that shows classes E the mode lacks has prod_{c in E}
    class_extra(c) (times the lost classes' miss rates) instead of ``eta``.
    """
    for name, value in (("eta", eta), ("loss_eta", loss_eta)):
        if value is not None and not 0 < value < 0.5:
            raise ValueError(f"noise rate {name} must be in (0, 0.5), got {value!r}")
    if not run:
        return 0.0
    run_counts: dict[str, int] = {}
    for o in run:
        run_counts[o] = run_counts.get(o, 0) + 1
    modes: list[object] = sorted(set(history) | set(run_counts))
    modes.append(_OTHER)
    log_prior = -math.log(len(modes))
    split = loss_eta is not None and objects is not None
    hit = math.log1p(-(eta + (loss_eta or 0.0))) if split else math.log1p(-eta)
    miss, loss = math.log(eta), math.log(loss_eta) if split else 0.0
    obj = {o: frozenset(objects(o)) for o in modes if isinstance(o, str)} if split else {}
    per_class = split and class_loss is not None
    miss_of: dict[str, float] = {}
    hit_of: dict[object, float] = {}
    if per_class:
        assert class_loss is not None
        miss_of = {c: min(0.45, max(1e-4, class_loss(c))) for v in obj.values() for c in v}
        for t in modes:
            keep = math.prod(1.0 - miss_of[c] for c in obj[t]) if isinstance(t, str) else 1.0
            hit_of[t] = math.log(max(1e-3, keep - eta))

    def logp(o: str, t: object) -> float:
        if o == t:
            return hit_of[t] if per_class else hit
        if per_class and isinstance(t, str):
            lost, extra = obj[t] - obj[o], obj[o] - obj[t]
            if not extra and lost:
                return sum(math.log(miss_of[c]) for c in lost)
            if extra and class_extra is not None:
                rate = math.prod(min(0.45, max(1e-4, class_extra(c))) for c in extra)
                return math.log(max(1e-8, rate)) + sum(math.log(miss_of[c]) for c in lost)
            return miss
        if split and isinstance(t, str) and obj[o] < obj[t]:
            return loss
        if pair_eta is not None and isinstance(t, str):
            rate = pair_eta(o, t)
            if rate is not None:
                return math.log(min(0.45, max(1e-4, rate)))
        return miss

    def loglik(counts: Mapping[str, int], t: object) -> float:
        return sum(c * logp(o, t) for o, c in counts.items())

    hist_ll = {t: loglik(history, t) for t in modes}
    run_ll = {t: loglik(run_counts, t) for t in modes}
    log_h0 = _logsumexp([log_prior + hist_ll[t] + run_ll[t] for t in modes])
    alt = -math.log(len(modes) - 1)
    terms = []
    for t0 in modes:
        changed = _logsumexp([alt + run_ll[t1] for t1 in modes if t1 is not t0])
        terms.append(log_prior + hist_ll[t0] + changed)
    return _logsumexp(terms) - log_h0


def min_history_for_alarm(eta: float, alarm_delta: float, max_n: int = 10_000) -> int | None:
    """Smallest consistent history n against which ONE contradiction alarms (None: never)."""
    threshold = math.log(1.0 / alarm_delta)
    for n in range(1, max_n + 1):
        if log_bayes_factor({"old": n}, ["new"], eta) >= threshold:
            return n
    return None


def run_length_for_alarm(eta: float, alarm_delta: float, history: int = 20,
                         max_k: int = 50) -> int | None:
    """Consecutive contradictions of a ``history``-sample memory needed for an alarm."""
    threshold = math.log(1.0 / alarm_delta)
    for k in range(1, max_k + 1):
        if log_bayes_factor({"old": history}, ["new"] * k, eta) >= threshold:
            return k
    return None


def _kind_key(key: str) -> bool:
    """A kind's own tally: neither a relation's (``~``) nor a class's (``@``)."""
    return "~" not in key and CLASS_MARK not in key


@dataclass
class NoiseEstimate:
    """Online observation-noise rate per action kind (see the module docstring).

    ``counts[action] = [comparisons, disagreements]``; ``prior_rate`` / ``prior_weight`` the
    prior. Where outcomes have structure, disagreements are also tallied per *relation*
    (which part of the outcome differed: ``counts["action~relation"] = [0, disagreements]``)
    and :meth:`relation_rate` is that relation's share of the action's comparisons, so a
    kind of disagreement never seen in many comparisons becomes strong evidence of change.
    JSON round trip through :meth:`to_json` / :meth:`from_json`.
    """

    prior_rate: float = 0.1
    prior_weight: float = 10.0
    counts: dict[str, list[int]] = field(default_factory=dict)

    def add(self, action: str, disagree: bool, n: int = 1) -> None:
        """Count ``n`` comparisons (negative ``n`` removes them again, floored at 0).

        A compound key ``kind@a+b`` (:func:`class_key`) counts toward ``kind`` and toward
        each class's tally ``kind@a``, ``kind@b``."""
        if CLASS_MARK in action:
            kind, names = action.split(CLASS_MARK, 1)
            self._add(kind, disagree, n)
            for name in names.split("+"):
                self._add(f"{kind}{CLASS_MARK}{name}", disagree, n)
            return
        self._add(action, disagree, n)

    def _add(self, action: str, disagree: bool, n: int) -> None:
        c = self.counts.setdefault(action, [0, 0])
        c[0] = max(0, c[0] + n)
        if disagree:
            c[1] = max(0, min(c[0], c[1] + n))
        c[1] = min(c[1], c[0])

    def add_relation(self, action: str, relation: str, n: int = 1) -> None:
        """Count ``n`` disagreements of ``action`` whose kind is ``relation``."""
        c = self.counts.setdefault(f"{action}~{relation}", [0, 0])
        c[1] = max(0, c[1] + n)

    def pooled(self) -> float:
        """Rate over all actions, shrunk toward the prior (class tallies left out)."""
        m = sum(c[0] for k, c in self.counts.items() if _kind_key(k))
        d = sum(c[1] for k, c in self.counts.items() if _kind_key(k))
        return (d + self.prior_rate * self.prior_weight) / (m + self.prior_weight)

    def relation_rate(self, action: str, relation: str) -> float:
        """Rate of ``action``'s disagreements of kind ``relation`` per comparison, shrunk
        toward that relation's rate over all actions (itself shrunk toward the prior);
        clipped to (1e-4, 0.45)."""
        tail = "~" + relation
        total_m = sum(c[0] for k, c in self.counts.items() if _kind_key(k))
        total_d = sum(c[1] for k, c in self.counts.items() if k.endswith(tail))
        w = self.prior_weight
        pooled = (total_d + self.prior_rate * 4 * w) / (total_m + 4 * w)
        m = self.counts.get(action, [0, 0])[0]
        d = self.counts.get(action + tail, [0, 0])[1]
        return min(0.45, max(1e-4, (d + pooled * w) / (m + w)))

    def rate(self, action: str) -> float:
        """The action kind's rate, shrunk toward the pooled rate; clipped to (1e-4, 0.45)."""
        m, d = self.counts.get(action, (0, 0))
        eta = (d + self.pooled() * self.prior_weight) / (m + self.prior_weight)
        return min(0.45, max(1e-4, eta))

    def class_rate(self, kind: str, name: str, *, own_comparisons: bool = True) -> float:
        """Class ``name``'s rate of noise ``kind``, shrunk toward the kind's :meth:`rate`
        with the prior's weight (a class with little data has its kind's rate); clipped to
        (1e-4, 0.45). ``own_comparisons``: the class's comparisons are its own tally's
        (a miss: looks whose mode showed the class); False: the kind's (a false class:
        every look of the kind could have shown it)."""
        base = self.rate(kind)
        m, d = self.counts.get(f"{kind}{CLASS_MARK}{name}", (0, 0))
        if not own_comparisons:
            m = max(d, self.counts.get(kind, (0, 0))[0])
        eta = (d + base * self.prior_weight) / (m + self.prior_weight)
        return min(0.45, max(1e-4, eta))

    def novelty_rate(self, kind: str) -> float:
        """Rate per comparison at which ``kind``'s tally met a class for the first time: the
        number of classes with a disagreement of their own (each was new once) over the
        kind's comparisons, shrunk toward the kind's :meth:`rate` with the prior's weight;
        clipped to (1e-4, 0.45). A detector's rare confusions are a long tail of classes, each
        seen about once: one class's own tally says little about the next unseen one, the
        tail's size does (a Good-Turing style estimate of "something new shows up")."""
        head = kind + CLASS_MARK
        firsts = sum(1 for k, c in self.counts.items() if k.startswith(head) and c[1] > 0)
        m = self.counts.get(kind, (0, 0))[0]
        eta = (firsts + self.rate(kind) * self.prior_weight) / (m + self.prior_weight)
        return min(0.45, max(1e-4, eta))

    def class_rates(self, kind: str) -> dict[str, float]:
        """Every class with a tally of ``kind``, with its :meth:`class_rate` (``:other``
        kinds over the kind's comparisons)."""
        head = kind + CLASS_MARK
        own = not kind.endswith(":other")
        return {k[len(head):]: round(self.class_rate(kind, k[len(head):], own_comparisons=own),
                                     4) for k in sorted(self.counts) if k.startswith(head)}

    def to_json(self) -> dict[str, list[int]]:
        """Plain dict for the store's state table."""
        return {a: list(c) for a, c in self.counts.items()}

    @classmethod
    def from_json(cls, data: object, prior_rate: float, prior_weight: float) -> NoiseEstimate:
        """Rebuild from :meth:`to_json` output; anything malformed starts from the prior."""
        out = cls(prior_rate, prior_weight)
        if isinstance(data, dict):
            for a, c in data.items():
                if (isinstance(a, str) and isinstance(c, list) and len(c) == 2
                        and all(isinstance(x, int) and x >= 0 for x in c)):
                    out.counts[a] = [c[0], c[1] if "~" in a else min(c[0], c[1])]
        return out
