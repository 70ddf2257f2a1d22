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

# This docstring is the ``--help`` text. The module is the front-end: the argument parser,
# ``info`` and the drift test's core path. The record / replay processes live in
# glove_ros.cli.bag_record_replay, ``--through-nodes`` in glove_ros.cli.bag_nodes, the
# fixture maker in glove_ros.cli.bag_fixtures, what they share in glove_ros.cli.bag_common.

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from glove_ros.cli.bag_common import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK
from glove_ros.cli.bag_fixtures import make_fixtures
from glove_ros.cli.bag_nodes import NodesError, _through_nodes
from glove_ros.cli.bag_record_replay import _record, _replay
from glove_ros.core.bag.bagfile import DEFAULT_TOPICS, NS, BagError, BagReader
from glove_ros.core.bag.drift import Expectations, analyse, format_report, verify_core
from glove_ros.core.bag.inputs import (
    INPUT_KINDS,
    BagInput,
    TopicNames,
    drift_from_events,
    load_input,
)
from glove_ros.core.bag.typestore import make_typestore
from glove_ros.core.world.observation import LookConfig

__all__ = ["NodesError", "add_arguments", "cli_main", "main", "make_fixtures"]


def _err(text: str) -> None:
    print(f"glove-ros bag: error: {text}", file=sys.stderr)


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
    from glove_ros.core.verify.config import VerifierConfig

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
