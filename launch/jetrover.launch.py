"""The physical HiWonder JetRover: perception, memory, verifier and planner.

  ros2 launch glove_ros jetrover.launch.py [params_file:=...] [namespace:=...]

Async GLOVE (replay-relaxed: memory contradicted by the camera is suppressed, nothing is
re-tried by force) and no probing by default. The camera and odometry are remapped to the
JetRover's topics (glove_ros/graph.py); `navigate_to_waypoint` must be served by the
robot's navigation stack (a waypoint-to-pose bridge to Nav2). Start the robot's bringup
(camera, chassis, Nav2) first.
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
        DeclareLaunchArgument("params_file", default_value=config_path("jetrover.yaml"),
                              description="parameter file (one section per node)"),
        DeclareLaunchArgument("namespace", default_value="", description="robot namespace"),
        *glove_nodes("jetrover", LaunchConfiguration("params_file")),
    ])
