"""The Gazebo bridge file, Nav2's parameters and the generated folder agree with each other
and with the robot model (ros_gz_bridge's config_file format; Nav2's frames and topics)."""

from __future__ import annotations

import importlib
import xml.etree.ElementTree as ET

import pytest
import yaml

from glove_ros.cli import main as cli
from glove_ros.core.world.gzbridge import DIRECTIONS, bridge_entries, bridge_yaml
from glove_ros.core.world.gzexport import nav2_params, write_gazebo_files
from glove_ros.core.world.gzrobot import FLAVOURS, ROBOT, static_transforms
from glove_ros.core.world.worldfile import load_world
from glove_ros.paths import resolve_config

#: ROS type -> gz message (without package), from ros_gz_bridge's README table
BRIDGEABLE = {
    "rosgraph_msgs/msg/Clock": "Clock", "geometry_msgs/msg/Twist": "Twist",
    "nav_msgs/msg/Odometry": "Odometry", "tf2_msgs/msg/TFMessage": "Pose_V",
    "sensor_msgs/msg/LaserScan": "LaserScan", "sensor_msgs/msg/Image": "Image",
    "sensor_msgs/msg/CameraInfo": "CameraInfo", "sensor_msgs/msg/JointState": "Model",
}
KEYS = {"ros_topic_name", "gz_topic_name", "ros_type_name", "gz_type_name", "direction", "lazy"}
MSGS = {"fortress": "ignition.msgs.", "harmonic": "gz.msgs."}


def _bridge(flavour: str, world: str = "jetrover_maze") -> list[dict]:
    return yaml.safe_load(bridge_yaml(world, FLAVOURS[flavour]))


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_bridge_file_is_a_list_of_ros_gz_bridge_entries(flavour):
    entries = _bridge(flavour)
    assert isinstance(entries, list) and len(entries) == 8
    for e in entries:
        assert set(e) == KEYS, e
        assert e["direction"] in DIRECTIONS
        assert e["ros_topic_name"].startswith("/") and e["gz_topic_name"].startswith("/")
        assert e["gz_type_name"].startswith(MSGS[flavour]), e
        assert BRIDGEABLE[e["ros_type_name"]] == e["gz_type_name"][len(MSGS[flavour]):], e
        pkg, kind, _name = e["ros_type_name"].split("/")
        assert kind == "msg"
    ros = {e["ros_topic_name"]: e for e in entries}
    assert set(ros) == {"/clock", "/cmd_vel", "/odom", "/tf", "/scan", "/camera/image_raw",
                        "/camera/camera_info", "/joint_states"}
    assert ros["/cmd_vel"]["direction"] == "ROS_TO_GZ"
    assert all(e["direction"] == "GZ_TO_ROS" for t, e in ros.items() if t != "/cmd_vel")
    assert len({e["ros_topic_name"] for e in entries}) == len(entries)


def test_ros_types_of_the_bridge_are_real_interfaces():
    """Every ROS type resolves to an installed Python message class (packages missing from
    this environment are named, and at most one may be)."""
    checked, missing = [], []
    for e in _bridge("harmonic"):
        pkg, _msg, name = e["ros_type_name"].split("/")
        try:
            module = importlib.import_module(f"{pkg}.msg")
        except ModuleNotFoundError:
            missing.append(pkg)
            continue
        cls = getattr(module, name)  # AttributeError: no such message in the package
        assert hasattr(cls, "get_fields_and_field_types"), cls
        checked.append(e["ros_type_name"])
    if len(checked) == 0:
        pytest.skip("no ROS message packages installed")
    assert len(missing) <= 1, f"not installed here: {missing}"
    assert "sensor_msgs/msg/LaserScan" in checked


def test_bridge_topics_match_the_robot_model_and_world():
    entries = {e.ros_topic: e for e in bridge_entries("maze", FLAVOURS["harmonic"])}
    assert entries["/cmd_vel"].gz_topic == ROBOT.cmd_vel_topic
    assert entries["/odom"].gz_topic == ROBOT.odom_topic
    assert entries["/tf"].gz_topic == ROBOT.tf_topic
    assert entries["/scan"].gz_topic == ROBOT.scan_topic
    assert entries["/camera/camera_info"].gz_topic == "/camera/camera_info"
    assert entries["/joint_states"].gz_topic == "/world/maze/model/jetrover/joint_state"
    moved = bridge_entries("maze", FLAVOURS["fortress"], cmd_vel_topic="/controller/cmd_vel")
    assert moved[1].ros_topic == "/controller/cmd_vel"
    with pytest.raises(ValueError, match="cmd_vel_topic must be absolute"):
        bridge_entries("maze", FLAVOURS["fortress"], cmd_vel_topic="controller/cmd_vel")


def test_static_transforms_name_the_frames_gazebo_stamps_sensor_data_with():
    tfs = {t.child: t for t in static_transforms(0.2)}
    assert set(tfs) == {"base_link", "jetrover/base_link/lidar", "jetrover/base_link/camera"}
    assert {t.parent for t in tfs.values()} == {ROBOT.base_frame}
    assert tfs["jetrover/base_link/lidar"].xyz == ROBOT.lidar_xyz
    args = tfs["jetrover/base_link/camera"].arguments()
    assert args[args.index("--z") + 1] == "0.2"
    assert args[-4:] == ["--frame-id", "base_footprint", "--child-frame-id",
                         "jetrover/base_link/camera"]


# ---------------------------------------------------------------- Nav2


def _nodes(params: dict) -> dict[str, dict]:
    """node name -> its ros__parameters (costmaps are nested one level deeper)."""
    out = {}
    for name, section in params.items():
        if "ros__parameters" in section:
            out[name] = section["ros__parameters"]
        else:
            for inner, sub in section.items():
                out[f"{name}/{inner}"] = sub["ros__parameters"]
    return out


def test_nav2_template_parses_and_agrees_with_bridge_and_robot():
    params = yaml.safe_load(resolve_config("nav2_gazebo").read_text())
    nodes = _nodes(params)
    assert {"amcl", "map_server", "bt_navigator", "controller_server", "planner_server",
            "behavior_server", "velocity_smoother", "local_costmap/local_costmap",
            "global_costmap/global_costmap"} <= set(nodes)
    assert all(p.get("use_sim_time") is True for p in nodes.values()), \
        [n for n, p in nodes.items() if p.get("use_sim_time") is not True]
    ros_topics = {e["ros_topic_name"] for e in _bridge("fortress")}
    amcl = nodes["amcl"]
    assert (amcl["base_frame_id"], amcl["odom_frame_id"], amcl["global_frame_id"]) == \
        (ROBOT.base_frame, ROBOT.odom_frame, "map")
    assert "/" + amcl["scan_topic"] in ros_topics
    assert (amcl["update_min_d"], amcl["update_min_a"]) == (0.25, 0.2)
    assert (amcl["laser_min_range"], amcl["laser_max_range"]) == ROBOT.lidar_range
    assert nodes["bt_navigator"]["robot_base_frame"] == ROBOT.base_frame
    assert nodes["bt_navigator"]["odom_topic"] in ros_topics
    for costmap in ("local_costmap/local_costmap", "global_costmap/global_costmap"):
        c = nodes[costmap]
        assert c["robot_base_frame"] == ROBOT.base_frame
        assert c["obstacle_layer"]["scan"]["topic"] in ros_topics
    assert nodes["local_costmap/local_costmap"]["global_frame"] == ROBOT.odom_frame
    assert nodes["global_costmap/global_costmap"]["global_frame"] == "map"
    assert nodes["planner_server"]["GridBased"]["plugin"] == "nav2_navfn_planner::NavfnPlanner"
    follow = nodes["controller_server"]["FollowPath"]["plugin"]
    assert follow in ("nav2_regulated_pure_pursuit_controller::RegulatedPurePursuitController",
                      "dwb_core::DWBLocalPlanner")
    assert "/" + nodes["controller_server"]["odom_topic"] in ros_topics
    smoother = nodes["velocity_smoother"]
    assert smoother["max_velocity"][0] <= ROBOT.max_speed
    assert smoother["max_velocity"][2] <= ROBOT.max_turn
    # every node publishing velocities publishes plain Twist, what the bridge carries
    for name in ("controller_server", "velocity_smoother", "behavior_server"):
        assert nodes[name]["enable_stamped_cmd_vel"] is False


def test_nav2_params_start_amcl_at_the_start_waypoint_with_humbles_names_on_fortress():
    w = load_world("drift_demo")
    start = w.waypoint(w.start_waypoint)
    humble = nav2_params(w, FLAVOURS["fortress"], map_yaml="/x/map.yaml")
    jazzy = nav2_params(w, FLAVOURS["harmonic"])
    for p in (humble, jazzy):
        pose = p["amcl"]["ros__parameters"]["initial_pose"]
        assert (pose["x"], pose["y"], pose["yaw"]) == (start.x, start.y, start.yaw)
        assert p["amcl"]["ros__parameters"]["set_initial_pose"] is True
    assert humble["map_server"]["ros__parameters"]["yaml_filename"] == "/x/map.yaml"
    planner = "planner_server", "ros__parameters", "GridBased", "plugin"
    assert _get(humble, planner) == "nav2_navfn_planner/NavfnPlanner"
    assert _get(jazzy, planner) == "nav2_navfn_planner::NavfnPlanner"
    behavior = humble["behavior_server"]["ros__parameters"]
    assert behavior["spin"]["plugin"] == "nav2_behaviors/Spin"
    assert behavior["costmap_topic"] == "local_costmap/costmap_raw"
    assert behavior["global_frame"] == "odom"
    assert jazzy["behavior_server"]["ros__parameters"]["global_frame"] == "map"
    bad = yaml.safe_load(resolve_config("nav2_gazebo").read_text())
    bad["amcl"]["ros__parameters"]["base_frame_id"] = "base_link"
    with pytest.raises(ValueError, match="amcl.base_frame_id is 'base_link'"):
        nav2_params(w, FLAVOURS["fortress"], template=bad)


def _get(d: dict, keys: tuple[str, ...]):
    for k in keys:
        d = d[k]
    return d


# ---------------------------------------------------------------- the folder and the CLI


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_written_folder_is_consistent(tmp_path, flavour):
    w = load_world("corridor_blocked")
    files = write_gazebo_files(w, tmp_path / "gz", gz_version=flavour, episode=5)
    assert [p.name for p in files.paths()] == ["world.sdf", "robot.sdf", "map.pgm", "map.yaml",
                                               "bridge.yaml", "nav2_params.yaml"]
    sdf = ET.parse(files.world_sdf).getroot()
    world_name = sdf.find("world").get("name")
    models = {m.get("name") for m in sdf.find("world").findall("model")}
    assert "barrier_goal_hall" in models  # blocked at episode 5
    bridge = yaml.safe_load(files.bridge_yaml.read_text())
    joint = next(e for e in bridge if e["ros_topic_name"] == "/joint_states")
    assert joint["gz_topic_name"] == f"/world/{world_name}/model/{ROBOT.name}/joint_state"
    assert all(e["gz_type_name"].startswith(MSGS[flavour]) for e in bridge)
    nav2 = yaml.safe_load(files.nav2_params.read_text())
    assert nav2["map_server"]["ros__parameters"]["yaml_filename"] == str(files.map_yaml)
    meta = yaml.safe_load(files.map_yaml.read_text())
    assert (files.map_yaml.parent / meta["image"]) == files.map_pgm


def test_cli_writes_the_folder_or_the_world_alone(tmp_path, capsys):
    assert cli.main(["sdf", "small", "-o", str(tmp_path / "out"), "--gz-version",
                     "harmonic"]) == 0
    out = capsys.readouterr().out
    assert "Gazebo harmonic files of world 'small'" in out and "bridge.yaml" in out
    assert (tmp_path / "out" / "map.pgm").is_file()
    assert "gz-sim-physics-system" in (tmp_path / "out" / "world.sdf").read_text()
    assert cli.main(["sdf", "small", "-o", str(tmp_path / "w.sdf"), "--gz-version",
                     "fortress"]) == 0
    assert "ignition-gazebo-physics-system" in (tmp_path / "w.sdf").read_text()
    assert not (tmp_path / "map.pgm").exists()


def test_gazebo_deployment_config_matches_the_bridge():
    """config/gazebo.yaml: simulated time everywhere, the map pose from AMCL, and the topics
    the nodes read are ones the bridge carries."""
    from glove_ros import graph

    config = yaml.safe_load(resolve_config("gazebo").read_text())
    sections = {k.removeprefix("/**/"): v["ros__parameters"] for k, v in config.items()}
    assert set(sections) == {s.name for s in graph.deployment("gazebo").nodes}
    assert all(p.get("use_sim_time") is True for p in sections.values()), \
        [n for n, p in sections.items() if p.get("use_sim_time") is not True]
    assert sections["planner"]["pose_source"] == "amcl"
    assert dict(graph.WAYPOINT_NAV.remaps)["pose"] == "amcl_pose"  # AMCL's topic
    ros_topics = {e["ros_topic_name"] for e in _bridge("fortress")}
    assert "/camera/image_raw" in ros_topics  # perception's camera/image_raw, no namespace
    assert "/odom" in ros_topics  # waypoint_nav's odom
    worlds = {n: p["world"] for n, p in sections.items() if "world" in p}
    assert set(worlds.values()) == {"jetrover_maze"} and "gz_events" in worlds
