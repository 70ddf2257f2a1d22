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

Where the parts live
--------------------
:class:`GloveVerifier` (this module) orchestrates :meth:`~GloveVerifier.observe` over a chain
of classes, one module each: :mod:`.config` (:class:`VerifierConfig`, the bounds),
:mod:`.events` (results, alerts, probe requests), :mod:`.bookkeeping` (counters, probe
budget, streaks, transactions), :mod:`.neighbourhood` (Q_hist, noise tallies),
:mod:`.decisions` (dissonance, object evidence, drift or noise), :mod:`.realignment`
(pending queue, probes) and :mod:`.deadlock` (stale negatives); the calibrated test itself is
in :mod:`.detection`.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.verify.bookkeeping import _ALARM_RUN, _NOISE, _STREAK
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.deadlock import DeadlockBreaker
from glove_ros.core.verify.detection import NoiseEstimate, history_mode, log_bayes_factor
from glove_ros.core.verify.events import (
    DissonanceAlert,
    ProbeRequest,
    Realignment,
    VerifyResult,
)
from glove_ros.core.verify.neighbourhood import _objects
from glove_ros.core.verify.realignment import Realigner

__all__ = ["GloveVerifier"]

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


class GloveVerifier(Realigner, DeadlockBreaker):
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
                        lbf = log_bayes_factor(counts, run, eta, loss_eta=loss, objects=_objects,
                                               **self._class_noise(t.action, counts, run))
                        if ":loss" in self._noise_key(t.action, t.outcome, counts):
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
