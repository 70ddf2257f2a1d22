"""Plan-gate node: every plan-memory update passes the Janus gate on the robot.

After each task the planner publishes a ``TaskOutcome``. This node turns it into the
updater's episode record, lets the updater (rule-based, or reflection by the local LLM)
propose a candidate plan memory, and lets the Janus gate decide (DESIGN.md section 4,
:mod:`glove_ros.core.plan.janus`): warm-up and updates consistent with the memory momentum are
deployed directly; a deviating update is compared with the current memory on the hybrid
evaluation set (coverage + boundary + fresh tasks) and deployed only if it scores higher.

Scoring on the robot (:mod:`glove_ros.core.plan.plan_planner`): a task cannot be re-driven, so
the planner's first decision for it ("which waypoint first?") is rehearsed under each
memory and scored against *verified experience memory* -- the trusted looks GLOVE keeps.
This node reads experience memory straight from its SQLite file (``experience_db_path``,
by default the same file as plan memory: tables ``plan_*`` next to the experience tables)
through :class:`~glove_ros.core.memory.store.ExperienceStore`, read-only, instead of calling the
``query_memory`` service: a comparison scores up to |E_t| tasks and each rehearsal reads
one waypoint's trusted looks, which is a local indexed query instead of a DDS round trip
per task, and it works while the memory node is busy. WAL lets it read while the memory
node writes. Only trusted entries are read, exactly what ``query_memory`` returns.

Garbage never reaches memory: a malformed ``TaskOutcome`` is dropped with a warning; an
updater that fails or returns unusable output (invalid JSON, no valid edit) proposes
nothing; a candidate the gate rejects stays stored as ``rejected`` for audit. Every change
can be undone with ``plan_memory_rollback``.

Interfaces (relative names; remap in launch):
  sub  task_outcomes         glove_ros/TaskOutcome   one per finished task (planner node)
  pub  gate_decisions        glove_ros/GateDecision  one per proposed candidate
  srv  plan_memory_rollback  std_srvs/Trigger  make the version the active one was built on
                             active again (one step of undo; call again to go further back)
  srv  explain_gate          std_srvs/Trigger  the last decision, explained in words

Lifecycle: configure validates parameters, opens the databases and reads the map;
activate loads the embedder (and the LLM for ``updater: llm``; with ``llm.service`` the
reflection goes to the robot's shared model in the llm node instead), restores the gate's
momentum and task pools from the database, and opens the interfaces; deactivate closes the
interfaces and releases the models; cleanup closes the databases. Parameter changes are
validated live and take effect at the next activate (the gate is rebuilt there).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.core.llm.runtime import LlmConfig
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.plan.agent_memory import StoreMemoryView
from glove_ros.core.plan.agent_types import WorldMap
from glove_ros.core.plan.janus import GateDecision, JanusConfig, JanusGate, make_trigger
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.plan_planner import (
    ExperienceRisk,
    ExperienceTruth,
    PlanGatePipeline,
    RehearsalContext,
    make_rehearsal_scorer,
    outcome_from_transitions,
    rollback_to_parent,
)
from glove_ros.core.plan.updater import LlmUpdater, LlmUpdaterConfig, RuleUpdater, RuleUpdaterConfig
from glove_ros.core.world.worldfile import load_world
from glove_ros.msg import GateDecision as GateDecisionMsg
from glove_ros.msg import TaskOutcome
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    destroy_handles,
    param_values,
    run,
    validating_callback,
)
from glove_ros.paths import make_private_dirs

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("db_path", "glove_memory.db", "SQLite file of plan memory (tables plan_*; may be the "
          "experience-memory file)", read_only=True),
    Param("experience_db_path", "", "SQLite file of verified experience memory the gate scores "
          "against ('' = db_path)", read_only=True),
    Param("world", "jetrover_maze", "map for rehearsal: bundled world name or world file "
          "(only waypoints, corridors and the dock are read)"),
    Param("rehearsal.start", "", "waypoint rehearsed decisions start from ('' = the dock)"),
    Param("rehearsal.belief_threshold", 0.5, "share of trusted looks at a waypoint that must "
          "have seen the colour for a decision to score 1"),
    Param("updater", "rule", "'rule' (deterministic) or 'llm' (reflection by the local LLM)"),
    Param("rule.miss_threshold", 2, "consecutive empty looks before the rule updater drops a "
          "fact"),
    Param("llm.model_path", "", "GGUF file or model name ('' = the default model, "
          "qwen2.5-coder-1.5b)"),
    Param("llm.n_ctx", 2048, "context window, tokens"),
    Param("llm.n_threads", 1, "llama.cpp threads (keep below the idle cores)"),
    Param("llm.n_gpu_layers", 0, "layers offloaded to the GPU (-1 all; Jetson CUDA build)"),
    Param("llm.max_tokens", 256, "bound on one reflection's reply, tokens (>= 16)"),
    Param("llm.timeout_s", 60.0, "wall-clock bound on one reflection, seconds"),
    Param("llm.max_edits", 3, "most edits one reflection may propose"),
    Param("llm.service", "", "'' = load the model in this process (llm.model_path ...); else "
          "the llm node's LlmComplete service (e.g. llm/complete): the robot's one shared "
          "model, loaded there on first use"),
    Param("llm.service_wait_s", 60.0, "with llm.service: seconds waited beyond llm.timeout_s "
          "(the shared model's lazy load, a queued request); no answer = no update proposed"),
    Param("janus.beta", 0.9, "momentum decay in [0, 1)"),
    Param("janus.tau", 0.0, "compare when cos(z_t, m_{t-1}) < tau; lower compares less"),
    Param("janus.warmup", 3, "first memory-changing updates accepted without comparison"),
    Param("janus.coverage_k", 8, "k-means representatives of all tasks seen (coverage part)"),
    Param("janus.boundary_max", 16, "most tasks whose outcome flipped (boundary part)"),
    Param("janus.fresh_max", 16, "most tasks since the last comparison (fresh part)"),
    Param("janus.seed", 0, "seed of k-means and of the random trigger"),
    Param("janus.accept_ties", True, "keep a candidate that scores equal to the old memory "
          "(the rehearsal sees only the first goal: routes and corridor lessons tie)"),
    Param("trigger", "evidence", "evidence | momentum | evidence+momentum | always | never | "
          "periodic:K | random:P (evidence: compare when experience memory speaks against "
          "the update; see docs/janus.md)"),
    Param("embedder", "onnx", "'onnx' (all-MiniLM-L6-v2 int8) or 'hashing' (tests only)"),
)


def janus_config(values: dict[str, Any]) -> JanusConfig:
    """Build and validate the gate config from ``janus.*`` parameters."""
    return JanusConfig(
        beta=float(values["janus.beta"]), tau=float(values["janus.tau"]),
        warmup=int(values["janus.warmup"]), coverage_k=int(values["janus.coverage_k"]),
        boundary_max=int(values["janus.boundary_max"]),
        fresh_max=int(values["janus.fresh_max"]), seed=int(values["janus.seed"]),
        accept_ties=bool(values["janus.accept_ties"]),
    ).validate()


def llm_config(values: dict[str, Any]) -> LlmConfig:
    """Build and validate the LLM config from ``llm.*`` parameters."""
    return LlmConfig(
        model_path=str(values["llm.model_path"]), n_ctx=int(values["llm.n_ctx"]),
        n_threads=int(values["llm.n_threads"]), n_gpu_layers=int(values["llm.n_gpu_layers"]),
        max_tokens=int(values["llm.max_tokens"]), timeout_s=float(values["llm.timeout_s"]),
        temperature=0.0,
    ).validate()


def updater_config(values: dict[str, Any]) -> RuleUpdaterConfig | LlmUpdaterConfig:
    """The updater's config (validated) for the chosen ``updater``."""
    if values["updater"] == "llm":
        return LlmUpdaterConfig(max_edits=int(values["llm.max_edits"]),
                                max_tokens=int(values["llm.max_tokens"])).validate()
    return RuleUpdaterConfig(miss_threshold=int(values["rule.miss_threshold"])).validate()


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if not str(values["db_path"]).strip():
        raise ValueError("db_path is empty; give the SQLite file of plan memory")
    if values["updater"] not in ("rule", "llm"):
        raise ValueError(f"updater must be 'rule' or 'llm', got {values['updater']!r}")
    if values["embedder"] not in ("onnx", "hashing"):
        raise ValueError(f"embedder must be 'onnx' or 'hashing', got {values['embedder']!r}")
    if not str(values["world"]).strip():
        raise ValueError("world is empty; give the bundled world name or a world file")
    bt = float(values["rehearsal.belief_threshold"])
    if not 0.0 < bt <= 1.0:
        raise ValueError(f"rehearsal.belief_threshold must be in (0, 1], got {bt}")
    cfg = janus_config(values)
    make_trigger(str(values["trigger"]), cfg, risk=lambda c: "")
    llm_config(values)
    updater_config(values)
    if float(values["llm.service_wait_s"]) < 0:
        raise ValueError("llm.service_wait_s must be >= 0 seconds")


def decision_to_msg(d: GateDecision) -> GateDecisionMsg:
    """Core GateDecision -> glove_ros/GateDecision (``active_version`` as a string)."""
    return GateDecisionMsg(
        update_index=int(d.update_index), verdict=int(d.verdict), triggered=bool(d.triggered),
        cosine=float(d.cosine), tau=float(d.tau), score_old=float(d.score_old),
        score_new=float(d.score_new), eval_coverage=int(d.eval_coverage),
        eval_boundary=int(d.eval_boundary), eval_fresh=int(d.eval_fresh),
        active_version=str(d.active_version), reason=d.reason[:2000],
    )


class PlanGateNode(LifecycleNode):
    """Janus gate on plan-memory updates (thin: all decisions live in glove_ros.core)."""

    def __init__(self) -> None:
        super().__init__("plan_gate")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._plan: PlanMemoryStore | None = None
        self._exp: ExperienceStore | None = None
        self._rehearsal: RehearsalContext | None = None
        self._values: dict[str, Any] = {}
        self._gate: JanusGate | None = None
        self._pipeline: PlanGatePipeline | None = None
        self._llm: Any = None
        self._llm_client: Any = None  # ServiceLlm with llm.service: created once, reused
        self._embedder: Any = None
        self._pub: Any = None
        self._handles: list[Any] = []
        self._group = MutuallyExclusiveCallbackGroup()  # one outcome or service at a time
        self._lock = threading.Lock()
        self._rejected_outcomes = 0

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            db = Path(str(values["db_path"])).expanduser()
            exp_path = str(values["experience_db_path"]).strip() or str(db)
            # experience store first: on a new shared file it writes the schema and the
            # application id the memory node checks for
            self._exp = ExperienceStore(exp_path)
            make_private_dirs(db.parent)
            self._plan = PlanMemoryStore(db)
            world_map = WorldMap.from_world(load_world(str(values["world"])))
            self._rehearsal = RehearsalContext(world_map, str(values["rehearsal.start"]))
            self._rehearsal.start_waypoint()
        except Exception as exc:  # ValueError, a corrupt or foreign database, a bad world
            self.get_logger().error(f"cannot configure plan gate: {exc}")
            self._close_stores()
            return TransitionCallbackReturn.FAILURE
        self._values = values
        info = self._plan.version_info()
        self.get_logger().info(
            f"plan memory open: {db} (active version {info.version}, {info.n_entries} "
            f"entries); scoring against experience memory {exp_path}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        assert self._plan is not None and self._exp is not None and self._rehearsal is not None
        try:
            validate(values)
            cfg = janus_config(values)
            if values["embedder"] == "onnx":
                from glove_ros.core.llm.embedding import Embedder

                self._embedder = Embedder().load()
            else:
                from glove_ros.core.llm.embedding import HashingEmbedder

                self._embedder = HashingEmbedder()
            service = str(values["llm.service"]).strip()
            if values["updater"] == "llm" and service:
                from glove_ros.nodes.llm_client import shared_llm

                self._llm_client = shared_llm(
                    self, self._llm_client, service, purpose="reflect",
                    max_tokens=int(values["llm.max_tokens"]),
                    timeout_s=float(values["llm.timeout_s"]),
                    wait_s=float(values["llm.service_wait_s"]))
                self._llm = self._llm_client
            elif values["updater"] == "llm":
                from glove_ros.core.llm.runtime import LlamaBackend

                self._llm = LlamaBackend(llm_config(values)).load()
            updater: Any = (LlmUpdater(self._llm, updater_config(values))
                            if values["updater"] == "llm" else RuleUpdater(updater_config(values)))
            scorer = make_rehearsal_scorer(
                self._plan, self._rehearsal,
                ExperienceTruth(StoreMemoryView(self._exp),
                                float(values["rehearsal.belief_threshold"])))
            risk = ExperienceRisk(self._plan, self._rehearsal.world_map,
                                  StoreMemoryView(self._exp), events=self._exp,
                                  belief_threshold=float(values["rehearsal.belief_threshold"]))
            self._gate = JanusGate(cfg, self._embedder, scorer, store=self._plan,
                                   trigger=make_trigger(str(values["trigger"]), cfg, risk=risk))
            self._pipeline = PlanGatePipeline(self._plan, updater, self._gate)
        except Exception as exc:  # model missing, malformed saved gate state, ...
            self.get_logger().error(f"cannot activate plan gate: {exc}")
            self._release_models()
            return TransitionCallbackReturn.FAILURE
        self._pub = self.create_publisher(GateDecisionMsg, "gate_decisions", 10)
        g = self._group
        self._handles = [
            self.create_subscription(TaskOutcome, "task_outcomes", self._on_outcome, 10,
                                     callback_group=g),
            self.create_service(Trigger, "plan_memory_rollback", self._on_rollback,
                                callback_group=g),
            self.create_service(Trigger, "explain_gate", self._on_explain, callback_group=g),
        ]
        self.get_logger().info(
            f"plan gate active: updater {values['updater']}, trigger {self._gate.trigger.name}, "
            f"tau {cfg.tau}, warm-up {cfg.warmup} (gate has seen {self._gate.update_index} "
            f"updates, {self._gate.tasks_seen} tasks)")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        destroy_handles(self, self._handles)
        if self._pub is not None:
            self.destroy_publisher(self._pub)
            self._pub = None
        self._release_models()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release_models()
        self._close_stores()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    def _release_models(self) -> None:
        with self._lock:
            self._pipeline = None
            self._gate = None
            for res in (self._llm, self._embedder):
                close = getattr(res, "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:  # pragma: no cover - releasing must not fail a transition
                        pass
            self._llm = self._embedder = None

    def _close_stores(self) -> None:
        for store in (self._plan, self._exp):
            if store is not None:
                store.close()
        self._plan = self._exp = None

    # callbacks -------------------------------------------------------------------------
    def _on_outcome(self, msg: TaskOutcome) -> None:
        with self._lock:
            pipeline = self._pipeline
            if pipeline is None:
                return
            try:
                ts = [conv.transition_from_msg(t) for t in msg.transitions]
                outcome = outcome_from_transitions(
                    msg.episode_id, msg.task, msg.target, msg.success, ts,
                    [int(i) for i in msg.transition_ids], found_at=msg.found_at,
                    reason=msg.reason)
            except ValueError as exc:
                self._rejected_outcomes += 1
                self.get_logger().warning(
                    f"rejected task outcome '{msg.episode_id}' ({exc}); plan memory unchanged")
                return
            try:
                step = pipeline.process(outcome)
            except Exception as exc:  # a database error must not kill the node
                self.get_logger().error(f"could not gate episode '{outcome.episode_id}': {exc}")
                return
        d = step.decision
        if d is None:
            self.get_logger().info(f"episode '{step.episode_id}': {step.note}")
            return
        msg_out = decision_to_msg(d)
        msg_out.header.stamp = self.get_clock().now().to_msg()
        if self._pub is not None:
            self._pub.publish(msg_out)
        cos = "n/a" if math.isnan(d.cosine) else f"{d.cosine:.3f}"
        text = (f"episode '{step.episode_id}': candidate v{d.candidate_version} "
                f"({', '.join(step.edits)}) {('DEPLOYED' if d.accepted else 'REJECTED')}, "
                f"active v{d.active_version}; cos {cos}; {d.reason}")
        if d.accepted:
            self.get_logger().info(text)
        else:
            self.get_logger().warning(text)

    def _on_rollback(self, req: Any, resp: Any) -> Any:
        with self._lock:
            if self._plan is None:
                resp.success, resp.message = False, "plan memory is not configured"
                return resp
            before = self._plan.active_version
            try:
                after = rollback_to_parent(self._plan, "plan_memory_rollback service")
            except ValueError as exc:
                resp.success, resp.message = False, str(exc)
                return resp
        resp.success = True
        resp.message = f"plan memory rolled back from version {before} to {after}"
        self.get_logger().warning(resp.message)
        return resp

    def _on_explain(self, req: Any, resp: Any) -> Any:
        gate = self._gate
        if gate is None or not gate.decisions:
            resp.success, resp.message = False, "no gate decision yet"
            return resp
        resp.success = True
        resp.message = JanusGate.explain(gate.decisions[-1])
        return resp


def main(args: Sequence[str] | None = None) -> int:
    """Run the plan-gate node."""
    return run(PlanGateNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
