"""The fast writer and the episode traces it journals (Auto-Dreamer's fast time scale).

After every episode :class:`FastWriter` appends typed plan-memory entries (semantic facts,
procedures, negative lessons) with provenance, and journals the raw episode trace in the same
database; :class:`TraceIndex` reads that journal back as :class:`EpisodeTrace` objects, the
evidence every later stage of consolidation cites. This is the ground floor of
``core.consolidate``: it runs on every episode, needs no LLM and no acceptance test, and the
other modules (region, tools, policies, acceptance, the consolidator) import from it, never
the other way round. It also holds the few helpers they share: the ``source`` tags of fast
writes and consolidated entries, number checks for config validation and the word splitter
that the grounding check and the rehearsal readers both use.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import look_names
from glove_ros.core.plan.agent_types import ACTION_LOOK, ACTION_NAVIGATE, OUTCOME_BLOCKED
from glove_ros.core.plan.plan_entries import MAX_BODY, PlanEntry, Provenance, slugify
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, Traversal

__all__ = [
    "WriterConfig",
    "FastWriter",
    "episode_from_transitions",
    "episode_trace",
    "EpisodeTrace",
    "TraceIndex",
]

#: ``PlanEntry.source`` of consolidated entries (and of consolidation's store versions).
SOURCE = "consolidator"
#: ``PlanEntry.source`` of the fast writer's entries.
_WRITER_SOURCE = "fast_writer"
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:[_\-.][a-z0-9]+)*")


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


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
            obs.append(Observation(t.state_key, tuple(sorted(look_names(t.outcome))), tid))
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
