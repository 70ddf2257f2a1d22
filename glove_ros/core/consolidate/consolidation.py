"""Dock-time consolidation of plan memory (DESIGN.md section 5, papers/auto-dreamer.md).

Auto-Dreamer splits memory work into two time scales. This module holds both, ROS-free:

1. **Fast writer** (:class:`FastWriter`): after every episode, typed entries (semantic facts,
   procedures, negative lessons) with a short name, a one-line body and provenance (the
   episode id and the experience-memory transition ids) are appended with
   :meth:`~glove_ros.core.plan.plan_memory.PlanMemoryStore.append`. No retrieval, no editing:
   cheap and append-only. The raw episode trace (every look and every drive, with its
   transition id) is journaled in the same database and is what the consolidator later
   reads as evidence (:class:`TraceIndex`, :class:`EpisodeTrace`).
2. **Trigger policy** (:func:`trigger_decision`): consolidate when the robot is docked
   (charging) and at least ``every_k_episodes`` episodes were written since the last run,
   or when asked. With ``require_dock=False`` every k episodes suffice (simulation).
3. **Region selection** (:func:`select_region`): R = earlier consolidated entries (the
   anchors new evidence is merged into) + recent fast writes (newest first) + entries the
   planner retrieves for the recent tasks (the top ``retrieve_k`` of
   :func:`~glove_ros.core.plan.plan_memory.rank_entries` per task text). Only entries with at
   least one journaled source episode qualify (a rewrite must be able to cite evidence).
   R is bounded in entries and tokens so that the consolidator's prompt fits the model.
4. **Consolidator** (:meth:`Consolidator.run`): a bounded tool-use loop. A policy -- the
   local LLM (:class:`LlmPolicy`) or the deterministic :class:`RulePolicy` -- emits one
   tool call per step: ``search_memory``, ``check_memory``, ``get_source_trace``,
   ``synthesize``, ``terminate``. For the LLM every call is constrained by one JSON schema
   (:func:`tool_schema`: a ``tool`` name plus its ``args``, names and episodes restricted
   to the region's), then validated again here. Steps, generated tokens and wall time are
   bounded; ``should_cancel`` is checked between steps. Any invalid call, budget overrun,
   model error or cancellation aborts the run cleanly: nothing is written.
5. **Provenance**: every synthesized entry cites at least one source episode of the region
   that has a journaled trace, and every waypoint / colour its body names must occur in a
   cited trace (a grounding check); otherwise the call is invalid.
6. **Region rewrite** B <- (B \\ R) U S as one candidate version of the versioned store,
   deployed in one step (the active-version pointer moves atomically). Replaced and dropped
   entries stay in history with the reason (:meth:`PlanMemoryStore.archived`). A fast write
   that lands during the run makes the candidate stale: the run is aborted and the write is
   kept. **Undo** is one call: :meth:`Consolidator.undo` rolls back to the version before.
7. **Acceptance** (:func:`evaluate_rewrite`), a Janus-style comparison on an evaluation set
   plus Auto-Dreamer's counterfactual utility. The utility U(M) of a memory M is its
   *rehearsal score*: for each evaluation task the planner's first decision is rehearsed on
   the memory text the planner would read (the order and token budget of
   :meth:`PlanMemoryStore.render`, ``planner_budget_tokens``) and scored against the
   relative truth of the journaled traces (latest evidence). Tasks: "find the <colour>
   block" for every colour the region's traces saw (decision: the first waypoint the memory
   points at; truth: where that colour was last seen) and "is the corridor a-b blocked?"
   for every corridor the region's traces found blocked (truth: the latest drive through
   it). :func:`rehearse_find` and
   :func:`rehearse_corridor` are the deterministic readers; a custom ``scorer`` can replace
   them. The counterfactual utility is U(B') - E[U(B' with a random fraction rho of S
   masked)] (``n_masks`` seeded samples): > 0 when S holds load-bearing entries, ~0 when S
   is redundant, < 0 when masking helps (misleading entries). Leave-one-out deltas name the
   load-bearing and the harmful entries. S is committed only if U(B') >= U(B) (not worse
   than the old memory on the same tasks), the counterfactual utility is >= ``min_cf``, no
   entry of S is harmful, the memory does not grow beyond ``max_growth`` and at least one
   task could be judged. A rejected candidate is stored as a rejected version for audit;
   the active memory stays exactly as it was.

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

import inspect
import json
import math
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from glove_ros.core.llm.runtime import LlmResult, approx_tokens
from glove_ros.core.memory.experience import Transition
from glove_ros.core.plan.agent import ACTION_LOOK, ACTION_NAVIGATE, OUTCOME_BLOCKED, colors_of
from glove_ros.core.plan.janus import GateTask
from glove_ros.core.plan.plan_memory import (
    KINDS,
    MAX_BODY,
    MAX_NAME,
    Edit,
    PlanEntry,
    PlanMemoryStore,
    Provenance,
    StaleCandidateError,
    apply_edits,
    assemble_prompt,
    format_entry,
    memory_text,
    rank_entries,
    slugify,
)
from glove_ros.core.plan.updater import (
    EpisodeOutcome,
    Observation,
    Traversal,
    blocked_name,
    fact_name,
    failure_name,
    route_name,
)

__all__ = [
    "TOOLS",
    "STATUSES",
    "WriterConfig",
    "FastWriter",
    "episode_from_transitions",
    "episode_trace",
    "EpisodeTrace",
    "TraceIndex",
    "ConsolidationConfig",
    "trigger_decision",
    "Region",
    "select_region",
    "ToolCall",
    "ToolResult",
    "ToolRecord",
    "tool_schema",
    "parse_tool_call",
    "Workspace",
    "PolicyStep",
    "Policy",
    "RulePolicy",
    "LlmPolicy",
    "Progress",
    "Evaluation",
    "evaluation_tasks",
    "heldout_tasks",
    "rehearse_find",
    "rehearse_corridor",
    "rehearsal_scorer",
    "utility",
    "evaluate_rewrite",
    "ConsolidationReport",
    "Consolidator",
    "memory_tokens",
    "consolidation_id_of",
]

#: The consolidator's tools, in the order the prompt lists them.
TOOLS = ("search_memory", "check_memory", "get_source_trace", "synthesize", "terminate")
#: Outcomes of a run.
STATUSES = ("committed", "rejected", "dry_run", "unchanged", "aborted", "cancelled", "skipped")
SOURCE = "consolidator"
_WRITER_SOURCE = "fast_writer"
_ID_PREFIX = "consolidation-"


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def memory_tokens(entries: Sequence[PlanEntry],
                  count_tokens: Callable[[str], int] = approx_tokens) -> int:
    """Active memory tokens: the whole memory as the canonical text
    (:func:`~glove_ros.core.plan.plan_memory.memory_text`), counted with ``count_tokens``."""
    text = memory_text(entries)
    return int(count_tokens(text)) if text else 0


def consolidation_id_of(version: int) -> str:
    """The consolidation id of the candidate version ``version`` (what undo takes)."""
    return f"{_ID_PREFIX}{int(version)}"


# ============================================================================================
# 1. fast writer


@dataclass(frozen=True)
class WriterConfig:
    """What the fast writer records per episode.

    Attributes:
        record_empty_looks: one semantic entry listing the waypoints where nothing was seen.
        record_routes: a procedure for the loop-free route of a successful episode
            (>= 2 drives).
        record_failures: a negative lesson when a search failed.
        max_entries: most entries written for one episode (sightings first).
    """

    record_empty_looks: bool = True
    record_routes: bool = True
    record_failures: bool = True
    max_entries: int = 16

    def validate(self) -> WriterConfig:
        """Raise ``ValueError`` on a bad value. Returns ``self``."""
        for k in ("record_empty_looks", "record_routes", "record_failures"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"{k} must be a bool")
        if not _int(self.max_entries) or not 1 <= self.max_entries <= 256:
            raise ValueError(f"max_entries must be an int in [1, 256] (got {self.max_entries!r})")
        return self


def episode_from_transitions(
    episode_id: str,
    task: str,
    goal: str | None,
    success: bool,
    transitions: Sequence[Transition],
    transition_ids: Sequence[int] = (),
    *,
    reason: str = "",
    found_at: str = "",
) -> EpisodeOutcome:
    """An :class:`~glove_ros.core.plan.updater.EpisodeOutcome` from the transitions of one task
    (the ``TaskOutcome`` message's content, converted by ``conversions.py``).

    Uses the agent's transition vocabulary: ``look`` at ``state_key`` with outcome
    ``colors=...`` becomes an observation; ``navigate_to`` from ``state_key`` to
    ``action_arg`` with outcome ``blocked`` / anything else a traversal (blocked or
    reached). Other actions are ignored. ``transition_ids`` pairs with ``transitions``; 0
    (not acknowledged) becomes ``None``. Raises ``ValueError`` for a malformed look
    signature or mismatched lengths.
    """
    ids = list(transition_ids)
    if ids and len(ids) != len(transitions):
        raise ValueError(f"{len(ids)} transition ids for {len(transitions)} transitions")
    obs: list[Observation] = []
    trav: list[Traversal] = []
    for i, t in enumerate(transitions):
        tid = ids[i] if ids and _int(ids[i]) and ids[i] > 0 else None
        if t.action == ACTION_LOOK:
            obs.append(Observation(t.state_key, tuple(sorted(colors_of(t.outcome))), tid))
        elif t.action == ACTION_NAVIGATE and t.action_arg:
            trav.append(Traversal(t.state_key, t.action_arg, t.outcome == OUTCOME_BLOCKED, tid))
    return EpisodeOutcome(
        episode_id=episode_id, task=task, goal=goal or None, success=bool(success),
        reported_waypoint=found_at or None, observations=tuple(obs), traversals=tuple(trav),
        failure_reason=reason if not success else "",
    ).validate()


def episode_trace(outcome: EpisodeOutcome, extra: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The raw episode trace journaled with each fast write (JSON-able): every look
    ``[waypoint, [colours], transition_id]`` and drive ``[from, to, blocked, transition_id]``
    in order, plus task, goal, success and where the goal was reported."""
    o = outcome
    doc: dict[str, Any] = {
        "v": 1,
        "task": o.task,
        "goal": o.goal,
        "success": bool(o.success),
        "found_at": o.reported_waypoint or "",
        "reason": o.failure_reason,
        "looks": [[ob.waypoint, sorted(ob.colours), ob.transition_id] for ob in o.observations],
        "drives": [[t.source, t.target, bool(t.blocked), t.transition_id] for t in o.traversals],
    }
    if extra:
        doc["extra"] = dict(extra)
    return doc


def _clip_body(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_BODY else text[: MAX_BODY - 3] + "..."


class FastWriter:
    """Appends one episode's typed entries to plan memory (append-only, no retrieval).

    Entries (names are suffixed ``-2``, ``-3``... by the store when taken):

    - ``seen_<colour>_<waypoint>`` semantic: "Saw the red block at kitchen (episode ep3)."
    - ``empty_<episode>`` semantic: "No block seen at hall, lab (episode ep3)."
    - ``closed_<a>_<b>`` negative: "The corridor between a and b was blocked (episode ep3)."
    - ``path_<start>_<end>`` procedure: "Route a -> b -> c worked (episode ep3)."
    - ``notfound_<colour>`` negative: "Search for the red block failed in episode ep3 ..."

    ``meta["fact"]`` says which (``seen``, ``empty``, ``closed``, ``path``, ``notfound``).
    Each entry's provenance holds the episode id (added by the store) and its transition
    ids; the raw trace (:func:`episode_trace`) is journaled with it.
    """

    def __init__(self, store: PlanMemoryStore, config: WriterConfig | None = None) -> None:
        self.store = store
        self.config = (config or WriterConfig()).validate()
        self.index = TraceIndex(store)

    def entries_for(self, outcome: EpisodeOutcome) -> list[PlanEntry]:
        """The entries ``outcome`` produces (pure; nothing is written)."""
        o = outcome.validate()
        cfg = self.config
        ep = o.episode_id
        out: list[PlanEntry] = []
        seen: dict[tuple[str, str], list[int]] = {}
        seen_wps: set[str] = set()
        for ob in o.observations:
            for c in ob.colours:
                tids = seen.setdefault((slugify(c), ob.waypoint), [])
                if ob.transition_id is not None:
                    tids.append(ob.transition_id)
                seen_wps.add(ob.waypoint)
        for (c, wp), tids in seen.items():
            out.append(PlanEntry(
                "semantic", slugify(f"seen_{c}_{wp}"),
                _clip_body(f"Saw the {c} block at {wp} (episode {ep})."),
                Provenance((), tuple(dict.fromkeys(tids))),
                {"fact": "seen", "colour": c, "waypoint": wp}, _WRITER_SOURCE,
            ))
        if cfg.record_empty_looks:
            empty = [ob for ob in o.observations if not ob.colours and ob.waypoint not in seen_wps]
            wps = list(dict.fromkeys(ob.waypoint for ob in empty))
            if wps:
                tids = tuple(dict.fromkeys(ob.transition_id for ob in empty
                                           if ob.transition_id is not None))
                out.append(PlanEntry(
                    "semantic", slugify(f"empty_{ep}") or "empty",
                    _clip_body(f"No block seen at {', '.join(wps)} (episode {ep})."),
                    Provenance((), tids), {"fact": "empty", "waypoints": wps}, _WRITER_SOURCE,
                ))
        closed: dict[tuple[str, str], list[int]] = {}
        for tr in o.traversals:
            if tr.blocked:
                tids = closed.setdefault(tuple(sorted((tr.source, tr.target))), [])
                if tr.transition_id is not None:
                    tids.append(tr.transition_id)
        for (a, b), tids in closed.items():
            out.append(PlanEntry(
                "negative", slugify(f"closed_{a}_{b}"),
                _clip_body(f"The corridor between {a} and {b} was blocked (episode {ep})."),
                Provenance((), tuple(tids)), {"fact": "closed", "edge": [a, b]}, _WRITER_SOURCE,
            ))
        if cfg.record_routes and o.success:
            path = _simple_path(o.traversals)
            if path is not None and len(path) >= 3:
                tids = tuple(t.transition_id for t in o.traversals if t.transition_id is not None)
                out.append(PlanEntry(
                    "procedure", slugify(f"path_{path[0]}_{path[-1]}"),
                    _clip_body(f"Route {' -> '.join(path)} worked (episode {ep})."),
                    Provenance((), tids), {"fact": "path", "path": path}, _WRITER_SOURCE,
                ))
        if cfg.record_failures and not o.success and o.goal:
            searched = list(dict.fromkeys(ob.waypoint for ob in o.observations))
            why = f" ({o.failure_reason})" if o.failure_reason else ""
            body = f"Search for the {o.goal} block failed in episode {ep}{why}"
            body += f"; looked at {', '.join(searched)}." if searched else "."
            out.append(PlanEntry(
                "negative", slugify(f"notfound_{o.goal}"), _clip_body(body),
                Provenance((), o.transition_ids),
                {"fact": "notfound", "colour": slugify(o.goal), "searched": searched},
                _WRITER_SOURCE,
            ))
        return out[: cfg.max_entries]

    def write(self, outcome: EpisodeOutcome, extra: Mapping[str, Any] | None = None
              ) -> int | None:
        """Append ``outcome``'s entries and journal its trace. Returns the new active version,
        or ``None`` when the episode gave nothing to write or was written before (same
        episode id: a re-delivered message is not written twice). Raises ``ValueError`` for
        a malformed outcome (nothing written)."""
        entries = self.entries_for(outcome)
        if not entries:
            return None
        self.index.refresh()
        if outcome.episode_id in self.index:
            return None
        return self.store.append(entries, episode_id=outcome.episode_id,
                                 trace=episode_trace(outcome, extra))


def _simple_path(traversals: Sequence[Traversal]) -> list[str] | None:
    """The driven path (blocked attempts leave the robot where it was) when it is continuous
    and no waypoint repeats, else None."""
    if not traversals:
        return None
    path = [traversals[0].source]
    for tr in traversals:
        if tr.source != path[-1]:
            return None
        if tr.blocked:
            continue
        if tr.target in path:
            return None
        path.append(tr.target)
    return path if len(path) >= 2 else None


# ============================================================================================
# traces


@dataclass(frozen=True)
class EpisodeTrace:
    """One journaled episode trace (what :func:`episode_trace` wrote).

    ``order`` is the journal id of the episode's first fast write: traces compare in time by
    it. Traces written by other tools (without looks / drives) parse with empty lists.
    """

    episode_id: str
    order: int
    ts: float
    task: str = ""
    goal: str | None = None
    success: bool = False
    found_at: str = ""
    reason: str = ""
    looks: tuple[tuple[str, tuple[str, ...], int | None], ...] = ()
    drives: tuple[tuple[str, str, bool, int | None], ...] = ()

    @classmethod
    def from_json(cls, episode_id: str, order: int, ts: float, doc: Mapping[str, Any]
                  ) -> EpisodeTrace:
        """Parse a journaled trace dict tolerantly (unknown shapes give empty lists)."""
        looks: list[tuple[str, tuple[str, ...], int | None]] = []
        drives: list[tuple[str, str, bool, int | None]] = []
        for item in doc.get("looks", []) if isinstance(doc.get("looks"), list) else []:
            if (isinstance(item, list) and len(item) >= 2 and isinstance(item[0], str)
                    and isinstance(item[1], list)):
                tid = item[2] if len(item) > 2 and _int(item[2]) else None
                looks.append((item[0], tuple(slugify(c) for c in item[1] if isinstance(c, str)),
                              tid))
        for item in doc.get("drives", []) if isinstance(doc.get("drives"), list) else []:
            if (isinstance(item, list) and len(item) >= 3 and isinstance(item[0], str)
                    and isinstance(item[1], str)):
                tid = item[3] if len(item) > 3 and _int(item[3]) else None
                drives.append((item[0], item[1], bool(item[2]), tid))
        goal = doc.get("goal")
        return cls(
            episode_id, int(order), float(ts), str(doc.get("task", "") or ""),
            slugify(goal) if isinstance(goal, str) and slugify(goal) else None,
            bool(doc.get("success", False)), str(doc.get("found_at", "") or ""),
            str(doc.get("reason", "") or ""), tuple(looks), tuple(drives),
        )

    @property
    def transition_ids(self) -> tuple[int, ...]:
        """Experience-memory transition ids of the trace, in order."""
        ids = [t for *_, t in self.looks] + [t for *_, t in self.drives]
        return tuple(dict.fromkeys(i for i in ids if i is not None))

    def vocabulary(self) -> set[str]:
        """Waypoints and colours the trace mentions (for the grounding check)."""
        out: set[str] = set()
        for wp, cs, _ in self.looks:
            out.add(wp.lower())
            out.update(cs)
        for a, b, _, _ in self.drives:
            out.update((a.lower(), b.lower()))
        if self.goal:
            out.add(self.goal)
        if self.found_at:
            out.add(self.found_at.lower())
        return out

    def text(self, max_items: int = 24) -> str:
        """A compact plain-text account (what ``get_source_trace`` shows)."""
        head = f"episode {self.episode_id}: {self.task or 'task'}"
        if self.goal:
            head += f" (goal {self.goal})"
        head += ": " + ("found at " + self.found_at if self.success and self.found_at
                        else "success" if self.success else
                        "FAILED" + (f" ({self.reason})" if self.reason else ""))
        items: list[str] = []
        for a, b, blocked, _ in self.drives[:max_items]:
            items.append(f"drove {a}->{b} {'BLOCKED' if blocked else 'ok'}")
        for wp, cs, _ in self.looks[:max_items]:
            items.append(f"looked at {wp}: {', '.join(cs) if cs else 'nothing'}")
        more = len(self.drives) + len(self.looks) - len(items)
        tail = f"; +{more} more" if more > 0 else ""
        return head + ("; " + "; ".join(items) if items else "") + tail


class TraceIndex:
    """Episode traces from the store's fast-write journal, read incrementally.

    ``refresh()`` reads journal records not seen yet; the first record of an episode defines
    its trace and its ``order``. Thread-safe.
    """

    def __init__(self, store: PlanMemoryStore) -> None:
        self.store = store
        self._traces: dict[str, EpisodeTrace] = {}
        self._last_id = 0
        self._order: list[str] = []
        self._lock = threading.RLock()

    def refresh(self, chunk: int = 2000) -> None:
        """Read new journal records."""
        with self._lock:
            self._refresh(chunk)

    def _refresh(self, chunk: int) -> None:
        while True:
            recs = self.store.journal(self._last_id, chunk)
            for r in recs:
                self._last_id = max(self._last_id, r.record_id)
                if r.episode_id not in self._traces:
                    trace = r.trace if isinstance(r.trace, Mapping) else {}
                    self._traces[r.episode_id] = EpisodeTrace.from_json(
                        r.episode_id, r.record_id, r.ts, trace)
                    self._order.append(r.episode_id)
            if len(recs) < chunk:
                return

    @property
    def last_id(self) -> int:
        """The newest journal record id read."""
        return self._last_id

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._traces

    def __len__(self) -> int:
        return len(self._traces)

    def get(self, episode_id: str) -> EpisodeTrace | None:
        """The trace of ``episode_id`` or ``None``."""
        return self._traces.get(episode_id)

    def traces(self) -> list[EpisodeTrace]:
        """Every trace, oldest first."""
        with self._lock:
            return [self._traces[e] for e in self._order]

    def episodes_since(self, record_id: int) -> int:
        """Distinct episodes whose first journal record is newer than ``record_id``."""
        with self._lock:
            return sum(1 for e in self._order if self._traces[e].order > record_id)

    def recent(self, n: int) -> list[EpisodeTrace]:
        """The ``n`` newest traces, newest first."""
        with self._lock:
            return [self._traces[e] for e in reversed(self._order[-n:])] if n > 0 else []

    def vocabulary(self) -> set[str]:
        """Every waypoint and colour any trace mentions."""
        out: set[str] = set()
        for t in self.traces():
            out |= t.vocabulary()
        return out

    def without(self, episodes: Iterable[str]) -> TraceIndex:
        """A frozen snapshot of this index with ``episodes`` masked out (the held-out journal
        slice the consolidator must not read). ``refresh`` on the snapshot reads nothing."""
        drop = set(episodes)
        with self._lock:
            snap = TraceIndex(self.store)
            snap._traces = {e: t for e, t in self._traces.items() if e not in drop}
            snap._order = [e for e in self._order if e not in drop]
            snap._last_id = self._last_id
        snap._refresh = lambda chunk: None  # type: ignore[method-assign]
        return snap


# ============================================================================================
# 2. configuration and trigger


@dataclass(frozen=True)
class ConsolidationConfig:
    """Consolidation parameters (validated by :meth:`validate`).

    Trigger:
        every_k_episodes: episodes since the last run before a docked robot consolidates.
        require_dock: only consolidate on the dock (else every k episodes, e.g. simulation).
    Region:
        max_region_entries: most entries in R.
        region_budget_tokens: most tokens of R (its entries as memory lines); keep it below
            the LLM context minus ``call_max_tokens`` and ~500 tokens of instructions.
        retrieve_k: entries taken per recent task text as "recently retrieved".
        recent_tasks: recent episodes whose task texts are the retrieval queries.
    Loop budgets:
        max_steps: tool calls per run (each call is one step).
        max_tokens: tokens the LLM may generate in one run (all calls together).
        call_max_tokens: tokens one LLM tool call may generate.
        max_seconds: wall-clock bound of one run.
        llm_timeout_s: wall-clock bound of one LLM call (also how fast a cancel is honoured).
        max_fan_in: most source episodes cited by one synthesized entry.
        max_synthesized: most entries in S.
    Acceptance:
        planner_budget_tokens: memory budget of the planner the rehearsal reads with.
        rho: fraction of S masked per counterfactual sample, in (0, 1].
        n_masks: counterfactual samples.
        min_cf: least counterfactual utility to commit.
        tolerance: U(B') may be this much below U(B) and still count as "not worse".
        max_growth: tokens after / tokens before may not exceed this.
        reject_harmful: reject when removing one entry of S would raise the utility.
        dry_run: evaluate but never write.
        seed: seed of the masks.
        miss_threshold: empty looks at a block's last waypoint (after its last sighting)
            that make its location unknown (rule policy and evaluation truth alike).
        holdout_episodes: the newest k journaled episodes are held out: the consolidator
            cannot read them, their fast writes stay outside the region, and the rewrite is
            accepted only if it predicts what they observed at least as well as the old
            region did (:func:`heldout_tasks`). 0: in-sample acceptance only.
        require_heldout: with ``holdout_episodes`` > 0, reject a rewrite when no held-out
            task can be judged (no evidence that it generalises).
        refit_after_heldout: once a rewrite passed on the held-out episodes and was
            committed, run the same policy again with nothing held out (in-sample acceptance)
            so the newest episodes are folded in too -- the held-out test validated the
            procedure; the refit uses all the evidence (cross-validate, then refit). Meant
            for deterministic policies; an LLM refit is a new, un-held-out sample.
    """

    every_k_episodes: int = 10
    require_dock: bool = True
    max_region_entries: int = 32
    region_budget_tokens: int = 900
    retrieve_k: int = 6
    recent_tasks: int = 10
    max_steps: int = 64
    max_tokens: int = 2048
    call_max_tokens: int = 128
    max_seconds: float = 900.0
    llm_timeout_s: float = 30.0
    max_fan_in: int = 32
    max_synthesized: int = 32
    planner_budget_tokens: int = 400
    rho: float = 0.5
    n_masks: int = 8
    min_cf: float = 0.0
    tolerance: float = 0.0
    max_growth: float = 1.0
    reject_harmful: bool = True
    dry_run: bool = False
    seed: int = 0
    miss_threshold: int = 2
    holdout_episodes: int = 3
    require_heldout: bool = True
    refit_after_heldout: bool = True

    def validate(self) -> ConsolidationConfig:
        """Raise ``ValueError`` with an actionable message on a bad value. Returns ``self``."""
        ints = {
            "every_k_episodes": (1, 1_000_000), "max_region_entries": (1, 512),
            "region_budget_tokens": (32, 1_000_000), "retrieve_k": (0, 512),
            "recent_tasks": (0, 10_000), "max_steps": (1, 10_000),
            "max_tokens": (1, 10_000_000), "call_max_tokens": (16, 100_000),
            "max_fan_in": (1, 1024), "max_synthesized": (1, 512),
            "planner_budget_tokens": (16, 1_000_000), "n_masks": (1, 1000),
            "seed": (0, 2**31 - 1), "miss_threshold": (1, 1000),
            "holdout_episodes": (0, 1000),
        }
        for k, (lo, hi) in ints.items():
            v = getattr(self, k)
            if not _int(v) or not lo <= v <= hi:
                raise ValueError(f"{k} must be an int in [{lo}, {hi}] (got {v!r})")
        for k in ("max_seconds", "llm_timeout_s"):
            v = getattr(self, k)
            if not _num(v) or v <= 0:
                raise ValueError(f"{k} must be a finite number of seconds > 0 (got {v!r})")
        if not _num(self.rho) or not 0.0 < self.rho <= 1.0:
            raise ValueError(f"rho must be in (0, 1] (got {self.rho!r})")
        if not _num(self.min_cf) or not -1.0 <= self.min_cf <= 1.0:
            raise ValueError(f"min_cf must be in [-1, 1] (got {self.min_cf!r})")
        if not _num(self.tolerance) or not 0.0 <= self.tolerance <= 1.0:
            raise ValueError(f"tolerance must be in [0, 1] (got {self.tolerance!r})")
        if not _num(self.max_growth) or self.max_growth < 0.1:
            raise ValueError(f"max_growth must be a number >= 0.1 (got {self.max_growth!r})")
        for k in ("require_dock", "reject_harmful", "dry_run", "require_heldout",
                  "refit_after_heldout"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"{k} must be a bool")
        return self


def trigger_decision(
    config: ConsolidationConfig,
    *,
    docked: bool,
    episodes_since: int,
    requested: bool = False,
) -> tuple[bool, str]:
    """Whether to consolidate now, and why (``"request"``, ``"docked"``, ``"every_k"``) or
    why not.

    On request: always. Otherwise at least ``every_k_episodes`` new episodes are needed, and
    with ``require_dock`` the robot must be docked (charging).
    """
    if requested:
        return True, "request"
    k = config.every_k_episodes
    if episodes_since < k:
        return False, f"{episodes_since} of {k} episodes since the last consolidation"
    if config.require_dock:
        if not docked:
            return False, f"{episodes_since} episodes waiting; not docked"
        return True, "docked"
    return True, "docked" if docked else "every_k"


# ============================================================================================
# 3. region


@dataclass(frozen=True)
class Region:
    """The working region R: the entries to rewrite, and the evidence they cite.

    ``episodes``: journaled source episodes of R, newest first (what S may cite).
    ``anchors`` / ``recent`` / ``retrieved``: names by why they were chosen.
    ``left_out``: qualifying entries that did not fit the bounds (taken by a later run).
    """

    entries: tuple[PlanEntry, ...]
    episodes: tuple[str, ...]
    anchors: tuple[str, ...] = ()
    recent: tuple[str, ...] = ()
    retrieved: tuple[str, ...] = ()
    tokens: int = 0
    left_out: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        """Entry names in memory order."""
        return tuple(e.name for e in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def select_region(
    entries: Sequence[PlanEntry],
    index: TraceIndex,
    config: ConsolidationConfig,
    *,
    queries: Sequence[str] = (),
    count_tokens: Callable[[str], int] = approx_tokens,
    exclude: Iterable[str] = (),
) -> Region:
    """R = anchors (earlier consolidated entries) + recent fast writes (newest first) +
    entries retrieved for ``queries`` (top ``retrieve_k`` each), bounded by
    ``max_region_entries`` and ``region_budget_tokens``; only entries citing a journaled
    episode qualify, and none citing an ``exclude`` (held-out) episode. R keeps memory
    order."""
    held = set(exclude)

    def traceable(e: PlanEntry) -> bool:
        eps = e.provenance.episodes
        return any(ep in index for ep in eps) and not any(ep in held for ep in eps)

    pool = [e for e in entries if traceable(e)]
    anchors = [e for e in pool if e.source == SOURCE]
    recent = sorted((e for e in pool if e.source == _WRITER_SOURCE),
                    key=lambda e: -(e.entry_id or 0))
    retrieved: list[PlanEntry] = []
    for q in queries:
        if config.retrieve_k and q.strip():
            retrieved += [e for e, _ in rank_entries(pool, q)[: config.retrieve_k]]
    chosen: dict[str, str] = {}
    used = 0
    for why, group in (("anchor", anchors), ("recent", recent), ("retrieved", retrieved)):
        for e in group:
            if e.name in chosen:
                continue
            cost = count_tokens(format_entry(e)) + 1
            if len(chosen) >= config.max_region_entries or used + cost > \
                    config.region_budget_tokens:
                continue
            chosen[e.name] = why
            used += cost
    left = len({e.name for e in pool} - set(chosen))
    picked = tuple(e for e in entries if e.name in chosen)
    eps: dict[str, int] = {}
    for e in picked:
        for ep in e.provenance.episodes:
            t = index.get(ep)
            if t is not None:
                eps[ep] = t.order
    episodes = tuple(sorted(eps, key=lambda x: -eps[x]))
    return Region(
        picked, episodes,
        tuple(n for n, w in chosen.items() if w == "anchor"),
        tuple(n for n, w in chosen.items() if w == "recent"),
        tuple(n for n, w in chosen.items() if w == "retrieved"),
        used, left,
    )


# ============================================================================================
# 4. tools


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``tool`` (one of :data:`TOOLS`) and its ``args``.

    Args per tool: ``search_memory {query}``, ``check_memory {name}``,
    ``get_source_trace {episode}``, ``synthesize {kind, name, body, sources}`` (optional
    ``replaces``: region names merged into it, and ``meta``: a small dict, for the rule
    policy; the LLM schema offers neither), ``terminate {note?}``.
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def summary(self, width: int = 80) -> str:
        """One line for logs and feedback."""
        a = {k: v for k, v in self.args.items() if k not in ("meta", "replaces")}
        text = f"{self.tool}({json.dumps(a, sort_keys=True)})"
        return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned: ``text`` (shown to the LLM) and ``data`` (for the rule
    policy); ``error`` is set when the call was invalid (the run then aborts)."""

    ok: bool
    text: str
    data: Any = None
    error: str | None = None


@dataclass(frozen=True)
class ToolRecord:
    """One step of a run, for the report."""

    step: int
    tool: str
    call: str
    ok: bool
    error: str | None
    tokens: int


def _str_schema(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "string", "minLength": lo, "maxLength": hi}


def _call_schema(tool: str, args: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "const": tool},
            "args": {"type": "object", "properties": dict(args), "required": list(required),
                     "additionalProperties": False},
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    }


def tool_schema(
    region_names: Sequence[str],
    episodes: Sequence[str],
    *,
    name_max: int = 40,
    body_max: int = 160,
    query_max: int = 40,
    max_sources: int = 8,
) -> dict[str, Any]:
    """The one JSON schema of a consolidator tool call: ``{"tool": <name>, "args": {...}}``.

    It is the union (``anyOf``) of one object per tool whose ``tool`` is that name (together
    the enum :data:`TOOLS`) and whose ``args`` are that tool's arguments; entry names are
    restricted to the region's, episode ids to the region's sources, and ``synthesize``
    must cite 1..``max_sources`` of them. The llama.cpp grammar built from it cannot emit
    anything else.

    Raises ``ValueError`` for an empty region or no episodes.
    """
    names = list(dict.fromkeys(region_names))
    eps = list(dict.fromkeys(episodes))
    if not names or not eps:
        raise ValueError("tool_schema needs a non-empty region and at least one source episode")
    ep_enum = {"type": "string", "enum": eps}
    return {"anyOf": [
        _call_schema("search_memory", {"query": _str_schema(1, query_max)}, ["query"]),
        _call_schema("check_memory", {"name": {"type": "string", "enum": names}}, ["name"]),
        _call_schema("get_source_trace", {"episode": ep_enum}, ["episode"]),
        _call_schema("synthesize", {
            "kind": {"type": "string", "enum": list(KINDS)},
            "name": _str_schema(1, name_max),
            "body": _str_schema(8, body_max),
            "sources": {"type": "array", "items": ep_enum, "minItems": 1,
                        "maxItems": max(1, max_sources)},
        }, ["kind", "name", "body", "sources"]),
        _call_schema("terminate", {"note": _str_schema(0, 60)}, []),
    ]}


def parse_tool_call(data: Any) -> ToolCall:
    """A :class:`ToolCall` from a decoded JSON reply; ``ValueError`` if it is not one."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a tool call must be an object, got {type(data).__name__}")
    tool = data.get("tool")
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; tools: {', '.join(TOOLS)}")
    args = data.get("args", {})
    if not isinstance(args, Mapping):
        raise ValueError(f"{tool}: args must be an object")
    return ToolCall(str(tool), dict(args))


# the placeholders small models copy from instructions instead of writing content
_PLACEHOLDERS = frozenset({"name", "short_name", "body", "one line", "one_line", "note",
                           "string", "kind", "entry", "text", "the note itself", "tool"})
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:[_\-.][a-z0-9]+)*")


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


class Workspace:
    """Executes tool calls for one run over read-only evidence; collects S.

    The base memory and the traces are never modified; ``synthesize`` only adds to the
    pending set S. :meth:`rewrite` turns S into the edit set of B <- (B \\ R) U S.
    """

    def __init__(
        self,
        base: Sequence[PlanEntry],
        region: Region,
        index: TraceIndex,
        config: ConsolidationConfig,
        *,
        search_k: int = 5,
    ) -> None:
        self.base = list(base)
        self.region = region
        self.index = index
        self.config = config
        self.search_k = search_k
        self._by_name = {e.name: e for e in self.base}
        self._region_names = set(region.names)
        self._region_eps = set(region.episodes)
        self._vocab = index.vocabulary()
        self.synthesized: dict[str, PlanEntry] = {}
        self.replaces: dict[str, tuple[str, ...]] = {}
        self.entries_read: set[str] = set()
        self.traces_read: set[str] = set()
        self.renamed: dict[str, str] = {}

    # -- tools
    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; an invalid call gives ``ok=False`` with the reason."""
        fn = getattr(self, f"_t_{call.tool}", None)
        if call.tool not in TOOLS or fn is None:
            return ToolResult(False, "", error=f"unknown tool {call.tool!r}")
        try:
            return fn(call.args)
        except (ValueError, TypeError, KeyError) as exc:
            return ToolResult(False, "", error=f"{call.tool}: {exc}")

    def _t_search_memory(self, args: Mapping[str, Any]) -> ToolResult:
        q = args.get("query")
        if not isinstance(q, str) or not q.strip() or len(q) > 200:
            raise ValueError("query must be a non-empty string <= 200 chars")
        hits = [e for e, s in rank_entries(self.base, q) if s > 0.02][: self.search_k]
        lines = []
        for e in hits:
            where = "region" if e.name in self._region_names else "outside region, read-only"
            lines.append(f"{format_entry(e)} [{where}]")
            self.entries_read.add(e.name)
        return ToolResult(True, "\n".join(lines) or "no matching entry", [e.name for e in hits])

    def _t_check_memory(self, args: Mapping[str, Any]) -> ToolResult:
        name = args.get("name")
        if name not in self._region_names:
            raise ValueError(f"{name!r} is not an entry of the region")
        e = self._by_name[name]
        self.entries_read.add(e.name)
        srcs = {ep: self.index.get(ep).order for ep in e.provenance.episodes  # type: ignore
                if ep in self.index}
        text = f"{format_entry(e)} (sources: {', '.join(srcs) or 'none journaled'})"
        return ToolResult(True, text, {"entry": e, "sources": srcs})

    def _t_get_source_trace(self, args: Mapping[str, Any]) -> ToolResult:
        ep = args.get("episode")
        if ep not in self._region_eps:
            raise ValueError(f"{ep!r} is not a source episode of the region")
        t = self.index.get(ep)
        if t is None:  # pragma: no cover - region episodes are journaled by construction
            raise ValueError(f"no journaled trace for {ep!r}")
        self.traces_read.add(ep)
        return ToolResult(True, t.text(), t)

    def _t_synthesize(self, args: Mapping[str, Any]) -> ToolResult:
        cfg = self.config
        kind = args.get("kind")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        raw_name = args.get("name")
        if not isinstance(raw_name, str):
            raise ValueError("name must be a string")
        name = raw_name if raw_name in self._region_names else slugify(raw_name, 48)
        body = args.get("body")
        if not isinstance(body, str):
            raise ValueError("body must be a string")
        body = " ".join(body.split())
        if not name or name in _PLACEHOLDERS or name in KINDS:
            raise ValueError(f"name {raw_name!r} is empty or a placeholder")
        if (len(body) < 8 or body.lower().strip(". ") in _PLACEHOLDERS
                or len(re.findall(r"[A-Za-z]+", body)) < 3):
            raise ValueError(f"body {body!r} is empty, a placeholder or fewer than three words")
        if len(body) > MAX_BODY:
            raise ValueError(f"body longer than {MAX_BODY} chars")
        sources = args.get("sources")
        if not isinstance(sources, (list, tuple)) or not sources:
            raise ValueError("provenance required: cite at least one source episode")
        sources = list(dict.fromkeys(sources))
        if len(sources) > cfg.max_fan_in:
            raise ValueError(f"more than max_fan_in={cfg.max_fan_in} sources")
        traces = []
        for ep in sources:
            if ep not in self._region_eps or ep not in self.index:
                raise ValueError(f"provenance: {ep!r} is not a journaled source episode of the "
                                 "region")
            traces.append(self.index.get(ep))
        cited: set[str] = set()
        for t in traces:
            cited |= t.vocabulary()  # type: ignore[union-attr]
        verbatim = any(r.kind == kind and r.body == body
                       and set(sources) <= set(r.provenance.episodes)
                       for r in self.region.entries)  # keeping an entry is no new claim
        ungrounded = sorted({w for w in _tokens(body) if w in self._vocab} - cited)
        if ungrounded and not verbatim:
            raise ValueError(f"ungrounded: {', '.join(ungrounded)} not in the cited traces "
                             f"{', '.join(sources)}")
        if name in self.synthesized or name in self.renamed:
            raise ValueError(f"{name!r} was already synthesized in this run")
        if len(self.synthesized) >= cfg.max_synthesized:
            raise ValueError(f"more than max_synthesized={cfg.max_synthesized} entries")
        final = name
        if final in self._by_name and final not in self._region_names:
            k = 2
            while final in self._by_name or final in self.synthesized:
                final = f"{name[: MAX_NAME - 4]}-{k}"
                k += 1
            self.renamed[name] = final
        tids: list[int] = []
        for t in traces:
            tids.extend(t.transition_ids)  # type: ignore[union-attr]
        meta = args.get("meta")
        meta = dict(meta) if isinstance(meta, Mapping) else {"fact": "synthesized"}
        entry = PlanEntry(kind, final, body, Provenance(tuple(sources),
                                                        tuple(dict.fromkeys(tids))[:512]),
                          meta, SOURCE).validate()
        reps = args.get("replaces") or ()
        self.replaces[final] = tuple(r for r in reps if r in self._region_names)
        self.synthesized[final] = entry
        note = f" (renamed to {final}: {name} exists outside the region)" if final != name else ""
        return ToolResult(True, f"synthesized {final}{note}", entry)

    def _t_terminate(self, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult(True, f"terminated with {len(self.synthesized)} synthesized entries")

    # -- the rewrite
    def rewrite(self, why: str) -> tuple[list[Edit], list[PlanEntry]]:
        """The edit set of B <- (B \\ R) U S on the base and the resulting entries.

        A region entry re-synthesized with the same name, kind and body, citing only its
        own sources, is kept as it is (no edit). Returns ``([], base)`` when nothing
        changes.
        """
        edits: list[Edit] = []
        merged_into: dict[str, str] = {}
        for s, reps in self.replaces.items():
            for r in reps:
                merged_into.setdefault(r, s)
        for r in self.region.entries:
            s = self.synthesized.get(r.name)
            if s is None:
                into = merged_into.get(r.name)
                reason = (f"{why}: merged into {into}" if into
                          else f"{why}: not re-synthesized (superseded or redundant)")
                edits.append(Edit.remove(r.name, reason[:500]))
            elif (s.kind == r.kind and s.body == r.body
                  and set(s.provenance.episodes) <= set(r.provenance.episodes)):
                continue
            else:
                edits.append(Edit("edit", r.name, s.kind, s.body, s.provenance, dict(s.meta),
                                  f"{why}: rewritten"[:500]))
        for name, s in self.synthesized.items():
            if name not in self._region_names:
                edits.append(Edit.add(s.kind, name, s.body, s.provenance, dict(s.meta),
                                      f"{why}: synthesized from {len(s.provenance.episodes)} "
                                      "episode(s)"))
        if not edits:
            return [], list(self.base)
        # provisional ids above every stored one, as the store will give them: retrieval
        # breaks ties newest first, so the rehearsal must see the rewrite as the newest
        top = max((e.entry_id or 0 for e in self.base), default=0)
        new = apply_edits(self.base, edits, source=SOURCE)
        out = []
        for e in new:
            if e.entry_id is None:
                top += 1
                e = replace(e, entry_id=top)
            out.append(e)
        return edits, out


# ============================================================================================
# 5. policies


@dataclass(frozen=True)
class PolicyStep:
    """A policy's next move: a call, or an error (the run aborts). Token counts are the
    LLM's (0 for the rule policy)."""

    call: ToolCall | None
    error: str | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    raw: str = ""


class Policy(Protocol):
    """Chooses tool calls. ``start`` is called once per run, then ``next_call`` per step with
    the workspace and the history ``[(call, result), ...]`` so far."""

    name: str

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Reset for a new run over ``region``."""
        ...

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """The next call (``step`` counts from 1)."""
        ...


# -- rule policy


class RulePolicy:
    """The deterministic consolidator, driving the same tools as the LLM.

    Plan: ``check_memory`` every region entry; ``get_source_trace`` every episode cited by a
    fast-write or foreign entry (consolidated anchors carry their state in ``meta``); then
    ``synthesize``, by latest evidence (journal order):

    - ``block_<colour>`` per colour: where it was last seen (dropped after
      ``miss_threshold`` empty looks there since), citing every sighting there;
    - ``empty_waypoints``: waypoints whose latest look saw nothing;
    - ``blocked_<a>_<b>`` per corridor whose latest drive was blocked, citing the blocked
      attempts (a corridor driven through since is re-opened: its lessons are dropped);
    - ``route_<start>_<waypoint>``: the latest loop-free successful route to each waypoint
      holding a block, if it uses no blocked corridor;
    - ``failed_<colour>``: failed searches for a colour with no known location;
    - any other entry is kept verbatim (same name, body, kind).

    Entries of the :class:`~glove_ros.core.plan.updater.RuleUpdater` (``block_*``, ``blocked_*``,
    ``failed_*``, ``route_*``) count through their traces and are replaced by the
    consolidated entry of the same name, whose ``meta`` keeps the updater's keys
    (``colour``, ``waypoints``, ``edge``, ``path``, ``goal``). Then ``terminate``.
    ``step_delay_s`` sleeps before each call (demos, tests).
    """

    name = "rule"

    def __init__(self, miss_threshold: int | None = None, step_delay_s: float = 0.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if miss_threshold is not None and (not _int(miss_threshold) or miss_threshold < 1):
            raise ValueError("miss_threshold must be an int >= 1 (None: the config's)")
        if not _num(step_delay_s) or step_delay_s < 0:
            raise ValueError("step_delay_s must be >= 0")
        self._miss_override = miss_threshold
        self.step_delay_s = float(step_delay_s)
        self._sleep = sleep
        self._queue: list[ToolCall] = []
        self._phase = "read"
        self._traces_queued = False
        self._cfg = ConsolidationConfig()

    @property
    def miss_threshold(self) -> int:
        """Empty looks at a block's waypoint (after its last sighting) that drop the fact."""
        return self._miss_override or self._cfg.miss_threshold

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Queue the reads."""
        self._cfg = config
        self._phase = "read"
        self._queue = [ToolCall("check_memory", {"name": n}) for n in region.names]
        self._traces_queued = False

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """Reads first, then the synthesized set, then terminate."""
        if self.step_delay_s:
            self._sleep(self.step_delay_s)
        if not self._queue and self._phase == "read" and not self._traces_queued:
            self._traces_queued = True
            need: dict[str, None] = {}
            for call, res in history:
                if call.tool == "check_memory" and res.ok:
                    e: PlanEntry = res.data["entry"]
                    if not _is_anchor(e):
                        for ep in e.provenance.episodes:
                            if ep in res.data["sources"]:
                                need[ep] = None
            self._queue = [ToolCall("get_source_trace", {"episode": ep}) for ep in need]
        if not self._queue and self._phase == "read":
            self._phase = "write"
            self._queue = self._plan(history) + [ToolCall("terminate", {"note": "rule"})]
        if not self._queue:
            return PolicyStep(None, "rule policy has nothing left to do")
        return PolicyStep(self._queue.pop(0))

    # -- the merge
    def _plan(self, history: Sequence[tuple[ToolCall, ToolResult]]) -> list[ToolCall]:
        entries: list[tuple[PlanEntry, dict[str, int]]] = []
        traces: dict[str, EpisodeTrace] = {}
        for call, res in history:
            if not res.ok:
                continue
            if call.tool == "check_memory":
                entries.append((res.data["entry"], dict(res.data["sources"])))
            elif call.tool == "get_source_trace":
                traces[res.data.episode_id] = res.data
        # evidence: {episode: order}, merged per key
        sight: dict[str, dict[str, dict[str, int]]] = {}  # colour -> waypoint -> eps
        empty: dict[str, tuple[int, str]] = {}  # waypoint -> latest (order, episode)
        drives: dict[tuple[str, str], tuple[int, bool, dict[str, int]]] = {}
        routes: dict[str, tuple[int, list[str], str]] = {}  # end -> (order, path, episode)
        fails: dict[str, dict[str, int]] = {}  # goal -> eps
        keep: list[tuple[PlanEntry, dict[str, int]]] = []

        def see(colour: str, wp: str, eps: Mapping[str, int]) -> None:
            sight.setdefault(colour, {}).setdefault(wp, {}).update(eps)

        def empty_look(wp: str, order: int, ep: str) -> None:
            if ep and (wp not in empty or order > empty[wp][0]):
                empty[wp] = (order, ep)

        def drive(a: str, b: str, blocked: bool, eps: Mapping[str, int]) -> None:
            if not eps:
                return
            k = (a, b) if a <= b else (b, a)
            order = max(eps.values())
            old = drives.get(k)
            if old is None or (order > old[0] and blocked != old[1]):
                drives[k] = (order, blocked, dict(eps))
            elif blocked == old[1]:
                drives[k] = (max(order, old[0]), blocked, {**old[2], **eps})

        def route(path: list[str], order: int, ep: str) -> None:
            old = routes.get(path[-1])
            if old is None or order > old[0]:
                routes[path[-1]] = (order, path, ep)

        for t in sorted(traces.values(), key=lambda t: t.order):
            one = {t.episode_id: t.order}
            for wp, cs, _ in t.looks:
                for c in cs:
                    see(c, wp, one)
                if not cs:
                    empty_look(wp, t.order, t.episode_id)
            for a, b, blocked, _ in t.drives:
                drive(a, b, blocked, one)
            if t.success and t.drives:
                p = _simple_path([Traversal(a, b, bl) for a, b, bl, _ in t.drives])
                if p is not None and len(p) >= 3:
                    route(p, t.order, t.episode_id)
            if not t.success and t.goal:
                fails.setdefault(t.goal, {}).update(one)
        for e, srcs in entries:
            m = dict(e.meta)
            eps = {ep: o for ep, o in srcs.items() if ep in e.provenance.episodes}
            fact = m.get("fact")
            if _is_anchor(e):
                if fact == "block" and m.get("colour") and m.get("waypoints"):
                    see(str(m["colour"]), str(m["waypoints"][0]), eps)
                elif fact == "empty" and isinstance(m.get("waypoints"), Mapping):
                    for wp, (o, ep) in m["waypoints"].items():
                        if ep in eps:
                            empty_look(str(wp), int(o), str(ep))
                elif fact == "blocked" and isinstance(m.get("edge"), list):
                    drive(str(m["edge"][0]), str(m["edge"][1]), True, eps)
                elif fact == "route" and isinstance(m.get("path"), list) and eps:
                    ep = max(eps, key=lambda x: eps[x])
                    route([str(w) for w in m["path"]], eps[ep], ep)
                elif fact == "failed" and m.get("goal"):
                    fails.setdefault(str(m["goal"]), {}).update(eps)
                else:
                    keep.append((e, srcs))
            elif e.source == _WRITER_SOURCE and fact in (
                    "seen", "empty", "closed", "path", "notfound"):
                continue  # their traces were read: the evidence is there
            elif e.name.split("-")[0].startswith(("block_", "blocked_", "failed_", "route_")) \
                    and any(k in m for k in ("colour", "edge", "goal", "path")):
                continue  # a RuleUpdater entry: its traces were read
            else:
                keep.append((e, srcs))

        fan = self._cfg.max_fan_in
        out: list[ToolCall] = []
        region_names = {e.name for e, _ in entries}

        def newest(eps: Mapping[str, int]) -> list[str]:
            return sorted(eps, key=lambda x: (-eps[x], x))[:fan]

        topics: dict[tuple[str, ...], list[str]] = {}
        for e, _ in entries:
            topics.setdefault(_topic(e), []).append(e.name)

        def synth(kind: str, name: str, body: str, sources: Sequence[str],
                  meta: dict[str, Any], topic: tuple[str, ...] = ()) -> None:
            srcs = [s for s in dict.fromkeys(sources) if s][:fan]
            if srcs:
                out.append(ToolCall("synthesize", {
                    "kind": kind, "name": name, "body": _clip_body(body), "sources": srcs,
                    "meta": meta, "replaces": [n for n in topics.get(topic, [])
                                               if n in region_names]}))

        located: dict[str, str] = {}
        for colour in sorted(sight):
            wps = sight[colour]
            wp, eps = max(wps.items(), key=lambda kv: (max(kv[1].values()), kv[0]))
            last = max(eps.values())
            if self._misses(traces, wp, last) >= self.miss_threshold:
                continue
            srcs = newest(eps)
            n = len(eps)
            synth("semantic", fact_name(colour),
                  f"The {colour} block is at {wp} (seen in {n} episode{'s' if n != 1 else ''}, "
                  f"last {srcs[0]}).", srcs,
                  {"fact": "block", "colour": colour, "waypoints": [wp], "misses": {},
                   "order": last}, ("colour", colour))
            located[colour] = wp
        last_sight = {wp: max(o for w in sight.values() for o in w.get(wp, {}).values())
                      for wp in {wp for w in sight.values() for wp in w}}
        empties = {wp: v for wp, v in empty.items()
                   if wp not in located.values() and last_sight.get(wp, -1) < v[0]}
        if empties:
            wps = sorted(empties, key=lambda w: (-empties[w][0], w))[:fan]
            synth("semantic", "empty_waypoints",
                  f"No block at {', '.join(wps)} (latest looks).",
                  [empties[w][1] for w in wps],
                  {"fact": "empty", "waypoints": {w: list(empties[w]) for w in wps}}, ("empty",))
        blocked = {k for k, v in drives.items() if v[1]}
        for a, b in sorted(blocked):
            order, _, eps = drives[(a, b)]
            srcs = newest(eps)
            synth("negative", blocked_name(a, b),
                  f"The corridor between {a} and {b} is blocked (last tried in {srcs[0]}); plan "
                  "around it.", srcs, {"fact": "blocked", "edge": [a, b], "order": order},
                  ("edge", a, b))
        for wp in sorted(set(located.values())):
            r = routes.get(wp)
            if r is None:
                continue
            order, path, ep = r
            edges = {(x, y) if x <= y else (y, x) for x, y in zip(path, path[1:], strict=False)}
            if edges & blocked:
                continue
            synth("procedure", route_name(path[0], wp),
                  f"Route {' -> '.join(path)} works ({ep}).", [ep],
                  {"fact": "route", "path": path, "order": order}, ("route",))
        for goal, eps in sorted(fails.items()):
            last_seen = max((o for w in sight.get(goal, {}).values() for o in w.values()),
                            default=-1)
            eps = {ep: o for ep, o in eps.items() if o > last_seen}
            if goal in located or not eps:
                continue
            srcs = newest(eps)
            n = len(eps)
            synth("negative", failure_name(goal),
                  f"Searches for the {goal} block failed {n} time{'s' if n != 1 else ''} "
                  f"(last {srcs[0]}); search unexplored waypoints.", srcs,
                  {"fact": "failed", "goal": goal, "order": eps[srcs[0]]}, ("failed", goal))
        taken = {c.args["name"] for c in out}
        for e, srcs in keep:
            if e.name not in taken:
                synth(e.kind, e.name, e.body, [ep for ep in e.provenance.episodes if ep in srcs],
                      dict(e.meta))
        return out

    @staticmethod
    def _misses(traces: Mapping[str, EpisodeTrace], wp: str, after: int) -> int:
        return sum(1 for t in traces.values() if t.order > after
                   for w, cs, _ in t.looks if w == wp and not cs)


def _topic(e: PlanEntry) -> tuple[str, ...]:
    """What a (fast-write, updater or consolidated) entry is about, for merge reasons."""
    m = e.meta
    fact = m.get("fact")
    edge = m.get("edge")
    if isinstance(edge, list) and len(edge) == 2:
        a, b = sorted(str(x) for x in edge)
        return ("edge", a, b)
    if fact in ("seen", "block") or (e.name.startswith("block_") and m.get("colour")):
        return ("colour", slugify(str(m.get("colour", ""))))
    if fact in ("notfound", "failed") or (e.name.startswith("failed_") and m.get("goal")):
        return ("failed", slugify(str(m.get("colour") or m.get("goal") or "")))
    if fact == "empty":
        return ("empty",)
    if fact in ("path", "route") or "path" in m:
        return ("route",)
    return ("other", e.name)


def _is_anchor(e: PlanEntry) -> bool:
    return e.source == SOURCE and isinstance(e.meta.get("fact"), str) and e.meta.get(
        "fact") != "synthesized"


# -- LLM policy

_SYSTEM = (
    "You consolidate the plan memory of a mobile robot that searches a maze of waypoints for "
    "coloured blocks. You rewrite a region of memory entries into fewer, better entries. "
    "Tools (reply with exactly one JSON tool call per turn):\n"
    "- search_memory {query}: find related entries.\n"
    "- check_memory {name}: read one region entry.\n"
    "- get_source_trace {episode}: read what really happened in an episode.\n"
    "- synthesize {kind, name, body, sources}: write one new entry; kind is semantic (a fact), "
    "procedure (how to) or negative (what to avoid); body is one sentence with waypoint "
    "names; sources are the episodes that support it.\n"
    "- terminate {}: finish. Then ALL region entries are replaced by what you synthesized; "
    "anything not synthesized is forgotten.\n"
    "Keep only the latest place of each block, merge duplicates, drop facts that later "
    "episodes contradict, keep blocked corridors that are still blocked."
)


class LlmPolicy:
    """The local LLM as the consolidator: one schema-constrained tool call per step.

    The prompt shows the region (name, kind, body, sources), what was synthesized so far
    and the last ``transcript`` tool results; it is trimmed (oldest results first) to fit
    ``n_ctx`` minus the call's token bound. Invalid JSON or a schema violation ends the run
    (the caller aborts cleanly).
    """

    name = "llm"

    def __init__(self, llm: Any, *, n_ctx: int = 2048, transcript: int = 4,
                 result_chars: int = 300) -> None:
        if not hasattr(llm, "complete_json"):
            raise ValueError("llm must implement complete_json (JsonLlm)")
        self.llm = llm
        self.n_ctx = int(n_ctx)
        self.transcript = int(transcript)
        self.result_chars = int(result_chars)
        self.schema: dict[str, Any] = {}
        self._cfg = ConsolidationConfig()
        try:
            params = inspect.signature(llm.complete_json).parameters
            self._timeout_kw = "timeout_s" in params or any(
                p.kind == p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):  # pragma: no cover - builtins
            self._timeout_kw = False

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Build the run's schema (region names and episodes as enums)."""
        self._cfg = config
        self._region = region
        self.schema = tool_schema(region.names, region.episodes,
                                  max_sources=min(8, config.max_fan_in))

    def messages(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                 step: int, max_steps: int) -> list[dict[str, str]]:
        """The chat messages of one step."""
        count = getattr(self.llm, "count_tokens", approx_tokens)
        eps = set(ws.region.episodes)
        region = "\n".join(
            f"{format_entry(e)} (sources: "
            f"{', '.join(ep for ep in e.provenance.episodes if ep in eps) or '-'})"
            for e in ws.region.entries)
        done = "\n".join(format_entry(e) for e in ws.synthesized.values()) or "(nothing yet)"
        shown = list(history)[-self.transcript:] if self.transcript else []
        while True:
            results = "\n".join(
                f"{c.summary(100)} -> {(r.text or r.error or '')[: self.result_chars]}"
                for c, r in shown) or "(none)"
            user = (f"Region to rewrite ({len(ws.region)} entries):\n{region}\n\n"
                    f"Episodes you may cite: {', '.join(ws.region.episodes)}\n\n"
                    f"Synthesized so far:\n{done}\n\nLast tool results:\n{results}\n\n"
                    f"Step {step} of {max_steps}. Reply with the next tool call as JSON.")
            msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]
            n = sum(int(count(m["content"])) + 8 for m in msgs)
            if n + self._cfg.call_max_tokens <= self.n_ctx or not shown:
                return msgs
            shown = shown[1:]

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """Ask the model for one call."""
        bound = min(self._cfg.call_max_tokens, tokens_left)
        if bound < 16:
            return PolicyStep(None, f"token budget exhausted ({tokens_left} left)")
        msgs = self.messages(ws, history, step, max_steps)
        count = getattr(self.llm, "count_tokens", approx_tokens)
        need = sum(int(count(m["content"])) + 8 for m in msgs) + bound
        if need > self.n_ctx:
            return PolicyStep(None, f"prompt needs {need} tokens with the reply, more than "
                              f"n_ctx={self.n_ctx}: lower region_budget_tokens")
        kw = {"timeout_s": self._cfg.llm_timeout_s} if self._timeout_kw else {}
        res: LlmResult = self.llm.complete_json(msgs, self.schema, bound, **kw)
        if not res.ok:
            return PolicyStep(None, f"invalid tool call: {res.error}", res.tokens,
                              res.prompt_tokens, res.raw_text)
        try:
            call = parse_tool_call(res.data)
        except ValueError as exc:
            return PolicyStep(None, f"invalid tool call: {exc}", res.tokens, res.prompt_tokens,
                              res.raw_text)
        return PolicyStep(call, None, res.tokens, res.prompt_tokens, res.raw_text)


# ============================================================================================
# 6. utility and acceptance

_NEGATION = frozenset({"no", "not", "never", "failed", "fail", "without", "absent", "missing",
                       "gone", "nothing", "none", "isn't", "wasn't"})
_FORMER = frozenset({"from", "was", "left", "earlier", "formerly", "previously", "former",
                     "old"})
_BLOCKED = frozenset({"blocked", "closed", "impassable", "obstructed", "unreachable"})
_OPEN = frozenset({"open", "opened", "reopened", "re-opened", "clear", "works", "worked",
                   "passable", "reaches", "reached"})


def _render(entries: Sequence[PlanEntry], query: str, budget: int,
            count_tokens: Callable[[str], int]) -> list[PlanEntry]:
    by_name = {e.name: e for e in entries}
    r = assemble_prompt(rank_entries(entries, query), budget, count_tokens=count_tokens)
    return [by_name[n] for n in r.included]


def rehearse_find(entries: Sequence[PlanEntry], colour: str, waypoints: Iterable[str], *,
                  budget_tokens: int = 400,
                  count_tokens: Callable[[str], int] = approx_tokens) -> str | None:
    """The first waypoint a planner reading ``entries`` would drive to for "find the
    <colour> block", or ``None`` when memory says nothing usable.

    Reads the entries the planner would see (ranked for the task text, under
    ``budget_tokens``) in order; the first non-negative entry whose body names the colour and
    a waypoint, without a negation word, decides: the first waypoint named after the colour
    (else the last one before it), skipping one right after "from" / "was" / "earlier"...
    ("moved from kitchen to office" -> office).
    """
    wps = {w.lower() for w in waypoints}
    colour = slugify(colour)
    for e in _render(entries, f"find the {colour} block", budget_tokens, count_tokens):
        if e.kind == "negative":
            continue
        toks = _tokens(e.body)
        if colour not in toks or _NEGATION & set(toks):
            continue
        ci = toks.index(colour)
        hits = [(i, t) for i, t in enumerate(toks) if t in wps
                and (i == 0 or toks[i - 1] not in _FORMER)]
        if not hits:
            continue
        after = [t for i, t in hits if i > ci]
        return after[0] if after else hits[-1][1]
    return None


def rehearse_corridor(entries: Sequence[PlanEntry], a: str, b: str, *,
                      budget_tokens: int = 400,
                      count_tokens: Callable[[str], int] = approx_tokens) -> bool:
    """Whether a planner reading ``entries`` believes the corridor a-b blocked.

    The first entry (in the planner's order for the question) whose body names both ends
    decides: blocked if it says blocked / closed (and not open / re-opened), open if it says
    open / worked or shows a route (``->``). No such entry: not blocked.
    """
    a, b = a.lower(), b.lower()
    for e in _render(entries, f"is the corridor between {a} and {b} blocked", budget_tokens,
                     count_tokens):
        toks = set(_tokens(e.body))
        if a not in toks or b not in toks:
            continue
        if toks & _BLOCKED and not toks & _OPEN:
            return True
        if toks & _OPEN or "->" in e.body:
            return False
    return False


#: ``scorer(entries, task) -> score in [0, 1] or None`` (None: cannot judge; left out).
EntryScorer = Callable[[Sequence[PlanEntry], GateTask], "float | None"]


def rehearsal_scorer(waypoints: Iterable[str], *, budget_tokens: int = 400,
                     count_tokens: Callable[[str], int] = approx_tokens) -> EntryScorer:
    """The default scorer: rehearse the decision of a ``find`` / ``corridor`` task and
    compare it with ``task.data["truth"]`` (1.0 right, 0.0 wrong)."""
    wps = tuple(waypoints)

    def score(entries: Sequence[PlanEntry], task: GateTask) -> float | None:
        d = task.data
        if d.get("type") == "find":
            got = rehearse_find(entries, d["colour"], wps, budget_tokens=budget_tokens,
                                count_tokens=count_tokens)
            return 1.0 if got == d["truth"] else 0.0
        if d.get("type") == "corridor":
            a, b = d["edge"]
            got = rehearse_corridor(entries, a, b, budget_tokens=budget_tokens,
                                    count_tokens=count_tokens)
            return 1.0 if got == bool(d["truth"]) else 0.0
        return None

    return score


def evaluation_tasks(index: TraceIndex, episodes: Iterable[str],
                     extra_colours: Iterable[str] = (),
                     extra_edges: Iterable[tuple[str, str]] = (), *,
                     miss_threshold: int = 2) -> list[GateTask]:
    """The evaluation set: ``find`` tasks for every colour the traces of ``episodes`` saw (and
    ``extra_colours``), ``corridor`` tasks for every corridor they found blocked (and
    ``extra_edges``). Truth = the latest evidence in *all* journaled traces: where the colour
    was last seen (unknown, and the task left out, after ``miss_threshold`` empty looks
    there since); whether the latest drive through the corridor was blocked."""
    colours: set[str] = {slugify(c) for c in extra_colours if slugify(c)}
    edges: set[tuple[str, str]] = {tuple(sorted(e)) for e in extra_edges}  # type: ignore[misc]
    for ep in episodes:
        t = index.get(ep)
        if t is None:
            continue
        for _, cs, _ in t.looks:
            colours.update(cs)
        for a, b, blocked, _ in t.drives:
            if blocked:
                edges.add(tuple(sorted((a, b))))  # type: ignore[arg-type]
        if t.goal:
            colours.add(t.goal)
    last_seen: dict[str, tuple[str, int]] = {}
    empties: dict[str, list[int]] = {}
    last_drive: dict[tuple[str, str], bool] = {}
    for t in index.traces():  # oldest first: later evidence overwrites
        for wp, cs, _ in t.looks:
            for c in cs:
                last_seen[c] = (wp, t.order)
            if not cs:
                empties.setdefault(wp, []).append(t.order)
        for a, b, blocked, _ in t.drives:
            last_drive[tuple(sorted((a, b)))] = bool(blocked)  # type: ignore[index]
    tasks = []
    for c in sorted(colours):
        if c in last_seen:
            wp, order = last_seen[c]
            if sum(1 for o in empties.get(wp, ()) if o > order) >= miss_threshold:
                continue
            tasks.append(GateTask(f"find:{c}", f"find the {c} block",
                                  {"type": "find", "colour": c, "truth": wp}))
    for a, b in sorted(edges):
        if (a, b) in last_drive:
            tasks.append(GateTask(f"corridor:{a}:{b}",
                                  f"is the corridor between {a} and {b} blocked",
                                  {"type": "corridor", "edge": [a, b],
                                   "truth": last_drive[(a, b)]}))
    return tasks


def heldout_tasks(index: TraceIndex, held: Iterable[str]) -> list[GateTask]:
    """The held-out evaluation set: tasks whose truth comes *only* from the held-out
    episodes ``held`` (traces the consolidator never read). ``find`` for every colour they
    saw (truth: where it was last seen in them), ``corridor`` for every corridor they drove
    through (truth: blocked or not on the latest drive). A memory that dropped a fact the
    held-out episodes needed, or kept one they contradict, scores lower on it."""
    traces = sorted((t for t in (index.get(e) for e in held) if t is not None),
                    key=lambda t: t.order)
    seen: dict[str, str] = {}
    drives: dict[tuple[str, str], bool] = {}
    for t in traces:
        for wp, cs, _ in t.looks:
            for c in cs:
                seen[c] = wp
        for a, b, blocked, _ in t.drives:
            drives[tuple(sorted((a, b)))] = bool(blocked)  # type: ignore[index]
    tasks = [GateTask(f"find:{c}", f"find the {c} block",
                      {"type": "find", "colour": c, "truth": wp})
             for c, wp in sorted(seen.items())]
    tasks += [GateTask(f"corridor:{a}:{b}", f"is the corridor between {a} and {b} blocked",
                       {"type": "corridor", "edge": [a, b], "truth": blocked})
              for (a, b), blocked in sorted(drives.items())]
    return tasks


def utility(entries: Sequence[PlanEntry], tasks: Sequence[GateTask], scorer: EntryScorer
            ) -> tuple[float, int]:
    """U(M): mean score of the judged tasks, and how many were judged (0 -> U = 0)."""
    scores = [s for s in (scorer(entries, t) for t in tasks) if s is not None]
    return (float(np.mean(scores)) if scores else 0.0), len(scores)


@dataclass(frozen=True)
class Evaluation:
    """The acceptance test of one rewrite (see the module docstring, point 7)."""

    tasks: int
    judged: int
    utility_old: float
    utility_new: float
    counterfactual: float
    masked_mean: float
    load_bearing: tuple[str, ...]
    harmful: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    accepted: bool
    reasons: tuple[str, ...]
    heldout_tasks: int = 0
    heldout_judged: int = 0
    heldout_old: float | None = None
    heldout_new: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("load_bearing", "harmful", "reasons"):
            d[k] = list(d[k])
        return d


def evaluate_rewrite(
    old: Sequence[PlanEntry],
    new: Sequence[PlanEntry],
    synthesized: Sequence[str],
    tasks: Sequence[GateTask],
    scorer: EntryScorer,
    config: ConsolidationConfig,
    *,
    count_tokens: Callable[[str], int] = approx_tokens,
    should_cancel: Callable[[], bool] | None = None,
    heldout: Sequence[GateTask] | None = None,
    heldout_episodes: Iterable[str] = (),
) -> Evaluation:
    """Compare the rewritten memory ``new`` with ``old`` on ``tasks`` and compute the
    counterfactual utility of the ``synthesized`` entries (names in ``new``).

    ``heldout`` (:func:`heldout_tasks`) are scored on both memories without the entries that
    cite a ``heldout_episodes`` episode (so the held-out episodes' own fast writes, present in
    both, cannot answer for the region): the rewrite must not be worse there, and with
    ``config.require_heldout`` at least one held-out task must be judged.

    Raises ``InterruptedError`` when ``should_cancel`` turns true.
    """
    def check() -> None:
        if should_cancel is not None and should_cancel():
            raise InterruptedError("cancelled during evaluation")

    u_old, n_old = utility(old, tasks, scorer)
    check()
    u_new, n_new = utility(new, tasks, scorer)
    s_names = [n for n in synthesized if any(e.name == n for e in new)]
    rng = np.random.default_rng(config.seed)
    masked: list[float] = []
    if s_names:
        k = max(1, int(round(config.rho * len(s_names))))
        for _ in range(config.n_masks):
            check()
            drop = set(rng.choice(s_names, size=min(k, len(s_names)), replace=False).tolist())
            masked.append(utility([e for e in new if e.name not in drop], tasks, scorer)[0])
    masked_mean = float(np.mean(masked)) if masked else u_new
    cf = u_new - masked_mean
    load, harm = [], []
    for n in s_names:
        check()
        u_wo = utility([e for e in new if e.name != n], tasks, scorer)[0]
        if u_wo < u_new - 1e-12:
            load.append(n)
        elif u_wo > u_new + 1e-12:
            harm.append(n)
    t_old, t_new = memory_tokens(old, count_tokens), memory_tokens(new, count_tokens)
    reasons = []
    judged = min(n_old, n_new)
    if not tasks or judged == 0:
        reasons.append("no evaluation task could be judged from the traces")
    if u_new < u_old - config.tolerance:
        reasons.append(f"worse than the old memory on the evaluation set ({u_new:.3f} < "
                       f"{u_old:.3f})")
    if cf < config.min_cf - 1e-12:
        reasons.append(f"counterfactual utility {cf:.3f} < min_cf {config.min_cf:.3f} (masking "
                       "part of S helps: misleading entries)")
    if harm and config.reject_harmful:
        reasons.append(f"harmful entries (removing one raises the utility): {', '.join(harm)}")
    if t_new > t_old * config.max_growth:
        reasons.append(f"memory grows from {t_old} to {t_new} tokens (max_growth "
                       f"{config.max_growth:g})")
    ho: dict[str, Any] = {}
    if heldout is not None:
        check()
        masked_eps = set(heldout_episodes)

        def visible(entries: Sequence[PlanEntry]) -> list[PlanEntry]:
            return [e for e in entries if not masked_eps & set(e.provenance.episodes)]

        h_old, hn_old = utility(visible(old), heldout, scorer)
        h_new, hn_new = utility(visible(new), heldout, scorer)
        hj = min(hn_old, hn_new)
        ho = {"heldout_tasks": len(heldout), "heldout_judged": hj,
              "heldout_old": h_old if hj else None, "heldout_new": h_new if hj else None}
        if hj == 0 and config.require_heldout:
            reasons.append("no held-out task could be judged (no evidence the rewrite "
                           "predicts unseen episodes)")
        if hj and h_new < h_old - config.tolerance:
            reasons.append(f"worse than the old memory on the held-out episodes ({h_new:.3f} "
                           f"< {h_old:.3f}): it drops or contradicts what they needed")
    return Evaluation(len(tasks), judged, u_old, u_new, cf, masked_mean, tuple(load),
                      tuple(harm), t_old, t_new, not reasons, tuple(reasons), **ho)


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
        config: :class:`ConsolidationConfig`.
        scorer: ``(entries, task) -> score | None`` for acceptance; default
            :func:`rehearsal_scorer` over the waypoints the traces mention.
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
        """:func:`trigger_decision` with the episodes since the last run."""
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
