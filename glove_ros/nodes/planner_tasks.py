"""The planner node's task running: a ``run_task`` goal read and run (a search with the task
agent, a drive, a return to the dock, an answer from memory).

:class:`TaskRunning` is a part of :class:`glove_ros.nodes.planner_node.PlannerNode` (a mixin
it inherits), kept in its own file so that neither is over 1,000 lines; it uses the node's
state (``_agent``, ``_map``, ``_robot``, ``_at``, ...) and helpers (``_navigate``,
``_look``, ``_record``, ...), all set up by the node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from std_srvs.srv import Trigger

from glove_ros.action import RunTask
from glove_ros.core.memory.experience import Transition
from glove_ros.core.plan import instructions
from glove_ros.core.plan.agent_types import Finish, Look, NavigateTo, Task
from glove_ros.core.plan.tasks import TaskRequest, parse_request, understand
from glove_ros.msg import TaskOutcome


class TaskRunning:
    """The ``run_task`` action's side of the planner node (see the module docstring)."""

    _agent: Any
    _map: Any
    _robot: Any
    _poses: Any
    _at: str
    _driven: list[str]
    _view: Any
    _plan_store: Any
    _planner: Any
    _latency: Any
    _outcome_pub: Any
    _llm_decisions: int
    _llm_fallbacks: int
    _colors: Any
    _objects: Any
    dock_client: Any

    def _execute_task(self, handle: Any) -> Any:
        text, wps = handle.request.task, self._map.waypoint_ids
        if instructions.is_instruction(text, self._colors, wps, self._objects) or (
                text.strip() and parse_request(text, self._colors, wps, self._objects) is None):
            # several steps, constraints, an "if"; or one part the request grammar does not
            # read ("check the pantry", "swing by the lab"): read as `bench instructions` reads
            return self._execute_plan(handle)
        goal = handle.request
        result = RunTask.Result()
        agent = self._agent
        assert agent is not None and self._map is not None
        try:
            req, how = understand(goal.task, self._colors, self._map.waypoint_ids,
                                   self._parse_llm(), self._objects)
        except ValueError as exc:
            self.get_logger().warning(str(exc))
            result.success, result.reason, result.answer = False, "invalid_task", str(exc)
            handle.abort()
            return result
        if req.intent != "find":
            return self._execute_request(handle, req, how)
        return self._execute_find(handle, req)

    def _execute_find(self, handle: Any, req: TaskRequest,
                      keep_off: Sequence[tuple[str, str]] = ()) -> Any:
        """A search with the task agent; ``keep_off``: corridors an instruction avoids."""
        goal = handle.request
        result = RunTask.Result()
        agent = self._agent
        task = Task(req.colour, id=goal.task_id).validate()
        result.intent, result.understood_by = req.intent, req.source
        recorded: list[tuple[Any, int]] = []
        if self._plan_store is not None:
            try:  # the active (deployed) plan-memory version, as the gate left it
                self._planner.set_entries(self._plan_store.entries())
            except Exception as exc:  # a plan-memory problem must not stop the robot
                self.get_logger().warning(f"plan memory unreadable, planning without it: {exc}")
        with self._robot:
            here = self._wait_located() or self._at
            if not here:
                self.get_logger().error(
                    f"task '{goal.task}': no pose from the robot within "
                    f"{self.get_parameter('pose_timeout').value}s; not assuming a position")
                result.success, result.reason = False, "position_unknown"
                handle.abort()
                return result
            self._at = here
            agent.start(task, at_waypoint=here, pose=self._pose)
            step = 0
            finish: Finish | None = None
            while finish is None:
                if handle.is_cancel_requested:
                    finish = Finish(False, "cancelled")
                    break
                here = self._located()
                if here is not None and here != agent.current:
                    self.get_logger().warning(
                        f"the robot is at '{here}', not at '{agent.current}' as planned (a "
                        "restart or a push?): continuing from its pose")
                    agent.relocate(here, self._pose)
                    self._at = here
                epoch = self._poses.epoch
                t0 = time.monotonic()
                action = agent.next_action()
                self._latency.add(time.monotonic() - t0)
                if isinstance(action, Finish):
                    finish = action
                    break
                if keep_off and instructions.forbidden(action, agent.current, keep_off):
                    agent.on_navigation("blocked")  # by an instruction: never driven nor
                    continue  # remembered; the agent plans around it
                step += 1
                if isinstance(action, NavigateTo):
                    avoid = (*action.avoid_edges, *keep_off) if keep_off else action.avoid_edges
                    outcome, final = self._navigate(action.waypoint, avoid,
                                                    lambda: handle.is_cancel_requested)
                    ts = agent.on_navigation(outcome, final, self._arrival_pose(final))
                    last = f"navigate_to {action.waypoint}: {outcome}"
                elif isinstance(action, Look):
                    sig = self._look(action.waypoint)
                    if sig is None:
                        finish = Finish(False, "camera_timeout")
                        break
                    ts = agent.on_look(sig)
                    last = f"look at {action.waypoint}: {sig}"
                    if self._located() not in (None, action.waypoint):
                        epoch = -1  # the robot was not where the look was recorded
                else:  # pragma: no cover - the agent has no other actions
                    raise RuntimeError(f"unknown agent action {action!r}")
                if epoch != self._poses.epoch and ts:
                    self.get_logger().warning(
                        f"not recording {len(ts)} transition(s) of '{last}': the robot driver "
                        "restarted or the robot moved during the action")
                    ts = []
                recorded += self._record(ts)
                handle.publish_feedback(RunTask.Feedback(step=step, current_waypoint=self._at,
                                                         last_action=last))
        report = agent.report
        if report is not None:
            self._llm_decisions += int(report.llm_decisions)
            self._llm_fallbacks += int(report.fallbacks)
        result.success, result.reason = bool(finish.success), finish.reason
        result.steps = int(report.steps if report else step)
        result.found_at = report.found_at if report else ""
        result.llm_fallbacks = int(report.fallbacks if report else 0)
        outcome = TaskOutcome(
            robot_id=str(self.get_parameter("robot_id").value), episode_id=task.id,
            task=goal.task, target=task.color, success=result.success, reason=result.reason,
            found_at=result.found_at, steps=result.steps, llm_fallbacks=result.llm_fallbacks,
            transitions=[m for m, _ in recorded], transition_ids=[i for _, i in recorded])
        outcome.header.stamp = self.get_clock().now().to_msg()
        if self._outcome_pub is not None:
            self._outcome_pub.publish(outcome)
        self.get_logger().info(
            f"task '{goal.task}' ({goal.task_id}): {'success' if finish.success else 'FAILED'}"
            f" ({finish.reason}) in {result.steps} steps"
            + (f", {result.llm_fallbacks} LLM fallbacks" if result.llm_fallbacks else ""))
        if finish.reason == "cancelled":
            handle.canceled()
        elif finish.success:
            handle.succeed()
        else:
            handle.abort()
        return result

    def _execute_request(self, handle: Any, req: TaskRequest, how: str,
                         keep_off: Sequence[tuple[str, str]] = ()) -> Any:
        """Everything but a search: dock, go to a place, answer from memory; ``keep_off``:
        corridors an instruction avoids."""
        from glove_ros.core.plan import answers

        if req.intent == "dock":
            result = self._execute_dock(handle, keep_off)
        else:
            result = RunTask.Result()
            answer = None
            try:
                now, kind = self._now(), req.look_kind or "colors"
                if req.intent in ("go_to_last_seen", "where_last_seen"):  # the latter: say only
                    answer = answers.last_seen(req.colour, self._view.history(action="look"),
                                               now, kind=kind)
                elif req.intent == "is_there":  # from the looks there; never drives
                    answer = answers.is_there(req.colour, req.waypoint, self._view.history(
                        req.waypoint, "look"), now, kind=kind)
                elif req.intent == "corridor_status":
                    answer = answers.corridor_status(
                        req.waypoint, req.waypoint2, self._view.history(action="navigate_to"),
                        now)
                elif req.intent == "changes":
                    # "the last 5 minutes" are wall-clock minutes; memory is stamped on
                    # this node's clock (sim time runs faster): map one onto the other
                    since = (self._clock_map.node_time_ago(time.time(), req.since_s)
                             if req.since_s > 0 else 0.0)
                    answer = answers.changes_since(since, self._view.history(), now,
                                                   asked_s=req.since_s or None)
            except RuntimeError as exc:  # memory not answering
                result.success, result.reason = False, "memory_unavailable"
                result.answer = f"I cannot read my memory: {exc}"
                handle.abort()
                return self._tag(result, req)
            target = req.waypoint if req.intent == "go_to" else (
                answer.value if req.intent == "go_to_last_seen" else "")
            if answer is not None:
                result.answer = answer.text
                result.cited_entries = list(answer.cited)
                result.explain = list(answer.explain)
            if req.intent in ("go_to", "go_to_last_seen") and not target:
                result.success, result.reason = False, "no_memory"
                handle.abort()
            elif target:
                drove = self._at != target
                outcome, final = self._go_to(target, handle, keep_off)
                # a detour arrives too: Nav2 drove around a corridor, the robot is there
                result.success = outcome in ("reached", "detour") and final == target
                result.reason = "reached" if result.success else f"navigation: {outcome}"
                result.found_at = final
                result.steps = 1 if drove else 0
                result.answer = (result.answer + " " if result.answer else "") + (
                    f"I am at {final}." if result.success
                    else f"I could not get to {target} ({outcome}); I am at {final}.")
                (handle.succeed if result.success else handle.abort)()
            else:
                result.success, result.reason = True, "answered"
                handle.succeed()
        self.get_logger().info(f"task '{req.text}' ({how}): {result.reason}; {result.answer}")
        return self._tag(result, req)

    def _record_driven(self, episode_id: str, context: str, epoch: int) -> None:
        """Remember the corridors the last drive evidently went along as reached (a drive
        straight to a far waypoint: Nav2 chose the route, the poses say which it was).
        Each drive is recorded once: a later task that drives nothing records nothing."""
        driven, self._driven = self._driven, []
        if epoch != self._poses.epoch:
            if driven:
                self.get_logger().warning("not recording the corridors driven: the pose "
                                          "source restarted during the drive")
            return
        robot = str(self.get_parameter("robot_id").value)
        ts = []
        for text in driven:
            a, _, b = text.partition(":")
            if self._map is not None and self._map.length(a, b) is not None:
                ts.append(Transition(state_key=a, action="navigate_to", outcome="reached",
                                     action_arg=b, robot_id=robot, episode_id=episode_id,
                                     context=context))
        if ts:
            self._record(ts)
            self.get_logger().info(f"corridors driven: {', '.join(driven)}")

    @staticmethod
    def _tag(result: Any, req: TaskRequest) -> Any:
        result.intent, result.understood_by = req.intent, req.source
        return result

    def _go_to(self, target: str, handle: Any, keep_off: Sequence[tuple[str, str]] = ()
               ) -> tuple[str, str]:
        """Drive to ``target`` around corridors trusted memory believes blocked (a cancel of
        ``handle`` cancels the drive); with ``keep_off``, corridor by corridor outside them."""
        assert self._agent is not None
        with self._robot:
            if self._at == target:
                return "reached", self._at
            try:
                avoid = sorted(self._agent.beliefs().blocked_edges)
            except RuntimeError:
                avoid = []
            epoch = self._poses.epoch
            if keep_off:
                outcome, final = self._hop(target, [*keep_off, *avoid], handle)
            else:
                outcome, final = self._navigate(target, avoid, lambda: handle.is_cancel_requested)
            if final:
                self._agent.relocate(final, self._pose)
            self._record_driven(handle.request.task_id, f"go to {target}", epoch)
            return outcome, final

    def _execute_dock(self, handle: Any, keep_off: Sequence[tuple[str, str]] = ()) -> Any:
        """Drive to the map's dock and start charging: the ``dock`` service where the robot
        has one (``dock_service``); without one (the JetRover) arriving is the task, and the
        charger is seen on the battery (the consolidation node's dock detection)."""
        assert self._map is not None and self._agent is not None
        result = RunTask.Result()
        dock = self._map.dock
        use_service = bool(self.get_parameter("dock_service").value)
        with self._robot:
            epoch = self._poses.epoch
            if keep_off and self._at != dock:
                outcome, final = self._hop(dock, keep_off, handle)
            else:
                outcome, final = (("reached", self._at) if self._at == dock
                                  else self._navigate(dock, (), lambda: handle.is_cancel_requested))
            if outcome == "detour" and final == dock:
                outcome = "reached"  # arrived; the corridors driven are recorded below
            if final:
                self._agent.relocate(final, self._pose)
            self._record_driven(handle.request.task_id, "return to the dock", epoch)
            docked = None
            if outcome == "reached" and use_service:
                docked = self.call(self.dock_client, Trigger.Request(), 10.0)
        if use_service:
            result.success = bool(docked is not None and docked.success)
            result.reason = "docked" if result.success else (
                f"navigation to the dock: {outcome}" if outcome != "reached"
                else "dock service refused or absent")
        else:
            result.success = outcome == "reached"
            result.reason = ("at the dock (no dock service: charging is read from the battery)"
                             if result.success else f"navigation to the dock: {outcome}")
        result.found_at = dock if result.success else ""
        self.get_logger().info(f"return to dock: {result.reason}")
        if result.success:
            handle.succeed()
        else:
            handle.abort()
        return result

    # open instructions -----------------------------------------------------------------
    def _hop(self, target: str, avoid: Sequence[tuple[str, str]], handle: Any
             ) -> tuple[str, str]:
        """Drive to ``target`` one corridor at a time along the map's shortest route outside
        ``avoid`` (Nav2 cannot be told to keep off a corridor); every corridor driven is left
        in ``_driven`` for :meth:`_record_driven`."""
        cancelled = lambda: handle.is_cancel_requested  # noqa: E731
        outcome, final, self._driven = instructions.drive_route(
            self._map, self._at or self._wait_located() or "", target, avoid,
            lambda hop: (*self._navigate(hop, avoid, cancelled), self._driven))
        return outcome, final

    def _execute_plan(self, handle: Any) -> Any:
        """An instruction (several steps, constraints, conditions): checked against the map
        before anything moves (a refusal or a question comes back without motion), then
        each step through the single-request paths under the constraints, one answer line
        per step (:func:`glove_ros.core.plan.instructions_run.run_plan`)."""
        goal = handle.request
        plan = instructions.understand_instruction(goal.task, self._colors, self._map,
                                                   self._parse_llm(), self._objects, self._at)
        if not isinstance(plan, instructions.Plan):  # refused or asked back: nothing moves
            result = RunTask.Result(**plan.fields())
            result.intent = "instruction"
            self.get_logger().warning(f"instruction '{goal.task}': {result.answer}")
            handle.abort()
            return result
        inst = plan.instruction

        def step(n: int, s: instructions.Step) -> instructions.StepOutcome:
            sub = instructions.StepHandle(handle, s.describe(), f"{goal.task_id}.{n}")
            keep_off = inst.avoid_edges(self._map, self._at)
            if s.request.intent == "find":
                r = self._execute_find(sub, s.request, keep_off)
            else:
                r = self._execute_request(sub, s.request, plan.how, keep_off)
            seen, look = "", 0
            if s.look and sub.status == "succeeded":
                pose, seen = self._arrival_pose(s.place), self._look(s.place) or ""
                if seen and self._located() in (None, s.place):  # else: not where it looked
                    look = self._record([instructions.look_transition(
                        s, seen, str(self.get_parameter("robot_id").value),
                        sub.request.task_id, pose)])[0][1]
            return instructions.StepOutcome.of(sub.status, r, s, seen, look)

        def log(n: int, line: str) -> None:
            self.get_logger().info(f"instruction '{goal.task}': {line}")
            handle.publish_feedback(RunTask.Feedback(step=n, current_waypoint=self._at,
                                                     last_action=line))

        report = instructions.run_plan(
            plan, step, lambda t, kind, wp: instructions.recall(
                TaskRequest("is_there", t, wp, look_kind=kind), self._view.history, self._now()),
            cancelled=lambda: handle.is_cancel_requested, log=log)
        result = RunTask.Result(**report.fields(self._at))
        (handle.succeed if report.success else handle.canceled if report.reason == "cancelled"
         else handle.abort)()
        return result

