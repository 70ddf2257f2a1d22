"""Shared by the glove_ros launch files: launch_ros Nodes from glove_ros.graph.

Not a launch file itself (no generate_launch_description); imported by the *.launch.py
files next to it. Needs the launch / launch_ros packages of a ROS 2 install.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from glove_ros.graph import deployment


def config_path(name: str) -> str:
    """Absolute path of config/<name> in the installed package."""
    return os.path.join(get_package_share_directory("glove_ros"), "config", name)


def glove_nodes(deployment_name: str, params_file=None, extra_params=None, namespace=""):
    """One launch_ros Node per node of the deployment, with its params file and remaps."""
    dep = deployment(deployment_name)
    params = [params_file or config_path(dep.config)]
    if extra_params:
        params.append(extra_params)
    return [
        Node(
            package="glove_ros",
            executable=spec.executable,
            name=spec.name,
            namespace=namespace or LaunchConfiguration("namespace"),
            parameters=params,
            remappings=list(spec.remaps),
            output="screen",
            emulate_tty=True,
        )
        for spec in dep.nodes
    ]
