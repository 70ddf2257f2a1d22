"""The stock-JetRover rig: test/stock_jetrover.py, then the ``jetrover`` profile on top (issue 31).

Starts what a user runs on a stock HiWonder JetRover, against the emulation of that stack:
the emulator first (the robot's bringup and Nav2 run before glove_ros, docs/robot.md step 1),
then every node of ``graph.DEPLOYMENTS["jetrover"]`` in its own process with
config/jetrover.yaml's parameters, the robot arguments' defaults and the deployment's
remaps, with only what a user sets: a site file written as docs/robot.md says (waypoints and
corridors, no blocks), scratch database paths, the greedy planner, the rule consolidator,
dock recognition by voltage (``battery.type: UInt16``, ``dock.waypoint: dock``).

Separate from the tests because two users share it: test/test_system_stock_jetrover.py (one
graph per module, assertions per behaviour) and ``glove-ros bench robot``
(glove_ros/benchmarks/robot.py, N seeded tasks, measured). Both must run the same graph with
the same settings, so neither copies the other's set-up. The helpers below drive that graph
(send a task, wait, read memory); they raise AssertionError with the process logs when the
graph does not answer, which a test reports and the benchmark turns into a failed run.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from rosproc import Collector, NodeProcess, answering_action_client, call, ros_client, wait_for
from test_node_nav2_action import _build_standin, _env_with

ROOT = Path(__file__).resolve().parent.parent
TEST_DIR = Path(__file__).resolve().parent
# A site as docs/robot.md step 4 writes it: waypoints in the map frame, corridors, no blocks.
#
#   kitchen (0,2) ---- lab (2,2) ---- store (4,2)
#      |                 |
#    dock (0,0) ----- hall (2,0)
SITE = """\
name: my_site
dock: dock                   # where the robot charges
waypoints:
  - {id: dock,    x: 0.00, y: 0.00, yaw: 0.0}
  - {id: hall,    x: 2.00, y: 0.00, yaw: 1.5708}
  - {id: lab,     x: 2.00, y: 2.00, yaw: 3.1416}
  - {id: kitchen, x: 0.00, y: 2.00, yaw: -1.5708}
  - {id: store,   x: 4.00, y: 2.00, yaw: 0.0}
edges:                       # corridors the robot may drive along
  - [dock, hall]
  - [hall, lab]
  - [lab, kitchen]
  - [kitchen, dock]
  - [lab, store]
"""
WAYPOINTS = {w["id"]: (w["x"], w["y"]) for w in yaml.safe_load(SITE)["waypoints"]}
CORRIDORS = [tuple(e) for e in yaml.safe_load(SITE)["edges"]]
SPEED = 1.0  # m/s of the emulated robot (the real one drives ~0.3-0.5: runs stay short)
AT_WAYPOINT = 0.3  # metres: odometry within this of a waypoint = the robot stands there
_TASK_IDS = itertools.count(1)


class Timed:
    """Messages of one topic with their arrival time (time.monotonic()), thread-safe."""

    def __init__(self, node: Any, msg_type: Any, topic: str, qos: Any = 100) -> None:
        self.items: list[tuple[float, Any]] = []
        self._lock = threading.Lock()
        self.sub = node.create_subscription(msg_type, topic, self._cb, qos)

    def _cb(self, msg: Any) -> None:
        with self._lock:
            self.items.append((time.monotonic(), msg))

    def since(self, t: float) -> list[tuple[float, Any]]:
        with self._lock:
            return [(ts, m) for ts, m in self.items if ts >= t]


class Rig(NamedTuple):
    """The running graph and this process's view of it."""

    procs: dict[str, Any]  # node name -> NodeProcess (the emulator is "stock_jetrover")
    node: Any  # this process's rclpy node
    tasks: Any  # ActionClient of run_task
    query: Any  # client of query_memory
    events: Timed  # the emulator's emulator/events
    route: Any  # Collector of emulator/route (latched)
    odom: Timed
    amcl: Any  # Collector of amcl_pose (transient local, as AMCL publishes it)
    battery: Timed
    waypoint: Timed  # the planner's current_waypoint
    reports: Any  # Collector of consolidation_report
    outcomes: Any  # Collector of task_outcomes
    close_corridor: Any  # publisher of emulator/close_corridor
    open_corridor: Any  # publisher of emulator/open_corridor
    scratch: Path  # site file, memory database and one log per process

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(f"--- {name}\n{p.log()[-tail:]}" for name, p in self.procs.items())


def profile(node_name: str) -> dict[str, Any]:
    """config/jetrover.yaml's parameters of ``node_name``, flattened to dotted names."""
    data = yaml.safe_load((ROOT / "config" / "jetrover.yaml").read_text())
    flat: dict[str, Any] = {}

    def walk(prefix: str, section: dict) -> None:
        for key, value in section.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            else:
                flat[f"{prefix}{key}"] = value

    walk("", data.get(f"/**/{node_name}", {}).get("ros__parameters", {}))
    return flat


@contextlib.contextmanager
def start(scratch: Path, speed: float = SPEED, client: str = "stock_jetrover_test"
          ) -> Iterator[Rig]:
    """The stock-stack emulation, then the jetrover deployment's nodes on top of it; every
    process is stopped on exit. ``scratch`` receives the site file, the database and logs."""
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String, UInt16

    from glove_ros import graph
    from glove_ros.action import RunTask
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.msg import ConsolidationReport, TaskOutcome
    from glove_ros.nodes.common import SpinSafeActionClient  # destroyed while spinning
    from glove_ros.srv import QueryMemory

    site = scratch / "my_site.yaml"
    site.write_text(SITE)
    assert not load_world(site).colors, "the site must have no blocks, as on a real robot"
    db = str(scratch / "jetrover_memory.db")
    overrides = {
        "memory": {"db_path": db},
        "planner": {"world": str(site), "planner": "greedy"},
        "plan_gate": {"db_path": db, "world": str(site)},
        "consolidation": {"db_path": db, "consolidator": "rule", "every_k_episodes": 1,
                          "battery.type": "UInt16", "dock.waypoint": "dock"},
        "waypoint_nav": {"world": str(site)},
        "markers": {"world": str(site)},
    }
    env = _env_with(_build_standin())
    env["PYTHONPATH"] = os.pathsep.join([str(TEST_DIR), env["PYTHONPATH"]])
    procs: dict[str, Any] = {}
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
    try:
        procs["stock_jetrover"] = NodeProcess(
            "stock_jetrover", scratch, {"site": str(site), "speed": speed}, env=env)
        with ros_client(client) as node:
            amcl = Collector(node, PoseWithCovarianceStamped, "amcl_pose", latched)
            # the robot's bringup and Nav2 run before glove_ros starts (docs/robot.md step 1)
            wait_for(lambda: len(amcl) > 0, 60, "the emulator's first amcl_pose",
                     procs["stock_jetrover"].log)
            # as `ros2 launch glove_ros jetrover.launch.py site:=...` runs them: the params
            # file, the robot arguments (defaults: the stock JetRover), the deployment's remaps
            dep = graph.DEPLOYMENTS["jetrover"]
            robot = {"site": str(site)}
            robot_params = graph.robot_settings(dep, robot)[0]
            for spec in dep.nodes:
                params = {**profile(spec.name), **robot_params.get(spec.name, {}),
                          **overrides.get(spec.name, {})}
                # an empty string must reach the node as '' (a bare `name:=` is no value)
                params = {k: "''" if v == "" else v for k, v in params.items()}
                procs[spec.name] = NodeProcess(
                    spec.module, scratch, params, name=spec.name, env=env,
                    remaps=dict(graph.node_remaps(dep, spec, "", robot)))
            r = Rig(procs, node, SpinSafeActionClient(node, RunTask, "run_task"),
                    node.create_client(QueryMemory, "query_memory"),
                    Timed(node, String, "emulator/events"),
                    Collector(node, String, "emulator/route", latched),
                    Timed(node, Odometry, "odom"), amcl,
                    Timed(node, UInt16, "ros_robot_controller/battery"),
                    Timed(node, String, "current_waypoint", latched),
                    Collector(node, ConsolidationReport, "consolidation_report"),
                    Collector(node, TaskOutcome, "task_outcomes"),
                    node.create_publisher(String, "emulator/close_corridor", 10),
                    node.create_publisher(String, "emulator/open_corridor", 10),
                    scratch)
            wait_for(lambda: r.tasks.server_is_ready() or not all_alive(r), 120,
                     "the planner's run_task server", r.logs)
            assert all_alive(r), r.logs()
            assert r.query.wait_for_service(timeout_sec=60), r.logs()
            wait_for(lambda: "waypoint_nav active" in procs["waypoint_nav"].log(), 60,
                     "waypoint_nav active", r.logs)
            wait_for(lambda: r.close_corridor.get_subscription_count() > 0
                     and r.open_corridor.get_subscription_count() > 0, 30, "emulator controls",
                     r.logs)
            yield _answering(r)
    finally:
        for p in reversed(list(procs.values())):
            p.stop()


def _answering(rig: Rig) -> Rig:
    """``rig`` with a run_task client whose answers arrive (rosproc.answering_action_client):
    the probe is an empty task, which the planner refuses as invalid_task before it moves or
    records anything."""
    from glove_ros.action import RunTask

    rig.tasks.destroy()
    client, result = answering_action_client(
        rig.node, RunTask, "run_task",
        lambda attempt: RunTask.Goal(task="", task_id=f"warm-up{attempt}"), rig.logs)
    assert result.reason == "invalid_task", f"the warm-up task ran ({result.reason})\n{rig.logs()}"
    return rig._replace(tasks=client)


def poll(pred: Any, timeout: float) -> bool:
    """Poll ``pred`` until true (True) or ``timeout`` seconds passed (False)."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def all_alive(rig: Rig) -> bool:
    return all(p.alive() for p in rig.procs.values())


def wait_future(future: Any, timeout: float, what: str, rig: Rig) -> Any:
    """The result of an rclpy future; AssertionError with the logs after ``timeout`` s."""
    end = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{rig.logs()}")
        time.sleep(0.02)
    return future.result()


def send_task(rig: Rig, text: str, feedback: list | None = None, task_id: str = "") -> Any:
    """Send a run_task goal; returns the accepted goal handle. ``feedback`` (a list) gets
    (arrival time, feedback) pairs."""
    from glove_ros.action import RunTask

    goal = RunTask.Goal(task=text, task_id=task_id or f"stock{next(_TASK_IDS)}")
    cb = (lambda f: feedback.append((time.monotonic(), f.feedback))) if feedback is not None \
        else None
    handle = wait_future(rig.tasks.send_goal_async(goal, feedback_callback=cb), 15,
                         f"goal response to {text!r}", rig)
    assert handle.accepted, f"run_task refused {text!r}\n{rig.logs()}"
    return handle


def run_task(rig: Rig, text: str, timeout: float = 120.0, task_id: str = "") -> Any:
    """Run one task to its end; returns the RunTask result."""
    handle = send_task(rig, text, task_id=task_id)
    return wait_future(handle.get_result_async(), timeout, f"the result of {text!r}",
                       rig).result


def odom_xy(rig: Rig) -> tuple[float, float] | None:
    """Where the robot is by its odometry (its origin is the dock at (0, 0, 0): odom is the
    map frame here), or None before the first message."""
    if not rig.odom.items:
        return None
    p = rig.odom.items[-1][1].pose.pose.position
    return p.x, p.y


def standing_at(rig: Rig) -> str | None:
    """The waypoint the robot stands at by odometry, or None (between waypoints)."""
    xy = odom_xy(rig)
    if xy is None:
        return None
    best = min(WAYPOINTS, key=lambda w: math.dist(xy, WAYPOINTS[w]))
    return best if math.dist(xy, WAYPOINTS[best]) <= AT_WAYPOINT else None


def go(rig: Rig, waypoint: str) -> None:
    """Set-up drive (not what a test checks): the robot ends at ``waypoint``.

    Where the robot really is comes from odometry (its origin is the dock at (0, 0, 0), so
    odom is the map frame here). A planner that believes it already stands there (it was
    stopped near it) is sent elsewhere first."""
    for _ in range(2):
        r = run_task(rig, f"go to the {waypoint}")
        assert r.success, (f"set-up drive 'go to the {waypoint}' failed ({r.reason}): the "
                           f"test cannot start from there\n{rig.logs()}")
        pose = rig.odom.items[-1][1].pose.pose.position
        if math.dist((pose.x, pose.y), WAYPOINTS[waypoint]) <= AT_WAYPOINT:
            return
        run_task(rig, f"go to the {'lab' if waypoint != 'lab' else 'hall'}")
    raise AssertionError(f"set-up: the planner reports the robot at {waypoint}, odometry says "
                         f"({pose.x:.2f}, {pose.y:.2f})\n{rig.logs()}")


def drive_entries(rig: Rig) -> list[Any]:
    """Every navigate_to entry of experience memory (trusted and history)."""
    from glove_ros.srv import QueryMemory

    resp = call(rig.node, rig.query, QueryMemory.Request(
        action="navigate_to", include_suppressed=True, max_results=100000), timeout=15)
    return list(resp.entries)


def describe(entries: list[Any]) -> list[str]:
    return [f"#{e.id} {e.transition.state_key}->{e.transition.action_arg}: "
            f"{e.transition.outcome}" for e in entries]


def moving(msg: Any) -> bool:
    """Whether an Odometry message shows the robot moving (its twist is the commanded one)."""
    return abs(msg.twist.twist.linear.x) > 1e-6 or abs(msg.twist.twist.angular.z) > 1e-6


def stopped_at(rig: Rig, since: float, timeout: float = 30.0) -> float | None:
    """When odometry shows the robot stopped after ``since`` (time.monotonic()): no motion
    from some message on, for 0.5 s; None if not within ``timeout`` s."""
    end = since + timeout
    while time.monotonic() < end:
        odom = rig.odom.since(since)
        last = max((i for i, (_t, m) in enumerate(odom) if moving(m)), default=-1)
        if last + 1 < len(odom) and odom[-1][0] - odom[last + 1][0] >= 0.5:
            return odom[last + 1][0]
        time.sleep(0.05)
    return None


def restarts(rig: Rig, since: int) -> list[str]:
    """The planner's 'driver restarted' warnings after log offset ``since``."""
    return [ln for ln in rig.procs["planner"].log()[since:].splitlines()
            if "driver restarted" in ln]
