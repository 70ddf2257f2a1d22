"""Memory update rules compared in the GLOVE paper, behind one small interface.

Every rule stores experience as (state, action) -> outcome samples and answers one
question for the agent: "what do I believe happens if I take ``action`` in ``state``?"
Only the *update rule* differs between them; the agent that plans on the answers is the same.

The rules (papers/glove.md, ablation table; DESIGN.md section 3):

=====================  ==================================================================
name                   update rule
=====================  ==================================================================
``Static``             learns during the source phase, never updates afterwards
``LatestOverwrite``    the newest outcome of (s, a) replaces all older ones
``RecentK``            keeps the newest K = 3 outcomes of (s, a), believes their frequencies
``SlidingWindow``      keeps the newest W = 5 outcomes of (s, a) (a window counted in
                       samples per (s, a), like the paper's other per-state rules)
``RecencyWeighted``    keeps every outcome, weights it by 0.5 ** (age / 5) with age in
                       interaction steps (half-life 5), normalised per (s, a)
``PageHinkleyReset``   keeps every outcome; a Page-Hinkley test on the surprise stream
                       (1 - believed probability of what happened) clears all memory
``PeriodicRefresh``    keeps every outcome; clears all memory every 30 interaction steps
``GLOVE-sync``         the core verifier (:mod:`glove_ros.core.verify.verifier`) over the core
                       store, probing by synchronous replay; when the agent is stuck it
                       re-tests stale negative memories (the deadlock rule)
``GLOVE-async``        the same verifier in replay-relaxed asynchronous mode: suppresses
                       refuted and stale negative memory, never forces a probe
``Oracle``             believes the true current world (the upper bound of a scenario)
``LearnerReference``   the truth of every move it has tried; a change for the worse is met
                       by trying the move or seeing the place, one for the better is told
                       (a reference for rules that learn, not a bound; not in
                       :func:`rule_names`)
=====================  ==================================================================

GLOVE runs with the core verifier's defaults (the calibrated Bayes-factor detector). Its
stale-negative re-test when the agent is stuck (the deadlock rule) is a project extension
beyond the paper; :data:`GLOVE_ABLATIONS` switch it off (``GLOVE-async-norecheck``), use the
paper's ``p_th`` count instead of the calibrated detector (``-pth``), or drop object-level
and corridor-symmetry evidence (``-noobject``), or learn one noise rate per action instead of
one per kind of disagreement of structured outcomes (``-nostructure``), or let the detour
hook re-test every stale negative in the way instead of only those at places that changed
before (``-anyrecheck``). Every rule gets
the same ``on_stuck`` call and answers by its own rule: GLOVE re-tests stale negatives,
PageHinkleyReset resets, PeriodicRefresh refreshes, the local rules do nothing;
``<baseline>+retest`` gives a baseline GLOVE's re-test (:mod:`glove_ros.core.verify.retest`).

Interface (:class:`MemoryRule`): ``observe(state, action, outcome, reward, step)`` records
one real transition; ``distribution(state, action)`` gives the believed outcome distribution
(``None``: nothing is believed, the action is unknown) and ``support`` how many samples it
rests on; ``predict`` the most likely outcome;
``probe_requests()`` drains the probes the rule wants run now (GLOVE-sync only) and
``apply_probes(target, outcomes)`` hands their results back; ``on_stuck()`` is the hook the
agent calls when its memory leaves it no way forward (GLOVE uses it to re-test stale negative
memories, the self-confirming deadlock breaker) and ``on_blocked(pairs)`` the one it calls
when remembered failures force a detour (GLOVE re-tests those not re-confirmed since the
latest dissonance; the other rules keep what they believe). States, actions and outcomes are any
hashable values; an outcome is the task's outcome signature, never raw sensor data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Outcome = Hashable
Key = tuple[Hashable, Hashable]

__all__ = [
    "BASELINE_PARAMS",
    "BASELINE_RULES",
    "GLOVE_ABLATIONS",
    "GLOVE_RULES",
    "GloveRule",
    "LatestOverwrite",
    "LearnerReference",
    "MemoryRule",
    "Oracle",
    "PageHinkleyReset",
    "PageHinkleyTest",
    "PeriodicRefresh",
    "ProbeTarget",
    "RecencyWeighted",
    "RecentK",
    "SlidingWindow",
    "Static",
    "glove_config_fields",
    "make_rule",
    "rule_names",
]


@dataclass(frozen=True)
class ProbeTarget:
    """A request to sample ``action`` in ``state`` afresh ``count`` times.

    ``reason`` is ``"dissonance"`` (the verifier raised an alert) or ``"stale_negative"``
    (the agent is stuck and this negative memory is re-tested). ``token`` is the rule's own
    handle for :meth:`MemoryRule.apply_probes` (for GLOVE, the core ``ProbeRequest``).
    """

    state: Hashable
    action: Hashable
    count: int
    reason: str = "dissonance"
    token: Any = field(default=None, compare=False)


class MemoryRule(ABC):
    """One memory update rule; see the module docstring for the interface."""

    #: display name used in tables and JSON
    name: str = "MemoryRule"
    #: ``"none"``: never probes; ``"sync"``: wants probes run now; ``"async"``: never forces one
    probe_mode: str = "none"

    def __init__(self) -> None:
        self.alerts = 0
        self.learning = True

    def begin_phase(self, phase: str, learning: bool) -> None:
        """Called before each phase; ``learning`` is True for the source (learning) phase."""
        self.learning = learning

    @abstractmethod
    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        """Record one real transition observed at global interaction ``step``."""

    @abstractmethod
    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        """Believed outcome distribution of (state, action); ``None`` when nothing is believed."""

    def support(self, state: Hashable, action: Hashable) -> int:
        """How many remembered samples the belief about (state, action) rests on (0: none)."""
        return 0 if self.distribution(state, action) is None else 1

    def predict(self, state: Hashable, action: Hashable) -> Outcome | None:
        """The most likely believed outcome of (state, action), or ``None`` if unknown."""
        dist = self.distribution(state, action)
        if not dist:
            return None
        return max(dist.items(), key=lambda kv: kv[1])[0]

    def probe_requests(self) -> list[ProbeTarget]:
        """Probes this rule wants run now (drained on read). Baselines never probe."""
        return []

    def apply_probes(self, target: ProbeTarget, outcomes: Sequence[Outcome]) -> None:
        """Hand back the fresh outcomes of a probe; may be fewer than requested (budget)."""
        return None

    def on_stuck(
        self, state: Hashable, step: int = 0, reachable: Iterable[Hashable] | None = None
    ) -> list[ProbeTarget]:
        """The agent's memory leaves it no way forward from ``state``; return probes to run.

        ``reachable`` are the states the agent believes it can still reach (None: any).
        Local rules have nothing to offer here: that is the self-confirming deadlock.
        """
        return []

    def on_blocked(self, pairs: Sequence[Key], step: int = 0,
                   no_route: bool = False) -> list[ProbeTarget]:
        """Memory of ``pairs`` as failures is all that stands between the agent and a
        shorter route (it detours, or is stuck); return probes to run. ``no_route``: memory
        leaves no route at all (every route passes a remembered failure), not only a
        longer one.

        Local rules keep what they believe (a detour costs steps, not the task)."""
        return []

    def stats(self) -> dict[str, Any]:
        """Rule-specific counters for reports (alerts, resets, probes, ...)."""
        return {"alerts": self.alerts}

    def close(self) -> None:
        """Release resources (GLOVE's store); the rule is unusable afterwards."""
        return None


class _SampleMemory(MemoryRule):
    """Shared storage: per (state, action) a list of (outcome, step) samples."""

    def __init__(self) -> None:
        super().__init__()
        self._samples: dict[Key, Any] = {}
        self._now = 0

    def _new_bucket(self) -> Any:
        return []

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        self._now = max(self._now, step)
        bucket = self._samples.get((state, action))
        if bucket is None:
            bucket = self._samples[(state, action)] = self._new_bucket()
        bucket.append((outcome, step))

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        bucket = self._samples.get((state, action))
        if not bucket:
            return None
        return _frequencies(o for o, _ in bucket)

    def support(self, state: Hashable, action: Hashable) -> int:
        return len(self._samples.get((state, action)) or ())

    def clear(self) -> None:
        """Forget every sample."""
        self._samples.clear()

    def forget(self, state: Hashable, action: Hashable) -> bool:
        """Forget every sample of (state, action) (the shared re-test policy,
        :mod:`glove_ros.core.verify.retest`, sets them aside); True if there were any."""
        return bool(self._samples.pop((state, action), None))


def _frequencies(outcomes: Any) -> dict[Outcome, float]:
    counts: dict[Outcome, float] = {}
    n = 0
    for o in outcomes:
        counts[o] = counts.get(o, 0.0) + 1.0
        n += 1
    return {o: c / n for o, c in counts.items()}


class Static(_SampleMemory):
    """Learns during the source phase (all samples, frequencies), never updates afterwards."""

    name = "Static"

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        if self.learning:
            super().observe(state, action, outcome, reward, step)


class LatestOverwrite(_SampleMemory):
    """The newest outcome of (s, a) overwrites every older record of that pair."""

    name = "LatestOverwrite"

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        self._now = max(self._now, step)
        self._samples[(state, action)] = [(outcome, step)]


class RecentK(_SampleMemory):
    """Keeps the newest ``k`` outcomes of each (s, a) and believes their frequencies."""

    def __init__(self, k: int = 3) -> None:
        if k < 1:
            raise ValueError(f"RecentK needs k >= 1, got {k}")
        super().__init__()
        self.k = k
        self.name = f"RecentK-K{k}" if k != 3 else "RecentK"

    def _new_bucket(self) -> Any:
        return deque(maxlen=self.k)


class SlidingWindow(RecentK):
    """A window of the newest ``window`` outcomes of each (s, a) (the paper's W = 5).

    The paper lists it among per-state rules without naming the unit; a window counted in
    global steps would forget the learned route within one episode, so it is counted in
    samples per (s, a). It therefore differs from RecentK only by the window size.
    """

    def __init__(self, window: int = 5) -> None:
        if window < 1:
            raise ValueError(f"SlidingWindow needs window >= 1, got {window}")
        super().__init__(k=window)
        self.window = window
        self.name = f"SlidingWindow-W{window}" if window != 5 else "SlidingWindow"


class RecencyWeighted(_SampleMemory):
    """Keeps every outcome; weight 0.5 ** (age / half_life), age in interaction steps.

    Weights are normalised per (s, a) at retrieval, so nothing is ever forgotten: an old
    outcome only loses to newer ones of the same pair.
    """

    def __init__(self, half_life: float = 5.0) -> None:
        if not half_life > 0:
            raise ValueError(f"RecencyWeighted needs half_life > 0, got {half_life}")
        super().__init__()
        self.half_life = float(half_life)
        self.name = (
            "RecencyWeighted" if half_life == 5 else f"RecencyWeighted-H{half_life:g}"
        )

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        bucket = self._samples.get((state, action))
        if not bucket:
            return None
        newest = max(t for _, t in bucket)
        weights: dict[Outcome, float] = {}
        for o, t in bucket:
            # ages relative to the pair's newest sample: same ratios, no underflow
            weights[o] = weights.get(o, 0.0) + 0.5 ** ((newest - t) / self.half_life)
        total = sum(weights.values())
        return {o: w / total for o, w in weights.items()}


class PageHinkleyTest:
    """The Page-Hinkley change test on a stream of surprises x in [0, 1].

    With running mean ``x_bar``, ``m_t = sum(x - x_bar - delta)`` and ``M_t = min m``;
    :meth:`update` returns True (an alarm) when ``m_t - M_t > threshold`` and restarts.
    Shared by :class:`PageHinkleyReset` and the JetRover benchmark's view of it.
    """

    def __init__(self, delta: float = 0.05, threshold: float = 1.0) -> None:
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.reset()

    def reset(self) -> None:
        """Forget the stream."""
        self.n = 0
        self.mean = 0.0
        self.m = 0.0
        self.m_min = 0.0

    def update(self, x: float) -> bool:
        """Add one surprise; True on an alarm (the test then starts afresh)."""
        self.n += 1
        self.mean += (x - self.mean) / self.n
        self.m += x - self.mean - self.delta
        self.m_min = min(self.m_min, self.m)
        if self.m - self.m_min > self.threshold:
            self.reset()
            return True
        return False


class PageHinkleyReset(_SampleMemory):
    """Keeps every outcome; a Page-Hinkley change test on surprise clears all memory.

    Surprise of a transition of a known pair is ``x = 1 - P_memory(observed outcome)``.
    With running mean ``x_bar``, ``m_t = sum(x - x_bar - delta)`` and ``M_t = min m``; an
    alarm (``m_t - M_t > threshold``) counts as an alert and empties the memory and the test.
    The defaults let one surprise pass and fire on the second one close behind it.
    """

    name = "PageHinkleyReset"

    def __init__(self, delta: float = 0.05, threshold: float = 1.0) -> None:
        if delta < 0 or threshold <= 0:
            raise ValueError(
                f"PageHinkleyReset needs delta >= 0 and threshold > 0, got {delta}, {threshold}"
            )
        super().__init__()
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.resets = 0
        self.test = PageHinkleyTest(delta, threshold)

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        dist = self.distribution(state, action)
        if dist is not None and self.test.update(1.0 - dist.get(outcome, 0.0)):
            self.alerts += 1
            self.resets += 1
            self.clear()
        super().observe(state, action, outcome, reward, step)

    def on_stuck(
        self, state: Hashable, step: int = 0, reachable: Iterable[Hashable] | None = None
    ) -> list[ProbeTarget]:
        """Its own answer to being stuck: treat it as a change and reset (memory and test)."""
        if self._samples:
            self.resets += 1
            self.clear()
            self.test.reset()
        return []

    def stats(self) -> dict[str, Any]:
        return {"alerts": self.alerts, "resets": self.resets}


class PeriodicRefresh(_SampleMemory):
    """Keeps every outcome; clears all memory every ``period`` interaction steps."""

    def __init__(self, period: int = 30) -> None:
        if period < 1:
            raise ValueError(f"PeriodicRefresh needs period >= 1, got {period}")
        super().__init__()
        self.period = period
        self.refreshes = 0
        self._epoch: int | None = None
        self.name = "PeriodicRefresh" if period == 30 else f"PeriodicRefresh-S{period}"

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        epoch = step // self.period
        if self._epoch is not None and epoch != self._epoch:
            self.clear()
            self.refreshes += 1
        self._epoch = epoch
        super().observe(state, action, outcome, reward, step)

    def on_stuck(
        self, state: Hashable, step: int = 0, reachable: Iterable[Hashable] | None = None
    ) -> list[ProbeTarget]:
        """Its own answer to being stuck: refresh now (and start a new period)."""
        if self._samples:
            self.clear()
            self.refreshes += 1
            self._epoch = step // self.period
        return []

    def stats(self) -> dict[str, Any]:
        return {"alerts": self.alerts, "refreshes": self.refreshes}


class Oracle(MemoryRule):
    """The upper bound: believes the true current world, whatever it observed.

    The benchmark tells it the world at each phase with :meth:`set_world` (a mapping
    (state, action) -> true outcome distribution); it never learns nor forgets anything.
    """

    name = "Oracle"

    def __init__(self) -> None:
        super().__init__()
        self._world: Mapping[Key, Mapping[Outcome, float]] = {}

    def set_world(self, model: Mapping[Key, Mapping[Outcome, float]]) -> None:
        """The true outcome distribution of every (state, action) from now on."""
        self._world = model

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        return None

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        dist = self._world.get((state, action))
        return dict(dist) if dist else None

    def support(self, state: Hashable, action: Hashable) -> int:
        return 1_000_000 if self._world.get((state, action)) else 0


class LearnerReference(Oracle):
    """A reference for rules that learn (not a bound): a strong memory of the agent's moves.

    It knows the true current outcome (odds included) of every move it has tried, in any
    phase, with two limits that no memory escapes and two gifts that none gets:

    * a move never tried is unknown (the agent explores it as it would with any rule);
    * a change for the worse at a tried move (a higher chance of a failure outcome,
      ``is_negative``) is learnt by meeting it: trying the move again, or seeing a place the
      move leads to as its new kind by any move (place-level generalisation, as GLOVE's
      place view: outcomes shaped ``(place, kind)``, FrozenLake ``(tile, hole | ice)``;
      a hole fallen into is a hole for every move into that tile). Until then it believes
      what the move did before (the first fall into a tile that has just become a hole);
    * gifts: a tried move's odds are exact after one try (no memory estimates slides that
      well), and a change for the better is known at once, as if re-tested for free.

    So a rule can beat it (a route that luckily misses a hole this one explores into), and
    it says nothing about what is left for memory to gain. The benchmark tells it the
    world at each phase with :meth:`set_world`, as the oracle.
    """

    name = "LearnerReference"

    def __init__(self, is_negative: Callable[[Outcome, float], bool] | None = None) -> None:
        super().__init__()
        self._is_negative = is_negative or (lambda outcome, reward: False)
        self._tried: set[Key] = set()
        #: believed, not yet met again: pair -> (belief, first world it is stale in)
        self._stale: dict[Key, tuple[Mapping[Outcome, float], int]] = {}
        self._epoch = 0  # worlds set so far
        self._place_kind: dict[Hashable, tuple[Hashable, int]] = {}  # newest kind, world

    def _p_negative(self, dist: Mapping[Outcome, float] | None) -> float:
        return sum(p for o, p in (dist or {}).items() if self._is_negative(o, 0.0))

    def set_world(self, model: Mapping[Key, Mapping[Outcome, float]]) -> None:
        believed = {key: self.distribution(*key) for key in self._tried}
        self._epoch += 1
        for key in self._tried:
            if self._p_negative(model.get(key)) > self._p_negative(believed[key]) + 1e-12:
                old = self._stale.get(key)
                self._stale[key] = (believed[key] or {}, old[1] if old else self._epoch)
            else:
                self._stale.pop(key, None)
        super().set_world(model)

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        self._tried.add((state, action))
        self._stale.pop((state, action), None)
        if isinstance(outcome, tuple) and len(outcome) == 2:
            self._place_kind[outcome[0]] = (outcome[1], self._epoch)

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        if (state, action) not in self._tried:
            return None
        if (state, action) not in self._stale:
            return super().distribution(state, action)
        belief, since = self._stale[(state, action)]
        out: dict[Outcome, float] = {}
        for o, p in belief.items():  # places seen since the change read as seen
            if isinstance(o, tuple) and len(o) == 2 and o[0] in self._place_kind:
                kind, seen = self._place_kind[o[0]]
                o = (o[0], kind) if seen >= since else o
            out[o] = out.get(o, 0.0) + p
        return out or None

    def support(self, state: Hashable, action: Hashable) -> int:
        return super().support(state, action) if (state, action) in self._tried else 0


BASELINE_RULES: dict[str, Callable[..., MemoryRule]] = {
    "Static": Static,
    "LatestOverwrite": LatestOverwrite,
    "RecentK": RecentK,
    "SlidingWindow": SlidingWindow,
    "RecencyWeighted": RecencyWeighted,
    "PageHinkleyReset": PageHinkleyReset,
    "PeriodicRefresh": PeriodicRefresh,
}
#: the parameter each baseline's sensitivity sweep varies (constructor keyword)
BASELINE_PARAMS: dict[str, str] = {
    "RecentK": "k",
    "SlidingWindow": "window",
    "RecencyWeighted": "half_life",
    "PageHinkleyReset": "threshold",
    "PeriodicRefresh": "period",
}
GLOVE_RULES = ("GLOVE-sync", "GLOVE-async")
#: GLOVE ablations (project extensions switched off, or the paper's p_th rule): name ->
#: (mode, VerifierConfig overrides)
GLOVE_ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "GLOVE-async-pth": ("async", {"detector": "p_th", "p_th": 3}),
    "GLOVE-async-norecheck": ("async", {"stale_negative_recheck": False}),
    "GLOVE-async-noobject": ("async", {"unique_objects": (), "symmetric_actions": ()}),
    "GLOVE-async-nostructure": ("async", {"structured_noise": False}),
    "GLOVE-async-anyrecheck": ("async", {"recheck_volatile_first": False}),
    "GLOVE-async-noplace": ("async", {"place_evidence": False}),
    "GLOVE-sync-pth": ("sync", {"detector": "p_th", "p_th": 3}),
}


def rule_names() -> list[str]:
    """Every rule name :func:`make_rule` accepts, in table order (GLOVE first)."""
    return [*GLOVE_RULES, *BASELINE_RULES, *GLOVE_ABLATIONS, "Oracle"]


def make_rule(
    name: str,
    glove_config: Mapping[str, Any] | None = None,
    is_negative: Callable[[Outcome, float], bool] | None = None,
    params: Mapping[str, Any] | None = None,
) -> MemoryRule:
    """Build a rule by name.

    ``glove_config`` (VerifierConfig fields except ``mode``, which the name fixes) and
    ``is_negative`` (which outcomes are failures, for the deadlock breaker) go to the GLOVE
    adapters only; ``params`` to a baseline's constructor (e.g. ``{"k": 5}`` for RecentK,
    see :data:`BASELINE_PARAMS`). ``<baseline>+retest`` (e.g. ``RecentK+retest``) is that
    baseline given GLOVE's stale-negative re-test (:mod:`glove_ros.core.verify.retest`).
    """
    if name.endswith("+retest"):
        from glove_ros.core.verify.retest import make_retest_rule

        return make_retest_rule(name, glove_config, is_negative, params)
    if name in BASELINE_RULES:
        try:
            return BASELINE_RULES[name](**dict(params or {}))
        except TypeError as exc:
            raise ValueError(f"bad parameters for {name}: {exc}") from None
    if params:
        raise ValueError(f"{name} takes no params (got {dict(params)})")
    if name == "Oracle":
        return Oracle()
    if name == "LearnerReference":
        return LearnerReference(is_negative)
    if name == "LearnerBound":
        raise ValueError("unknown memory rule 'LearnerBound': it was renamed "
                         "'LearnerReference' (a reference, not a bound)")
    if name in GLOVE_RULES:
        mode = "sync" if name == "GLOVE-sync" else "async"
        return GloveRule(mode, glove_config, is_negative=is_negative)
    if name in GLOVE_ABLATIONS:
        mode, overrides = GLOVE_ABLATIONS[name]
        rule = GloveRule(mode, {**dict(glove_config or {}), **overrides},
                         is_negative=is_negative)
        rule.name = name
        return rule
    raise ValueError(f"unknown memory rule {name!r}; choose from {', '.join(rule_names())}")


def glove_config_fields() -> list[str] | None:
    """Field names of the core ``VerifierConfig`` a GLOVE rule accepts (``mode`` excluded);
    None when the core verifier is not importable."""
    try:
        from glove_ros.core.verify.config import VerifierConfig
    except ImportError:
        return None
    import dataclasses

    return [f.name for f in dataclasses.fields(VerifierConfig) if f.name != "mode"]


def _encode(value: Hashable) -> str:
    return value if isinstance(value, str) else repr(value)


class GloveRule(MemoryRule):
    """GLOVE over the real core: :class:`~glove_ros.core.verify.verifier.GloveVerifier` on an
    :class:`~glove_ros.core.memory.store.ExperienceStore` (in memory unless ``store_path``).

    ``mode="sync"`` turns the verifier's probe requests into :class:`ProbeTarget` s the
    caller runs (synchronous replay) and hands back with :meth:`apply_probes`; a probe the
    caller could not finish is cancelled, which leaves the pair suppressed and pending
    (asynchronous re-verification). ``mode="async"`` never asks for a probe: refuted memory
    is suppressed and re-verified by natural visits.

    States, actions and outcomes are encoded to the store's strings (``str`` as is, else
    ``repr``) and decoded back. Beliefs are the verifier's Q_hist over trusted entries (the
    exact-state equivalence rule by default). :meth:`on_stuck` runs the verifier's deadlock
    rule (``recheck_negatives(stuck=True)``) on the states the agent can still reach;
    ``is_negative(outcome, reward)`` says which decoded outcomes are failures (default: the
    config's ``negative_outcomes`` on the encoded string). Stamps come from a step clock, so
    runs are reproducible.
    """

    def __init__(
        self,
        mode: str = "sync",
        config: Mapping[str, Any] | None = None,
        *,
        is_negative: Callable[[Outcome, float], bool] | None = None,
        store_path: str = ":memory:",
    ) -> None:
        from glove_ros.core.memory.store import ExperienceStore
        from glove_ros.core.verify.config import VerifierConfig
        from glove_ros.core.verify.verifier import GloveVerifier

        super().__init__()
        values = dict(config or {})
        if "mode" in values:
            raise ValueError("glove config must not set 'mode': GLOVE-sync / GLOVE-async fix it")
        values.setdefault("rule", "state")
        self.place_evidence = bool(values.pop("place_evidence", True))
        #: place -> (kind, step) of the newest observation showing it ((place, kind) outcomes)
        self._place_kind: dict[Hashable, tuple[Hashable, int]] = {}
        #: the latest step a place seen to change kind had last been seen as its old kind:
        #: the world surely changed after it (a change seen later may have happened before)
        self._place_changed_after = -1
        self._pair_alarmed_at = -1  # latest step a pair test itself alarmed
        #: place -> id of the newest recorded transition that reached it (``_record``)
        self._place_entry: dict[Hashable, int] = {}
        self._changed_places: set[Hashable] = set()  # places ever seen to change kind
        self.place_alerts = 0
        cfg = VerifierConfig.from_dict({**values, "mode": mode})
        self.name = "GLOVE-sync" if mode == "sync" else "GLOVE-async"
        self.probe_mode = mode
        self._clock_now = 0
        self._decode: dict[str, Hashable] = {}
        neg = None
        if is_negative is not None:
            user = is_negative

            def neg(outcome: str, reward: float) -> bool:
                return bool(user(self._decode.get(outcome, outcome), reward))

        self._is_neg: Callable[[str, float], bool] = neg or cfg.is_negative
        self.store = ExperienceStore(store_path, synchronous="NORMAL", clock=self._clock)
        try:
            self.verifier = GloveVerifier(self.store, cfg, is_negative=neg,
                                          noise_relation=self._relation)
        except BaseException:
            self.store.close()
            raise
        self._pending: list[ProbeTarget] = []
        self._cache: dict[tuple[str, str], dict[Outcome, float]] | None = None
        self._support: dict[tuple[str, str], int] = {}
        self.rechecks = 0
        self.cancelled_probes = 0
        #: (state, action, step) of every alert, object-level ones included (metrics)
        self.alert_log: list[tuple[Hashable, Hashable, int]] = []

    def _clock(self) -> float:
        return float(self._clock_now + 1)

    def _relation(self, outcome: str, mode: str) -> str | None:
        """Which fields of a structured (tuple) outcome differ from the remembered mode, e.g.
        ``"0"`` (FrozenLake: slid to another tile) or ``"1"`` (the same tile is now a
        hole); None for unstructured outcomes (one noise rate per action)."""
        a, b = self._decode.get(outcome, outcome), self._decode.get(mode, mode)
        if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)):
            return None
        return "+".join(str(i) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)

    def _enc(self, value: Hashable) -> str:
        key = _encode(value)
        self._decode.setdefault(key, value)
        return key

    def begin_phase(self, phase: str, learning: bool) -> None:
        super().begin_phase(phase, learning)
        self.verifier.phase = phase

    def observe(
        self, state: Hashable, action: Hashable, outcome: Outcome, reward: float = 0.0,
        step: int = 0,
    ) -> None:
        from glove_ros.core.memory.experience import Transition

        self._clock_now = max(self._clock_now, step)
        t = Transition(self._enc(state), self._enc(action), self._enc(outcome),
                       reward=float(reward), stamp=float(step + 1))
        self._record(t, state, action, outcome, step)
        self._cache = None

    def _record(self, t: Any, state: Hashable, action: Hashable, outcome: Outcome,
                step: int) -> None:
        """Hand one observed transition to the verifier, with the place-level reading: a
        place seen as another kind is a place alert (unless the pair's own test alarmed)
        and outside evidence that the world changed (the pair joins the places that
        changed before).

        The change is dated to just after the place was last seen as its old kind, not to
        when it is seen: the world surely changed after that, and a failure confirmed later
        is no staler for it (FrozenLake: a drift closes one tile and re-opens another at
        once; the agent meets the new hole first and the re-opened tile some episodes
        later, which says nothing new about the hole it met since)."""
        place = outcome[0] if isinstance(outcome, tuple) and len(outcome) == 2 else None
        last_seen = self._place_entry.get(place) if place is not None else None
        changed = self._saw_place(outcome, step)
        result = self.verifier.observe(t)
        self._log_alerts(result, step)
        self._place_alert(changed and not result.alerts, state, action, step)
        if changed and result.entry_id:
            self.verifier.note_world_change(
                last_seen + 1 if last_seen else result.entry_id,
                f"place {outcome[0]!r} changed", t.key)
        if place is not None and result.entry_id:
            self._place_entry[place] = result.entry_id
        self._pending += [self._target(r) for r in result.probe_requests]

    def _log_alerts(self, result: Any, step: int) -> None:
        for a in result.alerts:
            self.alerts += 1
            self._pair_alarmed_at = max(self._pair_alarmed_at, step)
            self.alert_log.append((self._decode.get(a.state_key, a.state_key),
                                   self._decode.get(a.action, a.action), step))

    def _target(self, req: Any) -> ProbeTarget:
        return ProbeTarget(self._decode.get(req.state_key, req.state_key),
                           self._decode.get(req.action, req.action), req.alpha, req.reason,
                           token=req)

    def _saw_place(self, outcome: Outcome, step: int) -> bool:
        """Remember the newest kind seen at a place (outcomes shaped ``(place, kind)``);
        True when the place was last seen as another kind (the world changed there)."""
        if not (self.place_evidence and isinstance(outcome, tuple) and len(outcome) == 2):
            return False
        old = self._place_kind.get(outcome[0])
        self._place_kind[outcome[0]] = (outcome[1], step)
        self._cache = None
        if old is None or old[0] == outcome[1]:
            return False
        self._place_changed_after = max(self._place_changed_after, old[1])
        self._changed_places.add(outcome[0])
        return True

    def _place_alert(self, raise_it: bool, state: Hashable, action: Hashable,
                     step: int) -> None:
        """A place seen as another kind than last time, where the pair's own test did not
        alarm, is a place-level alert: what a place is does not depend on how it was
        reached, so one such observation is a change of the world (FrozenLake: slipping
        changes where the agent lands, never what a tile is), with no noise to rule out."""
        if raise_it:
            self.alerts += 1
            self.place_alerts += 1
            self.alert_log.append((state, action, step))

    def _place_view(self, dist: dict[Outcome, float]) -> dict[Outcome, float]:
        """Place-level evidence: an outcome that reached a place shows what the place is
        now, so a remembered outcome of another kind at the same place is read as the
        newest kind seen there (the move's dynamics, where it leads, are kept)."""
        out: dict[Outcome, float] = {}
        for o, p in dist.items():
            if isinstance(o, tuple) and len(o) == 2 and o[0] in self._place_kind:
                o = (o[0], self._place_kind[o[0]][0])
            out[o] = out.get(o, 0.0) + p
        return out

    def _beliefs(self) -> dict[tuple[str, str], dict[Outcome, float]]:
        if self._cache is None:
            cache: dict[tuple[str, str], dict[Outcome, float]] = {}
            support: dict[tuple[str, str], int] = {}
            for g in self.store.outcome_groups():
                if g.action_arg:
                    continue
                n = g.size
                dist = {self._decode.get(o, o): c / n for o, c in g.counts.items()}
                cache[(g.state_key, g.action)] = (self._place_view(dist) if self._place_kind
                                                  else dist)
                support[(g.state_key, g.action)] = n
            self._cache = cache
            self._support = support
        return self._cache

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        if self.verifier.rule.key_based:
            dist = self._beliefs().get((_encode(state), _encode(action)))
            return dict(dist) if dist else None
        raw = self.verifier.distribution(_encode(state), _encode(action))
        return {self._decode.get(o, o): p for o, p in raw.items()} if raw else None

    def support(self, state: Hashable, action: Hashable) -> int:
        if self.verifier.rule.key_based:
            key = (_encode(state), _encode(action))
            self._beliefs()
            return self._support.get(key, 0)
        return super().support(state, action)

    def probe_requests(self) -> list[ProbeTarget]:
        out, self._pending = self._pending, []
        return out

    def apply_probes(self, target: ProbeTarget, outcomes: Sequence[Outcome]) -> None:
        req = target.token
        self._cache = None
        if req is None:  # an adapter-side re-test: the samples are evidence for P
            from glove_ros.core.memory.experience import Source, Transition

            for o in outcomes:
                t = Transition(self._enc(target.state), self._enc(target.action), self._enc(o),
                               source=Source.PROBED, stamp=float(self._clock_now + 1))
                self._record(t, target.state, target.action, o, self._clock_now)
            return
        for o in outcomes:
            self._place_alert(self._saw_place(o, self._clock_now), target.state,
                              target.action, self._clock_now)
        if len(outcomes) >= req.alpha:
            self.verifier.apply_probes(req, [self._enc(o) for o in outcomes])
        else:
            self.verifier.cancel_probe(req, f"only {len(outcomes)} of {req.alpha} probes ran")
            self.cancelled_probes += 1

    def on_stuck(
        self, state: Hashable, step: int = 0, reachable: Iterable[Hashable] | None = None
    ) -> list[ProbeTarget]:
        self._clock_now = max(self._clock_now, step)
        keys = None if reachable is None else [_encode(s) for s in reachable]
        stamp = float(step + 1)
        result = self.verifier.recheck_negatives(keys, stuck=True, stamp=stamp)
        self.rechecks += len(result.pairs)
        doubted = self._doubt_places(None)
        self._cache = None
        targets = [self._target(r) for r in result.probe_requests]
        return targets + self._place_probes(doubted, targets, None if reachable is None
                                            else set(reachable))

    def on_blocked(self, pairs: Sequence[Key], step: int = 0,
                   no_route: bool = False) -> list[ProbeTarget]:
        """Re-test the remembered failures in the way if the world changed since they were
        last confirmed (the deadlock rule restricted to ``pairs``; nothing in a world that
        never showed a dissonance). A detour re-tests only places that changed before;
        with ``no_route`` (memory leaves no route at all) the others too when none did."""
        self._clock_now = max(self._clock_now, step)
        enc = [(_encode(s), _encode(a)) for s, a in pairs]
        self._mark_changed_places(enc)
        result = self.verifier.recheck_negatives(None, stuck=False, stamp=float(step + 1),
                                                 pairs=enc, no_route=no_route)
        self.rechecks += len(result.pairs)
        doubted = self._doubt_places(pairs)
        if doubted or result.pairs:
            self._cache = None
        targets = [self._target(r) for r in result.probe_requests]
        return targets + self._place_probes(doubted, targets, None, pairs)

    def _mark_changed_places(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Place-level volatility: a named pair whose remembered failure lies at a place
        that was seen to change kind before joins the places that changed before (the
        detour re-tests those first), whichever pair saw the change. Why: a hole first met
        by a pair with no memory of the tile (slid in from the side) alarms nowhere, and the
        pair that saw the tile change may hold no memory of it any more."""
        if not self._changed_places:
            return
        wanted = set(pairs)
        keys = []
        for g in self.store.outcome_groups(sorted({s for s, _ in wanted})):
            if (g.state_key, g.action) not in wanted:
                continue
            for o in g.counts:
                d = self._decode.get(o, o)
                if (isinstance(d, tuple) and len(d) == 2 and d[0] in self._changed_places
                        and self._is_neg(o, 0.0)):
                    keys.append(g.pair)
                    break
        if keys:
            self.verifier.note_changed_before(keys)

    def _place_probes(self, places: set[Hashable], taken: Sequence[ProbeTarget],
                      states: set[Hashable] | None,
                      pairs: Sequence[Key] | None = None) -> list[ProbeTarget]:
        """Synchronous mode re-tests the pairs whose failure was only read from a doubted
        place (their own memory says they arrive safely) by probes, as it does a pair's own
        remembered failure; asynchronous mode leaves them to the next natural visit."""
        if self.probe_mode != "sync" or not places:
            return []
        done = {(t.state, t.action) for t in taken}
        out: list[ProbeTarget] = []
        for g in self.store.outcome_groups():
            if g.action_arg:
                continue
            s, a = self._decode.get(g.state_key, g.state_key), self._decode.get(g.action,
                                                                                 g.action)
            if (s, a) in done or (states is not None and s not in states) or (
                    pairs is not None and (s, a) not in pairs):
                continue
            outs = {self._decode.get(o, o): c / g.size for o, c in g.counts.items()}
            own_failure = sum(p for o, p in outs.items() if self._is_neg(self._enc(o), 0.0))
            if own_failure < 0.5 and any(isinstance(o, tuple) and len(o) == 2
                                         and o[0] in places for o in outs):
                out.append(ProbeTarget(s, a, self.verifier.config.alpha, "stale_negative"))
                done.add((s, a))
        return out

    def _doubt_places(self, pairs: Sequence[Key] | None) -> set[Hashable]:
        """The re-test of place-level evidence: a failure kind read from another pair's
        outcome (not the pair's own memory) is dropped when the world surely changed after
        it was seen: a pair test alarmed since, or a place seen to change kind had been
        seen as its old kind since (a place seen to change later, but last seen before,
        may have changed before: it makes nothing staler), for the places ``pairs`` lead
        to (None: every place). The pairs then plan on their own memory and the next visit
        shows the place again. Returns the places dropped."""
        if not self._place_kind:
            return set()
        last_alarm = max(self._place_changed_after, self._pair_alarmed_at)
        places: set[Hashable] | None = None
        if pairs is not None:
            places = set()
            for s, a in pairs:
                raw = self.verifier.distribution(_encode(s), _encode(a)) or {}
                for o in raw:
                    d = self._decode.get(o, o)
                    if isinstance(d, tuple) and len(d) == 2:
                        places.add(d[0])
        dropped: set[Hashable] = set()
        for place, (kind, step) in list(self._place_kind.items()):
            if (places is None or place in places) and step < last_alarm and self._is_neg(
                    self._enc((place, kind)), 0.0):
                del self._place_kind[place]
                dropped.add(place)
        return dropped

    def stats(self) -> dict[str, Any]:
        out = {k: v for k, v in self.verifier.stats().items() if k not in ("phases", "phase")}
        out["cancelled_probes"] = self.cancelled_probes
        out["alerts"] = int(out.get("alerts", 0)) + self.place_alerts
        out["place_alerts"] = self.place_alerts
        return out

    def close(self) -> None:
        self.store.close()
