"""The JetRover task agent: "find the <colour> block" on a known map, planned from memory.

ROS-free and step-based. A driver (the planner node, or the benchmark) owns the robot and the
memory; the agent only decides and says what to remember::

    agent = TaskAgent(WorldMap.from_world(world), GreedyPlanner(), memory, robot_id="rover")
    agent.start(Task("red", id="t1"), at_waypoint="dock", pose=(0.0, 0.0, 0.0))
    while True:
        action = agent.next_action()
        if isinstance(action, Finish):
            break
        if isinstance(action, NavigateTo):           # one corridor: a neighbour waypoint
            result = robot.navigate(action.waypoint)  # the node sends a NavigateToWaypoint goal
            ts = agent.on_navigation(result.outcome, result.final_waypoint, result.pose)
        else:                                        # Look: grab frames, detect, fuse
            ts = agent.on_look(outcome_signature(detections))
        for t in ts:
            memory_writer.record(t)                  # verifier.observe(t) / RecordTransition

The robot knows the map (waypoints, corridors and their lengths: :class:`WorldMap`), never
where the blocks are nor which corridors are closed: that is what its experience memory is
for. Memory is read through :class:`MemoryView` (``trusted(state_key, action)``: only
entries the verifier trusts; the node implements it with the ``query_memory`` service, the
benchmark with :class:`StoreMemoryView`). The agent never writes memory itself: every
``on_*`` callback returns the transitions the driver records.

Transition vocabulary (the memory's language; the verifier compares outcome signatures):

============  ===============  ==============  ===========================  ================
event         state_key        action          action_arg / outcome          reward
============  ===============  ==============  ===========================  ================
look          waypoint W       ``look``        "" / ``colors=blue,red``      1 if the task's
              (robot at W)                     (sorted colours seen,         colour was seen,
                                               ``colors=`` for none)         else 0
navigation    waypoint *from*  ``navigate_to`` neighbour *to* /              0 reached,
(one hop)                                      ``reached`` or ``blocked``    -1 blocked
============  ===============  ==============  ===========================  ================

Every transition carries ``robot_id``, ``episode_id`` (the task id), ``context``
(``"find <colour>"``) and the pose at s when the driver reported one. A look follows every
arrival (including the start of a task) at a waypoint not yet looked at in this task, so
natural visits keep feeding the verifier's evidence for suppressed entries. Navigation is
one corridor per action: a ``blocked`` outcome names exactly one corridor, and the robot is
back at *from*. Other navigation outcomes (cancelled, timeout, battery_empty, ...) are not
world facts and are not remembered.

How the next goal waypoint is chosen (:class:`GreedyPlanner`; :class:`LlmPlanner` chooses
among the same options and falls back to it):

1. believed locations: waypoints whose trusted look memories mostly (``belief_threshold``)
   contain the target colour, nearest first;
2. unexplored waypoints (no trusted look memory: never seen, or suppressed by the verifier),
   nearest first;
3. the rest: where the colour was seen at all first (a minority of looks), then least
   recently seen first.

Waypoints already looked at in this task are skipped; when all were searched in vain, the
ones where memory has seen the colour get one more look (a missed detection must not fail
the task). Routes avoid corridors whose trusted memory (in either direction) is all
``blocked`` (``blocked_threshold``) and those found blocked in this task.

GLOVE's self-confirming exploration deadlock: when waypoints remain that only remembered
blockages keep the robot from, there is no route its trusted memory allows. Instead of
giving up, the agent calls ``reverify(keys)`` (the memory node's ``reverify_negatives``
service; in-process ``GloveVerifier.recheck_negatives(stuck=True)``), re-reads memory and
plans again; it does the same when remembered blockages make the route to its goal a long
detour (``reverify_detour``). At most one call per task; the verifier decides which
negatives are stale enough to re-test, and nothing is forced. A step limit bounds every task.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from glove_ros.core.memory.experience import MemoryEntry, Transition

__all__ = [
    "ACTION_LOOK",
    "ACTION_NAVIGATE",
    "OUTCOME_BLOCKED",
    "OUTCOME_REACHED",
    "AgentAction",
    "AgentConfig",
    "Beliefs",
    "EdgeBelief",
    "Finish",
    "GreedyPlanner",
    "LlmPlanner",
    "LlmPlannerConfig",
    "Look",
    "LookBelief",
    "MemoryView",
    "NavigateTo",
    "PlanContext",
    "PlanDecision",
    "PlanOption",
    "Planner",
    "StoreMemoryView",
    "Task",
    "TaskAgent",
    "TaskReport",
    "WorldMap",
    "build_planner_messages",
    "colors_of",
    "rank_options",
]

#: action of a look at the current waypoint (outcome: ``colors=...``)
ACTION_LOOK = "look"
#: action of a one-corridor navigation (action_arg: the neighbour; outcome reached|blocked)
ACTION_NAVIGATE = "navigate_to"
OUTCOME_REACHED = "reached"
OUTCOME_BLOCKED = "blocked"
_SIGNATURE_PREFIX = "colors="


def colors_of(signature: str) -> frozenset[str]:
    """The colours of a look outcome signature (``"colors=blue,red"`` -> {blue, red}).

    ValueError for a string that is not a look signature.
    """
    if not isinstance(signature, str) or not signature.startswith(_SIGNATURE_PREFIX):
        raise ValueError(f"not a look outcome signature: {signature!r} (expected "
                         "'colors=' followed by comma-separated colours, as "
                         "perception.outcome_signature writes it)")
    body = signature[len(_SIGNATURE_PREFIX):]
    return frozenset(c.strip() for c in body.split(",") if c.strip())


def _edge_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _pose_tuple(pose: Any) -> tuple[float, float, float] | None:
    """A pose as (x, y, yaw): accepts None, a 3-sequence or anything with x, y, yaw."""
    if pose is None:
        return None
    if all(hasattr(pose, k) for k in ("x", "y", "yaw")):
        values = (pose.x, pose.y, pose.yaw)
    else:
        try:
            values = tuple(pose)
        except TypeError:
            raise ValueError(f"pose must be (x, y, yaw) or have x, y, yaw; got {pose!r}") from None
    if len(values) != 3:
        raise ValueError(f"pose must have three values (x, y, yaw), got {pose!r}")
    out = tuple(float(v) for v in values)
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"pose must be finite, got {pose!r}")
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------- task and actions


@dataclass(frozen=True)
class Task:
    """A search task: find the block of ``color``. ``id`` becomes the episode id."""

    color: str
    id: str = ""

    def validate(self) -> Task:
        """Raise ValueError for an empty colour or id with a comma / NUL."""
        if not isinstance(self.color, str) or not self.color.strip() or "," in self.color:
            raise ValueError(f"task colour must be a non-empty colour name, got {self.color!r}")
        if not isinstance(self.id, str) or "\x00" in self.id:
            raise ValueError(f"task id must be a string, got {self.id!r}")
        return self


@dataclass(frozen=True)
class NavigateTo:
    """Drive along one corridor to the neighbour ``waypoint``, on the way to ``goal``.

    ``avoid_edges`` are the corridors the agent routed around (for logging / a navigation
    stack that plans itself); ``reason`` says why ``goal`` was chosen.
    """

    waypoint: str
    goal: str
    reason: str = ""
    avoid_edges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Look:
    """Look at the current ``waypoint``: grab frames, detect blocks, report the signature."""

    waypoint: str


@dataclass(frozen=True)
class Finish:
    """The task is over: ``success`` and a one-line ``reason``."""

    success: bool
    reason: str


AgentAction = NavigateTo | Look | Finish


# --------------------------------------------------------------------------- the map


@dataclass(frozen=True)
class WorldMap:
    """What the robot knows a priori: waypoints with poses and corridors with lengths.

    Never the blocks, never which corridors are closed. Build it from a world with
    :meth:`from_world` (which reads only waypoints, edges and the dock) or directly.
    """

    waypoints: Mapping[str, tuple[float, float, float]]
    edges: Mapping[tuple[str, str], float]
    dock: str = ""

    def __post_init__(self) -> None:
        adjacency: dict[str, list[tuple[str, float]]] = {w: [] for w in self.waypoints}
        for (a, b), length in self.edges.items():
            if a not in adjacency or b not in adjacency:
                raise ValueError(f"edge {a}-{b} names an unknown waypoint")
            if not (isinstance(length, (int, float)) and math.isfinite(length) and length > 0):
                raise ValueError(f"edge {a}-{b}: length must be > 0 m, got {length!r}")
            adjacency[a].append((b, float(length)))
            adjacency[b].append((a, float(length)))
        for lst in adjacency.values():
            lst.sort()
        object.__setattr__(self, "_adj", adjacency)

    @classmethod
    def from_world(cls, world: Any) -> WorldMap:
        """The map of a :class:`~glove_ros.core.world.worldfile.World`: waypoints, corridors, dock.

        The initial ``blocked`` flag of a corridor is ground truth and is not copied.
        """
        wps = {w.id: (float(w.x), float(w.y), float(w.yaw)) for w in world.waypoints}
        edges = {_edge_key(e.a, e.b): float(e.length) for e in world.edges}
        return cls(wps, edges, world.dock)

    @property
    def waypoint_ids(self) -> tuple[str, ...]:
        """Waypoint ids, sorted."""
        return tuple(sorted(self.waypoints))

    def has(self, waypoint: str) -> bool:
        """Whether ``waypoint`` is on the map."""
        return waypoint in self.waypoints

    def neighbors(self, waypoint: str) -> tuple[str, ...]:
        """Waypoints one corridor away, sorted."""
        return tuple(n for n, _ in self._adj[waypoint])  # type: ignore[attr-defined]

    def length(self, a: str, b: str) -> float | None:
        """Length of the corridor a-b, None if there is none."""
        return self.edges.get(_edge_key(a, b))

    def distances(self, start: str, avoid: Iterable[tuple[str, str]] = ()
                  ) -> tuple[dict[str, float], dict[str, str]]:
        """Dijkstra from ``start``: (distance by waypoint, predecessor by waypoint).

        ``avoid`` corridors (either order) are left out. Ties break by waypoint id.
        """
        if start not in self.waypoints:
            raise KeyError(f"unknown waypoint {start!r}")
        skip = {_edge_key(a, b) for a, b in avoid}
        best = {start: 0.0}
        prev: dict[str, str] = {}
        heap = [(0.0, start)]
        done: set[str] = set()
        while heap:
            d, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            for nxt, length in self._adj[node]:  # type: ignore[attr-defined]
                if _edge_key(node, nxt) in skip:
                    continue
                nd = d + length
                if nd < best.get(nxt, math.inf) - 1e-12:
                    best[nxt] = nd
                    prev[nxt] = node
                    heapq.heappush(heap, (nd, nxt))
        return {k: v for k, v in best.items() if k in done}, prev

    def shortest_path(self, start: str, goal: str, avoid: Iterable[tuple[str, str]] = ()
                      ) -> list[str] | None:
        """Waypoints from ``start`` to ``goal`` (both included), or None when cut off."""
        dist, prev = self.distances(start, avoid)
        if goal not in dist:
            return None
        path = [goal]
        while path[-1] != start:
            path.append(prev[path[-1]])
        return path[::-1]


# --------------------------------------------------------------------------- memory


@runtime_checkable
class MemoryView(Protocol):
    """Read access to trusted experience memory (what the planner may retrieve).

    The agent calls ``trusted(action="look")`` and ``trusted(action="navigate_to")`` once per
    planning decision. Return every trusted entry of the filter; an implementation that caps
    the answer (the ``query_memory`` service's ``max_results``) must keep the newest ones,
    and beliefs then reflect only those.
    """

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """Trusted entries matching the filters (None matches everything), newest first."""
        ...


class StoreMemoryView:
    """:class:`MemoryView` over an :class:`~glove_ros.core.memory.store.ExperienceStore`.

    ``limit`` bounds the entries read per call (None: all), like the node's
    ``max_results``.
    """

    def __init__(self, store: Any, limit: int | None = None) -> None:
        self.store = store
        self.limit = limit

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """Trusted entries, newest first (``ExperienceStore.query``)."""
        entries, _ = self.store.query(state_key=state_key, action=action, limit=self.limit)
        return list(entries)


@dataclass(frozen=True)
class LookBelief:
    """What trusted look memories say about one waypoint.

    ``counts`` maps outcome signature -> trusted entries; ``last_id`` is the newest entry id
    (recency of the waypoint's memory).
    """

    waypoint: str
    counts: Mapping[str, int]
    last_id: int

    @property
    def n(self) -> int:
        """Number of trusted looks."""
        return sum(self.counts.values())

    def share(self, color: str) -> float:
        """Fraction of trusted looks that saw ``color``."""
        n = self.n
        if n == 0:
            return 0.0
        return sum(k for o, k in self.counts.items() if color in colors_of(o)) / n

    @property
    def majority(self) -> str:
        """The most frequent outcome (ties: the lexically smallest)."""
        return min(self.counts, key=lambda o: (-self.counts[o], o)) if self.counts else ""


@dataclass(frozen=True)
class EdgeBelief:
    """What trusted navigation memories say about one corridor.

    ``directions`` maps (from, to) -> (reached, blocked) counts of trusted entries; the
    verifier keeps each direction as its own (state, action) group.
    """

    edge: tuple[str, str]
    directions: Mapping[tuple[str, str], tuple[int, int]]

    @property
    def reached(self) -> int:
        """Trusted ``reached`` entries, both directions."""
        return sum(r for r, _ in self.directions.values())

    @property
    def blocked(self) -> int:
        """Trusted ``blocked`` entries, both directions."""
        return sum(b for _, b in self.directions.values())

    @property
    def blocked_share(self) -> float:
        """The largest fraction of blocked attempts over the two directions (a corridor is
        as blocked as the more pessimistic direction remembers)."""
        return max((b / (r + b) for r, b in self.directions.values() if r + b), default=0.0)

    @property
    def blocked_keys(self) -> tuple[tuple[str, str, str], ...]:
        """(state_key, action, action_arg) of the directions with blocked memories."""
        return tuple(sorted((a, ACTION_NAVIGATE, b) for (a, b), (_, blk)
                            in self.directions.items() if blk))


@dataclass(frozen=True)
class Beliefs:
    """A snapshot of trusted memory, summarised for planning."""

    looks: Mapping[str, LookBelief]
    edges: Mapping[tuple[str, str], EdgeBelief]
    blocked_threshold: float = 1.0

    @classmethod
    def from_entries(cls, looks: Iterable[MemoryEntry], navs: Iterable[MemoryEntry],
                     world_map: WorldMap, blocked_threshold: float = 1.0) -> Beliefs:
        """Summarise trusted look and navigate_to entries; ones off the map are ignored."""
        counts: dict[str, dict[str, int]] = {}
        last: dict[str, int] = {}
        for e in looks:
            t = e.transition
            if t.action != ACTION_LOOK or not world_map.has(t.state_key):
                continue
            try:
                colors_of(t.outcome)
            except ValueError:
                continue
            c = counts.setdefault(t.state_key, {})
            c[t.outcome] = c.get(t.outcome, 0) + 1
            last[t.state_key] = max(last.get(t.state_key, 0), int(e.id))
        edge_counts: dict[tuple[str, str], dict[tuple[str, str], list[int]]] = {}
        for e in navs:
            t = e.transition
            if t.action != ACTION_NAVIGATE or world_map.length(t.state_key, t.action_arg) is None:
                continue
            per = edge_counts.setdefault(_edge_key(t.state_key, t.action_arg), {})
            rec = per.setdefault((t.state_key, t.action_arg), [0, 0])
            if t.outcome == OUTCOME_REACHED:
                rec[0] += 1
            elif t.outcome == OUTCOME_BLOCKED:
                rec[1] += 1
        return cls(
            {w: LookBelief(w, c, last[w]) for w, c in counts.items()},
            {k: EdgeBelief(k, {d: (r, b) for d, (r, b) in per.items()})
             for k, per in edge_counts.items()},
            blocked_threshold,
        )

    @property
    def blocked_edges(self) -> frozenset[tuple[str, str]]:
        """Corridors whose trusted memory (in some direction) is at least
        ``blocked_threshold`` blocked."""
        return frozenset(k for k, b in self.edges.items()
                         if b.blocked and b.blocked_share >= self.blocked_threshold)


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class PlanOption:
    """One goal the planner may choose: a reachable waypoint not yet looked at this task.

    ``kind`` is ``believed`` (memory says the target is there), ``unexplored`` or ``stale``
    (memory says something else; re-checked least recently seen first); ``share`` the
    fraction of trusted looks there that saw the target; ``distance`` metres by the route
    memory allows.
    """

    waypoint: str
    kind: str
    distance: float
    share: float = 0.0
    last_id: int = 0
    memory: str = ""  # majority outcome, "" when unexplored


_KIND_ORDER = {"believed": 0, "unexplored": 1, "stale": 2}


@dataclass(frozen=True)
class PlanContext:
    """Everything a planner sees for one decision."""

    task: Task
    current: str
    world_map: WorldMap
    beliefs: Beliefs
    options: tuple[PlanOption, ...]  # ranked by the greedy rule, best first
    checked: frozenset[str]
    avoid: frozenset[tuple[str, str]]
    step: int


@dataclass(frozen=True)
class PlanDecision:
    """A planner's answer: the chosen ``goal`` (None: no option) and why.

    ``source`` is ``greedy``, ``llm`` or ``fallback`` (the LLM's output was unusable and the
    greedy choice was taken; ``fallback_reason`` says why).
    """

    goal: str | None
    reason: str
    source: str = "greedy"
    fallback_reason: str = ""
    elapsed_s: float = 0.0


def rank_options(world_map: WorldMap, beliefs: Beliefs, current: str, color: str,
                 checked: Iterable[str], avoid: Iterable[tuple[str, str]],
                 belief_threshold: float = 0.5) -> tuple[PlanOption, ...]:
    """Reachable waypoints not looked at this task, best first (the greedy rule).

    Believed target locations (share >= ``belief_threshold``) nearest first, then unexplored
    waypoints nearest first, then the rest: those where the colour was seen at all first
    (larger share first), then least recently seen first (ties: nearest).
    """
    dist, _ = world_map.distances(current, avoid)
    done = set(checked)
    out = []
    for w, d in dist.items():
        if w == current or w in done:
            continue
        lb = beliefs.looks.get(w)
        if lb is None or lb.n == 0:
            out.append(PlanOption(w, "unexplored", d))
            continue
        share = lb.share(color)
        kind = "believed" if share >= belief_threshold else "stale"
        out.append(PlanOption(w, kind, d, share, lb.last_id, lb.majority))

    def key(o: PlanOption) -> tuple[Any, ...]:
        if o.kind == "believed":
            return (0, o.distance, -o.share, o.waypoint)
        if o.kind == "unexplored":
            return (1, o.distance, 0, o.waypoint)
        return (2, -o.share, o.last_id, o.distance, o.waypoint)

    return tuple(sorted(out, key=key))


class Planner(Protocol):
    """Chooses the next goal waypoint among ``ctx.options``."""

    name: str

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """Pick a goal (or None when there is no option)."""
        ...


def _describe(o: PlanOption, color: str) -> str:
    if o.kind == "believed":
        return f"{o.waypoint}: memory says the {color} block is there ({o.share:.0%} of looks)"
    if o.kind == "unexplored":
        return f"{o.waypoint}: unexplored"
    seen = ", ".join(sorted(colors_of(o.memory))) if o.memory else ""
    if o.share > 0:
        return (f"{o.waypoint}: the {color} block was seen there in {o.share:.0%} of looks, "
                f"mostly {seen or 'nothing'}")
    return f"{o.waypoint}: memory says {seen or 'nothing'} there"


class GreedyPlanner:
    """Deterministic planner: the first option of :func:`rank_options`."""

    name = "greedy"

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """The best-ranked option."""
        if not ctx.options:
            return PlanDecision(None, "no reachable waypoint left to look at")
        best = ctx.options[0]
        return PlanDecision(best.waypoint, _describe(best, ctx.task.color))


@dataclass(frozen=True)
class LlmPlannerConfig:
    """Bounds of one LLM planning call.

    ``max_prompt_tokens`` budgets the user prompt (memory lines are dropped, least relevant
    first, to fit); ``max_tokens`` bounds the reply; a call slower than ``timeout_s`` is
    treated as unusable; ``max_options`` caps the options offered (best-ranked kept).
    """

    max_prompt_tokens: int = 400
    max_tokens: int = 32
    timeout_s: float = 20.0
    max_options: int = 12

    def validate(self) -> LlmPlannerConfig:
        """Raise ValueError naming the bad field."""
        if not isinstance(self.max_prompt_tokens, int) or self.max_prompt_tokens < 64:
            raise ValueError(f"max_prompt_tokens must be an int >= 64, got "
                             f"{self.max_prompt_tokens!r}")
        if not isinstance(self.max_tokens, int) or not 8 <= self.max_tokens <= 512:
            raise ValueError(f"max_tokens must be an int in 8..512 (a waypoint choice is "
                             f"~10 tokens), got {self.max_tokens!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if not isinstance(self.max_options, int) or self.max_options < 1:
            raise ValueError(f"max_options must be an int >= 1, got {self.max_options!r}")
        return self


_SYSTEM_PROMPT = (
    "You are the planner of a small indoor robot that searches for coloured blocks. "
    "Choose the next waypoint to drive to. Prefer a waypoint where memory says the block "
    "is; otherwise an unexplored one; prefer near ones. Answer with JSON only: "
    '{"waypoint": "<one of the options>"}.'
)


def build_planner_messages(ctx: PlanContext, options: Sequence[PlanOption],
                           budget_tokens: int, count: Callable[[str], int]
                           ) -> list[dict[str, str]]:
    """Chat messages for one decision, the user prompt within ``budget_tokens``.

    The prompt holds the task, the current waypoint, the options (one line each, with what
    memory says and the distance) and then a compact memory summary (other waypoints'
    looks, corridors remembered blocked), most relevant first, cut to the budget. The
    options are always kept (at least the first one).
    """
    color = ctx.task.color
    head = [f"Task: find the {color} block.", f"Robot is at: {ctx.current}."]
    if ctx.checked:
        head.append("Already looked at in this task: " + ", ".join(sorted(ctx.checked)) + ".")
    head.append("Options:")
    lines = list(head)
    opt_lines = [f"- {_describe(o, color)}, {o.distance:.1f} m" for o in options]
    memory_lines = []
    offered = {o.waypoint for o in options}
    for w, lb in sorted(ctx.beliefs.looks.items(),
                        key=lambda kv: (-kv[1].share(color), kv[0])):
        if w in offered:
            continue
        memory_lines.append(f"- {w}: saw {lb.majority[len(_SIGNATURE_PREFIX):] or 'nothing'}"
                            f" ({lb.n} looks)")
    for k in sorted(ctx.beliefs.blocked_edges):
        memory_lines.append(f"- corridor {k[0]}-{k[1]}: remembered blocked")

    def size(ls: Sequence[str]) -> int:
        return count("\n".join(ls))

    lines.append(opt_lines[0])
    for ol in opt_lines[1:]:
        if size([*lines, ol]) > budget_tokens:
            break
        lines.append(ol)
    if memory_lines and size([*lines, "Memory of other places:"]) <= budget_tokens:
        lines.append("Memory of other places:")
        for ml in memory_lines:
            if size([*lines, ml]) > budget_tokens:
                break
            lines.append(ml)
    return [{"role": "system", "content": _SYSTEM_PROMPT},
            {"role": "user", "content": "\n".join(lines)}]


class LlmPlanner:
    """Planner that asks a local LLM (:class:`~glove_ros.core.llm.runtime.JsonLlm`) for the goal.

    The prompt (:mod:`glove_ros.core.llm.prompts`) is a static prefix (rules and worked
    examples, reused from llama.cpp's KV cache) and the decision: the options, each with
    what memory says about the target there as short facts with status and age, and the
    plan-memory notes (:attr:`notes`, set by
    :class:`~glove_ros.core.plan.plan_planner.PlanAwarePlanner`). With ``history`` (a callable
    waypoint -> look entries *including* suppressed and replaced ones, and ``now`` its clock)
    the facts show stale memories as such, with the verifier's reason; without it they come
    from the trusted beliefs of the context. Options beyond the prompt budget
    (``max_prompt_tokens``) are dropped, worst-ranked first.

    The reply is constrained by :func:`~glove_ros.core.llm.prompts.decision_schema`
    (``{"rule", "waypoint"}``, the waypoint one the named rule allows). An error (invalid
    JSON, schema violation, token bound, llama.cpp error), a waypoint that is not an option
    or a reply slower than ``config.timeout_s`` falls back to :class:`GreedyPlanner`; the
    decision says so (``source="fallback"``, ``fallback_reason`` "<kind>: <detail>") and
    :attr:`fallbacks` counts it by kind: ``llm output unusable``, ``llm too slow``,
    ``llm choice not an option``, ``llm raised <Exception>``.
    With a single option the LLM is not asked.
    """

    name = "llm"

    def __init__(self, llm: Any, config: LlmPlannerConfig | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 history: Callable[[str], Sequence[MemoryEntry]] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.llm = llm
        self.config = (config or LlmPlannerConfig()).validate()
        self.greedy = GreedyPlanner()
        self.clock = clock
        self.calls = 0
        self.fallbacks: dict[str, int] = {}
        self.last_messages: list[dict[str, str]] = []
        self.notes: list[Any] = []
        self.history = history
        self.now = now
        self._schema: dict[str, Any] = {}

    @property
    def fallback_count(self) -> int:
        """Total decisions that fell back to greedy."""
        return sum(self.fallbacks.values())

    def set_notes(self, entries: Iterable[Any]) -> None:
        """Plan-memory entries (``PlanEntry``-like) the prompt shows as notes."""
        self.notes = list(entries)

    def _count(self, text: str) -> int:
        counter = getattr(self.llm, "count_tokens", None)
        if counter is not None:
            return int(counter(text))
        from glove_ros.core.llm.runtime import approx_tokens

        return approx_tokens(text)

    def messages(self, ctx: PlanContext, options: Sequence[PlanOption]
                 ) -> list[dict[str, str]]:
        """The chat messages of one decision (static prefix + this decision)."""
        from glove_ros.core.llm.prompts import (
            VERIFIED,
            Fact,
            FactSource,
            OptionView,
            decision_messages,
            decision_schema,
            notes_from_entries,
        )

        color = ctx.task.color
        source = FactSource(self.history, self.now) if self.history is not None else None
        views = []
        for o in options:
            if source is not None:
                facts = source.facts(o.waypoint)
            else:
                lb = ctx.beliefs.looks.get(o.waypoint)
                facts = tuple(Fact(tuple(sorted(colors_of(out))), VERIFIED, None, n)
                              for out, n in sorted((lb.counts if lb else {}).items()))
            views.append(OptionView(o.waypoint, o.distance, facts))
        notes = notes_from_entries(self.notes, color)
        extra = []
        if ctx.checked:
            extra.append("Already looked at: " + ", ".join(sorted(ctx.checked)) + ".")
        msgs = decision_messages(color, ctx.current, views, notes, extra)
        while len(views) > 1 and self._count(msgs[-1]["content"]) > self.config.max_prompt_tokens:
            views.pop()
            msgs = decision_messages(color, ctx.current, views, notes, extra)
        self._schema = decision_schema(color, views, notes)
        return msgs

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """Ask the LLM; fall back to the greedy choice on unusable output."""
        options = ctx.options[: self.config.max_options]
        if len(options) <= 1:
            return self.greedy.choose(ctx)
        messages, schema = self.messages(ctx, options), self._schema
        self.last_messages = messages
        self.calls += 1
        t0 = self.clock()
        try:
            result = self.llm.complete_json(messages, schema, max_tokens=self.config.max_tokens)
        except Exception as exc:  # a backend must not stop the robot
            return self._fallback(ctx, f"llm raised {type(exc).__name__}", str(exc),
                                  self.clock() - t0)
        elapsed = max(self.clock() - t0, float(getattr(result, "elapsed_s", 0.0) or 0.0))
        err = getattr(result, "error", "unknown error")
        data = getattr(result, "data", None)
        if err is not None or data is None:
            return self._fallback(ctx, "llm output unusable", str(err), elapsed)
        if elapsed > self.config.timeout_s:
            return self._fallback(ctx, "llm too slow",
                                  f"{elapsed:.1f} s > {self.config.timeout_s:g} s", elapsed)
        choice = data.get("waypoint") if isinstance(data, dict) else None
        valid = {o.waypoint: o for o in options}
        if choice not in valid:
            return self._fallback(ctx, "llm choice not an option", f"chose {choice!r}",
                                  elapsed)
        return PlanDecision(choice, "llm: " + _describe(valid[choice], ctx.task.color),
                            source="llm", elapsed_s=elapsed)

    def _fallback(self, ctx: PlanContext, kind: str, detail: str, elapsed: float
                  ) -> PlanDecision:
        """The greedy decision, marked as a fallback; counted under ``kind``."""
        self.fallbacks[kind] = self.fallbacks.get(kind, 0) + 1
        g = self.greedy.choose(ctx)
        return PlanDecision(g.goal, g.reason, source="fallback",
                            fallback_reason=f"{kind}: {detail}", elapsed_s=elapsed)


# --------------------------------------------------------------------------- the agent


@dataclass(frozen=True)
class AgentConfig:
    """Behaviour of :class:`TaskAgent`.

    ``max_steps``: actions (navigations + looks) per task before it fails;
    ``belief_threshold``: share of trusted looks that must have seen the colour for a
    waypoint to count as its believed location; ``blocked_threshold``: share of trusted
    navigation memories of a corridor (in either direction) that must be ``blocked`` to
    route around it (default 1: every trusted memory of that direction says blocked; a
    mixed memory keeps being tried, and the verifier removes the refuted ``reached``
    entries once the blockage is confirmed);
    ``reverify_on_stuck``: call ``reverify`` when only remembered blockages stand in the
    way (once per task); ``reverify_detour``: also call it when remembered blockages make
    the route to the chosen goal more than this many times longer than the map's shortest
    route (None: never; the verifier decides which negatives are stale enough to re-test);
    ``relook``: when every reachable waypoint was searched in vain, look once more at those
    where memory has seen the colour (one missed detection must not fail a task).
    """

    max_steps: int = 30
    belief_threshold: float = 0.5
    blocked_threshold: float = 1.0
    reverify_on_stuck: bool = True
    reverify_detour: float | None = 1.5
    relook: bool = True

    def validate(self) -> AgentConfig:
        """Raise ValueError naming the bad field."""
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        for name in ("belief_threshold", "blocked_threshold"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {v!r}")
        d = self.reverify_detour
        if d is not None and (not isinstance(d, (int, float)) or not d > 1.0):
            raise ValueError(f"reverify_detour must be a ratio > 1 or None, got {d!r}")
        return self


@dataclass
class TaskReport:
    """What happened in one task (for logs, the node's status and the benchmark)."""

    task: Task
    start: str
    success: bool = False
    reason: str = ""
    steps: int = 0
    navigations: int = 0
    looks: int = 0
    blocked: int = 0
    decisions: int = 0
    llm_decisions: int = 0
    fallbacks: int = 0
    fallback_reasons: list[str] = field(default_factory=list)
    reverify_calls: int = 0
    first_goal: str = ""
    first_goal_kind: str = ""
    goals: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    found_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "task": {"color": self.task.color, "id": self.task.id}, "start": self.start,
            "success": self.success, "reason": self.reason, "steps": self.steps,
            "navigations": self.navigations, "looks": self.looks, "blocked": self.blocked,
            "decisions": self.decisions, "llm_decisions": self.llm_decisions,
            "fallbacks": self.fallbacks, "fallback_reasons": list(self.fallback_reasons),
            "reverify_calls": self.reverify_calls, "first_goal": self.first_goal,
            "first_goal_kind": self.first_goal_kind, "goals": list(self.goals),
            "visited": list(self.visited), "found_at": self.found_at,
        }


#: ``reverify(keys) -> bool``: re-verify the given stale negative memories (keys are
#: (state_key, action, action_arg)); True when something was done and memory may have changed.
#: It may move the robot (a synchronous probe re-drives it); the driver then reports the new
#: place with :meth:`TaskAgent.relocate` before returning.
ReverifyFn = Callable[[list[tuple[str, str, str]]], bool]


class TaskAgent:
    """Step-based task agent (see the module docstring for the loop and the vocabulary).

    Args:
        world_map: the map (:class:`WorldMap`).
        planner: :class:`GreedyPlanner`, :class:`LlmPlanner` or anything with ``choose``.
        memory: trusted experience memory (:class:`MemoryView`).
        robot_id: stamped on every transition.
        config: :class:`AgentConfig`.
        reverify: ``reverify(keys) -> bool``, called when only remembered blockages keep
            the robot from waypoints, or make its route a long detour (GLOVE deadlock rule);
            None: give up / keep the detour instead.
        start_waypoint: where the robot stands (default: the map's dock).

    ``report`` is the current task's :class:`TaskReport`; ``reports`` keeps the last
    :attr:`MAX_REPORTS`.
    """

    MAX_REPORTS = 100

    def __init__(self, world_map: WorldMap, planner: Any, memory: MemoryView,
                 robot_id: str = "robot", *, config: AgentConfig | None = None,
                 reverify: ReverifyFn | None = None, start_waypoint: str | None = None) -> None:
        self.map = world_map
        self.planner = planner
        self.memory = memory
        self.robot_id = robot_id
        self.config = (config or AgentConfig()).validate()
        self.reverify = reverify
        start = start_waypoint or world_map.dock
        if start and not world_map.has(start):
            raise ValueError(f"start waypoint {start!r} is not on the map")
        self.current: str | None = start or None
        self.pose: tuple[float, float, float] | None = None
        self.task: Task | None = None
        self.report: TaskReport | None = None
        self.reports: list[TaskReport] = []
        self._pending: AgentAction | None = None
        self._finish: Finish | None = None
        self._need_look = False
        self._goal: str | None = None
        self._goal_reason = ""
        self._checked: set[str] = set()
        self._task_blocked: set[tuple[str, str]] = set()
        self._reverified = False
        self._relooked: set[str] = set()

    # ------------------------------------------------------------------ task lifecycle

    @property
    def active(self) -> bool:
        """A task is started and not finished."""
        return self.task is not None and self._finish is None

    @property
    def finished(self) -> Finish | None:
        """The Finish of the current task, None while it runs."""
        return self._finish

    @property
    def awaiting(self) -> AgentAction | None:
        """The action whose result the agent waits for (None when it can decide)."""
        return self._pending

    def start(self, task: Task, at_waypoint: str | None = None, pose: Any = None) -> None:
        """Begin ``task``; the robot stands at ``at_waypoint`` (default: where it last was).

        A task still running is abandoned (reported as failed). ValueError for a bad task
        or an unknown waypoint; nothing changes then.
        """
        task.validate()
        where = at_waypoint if at_waypoint is not None else self.current
        if not where or not self.map.has(where):
            raise ValueError(f"cannot start: robot position {where!r} is not a waypoint of the "
                             "map (drive it to a waypoint first)")
        p = _pose_tuple(pose)
        if self.active:
            self._end(False, "abandoned for a new task")
        self.task = task
        if p is not None:
            self.pose = p
        elif where != self.current:
            self.pose = None  # the old pose belongs to another place
        self.current = where
        self.report = TaskReport(task, where)
        self.reports.append(self.report)
        del self.reports[:-self.MAX_REPORTS]
        self._pending = None
        self._finish = None
        self._need_look = True
        self._goal = None
        self._checked = set()
        self._task_blocked = set()
        self._reverified = False
        self._relooked = set()
        self.report.visited.append(where)

    def relocate(self, waypoint: str, pose: Any = None) -> None:
        """The driver moved the robot outside the agent's actions (a probe, docking, a
        person carrying it): it now stands at ``waypoint``.

        During a task, arriving at a waypoint not yet looked at schedules a look there.
        RuntimeError while a result is awaited; ValueError for an unknown waypoint.
        """
        if self._pending is not None:
            raise RuntimeError(f"cannot relocate while awaiting {self._pending!r}")
        if not self.map.has(waypoint):
            raise ValueError(f"unknown waypoint {waypoint!r}")
        p = _pose_tuple(pose)
        if waypoint == self.current:
            if p is not None:
                self.pose = p
            return
        self.current = waypoint
        self.pose = p
        if self.active:
            assert self.report is not None
            self.report.visited.append(waypoint)
            self._need_look = waypoint not in self._checked

    def _end(self, success: bool, reason: str) -> Finish:
        assert self.report is not None
        self._finish = Finish(success, reason)
        self._pending = None
        self.report.success = success
        self.report.reason = reason
        return self._finish

    # ------------------------------------------------------------------ deciding

    def beliefs(self) -> Beliefs:
        """Read trusted memory now and summarise it."""
        looks = self.memory.trusted(action=ACTION_LOOK)
        navs = self.memory.trusted(action=ACTION_NAVIGATE)
        return Beliefs.from_entries(looks, navs, self.map, self.config.blocked_threshold)

    def _context(self, beliefs: Beliefs) -> PlanContext:
        assert self.task is not None and self.current is not None
        avoid = frozenset(beliefs.blocked_edges | self._task_blocked)
        options = rank_options(self.map, beliefs, self.current, self.task.color, self._checked,
                               avoid, self.config.belief_threshold)
        return PlanContext(self.task, self.current, self.map, beliefs, options,
                           frozenset(self._checked), avoid,
                           self.report.steps if self.report else 0)

    def _stale_negatives(self, beliefs: Beliefs) -> list[tuple[str, str, str]]:
        """Keys of remembered blockages that alone cut the robot off unchecked waypoints."""
        assert self.current is not None
        only_task, _ = self.map.distances(self.current, self._task_blocked)
        cut = [w for w in only_task if w not in self._checked and w != self.current]
        if not cut:
            return []
        with_memory, _ = self.map.distances(self.current,
                                            beliefs.blocked_edges | self._task_blocked)
        if all(w in with_memory for w in cut):
            return []
        keys: set[tuple[str, str, str]] = set()
        for k in beliefs.blocked_edges - self._task_blocked:
            keys.update(beliefs.edges[k].blocked_keys)
        return sorted(keys)

    def next_action(self) -> AgentAction:
        """The next action. Idempotent while a result is awaited (returns the same action).

        RuntimeError before :meth:`start`.
        """
        if self.task is None or self.report is None:
            raise RuntimeError("no task: call start(task) first")
        if self._finish is not None:
            return self._finish
        if self._pending is not None:
            return self._pending
        if self.report.steps >= self.config.max_steps:
            return self._end(False, f"step limit ({self.config.max_steps}) reached")
        assert self.current is not None
        if self._need_look:
            self._pending = Look(self.current)
            self.report.steps += 1
            return self._pending
        ctx = self._context(self.beliefs())
        if self._goal is not None and self._goal not in {o.waypoint for o in ctx.options}:
            self._goal = None
        if self._goal is None:
            ctx, finish = self._choose_goal(ctx)
            if finish is not None:
                return finish
            if self._need_look:  # re-verification moved the robot (a probe): look first
                self._pending = Look(self.current)
                self.report.steps += 1
                return self._pending
        assert self._goal is not None
        path = self.map.shortest_path(self.current, self._goal, ctx.avoid)
        assert path is not None and len(path) >= 2
        self._pending = NavigateTo(path[1], self._goal, self._goal_reason,
                                   tuple(sorted(ctx.avoid)))
        self.report.steps += 1
        return self._pending

    def _call_reverify(self, keys: list[tuple[str, str, str]]) -> bool:
        """Ask the memory to re-verify stale negatives (once per task); True if it acted."""
        assert self.report is not None
        if self.reverify is None or self._reverified or not keys:
            return False
        self._reverified = True
        self.report.reverify_calls += 1
        return bool(self.reverify(keys))

    def _choose_goal(self, ctx: PlanContext) -> tuple[PlanContext, Finish | None]:
        """Pick a new goal (setting ``_goal``), or finish the task when none is left."""
        assert self.task is not None and self.report is not None and self.current is not None
        if not ctx.options:
            stale = self._stale_negatives(ctx.beliefs)
            if stale and self.config.reverify_on_stuck:
                try:
                    if self._call_reverify(stale):
                        if self._need_look:  # the driver relocated the robot (a probe)
                            return ctx, None
                        ctx = self._context(self.beliefs())
                except Exception as exc:  # the memory service may be down
                    return ctx, self._end(False, "no route memory allows; re-verification "
                                          f"failed: {exc}")
            if not ctx.options and not stale:
                ctx = self._relook(ctx)
                if self._need_look:
                    return ctx, None
            if not ctx.options:
                if stale:
                    return ctx, self._end(
                        False, "no route its trusted memory allows to "
                        f"{len(self._unchecked())} unchecked waypoint(s) (remembered blocked "
                        "corridors)")
                return ctx, self._end(False, "searched every reachable waypoint; no "
                                      f"{self.task.color} block")
        decision = self._decide(ctx)
        detour = self._detour_negatives(ctx, decision.goal)
        if detour:
            try:
                if self._call_reverify(detour):
                    if self._need_look:  # the driver relocated the robot (a probe)
                        return ctx, None
                    ctx = self._context(self.beliefs())
                    decision = self._decide(ctx)
            except Exception:  # a failed re-verification leaves the detour
                pass
        valid = {o.waypoint: o for o in ctx.options}
        self._goal = decision.goal
        self._goal_reason = decision.reason
        assert self._goal is not None
        if not self.report.first_goal:
            self.report.first_goal = self._goal
            self.report.first_goal_kind = valid[self._goal].kind
        self.report.goals.append(self._goal)
        return ctx, None

    def _relook(self, ctx: PlanContext) -> PlanContext:
        """Everything was searched in vain: once per task and place, look again where memory
        has seen the colour (a missed detection must not fail the task)."""
        assert self.task is not None and self.current is not None
        if not self.config.relook:
            return ctx
        again = {w for w in self._checked - self._relooked
                 if w in ctx.beliefs.looks and ctx.beliefs.looks[w].share(self.task.color) > 0}
        if not again:
            return ctx
        self._relooked |= again
        self._checked -= again
        if self.current in again:
            self._need_look = True  # look again right here first
        return self._context(ctx.beliefs)

    def _decide(self, ctx: PlanContext) -> PlanDecision:
        """Ask the planner; count LLM decisions and fallbacks; never return a bad goal."""
        assert self.report is not None
        decision = self.planner.choose(ctx)
        self.report.decisions += 1
        if decision.source == "llm":
            self.report.llm_decisions += 1
        elif decision.source == "fallback":
            self.report.fallbacks += 1
            self.report.fallback_reasons.append(decision.fallback_reason)
        if decision.goal not in {o.waypoint for o in ctx.options}:
            decision = GreedyPlanner().choose(ctx)  # a custom planner went astray
        return decision

    def _detour_negatives(self, ctx: PlanContext, goal: str | None
                          ) -> list[tuple[str, str, str]]:
        """Keys of remembered blockages that make the route to ``goal`` a long detour."""
        ratio = self.config.reverify_detour
        if ratio is None or goal is None or self.reverify is None or self._reverified:
            return []
        assert self.current is not None
        remembered = ctx.beliefs.blocked_edges - self._task_blocked
        if not remembered:
            return []
        open_path = self.map.shortest_path(self.current, goal, self._task_blocked)
        mem_path = self.map.shortest_path(self.current, goal, ctx.avoid)
        if open_path is None or mem_path is None:
            return []
        if self.map_length(mem_path) <= ratio * self.map_length(open_path):
            return []
        on_route = {_edge_key(a, b) for a, b in zip(open_path[:-1], open_path[1:], strict=True)}
        keys: set[tuple[str, str, str]] = set()
        for k in remembered & on_route:
            keys.update(ctx.beliefs.edges[k].blocked_keys)
        return sorted(keys)

    def map_length(self, path: Sequence[str]) -> float:
        """Length of a waypoint path on the map, metres."""
        return sum(self.map.length(a, b) or 0.0 for a, b in zip(path[:-1], path[1:],
                                                                strict=True))

    def _unchecked(self) -> list[str]:
        return [w for w in self.map.waypoint_ids if w not in self._checked]

    # ------------------------------------------------------------------ feedback

    def _transition(self, state_key: str, action: str, outcome: str, action_arg: str = "",
                    reward: float = 0.0, pose: tuple[float, float, float] | None = None
                    ) -> Transition:
        assert self.task is not None
        return Transition(state_key=state_key, action=action, outcome=outcome,
                          action_arg=action_arg, robot_id=self.robot_id,
                          episode_id=self.task.id, pose=pose,
                          context=f"find {self.task.color}", reward=reward)

    def on_look(self, signature: str) -> list[Transition]:
        """Report what the look saw (an outcome signature); returns the look transition.

        RuntimeError when no look is awaited; ValueError for a malformed signature (nothing
        changes then).
        """
        if not isinstance(self._pending, Look):
            raise RuntimeError(f"no look awaited (awaiting {self._pending!r})")
        seen = colors_of(signature)
        assert self.task is not None and self.report is not None and self.current is not None
        found = self.task.color in seen
        t = self._transition(self.current, ACTION_LOOK, signature,
                             reward=1.0 if found else 0.0, pose=self.pose)
        self._pending = None
        self._need_look = False
        self._checked.add(self.current)
        self.report.looks += 1
        if found:
            self.report.found_at = self.current
            self._end(True, f"found the {self.task.color} block at {self.current}")
        return [t]

    def on_navigation(self, outcome: str, at_waypoint: str | None = None,
                      pose: Any = None) -> list[Transition]:
        """Report how the navigation ended; returns the navigation transition (if any).

        ``outcome``: ``reached`` or ``blocked`` (a world fact, remembered), or
        ``cancelled`` / ``timeout`` (retried by replanning), ``battery_empty`` /
        ``unreachable`` / ``unknown_waypoint`` / anything else (the task fails); none of
        these is remembered. ``at_waypoint`` is where the robot ended up ("" or None:
        unknown, taken from the outcome); ``pose`` the pose there.
        RuntimeError when no navigation is awaited; ValueError for inconsistent input.
        """
        nav = self._pending
        if not isinstance(nav, NavigateTo):
            raise RuntimeError(f"no navigation awaited (awaiting {nav!r})")
        assert self.report is not None and self.current is not None
        new_pose = _pose_tuple(pose)
        src, dst = self.current, nav.waypoint
        if outcome == OUTCOME_REACHED:
            if at_waypoint and at_waypoint != dst:
                raise ValueError(f"navigation to {dst!r} reached, but the robot reports "
                                 f"being at {at_waypoint!r}")
            t = self._transition(src, ACTION_NAVIGATE, OUTCOME_REACHED, dst, 0.0, self.pose)
            self._pending = None
            self.current = dst
            self.pose = new_pose
            self._need_look = dst not in self._checked
            self.report.navigations += 1
            self.report.visited.append(dst)
            if self._goal == dst:
                self._goal = None
            return [t]
        if outcome == OUTCOME_BLOCKED:
            back = at_waypoint or src
            if not self.map.has(back):
                raise ValueError(f"blocked navigation left the robot at unknown {back!r}")
            t = self._transition(src, ACTION_NAVIGATE, OUTCOME_BLOCKED, dst, -1.0, self.pose)
            self._pending = None
            self._task_blocked.add(_edge_key(src, dst))
            self.report.navigations += 1
            self.report.blocked += 1
            if back != src:
                self.current = back
                self._need_look = back not in self._checked
            if new_pose is not None:
                self.pose = new_pose
            self._goal = None
            return [t]
        self._pending = None
        if outcome in ("cancelled", "timeout"):
            if not at_waypoint or not self.map.has(at_waypoint):
                self._end(False, f"navigation {outcome}; robot is not at a waypoint")
                return []
            if at_waypoint != self.current:
                self.current = at_waypoint
                self._need_look = at_waypoint not in self._checked
            if new_pose is not None:
                self.pose = new_pose
            return []
        self._end(False, f"navigation failed: {outcome}")
        return []
