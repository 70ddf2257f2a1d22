"""The simulated JetRover drift demo: the whole glove_ros stack as separate ROS processes.

Starts the nodes of the ``sim`` deployment (glove_ros/graph.py: simulator, perception,
memory with the GLOVE verifier, verifier (probe executor), planner, plan_gate (Janus),
consolidation and markers) as eight processes talking over DDS (discovery kept on this
machine), then sends one task per episode ("find the <colour> block") to the planner's
run_task action. Before each episode the simulator is told the episode number, so the world
file's events happen on schedule. The default world (worlds/jetrover_maze.yaml) is a 3x3
maze where two blocks swap at episode 20 among nuisances that must not raise alarms;
``--world drift_demo`` is one where drift costs more: the corridor hall-goal closes at
episode 5 and re-opens at 15, and the green block moves from side to far at 25.

Prints one line per episode; per phase the success rate, steps per task, dissonance
alerts and suppressed memories beside the same task sequence run in the fast core loop
with static memory (never verified) and with the strongest local rule (``--baseline``,
default SlidingWindow over the newest 100 transitions: the best-tuned baseline of the
drift suite's waypoint family); the episode in which each drift was detected.
Writes, under --out (default: build/demo of this checkout, else ~/.local/share/glove_ros/demo;
the same folder whatever folder the demo runs in): demo_memory.db (the robot's experience
memory, emptied at the start of each run, never a database a deployment config uses; its
absolute path is printed, inspect it with `glove-ros memory stats PATH`), demo.json,
demo.png (steps after the drift and stale first goals per memory, success, drift and
detection marked), demo_map.png (top-down map of memory status, trusted / suppressed /
pending, per phase) and logs/ (one log per node).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from glove_ros import graph
from glove_ros.core.memory.memory_map import MemoryStatusMap, edge_status, place_status
from glove_ros.paths import resolve_config, resolve_world
from glove_ros.progress import Progress, add_progress_argument, say


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros demo``."""
    parser.add_argument("--world", default="jetrover_maze",
                        help="world file or bundled world name (default: jetrover_maze; "
                        "drift_demo: a corridor closes and re-opens, a block moves)")
    parser.add_argument("--episodes", type=_positive_int, default=None,
                        help="tasks to run, at least 1 (default: 20 after the last drift "
                        "event)")
    parser.add_argument("--planner", choices=("greedy", "llm"), default="greedy",
                        help="greedy, or the local LLM (the default GGUF, Qwen2.5-Coder-1.5B) with "
                        "greedy "
                        "fallback (default: greedy)")
    parser.add_argument("--mode", choices=("async", "sync"), default="async",
                        help="GLOVE realignment: async (replay-relaxed, robot default) or sync")
    parser.add_argument("--config", default="sim", help="parameter file (default: config/sim.yaml)")
    parser.add_argument("--time-scale", type=float, default=0.0,
                        help="simulated seconds per wall second (default: from the config)")
    parser.add_argument("--seed", type=int, default=0, help="task sequence seed")
    parser.add_argument("--out", default=str(default_out()),
                        help="output folder (default: %(default)s: build/demo of this "
                        "checkout, else in ~/.local/share/glove_ros)")
    parser.add_argument("--no-static", action="store_true",
                        help="skip the static-memory and baseline comparison runs")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, type=_baseline,
                        help="the local memory rule shown beside GLOVE, NAME or "
                        "NAME:param=value (default: %(default)s, the drift suite's best-tuned "
                        "baseline on waypoint worlds; 'none' to skip)")
    parser.add_argument("--task-timeout", type=float, default=300.0,
                        help="wall seconds one task may take before it is cancelled")
    parser.add_argument("--recharge-below", type=float, default=0.3,
                        help="battery share below which the robot docks before the next task")
    add_progress_argument(parser)


#: the drift suite's best-tuned baseline on waypoint worlds (bench/results/suite.json)
DEFAULT_BASELINE = "SlidingWindow:window=100"


def _baseline(text: str) -> tuple[str, dict[str, float]] | None:
    """``NAME`` or ``NAME:param=value`` -> (rule, params); ``none`` -> None."""
    from glove_ros.core.verify.memory_views import RULE_PARAMS

    if text.strip().lower() == "none":
        return None
    name, _, rest = text.partition(":")
    if name not in RULE_PARAMS:
        raise argparse.ArgumentTypeError(f"unknown rule {name!r}; choose from "
                                         f"{', '.join(RULE_PARAMS)} or none")
    params: dict[str, float] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: expected param=number") from None
        params[key.strip()] = int(number) if number.is_integer() else number
    try:
        from glove_ros.core.verify.memory_views import make_view

        make_view(name, params)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc}") from None
    return name, params


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value} (leave the option "
                                         "out for the automatic count)")
    return value


DEMO_DB = "demo_memory.db"


def default_out() -> Path:
    """The demo's output folder when --out is not given: absolute, whatever the current
    folder (glove_ros.paths.data_dir: the checkout's build/, else the user's data folder)."""
    from glove_ros.paths import data_dir

    return data_dir() / "demo"


def deployment_databases() -> dict[Path, str]:
    """Database files the bundled deployment configs use (relative ones from here) -> config.

    The demo starts from an empty memory and so deletes its own database first; it must
    never delete one a deployment (``glove-ros launch sim``) keeps its robot's memory in.
    """
    import yaml

    from glove_ros.paths import share_dirs

    found: dict[Path, str] = {}

    def walk(obj: Any, name: str) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if isinstance(key, str) and key.endswith("db_path") and isinstance(value, str) \
                        and value and value != ":memory:":
                    found[Path(value).expanduser().resolve()] = name
                else:
                    walk(value, name)

    for base in share_dirs():
        for f in sorted((base / "config").glob("*.yaml")):
            try:
                walk(yaml.safe_load(f.read_text()), f"config/{f.name}")
            except (OSError, yaml.YAMLError):
                continue
    return found


def _fresh_database(db: Path) -> None:
    """Delete the demo's previous database, unless a deployment uses that file."""
    owner = deployment_databases().get(db.expanduser().resolve())
    if owner is not None:
        raise ValueError(f"{db} is the memory database of {owner}; the demo starts from an "
                         "empty memory and will not delete it. Pass --out to another folder.")
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


class _Graph:
    """The node processes of the demo; stopped (SIGINT, then SIGKILL) on exit."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[Any] = []

    def start(self, spec: graph.NodeSpec, params_file: str, overrides: dict[str, Any]) -> None:
        log = open(self.log_dir / f"{spec.name}.log", "wb")  # noqa: SIM115 - closed in stop
        self._files.append(log)
        cmd = graph.process_command(spec, params_file, overrides,
                                    exit_on_failure=True)  # check() reports it
        from glove_ros.procs import die_with_parent

        # a demo killed outright (SIGKILL, a test's timeout) takes its nodes with it (Linux)
        self.procs[spec.name] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent if sys.platform == "linux" else None)

    def check(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"node '{name}' exited with {p.returncode}; see "
                                   f"{self.log_dir / (name + '.log')}")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for f in self._files:
            f.close()


def main(args: argparse.Namespace) -> int:
    """Run the demo; 0 when it ran (whatever the robot achieved), 1 on a broken graph."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    import rclpy  # noqa: F401  (fail early with a clear message when ROS is not sourced)

    from glove_ros.benchmarks import jetrover as bench
    from glove_ros.benchmarks._jetrover_config import (
        BenchConfig,
        default_episodes,
        make_tasks,
        phase_plan,
    )
    from glove_ros.benchmarks._jetrover_runner import ModeRunner
    from glove_ros.core.world.worldfile import load_world

    world_path = resolve_world(args.world)
    world = load_world(world_path)
    episodes = args.episodes if args.episodes is not None else default_episodes(world)
    tasks = make_tasks(world, episodes, args.seed)
    phases = phase_plan(world, episodes)
    out = Path(args.out).expanduser().absolute()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    db = out / DEMO_DB
    _fresh_database(db)
    os.environ.setdefault("ROS_LOG_DIR", str(out / "logs" / "ros"))

    params_file = str(resolve_config(args.config))
    sim_over: dict[str, Any] = {"world": str(world_path)}
    if args.time_scale > 0:
        sim_over["time_scale"] = args.time_scale
    overrides = {
        "simulator": sim_over,
        "memory": {"db_path": str(db), "verifier.mode": args.mode},
        "planner": {"world": str(world_path), "planner": args.planner, "plan_db_path": str(db)},
        "plan_gate": {"db_path": str(db), "world": str(world_path)},
        "consolidation": {"db_path": str(db)},
        "markers": {"world": str(world_path)},
    }
    dep = graph.deployment("sim")
    print(f"glove_ros demo: world '{world.name}', {episodes} episodes, planner {args.planner}, "
          f"GLOVE {args.mode}; drift: "
          + ("; ".join(e.describe() for e in world.drift_events())
             or "none"))
    print(f"memory database: {db} (emptied first; inspect it with "
          f"'glove-ros memory stats {db}')")
    print(f"starting {len(dep.nodes)} node processes "
          f"({', '.join(n.name for n in dep.nodes)}); logs in {out / 'logs'}")
    procs = _Graph(out / "logs")
    t0 = time.monotonic()
    try:
        for spec in dep.nodes:
            procs.start(spec, params_file, overrides.get(spec.name, {}))
        rows, counters = _run_episodes(procs, tasks, phases, args)
    except (RuntimeError, TimeoutError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop()
    wall = time.monotonic() - t0

    static = baseline = None
    base = getattr(args, "baseline", _baseline(DEFAULT_BASELINE))
    if isinstance(base, str):
        base = _baseline(base)
    if not args.no_static:
        print("static memory (never verified), same tasks, core loop without DDS ...")
        cfg = BenchConfig(episodes=episodes, seed=args.seed, task_start="stay")
        static = bench.run_mode(world, "static", cfg)
        if base is not None:
            name, params = base
            print(f"{_label(base)}, same tasks, core loop without DDS ...")
            baseline = ModeRunner(world, name, cfg, params=params).run()
            baseline["label"] = _label(base)
    summary = _summarise(rows, phases, counters, static, baseline)
    detections = detection_moments(world, rows)
    doc = {"world": world.name, "episodes": episodes, "planner": args.planner,
           "mode": args.mode, "wall_s": round(wall, 1), "phases": summary,
           "detections": detections,
           "episodes_detail": rows, "counters": counters,
           "memory_db": str(db)}
    (out / "demo.json").write_text(json.dumps(doc, indent=2))
    print()
    print(_table(summary))
    print(_detections_text(detections))
    print(_extras(counters))
    _plot(rows, static, world, out / "demo.png", detections, baseline)
    plot_memory_map(world, counters["map_snapshots"], out / "demo_map.png")
    print(f"\nwall time {wall:.0f}s; wrote {out / 'demo.json'}, {out / 'demo.png'}, "
          f"{out / 'demo_map.png'}, {db}")
    return 0


def _run_episodes(procs: _Graph, tasks: list[Any], phases: list[dict[str, Any]],
                  args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import rclpy
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import BatteryState
    from std_msgs.msg import String, UInt32

    from glove_ros import conversions as conv
    from glove_ros.action import RunTask
    from glove_ros.msg import (
        ConsolidationReport,
        DetectionArray,
        DissonanceAlert,
        GateDecision,
        MemoryEvent,
        VerifierStatus,
    )
    from glove_ros.nodes.common import BackgroundSpinner, SpinSafeActionClient, latched_qos

    rclpy.init()
    node = rclpy.create_node("glove_demo")
    executor = MultiThreadedExecutor(2)
    executor.add_node(node)
    spinner = BackgroundSpinner(executor)
    lock = threading.Lock()
    # Alerts and suppressions are attributed to the episode running (or last run) when they
    # arrive, and the rows are counted only after the final wait: nothing that arrives
    # between one task's result and the next task's start is lost.
    current = {"episode": 0}
    counters: dict[str, Any] = {"alerts": [], "suppressed": 0, "replaced": 0,
                                "suppressed_by_episode": {},
                                "world_events": [], "verifier_status": {},
                                "gate": {"accepted_direct": 0, "accepted_compared": 0,
                                         "rejected": 0},
                                "consolidations": []}

    def on_alert(m: DissonanceAlert) -> None:
        with lock:
            counters["alerts"].append({"episode": current["episode"],
                                       "state_key": m.state_key, "action": m.action,
                                       "observed": m.observed_outcome,
                                       "expected": list(m.expected_outcomes),
                                       "kind": m.kind, "observed_at": m.observed_at})
        if m.kind == "object":  # the observation was made elsewhere: say where
            _say(f"    ! object moved: {m.observed_outcome} seen at {m.observed_at}, so memory "
                 f"of it at ({m.state_key}, {m.action}) is stale; {len(m.suppressed_ids)} "
                 "memories suppressed")
            return
        _say(f"    ! dissonance at ({m.state_key}, {m.action}): saw {m.observed_outcome}, "
              f"memory said {list(m.expected_outcomes)}; {len(m.suppressed_ids)} memories "
              "suppressed")

    status_map = MemoryStatusMap()
    snapshots: list[dict[str, Any]] = []
    counters["map_snapshots"] = snapshots

    def snap(label: str, episode: int) -> None:
        with lock:
            snapshots.append({"label": label, "episode": episode, "status": [
                {"state": k[0], "action": k[1], "arg": k[2], "status": v}
                for k, v in sorted(status_map.snapshot().items())]})

    def on_event(m: MemoryEvent) -> None:
        with lock:
            status_map.apply(int(m.kind), m.state_key, m.action, m.action_arg,
                             list(m.entry_ids), list(m.new_entry_ids))
            if m.kind == MemoryEvent.SUPPRESSED:
                counters["suppressed"] += len(m.entry_ids)
                per = counters["suppressed_by_episode"]
                per[current["episode"]] = per.get(current["episode"], 0) + len(m.entry_ids)
            elif m.kind == MemoryEvent.REPLACED:
                counters["replaced"] += len(m.entry_ids)

    def on_world(m: String) -> None:
        with lock:
            counters["world_events"].append(m.data)
        _say(f"    * world event: {m.data}")

    def on_gate(m: GateDecision) -> None:
        with lock:
            counters["gate"][["accepted_direct", "accepted_compared", "rejected"][m.verdict]] += 1

    def on_consolidation(m: ConsolidationReport) -> None:
        report = conv.consolidation_report_dict(m)  # JSON-able, for demo.json
        with lock:
            counters["consolidations"].append(report)
        _say(f"    ~ dock-time consolidation: {report.get('status', report.get('message', ''))}"
              f" ({report.get('entries_before', '?')} -> {report.get('entries_after', '?')} "
              "plan-memory entries)")

    def on_status(m: Any) -> None:  # glove_ros/VerifierStatus
        with lock:
            counters["verifier_status"] = {"probes_spent": int(m.probes_spent),
                                           "budget": int(m.budget), "refused": int(m.refused)}

    node.create_subscription(DissonanceAlert, "dissonance", on_alert, 50)
    node.create_subscription(MemoryEvent, "memory_events", on_event, 200)
    node.create_subscription(String, "world_events", on_world, 50)
    node.create_subscription(VerifierStatus, "verifier_status", on_status, latched_qos())
    node.create_subscription(GateDecision, "gate_decisions", on_gate, 50)
    node.create_subscription(ConsolidationReport, "consolidation_report", on_consolidation, 10)
    battery = {"level": 1.0}

    def on_battery(m: BatteryState) -> None:
        battery["level"] = float(m.percentage)

    node.create_subscription(BatteryState, "battery", on_battery, 10)
    episode_pub = node.create_publisher(UInt32, "episode_start", 10)
    group = MutuallyExclusiveCallbackGroup()  # the client's answers, apart from the topics
    client = SpinSafeActionClient(node, RunTask, "run_task", callback_group=group)
    rows: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 120
        while not client.wait_for_server(timeout_sec=1.0):
            procs.check()
            if time.monotonic() > deadline:
                raise TimeoutError("planner's run_task action did not appear within 120 s")
        frames = threading.Event()
        node.create_subscription(DetectionArray, "detections", lambda _m: frames.set(), 1)
        while node.count_subscribers("episode_start") == 0 or not frames.is_set():
            procs.check()
            if time.monotonic() > deadline:
                raise TimeoutError("no perception output (detections) within 120 s")
            time.sleep(0.1)
        docks = 0
        bar = _progress(len(tasks), getattr(args, "progress", None))
        detected_in: set[str] = set()
        for ep, task in enumerate(tasks):
            procs.check()
            phase = next(p["name"] for p in phases if p["start"] <= ep < p["end"])
            if ep > 0 and any(p["start"] == ep for p in phases):
                snap(f"end of {rows[-1]['phase']} (episode {ep - 1})", ep - 1)
            if battery["level"] < args.recharge_below:
                docks += 1
                _say(f"    battery at {battery['level']:.0%}: returning to the dock to charge")
                r = _send(client,
                          RunTask.Goal(task="return to the dock", task_id=f"dock{ep}"),
                          args.task_timeout)
                if not r.success:
                    raise RuntimeError(f"could not dock: {r.reason}")
                charge_deadline = time.monotonic() + args.task_timeout
                while battery["level"] < 0.95 and time.monotonic() < charge_deadline:
                    time.sleep(0.1)
                _say(f"    charged to {battery['level']:.0%}")
            with lock:
                current["episode"] = ep
            episode_pub.publish(UInt32(data=ep))
            time.sleep(0.2)  # let the simulator apply the episode's events first
            t_ep = time.monotonic()
            goal = RunTask.Goal(task=f"find the {task.color} block", task_id=task.id)
            res = _send(client, goal, args.task_timeout)
            with lock:
                alerted = any(a["episode"] == ep for a in counters["alerts"])
            if alerted and phase not in detected_in:
                detected_in.add(phase)
                time.sleep(0.3)  # the suppressions and queueing that follow the alert
                snap(f"{phase}: dissonance (episode {ep})", ep)
            with lock:
                row = {"episode": ep, "phase": phase, "color": task.color,
                       "success": bool(res.success), "reason": res.reason,
                       "steps": int(res.steps), "found_at": res.found_at,
                       "llm_fallbacks": int(res.llm_fallbacks),
                       "wall_s": round(time.monotonic() - t_ep, 2)}
            rows.append(row)
            _say(f"  episode {ep:3d} [{phase}] find {task.color:<6} -> "
                  f"{'found at ' + res.found_at if res.success else 'FAILED (' + res.reason + ')'}"
                  f" in {res.steps} steps ({row['wall_s']:.1f}s)")
            bar.update(1)
        bar.close()
        counters["dockings"] = docks
        time.sleep(1.0)  # last status / events
        if rows:
            snap(f"end of {rows[-1]['phase']} (episode {rows[-1]['episode']})",
                 rows[-1]["episode"])
        with lock:
            for row in rows:
                row["alerts"] = sum(a["episode"] == row["episode"] for a in counters["alerts"])
                row["suppressed"] = counters["suppressed_by_episode"].get(row["episode"], 0)
    finally:
        spinner.stop()  # no callback outlives the executor
        node.destroy_node()
        rclpy.try_shutdown()
    return rows, counters


def _progress(total: int, enabled: bool | None = None) -> Progress:
    """Episodes done: a bar with ETA on stderr when it is a terminal (or ``--progress``),
    else one summary line at the end (glove_ros/progress.py); episode lines print above."""
    return Progress(total, "episodes", "task", enabled=enabled)


def _say(line: str) -> None:
    """Print a line without breaking the progress bar."""
    say(line)


def _send(client: Any, goal: Any, timeout: float) -> Any:
    """Send a RunTask goal and wait for its result; TimeoutError / RuntimeError otherwise.

    Sent from this thread while the executor spins: ``client`` is a
    :class:`~glove_ros.nodes.common.SpinSafeActionClient`, which registers a request before
    its answer can be taken (rclpy's own client, under Humble and Jazzy, could drop an
    answer that came first, and the demo waited for ever)."""
    from glove_ros.nodes.common import wait_future

    handle = wait_future(client.send_goal_async(goal), timeout)
    if handle is None or not handle.accepted:
        raise RuntimeError(f"planner rejected task '{goal.task}'")
    res = wait_future(handle.get_result_async(), timeout)
    if res is None:
        handle.cancel_goal_async()
        raise TimeoutError(f"task '{goal.task}' took longer than {timeout:.0f}s")
    return res.result


def _label(base: tuple[str, dict[str, float]]) -> str:
    name, params = base
    return name + "".join(f" {k}={v:g}" for k, v in params.items())


def _summarise(rows: list[dict[str, Any]], phases: list[dict[str, Any]],
               counters: dict[str, Any], static: dict[str, Any] | None,
               baseline: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = []
    static_phases = {p["name"]: p for p in (static or {}).get("phases", [])}
    base_phases = {p["name"]: p for p in (baseline or {}).get("phases", [])}
    for p in phases:
        eps = [r for r in rows if p["start"] <= r["episode"] < p["end"]]
        n = len(eps)
        s = static_phases.get(p["name"], {})
        b = base_phases.get(p["name"], {})
        out.append({
            "phase": p["name"], "episodes": n,
            "success_rate": round(sum(r["success"] for r in eps) / n, 3) if n else 0.0,
            "steps_per_task": round(sum(r["steps"] for r in eps) / n, 2) if n else 0.0,
            "alerts": sum(r["alerts"] for r in eps),
            "suppressed": sum(r["suppressed"] for r in eps),
            "static_success_rate": s.get("success_rate"),
            "static_steps_per_task": s.get("steps_per_task"),
            "baseline": (baseline or {}).get("label"),
            "baseline_success_rate": b.get("success_rate"),
            "baseline_steps_per_task": b.get("steps_per_task"),
        })
    out.append({"phase": "probes (verifier node)",
                "probes": counters.get("verifier_status", {}).get("probes_spent", 0)})
    return out


def detection_moments(world: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each episode-triggered drift event: the first episode at or after it with a
    dissonance alert (before the next drift event), and how many episodes that took."""
    events = sorted((e for e in world.drift_events() if e.episode is not None),
                    key=lambda e: e.episode)
    out = []
    for i, e in enumerate(events):
        nxt = next((f.episode for f in events[i + 1:] if f.episode > e.episode), None)
        hit = next((r for r in rows if r["episode"] >= e.episode and r["alerts"] > 0
                    and (nxt is None or r["episode"] < nxt)), None)
        out.append({"event": e.describe(), "episode": e.episode,
                    "detected_in_episode": hit["episode"] if hit else None,
                    "episodes_after": hit["episode"] - e.episode if hit else None})
    return out


def _detections_text(detections: list[dict[str, Any]]) -> str:
    lines = []
    for d in detections:
        when = (f"detected in episode {d['detected_in_episode']} "
                f"({d['episodes_after']} episode(s) after the drift)"
                if d["detected_in_episode"] is not None else "not detected (no dissonance)")
        lines.append(f"drift {d['event']}: {when}")
    return "\n".join(lines)


def _extras(counters: dict[str, Any]) -> str:
    gate = counters.get("gate", {})
    cons = counters.get("consolidations", [])
    lines = [f"plan-memory updates (Janus gate): {gate.get('accepted_direct', 0)} accepted "
             f"directly, {gate.get('accepted_compared', 0)} accepted after comparison, "
             f"{gate.get('rejected', 0)} rejected",
             f"dockings: {counters.get('dockings', 0)}; dock-time consolidations: {len(cons)}"]
    for c in cons:
        lines.append("  " + ", ".join(f"{k}={c[k]}" for k in (
            "status", "entries_before", "entries_after", "tokens_before", "tokens_after")
            if k in c))
    return "\n".join(lines)


def _table(summary: list[dict[str, Any]]) -> str:
    head = (f"{'phase':<24}{'episodes':>9}{'success':>9}{'steps/task':>11}{'alerts':>8}"
            f"{'suppressed':>11}  {'static success':>14}{'static steps':>13}"
            f"  {'baseline success':>16}{'baseline steps':>15}")
    lines = [head, "-" * len(head)]

    def pct(v: float | None) -> str:
        return f"{v:.0%}" if v is not None else "-"

    def num(v: float | None) -> str:
        return f"{v:.2f}" if v is not None else "-"

    label = next((p.get("baseline") for p in summary if p.get("baseline")), None)
    for p in summary:
        if "episodes" not in p:
            lines.append(f"{p['phase']:<24}{p['probes']:>9}")
            continue
        lines.append(
            f"{p['phase']:<24}{p['episodes']:>9}{p['success_rate']:>9.0%}"
            f"{p['steps_per_task']:>11.2f}{p['alerts']:>8}{p['suppressed']:>11}  "
            f"{pct(p['static_success_rate']):>14}{num(p['static_steps_per_task']):>13}"
            f"  {pct(p.get('baseline_success_rate')):>16}"
            f"{num(p.get('baseline_steps_per_task')):>15}")
    if label:
        lines.append(f"baseline: {label} (same tasks, fast core loop)")
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], static: dict[str, Any] | None, world: Any,
          path: Path, detections: list[dict[str, Any]] = (),
          baseline: dict[str, Any] | None = None) -> None:
    """Write the demo's figure (:func:`_figure`) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = _figure(rows, static, world, detections, baseline)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _figure(rows: list[dict[str, Any]], static: dict[str, Any] | None, world: Any,
            detections: list[dict[str, Any]] = (),
            baseline: dict[str, Any] | None = None) -> Any:
    """The demo's figure, led by the panels where the memory makes a difference.

    First and widest: robot steps since the first drift, cumulative per memory (before the
    drift every memory is right and the curves coincide). Then, for the runs that record
    it (the core-loop runs), stale first goals: tasks whose first goal was a remembered
    place the block had left. Last and smallest: success (rolling 5), which a robot that
    keeps searching reaches with any memory.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # (label, line style, colour, episode rows): one colour per memory in every panel
    runs: list[tuple[str, str, str, list[dict[str, Any]]]] = [
        ("GLOVE (ROS graph)", "-", "C0", rows)]
    if static:
        runs.append(("static memory", "--", "C1", static["episodes"]))
    if baseline:
        runs.append((baseline.get("label", "baseline"), ":", "C2", baseline["episodes"]))
    drift_eps = sorted(e.episode for e in world.drift_events() if e.episode is not None)
    first = drift_eps[0] if drift_eps else None
    stale = [run for run in runs if run[3] and all("stale_goal" in x for x in run[3])]

    widths = [2.2, 1.3, 1.0] if stale else [2.2, 1.0]
    fig, axes = plt.subplots(1, len(widths), figsize=(4.2 * len(widths) + 1.5, 4.0),
                             gridspec_kw={"width_ratios": widths})
    ax_steps, ax_success = axes[0], axes[-1]
    ax_stale = axes[1] if stale else None

    def rolling(values: list[float], w: int = 5) -> list[float]:
        return [sum(values[max(0, i - w + 1): i + 1]) / len(values[max(0, i - w + 1): i + 1])
                for i in range(len(values))]

    def cumulative(values: list[float]) -> list[float]:
        total, out = 0.0, []
        for v in values:
            total += v
            out.append(total)
        return out

    for label, ls, color, r in runs:
        after = [x for x in r if first is None or x["episode"] >= first]
        ax_steps.plot([x["episode"] for x in after], cumulative([x["steps"] for x in after]),
                      ls, color=color, label=label)
        ax_success.plot([x["episode"] for x in r], rolling([float(x["success"]) for x in r]),
                        ls, color=color, label=label)
    for label, ls, color, r in stale:
        ax_stale.plot([x["episode"] for x in r], cumulative([float(x["stale_goal"]) for x in r]),
                      ls, color=color, label=label, drawstyle="steps-post")
    for a in axes:
        for ep in drift_eps:
            a.axvline(ep, color="red", alpha=0.5)
    for e in world.drift_events():
        if e.episode is not None:
            ax_steps.text(e.episode + 0.3, ax_steps.get_ylim()[1] * 0.95, e.type, color="red",
                          fontsize=8, va="top")
    for d in detections:
        if d["detected_in_episode"] is not None:
            for a in axes:
                a.axvline(d["detected_in_episode"] + 0.5, color="green", ls=":", alpha=0.8)
            ax_steps.text(d["detected_in_episode"] + 0.8, ax_steps.get_ylim()[1] * 0.8,
                          "detected", color="green", fontsize=8, va="top")
    ax_steps.set(title=(f"robot steps since the drift (episode {first}), cumulative"
                        if first is not None else "cumulative robot steps"),
                 xlabel="episode", ylabel="navigations + looks")
    if first is not None:
        ax_steps.set_xlim(left=first - 0.5)
    ax_steps.legend(loc="lower right", fontsize=8)
    if ax_stale is not None:
        ax_stale.set(title="stale first goals, cumulative\n(went where the block had been"
                     + ("" if stale[0][3] is rows else "; core-loop runs") + ")",
                     xlabel="episode")
        ax_stale.title.set_fontsize(10)
        ax_stale.legend(loc="upper left", fontsize=7)
    ax_success.set(title="success (rolling 5)", xlabel="episode", ylim=(-0.05, 1.05))
    ax_success.title.set_fontsize(10)
    ax_success.legend(loc="lower left", fontsize=7)
    fig.suptitle(f"glove_ros demo: {world.name}")
    fig.tight_layout()
    return fig


_MAP_COLORS = {"trusted": "tab:green", "suppressed": "tab:red", "pending": "tab:orange",
               None: "lightgrey"}


def plot_memory_map(world: Any, snapshots: list[dict[str, Any]], path: Path) -> None:
    """Top-down map per snapshot: waypoints coloured by the status of their look memories,
    corridors by the status of their navigation memories (grey: nothing remembered)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    n = max(1, len(snapshots))
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.9), squeeze=False)
    pos = {w.id: (w.x, w.y) for w in world.waypoints}
    for ax, snap in zip(axes[0], snapshots or [{"label": "no memory events", "status": []}],
                        strict=False):
        table = {(e["state"], e["action"], e["arg"]): e["status"] for e in snap["status"]}
        places = place_status(table)
        edges = edge_status(table)
        for e in world.edges:
            (x1, y1), (x2, y2) = pos[e.a], pos[e.b]
            status = edges.get(frozenset((e.a, e.b)))
            ax.plot([x1, x2], [y1, y2], color=_MAP_COLORS[status], lw=4 if status else 2,
                    zorder=1, solid_capstyle="round")
        for wid, (x, y) in pos.items():
            status = places.get(wid)
            ax.scatter([x], [y], s=260, color=_MAP_COLORS[status], edgecolor="black", zorder=2)
            ax.annotate(wid, (x, y), xytext=(0, -17), textcoords="offset points",
                        ha="center", fontsize=7)
        ax.set_title(snap["label"], fontsize=9)
        ax.set_aspect("equal")
        ax.margins(0.2)
        ax.set_xticks([])
        ax.set_yticks([])
    handles = [Line2D([], [], marker="o", ls="", color=c, markersize=9,
                      label=k or "no memory") for k, c in _MAP_COLORS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(f"memory status on the map: {world.name} (places: look memories; "
                 "corridors: navigation memories)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)

