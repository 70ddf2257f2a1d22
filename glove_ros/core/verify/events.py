"""What the GLOVE verifier reports: the realignment decision, dissonance alerts, probe
requests, deadlock re-checks and the per-transition result.

Separate from the verifier (:mod:`glove_ros.core.verify.verifier`) because these frozen
types are the boundary: nodes and conversions turn them into messages, benchmarks and
memory rules read them, without touching the verifier's logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from glove_ros.core.memory.experience import MemoryEntry, Transition

__all__ = [
    "DissonanceAlert",
    "ProbeRequest",
    "Realignment",
    "RecheckResult",
    "VerifyResult",
]


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
    kind: str = "dissonance"  # or "object": a unique object seen elsewhere (observed_at)
    observed_at: str = ""  # the state the observation was made at ("" = state_key)

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
