"""Memory node: persistent experience memory with GLOVE verification on its write path.

Every transition (topic ``transitions`` or service ``record_transition``) is validated,
committed to SQLite (WAL) and checked by the GLOVE verifier before it is acknowledged, so
nothing is retrievable before it was verified and nothing acknowledged is lost on a
crash. Retrieval (``query_memory``) excludes suppressed and replaced entries unless
asked; ``explain_entry`` says why an entry is trusted, suppressed or replaced.

Interfaces (relative names; remap in launch):
  sub  transitions          glove_ros/Transition     observed outcomes to remember
  pub  memory_events        glove_ros/MemoryEvent    every recorded / suppressed / replaced entry
  pub  dissonance           glove_ros/DissonanceAlert  memory contradicts the world
  pub  probe_requests       glove_ros/ProbeRequest   evidence wanted (sync mode, stale negatives)
  srv  record_transition    glove_ros/RecordTransition
  srv  query_memory         glove_ros/QueryMemory
  srv  explain_entry        glove_ros/ExplainEntry
  srv  reverify_negatives   std_srvs/Trigger  the planner has no route its memory allows:
                            re-verify suspected stale negative memories (GLOVE deadlock rule)

Lifecycle: configure validates parameters and opens the database (a corrupt file fails
the transition and is left untouched); activate opens the interfaces; deactivate closes
them; cleanup closes the database.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.core.experience import MemoryEvent, Source, Transition
from glove_ros.core.store import ExperienceStore
from glove_ros.core.verifier import GloveVerifier, VerifierConfig, VerifyResult
from glove_ros.msg import DissonanceAlert, ProbeRequest
from glove_ros.msg import MemoryEvent as MemoryEventMsg
from glove_ros.msg import Transition as TransitionMsg
from glove_ros.nodes.common import (
    Param,
    declare_params,
    destroy_handles,
    param_values,
    run,
    validating_callback,
)
from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

PARAMS = (
    Param("autostart", True, "configure and activate at start (no lifecycle manager)"),
    Param("db_path", "glove_memory.db", "SQLite file of experience memory (created if absent)",
          read_only=True),
    Param("max_results", 100, "default cap on entries returned by query_memory"),
    Param("verifier.enabled", True, "run GLOVE verification on every recorded transition"),
    Param("verifier.mode", "async", "'async' (replay-relaxed, physical robot) or 'sync' (probe)"),
    Param("verifier.epsilon", 0.1, "surprise threshold on Q_hist(s'|s,a)"),
    Param("verifier.p_th", 3, "consecutive surprises that make dissonance"),
    Param("verifier.delta", 0.05, "confidence parameter of the Hoeffding bound / probe budget"),
    Param("verifier.k_modes", 1, "outcome modes K per (s,a); 1 = deterministic (alpha = 1)"),
    Param("verifier.rule", "waypoint", "equivalence rule: 'state', 'waypoint' or 'pose'"),
    Param("verifier.radius", 0.3, "pose rule radius, metres"),
    Param("verifier.never_probe", [""], "actions never probed (irreversible or unsafe)"),
    Param("verifier.max_probe_budget", 30, "probe samples the verifier may request; -1 unlimited"),
    Param("verifier.evidence_threshold", 0, "fresh samples that complete async re-verification "
          "(0: alpha)"),
    Param("verifier.negative_outcomes", ["hole", "blocked", "collision", "failed", "unreachable"],
          "outcome signatures that make a memory negative (deadlock rule)"),
    Param("verifier.recheck_on_dissonance", False, "re-test stale negatives after each dissonance"),
    Param("verifier.stale_negative_after", 50, "transitions after which a stuck planner may "
          "re-test an unconfirmed negative memory"),
    Param("verifier.phase", "default", "label under which verification cost is counted (live)"),
)


def verifier_config(values: dict[str, Any]) -> VerifierConfig:
    """Build and validate the core verifier config from ``verifier.*`` parameters."""
    raw = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("verifier.")}
    raw.pop("enabled", None)
    raw.pop("phase", None)
    raw["never_probe"] = tuple(a for a in raw.get("never_probe", ()) if a)
    raw["negative_outcomes"] = tuple(a for a in raw.get("negative_outcomes", ()) if a)
    if int(raw.get("max_probe_budget", 0)) < 0:
        raw["max_probe_budget"] = None
    return VerifierConfig.from_dict(raw)


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if not str(values["db_path"]).strip():
        raise ValueError("db_path is empty; give a file path for the memory database")
    if int(values["max_results"]) <= 0:
        raise ValueError("max_results must be > 0")
    verifier_config(values).validate()


class MemoryNode(LifecycleNode):
    """Experience memory server (thin: all decisions live in glove_ros.core)."""

    def __init__(self) -> None:
        super().__init__("memory")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._store: ExperienceStore | None = None
        self._verifier: GloveVerifier | None = None
        self._write_lock = threading.Lock()
        self._group = MutuallyExclusiveCallbackGroup()  # one writer at a time
        self._handles: list[Any] = []
        self._event_pub = self._alert_pub = self._probe_pub = None
        self._rejected = 0
        self._probe_outcomes: dict[int, list[Transition]] = {}

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            self._store = ExperienceStore(str(values["db_path"]))
        except Exception as exc:  # ValueError, corrupt database, permissions
            self.get_logger().error(f"cannot configure memory: {exc}")
            return TransitionCallbackReturn.FAILURE
        if values["verifier.enabled"]:
            self._verifier = GloveVerifier(self._store, verifier_config(values))
            self._verifier.phase = str(values["verifier.phase"])
        stats = self._store.stats()
        self.get_logger().info(f"memory open: {values['db_path']} {stats}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._event_pub = self.create_publisher(MemoryEventMsg, "memory_events", 50)
        self._alert_pub = self.create_publisher(DissonanceAlert, "dissonance", 10)
        self._probe_pub = self.create_publisher(ProbeRequest, "probe_requests", 10)
        assert self._store is not None
        self._store.add_listener(self._publish_event)
        g = self._group
        self._handles = [
            self.create_subscription(TransitionMsg, "transitions", self._on_transition, 100,
                                     callback_group=g),
            self.create_service(RecordTransition, "record_transition", self._on_record,
                                callback_group=g),
            self.create_service(QueryMemory, "query_memory", self._on_query, callback_group=g),
            self.create_service(ExplainEntry, "explain_entry", self._on_explain,
                                callback_group=g),
            self.create_service(Trigger, "reverify_negatives", self._on_reverify,
                                callback_group=g),
        ]
        self.add_on_set_parameters_callback(self._on_live_params)
        self.get_logger().info("memory active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        destroy_handles(self, self._handles)
        if self._store is not None:
            self._store.remove_listener(self._publish_event)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._store is not None:
            self._store.close()
        self._store = self._verifier = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    def _on_live_params(self, changes: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        for change in changes:
            if change.name == "verifier.phase" and self._verifier is not None:
                self._verifier.phase = str(change.value)
        return SetParametersResult(successful=True)

    # write path ------------------------------------------------------------------------
    def _record(self, msg: TransitionMsg) -> tuple[bool, int, str]:
        """Validate, store, verify. Returns (accepted, id, message); never raises."""
        try:
            t = conv.transition_from_msg(msg)
        except ValueError as exc:
            self._rejected += 1
            self.get_logger().warning(f"rejected transition ({exc}); memory unchanged")
            return False, 0, str(exc)
        if self._store is None:
            return False, 0, "memory is not configured"
        with self._write_lock:
            try:
                if self._verifier is not None and t.source == Source.PROBED:
                    taken = self._take_probe(t)
                    if taken is not None:
                        return True, taken, "probe outcome applied"
                if self._verifier is not None:
                    result = self._verifier.observe(t)
                    self._act_on(result)
                    return True, int(result.entry_id), "recorded and verified"
                return True, int(self._store.record(t)), "recorded"
            except Exception as exc:  # a database error must not kill the node
                self.get_logger().error(f"could not record transition: {exc}")
                return False, 0, f"storage error: {exc}"

    def _take_probe(self, t: Transition) -> int | None:
        """Collect a probed outcome for an outstanding request; apply when alpha are in.

        Returns the id of the first new entry once applied, 0 while still collecting, None
        when no request is outstanding for this (state, action) (then it is observed as
        ordinary evidence).
        """
        assert self._verifier is not None
        for req in self._verifier.outstanding_probes():
            if req.pair == t.key:
                got = self._probe_outcomes.setdefault(req.request_id, [])
                got.append(t)
                if len(got) < req.alpha:
                    return 0
                del self._probe_outcomes[req.request_id]
                new_ids = self._verifier.apply_probes(req, got)
                self.get_logger().info(
                    f"realigned ({req.state_key}, {req.action} {req.action_arg}) with "
                    f"{len(got)} probed outcome(s): {sorted({g.outcome for g in got})}")
                return int(new_ids[0]) if new_ids else 0
        return None

    def _act_on(self, result: VerifyResult) -> None:
        if result.alert is not None and self._alert_pub is not None:
            a = result.alert
            msg = DissonanceAlert(
                state_key=a.state_key, action=a.action, action_arg=a.action_arg,
                observed_outcome=a.observed_outcome,
                expected_outcomes=a.expected_outcomes,
                expected_probabilities=[float(p) for p in a.expected_probabilities],
                observed_probability=float(a.observed_probability),
                history_size=int(a.history_size), hoeffding_bound=float(a.hoeffding_bound),
                consecutive_surprises=int(a.consecutive_surprises), mode=a.mode,
                suppressed_ids=conv.ids(a.suppressed_ids),
                probes_requested=int(a.probes_requested),
            )
            msg.header.stamp = self.get_clock().now().to_msg()
            self._alert_pub.publish(msg)
            self.get_logger().warning(
                f"DISSONANCE ({a.state_key}, {a.action} {a.action_arg}): observed "
                f"'{a.observed_outcome}' with p={a.observed_probability:.2f} after "
                f"{a.consecutive_surprises} surprises; {len(a.suppressed_ids)} suppressed"
            )
        for req in result.probe_requests:
            self._publish_probe(req)

    def _publish_probe(self, req: Any) -> None:
        if self._probe_pub is None or self._store is None:
            return
        pending = self._store.get_pending(req.pending_key)
        msg = ProbeRequest(state_key=req.state_key, action=req.action,
                           action_arg=req.action_arg, samples=int(req.alpha),
                           reason=req.reason,
                           entry_ids=conv.ids(pending.suppressed_ids if pending else ()))
        msg.header.stamp = self.get_clock().now().to_msg()
        self._probe_pub.publish(msg)

    def _publish_event(self, event: MemoryEvent) -> None:
        if self._event_pub is not None:
            self._event_pub.publish(conv.event_to_msg(event))

    # callbacks -------------------------------------------------------------------------
    def _on_transition(self, msg: TransitionMsg) -> None:
        self._record(msg)

    def _on_record(self, req: Any, resp: Any) -> Any:
        resp.accepted, resp.id, resp.message = self._record(req.transition)
        return resp

    def _on_query(self, req: Any, resp: Any) -> Any:
        assert self._store is not None
        limit = int(req.max_results) or int(self.get_parameter("max_results").value)
        entries, total = self._store.query(
            state_key=req.state_key or None, action=req.action or None,
            action_arg=req.action_arg or None, robot_id=req.robot_id or None,
            include_suppressed=bool(req.include_suppressed), limit=limit,
        )
        resp.entries = conv.entries_to_msgs(entries)
        resp.total_matching = int(total)
        return resp

    def _on_explain(self, req: Any, resp: Any) -> Any:
        assert self._store is not None
        expl = self._store.explain(int(req.id))
        if expl is None:
            resp.found = False
            resp.explanation = f"no memory entry with id {req.id}"
            return resp
        for key, value in conv.explanation_fields(expl).items():
            setattr(resp, key, value)
        return resp

    def _on_reverify(self, req: Any, resp: Any) -> Any:
        if self._verifier is None:
            resp.success, resp.message = False, "verifier disabled"
            return resp
        with self._write_lock:
            result = self._verifier.recheck_negatives(stuck=True)
        for r in result.probe_requests:
            self._publish_probe(r)
        resp.success = True
        resp.message = (f"{len(result.pairs)} stale negative (state, action) pair(s) queued for "
                        f"re-verification, {len(result.suppressed_ids)} entries suppressed, "
                        f"{len(result.probe_requests)} probe request(s)")
        self.get_logger().info(f"reverify_negatives: {resp.message}")
        return resp


def main(args: Sequence[str] | None = None) -> int:
    """Run the memory node."""
    return run(MemoryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
