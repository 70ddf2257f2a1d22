"""Gazebo (gz sim): the world generated from a glove_ros world file, bridged to ROS.

  glove-ros sdf worlds/jetrover_maze.yaml -o /tmp/jetrover_maze.sdf
  ros2 launch glove_ros gazebo.launch.py sdf:=/tmp/jetrover_maze.sdf

Starts gz sim on the SDF, ros_gz_bridge for the camera, odometry, cmd_vel and clock, and
the glove_ros nodes of config/gazebo.yaml, waypoint_nav included. The SDF holds the world
only (walls, coloured blocks, waypoint markers). You bring, started separately: a robot
model spawned at the world's start waypoint (its pose is in a comment at the top of the
SDF) whose plugins publish gz topics /camera/image_raw and /odom and take /cmd_vel (a
differential drive and a camera), and Nav2 with a map of the world and AMCL, serving
navigate_to_pose and amcl_pose. Arguments: sdf:=FILE plus launch/glove_common.py's.
"""

import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import config_path, glove_arguments, glove_nodes  # noqa: E402


def generate_launch_description():
    bridge = Node(
        package="ros_gz_bridge",
        executable="parameter_bridge",
        arguments=[
            "/camera/image_raw@sensor_msgs/msg/Image[gz.msgs.Image",
            "/odom@nav_msgs/msg/Odometry[gz.msgs.Odometry",
            "/cmd_vel@geometry_msgs/msg/Twist]gz.msgs.Twist",
            "/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock",
        ],
        output="screen",
    )
    return LaunchDescription([
        DeclareLaunchArgument("sdf", description="SDF world written by `glove-ros sdf`"),
        *glove_arguments(config_path("gazebo.yaml")),
        ExecuteProcess(cmd=["gz", "sim", "-r", LaunchConfiguration("sdf")], output="screen"),
        bridge,
        *glove_nodes("gazebo"),
    ])
