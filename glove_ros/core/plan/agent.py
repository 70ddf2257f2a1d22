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

The robot knows the map (waypoints, corridors and their lengths:
:class:`~glove_ros.core.plan.agent_types.WorldMap`), never where the blocks are nor which
corridors are closed: that is what its experience memory is for. Memory is read through
:class:`~glove_ros.core.plan.agent_memory.MemoryView` (``trusted(state_key, action)``: only
entries the verifier trusts; the node implements it with the ``query_memory`` service, the
benchmark with :class:`~glove_ros.core.plan.agent_memory.StoreMemoryView`). The agent never
writes memory itself: every ``on_*`` callback returns the transitions the driver records.

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

How the next goal waypoint is chosen (:class:`~glove_ros.core.plan.agent_policy.GreedyPlanner`;
:class:`~glove_ros.core.plan.agent_policy.LlmPlanner` chooses among the same options and falls
back to it):

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

This module holds the loop (:class:`TaskAgent`, its :class:`AgentConfig` and
:class:`TaskReport`); the vocabulary, the task, the actions and the map are in
:mod:`glove_ros.core.plan.agent_types`, the memory view and beliefs in
:mod:`glove_ros.core.plan.agent_memory`, the option ranking and the greedy / LLM planners in
:mod:`glove_ros.core.plan.agent_policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import look_kind
from glove_ros.core.plan.agent_memory import Beliefs, MemoryView
from glove_ros.core.plan.agent_policy import (
    GreedyPlanner,
    PlanContext,
    PlanDecision,
    check_believed_order,
    rank_options,
)
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_DETOUR,
    OUTCOME_REACHED,
    AgentAction,
    Finish,
    Look,
    NavigateTo,
    Task,
    WorldMap,
    _edge_key,
    _pose_tuple,
    look_names,
)

__all__ = [
    "AgentConfig",
    "TaskAgent",
    "TaskReport",
]


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
    where memory has seen the colour (one missed detection must not fail a task);
    ``believed_order``: of several believed locations, go to the ``nearest`` first (default)
    or to the one looked at ``latest`` (:func:`~glove_ros.core.plan.agent_policy.rank_options`).
    """

    max_steps: int = 30
    belief_threshold: float = 0.5
    blocked_threshold: float = 1.0
    reverify_on_stuck: bool = True
    reverify_detour: float | None = 1.5
    relook: bool = True
    believed_order: str = "nearest"

    def validate(self) -> AgentConfig:
        """Raise ValueError naming the bad field."""
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        for name in ("belief_threshold", "blocked_threshold"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {v!r}")
        check_believed_order(self.believed_order)
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
        world_map: the map (:class:`~glove_ros.core.plan.agent_types.WorldMap`).
        planner: :class:`~glove_ros.core.plan.agent_policy.GreedyPlanner`,
            :class:`~glove_ros.core.plan.agent_policy.LlmPlanner` or anything with ``choose``.
        memory: trusted experience memory (:class:`~glove_ros.core.plan.agent_memory.MemoryView`).
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
        self._look_kind = ""  # "colors" / "objects": the kind of the last look
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
                               avoid, self.config.belief_threshold, self.config.believed_order)
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
                                      f"{self._target_noun()}")
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

    def _target_noun(self) -> str:
        """"red block" for a colour, "cup" for an object class (the kind of the looks seen
        so far; a colour block until the first look)."""
        assert self.task is not None
        if self._look_kind == "objects":
            return self.task.color
        return f"{self.task.color} block"

    def on_look(self, signature: str) -> list[Transition]:
        """Report what the look saw (an outcome signature); returns the look transition.

        RuntimeError when no look is awaited; ValueError for a malformed signature (nothing
        changes then).
        """
        if not isinstance(self._pending, Look):
            raise RuntimeError(f"no look awaited (awaiting {self._pending!r})")
        seen = look_names(signature)
        self._look_kind = look_kind(signature)  # what perception reports, kept across tasks
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
            self._end(True, f"found the {self._target_noun()} at {self.current}")
        return [t]

    def on_navigation(self, outcome: str, at_waypoint: str | None = None,
                      pose: Any = None) -> list[Transition]:
        """Report how the navigation ended; returns the navigation transition (if any).

        ``outcome``: ``reached`` or ``blocked`` (a world fact, remembered), ``detour``
        (arrived at ``at_waypoint`` by a route around the corridor: nothing remembered), or
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
        if outcome == OUTCOME_DETOUR and at_waypoint and self.map.has(at_waypoint):
            # Nav2 arrived by its own route around the corridor: the robot is there, but
            # nothing is known about the corridor itself, so nothing is remembered
            self.current = at_waypoint
            self.pose = new_pose if new_pose is not None else self.pose
            self._need_look = at_waypoint not in self._checked
            self.report.navigations += 1
            self.report.visited.append(at_waypoint)
            if self._goal == at_waypoint:
                self._goal = None
            return []
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
