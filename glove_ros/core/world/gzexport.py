"""Everything a Gazebo run of a world file needs, written into one folder.

:func:`write_gazebo_files` (``glove-ros sdf WORLD -o DIR``, and gazebo.launch.py at launch):

=================  ==========================================================================
``world.sdf``      the world with its system plugins and the robot at the start waypoint
                   (:mod:`glove_ros.core.world.sdf`)
``robot.sdf``      the robot alone, to spawn into another world (``ros_gz_sim create``)
``map.pgm``        occupancy image of the walls for map_server / AMCL
``map.yaml``       its map_server metadata (:mod:`glove_ros.core.world.gzmap`)
``bridge.yaml``    ros_gz_bridge ``config_file`` (:mod:`glove_ros.core.world.gzbridge`)
``nav2_params.yaml``  ``config/nav2_gazebo.yaml`` with AMCL's initial pose at the start
                   waypoint, the map, and the plugin names of the ROS distribution that goes
                   with the Gazebo flavour (Humble for Fortress)
=================  ==========================================================================
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glove_ros.core.world.gzbridge import bridge_yaml
from glove_ros.core.world.gzmap import occupancy_map
from glove_ros.core.world.gzrobot import ROBOT, GzFlavour, RobotModel, gz_flavour, robot_sdf
from glove_ros.core.world.sdf import world_to_sdf
from glove_ros.core.world.worldfile import World

__all__ = ["GzFiles", "nav2_params", "write_gazebo_files"]

#: Nav2 plugin names that Humble registers with "/" (Iron and newer: "::")
_HUMBLE_PLUGIN_NAMES = {
    "nav2_navfn_planner::NavfnPlanner": "nav2_navfn_planner/NavfnPlanner",
    "nav2_behaviors::Spin": "nav2_behaviors/Spin",
    "nav2_behaviors::BackUp": "nav2_behaviors/BackUp",
    "nav2_behaviors::DriveOnHeading": "nav2_behaviors/DriveOnHeading",
    "nav2_behaviors::Wait": "nav2_behaviors/Wait",
}


@dataclass(frozen=True)
class GzFiles:
    """The files :func:`write_gazebo_files` wrote."""

    directory: Path
    world_sdf: Path
    robot_sdf: Path
    map_pgm: Path
    map_yaml: Path
    bridge_yaml: Path
    nav2_params: Path
    flavour: str

    def paths(self) -> list[Path]:
        """Every written file."""
        return [self.world_sdf, self.robot_sdf, self.map_pgm, self.map_yaml, self.bridge_yaml,
                self.nav2_params]


def _template() -> dict[str, Any]:
    import yaml

    from glove_ros.paths import resolve_config

    return yaml.safe_load(resolve_config("nav2_gazebo").read_text())


def _rename_plugins(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _rename_plugins(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename_plugins(v) for v in node]
    if isinstance(node, str):
        return _HUMBLE_PLUGIN_NAMES.get(node, node)
    return node


def nav2_params(world: World, flavour: GzFlavour, *, map_yaml: str = "",
                robot: RobotModel = ROBOT, template: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """Nav2's parameters for ``world``: the template (``config/nav2_gazebo.yaml``) with AMCL's
    initial pose at the start waypoint and ``map_yaml``; for Fortress, Humble's plugin names
    and behavior_server keys. ValueError if the template's frames are not the robot's."""
    params = copy.deepcopy(template if template is not None else _template())
    amcl = params["amcl"]["ros__parameters"]
    checks = {"amcl.base_frame_id": (amcl.get("base_frame_id"), robot.base_frame),
              "amcl.odom_frame_id": (amcl.get("odom_frame_id"), robot.odom_frame)}
    for name, (have, want) in checks.items():
        if have != want:
            raise ValueError(f"nav2 template: {name} is '{have}', the robot's frame is '{want}'")
    start = world.waypoint(world.start_waypoint)
    amcl["initial_pose"] = {"x": float(start.x), "y": float(start.y), "z": 0.0,
                            "yaw": float(start.yaw)}
    amcl["set_initial_pose"] = True
    if map_yaml:
        params["map_server"]["ros__parameters"]["yaml_filename"] = str(map_yaml)
    if flavour.name == "fortress":  # Humble
        params = _rename_plugins(params)
        behavior = params["behavior_server"]["ros__parameters"]
        behavior["costmap_topic"] = behavior["local_costmap_topic"]
        behavior["footprint_topic"] = behavior["local_footprint_topic"]
        behavior["global_frame"] = behavior["local_frame"]  # Humble's behaviours run in odom
    return params


def write_gazebo_files(world: World, directory: str | Path, *, gz_version: str = "",
                       episode: int = 0, resolution: float = 0.05,
                       cmd_vel_topic: str = "/cmd_vel") -> GzFiles:
    """Write the files of the module docstring into ``directory`` (created if missing).

    ``gz_version`` fortress | harmonic ("" = from ``$ROS_DISTRO``); ``episode``: the world
    as that episode begins (the events due by then applied).
    """
    import yaml

    flavour = gz_flavour(gz_version)
    folder = Path(directory).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    world_file = folder / "world.sdf"
    world_file.write_text(world_to_sdf(world, episode=episode, gz_version=flavour.name))
    robot_file = folder / "robot.sdf"
    robot_file.write_text(robot_sdf(flavour, camera_height=world.camera.height,
                                    camera_hfov_deg=world.camera.hfov_deg))
    pgm, meta = occupancy_map(world, resolution=resolution).write(folder, "map")
    bridge = folder / "bridge.yaml"
    bridge.write_text(bridge_yaml(world.name, flavour, cmd_vel_topic=cmd_vel_topic))
    nav2 = folder / "nav2_params.yaml"
    nav2.write_text(
        f"# Nav2 parameters for world '{world.name}' on {flavour.name}, generated by glove_ros "
        "from config/nav2_gazebo.yaml\n"
        + yaml.safe_dump(nav2_params(world, flavour, map_yaml=str(meta)), sort_keys=False))
    return GzFiles(folder, world_file, robot_file, pgm, meta, bridge, nav2, flavour.name)
