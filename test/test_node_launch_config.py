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
    assert set(params) == {spec.name for spec in dep.nodes}, "one section per node"
    for spec in dep.nodes:
        script = ROOT / "scripts" / spec.executable
        assert script.is_file() and script.stat().st_mode & 0o111, f"{script} not executable"
        assert f"glove_ros.nodes.{spec.executable}" in script.read_text()
        section = params[spec.name]["ros__parameters"]
        unknown = set(_flatten(section)) - _declared(spec.executable)
        assert not unknown, f"{dep.config}: {spec.name} has undeclared keys {sorted(unknown)}"


def test_process_command_matches_what_launch_would_run():
    cmd = graph.process_command(graph.MEMORY, "config/sim.yaml", {"db_path": "x.db"},
                                namespace="/r1")
    assert cmd[1:4] == ["-u", "-m", "glove_ros.nodes.memory_node"]
    assert "--params-file" in cmd and "__ns:=/r1" in cmd and "db_path:=x.db" in cmd


def test_unknown_deployment_is_a_clear_error():
    with pytest.raises(ValueError, match="known: sim"):
        graph.deployment("mars")


def test_node_help_prints_parameters_without_starting(capsys):
    from glove_ros import cli

    assert cli.main(["node", "memory", "--help"]) == 0
    out = capsys.readouterr().out
    assert "verifier.p_th" in out and "db_path" in out
