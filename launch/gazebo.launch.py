"""Gazebo: the world file as a Gazebo world with the robot, Nav2 on its map, and glove_ros.

  ros2 launch glove_ros gazebo.launch.py [world:=jetrover_maze] [gz_version:=fortress]
  # or with files written beforehand by `glove-ros sdf jetrover_maze -o /tmp/maze`:
  ros2 launch glove_ros gazebo.launch.py world:=jetrover_maze gz_dir:=/tmp/maze

Starts, on simulated time (docs/gazebo.md):
* Gazebo through ros_gz_sim's gz_sim.launch.py (it runs ``ign gazebo`` on Fortress and
  ``gz sim`` on Harmonic) on ``world.sdf``: walls, blocks, the robot at the start waypoint;
* ros_gz_bridge's parameter_bridge with ``bridge.yaml`` (/clock, /cmd_vel, /odom, /tf,
  /scan, /camera/image_raw, /camera/camera_info, /joint_states);
* static transforms from base_footprint to the frames Gazebo stamps the lidar and camera with;
* Nav2 (nav2_bringup's bringup_launch.py: map_server on ``map.yaml``, AMCL starting at the
  start waypoint, the navigation servers) with ``nav2_params.yaml``, unless nav2:=false;
* the glove_ros nodes of config/gazebo.yaml, gz_events included (the world's drift events).

Arguments: world (file or bundled name; every node gets it), gz_dir ('' = write the files
at launch into glove_ros's data folder, else a folder from ``glove-ros sdf -o``),
gz_version ('' = from ROS_DISTRO: humble -> fortress, jazzy/kilted -> harmonic), episode
(the world as this episode begins), nav2 (true/false), headless (true: no Gazebo GUI),
plus launch/glove_common.py's. Run it without a namespace: the bridged topics are absolute.
"""

import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

sys.path.insert(0, os.path.dirname(__file__))
from glove_common import BOOL, config_path, glove_arguments, glove_nodes  # noqa: E402

#: the nodes that read the world file (their ``world`` parameter follows world:=)
WORLD_NODES = ("planner", "plan_gate", "waypoint_nav", "markers", "gz_events")
GZ_FILES = ("world.sdf", "map.yaml", "bridge.yaml", "nav2_params.yaml")


class _IntArgument:
    """A launch argument as an int parameter value (glove_nodes performs ``perform``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context) -> int:
        text = LaunchConfiguration(self.name).perform(context).strip()
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"launch argument {self.name} must be an integer (got '{text}')") \
                from None


def _flag(context, name: str) -> bool:
    text = LaunchConfiguration(name).perform(context).strip().lower()
    if text not in BOOL:
        raise ValueError(f"launch argument {name} must be true or false (got '{text}')")
    return BOOL[text]


def _included(package: str, launch_file: str, arguments: dict):
    source = PythonLaunchDescriptionSource(
        PathJoinSubstitution([FindPackageShare(package), "launch", launch_file]))
    return IncludeLaunchDescription(source, launch_arguments=list(arguments.items()))


def _gazebo(context):
    from glove_ros.core.world.gzexport import write_gazebo_files
    from glove_ros.core.world.gzrobot import gz_flavour, static_transforms
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import data_dir, resolve_world

    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context).strip()

    world = load_world(resolve_world(arg("world")))
    flavour = gz_flavour(arg("gz_version"))
    episode = _IntArgument("episode").perform(context)
    folder = arg("gz_dir")
    if folder:
        missing = [f for f in GZ_FILES if not os.path.isfile(os.path.join(folder, f))]
        if missing:
            raise FileNotFoundError(f"gz_dir {folder} lacks {', '.join(missing)}: write it with "
                                    f"`glove-ros sdf {arg('world')} -o {folder}`")
    else:
        folder = str(data_dir() / "gazebo" / f"{world.name}_{flavour.name}_ep{episode}")
        write_gazebo_files(world, folder, gz_version=flavour.name, episode=episode)

    def path(name: str) -> str:
        return os.path.join(folder, name)

    gz_args = ("-s " if _flag(context, "headless") else "") + "-r " + path("world.sdf")
    actions = [
        _included("ros_gz_sim", "gz_sim.launch.py",
                  {"gz_args": gz_args, "gz_version": flavour.major, "on_exit_shutdown": "true"}),
        Node(package="ros_gz_bridge", executable="parameter_bridge", name="gz_bridge",
             parameters=[{"config_file": path("bridge.yaml"), "use_sim_time": True}],
             output="screen"),
    ]
    for tf in static_transforms(world.camera.height):
        actions.append(Node(package="tf2_ros", executable="static_transform_publisher",
                            name="tf_" + tf.child.replace("/", "_"), arguments=tf.arguments(),
                            parameters=[{"use_sim_time": True}], output="log"))
    if _flag(context, "nav2"):
        actions.append(_included("nav2_bringup", "bringup_launch.py", {
            "map": path("map.yaml"), "params_file": path("nav2_params.yaml"),
            "use_sim_time": "true", "autostart": "true", "slam": "False",
            "use_composition": "False"}))
    return actions


def generate_launch_description():
    world = LaunchConfiguration("world")
    return LaunchDescription([
        *glove_arguments(config_path("gazebo.yaml")),
        DeclareLaunchArgument("world", default_value="jetrover_maze",
                              description="bundled world name or world file path"),
        DeclareLaunchArgument("gz_dir", default_value="",
                              description="'' = generate the Gazebo files at launch; else "
                              "the folder `glove-ros sdf WORLD -o DIR` wrote"),
        DeclareLaunchArgument("gz_version", default_value="",
                              description="fortress | harmonic; '' = from ROS_DISTRO"),
        DeclareLaunchArgument("episode", default_value="0",
                              description="generate the world as this episode begins"),
        DeclareLaunchArgument("nav2", default_value="true",
                              description="start Nav2 (map_server, AMCL, navigation)"),
        DeclareLaunchArgument("headless", default_value="false",
                              description="true: Gazebo server only, no GUI"),
        OpaqueFunction(function=_gazebo),
        *glove_nodes("gazebo", {
            **{node: {"world": world} for node in WORLD_NODES},
            "gz_events": {"world": world, "gz_version": LaunchConfiguration("gz_version"),
                          "episode": _IntArgument("episode")},
        }),
    ])
