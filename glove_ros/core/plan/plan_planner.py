"""How plan memory reaches the planner, and how the Janus gate scores a memory on the robot.

DESIGN.md section 4: "score a task under a memory" cannot re-drive the robot; it is a
rehearsal of the planner's decision under that memory, scored against verified experience
memory (the relative truth GLOVE maintains). This module makes that concrete for the
JetRover block search, and holds the small pipeline the plan-gate node and the Janus
benchmark share.

1. **Plan memory as a prior** (:func:`plan_prior`, :class:`PlanAwarePlanner`). Verified
   experience memory outranks plan memory: when trusted looks already put the target colour
   somewhere (a ``believed`` option), the base planner decides alone. Otherwise plan-memory
   entries become a prior on which waypoint to try first: semantic facts ("The red block was
   seen at kitchen.") promote waypoints, negative lessons ("Searching for the red block
   failed ...; not found at lab.") and negated facts demote them. Only ``unexplored``
   options are promoted -- a waypoint where trusted experience saw other colours is not
   overridden by a text note. The options are re-ordered and handed to the base planner
   (greedy: takes the first; LLM: sees them in that order, its fallback takes the first).
   An LLM base planner (anything with ``set_notes``) also gets the entries themselves: its
   prompt shows them as notes next to the verified facts (:mod:`glove_ros.core.llm.prompts`),
   so free-text notes the keyword reading cannot parse still reach the decision.
   Entries written by :class:`~glove_ros.core.plan.updater.RuleUpdater` are read from their
   ``meta`` (``colour`` / ``waypoints``, ``goal`` / ``searched``); free text (LLM notes) is
   read clause by clause: a clause naming exactly one colour and some waypoint ids of the
   map is a claim about that colour; a clause with no colour continues the previous one
   ("seen at kitchen and office"); negation words or a ``negative`` entry flip the sign.
   Limits: this is keyword reading, not understanding (a waypoint id that is also an
   ordinary word can be misread; clauses naming two colours are skipped); corridor lessons
   do not change routes (the agent routes from experience memory).

2. **Rehearsal** (:func:`decide`, :func:`truth`, :func:`make_rehearsal_scorer`).
   ``decide(entries, task, context)`` is the first goal the plan-aware planner would choose
   for "find the <colour> block" from ``context.start`` (default: the dock) *with only this
   plan memory* -- experience beliefs are left out on purpose, otherwise both memories
   would give the same decision wherever experience memory already knows, and the
   comparison would measure nothing. ``truth(task, waypoint, memory)`` scores it against
   verified experience memory: the trusted ``look`` entries at that waypoint give 1.0 when
   at least ``belief_threshold`` of them saw the colour (the planner's own "believed"
   rule), 0.0 when they mostly saw something else, ``None`` when there is no trusted look
   there (unknown: the gate leaves the task out for both memories). In simulation
   :class:`SimulatorTruth` scores against the simulator's ground truth instead (an oracle,
   for benchmarks). Limits: a rehearsal scores one decision, not a whole episode (routes,
   blockages and re-looks are not rehearsed); the score is only as good and as complete as
   verified memory -- right after drift, before GLOVE has suppressed the stale looks, a
   correct update can lose to the stale memory it corrects (the next visit proposes it
   again); the greedy base planner is rehearsed (the LLM planner is not asked, so a
   rehearsal costs no LLM call).

3. **The pipeline** (:class:`PlanGatePipeline`): one finished task -> the updater proposes
   a candidate -> the Janus gate deploys or rejects it. :func:`outcome_from_transitions`
   turns the task's transitions (the ``TaskOutcome`` message) into the updater's
   :class:`~glove_ros.core.plan.updater.EpisodeOutcome`; :func:`rollback_to_parent` undoes the
   last deployment.

ROS-free; the plan-gate node and ``glove-ros bench janus`` are thin drivers of this module.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from glove_ros.core.plan.agent_memory import Beliefs, LookBelief, MemoryView
from glove_ros.core.plan.agent_policy import GreedyPlanner, PlanContext, PlanDecision, rank_options
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
    Task,
    WorldMap,
    look_names,
)
from glove_ros.core.plan.janus import GateDecision, GateTask, JanusGate, RehearsalScorer
from glove_ros.core.plan.plan_entries import PlanEntry, slugify
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, Traversal
from glove_ros.core.world.worldfile import BLOCK_COLORS

__all__ = [
    "PlanPrior",
    "plan_prior",
    "PlanAwarePlanner",
    "RehearsalContext",
    "task_colour",
    "decide",
    "truth",
    "PlanRehearsal",
    "ExperienceTruth",
    "SimulatorTruth",
    "make_rehearsal_scorer",
    "ExperienceRisk",
    "gate_task",
    "outcome_from_transitions",
    "GateStep",
    "PlanGatePipeline",
    "rollback_to_parent",
]

# words that turn a clause about a colour and a waypoint into a negative claim
_NEGATIONS = frozenset({
    "not", "no", "never", "none", "nothing", "isn't", "isnt", "wasn't", "wasnt", "without",
    "missing", "gone", "absent", "avoid", "failed", "moved", "removed", "wrongly",
})
_CLAUSE_SPLIT = re.compile(r"[.;,:!?()]|\band\b|\bbut\b|\bthen\b")
_WORD = re.compile(r"[a-z0-9_']+")


# --------------------------------------------------------------------------------------------
# plan memory -> prior


@dataclass(frozen=True)
class PlanPrior:
    """What plan memory says about where one colour's block is.

    ``score`` maps waypoint -> summed claims (+1 per entry placing the block there, -1 per
    entry saying it is not there / was searched in vain); ``support`` maps waypoint -> the
    entry names behind its score.
    """

    colour: str
    score: Mapping[str, float] = field(default_factory=dict)
    support: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def preferred(self) -> list[str]:
        """Waypoints with a positive score, best first (ties: by id)."""
        return sorted((w for w, s in self.score.items() if s > 0),
                      key=lambda w: (-self.score[w], w))

    def avoided(self) -> set[str]:
        """Waypoints with a negative score."""
        return {w for w, s in self.score.items() if s < 0}

    @property
    def empty(self) -> bool:
        """True when plan memory says nothing about this colour."""
        return not any(self.score.values())


@functools.lru_cache(maxsize=512)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(n.lower()) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![a-z0-9_])(?:{alt})(?![a-z0-9_])")


def _mentions(text: str, names: Iterable[str]) -> list[str]:
    """``names`` that occur in ``text`` as whole tokens (ids may contain ``_``)."""
    items = tuple(names)
    if not items:
        return []
    found = {m.group(0) for m in _name_pattern(items).finditer(text)}
    return [n for n in items if n.lower() in found]


def _text_claims(entry: PlanEntry, colour: str, waypoints: Sequence[str]
                 ) -> list[tuple[str, float]]:
    return list(_body_claims(entry.kind, entry.body, colour, tuple(waypoints)))


@functools.lru_cache(maxsize=8192)
def _body_claims(kind: str, body: str, colour: str, waypoints: tuple[str, ...]
                 ) -> tuple[tuple[str, float], ...]:
    colours = tuple(sorted(set(BLOCK_COLORS) | {colour}))
    claims: list[tuple[str, float]] = []
    current: list[str] = []
    for clause in _CLAUSE_SPLIT.split(body.lower()):
        if not clause.strip():
            continue
        named = _mentions(clause, colours)
        if named:
            current = named
        wps = _mentions(clause, waypoints)
        if not wps or current != [colour]:
            continue
        words = set(_WORD.findall(clause))
        sign = -1.0 if kind == "negative" or words & _NEGATIONS else 1.0
        claims += [(w, sign) for w in wps]
    return tuple(claims)


def _claims(entry: PlanEntry, colour: str, waypoints: Sequence[str]
            ) -> list[tuple[str, float]]:
    """(waypoint, +1 / -1) claims ``entry`` makes about ``colour``'s block."""
    slug = slugify(colour)
    meta = entry.meta or {}
    known = set(waypoints)
    wps = meta.get("waypoints")
    if entry.kind == "semantic" and isinstance(wps, list) and (
        slugify(str(meta.get("colour", ""))) == slug or entry.name == f"block_{slug}"
    ):
        return [(w, 1.0) for w in wps if isinstance(w, str) and w in known]
    searched = meta.get("searched")
    if entry.kind == "negative" and isinstance(searched, list) and (
        slugify(str(meta.get("goal", ""))) == slug
    ):
        return [(w, -1.0) for w in searched if isinstance(w, str) and w in known]
    if isinstance(wps, list) or isinstance(searched, list):
        return []  # a structured entry about another colour
    return _text_claims(entry, colour, waypoints)


def plan_prior(entries: Iterable[PlanEntry], colour: str, waypoints: Iterable[str]
               ) -> PlanPrior:
    """The prior plan memory ``entries`` give on where ``colour``'s block is, over the map's
    ``waypoints`` (see the module docstring for how entries are read)."""
    if not isinstance(colour, str) or not slugify(colour):
        raise ValueError(f"colour must be a colour name, got {colour!r}")
    wps = sorted(set(waypoints))
    score: dict[str, float] = {}
    support: dict[str, list[str]] = {}
    for e in entries:
        for w, s in _claims(e, colour.strip().lower(), wps):
            score[w] = score.get(w, 0.0) + s
            if e.name not in support.setdefault(w, []):
                support[w].append(e.name)
    return PlanPrior(colour, score, {w: tuple(v) for w, v in support.items()})


class PlanAwarePlanner:
    """A planner that reads plan memory as a prior where verified experience is silent.

    Args:
        base: the planner that decides (default :class:`GreedyPlanner`;
            :class:`~glove_ros.core.plan.agent_policy.LlmPlanner` works too).
        entries: the plan-memory entries to read (replace them with :meth:`set_entries`
            when a new version is deployed).

    ``choose(ctx)``: if some option is ``believed`` (trusted looks put the target there),
    the base planner decides on ``ctx`` unchanged. Otherwise the options are re-ordered --
    unexplored waypoints plan memory promotes first (strongest first), then the rest in
    their order, then the waypoints it demotes -- and the base planner decides on that.
    ``prior_used`` counts decisions where the prior changed the first option.
    """

    def __init__(self, base: Any = None, entries: Iterable[PlanEntry] = ()) -> None:
        self.base = base if base is not None else GreedyPlanner()
        if not hasattr(self.base, "choose"):
            raise ValueError("base planner must have choose(ctx)")
        self.entries: tuple[PlanEntry, ...] = ()
        self.set_entries(entries)
        self.prior_used = 0
        self.last_prior: PlanPrior | None = None

    @property
    def name(self) -> str:
        """``plan+<base name>``."""
        return f"plan+{getattr(self.base, 'name', type(self.base).__name__)}"

    @property
    def calls(self) -> int:
        """LLM calls of the base planner (0 for greedy)."""
        return int(getattr(self.base, "calls", 0))

    @property
    def fallbacks(self) -> Any:
        """The base planner's fallback counters (None for greedy)."""
        return getattr(self.base, "fallbacks", None)

    def set_entries(self, entries: Iterable[PlanEntry]) -> None:
        """Read these entries from now on."""
        items = tuple(entries)
        for e in items:
            if not isinstance(e, PlanEntry):
                raise ValueError(f"entries must be PlanEntry objects, got {type(e).__name__}")
        self.entries = items
        if hasattr(self.base, "set_notes"):  # an LLM planner reads them in its prompt too
            self.base.set_notes(items)

    def reorder(self, ctx: PlanContext) -> tuple[PlanContext, PlanPrior | None]:
        """``ctx`` with its options re-ordered by the prior (unchanged when a believed
        option exists or plan memory is silent), and the prior used."""
        if not ctx.options or any(o.kind == "believed" for o in ctx.options):
            return ctx, None
        prior = plan_prior(self.entries, ctx.task.color, ctx.world_map.waypoint_ids)
        if prior.empty:
            return ctx, prior
        good = {w: i for i, w in enumerate(prior.preferred())}
        bad = prior.avoided()
        first = sorted((o for o in ctx.options if o.waypoint in good and o.kind == "unexplored"),
                       key=lambda o: good[o.waypoint])
        taken = {o.waypoint for o in first}
        last = [o for o in ctx.options if o.waypoint in bad and o.waypoint not in taken]
        taken |= {o.waypoint for o in last}
        middle = [o for o in ctx.options if o.waypoint not in taken]
        return replace(ctx, options=tuple(first + middle + last)), prior

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """The base planner's decision on the re-ordered options (see the class docstring)."""
        new_ctx, prior = self.reorder(ctx)
        self.last_prior = prior
        decision = self.base.choose(new_ctx)
        if prior is None or new_ctx.options == ctx.options or not new_ctx.options:
            return decision
        if new_ctx.options[0].waypoint != ctx.options[0].waypoint:
            self.prior_used += 1
        goal = decision.goal
        if goal is not None and goal in prior.support and prior.score.get(goal, 0) > 0:
            why = ", ".join(prior.support[goal])
            return replace(decision, reason=f"plan memory ({why}): {decision.reason}")
        return decision


# --------------------------------------------------------------------------------------------
# rehearsal


@dataclass(frozen=True)
class RehearsalContext:
    """Where a rehearsed decision starts: the map, the start waypoint ("" = the dock) and
    corridors to route around (default none)."""

    world_map: WorldMap
    start: str = ""
    avoid: frozenset[tuple[str, str]] = frozenset()

    def start_waypoint(self) -> str:
        """``start`` or the map's dock (or its first waypoint when it has no dock)."""
        s = self.start or self.world_map.dock or self.world_map.waypoint_ids[0]
        if not self.world_map.has(s):
            raise ValueError(f"rehearsal start {s!r} is not a waypoint of the map")
        return s


def task_colour(task: GateTask | Task | str) -> str:
    """The colour a task looks for: ``GateTask.data["goal"]``, ``Task.color`` or a string.

    ValueError when there is none.
    """
    if isinstance(task, GateTask):
        c = task.data.get("goal") if isinstance(task.data, Mapping) else None
    elif isinstance(task, Task):
        c = task.color
    else:
        c = task
    if not isinstance(c, str) or not slugify(c):
        raise ValueError(f"task {task!r} names no goal colour")
    return c.strip().lower()


_NO_BELIEFS = Beliefs({}, {})


def decide(entries: Iterable[PlanEntry], task: GateTask | Task | str,
           context: RehearsalContext, base_planner: Any = None) -> str | None:
    """The first waypoint the plan-aware planner would look at for ``task`` from
    ``context`` under plan memory ``entries`` alone (no experience beliefs; never moves
    the robot). ``None`` when there is no reachable option.

    When plan memory places the block at the start waypoint itself, that is the answer
    (the robot looks where it stands first).
    """
    colour = task_colour(task)
    wm = context.world_map
    start = context.start_waypoint()
    items = tuple(entries)
    prior = plan_prior(items, colour, wm.waypoint_ids)
    best = prior.preferred()
    if best and best[0] == start:
        return start
    options = rank_options(wm, _NO_BELIEFS, start, colour, (start,), context.avoid)
    ctx = PlanContext(Task(colour, id="rehearsal"), start, wm, _NO_BELIEFS, options,
                      frozenset({start}), frozenset(context.avoid), 0)
    return PlanAwarePlanner(base_planner, items).choose(ctx).goal


def truth(task: GateTask | Task | str, waypoint: str | None, memory: MemoryView,
          belief_threshold: float = 0.5) -> float | None:
    """Score a decision against verified experience memory (trusted ``look`` entries).

    1.0 when at least ``belief_threshold`` of the trusted looks at ``waypoint`` saw the
    task's colour, 0.0 when fewer did, ``None`` when there is no trusted look there (or no
    decision).
    """
    if waypoint is None:
        return None
    if not 0.0 < float(belief_threshold) <= 1.0:
        raise ValueError(f"belief_threshold must be in (0, 1], got {belief_threshold!r}")
    share = _look_share(memory, waypoint, task_colour(task))
    if share is None:
        return None
    return 1.0 if share >= float(belief_threshold) else 0.0


class PlanRehearsal:
    """``decide`` bound to a context: ``rehearsal(entries, task) -> waypoint``, the
    ``decide`` argument of :class:`~glove_ros.core.plan.janus.RehearsalScorer`."""

    def __init__(self, context: RehearsalContext, base_planner: Any = None) -> None:
        context.start_waypoint()  # validates
        self.context = context
        self.base_planner = base_planner

    def __call__(self, entries: Iterable[PlanEntry], task: GateTask) -> str | None:
        """The rehearsed first goal."""
        return decide(entries, task, self.context, self.base_planner)


class ExperienceTruth:
    """``truth`` bound to a :class:`~glove_ros.core.plan.agent_memory.MemoryView` of verified
    experience memory (e.g. :class:`~glove_ros.core.plan.agent_memory.StoreMemoryView`)."""

    def __init__(self, memory: MemoryView, belief_threshold: float = 0.5) -> None:
        if not hasattr(memory, "trusted"):
            raise ValueError("memory must provide trusted(state_key, action)")
        if not 0.0 < float(belief_threshold) <= 1.0:
            raise ValueError(f"belief_threshold must be in (0, 1], got {belief_threshold!r}")
        self.memory = memory
        self.belief_threshold = float(belief_threshold)

    def __call__(self, task: GateTask, waypoint: str | None) -> float | None:
        """1.0 / 0.0 / None (see :func:`truth`)."""
        return truth(task, waypoint, self.memory, self.belief_threshold)


class SimulatorTruth:
    """Oracle truth for simulation: ``colors_at(waypoint)`` is the ground truth (e.g.
    ``sim.state.colors_at``). 1.0 if the colour is there, else 0.0; ``None`` for no
    decision. Never available on a robot."""

    def __init__(self, colors_at: Callable[[str], Iterable[str]]) -> None:
        if not callable(colors_at):
            raise ValueError("colors_at must be a callable waypoint -> colours")
        self.colors_at = colors_at

    def __call__(self, task: GateTask, waypoint: str | None) -> float | None:
        """1.0 when the simulator has the task's colour at ``waypoint``."""
        if waypoint is None:
            return None
        return 1.0 if task_colour(task) in set(self.colors_at(waypoint)) else 0.0


def make_rehearsal_scorer(
    store: PlanMemoryStore,
    context: RehearsalContext,
    truth_fn: Callable[[GateTask, str | None], float | None],
    *,
    base_planner: Any = None,
    cache_size: int = 4096,
) -> RehearsalScorer:
    """The gate's scorer: rehearse :func:`decide` under the version's entries (read from
    ``store``; versions are immutable, so decisions are cached) and score with
    ``truth_fn`` (:class:`ExperienceTruth` on the robot)."""
    def memory_for(version: int, task: GateTask) -> tuple[PlanEntry, ...]:
        return tuple(store.entries(version))

    return RehearsalScorer(PlanRehearsal(context, base_planner), truth_fn, memory_for,
                           cache_size=cache_size)


# --------------------------------------------------------------------------------------------
# what the robot knows about a proposed update (the evidence trigger's risk check)


def _look_share(memory: MemoryView, waypoint: str, colour: str) -> float | None:
    """Share of trusted looks at ``waypoint`` that saw ``colour`` (None: no trusted look)."""
    counts: dict[str, int] = {}
    for e in memory.trusted(state_key=waypoint, action=ACTION_LOOK):
        t = e.transition
        if t.state_key != waypoint or t.action != ACTION_LOOK:
            continue
        try:
            look_names(t.outcome)
        except ValueError:
            continue
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    return LookBelief(waypoint, counts, 0).share(colour) if counts else None


def _confirmed(before: float, after: float, share: float | None, threshold: float) -> bool:
    """Trusted looks already say what the change says: it places a colour where they
    mostly saw it, or drops / demotes one where they mostly did not."""
    if share is None:
        return False
    if after > before:
        return after > 0 and share >= threshold
    return share < threshold


class ExperienceRisk:
    """Is a plan-memory candidate risky, by what the robot already knows? The risk check of
    :class:`~glove_ros.core.plan.janus.EvidenceTrigger`: ``risk(candidate) -> reason`` ("" when
    nothing speaks against it).

    The candidate's change is read as the difference of :func:`plan_prior` between its base
    version and itself, per colour and waypoint. A change is risky when

    * it touches a waypoint whose ``look`` the GLOVE verifier recently found dissonant (a
      pending re-verification, or a SUPPRESSED / REPLACED / QUEUED event among the last
      ``recent_events`` of experience memory): the world there just changed, so an update
      about it is the kind a stale or premature reflection gets wrong -- unless the
      trusted looks there (what GLOVE kept or re-verified after the change) already say
      the same: it places the colour where they mostly saw it, or drops it where they
      mostly did not;
    * it places a colour at a waypoint where trusted looks mostly saw something else
      (``belief_threshold``), or
    * it removes or demotes a colour at a waypoint where trusted looks confirm it (a
      forgotten fact, an over-generalised negative lesson).

    Changes about waypoints experience memory knows nothing of are not flagged (no
    evidence either way). Args: ``store`` the plan memory holding the candidate,
    ``world_map`` (waypoints), ``memory`` a
    :class:`~glove_ros.core.plan.agent_memory.MemoryView` of
    verified experience memory, ``events`` optionally the
    :class:`~glove_ros.core.memory.store.ExperienceStore` (for its events and pending queue).
    """

    def __init__(self, store: PlanMemoryStore, world_map: WorldMap, memory: MemoryView, *,
                 events: Any = None, belief_threshold: float = 0.5,
                 recent_events: int = 64) -> None:
        if not hasattr(memory, "trusted"):
            raise ValueError("memory must provide trusted(state_key, action)")
        if not 0.0 < float(belief_threshold) <= 1.0:
            raise ValueError(f"belief_threshold must be in (0, 1], got {belief_threshold!r}")
        if isinstance(recent_events, bool) or not isinstance(recent_events, int) or \
                recent_events < 0:
            raise ValueError(f"recent_events must be an int >= 0, got {recent_events!r}")
        self.store = store
        self.world_map = world_map
        self.memory = memory
        self.events = events
        self.belief_threshold = float(belief_threshold)
        self._recent: deque[tuple[str, str]] = deque(maxlen=max(1, recent_events))
        self._cursor = 0
        self.checks = 0

    def dissonant(self) -> set[tuple[str, str]]:
        """(state_key, action) pairs the verifier recently found dissonant."""
        if self.events is None:
            return set()
        from glove_ros.core.memory.experience import EventKind

        kinds = (EventKind.SUPPRESSED, EventKind.REPLACED, EventKind.QUEUED)
        while True:
            batch = self.events.events(since=self._cursor, limit=1000)
            for ev in batch:
                self._cursor = max(self._cursor, int(ev.event_id))
                if ev.kind in kinds:
                    self._recent.append((ev.state_key, ev.action))
            if len(batch) < 1000:
                break
        pending = {(p.state_key, p.action) for p in self.events.pending()}
        return set(self._recent) | pending

    def __call__(self, candidate: Any) -> str:
        """Why ``candidate`` is risky ("" if nothing speaks against it)."""
        self.checks += 1
        old = self.store.entries(int(candidate.base_version))
        new = self.store.entries(int(candidate.version))
        wps = self.world_map.waypoint_ids
        colours = sorted(set(BLOCK_COLORS) | {
            str((e.meta or {}).get("colour") or (e.meta or {}).get("goal") or "").lower()
            for e in (*old, *new)} - {""})
        hot = {w for w, a in self.dissonant() if a == ACTION_LOOK}
        reasons: list[str] = []
        for c in colours:
            po, pn = plan_prior(old, c, wps), plan_prior(new, c, wps)
            if dict(po.score) == dict(pn.score):
                continue
            for w in sorted(set(po.score) | set(pn.score)):
                before, after = po.score.get(w, 0.0), pn.score.get(w, 0.0)
                if before == after:
                    continue
                share = _look_share(self.memory, w, c)
                if w in hot:
                    # the world just changed there: only what re-verified looks already
                    # say is safe to deploy unjudged
                    if not _confirmed(before, after, share, self.belief_threshold):
                        reasons.append(f"{c} at {w}: {w}/look recently dissonant")
                    continue
                if share is None:
                    continue
                if after > before and after > 0 and share < self.belief_threshold:
                    reasons.append(f"places {c} at {w}; trusted looks there saw other colours")
                elif after < before and before > 0 and share >= self.belief_threshold:
                    reasons.append(f"drops {c} at {w}; trusted looks there confirm it")
                elif after < 0 <= before and share >= self.belief_threshold:
                    reasons.append(f"says no {c} at {w}; trusted looks there saw it")
        return "; ".join(dict.fromkeys(reasons))[:300]


# --------------------------------------------------------------------------------------------
# task outcome -> updater input


def gate_task(target: str | None, text: str | None = None) -> GateTask | None:
    """The gate's task for a search: id ``find:<colour>``, canonical text "find the
    <colour> block" (so the same search always clusters together), data ``{"goal"}``.
    ``None`` for a task without a colour (it cannot be rehearsed)."""
    if not target or not slugify(target):
        return None
    c = target.strip().lower()
    return GateTask(f"find:{slugify(c)}", text or f"find the {c} block", {"goal": c}).validate()


def outcome_from_transitions(
    episode_id: str,
    task: str,
    target: str | None,
    success: bool,
    transitions: Sequence[Any],
    transition_ids: Sequence[int] = (),
    *,
    found_at: str = "",
    reason: str = "",
) -> EpisodeOutcome:
    """The updater's :class:`~glove_ros.core.plan.updater.EpisodeOutcome` for one task.

    ``transitions`` are core :class:`~glove_ros.core.memory.experience.Transition` objects (or
    anything with ``state_key``, ``action``, ``action_arg``, ``outcome``) in the order they
    happened: a ``look`` becomes an :class:`Observation` of the colours of its signature, a
    ``navigate_to`` with outcome ``reached`` / ``blocked`` a :class:`Traversal`; other
    actions and navigation outcomes are not world facts and are skipped.
    ``transition_ids[i]`` (0 = not acknowledged) is the experience-memory id of
    ``transitions[i]``, kept as provenance.

    Raises ValueError (nothing to undo: this is pure) for an empty episode id, a look whose
    outcome is not a ``colors=`` signature, a navigation without a target, or more ids than
    transitions.
    """
    if not isinstance(episode_id, str) or not episode_id.strip():
        raise ValueError("episode_id must be a non-empty string")
    ids = list(transition_ids)
    if len(ids) > len(transitions):
        raise ValueError(f"{len(ids)} transition ids for {len(transitions)} transitions")
    obs: list[Observation] = []
    trav: list[Traversal] = []
    for i, t in enumerate(transitions):
        tid = ids[i] if i < len(ids) else 0
        tid = int(tid) if tid and int(tid) > 0 else None
        action = getattr(t, "action", None)
        state = getattr(t, "state_key", "")
        if not isinstance(state, str) or not state:
            raise ValueError(f"transition {i} has no state_key")
        if action == ACTION_LOOK:
            try:
                colours = look_names(t.outcome)
            except ValueError as exc:
                raise ValueError(f"transition {i}: {exc}") from None
            obs.append(Observation(state, tuple(sorted(colours)), tid))
        elif action == ACTION_NAVIGATE and t.outcome in (OUTCOME_REACHED, OUTCOME_BLOCKED):
            if not getattr(t, "action_arg", ""):
                raise ValueError(f"transition {i}: navigate_to without a target waypoint")
            trav.append(Traversal(state, t.action_arg, t.outcome == OUTCOME_BLOCKED, tid))
    goal = target.strip().lower() if isinstance(target, str) and target.strip() else None
    text = task if isinstance(task, str) and task.strip() else (
        f"find the {goal} block" if goal else "task")
    return EpisodeOutcome(
        episode_id=episode_id.strip(), task=text, goal=goal, success=bool(success),
        reported_waypoint=found_at or None, observations=tuple(obs), traversals=tuple(trav),
        failure_reason="" if success else str(reason or ""),
    ).validate()


# --------------------------------------------------------------------------------------------
# the pipeline the node and the benchmark share


@dataclass(frozen=True)
class GateStep:
    """What one finished task did to plan memory.

    ``decision`` is ``None`` when the updater proposed nothing (no change, or unusable
    output: then ``note`` says why and memory is unchanged). ``llm_calls`` counts calls of
    the updater's LLM for this task.
    """

    episode_id: str
    task_id: str | None
    candidate_version: int | None
    decision: GateDecision | None
    edits: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    note: str = ""
    llm_calls: int = 0

    @property
    def deployed(self) -> bool:
        """True when a candidate was deployed."""
        return self.decision is not None and self.decision.accepted


class PlanGatePipeline:
    """One finished task -> updater -> Janus gate -> deployed or rejected (in the store).

    Args:
        store: plan memory (the gate must have been built with the same store).
        updater: :class:`~glove_ros.core.plan.updater.RuleUpdater` or
            :class:`~glove_ros.core.plan.updater.LlmUpdater` (anything with ``propose`` and
            ``last``).
        gate: :class:`~glove_ros.core.plan.janus.JanusGate` with ``store``.
        stale_retries: when another writer deploys a version while a candidate is being
            gated (the candidate is then rejected as stale), propose the episode again on
            the new version this many times.
    """

    def __init__(self, store: PlanMemoryStore, updater: Any, gate: JanusGate, *,
                 stale_retries: int = 1) -> None:
        if gate.store is not store:
            raise ValueError("the gate must deploy into the same PlanMemoryStore")
        if not hasattr(updater, "propose"):
            raise ValueError("updater must provide propose(store, outcome)")
        self.store = store
        self.updater = updater
        self.gate = gate
        if isinstance(stale_retries, bool) or not isinstance(stale_retries, int) or (
            stale_retries < 0
        ):
            raise ValueError(f"stale_retries must be an int >= 0, got {stale_retries!r}")
        self.stale_retries = stale_retries
        self.steps = 0
        self.llm_calls = 0

    def process(self, outcome: EpisodeOutcome) -> GateStep:
        """Observe the task (for the gate's evaluation set), propose, gate.

        Raises ValueError for a malformed outcome (nothing changes). An updater that fails
        or returns garbage gives a step without a decision; memory is unchanged.
        """
        outcome.validate()
        task = gate_task(outcome.goal)
        if task is not None:
            self.gate.observe_task(task, 1.0 if outcome.success else 0.0,
                                   self.store.active_version)
        self.steps += 1
        before = getattr(self.updater, "last", None)
        calls = 1 if getattr(self.updater, "llm", None) is not None else 0
        try:
            cand = self.updater.propose(self.store, outcome)
        except Exception as exc:  # an LLM backend error must not touch memory
            cand, last = None, None
            note = f"updater failed ({type(exc).__name__}: {exc}); memory unchanged"
        else:
            last = getattr(self.updater, "last", None)
            if last is before:
                last = None
            err = getattr(last, "error", None) if last is not None else None
            note = (f"no candidate: {err}; memory unchanged" if err
                    else "no candidate: the episode changes nothing")
        self.llm_calls += calls
        dropped = tuple(getattr(last, "dropped", ()) or ())
        task_id = task.task_id if task is not None else None
        if cand is None:
            if task is not None:
                self.store.set_state(self.gate.state_key, self.gate.state_dict())
            return GateStep(outcome.episode_id, task_id, None, None, (), dropped, note, calls)
        decision = self.gate.propose(cand)
        for _ in range(self.stale_retries):
            # another writer (e.g. the fast writer) deployed a version while the gate was
            # scoring: the candidate was rejected as stale, not on its merits. Propose the
            # episode again on the new active version.
            if decision.accepted or self.store.active_version == cand.base_version:
                break
            again = self.updater.propose(self.store, outcome)
            if again is None:
                break
            calls += 1 if getattr(self.updater, "llm", None) is not None else 0
            self.llm_calls += 1 if getattr(self.updater, "llm", None) is not None else 0
            cand, decision = again, self.gate.propose(again)
        edits = tuple(f"{e.op} {e.name}" for e in cand.edits)
        return GateStep(outcome.episode_id, task_id, cand.version, decision, edits, dropped,
                        decision.reason, calls)


def rollback_to_parent(store: PlanMemoryStore, reason: str = "operator rollback") -> int:
    """Make the version the active one was built on active again (one step of undo;
    repeat to go further back). Returns it. ValueError when the active version has no
    deployed parent (the initial empty memory)."""
    info = store.version_info()
    if info.parent is None:
        raise ValueError(f"version {info.version} is the first version: nothing to roll back to")
    parent = store.version_info(info.parent)
    if parent.status != "deployed":  # pragma: no cover - a deployed child implies it
        raise ValueError(f"parent version {parent.version} was never deployed")
    return store.rollback(parent.version,
                          reason=f"{reason}: back from {info.version} to {parent.version}")
