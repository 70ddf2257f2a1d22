"""The node graph of each deployment: one source for launch files and ``glove-ros launch``.

On a robot with ROS 2, ``ros2 launch glove_ros <deployment>.launch.py`` builds
``launch_ros`` Node actions from :func:`deployment`; on a machine without the launch
tooling (this one), ``glove-ros launch <deployment>`` starts the same nodes as processes
with the same parameter file and remappings (:func:`process_command`).

ROS-free: nothing here imports rclpy or launch.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeSpec:
    """One node of a deployment."""

    name: str  # ROS node name (also the section of the params file)
    executable: str  # `ros2 run glove_ros <executable>` (scripts/<executable>)
    remaps: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        """Python module whose ``main()`` runs the node."""
        return f"glove_ros.nodes.{self.executable}"


@dataclass(frozen=True)
class Deployment:
    """A named set of nodes with its parameter file (under ``config/``)."""

    name: str
    config: str  # e.g. "sim.yaml"
    nodes: tuple[NodeSpec, ...]
    description: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)  # notes for launch files


SIMULATOR = NodeSpec("simulator", "simulator_node")
PERCEPTION = NodeSpec("perception", "perception_node")
MEMORY = NodeSpec("memory", "memory_node")
VERIFIER = NodeSpec("verifier", "verifier_node")
PLANNER = NodeSpec("planner", "planner_node")
OBSERVER = NodeSpec("observer", "observer_node")
PLAN_GATE = NodeSpec("plan_gate", "plan_gate_node")
CONSOLIDATION = NodeSpec("consolidation", "consolidation_node")
# Real robot: navigate_to_waypoint over Nav2's goal_pose topic, progress from amcl_pose.
WAYPOINT_NAV = NodeSpec("waypoint_nav", "waypoint_nav_node", (("pose", "/amcl_pose"),
                                                              ("goal_pose", "/goal_pose")))

# HiWonder JetRover (ROS 2 Humble image): Orbbec camera and odometry topic names. Check
# `ros2 topic list` on your robot; change them here and in config/jetrover.yaml.
JETROVER_CAMERA = "/depth_cam/rgb/image_raw"
JETROVER_ODOM = "/odom"
JETROVER_BATTERY = "/ros_robot_controller/battery"

DEPLOYMENTS: dict[str, Deployment] = {
    "sim": Deployment(
        "sim", "sim.yaml",
        (SIMULATOR, PERCEPTION, MEMORY, VERIFIER, PLANNER, PLAN_GATE, CONSOLIDATION),
        "built-in simulator: the whole stack on one machine, simulated time on /clock",
    ),
    "gazebo": Deployment(
        "gazebo", "gazebo.yaml",
        (
            NodeSpec("perception", "perception_node", (("camera/image_raw", "/camera/image_raw"),)),
            MEMORY, VERIFIER,
            NodeSpec("planner", "planner_node", (("odom", "/odom"),)),
            PLAN_GATE, CONSOLIDATION,
        ),
        "Gazebo (gz sim) world generated from a world file; ros_gz_bridge for camera, odom, "
        "cmd_vel; navigate_to_waypoint served by your navigation stack",
    ),
    "jetrover": Deployment(
        "jetrover", "jetrover.yaml",
        (
            NodeSpec("perception", "perception_node", (("camera/image_raw", JETROVER_CAMERA),)),
            MEMORY, VERIFIER,
            NodeSpec("planner", "planner_node", (("odom", JETROVER_ODOM),)),
            PLAN_GATE,
            NodeSpec("consolidation", "consolidation_node", (("battery", JETROVER_BATTERY),)),
            WAYPOINT_NAV,
        ),
        "the physical JetRover: async GLOVE, nothing probed by default",
    ),
    "bag_replay": Deployment(
        "bag_replay", "bag_replay.yaml", (PERCEPTION, OBSERVER, MEMORY),
        "replay a recorded bag (glove-ros bag replay) through perception and memory",
    ),
}


def deployment(name: str) -> Deployment:
    """The deployment called ``name``; ValueError listing the known ones."""
    try:
        return DEPLOYMENTS[name]
    except KeyError:
        raise ValueError(f"unknown deployment '{name}'; known: {', '.join(DEPLOYMENTS)}") from None


def process_command(spec: NodeSpec, params_file: str, overrides: Mapping[str, object] = (),
                    remaps: Sequence[tuple[str, str]] = (), namespace: str = "") -> list[str]:
    """The command line that runs ``spec`` as its own process (what launch would do)."""
    cmd = [sys.executable, "-u", "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}",
           "--params-file", params_file]
    if namespace:
        cmd += ["-r", f"__ns:={namespace}"]
    for key, value in dict(overrides).items():
        cmd += ["-p", f"{key}:={_param_text(value)}"]
    for old, new in (*spec.remaps, *remaps):
        cmd += ["-r", f"{old}:={new}"]
    return cmd


def _param_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(f"'{v}'" if isinstance(v, str) else _param_text(v)
                              for v in value) + "]"
    return str(value)
