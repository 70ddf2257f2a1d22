"""The physical HiWonder JetRover: perception, memory, verifier and planner.

  ros2 launch glove_ros jetrover.launch.py [namespace:=robot1] [respawn:=true] ...

Async GLOVE (replay-relaxed: memory contradicted by the camera is suppressed, nothing is
re-tried by force) and no probing by default. The camera is remapped to the JetRover's
topic (glove_ros/graph.py, relative: it follows the namespace); `navigate_to_waypoint` is
served by the waypoint_nav node over Nav2's navigate_to_pose action, with the map pose
from amcl_pose. Start the robot's bringup (camera, chassis, Nav2 with AMCL) first.

Arguments (launch/glove_common.py): params_file, namespace, use_sim_time, log_level,
respawn, respawn_delay, fleet_robot, fleet_hub, fleet_port, and the robot arguments
(glove_ros/graph.py JETROVER_ARGS): site, camera_topic (Angstrong units:
camera_topic:=/ascamera/camera_publisher/rgb0/image), battery_topic, battery_type,
dock_waypoint, pose_source. `ros2 launch glove_ros jetrover.launch.py --show-args` lists them.
"""

import os
import sys

from launch import LaunchDescription

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import config_path, glove_arguments, glove_nodes  # noqa: E402


def generate_launch_description():
    return LaunchDescription([
        *glove_arguments(config_path("jetrover.yaml"), "jetrover"),
        *glove_nodes("jetrover"),
    ])
