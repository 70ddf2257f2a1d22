"""Planner node: the JetRover task agent with a local LLM, memory-driven.

Takes tasks in words through the ``run_task`` action: "find the red block", "find the cup",
"go to the kitchen", "bring me to where you last saw the blue block", "is there a person in
the kitchen?", "is the corridor between hall and lab open?", "what changed since
yesterday?", "return to the dock" (a fixed grammar;
other phrasings are parsed by the local LLM when ``planner:=llm``,
:func:`glove_ros.core.plan.tasks.understand`), and instructions ("go to the kitchen, then the
office, then dock", "avoid the lab", "if the cup is not in the kitchen, look in the pantry":
checked against the map before anything moves, then run step by step through the same
paths, :mod:`glove_ros.core.plan.instructions`); the running is in
:mod:`glove_ros.nodes.planner_tasks`. Questions and "last seen" goals are answered from
memory with its history (:mod:`glove_ros.core.plan.answers`): the result's ``answer`` cites the
trusted entries (#id) and ``explain`` lists suppressed / replaced ones with the verifier's
reason. For a search it decides each next
waypoint with :class:`glove_ros.core.plan.agent.TaskAgent` (GreedyPlanner or LlmPlanner over
llama.cpp, JSON-schema constrained to valid waypoints; invalid or slow output falls back
to greedy and is counted), drives with the ``navigate_to_waypoint`` action, looks by
fusing a few perception frames, and records every transition through the memory's
``record_transition`` service (acknowledged before the next decision reads memory).

It also serves the ``probe`` action for synchronous GLOVE verification: repeat a
(state, action) and report outcomes. Probes wait until the running task has finished,
so the robot is never driven by two masters.

Interfaces (relative names):
  act  run_task              glove_ros/RunTask (server; feedback per step; cancel)
  act  probe                 glove_ros/Probe (server)
  act  navigate_to_waypoint  glove_ros/NavigateToWaypoint (client)
  srv  query_memory, record_transition, reverify_negatives, dock (clients)
  srv  llm/complete          glove_ros/LlmComplete (client, with ``llm.service``): the robot's
                             shared model in the llm node instead of one in this process
  sub  detections            glove_ros/DetectionArray
  sub  pose | amcl_pose | odom  the robot's pose stamped on transitions, by ``pose_source``:
                             ``pose`` geometry_msgs/PoseStamped (the simulator's map pose),
                             ``amcl`` PoseWithCovarianceStamped on amcl_pose (a real robot),
                             ``odom`` nav_msgs/Odometry; poses not in ``map_frame`` are
                             dropped (REP-105: odometry drifts, the pose rule needs map).
                             AMCL is silent while the robot stands still: its last pose
                             stays valid (glove_ros/core/world/pose_stream.py)
  sub  initialpose           PoseWithCovarianceStamped: a re-localisation; no transition
                             spanning it is recorded
  pub  current_waypoint      std_msgs/String ("" while driving; perception tags frames)
  pub  task_outcomes         glove_ros/TaskOutcome (one per finished task, for the updater)
  pub  /diagnostics          diagnostic_msgs/DiagnosticArray: planner kind, LLM loaded,
                             decision latency (mean / max of the last 50), LLM fallback rate
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import String
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.action import NavigateToWaypoint, Probe, RunTask
from glove_ros.core.memory.experience import MemoryEntry, Transition
from glove_ros.core.ops.clock import ClockMap
from glove_ros.core.ops.health import OK, WARN, LatencyStat
from glove_ros.core.ops.resend import resend_waits
from glove_ros.core.plan.agent import AgentConfig, TaskAgent
from glove_ros.core.plan.agent_policy import (
    GreedyPlanner,
    LlmPlanner,
    LlmPlannerConfig,
    check_believed_order,
)
from glove_ros.core.plan.agent_types import WorldMap
from glove_ros.core.plan.tasks import object_vocabulary
from glove_ros.core.world.observation import (
    Frame,
    FreshFrames,
    LookConfig,
    judge_frames,
    kind_of_backend,
)
from glove_ros.core.world.perception import color_vocabulary
from glove_ros.core.world.pose_stream import PoseStream, pose_at
from glove_ros.core.world.worldfile import load_world
from glove_ros.msg import DetectionArray, TaskOutcome
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    SpinSafeActionClient,
    declare_params,
    latched_qos,
    param_values,
    run,
    validating_callback,
    wait_future,
)
from glove_ros.nodes.diagnostics import NodeDiagnostics
from glove_ros.nodes.llm_client import ServiceLlm, shared_llm
from glove_ros.nodes.planner_tasks import TaskRunning
from glove_ros.paths import resolve_world
from glove_ros.srv import QueryMemory, RecordTransition

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("robot_id", "jetrover", "robot id stamped on every transition"),
    Param("world", "jetrover_maze", "map the robot knows (waypoints and corridors only)",
          read_only=True),
    Param("start_waypoint", "", "where the robot stands at start, used only until its first "
          "pose ('' = wait for the pose; never assumed)",
          read_only=True),
    Param("planner", "greedy", "'greedy' or 'llm' (local GGUF through llama.cpp)",
          read_only=True),
    Param("llm.model_path", "", "model name (glove_ros.core.llm.models) or GGUF path; '' = the "
          "default model ($GLOVE_LLM_MODEL or qwen2.5-coder-1.5b)", read_only=True),
    Param("llm.n_ctx", 2048, "LLM context window, tokens", read_only=True),
    Param("llm.n_threads", 0, "llama.cpp CPU threads (0 = automatic)", read_only=True),
    Param("llm.n_gpu_layers", 0, "layers offloaded to the GPU (Jetson CUDA build); -1 = all",
          read_only=True),
    Param("llm.max_tokens", 32, "bound on generated tokens per decision"),
    Param("llm.timeout_s", 20.0, "a slower decision falls back to greedy"),
    Param("llm.max_prompt_tokens", 400, "prompt budget; memory lines dropped to fit"),
    Param("llm.service", "", "'' = load the model in this process (llm.model_path ...); else "
          "the llm node's LlmComplete service (e.g. llm/complete): the robot's one shared "
          "model, loaded there on first use", read_only=True),
    Param("llm.service_wait_s", 30.0, "with llm.service: seconds waited beyond llm.timeout_s "
          "(the shared model's lazy load, a queued request) before falling back to greedy"),
    Param("plan_db_path", "", "plan memory (Janus-gated) read as a prior at each task start; "
          "'' = none", read_only=True),
    Param("max_steps", 30, "actions per task before it fails"),
    Param("believed_order", "nearest", "of several places memory believes hold the target: "
          "'nearest' first or the one looked at 'latest' first"),
    Param("look.frames", 3, "perception frames fused into one look"),
    Param("look.min_count", 2, "a colour counts when seen in at least this many of the frames"),
    Param("look.timeout", 10.0, "wall seconds to wait for look frames"),
    Param("nav_timeout", 120.0, "wall seconds to wait for one navigation"),
    Param("reverify_on_stuck", True, "ask memory to re-verify stale negatives when stuck"),
    Param("pose_source", "pose", "'pose' (PoseStamped on pose), 'amcl' "
          "(PoseWithCovarianceStamped on amcl_pose) or 'odom' (Odometry on odom)", read_only=True),
    Param("map_frame", "map", "frame the stamped poses must be in; others are dropped"),
    Param("locate_radius", 0.6, "the robot stands at a waypoint when its pose (pose_source) is "
          "within this many metres of it"),
    Param("pose_settle", 0.5, "wall seconds a continuous pose source ('pose', 'odom') is given "
          "after a drive to deliver a pose stamped after it ended; the looks that follow are "
          "stamped with that pose, not a late one from the way there"),
    Param("pose_timeout", 15.0, "wall seconds a task waits for the robot's pose before it "
          "fails with 'position_unknown' (the position is never assumed)"),
    Param("pose_gap", 2.0, "a continuous pose source ('pose', 'odom') silent this many wall "
          "seconds means the position is unknown (never a restart). 'amcl' is silent while the "
          "robot stands still, so its last pose stays valid. Restarts are a pose stamp running "
          "backwards or a re-localisation on initialpose: no transition spanning one is "
          "recorded"),
    Param("color_config_file", "", "the perception node's colour table (YAML); the task "
          "vocabulary is its colours plus the world file's ('' = the built-in table)",
          read_only=True),
    Param("objects", [""], "object classes tasks may name besides the world file's objects "
          "('find the cup', 'is there a person in the kitchen?'): [''] = the world file's "
          "only; ['coco'] = the 80 COCO classes of a trained detector (glove-ros launch sets "
          "it when the params file's perception.backend is darknet or yolo); or a list such as "
          "[cup, person] (synonyms like sofa accepted). Others are refused by name",
          read_only=True),
    Param("dock_service", True, "'return to the dock' calls the robot's dock service after "
          "arriving; false (the JetRover has none): arriving at the dock waypoint is the task"),
    Param("call_retries", 3, "re-sends of a request a (restarted) server did not answer"),
    Param("call_timeout", 5.0, "wall seconds one service / goal request may take before it is "
          "re-sent"),
)
POSE_SOURCES = {"pose": (PoseStamped, "pose"), "amcl": (PoseWithCovarianceStamped, "amcl_pose"),
                "odom": (Odometry, "odom")}


def validate(values: dict[str, Any]) -> None:
    """Refuse parameter values the planner cannot work with."""
    if values["planner"] not in ("greedy", "llm"):
        raise ValueError(f"planner must be 'greedy' or 'llm', got '{values['planner']}'")
    if int(values["max_steps"]) < 1:
        raise ValueError("max_steps must be >= 1")
    check_believed_order(values["believed_order"])
    if int(values["look.frames"]) < 1:
        raise ValueError("look.frames must be >= 1")
    LookConfig(frames=int(values["look.frames"]), min_count=int(values["look.min_count"]),
               min_frames=1).validate()
    object_vocabulary(values["objects"])  # ValueError naming a bad entry
    if not 0 <= int(values["call_retries"]) <= 20:
        raise ValueError("call_retries must be within 0..20")
    for key in ("look.timeout", "nav_timeout", "llm.timeout_s", "locate_radius",
                "pose_timeout", "pose_gap", "call_timeout"):
        if float(values[key]) <= 0:
            raise ValueError(f"{key} must be > 0 seconds")
    if not 0 <= float(values["pose_settle"]) <= 10:
        raise ValueError("pose_settle must be within 0..10 seconds")
    if float(values["llm.service_wait_s"]) < 0:
        raise ValueError("llm.service_wait_s must be >= 0 seconds")
    if values["pose_source"] not in POSE_SOURCES:
        raise ValueError(f"pose_source must be one of {', '.join(POSE_SOURCES)} "
                         f"(got '{values['pose_source']}')")
    if not str(values["map_frame"]).strip():
        raise ValueError("map_frame is empty")
    LlmPlannerConfig(max_prompt_tokens=int(values["llm.max_prompt_tokens"]),
                     max_tokens=int(values["llm.max_tokens"]),
                     timeout_s=float(values["llm.timeout_s"])).validate()



class ServiceMemoryView:
    """:class:`MemoryView` over the memory node's ``query_memory`` service."""

    def __init__(self, node: PlannerNode) -> None:
        self._node = node

    def trusted(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        req = QueryMemory.Request(state_key=state_key or "", action=action or "",
                                  max_results=100000)
        resp = self._node.call(self._node.query_client, req)
        if resp is None:
            raise RuntimeError("query_memory did not answer")
        return [conv.entry_from_msg(e) for e in resp.entries]

    def history(self, state_key: str | None = None, action: str | None = None
                ) -> list[MemoryEntry]:
        """Entries with their history: trusted, suppressed and replaced."""
        req = QueryMemory.Request(state_key=state_key or "", action=action or "",
                                  include_suppressed=True, max_results=100000)
        resp = self._node.call(self._node.query_client, req, 10.0)
        if resp is None:
            raise RuntimeError("query_memory did not answer")
        return [conv.entry_from_msg(e) for e in resp.entries]


class PlannerNode(TaskRunning, LifecycleNode):
    """Runs tasks with the task agent (:class:`~glove_ros.nodes.planner_tasks.TaskRunning`);
    serves probes between tasks."""

    def __init__(self) -> None:
        super().__init__("planner")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._group = ReentrantCallbackGroup()
        self._robot = threading.Lock()  # one master drives the robot at a time
        self._frames_lock = threading.Condition()
        self._frames: list[DetectionArray] = []
        self._wrong_frames = self._bad_poses = 0
        # restarts: stamp regression or re-localisation only (core/world/pose_stream.py)
        self._poses = PoseStream("pose")
        self._agent: TaskAgent | None = None
        self._map: WorldMap | None = None
        self._servers: list[Any] = []
        self._accepting = False
        self._handles: list[Any] = []
        self._wp_pub = None
        self._outcome_pub = None
        self._at = ""
        self._clock_map = ClockMap()  # wall clock -> this node's clock ("5 minutes ago")
        self._driven: list[str] = []
        self._llm: Any = None
        self._llm_client: Any = None  # ServiceLlm with llm.service: created once, reused
        self._plan_store: Any = None
        self._planner: Any = None
        self._fallbacks_before = 0
        self._latency = LatencyStat()
        self._llm_decisions = self._llm_fallbacks = 0
        self._diagnostics = NodeDiagnostics(self, self._diagnose)

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            world = load_world(resolve_world(str(values["world"])))
            self._map = WorldMap.from_world(world)
            self._objects = object_vocabulary(values["objects"], world.objects)
            start = str(values["start_waypoint"])
            if start and not self._map.has(start):
                raise ValueError(f"start_waypoint '{start}' is not on the map")
        except (ValueError, FileNotFoundError) as exc:
            self.get_logger().error(f"cannot configure planner: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._at = start
        try:  # what perception can report, not only what the world file places
            self._colors = tuple(sorted(set(world.colors) | set(color_vocabulary(
                str(values["color_config_file"])))))
        except (ValueError, OSError) as exc:
            self.get_logger().error(f"cannot configure planner: color_config_file: {exc}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        assert self._map is not None
        planner: Any = GreedyPlanner()
        if values["planner"] == "llm" and str(values["llm.service"]).strip():
            self._llm_client = shared_llm(
                self, self._llm_client, str(values["llm.service"]).strip(), purpose="plan",
                max_tokens=int(values["llm.max_tokens"]),
                timeout_s=float(values["llm.timeout_s"]),
                wait_s=float(values["llm.service_wait_s"]))
            self._llm = self._llm_client
            self.get_logger().info(f"LLM: the shared model behind {self._llm.service} "
                                   "(loaded there on the first request)")
        elif values["planner"] == "llm":
            try:
                from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

                cfg = LlmConfig(model_path=str(values["llm.model_path"]),
                                n_ctx=int(values["llm.n_ctx"]),
                                n_threads=int(values["llm.n_threads"]),
                                n_gpu_layers=int(values["llm.n_gpu_layers"]),
                                max_tokens=int(values["llm.max_tokens"]),
                                timeout_s=float(values["llm.timeout_s"]))
                t0 = time.monotonic()
                self._llm = LlamaBackend(cfg).load()
                self.get_logger().info(f"LLM loaded from {cfg.resolved_model_path()} in "
                                       f"{time.monotonic() - t0:.1f}s")
            except Exception as exc:  # missing model, not a GGUF, llama_cpp absent
                self.get_logger().error(f"cannot load the LLM: {exc}")
                return TransitionCallbackReturn.FAILURE
        if values["planner"] == "llm":
            planner = LlmPlanner(self._llm, LlmPlannerConfig(
                max_prompt_tokens=int(values["llm.max_prompt_tokens"]),
                max_tokens=int(values["llm.max_tokens"]),
                timeout_s=float(values["llm.timeout_s"])))
        self._plan_store = None
        if values["plan_db_path"]:
            from glove_ros.core.plan.plan_memory import PlanMemoryStore
            from glove_ros.core.plan.plan_planner import PlanAwarePlanner

            try:
                self._plan_store = PlanMemoryStore(str(values["plan_db_path"]))
            except Exception as exc:  # corrupt file: refuse to start rather than guess
                self.get_logger().error(f"cannot open plan memory: {exc}")
                return TransitionCallbackReturn.FAILURE
            planner = PlanAwarePlanner(planner)
        self._planner = planner
        g = self._group
        if getattr(self, "nav_client", None) is None:  # clients: created once, like servers
            self.query_client = self.create_client(QueryMemory, "query_memory",
                                                   callback_group=g)
            self.record_client = self.create_client(RecordTransition, "record_transition",
                                                    callback_group=g)
            self.reverify_client = self.create_client(Trigger, "reverify_negatives",
                                                      callback_group=g)
            self.dock_client = self.create_client(Trigger, "dock", callback_group=g)
            self.nav_client = SpinSafeActionClient(self, NavigateToWaypoint,
                                                   "navigate_to_waypoint", callback_group=g)
        if self._wp_pub is None:  # publishers: created once, destroyed on cleanup
            self._wp_pub = self.create_publisher(String, "current_waypoint", latched_qos())
            self._outcome_pub = self.create_publisher(TaskOutcome, "task_outcomes", 10)
        self._poses = PoseStream(str(values["pose_source"]), float(values["pose_gap"]))
        self._handles = [
            self.create_subscription(DetectionArray, "detections", self._on_detections, 10,
                                     callback_group=g),
            self.create_subscription(*POSE_SOURCES[str(values["pose_source"])], self._on_pose,
                                     10, callback_group=g),
            self.create_subscription(PoseWithCovarianceStamped, "initialpose",
                                     self._on_initialpose, 10, callback_group=g),
        ]
        if values["pose_source"] == "amcl":  # AMCL keeps its last pose (transient local) and
            # is silent while the robot stands: a latched reader gets that pose at start; the
            # plain one above still matches a volatile publisher (a latched reader would not)
            self._handles.append(self.create_subscription(
                PoseWithCovarianceStamped, "amcl_pose", self._on_first_pose, latched_qos(),
                callback_group=g))
        view = ServiceMemoryView(self)
        base = getattr(planner, "base", planner)
        if isinstance(base, LlmPlanner):  # its prompt shows stale memories as such
            base.history = lambda wp: view.history(wp, "look")
            base.now = self._now
        self._view = view
        self._agent = TaskAgent(
            self._map, planner, view, str(values["robot_id"]),
            config=AgentConfig(max_steps=int(values["max_steps"]),
                               reverify_on_stuck=bool(values["reverify_on_stuck"]),
                               believed_order=str(values["believed_order"])),
            reverify=self._reverify if values["reverify_on_stuck"] else None,
            start_waypoint=self._at,
        )
        # Action servers live from the first activation on and refuse goals while inactive:
        # destroying one while the executor waits on it crashes rclpy (Jazzy: "action
        # server pointer is invalid"), and rclpy has no lifecycle action server.
        if not self._servers:
            self._servers = [
                ActionServer(self, RunTask, "run_task", self._execute_task, callback_group=g,
                             goal_callback=self._goal_response,
                             cancel_callback=lambda _g: CancelResponse.ACCEPT),
                ActionServer(self, Probe, "probe", self._execute_probe, callback_group=g,
                             goal_callback=self._goal_response,
                             cancel_callback=lambda _g: CancelResponse.ACCEPT),
            ]
        self._accepting = True
        if self._at:
            self._publish_waypoint(self._at)
        self.get_logger().info(
            f"planner active ({values['planner']}), robot at "
            + (f"'{self._at}' (start_waypoint)" if self._at else
               "an unknown waypoint until its pose arrives"))
        return super().on_activate(state)

    def _goal_response(self, _goal: Any) -> GoalResponse:
        return GoalResponse.ACCEPT if self._accepting else GoalResponse.REJECT

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._accepting = False  # the servers stay; new goals are refused until activated
        for h in self._handles:
            self.destroy_subscription(h)
        self._handles = []
        if self._llm is not None:
            self._llm.close()
            self._llm = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        for pub in (self._wp_pub, self._outcome_pub):
            if pub is not None:
                self.destroy_publisher(pub)
        self._wp_pub = self._outcome_pub = None
        return TransitionCallbackReturn.SUCCESS

    def _parse_llm(self) -> Any:
        """The LLM for requests the task grammar does not know (tagged ``parse`` when
        shared)."""
        llm = self._llm
        return llm.with_purpose("parse") if isinstance(llm, ServiceLlm) else llm

    def _diagnose(self) -> tuple[int, str, dict]:
        """/diagnostics: LLM load, decision latency, fallback rate."""
        kind = str(self.get_parameter("planner").value)
        mean, worst = self._latency.summary()
        asked = self._llm_decisions
        rate = self._llm_fallbacks / asked if asked else 0.0
        shared = self._llm.service if isinstance(self._llm, ServiceLlm) else ""
        values = {"planner": kind, "llm_loaded": self._llm is not None and not shared,
                  "llm_service": shared,
                  "decisions": self._latency.count, "decision_latency_mean_s": mean,
                  "decision_latency_max_s": worst, "llm_decisions": asked,
                  "llm_fallbacks": self._llm_fallbacks, "llm_fallback_rate": rate}
        if kind == "llm" and self._llm is None:
            return WARN, "LLM planner configured but no model loaded (inactive?)", values
        if asked and rate > 0.5:
            return WARN, f"LLM fell back to greedy in {rate:.0%} of decisions", values
        return OK, f"{kind} planner, {self._latency.count} decisions, mean {mean:.3f}s", values

    # plumbing --------------------------------------------------------------------------
    def call(self, client: Any, request: Any, timeout: float | None = None) -> Any:
        """Service call from a worker thread; None when unanswered after every retry.

        A request sent while discovery still lists a server that was just killed (or before
        a restarted one matched this client's reply reader) is never answered, so an
        unanswered request is re-sent, and every re-send is logged. With ``timeout`` each of
        1 + ``call_retries`` sends waits that long. Without, the sends wait 1, 2, 4 s ... up
        to ``call_timeout`` (core/ops/resend.py), the same patience in all, and an answer to
        any earlier copy still counts: the first request after a restart is answered within
        about a second of the new server's match instead of after whole lost tries. Only
        requests that are safe to repeat may go without ``timeout`` (record_transition: the
        memory node stores a re-sent transition once).
        """
        per_try = float(timeout or self.get_parameter("call_timeout").value)
        tries = 1 + int(self.get_parameter("call_retries").value)
        waits = [per_try] * tries if timeout else resend_waits(per_try, tries)
        answered = threading.Event()
        futures: list[Any] = []
        for attempt, wait in enumerate(waits, start=1):
            end = time.monotonic() + wait
            if client.wait_for_service(timeout_sec=wait):
                future = client.call_async(request)
                future.add_done_callback(lambda _f: answered.set())
                futures.append(future)
                answered.wait(max(end - time.monotonic(), 0.0))
            done = next((f for f in futures if f.done() and f.result() is not None), None)
            if done is not None:
                if attempt > 1:
                    self.get_logger().info(f"{client.srv_name} answered on attempt {attempt}")
                return done.result()
            if attempt < len(waits):
                self.get_logger().warning(
                    f"{client.srv_name}: no answer within {wait:.0f}s (server restarted?); "
                    f"re-sending ({attempt + 1}/{len(waits)})")
        self.get_logger().error(f"{client.srv_name}: no answer after {len(waits)} attempt(s)")
        return None

    # position from the robot -----------------------------------------------------------
    def _located(self) -> str | None:
        """The waypoint the robot's current pose is at, or None (no fresh pose, or between)."""
        assert self._map is not None
        pose = self._poses.current(time.monotonic())
        if pose is None:
            return None
        x, y, _ = pose
        radius = float(self.get_parameter("locate_radius").value)
        best, dist = None, radius
        for wp, (wx, wy, _yaw) in self._map.waypoints.items():
            d = ((wx - x) ** 2 + (wy - y) ** 2) ** 0.5
            if d <= dist:
                best, dist = wp, d
        return best

    def _wait_located(self) -> str | None:
        """Wait (``pose_timeout``) for a pose at a waypoint; never assume a position."""
        end = time.monotonic() + float(self.get_parameter("pose_timeout").value)
        while True:
            here = self._located()
            if here is not None or time.monotonic() > end:
                return here
            time.sleep(0.05)

    def _now(self) -> float:
        now = self.get_clock().now().nanoseconds * 1e-9
        self._clock_map.sample(time.time(), now)
        return now

    def _publish_waypoint(self, waypoint: str) -> None:
        self._at = waypoint or self._at
        if self._wp_pub is not None:
            self._wp_pub.publish(String(data=waypoint))

    def _on_pose(self, msg: Any) -> None:
        """A pose in map_frame becomes the robot's pose; any other frame is dropped."""
        frame = msg.header.frame_id
        if frame != self.get_parameter("map_frame").value:
            self._wrong_frames += 1
            if self._wrong_frames in (1, 100) or self._wrong_frames % 1000 == 0:
                self.get_logger().warning(
                    f"pose in frame '{frame}', not map_frame "
                    f"'{self.get_parameter('map_frame').value}': dropped "
                    f"({self._wrong_frames} so far; pose_source amcl on a real robot)")
            return
        pose = conv.pose2d_from_pose(msg.pose.pose if hasattr(msg.pose, "pose") else msg.pose)
        update = self._poses.update(conv.seconds_from_time(msg.header.stamp), time.monotonic(),
                                    *pose)
        if update.stale:
            return  # a late copy (two readers of amcl_pose, threads): nothing new
        if not update.accepted:
            self._bad_poses += 1
            if self._bad_poses in (1, 100) or self._bad_poses % 1000 == 0:
                self.get_logger().warning(f"{update.reason}: dropped ({self._bad_poses} so far)")
            return
        if update.restarted:
            self.get_logger().warning(
                f"{update.reason}: the robot driver restarted; no transition spanning it is "
                "recorded")
        if self._map is not None and not self._robot.locked():  # idle: say where it stands
            here = self._located()
            if here is not None and here != self._at:
                self._publish_waypoint(here)

    @property
    def _pose(self) -> tuple[float, float, float] | None:
        """The robot's last pose in map_frame (the pose stream's; None after a
        re-localisation until the source speaks again)."""
        return self._poses.last

    def _arrival_pose(self, waypoint: str) -> tuple[float, float, float] | None:
        """The pose stamped on what the robot does after a drive (its looks).

        Under load the last pose delivered may be one sent on the way (seen: 0.2-0.66 m short
        of the waypoint), wrong evidence for ``rule: pose``. So a continuous source is given
        ``pose_settle`` seconds to deliver a pose stamped after the drive ended. A pose that
        still lies farther than ``locate_radius`` from the waypoint reached (AMCL stays silent
        once the robot stops) is not stamped: no pose is stored rather than a wrong one."""
        ended = self.get_clock().now().nanoseconds * 1e-9  # the clock poses are stamped on
        if not self._poses.event_driven:
            settle, t0 = float(self.get_parameter("pose_settle").value), time.monotonic()
            while self._poses.after(ended) is None and time.monotonic() - t0 < settle:
                time.sleep(0.02)
        known = self._map.waypoints.get(waypoint) if self._map is not None else None
        pose, off = pose_at(self._poses.last, known[:2] if known else None,
                            float(self.get_parameter("locate_radius").value))
        if pose is None and self._poses.last is not None:
            self.get_logger().warning(
                f"arrived at '{waypoint}' but the last pose is {off:.2f} m from it; the "
                "transitions that follow carry no pose")
        return pose

    def _on_first_pose(self, msg: Any) -> None:
        """The latched reader of amcl_pose: only its first pose matters (AMCL's last pose
        before this node started); afterwards the plain reader carries the stream."""
        if not self._poses.has_pose:
            self._on_pose(msg)

    def _on_initialpose(self, msg: PoseWithCovarianceStamped) -> None:
        """Re-localisation (RViz's 2D Pose Estimate, or a person): the robot may have been
        carried; no transition spanning it is recorded, and the pose is unknown until the
        pose source speaks again."""
        self._poses.relocalised()
        self.get_logger().warning("re-localised (initialpose): no transition spanning it is "
                                  "recorded; waiting for the pose source")

    def _on_detections(self, msg: DetectionArray) -> None:
        with self._frames_lock:
            self._frames.append(msg)
            del self._frames[:-50]
            self._frames_lock.notify_all()

    def _reverify(self, keys: list[tuple[str, str, str]]) -> bool:
        resp = self.call(self.reverify_client, Trigger.Request(), 10.0)
        if resp is None:
            return False
        self.get_logger().info(f"asked memory to re-verify stale negatives: {resp.message}")
        return bool(resp.success)

    def _record(self, transitions: list[Transition]) -> list[tuple[Any, int]]:
        """Record through the memory service; returns (msg, id) pairs (id 0: not stored)."""
        out = []
        for t in transitions:
            msg = conv.transition_to_msg(t, str(self.get_parameter("map_frame").value))
            msg.header.stamp = self.get_clock().now().to_msg()
            resp = self.call(self.record_client, RecordTransition.Request(transition=msg))
            if resp is None or not resp.accepted:
                why = "memory not answering" if resp is None else resp.message
                self.get_logger().error(f"transition not recorded ({why}): {t.key} {t.outcome}")
            out.append((msg, int(resp.id) if resp is not None and resp.accepted else 0))
        return out

    # robot primitives ------------------------------------------------------------------
    def _navigate(self, waypoint: str, avoid: Sequence[tuple[str, str]] = (),
                  cancelled: Callable[[], bool] = lambda: False) -> tuple[str, str]:
        """Drive to ``waypoint``; returns (outcome, final waypoint).

        ``cancelled`` is polled every 0.1 s while the goal runs: when it turns true (the
        ``run_task`` goal was cancelled) the navigation goal is cancelled at once, so the
        robot stops instead of driving on; the outcome is then ``cancelled``."""
        self._publish_waypoint("")
        self._driven = []  # corridors the drive evidently went along (waypoint_nav's result)
        if not self.nav_client.wait_for_server(timeout_sec=5.0):
            self.get_logger().error("navigate_to_waypoint server not available")
            return "unavailable", self._at
        goal = NavigateToWaypoint.Goal(waypoint=waypoint,
                                       avoid_edges=[f"{a}:{b}" for a, b in avoid])
        per_try = float(self.get_parameter("call_timeout").value)
        tries = 1 + int(self.get_parameter("call_retries").value)
        handle = None
        for attempt in range(1, tries + 1):  # an unaccepted goal never drove: safe to re-send
            handle = wait_future(self.nav_client.send_goal_async(goal), per_try)
            if handle is not None or attempt == tries:
                break
            self.get_logger().warning(f"navigate_to_waypoint: goal not answered within "
                                      f"{per_try:.0f}s (server restarted?); re-sending "
                                      f"({attempt + 1}/{tries})")
            self.nav_client.wait_for_server(timeout_sec=per_try)
        if handle is None or not handle.accepted:
            return ("unavailable" if handle is None else "rejected"), self._at
        timeout = float(self.get_parameter("nav_timeout").value)
        future = handle.get_result_async()
        end = time.monotonic() + timeout
        gone_since = None
        res = None
        while res is None and time.monotonic() < end:
            res = wait_future(future, 0.1)
            if res is None and cancelled():
                self.get_logger().info(f"navigate_to {waypoint}: task cancelled; cancelling "
                                       "the navigation goal")
                wait_future(handle.cancel_goal_async(), per_try)
                res = wait_future(future, per_try)  # the server's last word: where it stopped
                final = res.result.final_waypoint if res is not None else ""
                self._driven = list(getattr(res.result, "corridors", [])) if res is not None else []
                self._at = final  # "" between waypoints: the position is not assumed
                self._publish_waypoint(final)
                return "cancelled", final
            if res is None and not self.nav_client.server_is_ready():
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > per_try:  # the driver died mid-goal
                    self.get_logger().error(f"navigate_to {waypoint}: server gone during the "
                                            "goal; outcome unknown")
                    return "unavailable", self._at
            else:
                gone_since = None
        if res is None:
            wait_future(handle.cancel_goal_async(), 5.0)
            return "timeout", self._at
        result = res.result
        self._driven = list(getattr(result, "corridors", []))
        final = result.final_waypoint or self._at
        self._publish_waypoint(final)
        return result.outcome, final

    def _look(self, waypoint: str) -> str | None:
        """Fuse fresh frames at ``waypoint`` into one outcome signature; None if no frames."""
        n = int(self.get_parameter("look.frames").value)
        timeout = float(self.get_parameter("look.timeout").value)
        config = LookConfig(frames=n, min_count=int(self.get_parameter("look.min_count").value),
                            min_frames=1)
        frames: list[Frame] = []
        self._publish_waypoint(waypoint)
        with self._frames_lock:
            self._frames.clear()  # only frames taken after arrival count
        gate = FreshFrames(conv.seconds_from_time(self.get_clock().now().to_msg()))
        end = time.monotonic() + timeout
        used = 0
        while used < n and time.monotonic() < end:
            with self._frames_lock:
                if not self._frames:
                    self._frames_lock.wait(0.2)
                    continue
                frame = self._frames.pop(0)
            if frame.waypoint != waypoint or not gate.admit(
                    conv.seconds_from_time(frame.header.stamp)):
                continue
            try:  # a trained detector's frames make an object look (objects=cup,person*2)
                seen = Frame.from_detections(waypoint, frame.detections,
                                             kind=kind_of_backend(frame.backend))
            except ValueError as exc:  # unknown backend, or a name a look cannot hold
                self.get_logger().warning(f"frame at '{waypoint}' ignored: {exc}",
                                          throttle_duration_sec=10.0)
                continue
            if frames and seen.kind != frames[0].kind:  # the backend changed mid-look
                self.get_logger().warning(
                    f"frame at '{waypoint}' ignored: a {seen.kind} frame in a look of "
                    f"{frames[0].kind} (did perception's backend change?)")
                continue
            frames.append(seen)
            used += 1
        if used == 0:
            self.get_logger().error(
                f"no camera frames at '{waypoint}' within {timeout:.0f}s"
                + (f" ({gate.stale} dropped as captured before the look began: is the camera "
                   "stamped on this node's clock? use_sim_time must match)" if gate.stale else ""))
            return None
        return judge_frames(frames, config, waypoint).outcome

    # actions ---------------------------------------------------------------------------
    def _execute_probe(self, handle: Any) -> Any:
        goal = handle.request
        result = Probe.Result()
        outcomes: list[str] = []
        with self._robot:  # after the running task
            for i in range(int(goal.samples)):
                if handle.is_cancel_requested:
                    break
                outcome = self._probe_once(goal.state_key, goal.action, goal.action_arg)
                if outcome is None:
                    result.message = f"probe {i + 1} could not be carried out"
                    break
                outcomes.append(outcome)
                handle.publish_feedback(Probe.Feedback(done=len(outcomes), last_outcome=outcome))
            if self._agent is not None and not self._agent.active:
                self._agent.relocate(self._at, self._pose)
        result.outcomes = outcomes
        result.completed = len(outcomes) == int(goal.samples)
        if result.completed:
            handle.succeed()
        elif handle.is_cancel_requested:
            handle.canceled()
        else:
            handle.abort()
        self.get_logger().info(f"probe ({goal.state_key}, {goal.action} {goal.action_arg}): "
                               f"{outcomes}")
        return result

    def _probe_once(self, state_key: str, action: str, action_arg: str) -> str | None:
        assert self._map is not None
        if not self._map.has(state_key):
            return None
        if self._at != state_key:
            outcome, _ = self._navigate(state_key)
            if outcome != "reached":
                return None
        if action == "look":
            return self._look(state_key)
        if action == "navigate_to" and self._map.has(action_arg):
            outcome, _ = self._navigate(action_arg)
            return outcome if outcome in ("reached", "blocked") else None
        return None


def main(args: Sequence[str] | None = None) -> int:
    """Run the planner node."""
    return run(PlannerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
