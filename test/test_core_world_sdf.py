"""Gazebo SDF generation, checked as XML and by libsdformat itself (sdf::Root::Load)."""

from __future__ import annotations

import math
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from glove_ros.core.world.gzrobot import FLAVOURS, ROBOT, gz_flavour, robot_sdf
from glove_ros.core.world.sdf import (
    SDF_VERSION,
    barrier_sdf,
    block_sdf,
    maze_walls,
    obstacle_sdf,
    world_to_sdf,
)
from glove_ros.core.world.sim import Obstacle
from glove_ros.core.world.worldfile import World, load_world

BUNDLED = ("jetrover_maze", "small", "nuisance_only", "corridor_blocked")
VALIDATOR_SRC = Path(__file__).with_name("sdf_validate.cpp")


def models(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    assert root.tag == "sdf" and root.get("version") == SDF_VERSION
    world = root.find("world")
    names = [m.get("name") for m in world.findall("model")]
    assert len(names) == len(set(names)), "model names must be unique"
    return {m.get("name"): m for m in world.findall("model")}


def model_xy(model: ET.Element) -> tuple[float, float]:
    x, y, *_ = (float(v) for v in model.find("pose").text.split())
    return x, y


@pytest.mark.parametrize("name", BUNDLED)
def test_world_sdf_has_every_part(name):
    w = load_world(name)
    m = models(world_to_sdf(w))
    assert {"ground_plane", "maze_walls"} <= set(m)
    for b in w.blocks:
        block = m[f"block_{b.id}"]
        assert block.find("static").text == "false"
        assert block.find("link/inertial/mass") is not None
    for wp in w.waypoints:
        marker = m[f"waypoint_{wp.id}"]
        assert marker.find("link/collision") is None  # visual only
        assert marker.find("link/visual") is not None
    walls = m["maze_walls"].findall("link/collision")
    assert len(walls) >= 4  # at least the boundary


def test_swap_moves_the_block_models():
    w = load_world("jetrover_maze")
    before = models(world_to_sdf(w, episode=0))
    after = models(world_to_sdf(w, episode=20))
    office = w.waypoint("office")
    kitchen = w.waypoint("kitchen")

    def near(model, wp):
        return math.dist(model_xy(model), (wp.x, wp.y)) < 1.0

    assert near(before["block_red_block"], kitchen) and near(before["block_blue_block"], office)
    assert near(after["block_red_block"], office) and near(after["block_blue_block"], kitchen)


def test_blocked_corridor_gets_a_barrier_only_while_blocked():
    w = load_world("corridor_blocked")
    assert "barrier_goal_hall" not in models(world_to_sdf(w, episode=0))
    blocked = models(world_to_sdf(w, episode=5))
    assert "barrier_goal_hall" in blocked
    # the model sits at the origin; its wall is across the corridor's midpoint
    pose = blocked["barrier_goal_hall"].find("link/collision/pose").text.split()
    assert math.dist((float(pose[0]), float(pose[1])), (1.0, 1.5)) < 1e-6  # midpoint
    assert "barrier_goal_hall" not in models(world_to_sdf(w, episode=15))


def test_obstacle_nuisance_appears_from_its_episode():
    w = load_world("nuisance_only")
    assert "obstacle_crate_1" not in models(world_to_sdf(w, episode=0))
    m = models(world_to_sdf(w, episode=6))
    assert m["obstacle_crate_1"].find("static").text == "true"


def test_absent_edge_gets_a_wall_and_open_corridors_stay_open():
    w = load_world("jetrover_maze")
    walls = maze_walls(w)
    # hall (1.5, 1.5) and lab (1.5, 3.0) are neighbours with no corridor: a wall between
    between = [s for s in walls
               if math.dist(((s[0] + s[2]) / 2, (s[1] + s[3]) / 2), (1.5, 2.25)) < 1e-6]
    assert len(between) == 1
    assert len(maze_walls(w, absent_edge_walls=False)) == 4
    # no wall crosses an open corridor (checked on the corridor's middle 80 %)
    from glove_ros.core.world.sdf import _segments_cross

    for e in w.edges:
        a, b = w.waypoint(e.a), w.waypoint(e.b)
        p = (a.x + 0.1 * (b.x - a.x), a.y + 0.1 * (b.y - a.y))
        q = (a.x + 0.9 * (b.x - a.x), a.y + 0.9 * (b.y - a.y))
        for s in walls:
            assert not _segments_cross(p, q, (s[0], s[1]), (s[2], s[3])), (e, s)


def test_boundary_encloses_blocks_and_waypoints():
    w = load_world("jetrover_maze")
    xs = [c for s in maze_walls(w)[:4] for c in (s[0], s[2])]
    ys = [c for s in maze_walls(w)[:4] for c in (s[1], s[3])]
    from glove_ros.core.world.sim import WorldState

    st = WorldState(w)
    for b in w.blocks:
        x, y = st.block_position(b.id)
        assert min(xs) < x < max(xs) and min(ys) < y < max(ys)


def test_errors():
    w = load_world("small")
    with pytest.raises(ValueError, match="episode must be >= 0"):
        world_to_sdf(w, episode=-1)
    with pytest.raises(ValueError, match="no edge room_a-room_b"):
        barrier_sdf(w, "room_a", "room_b")
    with pytest.raises(KeyError):
        block_sdf(w, "green_block")


# ---------------------------------------------------------------- Gazebo plugins, robot

SYSTEMS = {"physics": "Physics", "user-commands": "UserCommands",
           "scene-broadcaster": "SceneBroadcaster", "sensors": "Sensors"}
PREFIX = {"fortress": ("ignition-gazebo-", "ignition::gazebo::systems::"),
          "harmonic": ("gz-sim-", "gz::sim::systems::")}


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_world_has_the_system_plugins_of_its_gazebo_release(flavour):
    world = ET.fromstring(world_to_sdf(load_world("jetrover_maze"), gz_version=flavour))
    file_prefix, class_prefix = PREFIX[flavour]
    plugins = {p.get("filename"): p for p in world.find("world").findall("plugin")}
    assert set(plugins) == {f"{file_prefix}{s}-system" for s in SYSTEMS}
    for system, cls in SYSTEMS.items():
        assert plugins[f"{file_prefix}{system}-system"].get("name") == class_prefix + cls
    assert plugins[f"{file_prefix}sensors-system"].findtext("render_engine") == "ogre2"
    other = "gz-sim-" if flavour == "fortress" else "ignition-gazebo-"
    assert other not in world_to_sdf(load_world("jetrover_maze"), gz_version=flavour)


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_robot_stands_at_the_start_waypoint_with_drive_camera_and_lidar(flavour):
    w = load_world("jetrover_maze")
    robot = models(world_to_sdf(w, gz_version=flavour))[ROBOT.name]
    start = w.waypoint(w.start_waypoint)
    x, y, z, _r, _p, yaw = (float(v) for v in robot.find("pose").text.split())
    assert (x, y, z) == (start.x, start.y, 0.0) and yaw == pytest.approx(start.yaw, abs=1e-4)
    assert {link.get("name") for link in robot.findall("link")} == \
        {"base_link", "left_wheel", "right_wheel"}
    joints = {j.get("name"): j for j in robot.findall("joint")}
    assert {j.get("type") for j in joints.values()} == {"revolute"}
    sensors = {s.get("name"): s for s in robot.iter("sensor")}
    assert sensors["lidar"].get("type") == "gpu_lidar"
    assert sensors["lidar"].findtext("topic") == "/scan"
    assert sensors["camera"].get("type") == "camera"
    assert sensors["camera"].findtext("topic") == "/camera/image_raw"
    fov = float(sensors["camera"].findtext("camera/horizontal_fov"))
    assert fov == pytest.approx(math.radians(w.camera.hfov_deg), abs=1e-4)
    # the lidar scans below the wall tops (0.3 m) and above the chassis
    lidar_z = ROBOT.axle_height + float(sensors["lidar"].find("pose").text.split()[2])
    assert ROBOT.chassis_clearance + ROBOT.chassis[2] < lidar_z < 0.3
    file_prefix, class_prefix = PREFIX[flavour]
    drive = robot.find(f"plugin[@filename='{file_prefix}diff-drive-system']")
    assert drive.get("name") == class_prefix + "DiffDrive"
    assert drive.findtext("left_joint") in joints and drive.findtext("right_joint") in joints
    assert drive.findtext("frame_id") == "odom"
    assert drive.findtext("child_frame_id") == "base_footprint"
    assert drive.findtext("odom_topic") == ROBOT.odom_topic
    assert drive.findtext("tf_topic") == ROBOT.tf_topic
    assert drive.findtext("topic") == ROBOT.cmd_vel_topic
    assert float(drive.findtext("wheel_radius")) == ROBOT.wheel_radius
    assert robot.find(f"plugin[@filename='{file_prefix}joint-state-publisher-system']") \
        is not None


def test_robot_can_be_left_out_and_gz_version_is_checked():
    w = load_world("small")
    assert ROBOT.name not in models(world_to_sdf(w, robot=False))
    with pytest.raises(ValueError, match="gz_version must be one of fortress, harmonic"):
        world_to_sdf(w, gz_version="garden")


def test_gz_version_follows_the_ros_distribution():
    assert gz_flavour("", "humble").name == "fortress"
    assert gz_flavour("", "jazzy").name == "harmonic"
    assert gz_flavour("", "kilted").name == "harmonic"
    assert gz_flavour("harmonic", "humble").name == "harmonic"  # an explicit choice wins
    assert gz_flavour("", "").name == "fortress"  # no ROS: the JetRover's Humble pairing
    assert (gz_flavour("fortress").cli, gz_flavour("harmonic").cli) == ("ign", "gz")
    with pytest.raises(ValueError, match="no Gazebo release known for ROS_DISTRO 'foxy'"):
        gz_flavour("", "foxy")


def test_description_cannot_break_the_xml():
    d = load_world("small").to_dict()
    d["description"] = "a <weird> & -- tricky description"
    xml = world_to_sdf(World.from_dict(d))
    ET.fromstring(xml)  # well-formed


# ---------------------------------------------------------------- libsdformat


def _sdformat_missing() -> str | None:
    if shutil.which("g++") is None:
        return "g++ is not installed (apt-get install g++)"
    if shutil.which("pkg-config") is None:
        return "pkg-config is not installed (apt-get install pkg-config)"
    probe = subprocess.run(["pkg-config", "--exists", "sdformat12"], check=False)
    if probe.returncode != 0:
        return "libsdformat12 is not installed (apt-get install libsdformat-dev on Debian 12)"
    return None


@pytest.fixture(scope="module")
def sdf_validator(tmp_path_factory) -> Path:
    reason = _sdformat_missing()
    if reason:
        pytest.skip(reason)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "sdformat12"], check=True,
                           capture_output=True, text=True).stdout.split()
    exe = tmp_path_factory.mktemp("sdfcheck") / "sdf_validate"
    build = subprocess.run(["g++", "-std=c++17", "-O0", "-o", str(exe), str(VALIDATOR_SRC),
                            *flags], capture_output=True, text=True, check=False)
    assert build.returncode == 0, f"validator did not compile:\n{build.stderr}"
    return exe


def _validate(exe: Path, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *map(str, files)], capture_output=True, text=True,
                          check=False, timeout=120)


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_libsdformat_loads_every_generated_world(sdf_validator, tmp_path, flavour):
    """Every episode's world with Fortress's plugin names; with Harmonic's (the only
    difference) the first episode of each world."""
    files, expected = [], {}
    for name in BUNDLED:
        w = load_world(name)
        episodes = {0, 5, 8, 20, *(e.episode for e in w.events if e.episode)}
        for episode in sorted(episodes) if flavour == "fortress" else [0]:
            xml = world_to_sdf(w, episode=episode, gz_version=flavour)
            path = tmp_path / f"{name}_{episode}.sdf"
            path.write_text(xml)
            files.append(path)
            expected[str(path)] = len(models(xml))
    run = _validate(sdf_validator, *files)
    assert run.returncode == 0, run.stdout + run.stderr
    oks = [line.split() for line in run.stdout.splitlines() if line.startswith("ok ")]
    assert len(oks) == len(files)
    for _, path, worlds, count in oks:
        assert worlds == "worlds=1"
        assert count == f"models={expected[path]}"


def test_libsdformat_loads_spawnable_models(sdf_validator, tmp_path):
    w = load_world("corridor_blocked")
    barrier = tmp_path / "barrier.sdf"
    barrier.write_text(barrier_sdf(w, "hall", "goal"))
    block = tmp_path / "block.sdf"
    block.write_text(block_sdf(load_world("small"), "red_block", episode=3))
    obstacle = tmp_path / "obstacle.sdf"
    obstacle.write_text(obstacle_sdf(w, Obstacle("crate", "far", (0.9, 0.0), 0.2)))
    robots = []
    for name, flavour in FLAVOURS.items():
        robots.append(tmp_path / f"robot_{name}.sdf")
        robots[-1].write_text(robot_sdf(flavour, camera_height=0.25, camera_hfov_deg=60))
    run = _validate(sdf_validator, barrier, block, obstacle, *robots)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("models=1") == 5


def test_validator_rejects_broken_sdf(sdf_validator, tmp_path):
    """The validator is strict: a duplicate model name and an unknown element both fail."""
    xml = world_to_sdf(load_world("small"))
    dup = tmp_path / "dup.sdf"
    dup.write_text(xml.replace('name="block_red_block"', 'name="block_blue_block"'))
    bogus = tmp_path / "bogus.sdf"
    bogus.write_text(xml.replace("<static>true</static>", "<static>true</static><wobble/>", 1))
    for path in (dup, bogus):
        run = _validate(sdf_validator, path)
        assert run.returncode == 1, run.stdout
        assert f"error {path}" in run.stdout


def test_object_worlds_export_stand_in_boxes():
    """Gazebo has no photos: an object block is a grey stand-in box of its size, named after
    the block (a trained detector needs a mesh of the real thing there)."""
    w = load_world("home_objects")
    m = models(world_to_sdf(w))
    for b in w.blocks:
        box = m[f"object_{b.id}"]
        assert box.find("static").text == "false"
        assert f"block_{b.id}" not in m
