"""Replay a recorded bag through perception, observer and memory (drift tests offline).

  ros2 launch glove_ros bag_replay.launch.py
  ros2 bag play BAG --clock        (or here: glove-ros bag replay BAG --clock)

Uses simulated time from the bag's /clock (config/bag_replay.yaml).
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
        DeclareLaunchArgument("params_file", default_value=config_path("bag_replay.yaml"),
                              description="parameter file (one section per node)"),
        DeclareLaunchArgument("namespace", default_value="", description="robot namespace"),
        *glove_nodes("bag_replay", LaunchConfiguration("params_file")),
    ])
