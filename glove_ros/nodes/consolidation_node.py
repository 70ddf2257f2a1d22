"""Consolidation node: fast writes after each task, Auto-Dreamer region rewriting on the dock.

Thin wrapper over :mod:`glove_ros.core.consolidate.consolidation` (DESIGN.md section 5).
Every finished
task (``task_outcomes``) is appended to plan memory by the fast writer, with its raw trace
journaled as provenance. When the robot is docked (charging) and ``every_k_episodes``
episodes are waiting, the node sends itself a ``consolidate`` goal, so automatic and
requested runs are the same action with the same feedback and cancel. Undocking mid-run
cancels it: nothing is written (the rewrite is only committed after an explicit
``terminate`` and a passed acceptance test, as one version switch). The run that was
cancelled is retried at the next dock.

Interfaces (relative names; remap in launch):
  sub  task_outcomes          glove_ros/TaskOutcome  one per finished task -> fast writer
  sub  docked                 std_msgs/Bool          dock state (wins when published)
  sub  battery                by ``battery.type``: sensor_msgs/BatteryState (CHARGING / FULL
                              means charging) or std_msgs/UInt16 millivolts (HiWonder's
                              ``ros_robot_controller/battery``: a rising voltage means
                              charging, glove_ros/core/ops/dock.py); used when no ``docked``
                              topic is published
  sub  current_waypoint       std_msgs/String        where the robot stands: docked = charging
                              at ``dock.waypoint`` (robots without a dock service)
  act  consolidate            glove_ros/Consolidate  run now (feedback: step, tokens, entries
                              read / written, last tool; cancellable)
  srv  undo_consolidation     std_srvs/Trigger       roll back the latest committed run
  pub  consolidation_report   glove_ros/ConsolidationReport  report of every finished run

Lifecycle: configure validates the parameters and opens the database (the LLM file is
checked); activate opens the interfaces; the LLM (``consolidator: llm``) is loaded when a
run starts -- on the dock -- and released when it ends (``llm.keep_loaded`` keeps it:
off-robot only; on the Orin CPU and GPU share one memory); with ``llm.service`` the run
uses the robot's shared model in the llm node and releases it there (``llm/release``)
when it ends;
deactivate cancels a running consolidation, closes the interfaces and releases the LLM;
cleanup closes the database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import BatteryState
from std_msgs.msg import Bool, String, UInt16
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.action import Consolidate
from glove_ros.core.consolidate.consolidation import (
    ConsolidationReport,
    Consolidator,
    Progress,
)
from glove_ros.core.consolidate.policies import LlmPolicy, RulePolicy
from glove_ros.core.consolidate.region import ConsolidationConfig
from glove_ros.core.consolidate.writer import FastWriter, episode_from_transitions
from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError
from glove_ros.core.ops.dock import DockConfig, DockDetector
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.msg import ConsolidationReport as ConsolidationReportMsg
from glove_ros.msg import TaskOutcome
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    SpinSafeActionClient,
    declare_params,
    destroy_handles,
    latched_qos,
    param_values,
    run,
    validating_callback,
)

_CORE_KEYS = (
    "every_k_episodes", "require_dock", "max_region_entries", "region_budget_tokens",
    "max_steps", "max_tokens", "call_max_tokens", "max_seconds", "planner_budget_tokens",
    "rho", "n_masks", "min_cf", "miss_threshold", "dry_run",
)

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("db_path", "glove_memory.db", "SQLite file of plan memory (may be the experience "
          "memory's file: tables are prefixed plan_)", read_only=True),
    Param("robot_id", "", "write only task outcomes of this robot ('' = every robot)"),
    Param("consolidator", "rule", "'rule' (deterministic merge) or 'llm' (local GGUF, "
          "schema-constrained tool calls)", read_only=True),
    Param("auto", True, "start a run by itself when docked and enough episodes are waiting"),
    Param("every_k_episodes", 10, "episodes since the last run before a docked robot "
          "consolidates"),
    Param("require_dock", True, "only consolidate automatically on the dock (false: every k "
          "episodes)"),
    Param("dry_run", False, "evaluate but never commit (a goal's dry_run is ORed with it)"),
    Param("max_steps", 64, "tool calls per run (a goal's max_steps overrides when > 0)"),
    Param("max_tokens", 2048, "LLM tokens generated per run (a goal's overrides when > 0)"),
    Param("call_max_tokens", 128, "LLM tokens per tool call"),
    Param("max_seconds", 900.0, "wall-clock bound of one run, seconds"),
    Param("max_region_entries", 64, "most entries in the rewritten region (llm: at most 24)"),
    Param("region_budget_tokens", 2000, "most tokens of the region (llm: capped at llm.n_ctx "
          "- call_max_tokens - 700 so that the prompt fits)"),
    Param("planner_budget_tokens", 400, "planner memory budget the acceptance rehearsal uses"),
    Param("rho", 0.5, "fraction of the synthesized set masked per counterfactual sample"),
    Param("n_masks", 8, "counterfactual samples"),
    Param("min_cf", 0.0, "least counterfactual utility to commit"),
    Param("miss_threshold", 2, "empty looks at a block's last place that make it unknown"),
    Param("rule.step_delay_s", 0.0, "pause before each rule-consolidator step (demos: makes a "
          "run observable and cancellable)"),
    Param("llm.model_path", "", "GGUF file or model name; '' = the default model "
          "(GLOVE_LLM_MODEL, else qwen2.5-coder-1.5b)",
          read_only=True),
    Param("llm.n_ctx", 2048, "LLM context tokens", read_only=True),
    Param("llm.n_threads", 1, "llama.cpp threads (0 = default); keep below idle cores",
          read_only=True),
    Param("llm.n_gpu_layers", 0, "layers offloaded to the GPU (Jetson); -1 = all",
          read_only=True),
    Param("llm.temperature", 0.0, "sampling temperature (0 = greedy)", read_only=True),
    Param("llm.timeout_s", 30.0, "wall-clock bound of one LLM call (how fast a cancel is "
          "honoured)", read_only=True),
    Param("llm.seed", 0, "sampling seed", read_only=True),
    Param("battery.type", "BatteryState", "message on 'battery': 'BatteryState' "
          "(sensor_msgs) or 'UInt16' (millivolts, HiWonder JetRover)", read_only=True),
    Param("dock.waypoint", "", "the waypoint the charger is at: docked = charging there "
          "('' = charging anywhere counts)", read_only=True),
    Param("dock.charging_rise_mv", 40.0, "UInt16 battery: a voltage rise of this many mV "
          "within dock.window_s means charging (the same fall: unplugged)", read_only=True),
    Param("dock.window_s", 30.0, "UInt16 battery: seconds of readings the rise is measured over",
          read_only=True),
    Param("llm.keep_loaded", False, "keep the model in memory between runs; default false: it "
          "is loaded when a run starts (on the dock) and released when it ends -- the Orin "
          "shares its memory between CPU and GPU"),
    Param("llm.service", "", "'' = load the model in this process (llm.model_path ...); else "
          "the llm node's LlmComplete service (e.g. llm/complete): the robot's one shared "
          "model, released after each run through llm/release unless llm.keep_loaded "
          "(llm.n_ctx must then not exceed the llm node's n_ctx)", read_only=True),
    Param("llm.service_wait_s", 60.0, "with llm.service: seconds waited beyond llm.timeout_s "
          "for one call (the shared model's lazy load, a queued request)", read_only=True),
)


def dock_config(values: dict[str, Any]) -> DockConfig:
    """The validated dock recognition from the parameters."""
    cfg = DockConfig(str(values["battery.type"]), str(values["dock.waypoint"]),
                     float(values["dock.charging_rise_mv"]), float(values["dock.window_s"]))
    cfg.validate()
    return cfg


def core_config(values: dict[str, Any]) -> ConsolidationConfig:
    """The validated core configuration from the parameters."""
    raw = {k: values[k] for k in _CORE_KEYS}
    raw["max_seconds"] = float(raw["max_seconds"])
    raw["rho"] = float(raw["rho"])
    raw["min_cf"] = float(raw["min_cf"])
    raw["llm_timeout_s"] = float(values["llm.timeout_s"])
    if values.get("consolidator") == "llm":  # the region is shown in the prompt: fit it
        room = int(values["llm.n_ctx"]) - int(values["call_max_tokens"]) - 700
        raw["region_budget_tokens"] = max(64, min(int(raw["region_budget_tokens"]), room))
        raw["max_region_entries"] = min(int(raw["max_region_entries"]), 24)
    return ConsolidationConfig(**raw).validate()


def llm_config(values: dict[str, Any]) -> LlmConfig:
    """The validated LLM configuration from the ``llm.*`` parameters."""
    return LlmConfig(
        model_path=str(values["llm.model_path"]), n_ctx=int(values["llm.n_ctx"]),
        n_threads=int(values["llm.n_threads"]), n_gpu_layers=int(values["llm.n_gpu_layers"]),
        max_tokens=min(int(values["call_max_tokens"]), int(values["llm.n_ctx"]) - 1),
        temperature=float(values["llm.temperature"]), seed=int(values["llm.seed"]),
        timeout_s=float(values["llm.timeout_s"]),
    ).validate()


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if not str(values["db_path"]).strip():
        raise ValueError("db_path is empty; give the plan-memory database file")
    if values["consolidator"] not in ("rule", "llm"):
        raise ValueError(f"consolidator must be 'rule' or 'llm' (got {values['consolidator']!r})")
    if float(values["rule.step_delay_s"]) < 0:
        raise ValueError("rule.step_delay_s must be >= 0")
    dock_config(values)
    core_config(values)
    if values["consolidator"] == "llm":
        llm_config(values)
    if float(values["llm.service_wait_s"]) < 0:
        raise ValueError("llm.service_wait_s must be >= 0 seconds")


def _shared(values: dict[str, Any]) -> str:
    """The llm node's service when ``consolidator: llm`` uses the shared model, else ''."""
    return str(values["llm.service"]).strip() if values["consolidator"] == "llm" else ""


def _u32(x: float) -> int:
    return max(0, min(int(x), 2**32 - 1))


class ConsolidationNode(LifecycleNode):
    """Fast writer + dock-time consolidation (all decisions in glove_ros.core)."""

    def __init__(self) -> None:
        super().__init__("consolidation")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._store: PlanMemoryStore | None = None
        self._writer: FastWriter | None = None
        self._consolidator: Consolidator | None = None
        self._llm: Any = None  # LlamaBackend, or ServiceLlm with llm.service
        self._llm_client: Any = None  # ServiceLlm: created once, reused
        self._handles: list[Any] = []
        self._action: ActionServer | None = None
        self._client: ActionClient | None = None
        self._report_pub = None
        self._timer = None
        self._lock = threading.Lock()
        self._busy = False
        self._cancel = threading.Event()
        self._auto_goal: Any = None  # client-side handle of a goal the node sent itself
        self._auto_pending = False
        self._armed = True
        self._docked = False
        self._docked_topic = False
        self._dock: DockDetector | None = None

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            self._store = PlanMemoryStore(str(values["db_path"]))
            self._writer = FastWriter(self._store)
            self._consolidator = Consolidator(self._store, core_config(values))
            if values["consolidator"] == "llm" and not _shared(values):
                self._llm = LlamaBackend(llm_config(values))  # checks the GGUF file
        except (ValueError, LlmLoadError, OSError) as exc:
            self.get_logger().error(f"cannot configure consolidation: {exc}")
            if self._store is not None:
                self._store.close()
            self._store = self._writer = self._consolidator = self._llm = None
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(
            f"plan memory {values['db_path']}: {len(self._store.entries())} entries, "
            f"{self._consolidator.episodes_since_last()} episode(s) since the last "
            f"consolidation; consolidator {values['consolidator']}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        if _shared(values):  # the llm node loads on the first call; released after runs
            from glove_ros.nodes.llm_client import shared_llm

            self._llm_client = shared_llm(
                self, self._llm_client, _shared(values), purpose="consolidate",
                max_tokens=min(int(values["call_max_tokens"]), int(values["llm.n_ctx"]) - 1),
                timeout_s=float(values["llm.timeout_s"]),
                wait_s=float(values["llm.service_wait_s"]))
            self._llm = self._llm_client
        elif self._llm is not None and self.get_parameter("llm.keep_loaded").value:
            try:
                self._llm.load()
            except LlmLoadError as exc:
                self.get_logger().error(f"cannot load the LLM: {exc}")
                return TransitionCallbackReturn.FAILURE
            self.get_logger().info(f"LLM loaded (kept between runs): {self._llm.model_path}")
        subs = MutuallyExclusiveCallbackGroup()
        reentrant = ReentrantCallbackGroup()
        self._report_pub = self.create_publisher(ConsolidationReportMsg, "consolidation_report",
                                                 10)
        self._handles = [
            self.create_subscription(TaskOutcome, "task_outcomes", self._on_outcome, 50,
                                     callback_group=subs),
            self.create_subscription(Bool, "docked", self._on_docked, 10, callback_group=subs),
            self._battery_subscription(subs),
            self.create_subscription(String, "current_waypoint", self._on_waypoint,
                                     latched_qos(), callback_group=subs),
            self.create_service(Trigger, "undo_consolidation", self._on_undo,
                                callback_group=subs),
        ]
        self._action = ActionServer(
            self, Consolidate, "consolidate", self._execute, goal_callback=self._on_goal,
            cancel_callback=lambda _g: CancelResponse.ACCEPT, callback_group=reentrant)
        self._client = SpinSafeActionClient(self, Consolidate, "consolidate",
                                            callback_group=reentrant)
        self._timer = self.create_timer(1.0, self._maybe_auto, callback_group=subs)
        self.add_on_set_parameters_callback(self._on_live_params)
        self.get_logger().info("consolidation active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cancel.set()
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        destroy_handles(self, self._handles)
        if self._action is not None:
            self._action.destroy()
            self._action = None
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._llm is not None:
            self._llm.close()
        if self._llm is self._llm_client and self._llm is not None:
            self._llm = None  # rebuilt on activate
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._store is not None:
            self._store.close()
        self._store = self._writer = self._consolidator = self._llm = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cancel.set()
        return self.on_cleanup(state)

    def _on_live_params(self, changes: list[Any]) -> SetParametersResult:
        if any(c.name in _CORE_KEYS for c in changes) and self._consolidator is not None:
            values = param_values(self, PARAMS)
            for c in changes:
                values[c.name] = c.value
            try:  # rclpy may call this before the validating callback
                self._consolidator.config = core_config(values)
            except (ValueError, TypeError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _warn(self, text: str) -> None:
        logger = self.get_logger()  # `warning` on Iron and later, `warn` on Humble
        getattr(logger, "warning", logger.warn)(text)

    # fast writer -----------------------------------------------------------------------
    def _on_outcome(self, msg: TaskOutcome) -> None:
        if self._writer is None:
            return
        robot = str(self.get_parameter("robot_id").value)
        if robot and msg.robot_id != robot:
            return
        ts, ids = [], []
        pair = len(msg.transition_ids) == len(msg.transitions)
        for i, m in enumerate(msg.transitions):
            try:
                ts.append(conv.transition_from_msg(m))
            except ValueError as exc:
                self._warn(f"task {msg.episode_id}: transition {i} skipped: {exc}")
                continue
            ids.append(int(msg.transition_ids[i]) if pair else 0)
        try:
            outcome = episode_from_transitions(
                msg.episode_id, msg.task, msg.target or None, msg.success, ts, ids,
                reason=msg.reason, found_at=msg.found_at)
            v = self._writer.write(outcome, {"robot_id": msg.robot_id, "steps": int(msg.steps)})
        except ValueError as exc:
            self._warn(f"task outcome {msg.episode_id!r} not written: {exc}")
            return
        if v is None:
            self.get_logger().debug(f"task {msg.episode_id}: nothing new to write")
            return
        self._armed = True
        self.get_logger().info(f"fast write: episode {msg.episode_id} -> plan memory v{v}")
        if self._docked:
            self._maybe_auto()

    # dock state ------------------------------------------------------------------------
    def _on_docked(self, msg: Bool) -> None:
        self._docked_topic = True
        self._set_docked(bool(msg.data))

    def _battery_subscription(self, group: Any) -> Any:
        values = param_values(self, PARAMS)
        self._dock = DockDetector(dock_config(values))
        if values["battery.type"] == "UInt16":
            return self.create_subscription(UInt16, "battery", self._on_millivolts, 10,
                                            callback_group=group)
        return self.create_subscription(BatteryState, "battery", self._on_battery, 10,
                                        callback_group=group)

    def _on_battery(self, msg: BatteryState) -> None:
        if self._dock is not None:
            self._dock.on_status(msg.power_supply_status in (
                BatteryState.POWER_SUPPLY_STATUS_CHARGING, BatteryState.POWER_SUPPLY_STATUS_FULL))
            self._dock_changed()

    def _on_millivolts(self, msg: UInt16) -> None:
        if self._dock is not None:
            why = self._dock.on_millivolts(time.monotonic(), float(msg.data))
            if why:
                self.get_logger().warning(why, throttle_duration_sec=60.0)
            self._dock_changed()

    def _on_waypoint(self, msg: String) -> None:
        if self._dock is not None:
            self._dock.on_waypoint(msg.data)
            self._dock_changed()

    def _dock_changed(self) -> None:
        if not self._docked_topic and self._dock is not None:
            self._set_docked(self._dock.docked)

    def _set_docked(self, docked: bool) -> None:
        was, self._docked = self._docked, docked
        if docked and not was:
            self._armed = True
            self.get_logger().info("docked")
            self._maybe_auto()
        elif was and not docked:
            self.get_logger().info("undocked")
            with self._lock:
                busy, goal = self._busy, self._auto_goal
            if busy:
                self._warn("undocked during consolidation: cancelling (memory "
                                       "stays unchanged)")
                self._cancel.set()
                if goal is not None:
                    goal.cancel_goal_async()

    def _maybe_auto(self) -> None:
        cons, client = self._consolidator, self._client
        if cons is None or client is None or not self.get_parameter("auto").value:
            return
        with self._lock:
            if self._busy or self._auto_pending or not self._armed:
                return
        if cons.config.require_dock and not self._docked:
            return
        due, why = cons.due(docked=self._docked)
        if not due or not client.server_is_ready():
            return
        with self._lock:
            if self._busy or self._auto_pending:
                return
            self._auto_pending, self._armed = True, False
        self.get_logger().info(f"starting consolidation by itself ({why})")
        fut = client.send_goal_async(Consolidate.Goal(reason=why))
        fut.add_done_callback(self._on_auto_accepted)

    def _on_auto_accepted(self, fut: Any) -> None:
        handle = fut.result()
        with self._lock:
            self._auto_pending = False
            if handle is not None and handle.accepted:
                self._auto_goal = handle
        if handle is None or not handle.accepted:
            self._armed = True
            return
        handle.get_result_async().add_done_callback(self._on_auto_done)
        if not self._docked and self._consolidator is not None and \
                self._consolidator.config.require_dock:
            handle.cancel_goal_async()  # undocked while the goal was on its way

    def _on_auto_done(self, _fut: Any) -> None:
        with self._lock:
            self._auto_goal = None

    # the action ------------------------------------------------------------------------
    def _on_goal(self, goal: Any) -> GoalResponse:
        with self._lock:
            if self._busy or self._consolidator is None:
                self._warn("rejecting consolidate goal: a run is in progress")
                return GoalResponse.REJECT
            self._busy = True
            self._cancel.clear()
        return GoalResponse.ACCEPT

    def _policy(self) -> Any:
        if self._llm is not None:
            return LlmPolicy(self._llm, n_ctx=int(self.get_parameter("llm.n_ctx").value))
        return RulePolicy(step_delay_s=float(self.get_parameter("rule.step_delay_s").value))

    def _execute(self, handle: Any) -> Any:
        goal = handle.request
        result = Consolidate.Result()
        cons = self._consolidator
        try:
            assert cons is not None

            def feedback(p: Progress) -> None:
                handle.publish_feedback(Consolidate.Feedback(
                    step=_u32(p.step), tokens_spent=_u32(p.tokens_spent),
                    entries_read=_u32(p.entries_read), entries_written=_u32(p.entries_written),
                    last_tool=p.last_tool))

            dry = bool(goal.dry_run) or bool(self.get_parameter("dry_run").value)
            self._load_llm()
            try:
                report = cons.run(
                    self._policy(), reason=goal.reason or "request", dry_run=dry,
                    max_steps=int(goal.max_steps) or None,
                    max_tokens=int(goal.max_tokens) or None,
                    should_cancel=lambda: self._cancel.is_set() or handle.is_cancel_requested,
                    on_progress=feedback)
            finally:
                self._release_llm()
        except Exception as exc:  # a database or model-load failure must not kill the node
            self.get_logger().error(f"consolidation failed: {exc}")
            result.committed, result.message = False, f"error: {exc}; memory unchanged"
            handle.abort()
            self._finish()
            return result
        result.committed = report.committed
        result.message = report.message
        result.entries_before = _u32(report.entries_before)
        result.entries_after = _u32(report.entries_after)
        result.tokens_before = _u32(report.tokens_before)
        result.tokens_after = _u32(report.tokens_after)
        result.llm_tokens_spent = _u32(report.llm_tokens)
        result.consolidation_id = report.consolidation_id
        self._publish(report)
        if report.status == "cancelled":
            if handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
        elif report.status == "aborted":
            handle.abort()
        else:
            handle.succeed()
        self._finish()
        return result

    def _load_llm(self) -> None:
        """Load the consolidation model for this run (LlmLoadError: the run fails, memory
        unchanged). The shared model loads in the llm node on the first call."""
        if self._llm is None or self._llm is self._llm_client or self._llm.loaded:
            return
        t0 = time.monotonic()
        self._llm.load()
        self.get_logger().info(f"LLM loaded for this run in {time.monotonic() - t0:.1f} s: "
                               f"{self._llm.model_path}")

    def _release_llm(self) -> None:
        """Release the model after the run unless ``llm.keep_loaded`` (the shared one through
        the llm node's ``llm/release``: the dock-time run is the last user of the day)."""
        if self._llm is not None and self._llm is self._llm_client:
            if not self.get_parameter("llm.keep_loaded").value:
                ok, text = self._llm.release()
                (self.get_logger().info if ok else self._warn)(
                    f"shared LLM release: {text}")
            return
        if self._llm is None or not self._llm.loaded or \
                self.get_parameter("llm.keep_loaded").value:
            return
        self._llm.close()
        self.get_logger().info("LLM released (loaded only while consolidating)")

    def _finish(self) -> None:
        with self._lock:
            self._busy = False
        self._cancel.clear()

    def _publish(self, report: ConsolidationReport) -> None:
        if self._report_pub is not None:
            msg = conv.consolidation_report_to_msg(report)  # the last 8 tool calls
            msg.header.stamp = self.get_clock().now().to_msg()
            self._report_pub.publish(msg)
        log = self.get_logger().info if report.status != "aborted" else self._warn
        log(f"consolidation {report.status} ({report.reason}, {report.policy}): "
            f"{report.message} [{report.steps} steps, {report.llm_tokens} LLM tokens, "
            f"{report.elapsed_s:.1f} s]")

    # undo ------------------------------------------------------------------------------
    def _on_undo(self, req: Any, resp: Any) -> Any:
        cons = self._consolidator
        if cons is None:
            resp.success, resp.message = False, "not configured"
            return resp
        with self._lock:
            if self._busy:
                resp.success, resp.message = False, "a consolidation is running; try later"
                return resp
        cid = cons.last_committed()
        if cid is None:
            resp.success, resp.message = False, "no committed consolidation to undo"
            return resp
        try:
            v = cons.undo(cid)
        except ValueError as exc:
            resp.success, resp.message = False, str(exc)
            return resp
        resp.success, resp.message = True, f"undid {cid}: plan memory version {v} is active"
        self.get_logger().info(resp.message)
        return resp


def main(args: Sequence[str] | None = None) -> int:
    """Run the consolidation node."""
    return run(ConsolidationNode, args)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["ConsolidationNode", "PARAMS", "core_config", "llm_config", "main", "validate"]
