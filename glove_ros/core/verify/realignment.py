"""Realignment of the GLOVE verifier after a dissonance: the async pending queue resolved by
natural evidence (replacement, or restoration after a false alarm) and the sync replay
(:meth:`~Realigner.apply_probes`, :meth:`~Realigner.cancel_probe`):
D <- (D -_m N(e)) +_m {fresh samples}.

Separate because it is the only part that replaces memory; detection
(:mod:`.decisions`) only suppresses and queues.
"""

from __future__ import annotations

from collections.abc import Iterable

from glove_ros.core.memory.experience import Source, Status, Transition
from glove_ros.core.verify.bookkeeping import _pair_name
from glove_ros.core.verify.decisions import DriftDecisions
from glove_ros.core.verify.events import ProbeRequest

__all__ = ["Realigner"]


class Realigner(DriftDecisions):
    """Pending-queue resolution and probe replay (see the module docstring)."""

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
