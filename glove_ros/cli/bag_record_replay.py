"""``glove-ros bag record`` and ``replay``: the two subcommands that run as ROS processes.

The recorder subscribes to topics as they appear and writes their serialized messages into
a rosbag2 directory; the player publishes a bag's messages with their original timing.
Separate from :mod:`glove_ros.cli.bags` (arguments, ``info``, the drift test) because this
is process code on the live ROS graph: rclpy is imported only when one of them runs.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from glove_ros.cli.bag_common import (
    EXIT_OK,
    _init_rclpy,
    _msg_class,
    _note,
    _Player,
    _rclpy_qos,
    _resolve,
    _stop_on_signals,
)
from glove_ros.core.bag.bagfile import DEFAULT_TOPICS, BagError, BagReader, BagWriter, QosSpec

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
