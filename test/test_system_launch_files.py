"""The launch files themselves: loaded, evaluated, and sim.launch.py run.

The ROS 2 ``launch`` / ``launch_ros`` packages have no wheel on PyPI, so here the launch
files run against a stand-in of their API (test/launch_standin.py: same constructor
keywords, arguments and OpaqueFunctions evaluated as LaunchService does, a Node turned into
launch_ros's command line). What must hold:

* sim.launch.py, executed with a namespace: every node it describes starts from the
  installed executable, each lifecycle node reaches ``active``, the markers appear, and
  SIGINT (what launch sends on shutdown) stops every process with exit 0, none left;
* jetrover, gazebo and bag_replay: the actions (executables, parameter files, overrides,
  remaps, namespace, respawn, the gz bridge) are what the deployment in graph.py says.

Where the real packages are installed (a ROS 2 workspace), the last test runs
sim.launch.py under the real ``launch.LaunchService`` as well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

import launch_standin as standin  # noqa: E402
from rosproc import call_retry, ros_client, wait_for  # noqa: E402

from glove_ros import graph  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "launch"
NS = "launch_test"


def _evaluate(name: str, monkeypatch, **arguments: str) -> list:
    standin.install(monkeypatch)
    description = standin.load_launch_file(LAUNCH / f"{name}.launch.py", monkeypatch)
    context = standin.LaunchContext(arguments)
    actions = context.visit(description)
    return [context, *actions]


def _nodes(actions: list) -> dict[str, standin.Node]:
    return {a.name: a for a in actions if isinstance(a, standin.Node) and a.package == "glove_ros"}


def _installed_config(name: str) -> str:
    from ament_index_python.packages import get_package_share_directory

    return os.path.join(get_package_share_directory("glove_ros"), "config", name)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _label(client, get) -> str:
    """The lifecycle state of a node, "" while its get_state service does not answer."""
    from lifecycle_msgs.srv import GetState

    try:
        return call_retry(client, get, GetState.Request(), timeout=5).current_state.label
    except AssertionError:
        return ""


def _descendants(pids: set[int]) -> set[int]:
    """Live processes whose parent chain reaches ``pids`` (from /proc)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parent[int(stat.parent.name)] = int(fields[1])
    out: set[int] = set()
    for pid in parent:
        p = pid
        while p in parent and p not in pids and p > 1:
            p = parent[p]
        if p in pids:
            out.add(pid)
    return out


@pytest.mark.parametrize("deployment", sorted(graph.DEPLOYMENTS))
def test_launch_file_describes_the_deployment(deployment, monkeypatch, tmp_path):
    extra = {"gz_dir": _gz_dir(tmp_path)} if deployment == "gazebo" else {}
    context, *actions = _evaluate(deployment, monkeypatch, namespace="robot1",
                                  respawn="true", log_level="warn", use_sim_time="false",
                                  **extra)
    dep = graph.deployment(deployment)
    nodes = _nodes(actions)
    assert list(nodes) == [spec.name for spec in dep.nodes]
    for spec in dep.nodes:
        node = nodes[spec.name]
        assert node.executable == spec.executable and node.namespace == "/robot1"
        assert (ROOT / "scripts" / node.executable).is_file()
        assert node.parameters[0] == _installed_config(dep.config)
        assert Path(node.parameters[0]).is_file()
        overrides = node.parameters[1]
        if spec is not graph.SIMULATOR:
            assert overrides["use_sim_time"] is False
        # respawn:=true: a failed configure exits so that launch restarts the node
        assert overrides.get("exit_on_failure", False) is spec.lifecycle
        assert node.respawn is True and node.respawn_delay == 2.0
        assert node.arguments == ["--ros-args", "--log-level", "warn"]
        assert node.remappings == graph.node_remaps(dep, spec, "/robot1")
        assert all(not new.startswith("/") for _, new in node.remappings)


def test_defaults_stay_alive_on_a_failed_configure_and_take_the_installed_config(monkeypatch):
    _, *actions = _evaluate("jetrover", monkeypatch)
    nodes = _nodes(actions)
    robot_params, _ = graph.robot_settings(graph.deployment("jetrover"))
    for name, node in nodes.items():
        assert node.namespace == "" and node.respawn is False and node.arguments == []
        # the robot arguments' defaults (stock JetRover) ride on top of the installed config
        assert node.parameters == [_installed_config("jetrover.yaml"),
                                   *([robot_params[name]] if name in robot_params else [])]
    assert nodes["consolidation"].parameters[1] == {"battery.type": "UInt16",
                                                    "dock.waypoint": "dock"}
    assert nodes["planner"].parameters[1] == {"pose_source": "amcl"}
    assert ("camera/image_raw", graph.JETROVER_CAMERA) in nodes["perception"].remappings
    assert ("battery", graph.JETROVER_BATTERY) in nodes["consolidation"].remappings
    assert ("pose", "amcl_pose") in nodes["waypoint_nav"].remappings


def test_fleet_robot_starts_its_leaf_server_and_points_memory_at_it(monkeypatch):
    _, *actions = _evaluate("jetrover", monkeypatch)
    assert not [a for a in actions if isinstance(a, standin.ExecuteProcess)]  # no fleet
    _, *actions = _evaluate("jetrover", monkeypatch, fleet_robot="robot1",
                            fleet_hub="nats-leaf://server:7422", fleet_port="4300",
                            respawn="true")
    leaf = [a for a in actions if isinstance(a, standin.ExecuteProcess)]
    assert len(leaf) == 1 and leaf[0].respawn is True
    assert leaf[0].cmd[-7:] == ["fleet", "leaf", "robot1", "--hub", "nats-leaf://server:7422",
                                "--port", "4300"]
    memory = _nodes(actions)["memory"]
    assert memory.parameters[1]["fleet.url"] == "nats://127.0.0.1:4300"
    assert memory.parameters[1]["fleet.robot_id"] == "robot1"
    with pytest.raises(ValueError, match="fleet_robot needs fleet_hub"):
        _evaluate("jetrover", monkeypatch, fleet_robot="robot1")


def _gz_dir(tmp_path: Path, gz_version: str = "harmonic") -> str:
    from glove_ros.core.world.gzexport import write_gazebo_files
    from glove_ros.core.world.worldfile import load_world

    folder = tmp_path / f"gz_{gz_version}"
    if not folder.is_dir():
        write_gazebo_files(load_world("jetrover_maze"), folder, gz_version=gz_version)
    return str(folder)


def _includes(actions: list, context) -> dict[str, dict[str, str]]:
    """package/launch file -> the launch arguments of each IncludeLaunchDescription."""
    out = {}
    for a in actions:
        if isinstance(a, standin.IncludeLaunchDescription):
            parts = a.launch_description_source.launch_file_path.substitutions
            key = f"{parts[0].package}/{'/'.join(parts[1:])}"
            out[key] = {context.text(k): context.text(v) for k, v in a.launch_arguments}
    return out


def test_gazebo_launch_starts_gazebo_bridge_nav2_and_the_event_node(monkeypatch, tmp_path):
    import yaml

    import glove_ros.paths

    monkeypatch.setattr(glove_ros.paths, "data_dir", lambda: tmp_path / "data")
    monkeypatch.setenv("ROS_DISTRO", "humble")
    context, *actions = _evaluate("gazebo", monkeypatch, world="drift_demo", episode="7")
    folder = tmp_path / "data" / "gazebo" / "drift_demo_fortress_ep7"  # written at launch
    assert "barrier_goal_hall" in (folder / "world.sdf").read_text()  # episode 7: closed
    includes = _includes(actions, context)
    assert includes["ros_gz_sim/launch/gz_sim.launch.py"] == {
        "gz_args": f"-r {folder / 'world.sdf'}", "gz_version": "6", "on_exit_shutdown": "true"}
    nav2 = includes["nav2_bringup/launch/bringup_launch.py"]
    assert nav2["map"] == str(folder / "map.yaml") and nav2["use_sim_time"] == "true"
    params = yaml.safe_load(Path(nav2["params_file"]).read_text())
    assert params["planner_server"]["ros__parameters"]["GridBased"]["plugin"] == \
        "nav2_navfn_planner/NavfnPlanner"  # Humble's name
    nodes = [a for a in actions if isinstance(a, standin.Node)]
    (bridge,) = [n for n in nodes if n.package == "ros_gz_bridge"]
    assert bridge.executable == "parameter_bridge"
    config = bridge.parameters[0]["config_file"]
    assert config == str(folder / "bridge.yaml") and bridge.parameters[0]["use_sim_time"]
    entries = yaml.safe_load(Path(config).read_text())
    assert {e["gz_type_name"].split(".")[0] for e in entries} == {"ignition"}
    assert {e["ros_topic_name"] for e in entries} >= {"/clock", "/cmd_vel", "/odom", "/tf",
                                                      "/scan", "/camera/image_raw"}
    tfs = [n for n in nodes if n.package == "tf2_ros"]
    children = {n.arguments[n.arguments.index("--child-frame-id") + 1] for n in tfs}
    assert children == {"base_link", "jetrover/base_link/lidar", "jetrover/base_link/camera"}
    glove = _nodes(actions)
    assert list(glove) == [s.name for s in graph.deployment("gazebo").nodes]
    events = glove["gz_events"].parameters[1]
    assert events == {"world": "drift_demo", "gz_version": "", "episode": 7}
    for name in ("planner", "plan_gate", "waypoint_nav", "markers"):
        assert glove[name].parameters[1]["world"] == "drift_demo"


def test_gazebo_launch_takes_a_written_folder_and_its_switches(monkeypatch, tmp_path):
    folder = _gz_dir(tmp_path, "harmonic")
    context, *actions = _evaluate("gazebo", monkeypatch, gz_dir=folder, gz_version="harmonic",
                                  nav2="false", headless="true")
    includes = _includes(actions, context)
    assert list(includes) == ["ros_gz_sim/launch/gz_sim.launch.py"]  # nav2:=false
    gz = includes["ros_gz_sim/launch/gz_sim.launch.py"]
    assert gz["gz_args"] == f"-s -r {folder}/world.sdf" and gz["gz_version"] == "8"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="lacks world.sdf, map.yaml, bridge.yaml, "
                       "nav2_params.yaml: write it with `glove-ros sdf"):
        _evaluate("gazebo", monkeypatch, gz_dir=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="episode must be an integer"):
        _evaluate("gazebo", monkeypatch, gz_dir=folder, episode="seven")
    with pytest.raises(ValueError, match="nav2 must be true or false"):
        _evaluate("gazebo", monkeypatch, gz_dir=folder, nav2="maybe")


def test_sim_launch_file_runs_and_stops_cleanly(tmp_path, monkeypatch):
    from glove_ros.nodes.common import LAST_RESORT_HEADER

    context, *actions = _evaluate("sim", monkeypatch, namespace=NS, world="small",
                                  log_level="info")
    nodes = _nodes(actions)
    assert set(nodes) == {spec.name for spec in graph.deployment("sim").nodes}
    worlds = {name: node.parameters[1]["world"] for name, node in nodes.items()
              if len(node.parameters) > 1}
    assert worlds == dict.fromkeys(("simulator", "planner", "plan_gate", "markers"), "small")
    (tmp_path / "build" / "demo").mkdir(parents=True)  # sim.yaml's relative db_path
    procs: dict[str, subprocess.Popen] = {}
    logs = []
    seen: set[int] = set()

    def log_text() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                         for p in sorted(tmp_path.glob("*.log")))

    try:
        for name, node in nodes.items():
            log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            procs[name] = subprocess.Popen(node.command(context, tmp_path), cwd=tmp_path,
                                           stdout=log, stderr=subprocess.STDOUT)
        lifecycle = [s.name for s in graph.deployment("sim").nodes if s.lifecycle]
        with ros_client("launch_file_test") as client:
            from lifecycle_msgs.srv import GetState

            for name in lifecycle:
                get = client.create_client(GetState, f"/{NS}/{name}/get_state")
                wait_for(lambda get=get: _running(procs, log_text)
                         and _label(client, get) == "active", 240, f"/{NS}/{name} active",
                         log_text)
            wait_for(lambda: client.count_publishers(f"/{NS}/memory_markers") == 1
                     and client.count_publishers(f"/{NS}/clock") == 1, 60,
                     "markers and the namespaced clock", log_text)
            assert client.count_publishers("/clock") == 0
        assert _running(procs, log_text)
    finally:
        seen = {p.pid for p in procs.values()}
        seen |= _descendants(seen)
        for p in procs.values():  # what launch does on shutdown: SIGINT to every process
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        codes = {}
        deadline = time.monotonic() + 30
        for name, p in procs.items():
            try:
                codes[name] = p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # its stacks first (nodes/common.py: SIGUSR1)
                p.send_signal(signal.SIGUSR1)
                time.sleep(2)
                p.kill()
                codes[name] = p.wait(10)
        for log in logs:
            log.close()
    texts = {n: (tmp_path / f"{n}.log").read_text(errors="replace") for n in procs}
    # A node may end itself within the stop window, saying why (nodes/common.py): the stop
    # watchdog (code 0) or, where no Python thread could run, faulthandler's last resort
    # (code 1). Both are reported below with the stacks; anything else fails, SIGKILL first.
    ended_itself = {n: codes[n] for n, t in texts.items()
                    if (codes[n] == 0 and "after the stop signal" in t)
                    or (codes[n] == 1 and LAST_RESORT_HEADER in t)}
    slow = {n: t for n, t in texts.items() if n in ended_itself or codes[n] != 0}
    assert codes == {n: ended_itself.get(n, 0) for n in procs}, (
        codes, "\n".join(f"--- {n}\n{t[-8000:]}" for n, t in slow.items()) or log_text())
    assert not [pid for pid in seen if _alive(pid)], "processes left behind"
    assert "Traceback" not in log_text()
    if slow:  # ended by the stop watchdog or the last resort: say what held it, loudly
        warnings.warn(f"nodes that ended themselves after the stop: {ended_itself}\n"
                      + "\n".join(f"--- {n}\n{t[-6000:]}" for n, t in slow.items()),
                      stacklevel=1)


def _running(procs: dict[str, subprocess.Popen], logs) -> bool:
    """True while every process runs; fails at once (with the logs) when one exited."""
    dead = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
    assert not dead, f"node processes exited: {dead}\n{logs()}"
    return True


def test_sim_launch_file_under_the_real_launch_service(tmp_path):
    """Only where ROS 2's launch and launch_ros are installed (a ROS 2 workspace)."""
    pytest.importorskip("launch_ros")
    pytest.importorskip("launch.launch_service")
    (tmp_path / "build" / "demo").mkdir(parents=True)
    script = tmp_path / "run_launch.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from launch import LaunchDescription, LaunchService
        from launch.actions import IncludeLaunchDescription
        from launch.launch_description_sources import PythonLaunchDescriptionSource

        ls = LaunchService()
        ls.include_launch_description(LaunchDescription([IncludeLaunchDescription(
            PythonLaunchDescriptionSource({str(LAUNCH / 'sim.launch.py')!r}),
            launch_arguments={{'namespace': {NS!r}, 'world': 'small'}}.items())]))
        sys.exit(ls.run())
    """))
    log_path = tmp_path / "launch.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-u", str(script)], cwd=tmp_path,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            with ros_client("real_launch_test") as client:
                from lifecycle_msgs.srv import GetState

                get = client.create_client(GetState, f"/{NS}/planner/get_state")
                wait_for(lambda: proc.poll() is None and _label(client, get) == "active",
                         240, "planner active", log_path.read_text)
            children = _descendants({proc.pid})
            assert children
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(10)
    assert code == 0, log_path.read_text()
    assert not [p for p in children if _alive(p)], "orphan processes"


def test_jetrover_robot_arguments_wire_one_unit_without_editing_python(monkeypatch):
    _, *actions = _evaluate("jetrover", monkeypatch,
                            camera_topic="/ascamera/camera_publisher/rgb0/image",
                            battery_type="BatteryState", site="/data/site.yaml",
                            pose_source="odom", dock_waypoint="charger")
    nodes = _nodes(actions)
    assert ("camera/image_raw", graph.JETROVER_CAMERA_ANGSTRONG) in nodes["perception"].remappings
    assert nodes["consolidation"].parameters[1] == {"battery.type": "BatteryState",
                                                    "dock.waypoint": "charger"}
    assert nodes["planner"].parameters[1] == {"world": "/data/site.yaml", "pose_source": "odom"}
    for name in ("plan_gate", "waypoint_nav", "markers"):
        assert nodes[name].parameters[1] == {"world": "/data/site.yaml"}
