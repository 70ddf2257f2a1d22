"""Two simulated robots side by side, each in its own namespace with its own parameters.

Both graphs start from the same parameter file (config/sim.yaml, sections /**/<node>)
with per-robot sections /robot1/<node> and /robot2/<node> appended, exactly as a user
would run two robots (docs/robot.md, "Several robots"). Each robot has its own simulator (its
own simulated clock on <ns>/clock), perception, memory and planner. What must hold: each
robot runs a task through its own run_task; each memory holds only its own robot's
transitions, in its own database; the shared sections reach namespaced nodes (nothing
falls back to defaults) and the per-robot sections override them.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import call, ros_client, wait_for  # noqa: E402

from glove_ros import graph  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROBOTS = {"robot1": "rover_one", "robot2": "rover_two"}
NODES = (graph.SIMULATOR, graph.PERCEPTION, graph.MEMORY, graph.PLANNER)


def _params_file(tmp_path: Path) -> Path:
    text = (ROOT / "config" / "sim.yaml").read_text()
    for i, (ns, robot_id) in enumerate(ROBOTS.items()):
        db = tmp_path / f"{ns}.db"
        text += f"""
/{ns}/simulator:
  ros__parameters:
    world: small
    camera_rate: 5.0
/{ns}/memory:
  ros__parameters:
    db_path: {db}
    verifier:
      p_th: {2 + i}
/{ns}/planner:
  ros__parameters:
    world: small
    robot_id: {robot_id}
    plan_db_path: {db}
"""
    path = tmp_path / "two_robots.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def two_robots(tmp_path):
    params = str(_params_file(tmp_path))
    procs = []
    for ns in ROBOTS:
        for spec in NODES:
            cmd = graph.process_command(spec, params, namespace=ns, deployment_name="sim")
            log = open(tmp_path / f"{ns}_{spec.name}.log", "w")  # noqa: SIM115
            procs.append((f"{ns}/{spec.name}", log,
                          subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))
    yield tmp_path, procs
    for _, _, p in procs:
        p.terminate()
    for _, log, p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
        log.close()


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted(tmp_path.glob("*.log")))


def _run_task(client, text: str, task_id: str, timeout: float = 120.0):
    from glove_ros.action import RunTask

    done, holder = threading.Event(), {}

    def on_goal(fut):
        handle = fut.result()
        if not handle.accepted:
            done.set()
            return
        handle.get_result_async().add_done_callback(
            lambda f: (holder.update(result=f.result().result), done.set()))

    client.send_goal_async(RunTask.Goal(task=text, task_id=task_id)).add_done_callback(on_goal)
    assert done.wait(timeout), f"task {text!r} did not finish in {timeout}s"
    return holder["result"]


def _params(node, fqn: str, names: list[str]) -> list:
    from rcl_interfaces.srv import GetParameters

    client = node.create_client(GetParameters, f"{fqn}/get_parameters")
    r = call(node, client, GetParameters.Request(names=names), timeout=30)
    node.destroy_client(client)
    values = []
    for v in r.values:
        values.append({1: v.bool_value, 2: v.integer_value, 3: v.double_value,
                       4: v.string_value}.get(v.type))
    return values


def test_two_namespaced_robots_keep_their_own_parameters_and_memories(two_robots):
    from rosgraph_msgs.msg import Clock

    from glove_ros.action import RunTask
    from glove_ros.nodes.common import SpinSafeActionClient
    from glove_ros.srv import QueryMemory

    tmp_path, procs = two_robots
    with ros_client() as node:
        clients = {ns: SpinSafeActionClient(node, RunTask, f"/{ns}/run_task") for ns in ROBOTS}
        queries = {ns: node.create_client(QueryMemory, f"/{ns}/query_memory") for ns in ROBOTS}
        for client in clients.values():
            assert client.wait_for_server(timeout_sec=90), _logs(tmp_path)
        for ns in ROBOTS:
            wait_for(lambda ns=ns: node.count_publishers(f"/{ns}/detections") > 0
                     and node.count_subscribers(f"/{ns}/episode_start") > 0,
                     60, f"{ns} perception and simulator", lambda: _logs(tmp_path))
        # each robot's simulated time is its own: nobody publishes the global /clock
        assert node.count_publishers("/clock") == 0
        clocks = {ns: [] for ns in ROBOTS}
        for ns in ROBOTS:
            node.create_subscription(Clock, f"/{ns}/clock", clocks[ns].append, 10)
        wait_for(lambda: all(len(c) > 2 for c in clocks.values()), 60, "both robots' clocks",
                 lambda: _logs(tmp_path))

        # shared /**/ sections reach the namespaced nodes; /<ns>/ sections override them
        for i, (ns, robot_id) in enumerate(ROBOTS.items()):
            assert _params(node, f"/{ns}/planner", ["robot_id", "world", "use_sim_time"]) == [
                robot_id, "small", True]
            assert _params(node, f"/{ns}/memory", ["verifier.p_th", "verifier.mode",
                                                   "use_sim_time"]) == [2 + i, "async", True]
            assert _params(node, f"/{ns}/simulator", ["time_scale"]) == [20.0]

        # both robots work at once, each through its own action
        results: dict = {}
        threads = [threading.Thread(target=lambda ns=ns: results.update(
            {ns: _run_task(clients[ns], "find the red block", f"{ns}_t0")})) for ns in ROBOTS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
        for ns in ROBOTS:
            assert ns in results and results[ns].success, (results, _logs(tmp_path))

        for ns, robot_id in ROBOTS.items():
            r = call(node, queries[ns], QueryMemory.Request(max_results=100), timeout=20)
            assert r.entries, f"{ns} remembered nothing"
            assert {e.transition.robot_id for e in r.entries} == {robot_id}
            assert (tmp_path / f"{ns}.db").is_file()
    for name, _, p in procs:
        assert p.poll() is None, f"{name} died:\n{_logs(tmp_path)}"
