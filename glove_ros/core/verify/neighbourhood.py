"""Neighbourhood and outcome statistics of the GLOVE verifier: Q_hist over the trusted
neighbourhood N(e) (a symmetric action's other direction included, the current surprise
streak left out), the evidence an async re-verification needs, and the observation-noise
tallies the bayes detector learns (which tally a disagreement belongs to, when it is
stored).

Separate because it only measures: it counts outcomes and noise and never suppresses,
replaces or alarms (that is :mod:`.decisions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import is_look_signature, look_kind, look_names
from glove_ros.core.verify.bookkeeping import _NOISE, _NOISE_EVERY, VerifierState
from glove_ros.core.verify.detection import class_key, history_mode

__all__ = ["OutcomeStatistics"]


def _objects(outcome: str) -> set[str]:
    """Objects named by an outcome signature ``key=a,b`` (or ``a,b``); a look outcome's
    counts are dropped (``objects=cup,person*2`` -> {cup, person})."""
    if is_look_signature(outcome):
        try:
            return set(look_names(outcome))
        except ValueError:  # a malformed count: read it as plain names, as before
            pass
    body = outcome.split("=", 1)[1] if "=" in outcome else outcome
    return {p.strip() for p in body.split(",") if p.strip()}


class OutcomeStatistics(VerifierState):
    """Q_hist and the noise tallies (see the module docstring)."""

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
            modes = history_mode(counts)
            if any(_objects(o) for o in modes):
                # objects= looks: each class the mode shows is a class that could be missed
                shown = {c for o in modes if look_kind(o) == "objects" for c in _objects(o)}
                return (class_key(f"{action}:loss", shown), f"{action}:other")
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
        modes = history_mode(counts)
        loss = any(now < _objects(o) for o in modes)
        if look_kind(outcome) != "objects":
            return f"{action}:loss" if loss else f"{action}:other"
        # objects= looks: the classes lost (a loss) or shown that no mode shows (other)
        if loss:
            return class_key(f"{action}:loss", {c for o in modes if now < _objects(o)
                                                for c in _objects(o) - now})
        return class_key(f"{action}:other", now - {c for o in modes for c in _objects(o)})

    def _class_noise(self, action: str, counts: Mapping[str, int],
                     run: Sequence[str]) -> dict[str, Callable[[str], float]]:
        """Per-class miss and false-class rates for the bayes test of an ``objects=`` look
        (``class_loss`` / ``class_extra`` of :func:`~.detection.log_bayes_factor`); empty
        for colour looks and every other action, which keep the kind-level rates."""
        if action != self.config.object_action or not all(
                look_kind(o) == "objects" for o in [*counts, *run]):
            return {}
        noise, floor = self._noise, self.config.min_miss_rate

        def loss(name: str) -> float:
            return max(noise.class_rate(f"{action}:loss", name), floor)

        # a class memory has never held (no miss tally: no remembered look showed it) is the
        # detector's long tail until shown otherwise: its false-detection rate is at least
        # the rate at which new classes show up, and never below min_extra_rate
        novel = max(noise.novelty_rate(f"{action}:other"), self.config.min_extra_rate)

        def extra(name: str) -> float:
            rate = noise.class_rate(f"{action}:other", name, own_comparisons=False)
            held = class_key(f"{action}:loss", {name}) in noise.counts
            return rate if held else max(rate, novel)

        return {"class_loss": loss, "class_extra": extra}
