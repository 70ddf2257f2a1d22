"""``glove-ros bag drift-test --through-nodes``: replay bags through real node processes.

Starts the memory node (and, for detection or camera input, the observer and perception
nodes) in a private namespace, publishes the bags' messages into them with their recorded
timing, answers probe requests in sync mode, and collects the alerts and memory events
they produce as :class:`~glove_ros.core.bag.drift.AlertRecord` rows for the same report
the verifier core gives. Separate from :mod:`glove_ros.cli.bags` because it is process
orchestration over DDS; rclpy and the generated interfaces are imported only when it runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from glove_ros.cli.bag_common import _init_rclpy, _note, _Player, _rclpy_qos
from glove_ros.core.bag.bagfile import NS, BagReader, QosSpec
from glove_ros.core.bag.drift import AlertRecord
from glove_ros.core.bag.inputs import BagInput, TopicNames
from glove_ros.core.bag.typestore import make_typestore
from glove_ros.core.world.observation import LOOK_ACTION, LookConfig

__all__ = ["NodesError"]


class NodesError(RuntimeError):
    """The node processes of ``--through-nodes`` failed (died, never became ready)."""


def _param_text(value: Any) -> str:
    """A ``-p key:=value`` value as ROS parses it (YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        import yaml

        try:
            plain = isinstance(yaml.safe_load(value), str) and value == value.strip()
        except yaml.YAMLError:
            plain = False
        return value if plain else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(repr(v) if isinstance(v, str) else _param_text(v)
                              for v in value) + "]"
    return str(value)


class _Proc:
    """One node in its own process, in the drift test's namespace, logging to a file."""

    def __init__(self, module: str, name: str, log_dir: Path, namespace: str,
                 params: dict[str, Any]) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        cmd = [sys.executable, "-u", "-m", module, "--ros-args", "-r", f"__node:={name}",
               "-r", f"__ns:={namespace}"]
        for key, value in params.items():
            cmd += ["-p", f"{key}:={_param_text(value)}"]
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 6) -> str:
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


_NODE_VERIFIER_KEYS = ("mode", "epsilon", "p_th", "delta", "k_modes", "rule", "radius",
                       "never_probe", "max_probe_budget", "evidence_threshold",
                       "negative_outcomes", "recheck_on_dissonance", "stale_negative_after",
                       "detector", "alarm_delta", "min_miss_rate", "min_extra_rate",
                       "noise_prior_rate", "noise_prior_weight", "unique_objects", "object_action",
                       "symmetric_actions", "stale_negative_recheck", "structured_noise",
                       "recheck_volatile_first")


def _memory_params(config: Any, db_path: Path) -> dict[str, Any]:
    defaults = type(config)()
    params: dict[str, Any] = {"db_path": str(db_path)}
    for key, value in config.to_dict().items():
        if value == getattr(defaults, key) and key != "mode":
            continue
        if key not in _NODE_VERIFIER_KEYS:
            raise ValueError(f"verifier setting {key} is not a memory node parameter; "
                             f"it cannot be used with --through-nodes")
        if key == "max_probe_budget" and value is None:
            value = -1
        if isinstance(value, (list, tuple)):
            value = list(value) or [""]
        params[f"verifier.{key}"] = value
    return params


def _pipeline_messages(path: Path, kind: str, topics: TopicNames, pubs: dict[str, Any],
                       ts: Any) -> list[tuple[Any, int, bytes]]:
    """What to publish into the nodes for ``kind``: (publisher role, bag_ns, raw)."""
    out = []
    with BagReader(path, ts) as bag:
        roles = {}
        wanted = {"transitions": ("transitions",), "detections": ("transitions", "detections"),
                  "camera": ("transitions", "camera", "waypoint")}[kind]
        for role in wanted:
            t = bag.find_topic(getattr(topics, role))
            if t is not None:
                roles[t] = role
        for topic, msgtype, t_ns, raw in bag.messages(roles):
            role = roles[topic]
            if (role == "transitions" and kind != "transitions"
                    and bag.decode(msgtype, raw, topic).action == LOOK_ACTION):
                continue  # looks are rebuilt by the pipeline
            out.append((pubs[role], t_ns, bytes(raw)))
    return out


def _through_nodes(args: argparse.Namespace, config: Any, look: LookConfig,
                   source: BagInput | None, drifted: BagInput
                   ) -> tuple[list[AlertRecord], dict[str, Any]]:
    """Replay through memory (+ observer, + perception) processes; collect what they did."""
    rclpy, context = _init_rclpy()
    from glove_ros.msg import DetectionArray, DissonanceAlert, MemoryEvent, ProbeRequest
    from glove_ros.msg import Transition as TransitionMsg
    from glove_ros.srv import QueryMemory

    kind = drifted.kind
    namespace = f"/glove_drift_test_{os.getpid()}"
    memory_params = _memory_params(config, Path("memory.db"))  # bad settings fail first
    tmp = Path(tempfile.mkdtemp(prefix="glove_drift_test_"))
    procs: list[_Proc] = []

    def start_nodes() -> None:
        procs.append(_Proc("glove_ros.nodes.memory_node", "memory", tmp, namespace,
                           {**memory_params, "db_path": str(tmp / "memory.db")}))
        if kind in ("detections", "camera"):
            procs.append(_Proc("glove_ros.nodes.observer_node", "observer", tmp, namespace, {
                "robot_id": args.robot_id, "look.frames": look.frames,
                "look.min_count": look.min_count, "look.min_frames": look.min_frames,
                "look.max_gap": look.max_gap}))
        if kind == "camera":
            # lossless, every frame: replay is a deterministic test, not a live camera
            perception = {"backend": "color", "camera_qos": "reliable", "infer_when": "always"}
            if args.color_config:
                perception["color_config_file"] = str(Path(args.color_config).resolve())
            procs.append(_Proc("glove_ros.nodes.perception_node", "perception", tmp,
                               namespace, perception))

    from rclpy.executors import MultiThreadedExecutor
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    node = rclpy.create_node("drift_test", namespace=namespace, context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    lock = threading.RLock()
    seen: list[TransitionMsg] = []
    alerts_msgs: list[Any] = []
    events: list[Any] = []

    def keep(store: list[Any]) -> Callable[[Any], None]:
        def cb(msg: Any) -> None:
            with lock:
                store.append(msg)
        return cb

    deep = QoSProfile(depth=1000)
    node.create_subscription(TransitionMsg, "transitions", keep(seen), deep)
    node.create_subscription(DissonanceAlert, "dissonance", keep(alerts_msgs), deep)
    node.create_subscription(MemoryEvent, "memory_events", keep(events), deep)
    frames_done: list[Any] = []
    if kind == "camera":  # perception's output, for lockstep replay
        node.create_subscription(DetectionArray, "detections", keep(frames_done), deep)
    pubs: dict[str, Any] = {"transitions": node.create_publisher(TransitionMsg, "transitions",
                                                                 QoSProfile(depth=1000))}
    if kind in ("detections", "camera"):  # camera: only the end-of-stream marker
        pubs["detections"] = node.create_publisher(DetectionArray, "detections",
                                                   QoSProfile(depth=100))
    if kind == "camera":
        pubs["camera"] = node.create_publisher(Image, "camera/image_raw", QoSProfile(depth=10))
        pubs["waypoint"] = node.create_publisher(
            String, "current_waypoint", _rclpy_qos(QosSpec.for_topic("current_waypoint")))
    probes_answered = 0

    def on_probe(req: Any) -> None:  # sync mode: the bag "robot" answers from what it sees
        nonlocal probes_answered
        with lock:
            last = next((m for m in reversed(seen) if (m.state_key, m.action, m.action_arg)
                         == (req.state_key, req.action, req.action_arg)), None)
        if last is None:
            return
        for _ in range(max(1, int(req.samples))):
            msg = TransitionMsg(robot_id=last.robot_id, episode_id=last.episode_id,
                                state_key=last.state_key, action=last.action,
                                action_arg=last.action_arg, outcome=last.outcome,
                                source=TransitionMsg.SOURCE_PROBED)
            msg.header = last.header
            with lock:
                probes_answered += 1
            pubs["transitions"].publish(msg)

    node.create_subscription(ProbeRequest, "probe_requests", on_probe, deep)
    query = node.create_client(QueryMemory, "query_memory")

    def check_alive() -> None:
        for p in procs:
            if not p.alive():
                raise NodesError(f"--through-nodes: the {p.name} node exited "
                                 f"(code {p.proc.returncode}): {p.tail()}")

    def wait(pred: Callable[[], bool], timeout: float, what: str) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            check_alive()
            if pred():
                return True
            time.sleep(0.05)
        return False

    def recorded() -> int:
        """Transitions of the bags memory recorded (probe answers left out)."""
        with lock:
            n = sum(1 for e in events if e.kind == MemoryEvent.RECORDED)
            return n - probes_answered

    frames_sent = 0

    def lockstep(pub: Any) -> None:
        """After a camera frame, wait until perception answered it: no frame is dropped by
        a busy perception node (its image queue is short), whatever the machine's load."""
        nonlocal frames_sent
        if pub is not pubs.get("camera"):
            return
        frames_sent += 1
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            with lock:
                if len(frames_done) >= frames_sent:
                    return
            time.sleep(0.002)
        _note("drift-test: perception did not answer a camera frame within 5 s")
        with lock:
            frames_sent = len(frames_done)

    def alerts_in() -> bool:
        """Every dissonance memory saw has reached us as an alert."""
        with lock:
            fired = sum(1 for e in events if e.kind == MemoryEvent.SUPPRESSED
                        and e.reason.startswith("dissonance"))
            return len(alerts_msgs) >= fired

    def settle(expected: int, idle: float = 5.0) -> bool:
        """Wait until memory recorded ``expected`` transitions, or nothing new for ``idle``
        seconds (messages lost on the way)."""
        last, since = -1, time.monotonic()
        while True:
            check_alive()
            n = recorded()
            if n >= expected:
                return True
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > idle:
                return False
            time.sleep(0.05)

    try:
        start_nodes()
        ready: dict[str, Callable[[], bool]] = {
            "memory's query_memory service": query.service_is_ready,
            "memory subscribed to transitions":
                lambda: pubs["transitions"].get_subscription_count() >= 2,
        }
        if kind in ("detections", "camera"):
            ready["observer publishing transitions"] = (
                lambda: node.count_publishers("transitions") >= 2)
        if kind == "detections":
            ready["observer subscribed to detections"] = (
                lambda: pubs["detections"].get_subscription_count() >= 1)
        if kind == "camera":
            ready["perception subscribed to the camera"] = (
                lambda: pubs["camera"].get_subscription_count() >= 1)
            ready["perception subscribed to current_waypoint"] = (
                lambda: pubs["waypoint"].get_subscription_count() >= 1)
            ready["perception publishing detections"] = (  # ours (end marker) + perception's
                lambda: node.count_publishers("detections") >= 2)
        if not wait(lambda: all(r() for r in ready.values()), 60, "nodes"):
            missing = [what for what, r in ready.items() if not r()]
            raise NodesError("--through-nodes: the nodes did not come up within 60 s (no "
                             + ", ".join(missing) + "): "
                             + "; ".join(f"{p.name}: {p.tail(2)}" for p in procs))
        time.sleep(1.0)  # let the nodes' own publishers and subscriptions match
        _note(f"drift-test: nodes ready in {namespace}: " + ", ".join(p.name for p in procs))
        ts = make_typestore()
        player = _Player(args.rate)
        lost: dict[str, int] = {}
        total = 0
        for label, bag in (("source", source), ("drifted", drifted)):
            if bag is None:
                continue
            total += len(bag.items)
            msgs = _pipeline_messages(bag.path, kind, TopicNames(
                args.topic_transitions, args.topic_detections, args.topic_camera,
                args.topic_waypoint, args.topic_world_events), pubs, ts)
            player.restart()  # each bag starts at once
            with lock:
                frames_sent = len(frames_done)  # the end marker of the last bag counted too
            player.play(msgs, after=lockstep if kind == "camera" else None)
            if "detections" in pubs:  # the robot drove off: the observer closes the last stay
                time.sleep(0.5)
                pubs["detections"].publish(DetectionArray(waypoint=""))
            if not settle(total):
                lost[label] = total - recorded()
                total = recorded()
            _note(f"drift-test: replayed {label} ({len(msgs)} messages at rate {args.rate:g}); "
                  f"memory holds {recorded()} transitions")
            if lost.get(label):
                with lock:
                    got = Counter((m.state_key, m.action, m.action_arg,
                                   round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 3))
                                  for m in seen)
                want = Counter((i.transition.state_key, i.transition.action,
                                i.transition.action_arg, round(i.transition.stamp, 3))
                               for i in bag.items)
                missing = sorted((want - got).elements())
                _note(f"drift-test: {lost[label]} transition(s) of the {label} bag never reached "
                      f"memory, e.g. {missing[:5]}")
            wait(alerts_in, 5, "alerts")  # published just after the record that fired them
        if config.mode == "sync":  # probe requests follow their alert; answers are recorded
            time.sleep(1.0)
            settle(total)
        req = QueryMemory.Request(include_suppressed=True, max_results=1_000_000)
        future = query.call_async(req)
        if not wait(future.done, 30, "query"):
            raise NodesError("--through-nodes: query_memory did not answer")
        statuses = Counter(int(e.status) for e in future.result().entries)
        with lock:
            alerts = _alerts_from_msgs(list(alerts_msgs), list(events), drifted)
            ever = {int(i) for e in events if e.kind == MemoryEvent.SUPPRESSED
                    for i in e.entry_ids}
            outcome = {"suppressed": len(ever), "replaced": statuses.get(2, 0),
                       "still_suppressed": statuses.get(1, 0), "probes": probes_answered,
                       "nodes": {"recorded": recorded(), "expected": sum(
                           len(b.items) for b in (source, drifted) if b is not None),
                                 "lost": lost, "namespace": namespace}}
        return alerts, outcome
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        for p in procs:
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _alerts_from_msgs(alerts: Sequence[Any], events: Sequence[Any], drifted: BagInput
                      ) -> list[AlertRecord]:
    """Place node alerts on the drifted bag: the SUPPRESSED event an alert caused carries
    the stamp of the transition that fired it; header stamps map back to bag time."""
    from glove_ros.msg import MemoryEvent

    suppressed = [e for e in events if e.kind == MemoryEvent.SUPPRESSED]
    by_pair_stamp = {}
    for i, item in enumerate(drifted.items):
        key = (item.transition.key, int(round(item.transition.stamp * 1e6)))
        by_pair_stamp.setdefault(key, i)
    out = []
    for a in alerts:
        pair = (a.state_key, a.action, a.action_arg)
        ids = set(int(i) for i in a.suppressed_ids)
        ev = next((e for e in suppressed if set(int(i) for i in e.entry_ids) == ids
                   and (e.state_key, e.action, e.action_arg) == pair), None)
        index = bag_ns = None
        if ev is not None:
            stamp_ns = int(ev.header.stamp.sec) * NS + int(ev.header.stamp.nanosec)
            bag_ns = drifted.stamp_to_bag.get(stamp_ns)
            if bag_ns is None:  # float rounding of the stamp: match to the microsecond
                index = by_pair_stamp.get((pair, int(round(stamp_ns / 1e3))))
                if index is not None:
                    bag_ns = drifted.items[index].bag_ns
        out.append(AlertRecord(
            a.state_key, a.action, a.action_arg, a.observed_outcome,
            tuple(zip(a.expected_outcomes, (float(p) for p in a.expected_probabilities),
                      strict=False)),
            index, bag_ns, len(a.suppressed_ids), int(a.probes_requested)))
    return out
