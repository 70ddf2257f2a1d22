"""Shared by the glove_ros launch files: launch arguments and launch_ros Nodes from graph.py.

Not a launch file itself (no generate_launch_description); imported by the *.launch.py
files next to it. Needs the launch / launch_ros packages of a ROS 2 install.

Every deployment takes the same launch arguments:
  params_file   parameter file (sections /**/<node>; add /<ns>/<node> to override per robot)
  namespace     robot namespace: the whole graph and its relative remaps move under it
  use_sim_time  '' = as in the parameter file, else true/false for every node
  log_level     '' = default, else debug|info|warn|error|fatal
  respawn       restart a node that exits (true/false), after respawn_delay seconds; with
                true a node whose configure fails exits (exit_on_failure) to be restarted,
                with false it stays alive unconfigured for `ros2 lifecycle set`
  fleet_robot   '' = no fleet; else this robot's fleet id: its NATS leaf server starts with
                the nodes and the memory node shares verified memory (docs/fleet.md)
  fleet_hub     the building hub's leaf URL, e.g. nats-leaf://server:7422
  fleet_port    the leaf server's client port on 127.0.0.1 (default 4222)
A deployment for a physical robot adds its robot arguments (glove_ros/graph.py, e.g.
JETROVER_ARGS: site, camera_topic, battery_topic, battery_type, dock_waypoint, pose_source),
so nothing about one unit's wiring is edited in Python or in the parameter file.
The nodes are built in an OpaqueFunction, where the arguments are plain strings, so the
same code runs on Humble, Jazzy and Kilted.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from glove_ros.cli.fleet import leaf_launch
from glove_ros.graph import deployment, file_parameters, launch_nodes, linked_params

BOOL = {"true": True, "false": False, "1": True, "0": False}


def config_path(name: str) -> str:
    """Absolute path of config/<name> in the installed package."""
    return os.path.join(get_package_share_directory("glove_ros"), "config", name)


def _flag(text: str, name: str, allow_empty: bool = False):
    key = text.strip().lower()
    if allow_empty and key == "":
        return None
    if key not in BOOL:
        raise ValueError(f"launch argument {name} must be true or false (got '{text}')")
    return BOOL[key]


def glove_arguments(config: str, deployment_name: str = ""):
    """The launch arguments every glove_ros launch file declares, plus the robot arguments
    of ``deployment_name``."""
    robot = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                   **({"choices": list(a.choices)} if a.choices else {}))
             for a in (deployment(deployment_name).robot_args if deployment_name else ())]
    return robot + [
        DeclareLaunchArgument("params_file", default_value=config_path(config),
                              description="parameter file (sections /**/<node>)"),
        DeclareLaunchArgument("namespace", default_value="", description="robot namespace"),
        DeclareLaunchArgument("use_sim_time", default_value="",
                              description="'' = as in params_file; true/false for every node"),
        DeclareLaunchArgument("log_level", default_value="",
                              description="'' or debug|info|warn|error|fatal"),
        DeclareLaunchArgument("respawn", default_value="false",
                              description="restart a node that exits"),
        DeclareLaunchArgument("respawn_delay", default_value="2.0",
                              description="seconds before a respawn"),
        DeclareLaunchArgument("fleet_robot", default_value="",
                              description="'' = no fleet; else this robot's fleet id"),
        DeclareLaunchArgument("fleet_hub", default_value="",
                              description="the hub's leaf URL, e.g. nats-leaf://server:7422"),
        DeclareLaunchArgument("fleet_port", default_value="4222",
                              description="this robot's leaf server port on 127.0.0.1"),
    ]


def _nodes(context, deployment_name: str, node_params: dict):
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    dep = deployment(deployment_name)
    respawn = _flag(arg("respawn"), "respawn")
    extra = {node: {k: (v.perform(context) if hasattr(v, "perform") else v)
                    for k, v in values.items()} for node, values in node_params.items()}
    nodes = []
    leaf = leaf_launch(arg("fleet_robot"), arg("fleet_hub"), arg("fleet_port"))
    if leaf is not None:
        if "memory" not in {spec.name for spec in dep.nodes}:
            raise ValueError(f"fleet_robot: {dep.name} has no memory node to share")
        extra["memory"] = {**extra.get("memory", {}), **leaf[1]}
        nodes.append(ExecuteProcess(cmd=leaf[0], name="fleet_leaf", output="screen",
                                    respawn=respawn,
                                    respawn_delay=float(arg("respawn_delay"))))
    # what one node's settings imply for another (a trained detector -> the planner knows
    # its classes), beneath everything given explicitly
    linked = linked_params({name: {**file_parameters(arg("params_file"), name,
                                                     arg("namespace")),
                                   **extra.get(name, {})}
                            for name in ("perception", "planner")})
    for spec in launch_nodes(dep, arg("namespace"),
                             _flag(arg("use_sim_time"), "use_sim_time", allow_empty=True),
                             arg("log_level"), exit_on_failure=respawn,
                             robot={a.name: arg(a.name) for a in dep.robot_args}):
        params = [arg("params_file")]
        overrides = {**linked.get(spec["name"], {}), **spec["overrides"],
                     **extra.get(spec["name"], {})}
        if overrides:
            params.append(overrides)
        nodes.append(Node(
            package="glove_ros", executable=spec["executable"], name=spec["name"],
            namespace=spec["namespace"], parameters=params, remappings=spec["remappings"],
            arguments=spec["arguments"], respawn=respawn,
            respawn_delay=float(arg("respawn_delay")), output="screen", emulate_tty=True,
        ))
    return nodes


def glove_nodes(deployment_name: str, node_params: dict | None = None):
    """One launch_ros Node per node of the deployment (inside an OpaqueFunction).

    ``node_params``: {node name: {parameter: value or substitution}} on top of params_file.
    """
    return [OpaqueFunction(function=_nodes, args=[deployment_name, node_params or {}])]
