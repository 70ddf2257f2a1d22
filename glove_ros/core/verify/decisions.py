"""Detection decisions of the GLOVE verifier and the events they raise: a dissonance
(suppress the refuted neighbourhood, queue it, maybe request probes, mark the world as
changed), object-level evidence (a unique object seen at a new place), and, when a
re-verification ends, whether the alarm was drift or noise (false alarms feed the noise
tally, overturned pairs are remembered as volatile).

Separate from the statistics they rest on (:mod:`.neighbourhood`) and from what happens
after an alarm (:mod:`.realignment`, :mod:`.deadlock`): this is where memory is first
doubted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from glove_ros.core.memory.experience import Transition
from glove_ros.core.verify.bookkeeping import (
    _ALARM_RUN,
    _VOLATILE,
    _VOLATILE_MAX,
    _WORLD_MARK,
    _pair_name,
)
from glove_ros.core.verify.config import hoeffding_bound
from glove_ros.core.verify.detection import history_mode
from glove_ros.core.verify.events import DissonanceAlert, ProbeRequest
from glove_ros.core.verify.neighbourhood import OutcomeStatistics, _objects

__all__ = ["DriftDecisions"]


class DriftDecisions(OutcomeStatistics):
    """Dissonance, object-level evidence and drift-or-noise (see the module docstring)."""

    def _false_alarm(self, pkey: int, fresh: Sequence[str]) -> bool:
        """Whether an alarm's re-verification shows it was noise: the fresh samples bring
        back the very mode it contradicted and no other dissonance came in between (after
        one, the old outcome's return may be the world changing back, e.g. a corridor that
        re-opened, which is drift twice, not noise)."""
        run = self.store.get_state(f"{_ALARM_RUN}{pkey}")
        counts = Counter(fresh)
        if not isinstance(run, dict) or not counts:
            return False
        if run.get("mode") not in history_mode(dict(counts)):
            return False
        mark = self.store.get_state(_WORLD_MARK)
        return not (isinstance(mark, dict)
                    and int(mark.get("id", 0)) > int(run.get("mark", 0)))

    def _confirm_drift(self, pkey: int, fresh: Sequence[str]) -> None:
        """An alarm's re-verification ended. If it was a false alarm (:meth:`_false_alarm`)
        its run was noise and enters the noise tallies after all (a run confirmed as drift
        never does), so a rate learnt too low (misses that alarmed never counted as
        misses) corrects itself."""
        name = f"{_ALARM_RUN}{pkey}"
        false = self._false_alarm(pkey, fresh)
        run = self.store.get_state(name)
        if run is not None:
            self.store.delete_state(name)
        if not false or not isinstance(run, dict):
            return
        self._count("false_alarms_learnt")
        if isinstance(run.get("pair"), list) and len(run["pair"]) == 3:
            self._mark_volatile([tuple(map(str, run["pair"]))], on=False)
        for k in run.get("noise") or []:
            if isinstance(k, str):
                self._noise.add(k, True)
        for rel in run.get("relations") or []:
            if isinstance(rel, str):
                self._noise.add_relation(str(run.get("action")), rel)

    def _volatile(self) -> list[list[str]]:
        got = self.store.get_state(_VOLATILE)
        return [list(map(str, p)) for p in got if isinstance(p, list) and len(p) == 3] \
            if isinstance(got, list) else []

    def _mark_volatile(self, keys: Sequence[tuple[str, str, str]], on: bool = True) -> None:
        """Remember (or forget) pairs whose memory an alarm overturned: a place that
        changed once is the first suspect when remembered failures block a route again."""
        now = [p for p in self._volatile() if tuple(p) not in {tuple(k) for k in keys}]
        if on:
            now += [list(k) for k in keys]
        self.store.set_state(_VOLATILE, now[-_VOLATILE_MAX:])

    def _object_evidence(
        self, t: Transition, entry_id: int, stamp: float
    ) -> list[DissonanceAlert]:
        """A unique object seen at a new state refutes every other state's memory of it.

        ``t`` is an ``object_action`` observation (``key=a,b``). For each unique object in
        it that this state's trusted history never showed, the trusted memories of other
        states whose most frequent outcome contains the object are suppressed at once and
        queued for re-verification by natural visits (the object cannot be in two places).
        """
        cfg = self.config
        unique = set(cfg.unique_objects)
        seen = _objects(t.outcome) & unique
        if not seen:
            return []
        # everything ever seen here (suppressed and replaced history too), but t itself
        before, _ = self.store.query(t.state_key, t.action, t.action_arg,
                                     include_suppressed=True, limit=500)
        known_here: set[str] = set()
        for e in before:
            if e.id != entry_id:
                known_here |= _objects(e.transition.outcome)
        new_here = seen - known_here
        if not new_here:
            return []
        alerts: list[DissonanceAlert] = []
        for g in self.store.outcome_groups():
            if g.action != cfg.object_action or g.state_key == t.state_key:
                continue
            modes = history_mode(g.counts)
            moved = sorted(x for x in new_here if any(x in _objects(o) for o in modes))
            if not moved:
                continue
            entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
            # only the memories of the moved object: a fresh look there that did not see it
            # (the swap's other block, say) is evidence about another object and stays
            stale = [e.id for e in entries if set(moved) & _objects(e.transition.outcome)]
            if not stale:
                continue
            reason = (
                f"object-level evidence: {', '.join(moved)} (unique) seen at {t.state_key!r} "
                f"(entry {entry_id}), so memory of it at {g.state_key!r} is stale"
            )
            ids = self.store.suppress(stale, reason, stamp)
            self._count("suppressions", len(ids))
            self.store.add_pending(*g.pair, ids, stamp, reason)
            self._count("alerts")
            self._count("object_alerts")
            n = g.size
            alerts.append(DissonanceAlert(
                state_key=g.state_key,
                action=g.action,
                action_arg=g.action_arg,
                observed_outcome=t.outcome,
                expected=tuple((o, c / n) for o, c in sorted(
                    g.counts.items(), key=lambda kv: (-kv[1], kv[0]))),
                observed_probability=0.0,
                history_size=n,
                hoeffding_bound=hoeffding_bound(n, cfg.delta),
                consecutive_surprises=0,
                mode="async",
                suppressed_ids=tuple(ids),
                probes_requested=0,
                entry_id=entry_id,
                stamp=stamp,
                reason=reason,
                kind="object",
                observed_at=t.state_key,
            ))
        return alerts

    def _dissonance(
        self,
        t: Transition,
        entry_id: int,
        counts: Mapping[str, int],
        n: int,
        p_obs: float | None,
        streak: Sequence[int],
        stamp: float,
        lbf: float | None = None,
        eta: float | None = None,
    ) -> tuple[DissonanceAlert, list[ProbeRequest], list[int]]:
        cfg = self.config
        in_streak = set(streak)
        stale = sorted(
            e.id for e in self.store.neighbourhood(t, self.rule) if e.id not in in_streak
        )
        p_obs = p_obs or 0.0
        if lbf is None:
            reason = (
                f"dissonance: {len(streak)} consecutive surprises at "
                f"{_pair_name(*t.key)}: observed {t.outcome!r} with Q_hist={p_obs:.2f} < "
                f"epsilon={cfg.epsilon:g} over n={n} trusted neighbours"
            )
        else:
            reason = (
                f"dissonance: {len(streak)} consecutive contradiction(s) at "
                f"{_pair_name(*t.key)}: observed {t.outcome!r} with Q_hist={p_obs:.2f} over "
                f"n={n} trusted neighbours; log Bayes factor {lbf:.2f} >= "
                f"ln(1/{cfg.alarm_delta:g}) at noise rate {eta:.3f}"
            )
        suppressed = self.store.suppress(stale, reason, stamp) if stale else []
        self._count("suppressions", len(suppressed))
        pkey = self.store.add_pending(*t.key, suppressed, stamp, reason)
        if lbf is not None and counts:  # bayes: remember what the alarm contradicted
            run = self._run_outcomes(streak, t.outcome)
            mode = min(history_mode(counts))
            self.store.set_state(f"{_ALARM_RUN}{pkey}", {
                "action": t.action, "mode": mode, "mark": min(streak), "pair": list(t.key),
                "noise": [self._noise_key(t.action, o, counts) for o in run],
                "relations": [self._relation_of(t.action, o, counts) for o in run]})
        mirror = self._mirror(t)
        if mirror is not None:  # the other direction of the same corridor
            back, _ = self.store.query(mirror.state_key, mirror.action, mirror.action_arg,
                                       limit=None)
            back_ids = [e.id for e in back if e.transition.outcome != t.outcome]
            if back_ids:
                why = reason + f" (same link, other direction {_pair_name(*mirror.key)})"
                ids = self.store.suppress(back_ids, why, stamp)
                self._count("suppressions", len(ids))
                self.store.add_pending(*mirror.key, ids, stamp, why)
                suppressed += ids
        self.store.set_state(
            _WORLD_MARK,
            {"id": min(streak), "stamp": stamp, "pair": list(t.key)},
        )
        self._mark_volatile([t.key] + ([mirror.key] if mirror is not None else []))
        self._count("alerts")
        requests: list[ProbeRequest] = []
        note = ""
        if self._may_probe(t.action):
            alpha = cfg.alpha
            if self._reserve(alpha):
                requests.append(self._new_request(t, alpha, "dissonance", pkey))
            else:
                note = f"; probe budget exhausted (alpha={alpha}), handled asynchronously"
        elif cfg.mode == "sync":
            note = f"; {t.action!r} is never probed, handled asynchronously"
        expected = tuple(
            (o, c / n) for o, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        alert = DissonanceAlert(
            state_key=t.state_key,
            action=t.action,
            action_arg=t.action_arg,
            observed_outcome=t.outcome,
            expected=expected,
            observed_probability=p_obs,
            history_size=n,
            hoeffding_bound=hoeffding_bound(n, cfg.delta),
            consecutive_surprises=len(streak),
            mode="sync" if requests else "async",
            suppressed_ids=tuple(suppressed),
            probes_requested=requests[0].alpha if requests else 0,
            entry_id=entry_id,
            stamp=stamp,
            reason=reason + note,
            log_bayes_factor=lbf,
            noise_rate=eta,
        )
        return alert, requests, suppressed
