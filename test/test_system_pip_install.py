"""``pip install .`` into a fresh virtual environment without ROS, then the README's ROS-free
commands: help, ``doctor --no-ros``, ``sdf`` on a bundled world, one-line messages naming the
missing extra (``bench frozenlake``) or ROS (``demo``, ``task``), and with ``[bench]`` the
FrozenLake benchmark on a packaged scenario. The build must leave nothing in the source tree
(no build/lib, bdist.*, egg-info).

pip's own cache (and the configured index) serve the dependencies, so a warm run takes
about a minute; it is skipped when no package index answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _tree_artifacts() -> set[str]:
    found = {str(p.relative_to(ROOT)) for p in ROOT.glob("*.egg-info")}
    found |= {str(p.relative_to(ROOT)) for p in (ROOT / "glove_ros").glob("*.egg-info")}
    for name in ("lib", "bdist.linux-x86_64", "bdist.linux-aarch64"):
        if (ROOT / "build" / name).exists():
            found.add(f"build/{name}")
    return found


def test_pip_install_in_fresh_venv_runs_the_ros_free_commands(tmp_path):
    before = _tree_artifacts()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    tool = env_dir / "bin" / "glove-ros"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH", "GLOVE_ROS_ROOT", "VIRTUAL_ENV",
                        "COLCON_PREFIX_PATH", "LD_LIBRARY_PATH")}
    env["PATH"] = f"{env_dir / 'bin'}:/usr/bin:/bin"

    def pip(*args: str) -> None:
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0 and "No matching distribution" in r.stderr:
            pytest.skip(f"no package index reachable: {r.stderr[-300:]}")
        assert r.returncode == 0, r.stderr

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(tool), *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    pip(str(ROOT))
    # no ROS in this environment
    assert subprocess.run([str(py), "-c", "import rclpy"], env=env, cwd=tmp_path,
                          capture_output=True).returncode != 0

    assert run("--help").returncode == 0
    doctor = run("doctor", "--no-ros")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "glove_ros[bench]" in doctor.stdout and "site-packages" in doctor.stdout
    assert run("doctor").returncode == 1  # ROS is required unless --no-ros

    sdf = run("sdf", "small", "-o", "small.sdf")
    assert sdf.returncode == 0, sdf.stderr
    assert "<world" in (tmp_path / "small.sdf").read_text()

    data = Path(subprocess.run(
        [str(py), "-c", "import glove_ros, os; print(os.path.dirname(glove_ros.__file__))"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    ) / "data"
    scenario = data / "bench" / "scenarios" / "frozenlake_tiny.yaml"
    assert scenario.is_file() and (data / "config" / "sim.yaml").is_file()

    for args, needle in ((("bench", "frozenlake", "--scenario", str(scenario)), "[bench]"),
                         (("demo",), "ROS 2"), (("task", "find the red block"), "ROS 2")):
        r = run(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert needle in r.stderr

    pip(f"{ROOT}[bench]")
    bench = run("bench", "frozenlake", "--scenario", str(scenario), "--out", "results")
    assert bench.returncode == 0, bench.stdout + bench.stderr
    doc = json.loads((tmp_path / "results" / "frozenlake_tiny.json").read_text())
    assert doc["methods"]

    assert _tree_artifacts() <= before, "pip left build output in the source tree"
