"""Replay a recorded bag through perception, observer and memory (drift tests offline).

  ros2 launch glove_ros bag_replay.launch.py
  ros2 bag play BAG --clock        (or here: glove-ros bag replay BAG --clock)

Uses simulated time from the bag's /clock (config/bag_replay.yaml).

Arguments (launch/glove_common.py): params_file, namespace, use_sim_time, log_level,
respawn, respawn_delay, fleet_robot, fleet_hub, fleet_port.
"""

import os
import sys

from launch import LaunchDescription

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import config_path, glove_arguments, glove_nodes  # noqa: E402


def generate_launch_description():
    return LaunchDescription([
        *glove_arguments(config_path("bag_replay.yaml")),
        *glove_nodes("bag_replay"),
    ])
