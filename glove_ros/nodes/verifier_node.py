"""Verifier node: carries out GLOVE realignment that needs the robot.

GLOVE's bookkeeping (neighbourhoods, surprise counters, suppression, the pending queue)
runs atomically on the memory's write path inside the memory node, so no transition is
ever retrievable before it was checked. What needs the *robot* happens here:

* synchronous replay: for each ``probe_requests`` message (alpha samples of one
  (state, action)), send a ``probe`` action goal to the robot / simulator, then record
  every probed outcome through the memory's ``record_transition`` service with
  ``source = SOURCE_PROBED``; the memory replaces the contradicted neighbourhood when
  alpha probed samples are in.
* safety: actions listed in ``never_probe`` (irreversible or unsafe) are never sent,
  and a probe budget bounds the steps spent on verification.
* reporting: probes spent per phase, published on ``verifier_status`` and logged, and the
  probe budget on ``/diagnostics``.

Topics: sub ``probe_requests`` (glove_ros/ProbeRequest), ``dissonance``
(glove_ros/DissonanceAlert, for logging); pub ``verifier_status`` (glove_ros/VerifierStatus,
latched), ``/diagnostics`` (diagnostic_msgs/DiagnosticArray).
Action client ``probe`` (glove_ros/Probe); service client ``record_transition``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from glove_ros.action import Probe
from glove_ros.core.ops.health import OK, WARN
from glove_ros.msg import DissonanceAlert, ProbeRequest, Transition, VerifierStatus
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
from glove_ros.srv import RecordTransition

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("robot_id", "robot", "robot id stamped on probed transitions"),
    Param("never_probe", [""], "actions never probed (irreversible or unsafe)"),
    Param("probe_budget", 30, "total probe steps this node may spend; 0 disables probing"),
    Param("probe_timeout", 60.0, "seconds to wait for one probe goal"),
    Param("phase", "default", "label under which probes are counted (set live)"),
)


def validate(values: dict[str, Any]) -> None:
    """Refuse parameter values the node cannot work with."""
    if int(values["probe_budget"]) < 0:
        raise ValueError("probe_budget must be >= 0")
    if float(values["probe_timeout"]) <= 0:
        raise ValueError("probe_timeout must be > 0 seconds")
    if not str(values["phase"]).strip():
        raise ValueError("phase must be a non-empty label")


class VerifierNode(LifecycleNode):
    """Executes probe requests within a budget and reports probe cost per phase."""

    def __init__(self) -> None:
        super().__init__("verifier")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._spent = 0
        self._per_phase: dict[str, int] = {}
        self._refused = 0
        self._subs: list[Any] = []
        self._status_pub = None
        self._probe_client: ActionClient | None = None
        self._record_client = None
        self._diagnostics = NodeDiagnostics(self, self._diagnose)

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            validate(param_values(self, PARAMS))
        except ValueError as exc:
            self.get_logger().error(f"invalid parameters: {exc}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._status_pub is None:  # created once, destroyed on cleanup
            self._status_pub = self.create_publisher(VerifierStatus, "verifier_status",
                                                     latched_qos())
            self._probe_client = SpinSafeActionClient(self, Probe, "probe",
                                                      callback_group=self._group)
            self._record_client = self.create_client(
                RecordTransition, "record_transition", callback_group=self._group
            )
        self._subs = [
            self.create_subscription(ProbeRequest, "probe_requests", self._on_request, 10,
                                     callback_group=self._group),
            self.create_subscription(DissonanceAlert, "dissonance", self._on_alert, 10,
                                     callback_group=self._group),
        ]
        self.get_logger().info(
            f"active: probe budget {self.get_parameter('probe_budget').value}, "
            f"never_probe {self._never_probe()}"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._status_pub is not None:
            self.destroy_publisher(self._status_pub)
            self._status_pub = None
        if self._probe_client is not None:
            self._probe_client.destroy()
            self._probe_client = None
        if self._record_client is not None:
            self.destroy_client(self._record_client)
            self._record_client = None
        return TransitionCallbackReturn.SUCCESS

    def _diagnose(self) -> tuple[int, str, dict[str, Any]]:
        """/diagnostics: probe budget spent and left, refusals."""
        budget = int(self.get_parameter("probe_budget").value)
        with self._lock:
            spent, refused = self._spent, self._refused
        values = {"probe_budget": budget, "probes_spent": spent,
                  "probe_budget_left": max(budget - spent, 0), "refused": refused,
                  "never_probe": ",".join(sorted(self._never_probe()))}
        if budget and spent >= budget:
            return WARN, f"probe budget exhausted ({spent}/{budget})", values
        return OK, f"{spent}/{budget} probes spent, {refused} refused", values

    # callbacks -------------------------------------------------------------------------
    def _never_probe(self) -> set[str]:
        return {a for a in self.get_parameter("never_probe").value if a}

    def _on_alert(self, msg: DissonanceAlert) -> None:
        if msg.kind == "object":
            self.get_logger().warning(
                f"object moved: '{msg.observed_outcome}' seen at '{msg.observed_at}', so "
                f"memory of it at ({msg.state_key}, {msg.action} {msg.action_arg}) is stale; "
                f"{len(msg.suppressed_ids)} suppressed")
            return
        self.get_logger().warning(
            f"dissonance at ({msg.state_key}, {msg.action} {msg.action_arg}): saw "
            f"'{msg.observed_outcome}' (p={msg.observed_probability:.2f} over "
            f"{msg.history_size} memories), mode {msg.mode}, "
            f"{len(msg.suppressed_ids)} suppressed, {msg.probes_requested} probes requested"
        )

    def _on_request(self, req: ProbeRequest) -> None:
        label = f"({req.state_key}, {req.action} {req.action_arg})"
        if req.action in self._never_probe():
            self._refuse(f"{label}: action '{req.action}' is never_probe")
            return
        budget = int(self.get_parameter("probe_budget").value)
        with self._lock:
            left = budget - self._spent
            if req.samples == 0 or left < req.samples:
                refuse = f"{label}: needs {req.samples} probes, budget has {left} left"
            else:
                refuse = ""
                self._spent += req.samples  # reserve before the goal runs
        if refuse:
            self._refuse(refuse)
            return
        self.get_logger().info(f"probing {label} x{req.samples} ({req.reason})")
        outcomes = self._probe(req)
        with self._lock:
            self._spent -= req.samples - len(outcomes)  # refund what did not run
            phase = str(self.get_parameter("phase").value)
            self._per_phase[phase] = self._per_phase.get(phase, 0) + len(outcomes)
        recorded = sum(self._record(req, outcome) for outcome in outcomes)
        self.get_logger().info(f"probed {label}: {outcomes}; {recorded} recorded")
        self._publish_status()

    def _refuse(self, why: str) -> None:
        with self._lock:
            self._refused += 1
        self.get_logger().warning(f"probe refused {why}")
        self._publish_status()

    def _probe(self, req: ProbeRequest) -> list[str]:
        assert self._probe_client is not None
        timeout = float(self.get_parameter("probe_timeout").value)
        if not self._probe_client.wait_for_server(timeout_sec=min(timeout, 5.0)):
            self.get_logger().error("probe action server not available")
            return []
        goal = Probe.Goal(state_key=req.state_key, action=req.action,
                          action_arg=req.action_arg, samples=req.samples)
        handle = wait_future(self._probe_client.send_goal_async(goal), min(timeout, 10.0))
        if handle is None or not handle.accepted:
            self.get_logger().warning("probe goal rejected by the robot")
            return []
        res = wait_future(handle.get_result_async(), timeout)
        if res is None:
            self.get_logger().error(f"probe timed out after {timeout:.0f}s; cancelling")
            handle.cancel_goal_async()
            return []
        result = res.result
        if not result.completed:
            self.get_logger().warning(f"probe incomplete: {result.message}")
        return list(result.outcomes)

    def _record(self, req: ProbeRequest, outcome: str) -> bool:
        assert self._record_client is not None
        if not self._record_client.wait_for_service(timeout_sec=5.0):
            self.get_logger().error("record_transition service not available")
            return False
        t = Transition(state_key=req.state_key, action=req.action, action_arg=req.action_arg,
                       outcome=outcome, robot_id=str(self.get_parameter("robot_id").value),
                       episode_id="probe", source=Transition.SOURCE_PROBED)
        t.header.stamp = self.get_clock().now().to_msg()
        resp = wait_future(
            self._record_client.call_async(RecordTransition.Request(transition=t)), 10.0)
        if resp is None or not resp.accepted:
            reason = resp.message if resp is not None else "timeout"
            self.get_logger().error(f"probed outcome not recorded: {reason}")
            return False
        return True

    def _publish_status(self) -> None:
        budget = int(self.get_parameter("probe_budget").value)
        with self._lock:
            phases = sorted(self._per_phase)
            msg = VerifierStatus(probes_spent=self._spent, budget=budget,
                                 budget_left=max(budget - self._spent, 0), refused=self._refused,
                                 phases=phases, phase_probes=[self._per_phase[p] for p in phases])
        msg.header.stamp = self.get_clock().now().to_msg()
        if self._status_pub is not None:
            self._status_pub.publish(msg)


def main(args: Sequence[str] | None = None) -> int:
    """Run the verifier node."""
    return run(VerifierNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
