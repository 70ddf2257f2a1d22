"""Launch files, deployments and parameter files agree with the nodes.

`ros2 launch` is not installable here, so this checks statically what it would check at
run time: every launch file names a known deployment and an existing config file, every
node of every deployment has an executable and a module, and every key of every parameter
file is a parameter that node declares.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from glove_ros import graph  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _declared(executable: str) -> set[str]:
    mod = importlib.import_module(f"glove_ros.nodes.{executable}")
    return {p.name for p in mod.PARAMS} | {"use_sim_time"}


def test_there_is_a_launch_file_per_deployment():
    names = {p.name.removesuffix(".launch.py") for p in LAUNCH_FILES}
    assert names == set(graph.DEPLOYMENTS)


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_names_known_deployment_and_config(path):
    tree = ast.parse(path.read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description"
               for n in tree.body)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name)]
    deployments = [c.args[0].value for c in calls if c.func.id == "glove_nodes"]
    configs = [c.args[0].value for c in calls if c.func.id == "config_path"]
    assert deployments == [path.name.removesuffix(".launch.py")]
    assert configs, "launch file passes no parameter file"
    for cfg in configs:
        assert (ROOT / "config" / cfg).is_file(), cfg
        assert cfg == graph.deployment(deployments[0]).config


@pytest.mark.parametrize("name", sorted(graph.DEPLOYMENTS))
def test_deployment_executables_and_parameters_exist(name):
    dep = graph.deployment(name)
    params = yaml.safe_load((ROOT / "config" / dep.config).read_text())
    # /**/<node>: the section applies in any namespace (namespace:=robot1 keeps it)
    assert set(params) == {f"/**/{spec.name}" for spec in dep.nodes}, "one section per node"
    for spec in dep.nodes:
        script = ROOT / "scripts" / spec.executable
        assert script.is_file() and script.stat().st_mode & 0o111, f"{script} not executable"
        assert f"glove_ros.nodes.{spec.executable}" in script.read_text()
        section = params[f"/**/{spec.name}"]["ros__parameters"]
        unknown = set(_flatten(section)) - _declared(spec.executable)
        assert not unknown, f"{dep.config}: {spec.name} has undeclared keys {sorted(unknown)}"


@pytest.mark.parametrize("name", sorted(graph.DEPLOYMENTS))
def test_memory_never_probes_what_the_verifier_never_probes(name):
    """Otherwise the deadlock rule can re-expose entries the robot must never re-try."""
    params = yaml.safe_load((ROOT / "config" / graph.deployment(name).config).read_text())
    if "/**/verifier" not in params:
        return
    memory = params["/**/memory"]["ros__parameters"]["verifier"]["never_probe"]
    verifier = params["/**/verifier"]["ros__parameters"]["never_probe"]
    assert sorted(memory) == sorted(verifier)


def test_process_command_matches_what_launch_would_run():
    cmd = graph.process_command(graph.MEMORY, "config/sim.yaml", {"db_path": "x.db"},
                                namespace="r1", log_level="debug")
    assert cmd[1:4] == ["-u", "-m", "glove_ros.nodes.memory_node"]
    assert "--params-file" in cmd and "__ns:=/r1" in cmd and "db_path:=x.db" in cmd
    assert cmd[cmd.index("--log-level") + 1] == "debug"


@pytest.mark.parametrize("name", sorted(graph.DEPLOYMENTS))
def test_every_remap_is_relative_so_it_follows_the_namespace(name):
    for spec in graph.deployment(name).nodes:
        for old, new in graph.node_remaps(graph.deployment(name), spec, "/robot1"):
            assert not new.startswith("/"), f"{name}/{spec.name}: {old} -> {new}"


def test_namespaced_sim_takes_time_from_its_own_simulator():
    sim = graph.deployment("sim")
    cmd = graph.process_command(graph.PLANNER, "p.yaml", namespace="/robot2",
                                deployment_name="sim")
    assert "/clock:=clock" in cmd and "__ns:=/robot2" in cmd
    assert "/clock:=clock" not in graph.process_command(graph.PLANNER, "p.yaml",
                                                        deployment_name="sim")
    nodes = graph.launch_nodes(sim, "robot2", use_sim_time=True, log_level="warn")
    assert {n["namespace"] for n in nodes} == {"/robot2"}
    assert all(("/clock", "clock") in n["remappings"] for n in nodes)
    planner = next(n for n in nodes if n["name"] == "planner")
    assert planner["overrides"] == {"use_sim_time": True}
    assert planner["arguments"] == ["--ros-args", "--log-level", "warn"]
    jet = graph.launch_nodes(graph.deployment("jetrover"), "robot1")
    assert all(("/clock", "clock") not in n["remappings"] for n in jet)  # wall clock


@pytest.mark.parametrize("bad", ["robot-1", "1robot", "a//b/c d"])
def test_bad_namespace_or_log_level_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="invalid namespace"):
        graph.process_command(graph.MEMORY, "p.yaml", namespace=bad)
    with pytest.raises(ValueError, match="log_level"):
        graph.launch_nodes(graph.deployment("sim"), log_level="loud")


def test_unknown_deployment_is_a_clear_error():
    with pytest.raises(ValueError, match="known: sim"):
        graph.deployment("mars")


def test_node_help_prints_parameters_without_starting(capsys):
    from glove_ros.cli import main as cli

    assert cli.main(["node", "memory", "--help"]) == 0
    out = capsys.readouterr().out
    assert "verifier.p_th" in out and "db_path" in out


def test_robot_arguments_refuse_unknown_names_and_values_outside_their_choices():
    dep = graph.deployment("jetrover")
    with pytest.raises(ValueError, match="no robot argument camera; known: site"):
        graph.robot_settings(dep, {"camera": "x"})
    with pytest.raises(ValueError, match="battery_type must be one of UInt16, BatteryState"):
        graph.robot_settings(dep, {"battery_type": "Float32"})
    with pytest.raises(ValueError, match="camera_topic is empty"):
        graph.robot_settings(dep, {"camera_topic": " "})
    with pytest.raises(ValueError, match="known: none"):
        graph.robot_settings(graph.deployment("sim"), {"site": "x"})


def test_robot_arguments_reach_the_process_command_and_explicit_params_win():
    spec = next(s for s in graph.deployment("jetrover").nodes if s.name == "consolidation")
    cmd = graph.process_command(spec, "p.yaml", {"dock.waypoint": "bay"},
                                deployment_name="jetrover",
                                robot={"battery_topic": "power/battery"})
    text = " ".join(cmd)
    assert "battery.type:=UInt16" in text and "dock.waypoint:=bay" in text
    assert "battery:=power/battery" in text and "ros_robot_controller" not in text
