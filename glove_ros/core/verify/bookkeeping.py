"""The GLOVE verifier's shared state: the store keys it persists, its counters, the probe
budget and outstanding probe requests, surprise streaks, and the transaction that keeps
memory and store consistent.

Separate because every other part of the verifier (:mod:`.neighbourhood`,
:mod:`.decisions`, :mod:`.realignment`, :mod:`.deadlock`) builds on it:
:class:`VerifierState` is the base of the chain of classes that
:class:`~glove_ros.core.verify.verifier.GloveVerifier` completes (its ``__init__`` sets the
attributes declared here).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from glove_ros.core.memory.equivalence import EquivalenceRule
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.detection import NoiseEstimate
from glove_ros.core.verify.events import ProbeRequest

__all__ = ["VerifierState"]

_STREAK = "glove.streak:"
_WORLD_MARK = "glove.world_mark"
_CHANGE_MARK = "glove.change_mark"  # outside evidence of change (note_world_change)
_NOISE = "glove.noise"
_NOISE_EVERY = 64  # agreeing comparisons between two writes of the noise tally
_ALARM_RUN = "glove.alarm_run:"  # + pending key: the relation kinds of an alarm's run
_VOLATILE = "glove.volatile"  # pairs whose memory a (not refuted) alarm overturned
_VOLATILE_MAX = 512


def _pair_name(state_key: str, action: str, action_arg: str) -> str:
    return f"({state_key!r}, {action}{'(' + action_arg + ')' if action_arg else ''})"


class VerifierState:
    """Bookkeeping shared by the verifier's parts: statistics counters, probe budget and
    requests, surprise streaks and :meth:`_atomic` (see the module docstring)."""

    store: ExperienceStore
    config: VerifierConfig
    rule: EquivalenceRule
    _relation: Callable[[str, str], str | None] | None
    _is_negative: Callable[[str, float], bool]
    _lock: Any  # a threading.RLock
    _phase: str
    _stats: dict[str, Counter[str]]
    _requests: dict[int, ProbeRequest]
    _next_request: int
    _probes_used: int
    _streaks: dict[tuple[str, str, str], list[int]]
    _noise_saved: tuple[int, int]  # (disagreements, comparisons) stored
    _noise: NoiseEstimate

    def _count(self, name: str, n: int = 1) -> None:
        if n:
            self._stats[self._phase][name] += n

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
