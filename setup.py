"""pip install of glove_ros without ROS: the core algorithms, benchmarks and the CLI.

The ROS 2 package (interfaces, nodes, launch) is built by colcon from CMakeLists.txt;
see README.md. `pip install .` gives the ROS-free parts only:
``glove_ros.core`` and the ``glove-ros`` command (bench, memory inspection, ...).
"""

from setuptools import find_packages, setup

setup(
    name="glove_ros",
    version="0.1.0",
    description="Drift-aware memory for embodied LLM agents (GLOVE, Janus, Auto-Dreamer)",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["glove_ros", "glove_ros.*"]),
    package_data={"glove_ros": ["data/*", "data/**/*"]},
    install_requires=["numpy>=1.21", "PyYAML>=5.4"],
    extras_require={
        "llm": ["llama-cpp-python>=0.3"],
        "vision": ["opencv-python-headless>=4.5"],
        "bench": ["gymnasium>=1.0", "matplotlib>=3.5"],
        "bags": ["rosbags>=0.11"],
        "embed": ["onnxruntime>=1.16", "tokenizers>=0.15"],
    },
    entry_points={"console_scripts": ["glove-ros = glove_ros.cli:main"]},
)
