"""``glove-ros launch``: start a deployment's nodes as processes (no ``ros2 launch`` needed).

What it adds over starting the nodes by hand:

* a supervisor: a node that crashes is restarted after a back-off (1 s, 2 s, 4 s, ... up to
  30 s); a node that keeps failing right after its start (``--max-restarts`` times in a row)
  stops the graph with exit code 1, because restarting it again would not help. The nodes
  run with ``exit_on_failure:=true``, so a failed configure ends the process and counts as
  a failure here (a node started on its own stays alive unconfigured instead);
* clean shutdown: Ctrl-C (SIGINT to the launcher or to the whole terminal's process group)
  and SIGTERM stop every node (SIGTERM to each, SIGKILL after ``--stop-timeout``) with no
  traceback; exit 130 after SIGINT, 0 after SIGTERM. The nodes run in their own session,
  so a terminal's Ctrl-C reaches them only through the launcher, and on Linux they get
  SIGTERM from the kernel if the launcher itself is killed: no orphans;
* a ROS domain id per launch when ``ROS_DOMAIN_ID`` is not set, so two launches on one
  machine do not hear each other. It is printed, and written to a run file that
  ``glove-ros task`` and ``glove-ros watch`` read to join the graph;
* a check of the files the launch names before any node starts (:func:`preflight`): the
  parameter file, and the world files (maps, waypoints) and colour tables its nodes would
  read. A typo there fails in one line naming the file, exit code 2, nothing started,
  instead of a node that fails its start, is restarted and fails again.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glove_ros import graph
from glove_ros.paths import make_private_dirs
from glove_ros.procs import die_with_parent

# ROS domain ids this launcher picks from (fastdds' port formula allows 0..232 with the
# default participant count; 0 is everyone's default, so it is avoided).
_DOMAIN_RANGE = (1, 101)


def add_parser(sub: Any) -> None:
    """Add the ``launch`` subcommand to the ``glove-ros`` subparsers ``sub``."""
    p = sub.add_parser(
        "launch", help="start a deployment's nodes as processes (no ros2 launch needed)",
        description="Start every node of a deployment (glove_ros/graph.py) as its own process "
        "with the deployment's parameter file, like 'ros2 launch glove_ros NAME.launch.py'. "
        "A crashed node is restarted with back-off; Ctrl-C or SIGTERM stops them all. "
        "Deployments: " + "; ".join(
            f"{d.name}: {d.description}" for d in graph.DEPLOYMENTS.values()),
    )
    p.add_argument("deployment", choices=sorted(graph.DEPLOYMENTS))
    p.add_argument("--params-file", help="parameter file (default: config/<deployment>.yaml)")
    p.add_argument("--namespace", default="", help="robot namespace, e.g. /jetrover_1")
    p.add_argument("--log-level", default="", choices=("", *graph.LOG_LEVELS),
                   help="ROS log level of every node (default: the nodes' own)")
    p.add_argument("--max-restarts", type=_positive_int, default=5,
                   help="consecutive quick failures of one node before the graph is stopped "
                   "(default: 5)")
    p.add_argument("--stop-timeout", type=float, default=10.0,
                   help="seconds a node gets to stop before SIGKILL (default: 10)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NODE.NAME:=VALUE",
                   help="set one node parameter over the file, e.g. "
                   "memory.db_path:=/data/robot1.db (repeatable)")
    g = p.add_argument_group(
        "fleet memory (docs/fleet.md)",
        "With --fleet-robot, this robot's NATS leaf server starts with the nodes (supervised "
        "like them) and the memory node shares verified memory through it with every robot "
        "of the building's hub ('glove-ros fleet hub').")
    g.add_argument("--fleet-robot", default="", metavar="ID",
                   help="this robot's id in the fleet (its JetStream domain)")
    g.add_argument("--fleet-hub", default="", metavar="URL",
                   help="the hub's leaf URL, e.g. nats-leaf://server:7422")
    g.add_argument("--fleet-port", type=int, default=4222,
                   help="client port of this robot's leaf server on 127.0.0.1 (default 4222;"
                   " one per robot on a shared machine)")
    g.add_argument("--fleet-store", default="",
                   help="folder of the leaf server's JetStream files (default: "
                   "~/.local/state/glove_ros/fleet/<ID>)")
    p.set_defaults(func=launch)


def parse_params(items: list[str], nodes: list[str]) -> dict[str, dict[str, str]]:
    """``NODE.NAME:=VALUE`` items as {node: {name: value}}; ValueError names a bad one."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition(":=")
        node, dot, name = key.partition(".")
        if not (sep and dot and node and name):
            raise ValueError(f"--param {item!r}: expected NODE.NAME:=VALUE, e.g. "
                             "memory.db_path:=/data/robot1.db")
        if node not in nodes:
            raise ValueError(f"--param {item!r}: no node '{node}' in this deployment "
                             f"({', '.join(nodes)})")
        out.setdefault(node, {})[name] = value
    return out


def fleet_child(args: argparse.Namespace) -> tuple[list[str], dict[str, str]] | None:
    """The leaf server's command and the memory node's fleet parameters, or None without
    ``--fleet-robot``; ValueError when the options do not fit together."""
    from glove_ros.cli.fleet import leaf_launch

    return leaf_launch(args.fleet_robot, args.fleet_hub, args.fleet_port, args.fleet_store,
                       "--fleet-")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


@dataclass
class Backoff:
    """Restart policy of one node: exponential back-off, reset by a run that lasted.

    ``failed(ran_for)`` records an exit after ``ran_for`` seconds and returns the delay
    before the next start, or None when the node failed ``max_restarts`` times in a row,
    each within ``healthy_after`` seconds of its start.
    """

    max_restarts: int = 5
    first: float = 1.0
    cap: float = 30.0
    healthy_after: float = 60.0
    streak: int = field(default=0, init=False)

    def failed(self, ran_for: float) -> float | None:
        """The delay before the restart, or None to give up."""
        if ran_for >= self.healthy_after:
            self.streak = 0
        self.streak += 1
        if self.streak > self.max_restarts:
            return None
        return min(self.cap, self.first * 2 ** (self.streak - 1))


@dataclass
class _Child:
    name: str
    cmd: list[str]
    backoff: Backoff
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restart_at: float | None = None
    restarts: int = 0


def start_process(cmd: list[str], env: Mapping[str, str] | None = None, **kwargs: Any
                  ) -> subprocess.Popen[bytes]:
    """Start a node process in its own session that dies with its parent (Linux)."""
    return subprocess.Popen(cmd, env=dict(env) if env is not None else None,
                            start_new_session=True,
                            preexec_fn=die_with_parent if sys.platform == "linux" else None,
                            **kwargs)


def stop_processes(procs: list[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM every running process, SIGKILL those still alive after ``timeout``."""
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def run_dir() -> Path:
    """Folder of the run files of live launches (one JSON per launcher process)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"glove_ros-{os.getuid()}"


def live_launches() -> list[dict[str, Any]]:
    """Run files of launches whose launcher process is still alive, newest first."""
    out = []
    for f in run_dir().glob("launch-*.json"):
        try:
            info = json.loads(f.read_text())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        out.append(info)
    return sorted(out, key=lambda i: -float(i.get("started", 0)))


def join_domain(explicit: int | None = None) -> str:
    """Set ``ROS_DOMAIN_ID`` so this process joins a running launch; returns a note.

    Order: ``explicit`` (a ``--domain`` option), an already set ``ROS_DOMAIN_ID``, the only
    live ``glove-ros launch`` (its run file). ValueError when several launches run and
    nothing says which.
    """
    if explicit is not None:
        os.environ["ROS_DOMAIN_ID"] = str(explicit)
        return f"ROS domain {explicit} (--domain)"
    if os.environ.get("ROS_DOMAIN_ID"):
        return f"ROS domain {os.environ['ROS_DOMAIN_ID']} (ROS_DOMAIN_ID)"
    launches = live_launches()
    if not launches:
        return "ROS domain 0 (default; no glove-ros launch running here)"
    domains = {int(i["domain"]) for i in launches}
    if len(domains) > 1:
        listing = ", ".join(f"{i['deployment']} (pid {i['pid']}): domain {i['domain']}"
                            for i in launches)
        raise ValueError(f"several glove-ros launches are running ({listing}); "
                         "say which with --domain N")
    info = launches[0]
    os.environ["ROS_DOMAIN_ID"] = str(info["domain"])
    return (f"ROS domain {info['domain']} of 'glove-ros launch {info['deployment']}' "
            f"(pid {info['pid']})")


def choose_domain(rng: random.Random | None = None) -> int:
    """A domain id not used by another live launch of this user."""
    used = {int(i["domain"]) for i in live_launches()}
    free = [d for d in range(*_DOMAIN_RANGE) if d not in used]
    return (rng or random.Random()).choice(free or list(range(*_DOMAIN_RANGE)))


def make_db_dirs(params_file: str, say: Callable[[str], None] = print) -> None:
    """Create the missing parent folders of relative ``*db_path`` parameters.

    The bundled sim config keeps its database under ``build/``, relative to the working
    folder; a fresh checkout has no such folder, and the nodes (rightly) refuse a database
    in a folder that does not exist. Absolute paths are left alone: a typo there must fail.
    """
    import yaml

    try:
        doc = yaml.safe_load(Path(params_file).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return  # the nodes report an unreadable parameter file themselves

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if (isinstance(key, str) and key.endswith("db_path") and isinstance(value, str)
                        and value and value != ":memory:" and not os.path.isabs(value)
                        and not value.startswith("~")):
                    parent = Path(value).parent
                    if not parent.exists():
                        make_private_dirs(parent)
                        say(f"[launch] created {parent}/ for {key}")
                else:
                    walk(value)

    walk(doc)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _check_world(value: str) -> None:
    from glove_ros.core.world.worldfile import load_world

    load_world(value)  # a path or a bundled world's name; parses and validates it


def _check_colors(value: str) -> None:
    import yaml

    from glove_ros.core.world.perception import ColorDetectorConfig

    with open(value) as f:  # what the perception node does at configure
        try:
            data = yaml.safe_load(f) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"colour table {value}: not valid YAML: {exc}") from exc
    try:
        ColorDetectorConfig.from_dict(data)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ValueError(f"colour table {value}: {_one_line(exc)}") from exc


#: node parameters that name a file the node reads when it starts, and how to check one
FILE_PARAMS: dict[str, Callable[[str], None]] = {
    "world": _check_world,
    "color_config_file": _check_colors,
}


def node_parameters(doc: dict[str, Any], node: str, namespace: str = "") -> dict[str, Any]:
    """The values a parameter file ``doc`` gives ``node`` (in ``namespace``), sections in
    file order, later ones winning; nested names dotted (``verifier.mode``)."""
    return graph.section_parameters(doc, node, namespace)


def _command_overrides(cmd: list[str]) -> dict[str, str]:
    """The ``-p NAME:=VALUE`` values of a node's command line (they win over the file)."""
    return dict(cmd[i + 1].split(":=", 1) for i, arg in enumerate(cmd[:-1])
                if arg == "-p" and ":=" in cmd[i + 1])


def preflight(params_file: str, commands: Mapping[str, list[str]], namespace: str = ""
              ) -> dict[str, Any]:
    """Check the files a launch names before any node starts; ValueError, in one line
    naming the file and the error, for the first that a node would fail on. Returns the
    parameter file's content.

    The parameter file must be readable YAML holding node sections; every world file
    (``world``: the map, waypoints, blocks) and colour table (``color_config_file``) that a
    node of ``commands`` (node name -> its command line) gets from the file or from
    ``-p`` is read and validated as that node would at configure.
    """
    import yaml

    try:
        text = Path(params_file).read_text()
    except OSError as exc:
        raise ValueError(f"parameter file {params_file}: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"parameter file {params_file}: not valid YAML: {_one_line(exc)}"
                         ) from exc
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ValueError(f"parameter file {params_file}: expected node sections such as "
                         f"'/**/memory: {{ros__parameters: {{...}}}}', got a "
                         f"{type(doc).__name__}")
    checked: set[tuple[str, str]] = set()
    for node, cmd in commands.items():
        values = {**node_parameters(doc, node, namespace), **_command_overrides(cmd)}
        for name, check in FILE_PARAMS.items():
            value = values.get(name)
            if not isinstance(value, str) or not value or (name, value) in checked:
                continue
            checked.add((name, value))
            try:
                check(value)
            except Exception as exc:  # whatever the node would fail on, said in one line
                raise ValueError(f"{node}.{name} '{value}': {_one_line(exc)}") from exc
    return doc


def database_paths(doc: dict[str, Any], commands: Mapping[str, list[str]],
                   namespace: str = "") -> dict[Path, list[str]]:
    """Absolute path of every database file the nodes get (``*db_path`` parameters, from
    the file or ``-p``) -> the ``node.parameter`` names that use it. A relative path is
    relative to the current folder, as the nodes read it."""
    out: dict[Path, list[str]] = {}
    for node, cmd in commands.items():
        values = {**node_parameters(doc, node, namespace), **_command_overrides(cmd)}
        for name, value in values.items():
            if (name.rsplit(".", 1)[-1].endswith("db_path") and isinstance(value, str)
                    and value and value != ":memory:"):
                out.setdefault(Path(value).expanduser().absolute(), []).append(
                    f"{node}.{name}")
    return out


class _Stop:
    """Signal handlers that only record the signal; the main loop does the stopping."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old[s] = signal.signal(s, self._handle)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum


def keep_simulator_state(dep: Any, params: str, overrides: dict[str, dict[str, str]]
                         ) -> Path | None:
    """A simulator restarted by this launch resumes its world (robot place, episode, time,
    events applied) instead of starting over: unless the parameter file or ``-p`` sets its
    ``state_path``, it gets a file of this launch's own (removed when the launch ends).
    Returns that file, or None when the deployment has no simulator or one is set."""
    if "simulator" not in {n.name for n in dep.nodes}:
        return None
    if overrides.get("simulator", {}).get("state_path"):
        return None
    import yaml

    try:
        doc = yaml.safe_load(Path(params).read_text()) or {}
    except (OSError, yaml.YAMLError):
        doc = {}
    for key, section in doc.items() if isinstance(doc, dict) else ():
        values = (section or {}).get("ros__parameters", {}) if isinstance(section, dict) else {}
        if str(key).rsplit("/", 1)[-1] == "simulator" and values.get("state_path"):
            return None
    path = run_dir() / f"launch-{os.getpid()}-simulator-state.json"
    path.unlink(missing_ok=True)
    overrides.setdefault("simulator", {})["state_path"] = str(path)
    return path


def launch(args: argparse.Namespace) -> int:
    """Start the deployment's nodes, supervise them, stop them all on a signal.

    Returns 130 after SIGINT, 0 after SIGTERM, 1 when a node kept failing.
    """
    from glove_ros.paths import resolve_config

    # The nodes need ROS 2 and the generated interfaces: say so in one line (glove_ros.cli)
    # rather than start processes that die with "No module named glove_ros.msg".
    for module in ("rclpy", "glove_ros.msg"):
        importlib.import_module(module)
    stop = _Stop()
    stop.install()  # before anything slow: a Ctrl-C now must not print a traceback
    dep = graph.deployment(args.deployment)
    try:
        overrides = parse_params(args.param, [n.name for n in dep.nodes])
        leaf = fleet_child(args)
    except ValueError as exc:
        stop.restore()
        print(f"glove-ros launch: {exc}", file=sys.stderr)
        return 2
    if leaf is not None:
        if "memory" not in {n.name for n in dep.nodes}:
            stop.restore()
            print(f"glove-ros launch: {dep.name} has no memory node to share", file=sys.stderr)
            return 2
        overrides.setdefault("memory", {}).update(leaf[1])
    params = args.params_file or str(resolve_config(dep.config))
    sim_state = keep_simulator_state(dep, params, overrides)
    children = [
        _Child(spec.name, graph.process_command(spec, params, overrides.get(spec.name, {}),
                                                namespace=args.namespace,
                                                deployment_name=dep.name,
                                                log_level=args.log_level,
                                                exit_on_failure=True, others=overrides),
               Backoff(max_restarts=args.max_restarts))
        for spec in dep.nodes
    ]
    commands = {c.name: c.cmd for c in children}
    try:
        doc = preflight(params, commands, args.namespace)
    except ValueError as exc:
        stop.restore()
        print(f"glove-ros launch: {exc}; no node was started", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if env.get("ROS_DOMAIN_ID"):
        domain, how = int(env["ROS_DOMAIN_ID"]), "from ROS_DOMAIN_ID"
    else:
        domain, how = choose_domain(), "chosen for this launch"
        env["ROS_DOMAIN_ID"] = str(domain)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    print(f"[launch] {dep.name}: {len(dep.nodes)} nodes, ROS domain {domain} ({how}); "
          "'glove-ros task' and 'glove-ros watch' join it, other ROS tools need "
          f"'export ROS_DOMAIN_ID={domain}'", flush=True)
    make_db_dirs(params)
    for path, users in database_paths(doc, commands, args.namespace).items():
        print(f"[launch] memory database {path} ({', '.join(users)})", flush=True)
    run_file = run_dir() / f"launch-{os.getpid()}.json"
    run_file.parent.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps({"pid": os.getpid(), "domain": domain,
                                    "deployment": dep.name, "namespace": args.namespace,
                                    "params_file": params, "started": time.time()}))
    if leaf is not None:  # first: the memory node's link finds its server up
        children.insert(0, _Child("fleet-leaf", leaf[0], Backoff(max_restarts=args.max_restarts)))
    code = 0
    try:
        for c in children:
            if stop.signum is not None:
                break
            _start(c, env)
        code = _supervise(children, stop, env)
    finally:
        stop_processes([c.proc for c in children if c.proc is not None], args.stop_timeout)
        run_file.unlink(missing_ok=True)
        if sim_state is not None:
            sim_state.unlink(missing_ok=True)
        stop.restore()
    if stop.signum is not None:
        print(f"[launch] stopped all nodes ({signal.Signals(stop.signum).name})", flush=True)
        return 130 if stop.signum == signal.SIGINT else 0
    return code


def _start(c: _Child, env: Mapping[str, str]) -> None:
    print(f"[launch] {c.name}: {' '.join(c.cmd[2:])}", flush=True)
    c.proc = start_process(c.cmd, env)
    c.started = time.monotonic()
    c.restart_at = None


def _supervise(children: list[_Child], stop: _Stop, env: Mapping[str, str]) -> int:
    """Restart crashed nodes until a signal arrives (0) or one keeps failing (1)."""
    while stop.signum is None:
        now = time.monotonic()
        for c in children:
            if c.restart_at is not None:
                if now >= c.restart_at:
                    c.restarts += 1
                    print(f"[launch] restarting {c.name} (restart {c.restarts})", flush=True)
                    _start(c, env)
                continue
            if c.proc is None or c.proc.poll() is None:
                continue
            delay = c.backoff.failed(now - c.started)
            if delay is None:
                print(f"[launch] {c.name} exited with {c.proc.returncode} "
                      f"{c.backoff.max_restarts + 1} times in a row right after starting; "
                      "stopping the graph (see its output above)", file=sys.stderr, flush=True)
                return 1
            print(f"[launch] {c.name} exited with {c.proc.returncode}; restarting in "
                  f"{delay:.0f}s", file=sys.stderr, flush=True)
            c.restart_at = now + delay
        time.sleep(0.2)
    return 0
