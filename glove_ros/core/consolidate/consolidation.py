"""Dock-time consolidation of plan memory (DESIGN.md section 5, papers/auto-dreamer.md).

Auto-Dreamer splits memory work into two time scales. The package ``core.consolidate``
holds both, ROS-free, one module per stage; this module is the entry point: it runs one
consolidation end to end (:class:`Consolidator`: trigger bookkeeping, the bounded tool loop,
the atomic rewrite, commit and undo) and reports it (:class:`ConsolidationReport`,
:class:`Progress`). The stages it drives:

====================  ===========================================================
module                stage
====================  ===========================================================
``writer``            1. the fast writer and the journaled episode traces
``region``            2.-3. the run's configuration, the trigger, region selection
``tools``             4.-6. tool calls, their JSON schema, the workspace (provenance
                      checks, the rewrite's edit set)
``policies``          4. who chooses the calls: the rule policy and the LLM policy
``acceptance``        7. rehearsal, utility and the acceptance test
``consolidation``     4. the loop's budgets and cancellation, 6. commit and undo
====================  ===========================================================

1. **Fast writer** (:class:`~glove_ros.core.consolidate.writer.FastWriter`): after every
   episode, typed entries (semantic facts, procedures, negative lessons) with a short name,
   a one-line body and provenance (the episode id and the experience-memory transition ids)
   are appended with :meth:`~glove_ros.core.plan.plan_memory.PlanMemoryStore.append`. No
   retrieval, no editing: cheap and append-only. The raw episode trace (every look and every
   drive, with its transition id) is journaled in the same database and is what the
   consolidator later reads as evidence
   (:class:`~glove_ros.core.consolidate.writer.TraceIndex`,
   :class:`~glove_ros.core.consolidate.writer.EpisodeTrace`).
2. **Trigger policy** (:func:`~glove_ros.core.consolidate.region.trigger_decision`):
   consolidate when the robot is docked (charging) and at least ``every_k_episodes``
   episodes were written since the last run, or when asked. With ``require_dock=False``
   every k episodes suffice (simulation).
3. **Region selection** (:func:`~glove_ros.core.consolidate.region.select_region`): R =
   earlier consolidated entries (the anchors new evidence is merged into) + recent fast
   writes (newest first) + entries the planner retrieves for the recent tasks (the top
   ``retrieve_k`` of :func:`~glove_ros.core.plan.plan_retrieval.rank_entries` per task text).
   Only entries with at least one journaled source episode qualify (a rewrite must be able
   to cite evidence). R is bounded in entries and tokens so that the consolidator's prompt
   fits the model.
4. **Consolidator** (:meth:`Consolidator.run`): a bounded tool-use loop. A policy -- the
   local LLM (:class:`~glove_ros.core.consolidate.policies.LlmPolicy`) or the deterministic
   :class:`~glove_ros.core.consolidate.policies.RulePolicy` -- emits one tool call per step:
   ``search_memory``, ``check_memory``, ``get_source_trace``, ``synthesize``, ``terminate``.
   For the LLM every call is constrained by one JSON schema
   (:func:`~glove_ros.core.consolidate.tools.tool_schema`: a ``tool`` name plus its
   ``args``, names and episodes restricted to the region's), then validated again by the
   workspace. Steps, generated tokens and wall time are bounded; ``should_cancel`` is
   checked between steps. Any invalid call, budget overrun, model error or cancellation
   aborts the run cleanly: nothing is written.
5. **Provenance**: every synthesized entry cites at least one source episode of the region
   that has a journaled trace, and every waypoint / colour its body names must occur in a
   cited trace (a grounding check); otherwise the call is invalid.
6. **Region rewrite** B <- (B \\ R) U S as one candidate version of the versioned store,
   deployed in one step (the active-version pointer moves atomically). Replaced and dropped
   entries stay in history with the reason (:meth:`PlanMemoryStore.archived`). A fast write
   that lands during the run makes the candidate stale: the run is aborted and the write is
   kept. **Undo** is one call: :meth:`Consolidator.undo` rolls back to the version before.
7. **Acceptance** (:func:`~glove_ros.core.consolidate.acceptance.evaluate_rewrite`), a
   Janus-style comparison on an evaluation set plus Auto-Dreamer's counterfactual utility.
   The utility U(M) of a memory M is its *rehearsal score*: for each evaluation task the
   planner's first decision is rehearsed on the memory text the planner would read (the
   order and token budget of :meth:`PlanMemoryStore.render`, ``planner_budget_tokens``) and
   scored against the relative truth of the journaled traces (latest evidence). Tasks: "find
   the <colour> block" for every colour the region's traces saw (decision: the first
   waypoint the memory points at; truth: where that colour was last seen) and "is the
   corridor a-b blocked?" for every corridor the region's traces found blocked (truth: the
   latest drive through it). :func:`~glove_ros.core.consolidate.acceptance.rehearse_find`
   and :func:`~glove_ros.core.consolidate.acceptance.rehearse_corridor` are the
   deterministic readers; a custom ``scorer`` can replace them. The counterfactual utility
   is U(B') - E[U(B' with a random fraction rho of S masked)] (``n_masks`` seeded samples):
   > 0 when S holds load-bearing entries, ~0 when S is redundant, < 0 when masking helps
   (misleading entries). Leave-one-out deltas name the load-bearing and the harmful entries.
   S is committed only if U(B') >= U(B) (not worse than the old memory on the same tasks),
   the counterfactual utility is >= ``min_cf``, no entry of S is harmful, the memory does
   not grow beyond ``max_growth`` and at least one task could be judged. A rejected
   candidate is stored as a rejected version for audit; the active memory stays exactly as
   it was.

Reported per run (:class:`ConsolidationReport`): active memory tokens before / after and the
compression ratio, entries, provenance fan-in (source episodes per synthesized entry), tool
calls, time and LLM tokens spent.

Limits: the readers are keyword heuristics (a body the reader cannot parse scores as "no
information"), the truth is only as good as the robot's own latest observations (one block
per colour is assumed: the latest sighting wins, as in
:class:`~glove_ros.core.plan.updater.RuleUpdater`), and the evaluation set only covers blocks and
corridors, not free-form procedures.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from glove_ros.core.consolidate.acceptance import (
    EntryScorer,
    Evaluation,
    evaluate_rewrite,
    evaluation_tasks,
    heldout_tasks,
    memory_tokens,
    rehearsal_scorer,
)
from glove_ros.core.consolidate.policies import Policy
from glove_ros.core.consolidate.region import (
    ConsolidationConfig,
    Region,
    select_region,
    trigger_decision,
)
from glove_ros.core.consolidate.tools import ToolCall, ToolRecord, ToolResult, Workspace
from glove_ros.core.consolidate.writer import SOURCE, TraceIndex
from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.plan_entries import Edit, PlanEntry
from glove_ros.core.plan.plan_memory import PlanMemoryStore, StaleCandidateError

__all__ = [
    "STATUSES",
    "Progress",
    "ConsolidationReport",
    "Consolidator",
    "consolidation_id_of",
]

#: Outcomes of a run.
STATUSES = ("committed", "rejected", "dry_run", "unchanged", "aborted", "cancelled", "skipped")
_ID_PREFIX = "consolidation-"


def consolidation_id_of(version: int) -> str:
    """The consolidation id of the candidate version ``version`` (what undo takes)."""
    return f"{_ID_PREFIX}{int(version)}"



# ============================================================================================
# 7. the consolidator


@dataclass(frozen=True)
class Progress:
    """Feedback after each step (mirrors ``Consolidate.action`` feedback)."""

    step: int
    tokens_spent: int
    entries_read: int
    entries_written: int
    last_tool: str


@dataclass(frozen=True)
class ConsolidationReport:
    """The outcome of one run (:data:`STATUSES`).

    ``entries_after`` / ``tokens_after`` describe the active memory after the run (equal to
    before unless committed); ``candidate_entries`` / ``candidate_tokens`` the rewritten
    memory that was evaluated (0 when none). ``consolidation_id`` names the candidate
    version (for :meth:`Consolidator.undo`); ``""`` when nothing was stored.
    """

    status: str
    message: str
    reason: str
    policy: str
    consolidation_id: str = ""
    base_version: int = 0
    version: int | None = None
    entries_before: int = 0
    entries_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    candidate_entries: int = 0
    candidate_tokens: int = 0
    region_entries: int = 0
    region_tokens: int = 0
    region_episodes: int = 0
    region_left_out: int = 0
    synthesized: int = 0
    fan_in_mean: float = 0.0
    fan_in_max: int = 0
    steps: int = 0
    llm_tokens: int = 0
    prompt_tokens: int = 0
    elapsed_s: float = 0.0
    entries_read: int = 0
    traces_read: int = 0
    evaluation: Evaluation | None = None
    tools: tuple[ToolRecord, ...] = ()

    @property
    def committed(self) -> bool:
        """True when the rewrite is now the active memory."""
        return self.status == "committed"

    @property
    def compression(self) -> float:
        """tokens_before / candidate tokens (the rewrite's compression; 1.0 when none)."""
        after = self.candidate_tokens or self.tokens_before
        return self.tokens_before / after if after else 1.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in
             ("evaluation", "tools")}
        d["committed"] = self.committed
        d["compression"] = round(self.compression, 3)
        d["evaluation"] = self.evaluation.as_dict() if self.evaluation else None
        d["tools"] = [r.__dict__ for r in self.tools]
        return d


class Consolidator:
    """Runs dock-time consolidation on a :class:`PlanMemoryStore`.

    Args:
        store: the plan memory (its journal holds the traces).
        config: :class:`~glove_ros.core.consolidate.region.ConsolidationConfig`.
        scorer: ``(entries, task) -> score | None`` for acceptance; default
            :func:`~glove_ros.core.consolidate.acceptance.rehearsal_scorer` over the
            waypoints the traces mention.
        count_tokens: token counter for memory sizes and budgets.
        clock: monotonic time source (tests inject one).
        state_key: where the trigger mark is saved in the store.

    :meth:`run` never raises on model or tool misbehaviour: the report says what happened.
    """

    def __init__(
        self,
        store: PlanMemoryStore,
        config: ConsolidationConfig | None = None,
        *,
        scorer: EntryScorer | None = None,
        count_tokens: Callable[[str], int] = approx_tokens,
        clock: Callable[[], float] = time.monotonic,
        state_key: str = "consolidation",
    ) -> None:
        self.store = store
        self.config = (config or ConsolidationConfig()).validate()
        self.scorer = scorer
        self.count_tokens = count_tokens
        self.clock = clock
        self.state_key = state_key
        self.index = TraceIndex(store)
        self._refitting = False

    # -- trigger
    def _state(self) -> dict[str, Any]:
        s = self.store.get_state(self.state_key)
        return dict(s) if isinstance(s, Mapping) else {}

    def episodes_since_last(self) -> int:
        """Episodes written since the last finished run."""
        self.index.refresh()
        return self.index.episodes_since(int(self._state().get("journal_mark", 0)))

    def due(self, *, docked: bool, requested: bool = False) -> tuple[bool, str]:
        """:func:`~glove_ros.core.consolidate.region.trigger_decision` with the episodes since
        the last run."""
        return trigger_decision(self.config, docked=docked,
                                episodes_since=self.episodes_since_last(), requested=requested)

    def _mark(self, report: ConsolidationReport) -> None:
        s = self._state()
        s["journal_mark"] = self.index.last_id
        s["runs"] = int(s.get("runs", 0)) + 1
        s["last"] = {"status": report.status, "id": report.consolidation_id,
                     "message": report.message[:300]}
        self.store.set_state(self.state_key, s)

    # -- region
    def held_out(self, config: ConsolidationConfig | None = None) -> tuple[str, ...]:
        """The journaled episodes the next run holds out (the newest ``holdout_episodes``;
        none while the journal holds no more than that)."""
        self.index.refresh()
        k = (config or self.config).holdout_episodes
        if self._refitting:
            return ()
        if k <= 0 or len(self.index) <= k:
            return ()
        return tuple(t.episode_id for t in self.index.recent(k))

    def select_region(self, entries: Sequence[PlanEntry] | None = None,
                      config: ConsolidationConfig | None = None) -> Region:
        """The region the next run would rewrite (held-out episodes masked)."""
        cfg = config or self.config
        held = self.held_out(cfg)
        index = self.index.without(held) if held else self.index
        queries = list(dict.fromkeys(t.task for t in index.recent(cfg.recent_tasks)
                                     if t.task))
        return select_region(self.store.entries() if entries is None else entries,
                             index, cfg, queries=queries, count_tokens=self.count_tokens,
                             exclude=held)

    def _scorer(self) -> EntryScorer:
        if self.scorer is not None:
            return self.scorer
        vocab = set()
        for t in self.index.traces():
            vocab.update(w for w, _, _ in t.looks)
            for a, b, _, _ in t.drives:
                vocab.update((a, b))
        return rehearsal_scorer(vocab, budget_tokens=self.config.planner_budget_tokens,
                                count_tokens=self.count_tokens)

    # -- the run
    def run(
        self,
        policy: Policy,
        *,
        reason: str = "request",
        dry_run: bool | None = None,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        should_cancel: Callable[[], bool] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> ConsolidationReport:
        """One consolidation: region, tool loop, rewrite, acceptance, commit or not.

        ``max_steps`` / ``max_tokens`` override the configured budgets for this run (0 or
        ``None``: configured). Only an explicit ``terminate`` can lead to a commit; budgets,
        invalid calls, errors and cancellation end the run with memory unchanged.

        With held-out episodes and ``refit_after_heldout``, a committed rewrite is followed
        by a refit with nothing held out; the report is the refit's when it committed (its
        evaluation carries the held-out figures of the first pass; :meth:`undo` of it goes
        back to the memory before both passes), else the first pass's.
        """
        kw: dict[str, Any] = {"reason": reason, "dry_run": dry_run, "max_steps": max_steps,
                              "max_tokens": max_tokens, "should_cancel": should_cancel,
                              "on_progress": on_progress}
        first = self._run_once(policy, **kw)
        ev = first.evaluation
        if (not first.committed or not self.config.refit_after_heldout or ev is None
                or not ev.heldout_tasks):
            return first
        self._refitting = True
        try:
            second = self._run_once(policy, **{**kw, "reason": f"{reason}, refit"})
        finally:
            self._refitting = False
        if not second.committed or second.evaluation is None:
            return first
        if second.version is not None:  # undo of the refit goes back before both passes
            st = self._state()
            st.setdefault("refit_of", {})[str(second.version)] = first.base_version
            self.store.set_state(self.state_key, st)
        held = {k: getattr(ev, k) for k in ("heldout_tasks", "heldout_judged", "heldout_old",
                                            "heldout_new")}
        return replace(second, evaluation=replace(second.evaluation, **held),
                       tokens_before=first.tokens_before, entries_before=first.entries_before,
                       elapsed_s=first.elapsed_s + second.elapsed_s,
                       steps=first.steps + second.steps,
                       llm_tokens=first.llm_tokens + second.llm_tokens)

    def _run_once(
        self,
        policy: Policy,
        *,
        reason: str = "request",
        dry_run: bool | None = None,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        should_cancel: Callable[[], bool] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> ConsolidationReport:
        cfg = self.config
        dry = cfg.dry_run if dry_run is None else bool(dry_run)
        steps_cap = int(max_steps) if max_steps else cfg.max_steps
        tokens_cap = int(max_tokens) if max_tokens else cfg.max_tokens
        if steps_cap < 1 or tokens_cap < 1:
            raise ValueError("max_steps and max_tokens must be >= 1 (0: configured default)")
        t0 = self.clock()
        cancelled = should_cancel or (lambda: False)
        base_v = self.store.active_version
        base = self.store.entries(base_v)
        tok_before = memory_tokens(base, self.count_tokens)
        common: dict[str, Any] = {
            "reason": reason, "policy": getattr(policy, "name", type(policy).__name__),
            "base_version": base_v, "entries_before": len(base), "entries_after": len(base),
            "tokens_before": tok_before, "tokens_after": tok_before,
        }

        def done(status: str, message: str, mark: bool = True, **kw: Any) -> ConsolidationReport:
            rep = ConsolidationReport(status, message, **{**common, **kw},
                                      elapsed_s=self.clock() - t0)
            if mark and status not in ("cancelled", "dry_run"):
                self._mark(rep)
            return rep

        held = self.held_out()
        visible = self.index.without(held) if held else self.index
        region = self.select_region(base)
        common.update(region_entries=len(region), region_tokens=region.tokens,
                      region_episodes=len(region.episodes), region_left_out=region.left_out)
        if not len(region):
            return done("skipped", "nothing to consolidate: no entry cites a journaled episode")
        ws = Workspace(base, region, visible, cfg)
        history: list[tuple[ToolCall, ToolResult]] = []
        records: list[ToolRecord] = []
        spent = prompt = 0
        try:
            policy.start(region, cfg)
        except ValueError as exc:
            return done("aborted", f"policy could not start: {exc}")

        def loop_stats() -> dict[str, Any]:
            return {"steps": len(records), "llm_tokens": spent, "prompt_tokens": prompt,
                    "entries_read": len(ws.entries_read), "traces_read": len(ws.traces_read),
                    "tools": tuple(records), "synthesized": len(ws.synthesized)}

        terminated = False
        for step in range(1, steps_cap + 1):
            if cancelled():
                return done("cancelled", f"cancelled before step {step}; memory unchanged",
                            **loop_stats())
            if self.clock() - t0 > cfg.max_seconds:
                return done("aborted", f"time budget {cfg.max_seconds:g} s exhausted before "
                            "terminate; memory unchanged", **loop_stats())
            try:
                ps = policy.next_call(ws, history, step, steps_cap, tokens_cap - spent)
            except Exception as exc:  # a policy bug or a backend failure is an abort, not a crash
                return done("aborted", f"policy failed at step {step}: {type(exc).__name__}: "
                            f"{exc}; memory unchanged", **loop_stats())
            spent += int(ps.tokens)
            prompt += int(ps.prompt_tokens)
            if ps.call is None:
                records.append(ToolRecord(step, "", (ps.raw or "")[:120], False, ps.error,
                                          ps.tokens))
                if on_progress is not None:
                    try:
                        on_progress(Progress(step, spent, len(ws.entries_read),
                                             len(ws.synthesized), "(invalid)"))
                    except Exception:  # noqa: S110 - feedback must never break the run
                        pass
                return done("aborted", f"step {step}: {ps.error}; memory unchanged",
                            **loop_stats())
            res = ws.execute(ps.call)
            records.append(ToolRecord(step, ps.call.tool, ps.call.summary(), res.ok, res.error,
                                      ps.tokens))
            history.append((ps.call, res))
            if on_progress is not None:
                try:
                    on_progress(Progress(step, spent, len(ws.entries_read),
                                         len(ws.synthesized), ps.call.tool))
                except Exception:  # noqa: S110 - feedback must never break the run
                    pass
            if not res.ok:
                return done("aborted", f"step {step}: invalid tool call: {res.error}; memory "
                            "unchanged", **loop_stats())
            if spent > tokens_cap:
                return done("aborted", f"token budget {tokens_cap} exceeded; memory unchanged",
                            **loop_stats())
            if ps.call.tool == "terminate":
                terminated = True
                break
        if not terminated:
            return done("aborted", f"step budget {steps_cap} exhausted before terminate; memory "
                        "unchanged", **loop_stats())

        why = f"dock-time consolidation ({reason})"
        try:
            edits, new = ws.rewrite(why)
        except ValueError as exc:
            return done("aborted", f"the rewrite is not a valid edit set: {exc}; memory "
                        "unchanged", **loop_stats())
        fan = [len(e.provenance.episodes) for e in ws.synthesized.values()]
        stats = {**loop_stats(), "fan_in_mean": float(np.mean(fan)) if fan else 0.0,
                 "fan_in_max": max(fan, default=0), "candidate_entries": len(new),
                 "candidate_tokens": memory_tokens(new, self.count_tokens)}
        if not edits:
            return done("unchanged", "the rewrite equals the region: nothing to commit", **stats)
        tasks = evaluation_tasks(visible, region.episodes, miss_threshold=cfg.miss_threshold)
        try:
            ev = evaluate_rewrite(base, new, list(ws.synthesized), tasks, self._scorer(), cfg,
                                  count_tokens=self.count_tokens, should_cancel=cancelled,
                                  heldout=heldout_tasks(self.index, held) if held else None,
                                  heldout_episodes=held)
        except InterruptedError:
            return done("cancelled", "cancelled during evaluation; memory unchanged", **stats)
        stats["evaluation"] = ev
        if cancelled():
            return done("cancelled", "cancelled before commit; memory unchanged", **stats)
        summary = (f"U {ev.utility_old:.3f} -> {ev.utility_new:.3f} on {ev.judged} task(s), "
                   f"counterfactual {ev.counterfactual:+.3f}, {len(base)} -> {len(new)} "
                   f"entries, {tok_before} -> {ev.tokens_after} tokens")
        if dry:
            verdict = "would commit" if ev.accepted else "would reject: " + "; ".join(ev.reasons)
            return done("dry_run", f"dry run ({verdict}): {summary}; memory unchanged", **stats)
        return self._commit(base_v, edits, ev, why, summary, done, stats)

    def _commit(self, base_v: int, edits: list[Edit], ev: Evaluation, why: str, summary: str,
                done: Callable[..., ConsolidationReport], stats: dict[str, Any]
                ) -> ConsolidationReport:
        try:
            if self.store.active_version != base_v:
                return done("aborted", "plan memory changed during the run (a new write); "
                            "nothing committed, the write is kept", **stats)
            cand = self.store.propose(edits, source=SOURCE, reason=f"{why}: {summary}"[:500])
            cid = consolidation_id_of(cand.version)
            if cand.base_version != base_v:
                self.store.reject(cand, "plan memory changed during the run")
                return done("aborted", "plan memory changed during the run; nothing committed",
                            consolidation_id=cid, version=cand.version, **stats)
            if not ev.accepted:
                self.store.reject(cand, ("consolidation rejected: " + "; ".join(ev.reasons))
                                  [:500])
                return done("rejected", "rejected: " + "; ".join(ev.reasons) + f" ({summary}); "
                            "memory unchanged", consolidation_id=cid, version=cand.version,
                            **stats)
            try:
                self.store.deploy(cand, reason=f"{why}: {summary}"[:500])
            except StaleCandidateError as exc:
                self.store.reject(cand, f"stale: {exc}"[:500])
                return done("aborted", f"plan memory changed during the run ({exc}); nothing "
                            "committed", consolidation_id=cid, version=cand.version, **stats)
        except (ValueError, sqlite3.Error) as exc:
            return done("aborted", f"store refused the rewrite: {exc}; memory unchanged",
                        **stats)
        after = self.store.entries()
        return done("committed", f"committed {cid}: {summary}", consolidation_id=cid,
                    version=cand.version, entries_after=len(after),
                    tokens_after=memory_tokens(after, self.count_tokens), **stats)

    # -- undo
    def undo(self, consolidation_id: str, *, force: bool = False) -> int:
        """Roll back to the version before the consolidation ``consolidation_id``, in one call.
        Returns the version now active.

        Refuses (``ValueError``) an unknown id, a rejected or dry-run one, and -- unless
        ``force`` -- one that is no longer the active version (later writes would leave the
        active memory; with ``force`` they stay in history and can be rolled forward to).
        """
        if not isinstance(consolidation_id, str) or not consolidation_id.startswith(_ID_PREFIX):
            raise ValueError(f"not a consolidation id: {consolidation_id!r} (expected "
                             f"'{_ID_PREFIX}<version>')")
        try:
            v = int(consolidation_id[len(_ID_PREFIX):])
        except ValueError:
            raise ValueError(f"not a consolidation id: {consolidation_id!r}") from None
        info = self.store.version_info(v)
        if info.source != SOURCE:
            raise ValueError(f"version {v} was written by {info.source!r}, not by consolidation")
        if info.status != "deployed":
            raise ValueError(f"{consolidation_id} was {info.status}, never committed: nothing "
                             "to undo")
        active = self.store.active_version
        if active != v and not force:
            raise ValueError(f"{consolidation_id} is not the active version ({active} is): undo "
                             "would also drop later writes; pass force=True to do it anyway")
        assert info.parent is not None
        target = int(self._state().get("refit_of", {}).get(str(v), info.parent))
        return self.store.rollback(target, reason=f"undo {consolidation_id}")

    def last_committed(self) -> str | None:
        """The id of the newest committed consolidation still active or in the active
        version's ancestry, else ``None``."""
        for vi in reversed(self.store.versions("deployed")):
            if vi.source == SOURCE and vi.version <= self.store.active_version:
                return consolidation_id_of(vi.version)
        return None
