"""Built-in simulator: simulator, perception, memory, verifier and planner nodes.

  ros2 launch glove_ros sim.launch.py [world:=small] [namespace:=robot1] [respawn:=true] ...

Without the ROS 2 launch tooling the same graph starts with `glove-ros launch sim`.

Arguments (launch/glove_common.py): params_file, namespace, use_sim_time, log_level,
respawn, respawn_delay, fleet_robot, fleet_hub, fleet_port.
"""

import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import config_path, glove_arguments, glove_nodes  # noqa: E402


def generate_launch_description():
    world = LaunchConfiguration("world")
    return LaunchDescription([
        *glove_arguments(config_path("sim.yaml")),
        DeclareLaunchArgument("world", default_value="jetrover_maze",
                              description="bundled world name or world file path"),
        *glove_nodes("sim", {node: {"world": world}
                             for node in ("simulator", "planner", "plan_gate", "markers")}),
    ])
