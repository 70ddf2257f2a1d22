"""``glove-ros bag``: record, replay and drift-test rosbag2 recordings (docs/bags.md).

  record OUT         write the topics that matter (camera, detections, odom, transitions,
                     dissonance, memory events, world events, current waypoint, /clock) into a
                     rosbag2 directory that ``ros2 bag`` reads; Ctrl-C finalises it
  replay BAG         publish a bag with its original timing (``--rate``), remapping topics, so a
                     real JetRover recording drives perception, observer and memory here
  drift-test         build memory from ``--source``, verify ``--drifted`` with GLOVE, report
                     alerts, false alarms, detection delay, suppressed / replaced memories;
                     ``--expect FILE`` turns the report into an exit code for CI
  info BAG           topics, types, counts and duration of a bag
  make-fixtures DIR  the small simulator bags the tests use (block swap, nuisance only)

Exit codes: 0 success; 1 a drift test missed its expectations (or the nodes failed);
2 bad input: a bad bag (truncated, no metadata.yaml, unknown message type), a bad
expectation file or bad options, reported in one line.

The drift test runs the verifier core on the bags' transitions by default (fast,
deterministic); ``--through-nodes`` replays them through real memory (and, for camera or
detection input, perception and observer) node processes in a private namespace.
rclpy is imported only by ``record``, ``replay`` and ``--through-nodes``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from glove_ros.core.bag.bagfile import (
    DEFAULT_TOPICS,
    INPUT_KINDS,
    NS,
    AlertRecord,
    BagError,
    BagInput,
    BagReader,
    BagWriter,
    Expectations,
    QosSpec,
    TopicNames,
    analyse,
    detections_obj,
    drift_from_events,
    format_report,
    image_obj,
    load_input,
    make_typestore,
    string_obj,
    transition_obj,
    verify_core,
)
from glove_ros.core.world.observation import LOOK_ACTION, LookConfig, colors_of, judge_frames

__all__ = ["NodesError", "add_arguments", "cli_main", "main", "make_fixtures"]

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


def _err(text: str) -> None:
    print(f"glove-ros bag: error: {text}", file=sys.stderr)


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# =========================================================================== arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``bag`` subcommands to ``parser`` (what ``glove-ros bag`` wires in)."""
    sub = parser.add_subparsers(dest="bag_command", metavar="COMMAND", required=True)

    p = sub.add_parser("record", help="record topics into a rosbag2 directory (Ctrl-C stops)",
                       description=_record.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="bag directory to create (must not exist)")
    p.add_argument("--topics", nargs="+", metavar="TOPIC",
                   help="topics to record (relative names resolve in --namespace); default: "
                   + " ".join(DEFAULT_TOPICS))
    p.add_argument("--all", action="store_true",
                   help="record every topic seen (except /rosout and /parameter_events)")
    p.add_argument("--namespace", default="/", help="namespace relative topics resolve in")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                   help="storage plugin (default %(default)s; Humble without the mcap plugin: "
                   "sqlite3)")
    p.add_argument("--duration", type=float, default=0.0, metavar="S",
                   help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--bag-version", type=int, choices=(8, 9), default=8,
                   help="rosbag2 metadata version (8: readable by Humble .. Kilted)")
    p.add_argument("--no-compress", action="store_true", help="no zstd mcap chunk compression")
    p.add_argument("--progress", type=float, default=0.0, metavar="S",
                   help="print the message count every S seconds while it changes")
    p.add_argument("--use-sim-time", action="store_true",
                   help="stamp messages with /clock time instead of the system clock")
    p.set_defaults(bag_func=_record)

    p = sub.add_parser("replay", help="publish a bag with its original timing",
                       description=_replay.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", help="rosbag2 directory, or its .mcap / .db3 file")
    p.add_argument("--rate", type=float, default=1.0, help="playback speed factor (default 1)")
    p.add_argument("--remap", nargs="+", default=[], metavar="OLD:=NEW",
                   help="publish bag topic OLD as NEW (relative NEW resolves in --namespace)")
    p.add_argument("--topics", nargs="+", metavar="TOPIC", help="replay only these topics")
    p.add_argument("--clock", action="store_true",
                   help="publish /clock from the bag time (nodes with use_sim_time); the bag's "
                   "own /clock is then not replayed")
    p.add_argument("--clock-rate", type=float, default=50.0, metavar="HZ",
                   help="/clock publications per second of wall time while waiting")
    p.add_argument("--delay", type=float, default=1.0, metavar="S",
                   help="wait S seconds after creating publishers (DDS discovery; default 1)")
    p.add_argument("--wait-subscribers", type=float, default=0.0, metavar="S",
                   help="first wait up to S seconds until every replayed topic has a "
                   "subscriber (nodes still starting), then 0.5 s for them to match")
    p.add_argument("--start-paused", action="store_true",
                   help="create the publishers, then wait for a call of the std_srvs/Trigger "
                   "service /glove_bag_player/resume")
    p.add_argument("--namespace", default="/", help="namespace relative names resolve in")
    p.set_defaults(bag_func=_replay)

    p = sub.add_parser("drift-test", help="GLOVE drift test on a source and a drifted bag",
                       description=_drift_test.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", metavar="BAG", help="bag recorded before the drift (builds "
                   "memory); omit to verify the drifted bag on its own")
    p.add_argument("--drifted", metavar="BAG", required=True, help="bag recorded after / across "
                   "the drift")
    p.add_argument("--mode", choices=("async", "sync"), default="async",
                   help="GLOVE realignment mode (default async: never probes a robot)")
    p.add_argument("--expect", metavar="FILE", help="YAML expectations; exit 1 when unmet")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--drift-at", type=float, metavar="S",
                   help="drift time, seconds after the drifted bag's start (default: the "
                   "first DRIFT message on world_events, else the drifted bag's start when a "
                   "source bag is given, else no drift)")
    p.add_argument("--input", choices=INPUT_KINDS, default="auto",
                   help="where experience comes from: recorded transitions, looks rebuilt "
                   "from detections, or from camera frames (default: the first present)")
    p.add_argument("--set", dest="settings", nargs="+", default=[], metavar="KEY=VALUE",
                   help="verifier settings, e.g. alarm_delta=0.01, or detector=p_th p_th=2 "
                   "for the paper's rule (memory node verifier.* parameters)")
    p.add_argument("--through-nodes", action="store_true",
                   help="replay through memory (+ perception / observer) node processes")
    p.add_argument("--rate", type=float, default=10.0,
                   help="replay speed for --through-nodes (default %(default)s)")
    p.add_argument("--color-config", metavar="FILE",
                   help="colour detector YAML for camera input (perception color_config_file)")
    p.add_argument("--look-frames", type=int, default=LookConfig.frames,
                   help="look rule: frames judged per stay (n)")
    p.add_argument("--look-min-count", type=int, default=LookConfig.min_count,
                   help="look rule: frames a colour must be seen in (k)")
    p.add_argument("--robot-id", default="", help="robot_id of rebuilt looks")
    p.add_argument("--topic-transitions", default="/transitions", metavar="TOPIC")
    p.add_argument("--topic-detections", default="/detections", metavar="TOPIC")
    p.add_argument("--topic-camera", default="/camera/image_raw", metavar="TOPIC")
    p.add_argument("--topic-waypoint", default="/current_waypoint", metavar="TOPIC")
    p.add_argument("--topic-world-events", default="/world_events", metavar="TOPIC")
    p.set_defaults(bag_func=_drift_test)

    p = sub.add_parser("info", help="topics, types, counts and duration of a bag")
    p.add_argument("bag")
    p.set_defaults(bag_func=_info)

    p = sub.add_parser("make-fixtures", help="write the small simulator test bags",
                       description=make_fixtures.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", help="directory for the bags (e.g. test/fixtures/bags)")
    p.add_argument("--force", action="store_true", help="replace existing fixture bags")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    p.set_defaults(bag_func=_make_fixtures_cmd)


def main(args: argparse.Namespace) -> int:
    """Run the chosen ``bag`` subcommand; bad input is one line on stderr and exit 2."""
    try:
        return int(args.bag_func(args) or 0)
    except BagError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except (ValueError, FileNotFoundError) as exc:
        _err(" ".join(str(exc).split()))
        return EXIT_BAD_INPUT
    except NodesError as exc:
        _err(str(exc))
        return EXIT_MISMATCH
    except KeyboardInterrupt:
        return 130


def cli_main(argv: Sequence[str] | None = None) -> int:
    """``python -m glove_ros.cli.bags ...`` (same as ``glove-ros bag ...``)."""
    parser = argparse.ArgumentParser(prog="glove-ros bag", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return main(parser.parse_args(argv))


# =========================================================================== rclpy helpers


def _msg_class(msgtype: str) -> Any:
    """The rclpy message class of ``pkg/msg/Name`` (BagError if not installed)."""
    pkg, sep, name = msgtype.partition("/msg/")
    if not sep:
        raise BagError(f"message type {msgtype} is not a pkg/msg/Name type")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ImportError, AttributeError):
        raise BagError(f"message type {msgtype} is not installed in this ROS 2 environment; "
                       f"source the workspace that defines it, or leave its topic out with "
                       f"--topics") from None


def _resolve(name: str, namespace: str) -> str:
    if name.startswith("/"):
        return name
    ns = "/" + namespace.strip("/")
    return (ns.rstrip("/") + "/" + name) if ns != "/" else "/" + name


def _rclpy_qos(spec: QosSpec) -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=max(1, int(spec.depth)),
        reliability=ReliabilityPolicy.RELIABLE if spec.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if spec.transient_local
        else DurabilityPolicy.VOLATILE)


def _init_rclpy() -> tuple[Any, Any]:
    """rclpy in a private context, without rclpy's signal handlers (we stop cleanly) and
    without reading sys.argv (``--remap a:=b`` is ours, not a global ROS remap)."""
    try:
        import rclpy

        import glove_ros.msg  # noqa: F401 - the generated interfaces
    except ImportError as exc:
        raise ValueError(f"this needs ROS 2 with the glove_ros interfaces ({exc}); source "
                         f"your ROS 2 workspace (here: source env.sh)") from None

    context = rclpy.context.Context()
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # an rclpy without the option
        rclpy.init(args=[], context=context)
    return rclpy, context


@contextlib.contextmanager
def _stop_on_signals() -> Any:
    """An event set by SIGINT or SIGTERM while inside (old handlers restored after)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


# =========================================================================== record


def _record(args: argparse.Namespace) -> int:
    """Record topics into a rosbag2 directory that ``ros2 bag info / play`` reads.

Topics are subscribed as they appear (their type taken from the graph) and written as
serialized CDR with their message definitions and type hashes. Ctrl-C (SIGINT) or SIGTERM
stops and finalises the bag (mcap summary, metadata.yaml).

  glove-ros bag record my_run                  # the default topics, until Ctrl-C
  glove-ros bag record my_run --duration 60 --topics /depth_cam/rgb/image_raw /odom
"""
    if args.duration < 0 or args.progress < 0:
        raise ValueError("--duration and --progress must be >= 0")
    out = Path(args.out)
    if out.exists():
        raise BagError(f"{out} exists already; give a new directory for the bag")
    rclpy, context = _init_rclpy()
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    wanted = {_resolve(t, args.namespace) for t in (args.topics or DEFAULT_TOPICS)}
    node = rclpy.create_node("glove_bag_recorder", context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=True)]
                             if args.use_sim_time else [])
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    writer: BagWriter | None = None
    subs: dict[str, Any] = {}
    skipped: set[str] = set()
    start = time.monotonic()

    def stamp_ns() -> int:
        return node.get_clock().now().nanoseconds if args.use_sim_time else time.time_ns()

    def make_cb(topic: str) -> Callable[[bytes], None]:
        def cb(raw: bytes) -> None:
            if writer is not None and not writer.closed:
                writer.write(topic, stamp_ns(), raw)
        return cb

    def offered(topic: str) -> QosSpec:
        """What the publishers offer: best effort if any is, latched if all are."""
        infos = node.get_publishers_info_by_topic(topic)
        if not infos:
            return QosSpec.for_topic(topic)
        latched = all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                      for i in infos)
        depth = max(int(i.qos_profile.depth or 0) for i in infos) or (1 if latched else 10)
        return QosSpec(
            reliable=all(i.qos_profile.reliability != ReliabilityPolicy.BEST_EFFORT
                         for i in infos),
            transient_local=latched, depth=depth)

    def qos_for(spec: QosSpec) -> QoSProfile:  # deep enough for a latched history too
        return _rclpy_qos(replace(spec, depth=max(100, spec.depth)))

    def live_hash(topic: str) -> str | None:
        with contextlib.suppress(Exception):
            for info in node.get_publishers_info_by_topic(topic):
                h = str(getattr(info, "topic_type_hash", "") or "")
                if h.startswith("RIHS01_") and h != "RIHS01_" + "0" * 64:
                    return h
        return None

    def scan() -> None:
        for topic, types in node.get_topic_names_and_types():
            if topic in subs or topic in skipped or not types:
                continue
            if args.all:
                if topic in ("/rosout", "/parameter_events"):
                    continue
            elif topic not in wanted:
                continue
            msgtype = types[0]
            spec = offered(topic)
            try:
                cls = _msg_class(msgtype)
                writer.add_topic(topic, msgtype, qos=spec)
            except BagError as exc:
                _note(f"record: skipping {topic}: {exc}")
                skipped.add(topic)
                continue
            have = live_hash(topic)
            if have and have != writer.typestore.hash_rihs01(msgtype):
                _note(f"record: {topic}: the publisher's type hash {have} differs from the "
                      f"{msgtype} definition used for the bag (another ROS distribution?)")
            subs[topic] = node.create_subscription(cls, topic, make_cb(topic), qos_for(spec),
                                                   raw=True)
            _note(f"record: {topic} [{msgtype}]")

    code = EXIT_OK
    try:
        writer = BagWriter(out, storage=args.storage, version=args.bag_version,
                           compress=not args.no_compress)
        _note(f"record: writing {out} ({args.storage}); "
              + ("all topics" if args.all else "topics " + " ".join(sorted(wanted)))
              + "; Ctrl-C to stop")
        next_scan = next_progress = 0.0
        reported = 0
        with _stop_on_signals() as stop:
            while context.ok() and not stop.is_set():
                now = time.monotonic()
                if now >= next_scan:
                    scan()
                    next_scan = now + 0.5
                if args.progress > 0 and now >= next_progress:
                    total = sum(writer.counts.values())
                    if total != reported:
                        _note(f"record: {total} messages so far")
                        reported = total
                    next_progress = now + args.progress
                if args.duration and now - start >= args.duration:
                    break
                executor.spin_once(timeout_sec=0.05)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if writer is not None:
            writer.close()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    if writer is not None:
        total = sum(writer.counts.values())
        _note(f"record: {total} messages on {len(writer.counts)} topics in {out} "
              f"({time.monotonic() - start:.1f}s)")
        for topic in sorted(wanted - set(subs) - skipped) if not args.all else []:
            _note(f"record: {topic} never appeared")
    return code


# =========================================================================== replay


def _parse_remaps(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition(":=")
        if not sep or not old or not new:
            raise ValueError(f"--remap item {item!r} is not OLD:=NEW")
        out[old if old.startswith("/") else "/" + old] = new
    return out


class _Player:
    """Publishes (bag topic, bag_ns, raw) with the original timing scaled by ``rate``."""

    def __init__(self, rate: float, clock_pub: Any = None, clock_rate: float = 50.0) -> None:
        if not rate > 0 or not math.isfinite(rate):
            raise ValueError(f"--rate must be > 0, got {rate}")
        self.rate = rate
        self.clock_pub = clock_pub
        self.clock_period = 1.0 / clock_rate if clock_rate > 0 else 0.0
        self.published = 0
        self._t0: int | None = None
        self._wall0 = 0.0
        self.stop = threading.Event()

    def _clock(self, ns: int) -> None:
        if self.clock_pub is not None:
            from rosgraph_msgs.msg import Clock

            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = int(ns // NS), int(ns % NS)
            self.clock_pub.publish(msg)

    def restart(self) -> None:
        """The next message is published at once; later ones keep their spacing to it."""
        self._t0 = None

    def play(self, messages: Iterable[tuple[Any, int, bytes]],
             after: Callable[[Any], None] | None = None) -> int:
        """Publish ``(publisher, bag_ns, raw)`` in order; returns how many were published.

        ``after(publisher)`` runs after each publication (flow control); time it takes
        delays the following messages (the recorded spacing is a minimum then)."""
        for pub, t_ns, raw in messages:
            if self.stop.is_set():
                break
            if self._t0 is None:
                self._t0, self._wall0 = t_ns, time.monotonic()
            due = self._wall0 + (t_ns - self._t0) / NS / self.rate
            while True:
                left = due - time.monotonic()
                if left <= 0 or self.stop.is_set():
                    break
                if self.clock_pub is not None and self.clock_period:
                    elapsed = (time.monotonic() - self._wall0) * self.rate
                    self._clock(self._t0 + int(elapsed * NS))
                    time.sleep(min(left, self.clock_period))
                else:
                    time.sleep(min(left, 0.05))
            self._clock(t_ns)
            pub.publish(bytes(raw))
            self.published += 1
            if after is not None:
                before = time.monotonic()
                after(pub)
                self._wall0 += time.monotonic() - before
        return self.published


def _wait_for_resume(node: Any, context: Any, stop: threading.Event) -> None:
    """Serve ``~/resume`` (std_srvs/Trigger) until it is called (or a signal stops us)."""
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    resumed = threading.Event()

    def on_resume(req: Any, resp: Any) -> Any:
        resumed.set()
        resp.success, resp.message = True, "playing"
        return resp

    srv = node.create_service(Trigger, "~/resume", on_resume)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    _note(f"replay: paused; call {srv.srv_name} (std_srvs/srv/Trigger) to start")
    try:
        while not resumed.is_set() and not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
        executor.spin_once(timeout_sec=0.05)  # send the response
    finally:
        executor.remove_node(node)
        executor.shutdown()


def _wait_subscribers(pubs: dict[str, Any], timeout: float, stop: threading.Event) -> None:
    """Wait until every publisher has a subscriber, then 0.5 s for the subscribers' side of
    the match (DDS discovery is not symmetric); notes the topics still without one."""
    end = time.monotonic() + timeout
    lonely = list(pubs)
    while lonely and not stop.is_set() and time.monotonic() < end:
        lonely = [t for t, p in pubs.items() if p.get_subscription_count() == 0]
        stop.wait(0.05)
    if lonely:
        _note("replay: still no subscriber on " + ", ".join(lonely))
    else:
        stop.wait(0.5)


def _replay(args: argparse.Namespace) -> int:
    """Publish a bag's messages with their original timing, scaled by --rate.

Every topic is replayed under its own name unless remapped; messages are published as
recorded (serialized), so any message type installed here can be replayed. Drive the
glove_ros nodes from a real JetRover bag:

  glove-ros bag replay jetrover_run --remap /depth_cam/rgb/image_raw:=/camera/image_raw
  glove-ros bag replay jetrover_run --clock --rate 2 --topics /depth_cam/rgb/image_raw
"""
    remaps = _parse_remaps(args.remap)
    if not args.rate > 0:
        raise ValueError(f"--rate must be > 0, got {args.rate}")
    if args.delay < 0 or args.wait_subscribers < 0:
        raise ValueError("--delay and --wait-subscribers must be >= 0")
    with BagReader(args.bag) as bag:
        topics = bag.topics
        if args.topics:
            selected = []
            for t in args.topics:
                found = bag.find_topic(t)
                if found is None:
                    raise BagError(f"bag {bag.path}: no topic {t} (topics: "
                                   f"{', '.join(sorted(topics))})")
                selected.append(found)
        else:
            selected = sorted(topics)
        if args.clock and "/clock" in selected:
            selected.remove("/clock")
        classes = {}
        for t in selected:
            try:
                classes[t] = _msg_class(topics[t][0])
            except BagError as exc:
                if args.topics:
                    raise BagError(f"bag {bag.path}: topic {t}: {exc}") from None
                _note(f"replay: skipping {t}: {exc}")
        if not classes:
            raise BagError(f"bag {bag.path}: nothing to replay ("
                           + ("no topic of a type installed here)" if selected else
                              "no messages)"))
        rclpy, context = _init_rclpy()
        from rclpy.qos import QoSProfile

        node = rclpy.create_node("glove_bag_player", context=context)
        try:
            pubs = {}
            for t, cls in classes.items():
                out = _resolve(remaps.get(t, t), args.namespace)
                spec = bag.qos(t)
                pubs[t] = node.create_publisher(
                    cls, out, _rclpy_qos(spec if spec.transient_local else
                                         replace(spec, depth=max(spec.depth, 100))))
                _note(f"replay: {t} -> {out} [{topics[t][0]}], {topics[t][1]} messages")
            clock_pub = None
            if args.clock:
                from rosgraph_msgs.msg import Clock

                clock_pub = node.create_publisher(Clock, "/clock", QoSProfile(depth=10))
            player = _Player(args.rate, clock_pub, args.clock_rate)
            with _stop_on_signals() as stop:
                player.stop = stop
                if args.start_paused:
                    _wait_for_resume(node, context, stop)
                stop.wait(args.delay)
                if args.wait_subscribers:
                    waiting = dict(pubs, **({"/clock": clock_pub} if clock_pub else {}))
                    _wait_subscribers(waiting, args.wait_subscribers, stop)
                started = time.monotonic()
                player.play((pubs[t], t_ns, raw) for t, _typ, t_ns, raw in
                            bag.messages(list(classes)))
                if stop.is_set():
                    _note("replay: interrupted")
                else:  # reliable subscribers get the last messages before we vanish
                    from rclpy.duration import Duration

                    for p in pubs.values():
                        p.wait_for_all_acked(Duration(seconds=5))
            _note(f"replay: published {player.published} messages in "
                  f"{time.monotonic() - started:.1f}s")
        finally:
            node.destroy_node()
            rclpy.try_shutdown(context=context)
    return EXIT_OK


# =========================================================================== info


def _info(args: argparse.Namespace) -> int:
    with BagReader(args.bag) as bag:
        dur = (bag.end_ns - bag.start_ns) / NS if bag.message_count else 0.0
        print(f"bag: {bag.path}\nmessages: {bag.message_count}\nduration: {dur:.3f}s\n"
              f"start: {bag.start_ns / NS:.3f}")
        for t, (typ, n) in sorted(bag.topics.items()):
            known = "" if bag.known(typ) else "  (type unknown here)"
            print(f"  {t:<32} {typ:<36} {n:>7}{known}")
    return EXIT_OK


# =========================================================================== drift test


def _parse_settings(items: Sequence[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set item {item!r} is not KEY=VALUE")
        key = key.strip()
        if key.startswith("verifier."):
            key = key[len("verifier."):]
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[key] = value
    return out


def _drift_test(args: argparse.Namespace) -> int:
    """Run the GLOVE verifier over a source bag (memory) and a drifted bag and score it.

Report: alerts (each: observed vs expected outcomes, when, false alarm or not), false
alarms (alerts before the drift, or on a (state, action) whose usual outcome the drift did
not change), detection delay (messages, visits and seconds from the drift to the alert),
memories suppressed and replaced. The drift time is the first DRIFT message on the drifted
bag's world_events topic, or --drift-at seconds after its start.

  glove-ros bag drift-test --source before --drifted after --expect ci/swap.yaml
  glove-ros bag drift-test --drifted nuisance_run --json      # no drift: 0 alarms wanted

Expectation file (YAML, every key optional): min_alerts, max_alerts, max_false_alarms,
max_delay_messages, max_delay_seconds, alerted_state_keys, min_suppressed, min_replaced,
max_missed. Exit 0 when met, 1 when not, 2 on bad input.
"""
    from glove_ros.core.verify.verifier import VerifierConfig

    expect = Expectations.load(args.expect) if args.expect else None
    settings = _parse_settings(args.settings)
    if "mode" in settings and settings["mode"] != args.mode:
        raise ValueError("give the mode with --mode, not --set mode=...")
    config = VerifierConfig.from_dict({**settings, "mode": args.mode})
    look = LookConfig(frames=args.look_frames, min_count=args.look_min_count).validate()
    topics = TopicNames(args.topic_transitions, args.topic_detections, args.topic_camera,
                        args.topic_waypoint, args.topic_world_events)
    detector = None
    if args.color_config:
        import yaml

        from glove_ros.core.world.perception import ColorBlockDetector, ColorDetectorConfig

        try:
            data = yaml.safe_load(Path(args.color_config).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"cannot read colour config {args.color_config}: {exc}") from None
        detector = ColorBlockDetector(ColorDetectorConfig.from_dict(data))

    ts = make_typestore()

    def load(path: str) -> BagInput:
        return load_input(path, args.input, topics=topics, look=look, detector=detector,
                          robot_id=args.robot_id, typestore=ts)

    source = load(args.source) if args.source else None
    drifted = load(args.drifted)
    if source is not None and source.kind != drifted.kind:
        raise BagError(f"the source bag gives {source.kind} and the drifted bag {drifted.kind}; "
                       f"choose one with --input")
    if args.drift_at is not None:
        if args.drift_at < 0:
            raise ValueError("--drift-at must be >= 0 seconds")
        drift: tuple[int, str] | None = (drifted.start_ns + int(round(args.drift_at * NS)),
                                         f"--drift-at {args.drift_at:g}s")
    else:
        found = drift_from_events(drifted.world_events)
        if found is not None:
            drift = (found[0], f"world_events: {found[1]}")
        elif source is not None:
            drift = (drifted.start_ns, "start of the drifted bag")
        else:
            drift = None
    if not drifted.items:
        raise BagError(f"bag {drifted.path}: no transitions to verify ({drifted.kind} input)")

    if args.through_nodes:
        alerts, outcome = _through_nodes(args, config, look, source, drifted)
    else:
        alerts, outcome = verify_core(source.items if source else [], drifted.items, config)
    report = analyse(drifted=drifted, alerts=alerts, drift=drift, source=source,
                     outcome=outcome, extra={"mode": config.mode,
                                             "through_nodes": bool(args.through_nodes),
                                             "verifier_config": config.to_dict()})
    failures = expect.check(report) if expect is not None else []
    report["expectations"] = None if expect is None else {
        "file": str(args.expect), "passed": not failures, "failures": failures}
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
        if expect is not None:
            print("expectations: " + ("met" if not failures else "NOT met"))
            for f in failures:
                print(f"  - {f}")
    return EXIT_MISMATCH if failures else EXIT_OK


# --------------------------------------------------------------------------- through nodes


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
                       "detector", "alarm_delta", "min_miss_rate", "noise_prior_rate",
                       "noise_prior_weight", "unique_objects", "object_action",
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


# =========================================================================== fixtures

#: fixture bag names -> (world, episodes)
FIXTURES = {
    "small_source": ("small", (0, 1, 2)),
    "small_drifted": ("small", (3, 4, 5, 6)),
    "nuisance_only": ("nuisance_only", (0, 2, 4, 6, 8, 10)),
}
FIXTURE_EPOCH_S = 1_760_000_000  # bag time of simulated time 0 (2025-10-09)
FIXTURE_SIZE = (96, 72)
FIXTURE_FRAMES = 3
FIXTURE_FRAME_DT = 0.5
FIXTURE_SETTLE = 1.0  # seconds between arriving (current_waypoint) and the first frame
FIXTURE_ROBOT = "fixture_rover"

#: colour detector for the fixtures' small frames (min_area scaled down from 640x480)
FIXTURE_COLOR_CONFIG = {"min_area": 12, "blur_kernel": 3, "morph_kernel": 3}


def _tour_order(world: Any, start: str) -> list[str]:
    ids = list(world.waypoint_ids)
    i = ids.index(start)
    return ids[i + 1:] + ids[: i + 1]  # every waypoint once, ending where it started


def _tour(sim: Any, episodes: Sequence[int], writer: BagWriter, detector: Any,
          look: LookConfig, checks: Counter[str]) -> None:
    """Drive ``sim`` round every waypoint each episode, writing what the robot publishes."""
    from glove_ros.core.memory.experience import Transition

    ts = writer.typestore

    def now() -> int:
        return FIXTURE_EPOCH_S * NS + int(round(sim.time * 1e6)) * 1000

    def write_transition(t: Transition, t_ns: int) -> None:
        writer.write_msg("/transitions", t_ns, transition_obj(ts, t.with_(stamp=t_ns / NS)))

    for ep in episodes:
        for ev in sim.begin_episode(ep):
            kind = "DRIFT" if ev.is_drift else "nuisance"
            writer.write_msg("/world_events", now(), string_obj(ts, f"{kind}: {ev.describe()}"))
        for target in _tour_order(sim.world, sim.last_waypoint):
            writer.write_msg("/current_waypoint", now(), string_obj(ts, ""))
            nav = sim.start_navigation(target)
            prev = sim.last_waypoint
            while not nav.done:
                sim.advance(0.1)
                if sim.last_waypoint != prev and sim.at_waypoint is not None:
                    w = sim.world.waypoint(prev)
                    write_transition(Transition(
                        prev, "navigate_to", "reached", action_arg=sim.last_waypoint,
                        robot_id=FIXTURE_ROBOT, episode_id=f"ep{ep}", context="tour",
                        pose=(w.x, w.y, w.yaw)), now())
                    prev = sim.last_waypoint
            res = nav.result
            if res is not None and res.outcome == "blocked" and res.blocked_edge:
                a, b = res.blocked_edge
                w = sim.world.waypoint(a)
                write_transition(Transition(a, "navigate_to", "blocked", action_arg=b,
                                            robot_id=FIXTURE_ROBOT, episode_id=f"ep{ep}",
                                            context="tour", pose=(w.x, w.y, w.yaw)), now())
            here = sim.at_waypoint or sim.last_waypoint
            writer.write_msg("/current_waypoint", now(), string_obj(ts, here))
            sim.wait(FIXTURE_SETTLE)
            sets, stamps = [], []
            for _ in range(look.frames):
                frame = sim.render_camera(*FIXTURE_SIZE)
                t_ns = now()
                dets = detector.detect(frame)
                painted = set(sim.last_render.colors)
                colors = colors_of(dets)
                checks["frames"] += 1
                if colors != painted:
                    checks["frames_detected_differently"] += 1
                if sim.last_render.missed or sim.last_render.dropout:
                    checks["frames_with_nuisance_misses"] += 1
                writer.write_msg("/camera/image_raw", t_ns, image_obj(ts, frame, t_ns))
                writer.write_msg("/detections", t_ns + 1000,
                                 detections_obj(ts, here, dets, t_ns))
                sets.append(colors)
                stamps.append(t_ns / NS)
                sim.wait(FIXTURE_FRAME_DT)
            lk = judge_frames(sets, look, here, stamps)
            p = sim.pose
            write_transition(lk.to_transition(FIXTURE_ROBOT, f"ep{ep}", context="tour",
                                              pose=(p.x, p.y, p.yaw)),
                             int(round(lk.stamp * NS)) + 2000)
            checks["looks"] += 1
            if lk.outcome != sim.state.expected_signature(here):
                checks["looks_differing_from_truth"] += 1
        writer.write_msg("/current_waypoint", now(), string_obj(ts, ""))


def make_fixtures(outdir: str | os.PathLike[str], *, force: bool = False,
                  storage: str = "mcap") -> dict[str, Any]:
    """Write the test bags: a scripted tour of the built-in simulator.

Each episode the robot visits every waypoint once; at each it stops, grabs 3 camera
frames (96x72, rendered by the simulator, detected with the colour detector of
perception_fixture.yaml) and records what the robot stack would publish:
camera/image_raw, detections (tagged with the waypoint), current_waypoint, transitions
(one look per stay by the look rule, one navigate_to per corridor) and world_events.

  small_source    worlds/small.yaml, episodes 0-2 (before the red/blue swap)
  small_drifted   the same run continued, episodes 3-6 (the swap fires at episode 3)
  nuisance_only   worlds/nuisance_only.yaml, episodes 0,2,..,10: every nuisance, no drift

Deterministic (seeded). Also writes perception_fixture.yaml, the detector thresholds for
these small frames (give it to drift-test --color-config or perception color_config_file).
"""
    import yaml

    from glove_ros.core.world.perception import ColorBlockDetector, ColorDetectorConfig
    from glove_ros.core.world.sim import Simulator
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    color_cfg = replace(ColorDetectorConfig(), **FIXTURE_COLOR_CONFIG).validate()
    detector = ColorBlockDetector(color_cfg)
    cfg_path = out / "perception_fixture.yaml"
    cfg_path.write_text(
        "# Colour detector thresholds for the fixture bags' 96x72 frames (written by\n"
        "# `glove-ros bag make-fixtures`): min_area and kernels scaled down from 640x480.\n"
        + yaml.safe_dump(color_cfg.to_dict(), sort_keys=False, default_flow_style=None))
    look = LookConfig(frames=FIXTURE_FRAMES)
    ts = make_typestore()
    summary: dict[str, Any] = {"perception_config": str(cfg_path)}
    sims: dict[str, Any] = {}
    for name, (world_name, episodes) in FIXTURES.items():
        path = out / name
        if path.exists():
            if not force:
                raise ValueError(f"{path} exists; pass --force to replace the fixtures")
            shutil.rmtree(path)
        if world_name not in sims:
            sims[world_name] = Simulator(load_world(resolve_world(world_name)))
        sim = sims[world_name]
        checks: Counter[str] = Counter()
        writer = BagWriter(path, storage=storage, typestore=ts)
        try:
            _tour(sim, episodes, writer, detector, look, checks)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        size = sum(f.stat().st_size for f in path.iterdir())
        summary[name] = {"path": str(path), "bytes": size, "episodes": list(episodes),
                         "messages": dict(sorted(writer.counts.items())), **checks}
    return summary


def _make_fixtures_cmd(args: argparse.Namespace) -> int:
    summary = make_fixtures(args.outdir, force=args.force, storage=args.storage)
    for name, info in summary.items():
        if isinstance(info, dict):
            print(f"{name}: {info['bytes'] / 1e6:.2f} MB, episodes {info['episodes']}, "
                  f"{sum(info['messages'].values())} messages, {info.get('looks', 0)} looks"
                  f" ({info.get('looks_differing_from_truth', 0)} differ from ground truth), "
                  f"{info.get('frames_detected_differently', 0)} of {info.get('frames', 0)} "
                  f"frames detected differently from what was painted")
        else:
            print(f"{name}: {info}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(cli_main())
