"""Open instructions, the running part: a checked plan step by step, and the decisions the
single-request paths and plan steps share (what memory says, a constrained drive, a dock's
result, the corridors driven).

:func:`run_plan` runs a :class:`~glove_ros.core.plan.instructions.Plan` through the
driver's ``run_step`` (the planner node: the single-request code paths under the plan's
constraints); the first step that fails stops it, with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import look_kind, look_names
from glove_ros.core.plan import answers
from glove_ros.core.plan.agent_types import NavigateTo, WorldMap
from glove_ros.core.plan.instructions import (
    _MOVES,
    Condition,
    Conditional,
    Plan,
    Step,
    _key,
    _noun,
)
from glove_ros.core.plan.tasks import TaskRequest


def recall(req: TaskRequest, history: Callable[..., list], now: float
           ) -> answers.Answer | None:
    """The memory answer ``req`` rests on (:mod:`~glove_ros.core.plan.answers`; None for
    go_to and dock). ``history(state_key, action)``: entries with their history (RuntimeError
    when memory does not answer)."""
    kind = req.look_kind or "colors"
    if req.intent in ("go_to_last_seen", "where_last_seen"):  # the latter: say only
        return answers.last_seen(req.colour, history(action="look"), now, kind=kind)
    if req.intent == "is_there":  # from the looks there; never drives
        return answers.is_there(req.colour, req.waypoint, history(req.waypoint, "look"), now,
                                kind=kind)
    if req.intent == "corridor_status":
        return answers.corridor_status(req.waypoint, req.waypoint2,
                                       history(action="navigate_to"), now)
    if req.intent == "changes":
        return answers.changes_since(now - req.since_s if req.since_s > 0 else 0.0, history(),
                                     now)
    return None


def drive_route(world_map: WorldMap, at: str, target: str,
                avoid: Sequence[tuple[str, str]],
                navigate: Callable[[str], tuple[str, str, list[str]]]
                ) -> tuple[str, str, list[str]]:
    """Drive from ``at`` to ``target`` one corridor at a time along the map's shortest route
    outside ``avoid`` (Nav2 cannot be told to avoid a corridor, but drives one corridor to
    a neighbour): ``navigate(hop)`` -> (outcome, final waypoint, corridors driven). Returns
    the last outcome, where the robot is and every corridor driven; ``unreachable`` when no
    route avoids them."""
    path = world_map.shortest_path(at, target, avoid) if world_map.has(at) else None
    outcome, final, driven = ("reached" if path else "unreachable"), at, []
    for hop in (path or [])[1:]:
        outcome, final, went = navigate(hop)
        driven += went
        if outcome not in ("reached", "detour") or final != hop:
            break
    return outcome, final, driven


def dock_result(use_service: bool, outcome: str, docked: bool) -> tuple[bool, str]:
    """(success, reason) of a return to the dock after the drive's ``outcome``; ``docked``:
    the dock service said so (asked only where the robot has one)."""
    if use_service:
        return docked, "docked" if docked else (f"navigation to the dock: {outcome}" if
                                                outcome != "reached" else
                                                "dock service refused or absent")
    ok = outcome == "reached"
    return ok, ("at the dock (no dock service: charging is read from the battery)" if ok
                else f"navigation to the dock: {outcome}")


def forbidden(action: Any, at: str | None, avoid: Sequence[tuple[str, str]]) -> bool:
    """Whether the agent's ``action`` drives along a corridor an instruction avoids."""
    return isinstance(action, NavigateTo) and _key(at or "", action.waypoint) in avoid


def arrival(target: str, outcome: str, final: str, said: str = "") -> dict[str, Any]:
    """The run_task result's fields after a drive to ``target`` ended with ``outcome`` at
    ``final`` (a detour arrives too: Nav2 drove around a corridor), after what memory
    ``said`` (the answer so far)."""
    ok = outcome in ("reached", "detour") and final == target
    return {"success": ok, "reason": "reached" if ok else f"navigation: {outcome}",
            "found_at": final, "answer": (said + " " if said else "") + (
                f"I am at {final}." if ok
                else f"I could not get to {target} ({outcome}); I am at {final}.")}


def driven_transitions(driven: Sequence[str], world_map: WorldMap, robot_id: str,
                       episode_id: str, context: str) -> list[Transition]:
    """``reached`` transitions for the corridors ("a:b") a drive evidently went along that
    are corridors of the map."""
    return [Transition(state_key=a, action="navigate_to", outcome="reached", action_arg=b,
                       robot_id=robot_id, episode_id=episode_id, context=context)
            for a, _, b in (t.partition(":") for t in driven)
            if world_map.length(a, b) is not None]


@dataclass(frozen=True)
class StepOutcome:
    """How one step ended, as the driver reports it: ``ok`` and ``reason``, its ``answer``;
    for a look step the outcome signature ``seen`` and the memory id ``look_id`` (0: not
    stored); ``found_at`` for a find."""

    ok: bool
    reason: str
    answer: str = ""
    found_at: str = ""
    seen: str = ""
    look_id: int = 0
    cited: tuple[int, ...] = ()
    explain: tuple[str, ...] = ()

    @classmethod
    def of(cls, status: str, result: Any, step: Step, seen: str = "", look_id: int = 0
           ) -> StepOutcome:
        """From a single-request path's result (``reason``, ``answer``, ``found_at``,
        ``cited_entries``, ``explain``) and the status it set on its :class:`StepHandle`;
        a look step that got no frames (``seen`` "") failed."""
        ok = status == "succeeded" and (bool(seen) or not step.look)
        reason = "camera_timeout" if status == "succeeded" and not ok else result.reason
        return cls(ok, reason, result.answer, result.found_at, seen, look_id,
                   tuple(result.cited_entries), tuple(result.explain))


def look_transition(step: Step, seen: str, robot_id: str, episode_id: str,
                    pose: tuple[float, float, float] | None) -> Transition:
    """The transition a look step records: its place's look saw ``seen``."""
    return Transition(state_key=step.place, action="look", outcome=seen, robot_id=robot_id,
                      episode_id=episode_id, pose=pose, context=step.describe())


@dataclass(frozen=True)
class PlanReport:
    """A run plan: ``lines`` (one per step and decision), what it cites and explains."""

    success: bool
    reason: str
    lines: tuple[str, ...]
    cited: tuple[int, ...] = ()
    explain: tuple[str, ...] = ()
    steps: int = 0
    source: str = "rules"

    def fields(self, at: str = "") -> dict[str, Any]:
        """The run_task result's fields: the answer one line per step, ``explain`` the plan
        as checked and then the memories set aside; ``found_at`` where the robot ended."""
        return {"success": self.success, "reason": self.reason, "steps": self.steps,
                "answer": "; ".join(self.lines), "found_at": at,
                "cited_entries": list(self.cited), "explain": list(self.explain),
                "intent": "instruction", "understood_by": self.source}


class StepHandle:
    """Stands in for the action goal handle while one step runs through a single-request
    code path: the step's text and id, cancel and feedback from the real handle, and the
    status the path sets (``succeeded`` / ``aborted`` / ``canceled``) kept here."""

    is_cancel_requested = property(lambda self: bool(self._handle.is_cancel_requested))

    def __init__(self, handle: Any, task: str, task_id: str) -> None:
        self._handle, self.status = handle, ""
        self.request = SimpleNamespace(task=task, task_id=task_id, max_steps=0)
        self.publish_feedback = handle.publish_feedback

    def succeed(self) -> None:
        self.status = "succeeded"

    def abort(self) -> None:
        self.status = "aborted"

    def canceled(self) -> None:
        self.status = "canceled"


def _summary(step: Step, out: StepOutcome) -> str:
    if not out.ok:
        return f"failed ({out.reason})" + (f": {out.answer}" if out.answer else "")
    ref = f" (look #{out.look_id})" if out.look_id else ""
    if step.look and step.target and look_kind(out.seen) == step.kind:  # else: cannot tell
        there = step.target in look_names(out.seen)
        return f"{_noun(step.target, step.kind)} is {'' if there else 'not '}there{ref}"
    if step.look:
        seen = sorted(look_names(out.seen)) if look_kind(out.seen) else []
        return f"saw {', '.join(seen) or 'nothing'}{ref}"
    if step.request.intent in _MOVES + ("find",):
        return out.reason
    return out.answer or out.reason


def run_plan(plan: Plan, run_step: Callable[[int, Step], StepOutcome],
             recall: Callable[[str, str, str], Any], *,
             cancelled: Callable[[], bool] = lambda: False,
             log: Callable[[int, str], None] = lambda n, line: None) -> PlanReport:
    """Run ``plan`` item by item. ``run_step(n, step)`` executes one step (the driver applies
    the constraints); ``recall(target, kind, place)`` answers from verified memory with an
    :class:`~glove_ros.core.plan.answers.Answer` (value yes / no / unknown; RuntimeError
    when memory does not answer). The first failing step stops the plan. ``log(n, line)``
    gets the plan as checked (n = 0), then every step and every decision of a conditional."""
    inst = plan.instruction
    lines: list[str] = []
    cited: list[int] = []
    explain: list[str] = list(plan.explain)
    log(0, "plan: " + "; ".join(plan.explain))
    looked: dict[str, StepOutcome] = {}  # place -> this plan's latest look there
    found: dict[str, str] = {}  # target -> where a find of this plan found it
    ran = 0

    def say(n: int, line: str) -> None:
        lines.append(line)
        log(n, line)

    def run(n: int, step: Step) -> StepOutcome:
        nonlocal ran
        ran += 1
        out = run_step(n, step)
        cited.extend(out.cited)
        explain.extend(out.explain)
        if out.ok and step.look:
            looked[step.place] = out
        if out.ok and out.found_at and step.request.intent == "find":
            found[step.request.colour] = out.found_at
        return out

    def done(ok: bool, reason: str) -> PlanReport:
        return PlanReport(ok, reason, tuple(lines), tuple(dict.fromkeys(cited)),
                          tuple(dict.fromkeys(explain)), ran, inst.source)

    def decide(n: int, c: Condition) -> tuple[bool | None, str]:
        obs = looked.get(c.place)
        if obs is not None and look_kind(obs.seen) == c.kind:
            at = c.target in look_names(obs.seen)
            return at, f"look #{obs.look_id}" if obs.look_id else "this plan's look"
        if found.get(c.target) == c.place:
            return True, "found there in this plan"
        try:
            ans = recall(c.target, c.kind, c.place)
        except RuntimeError as exc:
            return None, f"cannot read memory: {exc}"
        if ans.value in ("yes", "no"):
            cited.extend(ans.cited)
            explain.extend(ans.explain)
            return ans.value == "yes", ", ".join(f"#{i}" for i in ans.cited) or "memory"
        probe = Step(TaskRequest("go_to", waypoint=c.place, text=f"look in {c.place}"), True,
                     c.target, c.kind)
        out = run(n, probe)
        say(n, f"{n}. memory does not know whether {c.describe(True)} ({ans.text}); "
            f"looked there: {_summary(probe, out)}")
        if not out.ok or look_kind(out.seen) != c.kind:
            return None, (f"the look at {c.place} failed: {out.reason}" if not out.ok else
                          f"the look at {c.place} cannot tell {_noun(c.target, c.kind)}")
        return c.target in look_names(out.seen), f"look #{out.look_id}" if out.look_id else "look"

    for n, it in enumerate(inst.items, 1):
        if cancelled():
            say(n, f"{n}. not run: cancelled")
            return done(False, "cancelled")
        why, step = "", it
        if isinstance(it, Conditional):
            at, evidence = decide(n, it.condition)
            if at is None:
                say(n, f"{n}. cannot decide whether {it.condition.describe(True)}: {evidence}")
                return done(False, f"step {n}: {evidence}")
            holds = at == it.condition.present
            why = f"{it.condition.describe(at)} ({evidence}), so "
            if (it.then if holds else it.otherwise) is None:
                say(n, f"{n}. {why}nothing to do")
                continue
            step = it.then if holds else it.otherwise
        assert isinstance(step, Step)
        out = run(n, step)
        say(n, f"{n}. {why}{step.describe()}: {_summary(step, out)}")
        if not out.ok:
            return done(False, f"step {n} ({step.describe()}) failed: {out.reason}")
    return done(True, f"all {len(inst.items)} steps done")
