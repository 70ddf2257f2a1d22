"""The GLOVE verifier's rule against the self-confirming deadlock: re-test negative memories
whose evidence is stale (after a dissonance or outside evidence of change, or while the
planner is stuck), places that changed before first. The rule and why it is sound are in
the docstring of :mod:`glove_ros.core.verify.verifier`.

Separate because it is a project extension driven by the planner
(:meth:`~DeadlockBreaker.recheck_negatives`, :meth:`~DeadlockBreaker.note_world_change`),
not by the observation loop, and can be switched off (``stale_negative_recheck``).
"""

from __future__ import annotations

from collections.abc import Iterable

from glove_ros.core.memory.experience import MemoryEntry, Source
from glove_ros.core.memory.store_queries import OutcomeGroup
from glove_ros.core.verify.bookkeeping import _CHANGE_MARK, _WORLD_MARK, _pair_name
from glove_ros.core.verify.decisions import DriftDecisions
from glove_ros.core.verify.events import ProbeRequest, RecheckResult

__all__ = ["DeadlockBreaker"]


class DeadlockBreaker(DriftDecisions):
    """Stale negative memories: find them, suppress and queue them, maybe probe them."""

    def _negatives(self, g: OutcomeGroup) -> int:
        return sum(c for o, c in g.counts.items()
                   if self._is_negative(o, g.max_rewards.get(o, 0.0)))

    def _group_negative(self, g: OutcomeGroup, named: bool = False) -> bool:
        """Mostly negative: more than half the group's trusted samples are failures (a slip
        or a missed detection among them must not hide a stale negative memory). ``named``:
        the planner named the pair as blocking its route, so an even split counts too (it
        avoids a move as likely to fail as not)."""
        neg = self._negatives(g)
        return 2 * neg >= g.size if named else 2 * neg > g.size

    def _remembered_both_ways(self, g: OutcomeGroup) -> bool:
        """The group's trusted memory holds a success besides its failures: the place
        worked before it failed (or works only sometimes), so a re-test is not wasted."""
        return 0 < self._negatives(g) < g.size

    def _suspect_groups(
        self, state_keys: Iterable[str] | None, stuck: bool,
        pairs: Iterable[tuple[str, str]] | None = None, no_route: bool = False,
    ) -> list[OutcomeGroup]:
        cfg = self.config
        if not cfg.stale_negative_recheck:
            return []
        threshold = self._world_changed_at()
        if stuck:
            window = self.store.max_id() + 1 - cfg.stale_negative_after
            threshold = max(threshold, window)
        if threshold <= 0:
            return []
        keys = None if state_keys is None else list(state_keys)
        wanted = None if pairs is None else {(str(s), str(a)) for s, a in pairs}
        if wanted is not None:
            keys = sorted({s for s, _ in wanted} & set(keys) if keys is not None
                          else {s for s, _ in wanted})
        out = []
        for g in self.store.outcome_groups(keys):
            if g.action in cfg.never_probe or not g.counts:
                continue
            if wanted is not None and (g.state_key, g.action) not in wanted:
                continue
            if g.last_id < threshold and self._group_negative(g, named=wanted is not None):
                out.append(g)
        if cfg.recheck_volatile_first and out:
            volatile = {tuple(p) for p in self._volatile()}
            first = [g for g in out if g.pair in volatile or self._remembered_both_ways(g)]
            # a detour re-tests only places that changed before (an alarm overturned
            # memory there, or memory holds both a success and a failure); a stuck planner
            # re-tests those first and the rest once they are re-confirmed (they then stop
            # being suspect) or when there are none, and so does a detour hook whose pairs
            # leave no route at all (a re-test is the only way on)
            if wanted is not None and not stuck and not no_route:
                return first
            return first or out
        return out

    def _world_changed_at(self) -> int:
        """Id of the newest evidence that the world changed: an alarm's streak start
        (``_WORLD_MARK``) or outside evidence (``_CHANGE_MARK``); 0 when none."""
        marks = (self.store.get_state(_WORLD_MARK), self.store.get_state(_CHANGE_MARK))
        return max((int(m.get("id", 0)) for m in marks if isinstance(m, dict)), default=0)

    def note_world_change(self, entry_id: int, reason: str = "",
                          pair: tuple[str, str, str] | None = None) -> None:
        """Evidence from outside the pair tests that the world changed at recorded
        transition ``entry_id`` (e.g. an adapter saw a place as another kind than before:
        what a place is does not depend on how it was reached). Like an alarm, it makes
        the negative memories not re-confirmed since suspect for the deadlock rule
        (:meth:`recheck_negatives`), and ``pair`` (state_key, action, action_arg), the one
        that saw the change, joins the places that changed before (re-tested first when
        they block a route again); it suppresses nothing and does not count as an alarm.
        An older mark than the current one moves nothing. Give the earliest id the change
        can be dated to (e.g. just after the last transition that saw the place as it
        was), not the one that saw it: a failure confirmed in between is no staler for it."""
        if isinstance(entry_id, bool) or not isinstance(entry_id, int) or entry_id < 1:
            raise ValueError(f"entry_id must be a recorded transition id >= 1, got {entry_id!r}")
        keys = self._pair_keys([] if pair is None else [pair])
        with self._lock, self._atomic():
            if keys:
                self._mark_volatile(keys)
            if self._world_changed_at() >= entry_id:
                return
            self.store.set_state(_CHANGE_MARK, {"id": entry_id, "reason": str(reason)[:200]})
            self._count("world_changes")

    def note_changed_before(self, pairs: Iterable[tuple[str, str, str]]) -> None:
        """Outside evidence that each of ``pairs`` ((state_key, action, action_arg)) leads to
        a place that changed before (e.g. an adapter saw the place as another kind, through
        whichever pair): they join the places that changed before, which the deadlock rule
        re-tests first when they block a route (:meth:`recheck_negatives`). It moves no
        mark and suppresses nothing."""
        keys = self._pair_keys(pairs)
        if keys:
            with self._lock, self._atomic():
                self._mark_volatile(keys)

    @staticmethod
    def _pair_keys(pairs: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """``pairs`` as (state_key, action, action_arg) tuples; ValueError on anything else."""
        keys = [tuple(p) for p in pairs]
        for pair in keys:
            if len(pair) != 3 or not all(isinstance(x, str) for x in pair):
                raise ValueError(f"pair must be (state_key, action, action_arg), got {pair!r}")
        return keys

    def stale_negative_candidates(
        self, state_keys: Iterable[str] | None = None, *, stuck: bool = False
    ) -> list[MemoryEntry]:
        """Trusted negative entries the deadlock rule finds suspect (no side effects).

        ``stuck=False``: all-negative groups not re-confirmed since the latest dissonance.
        ``stuck=True`` (the planner has no route): also those not re-confirmed within the
        last ``stale_negative_after`` recorded transitions. ``state_keys`` limits the search
        (e.g. to the states around the blocked frontier). never_probe actions are excluded.
        """
        with self._lock:
            out: list[MemoryEntry] = []
            for g in self._suspect_groups(state_keys, stuck):
                entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
                out += entries
            return out

    def recheck_negatives(
        self,
        state_keys: Iterable[str] | None = None,
        *,
        stuck: bool = False,
        stamp: float | None = None,
        pairs: Iterable[tuple[str, str]] | None = None,
        no_route: bool = False,
    ) -> RecheckResult:
        """Break the self-confirming deadlock: re-test the stale negative memories.

        Suspect groups (see :meth:`stale_negative_candidates`) are suppressed and queued for
        re-verification, so the planner may try them again; in sync mode a ProbeRequest per
        group is also returned while the probe budget allows. ``pairs`` ((state_key,
        action) tuples) limits the search to the memories that stand in the planner's way,
        e.g. the remembered failures that force a detour (``stuck=False``: only those not
        re-confirmed since the latest dissonance are suspect, so a detour in a world that
        never changed re-tests nothing; with ``recheck_volatile_first`` only those at
        places where an alarm already overturned memory, since a re-test of a failure can
        cost as much as the failure). ``no_route``: ``pairs`` block every route the planner
        knows, not only a shorter one; a re-test is then the only way on, so when none of
        the suspects is at such a place the others are re-tested, as for a stuck planner.
        """
        with self._lock, self._atomic():
            when = stamp if stamp else self.store.now()
            return self._recheck(state_keys, stuck=stuck, stamp=when, pairs=pairs,
                                 no_route=no_route)

    def _recheck(
        self, state_keys: Iterable[str] | None, *, stuck: bool, stamp: float,
        pairs: Iterable[tuple[str, str]] | None = None, no_route: bool = False,
    ) -> RecheckResult:
        groups = self._suspect_groups(state_keys, stuck, pairs, no_route)
        if not groups:
            return RecheckResult()
        candidates: list[MemoryEntry] = []
        suppressed: list[int] = []
        requests: list[ProbeRequest] = []
        pairs = []
        why = ("the planner is stuck" if stuck else
               "a dissonance showed the world changed and it blocks the planner's route"
               if pairs is not None else "a dissonance showed the world changed")
        for g in groups:
            entries, _ = self.store.query(g.state_key, g.action, g.action_arg, limit=None)
            if not entries:
                continue
            candidates += entries
            outcomes = ", ".join(sorted(g.counts))
            reason = (
                f"stale negative memory {_pair_name(*g.pair)} -> {outcomes}: not re-confirmed "
                f"since {why}; re-testing to break the self-confirming deadlock"
            )
            ids = self.store.suppress([e.id for e in entries], reason, stamp)
            self._count("suppressions", len(ids))
            pkey = self.store.add_pending(*g.pair, ids, stamp, reason)
            suppressed += ids
            pairs.append(g.pair)
            self._count("rechecks")
            if self._may_probe(g.action) and self._reserve(self.config.alpha):
                template = entries[0].transition.with_(
                    outcome="?", source=Source.PROBED, reward=0.0, stamp=0.0
                )
                requests.append(self._new_request(template, self.config.alpha,
                                                  "stale_negative", pkey))
        return RecheckResult(
            candidates=tuple(candidates),
            pairs=tuple(pairs),
            suppressed_ids=tuple(suppressed),
            probe_requests=tuple(requests),
        )
