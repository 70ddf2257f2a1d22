"""The shared re-test policy: GLOVE's stale-negative re-test, given to any memory rule.

Every rule gets the same ``on_stuck`` / ``on_blocked`` calls (FrozenLake agent) or stuck
hook (waypoint agent), but the baselines answer them by their own rule (nothing, a reset, a
refresh) while GLOVE re-tests stale negative memories. So that the suite measures what
GLOVE's *verifier* adds, not what a re-test policy adds, any baseline can be given the same
policy: ``<Rule>+retest`` (``RecentK+retest``, ``LatestOverwrite+retest``, ...), with the
same thresholds as GLOVE's defaults (:class:`~glove_ros.core.verify.config.VerifierConfig`).

Shared with GLOVE (the same rule as :mod:`glove_ros.core.verify.deadlock`, on the wrapped
rule's own beliefs):

* **which memories are stale**: a pair the rule believes more likely than not to fail (at
  least even when the agent names it as blocking its route) that was not observed again
  since the latest evidence that the world changed, or, when the agent is stuck, within the
  last ``stale_negative_after`` (50) observed transitions;
* **places that changed first** (``recheck_volatile_first``): pairs at a place seen to
  change kind, or whose memory holds a success besides the failure, are re-tested first; a
  detour re-tests only those, a stuck agent (or one with no route at all) the others when
  none is suspect;
* **the re-test itself** (asynchronous, as GLOVE-async): the stale memory of the pair is set
  aside at once (the pair reads as unknown, so the agent may try it again) and what the
  pair's next observations show replaces it (GLOVE's replacement of a re-tested memory);
  no probe is forced;
* **FrozenLake place evidence** (outcomes shaped ``(place, kind)``; GLOVE's place view): a
  place seen as another kind than last time is evidence that the world changed (dated to
  just after the place was last seen as its old kind: ``note_world_change``), the pair that
  saw it and any named pair whose remembered failure lies at a place that ever changed
  become "changed before" (the changed-place marks); beliefs read a remembered outcome at a
  place as the newest kind seen there (the place view); a failure kind read that way is
  doubted (dropped) when the world surely changed after it was seen;
* **waypoint uniqueness** (``unique_objects``, the colours of blocks that exist once, the
  knowledge GLOVE is given): a unique object seen at a new place sets aside every other
  place's memory of it (GLOVE's object-level evidence).

GLOVE's alone (they need the verifier's alerts): the world-change mark an alarm sets and the
pairs an alarm overturned (re-tested first); a place alert counted as an alert; corridor
symmetry in the detector; GLOVE-sync's probes (the shared policy is asynchronous: it is the
counterpart of GLOVE-async, the shipped default). A rule's own stuck answer (PageHinkley's
reset, PeriodicRefresh's refresh) still runs when the policy finds nothing to re-test. With
no hook firing the policy changes nothing a rule believes, except on FrozenLake the place
view and on waypoint worlds the uniqueness evidence, which act on observations.

:class:`Retest` wraps a :class:`~glove_ros.core.verify.memory_rules.MemoryRule` that stores
samples (FrozenLake, gym); :class:`RetestView` wraps a
:class:`~glove_ros.core.verify.memory_views.RuleView` (waypoint worlds).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from glove_ros.core.memory.experience import MemoryEntry
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.detection import history_mode
from glove_ros.core.verify.memory_rules import (
    BASELINE_RULES,
    MemoryRule,
    Outcome,
    ProbeTarget,
    make_rule,
    rule_names,
)
from glove_ros.core.verify.memory_views import RULE_PARAMS, RuleView, make_view
from glove_ros.core.verify.neighbourhood import _objects

__all__ = [
    "RETEST_SUFFIX",
    "Retest",
    "RetestSettings",
    "RetestView",
    "is_rule_name",
    "make_retest_rule",
    "make_retest_view",
    "retest_names",
    "select_stale",
    "split_retest",
]

RETEST_SUFFIX = "+retest"
_TOL = 1e-9
Key = tuple[Hashable, Hashable]


def split_retest(name: str) -> tuple[str, bool]:
    """(base rule name, whether ``name`` asks for the re-test policy)."""
    if name.endswith(RETEST_SUFFIX):
        return name[: -len(RETEST_SUFFIX)], True
    return name, False


def retest_names(bases: Iterable[str] | None = None) -> list[str]:
    """``<base>+retest`` for each base (default: every baseline of :func:`make_rule`)."""
    return [f"{b}{RETEST_SUFFIX}" for b in (BASELINE_RULES if bases is None else bases)]


def is_rule_name(name: str) -> bool:
    """Whether :func:`~glove_ros.core.verify.memory_rules.make_rule` accepts ``name``:
    :func:`rule_names` and every baseline's ``+retest`` arm."""
    base, retest = split_retest(name)
    return base in BASELINE_RULES if retest else name in rule_names()


@dataclass(frozen=True)
class RetestSettings:
    """The policy's thresholds (GLOVE's defaults: :class:`VerifierConfig`).

    ``stale_negative_after``: observed transitions after which a stuck agent re-tests a
    negative memory not observed again; ``recheck_volatile_first``: places that changed
    first (see the module docstring); ``place_evidence``: FrozenLake's place view and marks.
    """

    stale_negative_after: int = VerifierConfig.stale_negative_after
    recheck_volatile_first: bool = VerifierConfig.recheck_volatile_first
    place_evidence: bool = True

    def validate(self) -> RetestSettings:
        """Raise ValueError naming the bad field; return ``self``."""
        n = self.stale_negative_after
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"stale_negative_after must be an integer >= 0, got {n!r}")
        for name in ("recheck_volatile_first", "place_evidence"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false")
        return self

    @classmethod
    def from_glove(cls, config: Mapping[str, Any] | None) -> RetestSettings:
        """The thresholds GLOVE runs with under ``config`` (its overrides, else defaults)."""
        values = dict(config or {})
        return cls(
            stale_negative_after=values.get("stale_negative_after",
                                            cls.stale_negative_after),
            recheck_volatile_first=values.get("recheck_volatile_first",
                                              cls.recheck_volatile_first),
            place_evidence=values.get("place_evidence", True),
        ).validate()


def select_stale(candidates: Iterable[tuple[Any, int, float]], *, threshold: int,
                 named: bool, volatile: Collection[Any] = (), volatile_first: bool = True,
                 only_volatile: bool = False) -> list[Any]:
    """GLOVE's choice of stale negative memories (``DeadlockBreaker._suspect_groups``).

    ``candidates``: (key, id of its newest observation, believed share of failures).
    Suspect: not observed since ``threshold`` and mostly failures (``named``: the agent
    named it as blocking its route, an even split counts too). With ``volatile_first`` the
    suspects in ``volatile`` or remembered both ways (a success besides the failures) come
    alone: only them when ``only_volatile`` (a detour), else them or, when there are none,
    every suspect."""
    if threshold <= 0:
        return []
    out = []
    both: set[Any] = set()
    for key, last_id, neg in candidates:
        mostly = 2 * neg >= 1 - _TOL if named else 2 * neg > 1 + _TOL
        if last_id < threshold and mostly:
            out.append(key)
            if _TOL < neg < 1 - _TOL:
                both.add(key)
    if volatile_first and out:
        first = [k for k in out if k in volatile or k in both]
        return first if only_volatile else (first or out)
    return out


def _place(outcome: Any) -> Hashable | None:
    """The place of a ``(place, kind)`` outcome (FrozenLake), else None."""
    return outcome[0] if isinstance(outcome, tuple) and len(outcome) == 2 else None


def _default_negative(outcome: Outcome, reward: float) -> bool:
    return VerifierConfig().is_negative(outcome if isinstance(outcome, str) else repr(outcome),
                                        reward)


class Retest(MemoryRule):
    """A sample-storing rule plus the shared re-test policy (see the module docstring).

    ``rule`` must offer ``forget(state, action)`` (every baseline does); ``is_negative
    (outcome, reward)`` says which outcomes are failures (default: VerifierConfig's
    ``negative_outcomes``). Alerts, learning and the rule's own counters stay the rule's;
    :meth:`stats` adds ``rechecks`` (memories set aside), ``place_changes`` and
    ``places_doubted``.
    """

    def __init__(self, rule: MemoryRule, *,
                 is_negative: Callable[[Outcome, float], bool] | None = None,
                 settings: RetestSettings | None = None) -> None:
        # MemoryRule.__init__ is not called: alerts and learning are the wrapped rule's
        if not callable(getattr(rule, "forget", None)):
            raise ValueError(f"{rule.name} cannot set memories aside (no forget()): the "
                             "re-test policy needs a rule that stores samples")
        self.rule = rule
        self.settings = (settings or RetestSettings()).validate()
        self.name = f"{rule.name}{RETEST_SUFFIX}"
        self.probe_mode = rule.probe_mode
        self._is_negative = is_negative or _default_negative
        self._newest = 0  # id of the newest observed transition (1, 2, ...)
        self._last: dict[Key, int] = {}  # pair -> id of its newest observation
        self._world_mark = 0  # id the world surely changed after (place evidence)
        self._volatile: set[Key] = set()  # pairs at places that changed before
        self._place_kind: dict[Hashable, tuple[Hashable, int]] = {}
        self._place_entry: dict[Hashable, int] = {}
        self._place_changed_after = -1
        self._changed_places: set[Hashable] = set()
        self.rechecks = 0
        self.place_changes = 0
        self.places_doubted = 0

    @property
    def alerts(self) -> int:  # type: ignore[override]
        """The wrapped rule's alerts (the policy raises none)."""
        return self.rule.alerts

    @property
    def learning(self) -> bool:  # type: ignore[override]
        """Whether the wrapped rule is in its learning phase."""
        return self.rule.learning

    def begin_phase(self, phase: str, learning: bool) -> None:
        self.rule.begin_phase(phase, learning)

    def observe(self, state: Hashable, action: Hashable, outcome: Outcome,
                reward: float = 0.0, step: int = 0) -> None:
        self._newest += 1
        eid = self._newest
        self._last[(state, action)] = eid
        place = _place(outcome)
        if place is not None:
            last_seen = self._place_entry.get(place)
            if self.settings.place_evidence and self._saw_place(place, outcome[1], step):
                # dated to just after the place was last seen as its old kind
                self._world_mark = max(self._world_mark, last_seen + 1 if last_seen else eid)
                self._volatile.add((state, action))
            self._place_entry[place] = eid
        self.rule.observe(state, action, outcome, reward, step)

    def _saw_place(self, place: Hashable, kind: Hashable, step: int) -> bool:
        """Remember the newest kind seen at ``place``; True when it was last seen as
        another kind (the world changed there)."""
        old = self._place_kind.get(place)
        self._place_kind[place] = (kind, step)
        if old is None or old[0] == kind:
            return False
        self._place_changed_after = max(self._place_changed_after, old[1])
        self._changed_places.add(place)
        self.place_changes += 1
        return True

    def distribution(self, state: Hashable, action: Hashable) -> dict[Outcome, float] | None:
        dist = self.rule.distribution(state, action)
        if not dist or not self._place_kind:
            return dist
        out: dict[Outcome, float] = {}
        for o, p in dist.items():
            place = _place(o)
            if place is not None and place in self._place_kind:
                o = (place, self._place_kind[place][0])
            out[o] = out.get(o, 0.0) + p
        return out

    def support(self, state: Hashable, action: Hashable) -> int:
        return self.rule.support(state, action)

    def probe_requests(self) -> list[ProbeTarget]:
        return self.rule.probe_requests()

    def apply_probes(self, target: ProbeTarget, outcomes: Sequence[Outcome]) -> None:
        self.rule.apply_probes(target, outcomes)

    # ---- the hooks
    def on_stuck(self, state: Hashable, step: int = 0,
                 reachable: Iterable[Hashable] | None = None) -> list[ProbeTarget]:
        """Re-test the stale negative memories of the states the agent can still reach;
        when there is none (and no place to doubt), the rule's own answer."""
        states = None if reachable is None else set(reachable)
        pairs = [p for p in self._last if states is None or p[0] in states]
        chosen = self._stale(pairs, stuck=True, named=False, no_route=False)
        self._retest(chosen)
        doubted = self._doubt_places(None)
        if chosen or doubted:
            return []
        return self.rule.on_stuck(state, step, reachable)

    def on_blocked(self, pairs: Sequence[Key], step: int = 0,
                   no_route: bool = False) -> list[ProbeTarget]:
        """Re-test the remembered failures in the way that are stale (only those at places
        that changed before, unless memory leaves no route at all)."""
        named = list(dict.fromkeys(pairs))
        self._mark_changed_places(named)
        chosen = self._stale(named, stuck=False, named=True, no_route=no_route)
        self._retest(chosen)
        self._doubt_places(named)
        return self.rule.on_blocked(pairs, step, no_route)

    def _negative_share(self, dist: Mapping[Outcome, float]) -> float:
        return sum(p for o, p in dist.items() if self._is_negative(o, 0.0))

    def _stale(self, pairs: Iterable[Key], *, stuck: bool, named: bool,
               no_route: bool) -> list[Key]:
        threshold = self._world_mark
        if stuck:
            threshold = max(threshold, self._newest + 1 - self.settings.stale_negative_after)
        cands = []
        for pair in pairs:
            dist = self.rule.distribution(*pair)
            if dist:
                cands.append((pair, self._last.get(pair, 0), self._negative_share(dist)))
        return select_stale(cands, threshold=threshold, named=named, volatile=self._volatile,
                            volatile_first=self.settings.recheck_volatile_first,
                            only_volatile=named and not stuck and not no_route)

    def _retest(self, pairs: Iterable[Key]) -> None:
        """Set the pairs' memory aside: the next observations replace it."""
        for state, action in pairs:
            if self.rule.forget(state, action):  # type: ignore[attr-defined]
                self.rechecks += 1

    def _mark_changed_places(self, pairs: Sequence[Key]) -> None:
        """A named pair whose remembered failure lies at a place that ever changed kind
        joins the places that changed before, whichever pair saw the change."""
        if not self._changed_places:
            return
        for pair in pairs:
            for o in self.rule.distribution(*pair) or {}:
                if _place(o) in self._changed_places and self._is_negative(o, 0.0):
                    self._volatile.add(pair)
                    break

    def _doubt_places(self, pairs: Sequence[Key] | None) -> set[Hashable]:
        """Drop a failure kind the place view read from another pair's outcome when the
        world surely changed after it was seen (for the places ``pairs`` lead to; None:
        every place). Returns the places dropped."""
        if not self._place_kind:
            return set()
        places: set[Hashable] | None = None
        if pairs is not None:
            places = {_place(o) for p in pairs for o in self.rule.distribution(*p) or {}}
        dropped = set()
        for place, (kind, step) in list(self._place_kind.items()):
            if (places is None or place in places) and step < self._place_changed_after \
                    and self._is_negative((place, kind), 0.0):
                del self._place_kind[place]
                dropped.add(place)
        self.places_doubted += len(dropped)
        return dropped

    def stats(self) -> dict[str, Any]:
        return {**self.rule.stats(), "rechecks": self.rechecks,
                "place_changes": self.place_changes, "places_doubted": self.places_doubted}

    def close(self) -> None:
        self.rule.close()


class RetestView(RuleView):
    """A baseline view (waypoint worlds) plus the shared re-test policy and the world's
    uniqueness knowledge (see the module docstring).

    The stuck hook (``on_stuck(keys)``, stuck or a long detour) re-tests, at the states of
    ``keys``, the keys whose visible memory is mostly failures and was not recorded again
    within the last ``stale_negative_after`` transitions (remembered both ways first): their
    entries so far are hidden, newer ones show. When none is stale, the view's own answer.
    With ``unique_objects`` a look showing such an object where it was never seen hides the
    other places' looks that showed it, where it is their most frequent outcome.
    ``alerts``, ``resets`` and ``steps`` are the wrapped view's.
    """

    def __init__(self, inner: RuleView, *, settings: RetestSettings | None = None,
                 unique_objects: Iterable[str] = (), object_action: str = "look",
                 is_negative: Callable[[str, float], bool] | None = None,
                 never_probe: Iterable[str] = ()) -> None:
        # RuleView.__init__ is not called: entries, alerts and resets are the inner view's
        self.inner = inner
        self.name = f"{inner.name}{RETEST_SUFFIX}"
        self.settings = (settings or RetestSettings()).validate()
        self.unique_objects = frozenset(unique_objects)
        self.object_action = object_action
        self.never_probe = frozenset(never_probe)
        self._is_negative = is_negative or VerifierConfig().is_negative
        self._cache: list[MemoryEntry] | None = None
        self._hidden: set[int] = set()
        self._ids: dict[tuple[str, str, str], list[int]] = {}
        self._objects_at: dict[tuple[str, str, str], set[str]] = {}
        self._newest = 0
        self.rechecks = 0
        self.object_hides = 0

    @property
    def alerts(self) -> int:  # type: ignore[override]
        """The wrapped view's alarms (the policy raises none)."""
        return self.inner.alerts

    @property
    def resets(self) -> int:  # type: ignore[override]
        """The wrapped view's resets."""
        return self.inner.resets

    @property
    def steps(self) -> int:
        return self.inner.steps

    def record(self, entry: MemoryEntry) -> None:
        self.inner.record(entry)
        t = entry.transition
        self._ids.setdefault(t.key, []).append(entry.id)
        self._newest = max(self._newest, entry.id)
        self._cache = None
        if self.unique_objects and t.action == self.object_action:
            self._object_evidence(t.key, t.outcome)

    def _object_evidence(self, key: tuple[str, str, str], outcome: str) -> None:
        """A unique object seen where it never was: other places' memory of it is stale."""
        known = self._objects_at.setdefault(key, set())
        new_here = (_objects(outcome) & self.unique_objects) - known
        known |= _objects(outcome)
        if not new_here:
            return
        per: dict[tuple[str, str, str], list[MemoryEntry]] = {}
        for e in self.visible():
            k = e.transition.key
            if k[1] == self.object_action and k[0] != key[0]:
                per.setdefault(k, []).append(e)
        for entries in per.values():
            modes = history_mode(Counter(e.transition.outcome for e in entries))
            moved = {x for x in new_here if any(x in _objects(o) for o in modes)}
            if moved:
                self._hidden |= {e.id for e in entries if moved & _objects(e.transition.outcome)}
                self.object_hides += 1
                self._cache = None

    def visible(self) -> list[MemoryEntry]:
        out = self.inner.visible()
        return [e for e in out if e.id not in self._hidden] if self._hidden else out

    def on_stuck(self, keys: list[tuple[str, str, str]]) -> bool:
        states = {k[0] for k in keys}
        per: dict[tuple[str, str, str], list[MemoryEntry]] = {}
        for e in self.visible():
            k = e.transition.key
            if (not states or k[0] in states) and k[1] not in self.never_probe:
                per.setdefault(k, []).append(e)
        cands = [(k, max(e.id for e in es),
                  sum(self._is_negative(e.transition.outcome, e.transition.reward)
                      for e in es) / len(es)) for k, es in per.items()]
        chosen = select_stale(cands, named=False,
                              threshold=self._newest + 1 - self.settings.stale_negative_after,
                              volatile_first=self.settings.recheck_volatile_first)
        for k in chosen:
            self._hidden.update(self._ids.get(k, ()))
        if chosen:
            self.rechecks += len(chosen)
            self._cache = None
            return True
        acted = self.inner.on_stuck(keys)
        if acted:
            self._cache = None
        return acted

    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats(), "rechecks": self.rechecks,
                "object_hides": self.object_hides}


def make_retest_rule(name: str, glove_config: Mapping[str, Any] | None = None,
                     is_negative: Callable[[Outcome, float], bool] | None = None,
                     params: Mapping[str, Any] | None = None) -> Retest:
    """``<baseline>+retest`` as a :class:`Retest` rule: the baseline (with ``params``) and
    the thresholds GLOVE runs with under ``glove_config``."""
    base, retest = split_retest(name)
    if not retest or base not in BASELINE_RULES:
        raise ValueError(f"unknown memory rule {name!r}; a +retest arm needs a baseline: "
                         f"{', '.join(retest_names())}")
    return Retest(make_rule(base, params=params), is_negative=is_negative,
                  settings=RetestSettings.from_glove(glove_config))


def make_retest_view(name: str, params: Mapping[str, Any] | None = None,
                     verifier: VerifierConfig | None = None) -> RetestView:
    """``<baseline>+retest`` as a :class:`RetestView` over the baseline's view (with
    ``params``), with the thresholds and the ``unique_objects`` of ``verifier`` (the
    configuration GLOVE runs with on the same world)."""
    base, retest = split_retest(name)
    if not retest or base not in RULE_PARAMS:
        raise ValueError(f"unknown memory view {name!r}; a +retest arm needs a baseline: "
                         f"{', '.join(retest_names(RULE_PARAMS))}")
    cfg = verifier or VerifierConfig()
    return RetestView(make_view(base, params),
                      settings=RetestSettings(cfg.stale_negative_after,
                                              cfg.recheck_volatile_first, False),
                      unique_objects=cfg.unique_objects, object_action=cfg.object_action,
                      is_negative=cfg.is_negative, never_probe=cfg.never_probe)
