"""Gazebo flavours (Fortress / Harmonic) and the robot model spawned into the generated world.

Humble pairs with Gazebo Fortress (``ign gazebo``, systems ``ignition-gazebo-*-system``,
messages ``ignition.msgs.*``); Jazzy and Kilted with Harmonic (``gz sim``,
``gz-sim-*-system``, ``gz.msgs.*``). :class:`GzFlavour` holds what differs;
:func:`gz_flavour` picks one by name or from ``ROS_DISTRO``.

:class:`RobotModel` is a JetRover-sized differential-drive base (the real JetRover has
mecanum wheels; a diff drive is what Nav2's defaults and Gazebo's DiffDrive system expect):
a chassis, two driven wheels, two frictionless casters, a forward camera at the world file's
camera height and field of view, and a 2-D ``gpu_lidar`` below the wall tops.
:func:`robot_model_sdf` writes it as one ``<model>`` with the DiffDrive system (odometry
on ``odom_frame -> base_frame``, TF on its own gz topic) and the JointStatePublisher.

Frames. The model's own frame is ``base_footprint`` (on the floor between the wheels).
Gazebo stamps sensor data with the sensor's scoped name, ``model::link::sensor``, which
ros_gz_bridge turns into ``model/link/sensor`` (a ``<gz_frame_id>`` element would rename it,
but libsdformat reads it as an unknown element, so it is not used): the static transforms
of :func:`static_transforms` put those frames on the robot for TF.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

__all__ = ["FLAVOURS", "ROBOT", "GzFlavour", "RobotModel", "StaticTransform", "gz_flavour",
           "robot_model_sdf", "robot_sdf", "static_transforms", "world_plugins"]


@dataclass(frozen=True)
class GzFlavour:
    """What differs between Gazebo Fortress and Harmonic for the files generated here."""

    name: str  # fortress | harmonic
    cli: str  # the command line tool: ign | gz
    msgs: str  # protobuf package of gz-transport messages: ignition.msgs | gz.msgs
    system_file: str  # system plugin file prefix
    system_class: str  # system plugin class prefix
    major: str  # gz_version argument of ros_gz_sim's gz_sim.launch.py

    def msg(self, name: str) -> str:
        """Full gz message type name, e.g. ``gz.msgs.Pose``."""
        return f"{self.msgs}.{name}"

    def plugin(self, system: str, cls: str, inner: str = "") -> str:
        """One ``<plugin>`` element of the system ``system`` (e.g. ``diff-drive``)."""
        return (f"<plugin filename={quoteattr(f'{self.system_file}{system}-system')} "
                f"name={quoteattr(self.system_class + cls)}>{inner}</plugin>")


FLAVOURS: dict[str, GzFlavour] = {
    "fortress": GzFlavour("fortress", "ign", "ignition.msgs", "ignition-gazebo-",
                          "ignition::gazebo::systems::", "6"),
    "harmonic": GzFlavour("harmonic", "gz", "gz.msgs", "gz-sim-", "gz::sim::systems::", "8"),
}
#: ROS 2 distribution -> the Gazebo release it is paired with
DISTRO_GAZEBO = {"humble": "fortress", "iron": "fortress", "jazzy": "harmonic",
                 "kilted": "harmonic", "rolling": "harmonic"}


def gz_flavour(name: str | None = None, ros_distro: str | None = None) -> GzFlavour:
    """The flavour called ``name`` (fortress | harmonic); "" or None: the one paired with
    ``ros_distro`` (default ``$ROS_DISTRO``; fortress, Humble's, when that is unset)."""
    key = (name or "").strip().lower()
    if not key:
        distro = (ros_distro if ros_distro is not None
                  else os.environ.get("ROS_DISTRO", "")).strip().lower()
        if not distro:
            return FLAVOURS["fortress"]
        if distro not in DISTRO_GAZEBO:
            raise ValueError(f"no Gazebo release known for ROS_DISTRO '{distro}' (known: "
                             f"{', '.join(DISTRO_GAZEBO)}); pass gz_version fortress|harmonic")
        key = DISTRO_GAZEBO[distro]
    if key not in FLAVOURS:
        raise ValueError(f"gz_version must be one of {', '.join(FLAVOURS)} (got '{name}')")
    return FLAVOURS[key]


def world_plugins(flavour: GzFlavour) -> str:
    """The world's system plugins: physics, entity services (create, remove, set_pose),
    scene for the GUI, and rendering sensors (camera, gpu_lidar) with ogre2."""
    return "".join((
        flavour.plugin("physics", "Physics"),
        flavour.plugin("user-commands", "UserCommands"),
        flavour.plugin("scene-broadcaster", "SceneBroadcaster"),
        flavour.plugin("sensors", "Sensors", "<render_engine>ogre2</render_engine>"),
    ))


@dataclass(frozen=True)
class RobotModel:
    """Dimensions, frames and gz topics of the simulated robot (metres, kilograms)."""

    name: str = "jetrover"
    base_frame: str = "base_footprint"
    odom_frame: str = "odom"
    chassis: tuple[float, float, float] = (0.34, 0.20, 0.09)  # length, width, height
    chassis_clearance: float = 0.035  # floor to chassis bottom
    chassis_mass: float = 3.0
    wheel_radius: float = 0.048
    wheel_width: float = 0.04
    wheel_separation: float = 0.25  # between the wheel centres
    wheel_mass: float = 0.2
    caster_radius: float = 0.024
    caster_x: float = 0.13  # casters at +-caster_x
    lidar_xyz: tuple[float, float, float] = (0.0, 0.0, 0.165)  # from base_footprint
    lidar_samples: int = 360
    lidar_range: tuple[float, float] = (0.12, 8.0)
    lidar_rate: float = 10.0
    camera_x: float = 0.16  # forward of base_footprint; height and fov from the world file
    camera_size: tuple[int, int] = (640, 480)
    camera_rate: float = 15.0
    max_speed: float = 0.5  # m/s, the DiffDrive limit
    max_turn: float = 1.5  # rad/s
    scan_topic: str = "/scan"  # gz topic of the LaserScan (bridged to the same ROS name)
    image_topic: str = "/camera/image_raw"  # gz topic of the camera image (same in ROS)

    @property
    def cmd_vel_topic(self) -> str:
        """gz topic the DiffDrive system takes velocity commands on."""
        return f"/model/{self.name}/cmd_vel"

    @property
    def odom_topic(self) -> str:
        """gz topic of the DiffDrive odometry."""
        return f"/model/{self.name}/odometry"

    @property
    def tf_topic(self) -> str:
        """gz topic of the DiffDrive ``odom -> base_footprint`` transform."""
        return f"/model/{self.name}/tf"

    @property
    def camera_info_topic(self) -> str:
        """gz-sensors publishes camera info beside the image: ``<dir of image>/camera_info``."""
        return self.image_topic.rsplit("/", 1)[0] + "/camera_info"

    def joint_state_topic(self, world_name: str) -> str:
        """The JointStatePublisher's default gz topic."""
        return f"/world/{world_name}/model/{self.name}/joint_state"

    def sensor_frame(self, sensor: str) -> str:
        """ROS frame id of a sensor on the chassis: its gz scoped name with ``/``."""
        return f"{self.name}/base_link/{sensor}"

    @property
    def axle_height(self) -> float:
        """Height of the wheel axles (and of the ``base_link`` frame) above the floor."""
        return self.wheel_radius


ROBOT = RobotModel()


@dataclass(frozen=True)
class StaticTransform:
    """A fixed transform ``parent -> child`` (x, y, z in metres; roll, pitch, yaw)."""

    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def arguments(self) -> list[str]:
        """Command-line arguments of tf2_ros ``static_transform_publisher`` (Humble on)."""
        names = ("--x", "--y", "--z", "--roll", "--pitch", "--yaw")
        out: list[str] = []
        for flag, v in zip(names, (*self.xyz, *self.rpy), strict=True):
            out += [flag, _f(v)]
        return out + ["--frame-id", self.parent, "--child-frame-id", self.child]


def static_transforms(camera_height: float, robot: RobotModel = ROBOT) -> list[StaticTransform]:
    """``base_footprint`` to the chassis and to the frames Gazebo stamps sensor data with."""
    lx, ly, lz = robot.lidar_xyz
    return [
        StaticTransform(robot.base_frame, "base_link", (0.0, 0.0, robot.axle_height)),
        StaticTransform(robot.base_frame, robot.sensor_frame("lidar"), (lx, ly, lz)),
        StaticTransform(robot.base_frame, robot.sensor_frame("camera"),
                        (robot.camera_x, 0.0, camera_height)),
    ]


# --------------------------------------------------------------------------- SDF


def _f(x: float) -> str:
    s = f"{x:.5f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _inertial(mass: float, ixx: float, iyy: float, izz: float) -> str:
    return (f"<inertial><mass>{_f(mass)}</mass><inertia><ixx>{ixx:.4e}</ixx><ixy>0</ixy>"
            f"<ixz>0</ixz><iyy>{iyy:.4e}</iyy><iyz>0</iyz><izz>{izz:.4e}</izz></inertia>"
            "</inertial>")


def _material(rgba: str) -> str:
    return f"<material><ambient>{rgba}</ambient><diffuse>{rgba}</diffuse></material>"


def _wheel(robot: RobotModel, side: str, y: float) -> str:
    r, w, m = robot.wheel_radius, robot.wheel_width, robot.wheel_mass
    i_r = m * (3 * r * r + w * w) / 12
    geom = (f"<geometry><cylinder><radius>{_f(r)}</radius><length>{_f(w)}</length>"
            "</cylinder></geometry>")
    return (f'<link name="{side}_wheel"><pose>0 {_f(y)} {_f(r)} {_f(-math.pi / 2)} 0 0</pose>'
            f"{_inertial(m, i_r, i_r, m * r * r / 2)}"
            f'<collision name="collision">{geom}<surface><friction><ode><mu>1.0</mu>'
            "<mu2>1.0</mu2></ode></friction></surface></collision>"
            f'<visual name="visual">{geom}{_material("0.1 0.1 0.1 1")}</visual></link>'
            f'<joint name="{side}_wheel_joint" type="revolute"><parent>base_link</parent>'
            f"<child>{side}_wheel</child><axis><xyz>0 0 1</xyz><limit><lower>-1e16</lower>"
            "<upper>1e16</upper></limit></axis></joint>")


def _lidar(robot: RobotModel) -> str:
    lx, ly, lz = robot.lidar_xyz
    lo, hi = robot.lidar_range
    return (f'<sensor name="lidar" type="gpu_lidar"><pose>{_f(lx)} {_f(ly)} '
            f"{_f(lz - robot.axle_height)} 0 0 0</pose><always_on>true</always_on>"
            f"<update_rate>{_f(robot.lidar_rate)}</update_rate>"
            f"<topic>{robot.scan_topic}</topic><lidar><scan><horizontal>"
            f"<samples>{robot.lidar_samples}</samples><resolution>1</resolution>"
            f"<min_angle>{_f(-math.pi)}</min_angle><max_angle>{_f(math.pi)}</max_angle>"
            "</horizontal><vertical><samples>1</samples><resolution>1</resolution>"
            "<min_angle>0</min_angle><max_angle>0</max_angle></vertical></scan>"
            f"<range><min>{_f(lo)}</min><max>{_f(hi)}</max><resolution>0.01</resolution>"
            "</range><noise><type>gaussian</type><mean>0</mean><stddev>0.01</stddev></noise>"
            "</lidar></sensor>")


def _camera(robot: RobotModel, height: float, hfov_deg: float) -> str:
    w, h = robot.camera_size
    return (f'<sensor name="camera" type="camera"><pose>{_f(robot.camera_x)} 0 '
            f"{_f(height - robot.axle_height)} 0 0 0</pose><always_on>true</always_on>"
            f"<update_rate>{_f(robot.camera_rate)}</update_rate>"
            f"<topic>{robot.image_topic}</topic><camera>"
            f"<horizontal_fov>{_f(math.radians(hfov_deg))}</horizontal_fov>"
            f"<image><width>{w}</width><height>{h}</height><format>R8G8B8</format></image>"
            "<clip><near>0.05</near><far>20</far></clip></camera></sensor>")


def robot_model_sdf(flavour: GzFlavour, pose: tuple[float, float, float], *,
                    camera_height: float = 0.2, camera_hfov_deg: float = 70.0,
                    robot: RobotModel = ROBOT) -> str:
    """The robot as one ``<model>`` element at ``pose`` (x, y, yaw on the floor)."""
    if not 0.0 < camera_hfov_deg < 180.0:
        raise ValueError(f"camera_hfov_deg must be in (0, 180), got {camera_hfov_deg}")
    if not robot.chassis_clearance < camera_height < 2.0:
        raise ValueError(f"camera_height must be above the chassis bottom and below 2 m, "
                         f"got {camera_height}")
    x, y, yaw = pose
    length, width, height = robot.chassis
    m = robot.chassis_mass
    r = robot.axle_height
    box_z = robot.chassis_clearance + height / 2 - r  # chassis centre above base_link
    box = (f"<geometry><box><size>{_f(length)} {_f(width)} {_f(height)}</size></box>"
           "</geometry>")
    caster_geom = (f"<geometry><sphere><radius>{_f(robot.caster_radius)}</radius></sphere>"
                   "</geometry>")
    casters = "".join(
        f'<collision name="caster_{name}"><pose>{_f(cx)} 0 {_f(robot.caster_radius - r)} 0 0 0'
        f"</pose>{caster_geom}<surface><friction><ode><mu>0</mu><mu2>0</mu2></ode>"
        "</friction></surface></collision>"
        f'<visual name="caster_{name}_visual"><pose>{_f(cx)} 0 {_f(robot.caster_radius - r)}'
        f" 0 0 0</pose>{caster_geom}{_material('0.3 0.3 0.3 1')}</visual>"
        for name, cx in (("front", robot.caster_x), ("back", -robot.caster_x)))
    lx, ly, lz = robot.lidar_xyz
    lidar_body = (f'<visual name="lidar_visual"><pose>{_f(lx)} {_f(ly)} {_f(lz - r - 0.02)} '
                  "0 0 0</pose><geometry><cylinder><radius>0.035</radius><length>0.03</length>"
                  f"</cylinder></geometry>{_material('0.15 0.15 0.15 1')}</visual>")
    camera_body = (f'<visual name="camera_visual"><pose>{_f(robot.camera_x - 0.015)} 0 '
                   f"{_f(camera_height - r)} 0 0 0</pose><geometry><box><size>0.03 0.08 0.03"
                   f"</size></box></geometry>{_material('0.15 0.15 0.15 1')}</visual>")
    diff_drive = flavour.plugin("diff-drive", "DiffDrive", (
        "<left_joint>left_wheel_joint</left_joint><right_joint>right_wheel_joint</right_joint>"
        f"<wheel_separation>{_f(robot.wheel_separation)}</wheel_separation>"
        f"<wheel_radius>{_f(robot.wheel_radius)}</wheel_radius>"
        "<odom_publish_frequency>30</odom_publish_frequency>"
        f"<topic>{robot.cmd_vel_topic}</topic><odom_topic>{robot.odom_topic}</odom_topic>"
        f"<tf_topic>{robot.tf_topic}</tf_topic><frame_id>{robot.odom_frame}</frame_id>"
        f"<child_frame_id>{robot.base_frame}</child_frame_id>"
        f"<max_linear_velocity>{_f(robot.max_speed)}</max_linear_velocity>"
        f"<min_linear_velocity>{_f(-robot.max_speed)}</min_linear_velocity>"
        f"<max_angular_velocity>{_f(robot.max_turn)}</max_angular_velocity>"
        f"<min_angular_velocity>{_f(-robot.max_turn)}</min_angular_velocity>"
        "<max_linear_acceleration>1.0</max_linear_acceleration>"
        "<min_linear_acceleration>-1.0</min_linear_acceleration>"
        "<max_angular_acceleration>3.0</max_angular_acceleration>"
        "<min_angular_acceleration>-3.0</min_angular_acceleration>"))
    return (f"<model name={quoteattr(robot.name)}>"
            f"<pose>{_f(x)} {_f(y)} 0 0 0 {_f(yaw)}</pose>"
            f'<link name="base_link"><pose>0 0 {_f(r)} 0 0 0</pose>'
            f"<inertial><pose>0 0 {_f(box_z)} 0 0 0</pose><mass>{_f(m)}</mass><inertia>"
            f"<ixx>{m * (width ** 2 + height ** 2) / 12:.4e}</ixx><ixy>0</ixy><ixz>0</ixz>"
            f"<iyy>{m * (length ** 2 + height ** 2) / 12:.4e}</iyy><iyz>0</iyz>"
            f"<izz>{m * (length ** 2 + width ** 2) / 12:.4e}</izz></inertia></inertial>"
            f'<collision name="chassis"><pose>0 0 {_f(box_z)} 0 0 0</pose>{box}</collision>'
            f'<visual name="chassis_visual"><pose>0 0 {_f(box_z)} 0 0 0</pose>{box}'
            f"{_material('0.2 0.35 0.6 1')}</visual>{casters}{lidar_body}{camera_body}"
            f"{_lidar(robot)}{_camera(robot, camera_height, camera_hfov_deg)}</link>"
            f"{_wheel(robot, 'left', robot.wheel_separation / 2)}"
            f"{_wheel(robot, 'right', -robot.wheel_separation / 2)}"
            f"{diff_drive}{flavour.plugin('joint-state-publisher', 'JointStatePublisher')}"
            "</model>")


def robot_sdf(flavour: GzFlavour, *, camera_height: float = 0.2, camera_hfov_deg: float = 70.0,
              robot: RobotModel = ROBOT) -> str:
    """The robot alone as an SDF file at the origin (``ros_gz_sim create -file``; place it
    with ``-x -y -Y``)."""
    from glove_ros.core.world.sdf import SDF_VERSION

    model = robot_model_sdf(flavour, (0.0, 0.0, 0.0), camera_height=camera_height,
                            camera_hfov_deg=camera_hfov_deg, robot=robot)
    return f'<?xml version="1.0" ?>\n<sdf version="{SDF_VERSION}">{model}</sdf>\n'
