"""Built-in simulator: simulator, perception, memory, verifier and planner nodes.

  ros2 launch glove_ros sim.launch.py [world:=small] [params_file:=...] [namespace:=...]

Without the ROS 2 launch tooling the same graph starts with `glove-ros launch sim`.
"""

import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import config_path, glove_nodes  # noqa: E402


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=config_path("sim.yaml"),
                              description="parameter file (one section per node)"),
        DeclareLaunchArgument("namespace", default_value="", description="robot namespace"),
        DeclareLaunchArgument("world", default_value="jetrover_maze",
                              description="bundled world name or world file path"),
        *glove_nodes("sim", LaunchConfiguration("params_file"),
                     {"world": LaunchConfiguration("world")}),
    ])
