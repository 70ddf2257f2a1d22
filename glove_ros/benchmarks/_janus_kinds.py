"""Janus benchmark: the noisy updater (seeded update errors of eight kinds) and the cheap
experience-aware baseline trigger.

:class:`NoisyUpdater` wraps the rule updater and injects, per task, errors of the kinds in
:data:`~glove_ros.benchmarks._janus_scenario.ERROR_KINDS`; every injected candidate carries
its kinds (``injected_kinds``). Four kinds are about what a look sees (where a block is);
four are about what no look can confirm: a place never looked at, a corridor never
driven, a forgotten lesson, the model's own free-text reflection.

:class:`ExperienceTouch` is the baseline trigger's check: compare an update only when it
touches something verified experience memory holds evidence about (a trusted look at a
waypoint whose plan prior the update changes, a trusted drive through a corridor whose
lesson or route it changes); deploy otherwise. The benchmark also uses it to label every
candidate (could experience memory see it at all?).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from glove_ros.benchmarks._janus_scenario import ERROR_KINDS
from glove_ros.core.plan.agent_memory import Beliefs, MemoryView
from glove_ros.core.plan.agent_types import ACTION_LOOK, ACTION_NAVIGATE, WorldMap
from glove_ros.core.plan.plan_entries import Edit, PlanEntry, apply_edits, slugify
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_planner import plan_prior
from glove_ros.core.plan.updater import (
    EpisodeOutcome,
    RuleUpdater,
    UpdateProposal,
    blocked_name,
    fact_name,
)
from glove_ros.core.world.worldfile import BLOCK_COLORS

__all__ = [
    "ExperienceTouch",
    "NoisyUpdater",
    "changed_edges",
    "changed_waypoints",
]


def _edge(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


# --------------------------------------------------------------------------- noisy updater


class NoisyUpdater:
    """The rule updater with seeded harmful edits of realistic kinds (a stand-in for an
    unreliable reflecting LLM).

    Per episode, from ``rng(seed, episode id)`` -- the same coin flips in every arm, and the
    same for a kind whether or not the other kinds are on -- each kind fires with its rate
    (``rates``: kind -> probability, kinds in :data:`ERROR_KINDS`):

    * ``wrong_place``: the block seen in this episode (else the task's) written at another
      waypoint (misattribution);
    * ``stale_place``: that block written where an *earlier* episode saw it, when that
      differs from where it was seen last (a reflection reading an old trace after drift);
    * ``overgeneral``: every other known colour written at the waypoint where this block was
      seen ("blocks are kept there");
    * ``forget``: a block fact the episode did not touch removed;
    * ``unvisited_place``: the block's fact also names a waypoint no episode has looked at
      yet (listed first: "seen at <never looked at> and <where it was seen>");
    * ``false_route``: a "corridor blocked" lesson for a corridor no episode has driven;
    * ``forget_lesson``: a corridor lesson or a route procedure the episode did not touch
      removed (a forgotten true fact that is not about a block);
    * ``reflection``: a free-text note in the model's own words, plausible and wrong
      (seeded: "the <colour> block tends to be kept near <a neighbour of where it was seen>;
      search <there> first", or "the <colour> block is never kept at <where it was seen>;
      avoid <there>"), read by the planner's keyword reader like any LLM note.

    ``injected`` maps episode id -> what was injected (absent: a clean candidate);
    ``injected_kinds`` episode id -> the kinds. A kind whose precondition fails (nothing
    stale, no unvisited waypoint, no lesson to forget) injects nothing that episode.
    """

    def __init__(self, base: RuleUpdater, waypoints: Sequence[str], *,
                 rates: Mapping[str, float] | None = None, colours: Sequence[str] = (),
                 seed: int = 0, edges: Iterable[tuple[str, str]] = ()) -> None:
        self.base = base
        self.waypoints = sorted(waypoints)
        if len(self.waypoints) < 2:
            raise ValueError("NoisyUpdater needs a map with at least two waypoints")
        self.rates = {k: 0.0 for k in ERROR_KINDS}
        for k, v in (rates or {}).items():
            if k not in self.rates:
                raise ValueError(f"unknown error kind {k!r}; kinds: {', '.join(ERROR_KINDS)}")
            self.rates[k] = float(v)
        self.colours = sorted(set(colours))
        self.edges = sorted({_edge(a, b) for a, b in edges})
        self.seed = int(seed)
        self.injected: dict[str, str] = {}
        self.injected_kinds: dict[str, tuple[str, ...]] = {}
        #: episode id -> the rule updater's own (clean) edits of an injected candidate
        self.clean_edits: dict[str, tuple[Edit, ...]] = {}
        self.sightings: dict[str, list[str]] = {}  # colour -> waypoints, in episode order
        self.looked: set[str] = set()                # waypoints any episode looked at
        self.driven: set[tuple[str, str]] = set()    # corridors any episode drove (or tried)
        self.last: UpdateProposal | None = None

    def _fact(self, colour: str, wps: Sequence[str], existing: Mapping[str, PlanEntry],
              why: str) -> Edit:
        name = fact_name(colour)
        body = (f"The {colour} block was seen at {wps[0]}." if len(wps) == 1 else
                f"The {colour} block was seen at {', '.join(wps[:-1])} and {wps[-1]}.")
        return Edit("edit" if name in existing else "add", name, "semantic", body,
                    meta={"colour": colour, "waypoints": list(wps), "misses": {}}, reason=why)

    def _neighbours(self, wp: str) -> list[str]:
        out = sorted({b if a == wp else a for a, b in self.edges if wp in (a, b)})
        return out or [w for w in self.waypoints if w != wp]

    def propose_edits(self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
                      ) -> UpdateProposal:
        """The rule updater's edits, possibly corrupted (pure apart from ``injected`` and
        the sighting history)."""
        prop = self.base.propose_edits(entries, outcome)
        rng = np.random.default_rng([self.seed, zlib.crc32(outcome.episode_id.encode())])
        # one pair of draws per kind, in a fixed order: a kind's coin flips do not depend
        # on which other kinds are on
        draws = {k: (float(rng.random()), float(rng.random())) for k in ERROR_KINDS}
        edits = {e.name: e for e in prop.edits}
        existing = {e.name: e for e in entries}
        history = {c: list(w) for c, w in self.sightings.items()}
        seen = [(o.waypoint, c) for o in outcome.observations for c in o.colours]
        for wp, c in seen:
            self.sightings.setdefault(c, []).append(wp)
        self.looked |= {o.waypoint for o in outcome.observations}
        self.driven |= {_edge(t.source, t.target) for t in outcome.traversals}
        if seen:
            true_wp, colour = seen[-1]
        elif outcome.goal:
            colour = outcome.goal
            e = existing.get(fact_name(colour))
            wps = list((e.meta or {}).get("waypoints", [])) if e else []
            true_wp = wps[0] if wps else ""
        else:
            colour, true_wp = "", ""
        why = f"reflection on episode {outcome.episode_id}"
        notes: list[str] = []
        kinds: list[str] = []

        def fired(kind: str) -> tuple[bool, float]:
            r, pick = draws[kind]
            return r < self.rates[kind], pick

        on, pick = fired("wrong_place")
        if colour and on:
            others = [w for w in self.waypoints if w != true_wp]
            wrong = others[int(pick * len(others)) % len(others)]
            edits[fact_name(colour)] = self._fact(colour, [wrong], existing, why)
            notes.append(f"wrong place: {colour} at {wrong}")
            kinds.append("wrong_place")
        on, pick = fired("stale_place")
        if colour and on and not notes:
            old = [w for w in history.get(colour, []) if w != true_wp]
            if old:
                stale = old[-1]
                edits[fact_name(colour)] = self._fact(colour, [stale], existing, why)
                notes.append(f"stale place: {colour} at {stale}")
                kinds.append("stale_place")
        on, pick = fired("overgeneral")
        if seen and on:
            others = [c for c in self.colours if c != colour]
            for c in others:
                edits[fact_name(c)] = self._fact(c, [true_wp], existing, why)
            if others:
                notes.append(f"over-generalised: {', '.join(others)} at {true_wp}")
                kinds.append("overgeneral")
        on, pick = fired("forget")
        if on:
            keep = sorted(n for n, e in existing.items()
                          if e.kind == "semantic" and n.startswith("block_") and n not in edits)
            if keep:
                name = keep[int(pick * len(keep)) % len(keep)]
                edits[name] = Edit.remove(name, "reflection: no longer relevant")
                notes.append(f"forgot {name}")
                kinds.append("forget")
        on, pick = fired("unvisited_place")
        if colour and true_wp and on and fact_name(colour) not in {
                n for n, e in edits.items() if e.reason == why}:
            never = [w for w in self.waypoints if w not in self.looked and w != true_wp]
            if never:
                far = never[int(pick * len(never)) % len(never)]
                edits[fact_name(colour)] = self._fact(colour, [far, true_wp], existing, why)
                notes.append(f"unvisited place: {colour} also at {far} (never looked at)")
                kinds.append("unvisited_place")
        on, pick = fired("false_route")
        if on:
            free = [e for e in self.edges if e not in self.driven
                    and blocked_name(*e) not in existing and blocked_name(*e) not in edits]
            if free:
                a, b = free[int(pick * len(free)) % len(free)]
                edits[blocked_name(a, b)] = Edit.add(
                    "negative", blocked_name(a, b),
                    f"The corridor between {a} and {b} was blocked (episode "
                    f"{outcome.episode_id}); plan around it.", meta={"edge": [a, b]},
                    reason=why)
                notes.append(f"false route: {a}-{b} blocked (never driven)")
                kinds.append("false_route")
        on, pick = fired("forget_lesson")
        if on:
            keep = sorted(n for n, e in existing.items() if n not in edits and (
                (e.kind == "negative" and n.startswith("blocked_"))
                or (e.kind == "procedure" and n.startswith("route_"))))
            if keep:
                name = keep[int(pick * len(keep)) % len(keep)]
                edits[name] = Edit.remove(name, "reflection: no longer relevant")
                notes.append(f"forgot lesson {name}")
                kinds.append("forget_lesson")
        on, pick = fired("reflection")
        if colour and true_wp and on:
            name = slugify(f"note_{colour}")
            if pick < 0.5:
                near = self._neighbours(true_wp)
                w = near[int(pick * 2 * len(near)) % len(near)]
                body = (f"Reflection: the {colour} block tends to be kept near {w}; "
                        f"search {w} first.")
            else:
                w = true_wp
                body = f"Reflection: the {colour} block is never kept at {w}; avoid {w}."
            edits[name] = Edit("edit" if name in existing else "add", name, "semantic", body,
                               meta={}, reason=why)
            notes.append(f"reflection: {body}")
            kinds.append("reflection")
        if not notes:
            return prop
        new = tuple(edits.values())
        try:
            apply_edits(list(entries), new, source="rule")
        except ValueError:
            return prop
        self.injected[outcome.episode_id] = "; ".join(notes)
        self.injected_kinds[outcome.episode_id] = tuple(kinds)
        self.clean_edits[outcome.episode_id] = tuple(prop.edits)
        return UpdateProposal(new, prop.dropped, None, None)

    def propose(self, store: PlanMemoryStore, outcome: EpisodeOutcome) -> Any:
        """Store the (possibly corrupted) edit set as a candidate; ``None`` if empty."""
        outcome.validate()
        self.last = self.propose_edits(store.entries(), outcome)
        if not self.last.edits:
            return None
        try:
            return store.propose(list(self.last.edits), source="rule",
                                 reason=f"episode {outcome.episode_id}")
        except ValueError as exc:
            self.last = replace(self.last, error=f"store refused: {exc}")
            return None


# --------------------------------------------------------------------------- what changed


def _colours(entries: Iterable[PlanEntry]) -> list[str]:
    return sorted(set(BLOCK_COLORS) | {
        str((e.meta or {}).get("colour") or (e.meta or {}).get("goal") or "").lower()
        for e in entries} - {""})


def changed_waypoints(old: Sequence[PlanEntry], new: Sequence[PlanEntry],
                      waypoints: Iterable[str]) -> dict[str, list[str]]:
    """waypoint -> colours whose plan prior there differs between ``old`` and ``new``."""
    wps = sorted(set(waypoints))
    out: dict[str, list[str]] = {}
    for c in _colours((*old, *new)):
        po, pn = plan_prior(old, c, wps).score, plan_prior(new, c, wps).score
        for w in sorted(set(po) | set(pn)):
            if po.get(w, 0.0) != pn.get(w, 0.0):
                out.setdefault(w, []).append(c)
    return out


def _corridors(entries: Sequence[PlanEntry]) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for e in entries:
        meta = e.meta or {}
        edge, path = meta.get("edge"), meta.get("path")
        if e.kind == "negative" and isinstance(edge, list) and len(edge) == 2:
            out[e.name] = {_edge(str(edge[0]), str(edge[1]))}
        elif e.kind == "procedure" and isinstance(path, list) and len(path) >= 2:
            out[e.name] = {_edge(str(a), str(b)) for a, b in zip(path, path[1:], strict=False)}
    return out


def changed_edges(old: Sequence[PlanEntry], new: Sequence[PlanEntry]
                  ) -> set[tuple[str, str]]:
    """Corridors of lessons / routes that ``new`` adds, removes or changes."""
    a, b = _corridors(old), _corridors(new)
    out: set[tuple[str, str]] = set()
    for name in set(a) | set(b):
        if a.get(name) != b.get(name):
            out |= a.get(name, set()) | b.get(name, set())
    return out


class ExperienceTouch:
    """The cheap experience-aware trigger's check, ``risk(candidate) -> reason``: non-empty
    when the candidate changes something verified experience memory holds any trusted
    evidence about -- the plan prior at a waypoint with a trusted look, or a lesson / route
    through a corridor with a trusted drive. It does not ask whether that evidence agrees
    (that is :class:`~glove_ros.core.plan.plan_planner.ExperienceRisk`); it asks only
    whether a comparison could be informed at all. An update about places and corridors
    experience memory knows nothing of is deployed without comparison.
    """

    def __init__(self, store: PlanMemoryStore, world_map: WorldMap, memory: MemoryView
                 ) -> None:
        if not hasattr(memory, "trusted"):
            raise ValueError("memory must provide trusted(state_key, action)")
        self.store = store
        self.world_map = world_map
        self.memory = memory
        self.checks = 0

    def versions(self, base_version: int, version: int) -> str:
        """The reason for the change ``base_version -> version`` ("" when experience memory
        holds no evidence about anything it touches)."""
        self.checks += 1
        return self.between(self.store.entries(int(base_version)),
                            self.store.entries(int(version)))

    def between(self, old: Sequence[PlanEntry], new: Sequence[PlanEntry]) -> str:
        """The reason for the change ``old -> new`` (entry lists; see :meth:`versions`)."""
        wps = changed_waypoints(old, new, self.world_map.waypoint_ids)
        edges = changed_edges(old, new)
        if not wps and not edges:
            return ""
        beliefs = Beliefs.from_entries(self.memory.trusted(action=ACTION_LOOK),
                                       self.memory.trusted(action=ACTION_NAVIGATE),
                                       self.world_map)
        reasons = [f"{'/'.join(cs)} at {w}: {beliefs.looks[w].n} trusted look(s) there"
                   for w, cs in sorted(wps.items()) if w in beliefs.looks]
        for e in sorted(edges):
            b = beliefs.edges.get(e)
            if b is not None and (b.reached or b.blocked):
                reasons.append(f"corridor {e[0]}-{e[1]}: {b.reached + b.blocked} trusted "
                               "drive(s)")
        return "; ".join(reasons)[:300]

    def __call__(self, candidate: Any) -> str:
        """Why ``candidate`` should be compared ("" to deploy it directly)."""
        return self.versions(int(candidate.base_version), int(candidate.version))
