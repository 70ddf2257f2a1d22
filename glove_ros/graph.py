"""The node graph of each deployment: one source for launch files and ``glove-ros launch``.

On a robot with ROS 2, ``ros2 launch glove_ros <deployment>.launch.py`` builds
``launch_ros`` Node actions from :func:`launch_nodes`; on a machine without the launch
tooling (this one), ``glove-ros launch <deployment>`` starts the same nodes as processes
with the same parameter file and remappings (:func:`process_command`).

Namespaces and several robots: every topic, service and action name of the nodes is
relative, and so is every remap below, so ``namespace:=robot1`` moves the whole graph,
including the robot-side names it is remapped to, under ``/robot1``. The parameter files
key their sections ``/**/<node>`` (any namespace), so a namespaced node keeps its
parameters; a section ``/robot1/<node>`` in the same file (or a second file) overrides
values for one robot. In the built-in simulator each robot runs its own simulator, so a
namespaced sim graph also takes its simulated time from ``<namespace>/clock``.

ROS-free: nothing here imports rclpy or launch.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeSpec:
    """One node of a deployment."""

    name: str  # ROS node name (also the section of the params file)
    executable: str  # `ros2 run glove_ros <executable>` (scripts/<executable>)
    remaps: tuple[tuple[str, str], ...] = ()
    lifecycle: bool = True  # declares autostart / exit_on_failure (nodes/common.py)

    @property
    def module(self) -> str:
        """Python module whose ``main()`` runs the node."""
        return f"glove_ros.nodes.{self.executable}"


@dataclass(frozen=True)
class Deployment:
    """A named set of nodes with its parameter file (under ``config/``)."""

    name: str
    config: str  # e.g. "sim.yaml"
    nodes: tuple[NodeSpec, ...]
    description: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)  # notes for launch files
    own_clock: bool = False  # the graph publishes its own /clock (one simulator per robot)
    robot_args: tuple[RobotArg, ...] = ()  # what differs between units of one robot model


@dataclass(frozen=True)
class RobotArg:
    """A launch argument that says how *this* robot is wired (no Python to edit).

    It sets node parameters (``params``: ``(node, parameter)``) and/or a remap of one node's
    relative topic (``remap``: ``(node, topic)``) to its value. ``choices`` limits the value.
    """

    name: str
    default: str
    description: str
    params: tuple[tuple[str, str], ...] = ()
    remap: tuple[str, str] | None = None
    choices: tuple[str, ...] = ()


SIMULATOR = NodeSpec("simulator", "simulator_node")
PERCEPTION = NodeSpec("perception", "perception_node")
MEMORY = NodeSpec("memory", "memory_node")
VERIFIER = NodeSpec("verifier", "verifier_node")
PLANNER = NodeSpec("planner", "planner_node")
OBSERVER = NodeSpec("observer", "observer_node")
PLAN_GATE = NodeSpec("plan_gate", "plan_gate_node")
CONSOLIDATION = NodeSpec("consolidation", "consolidation_node")
MARKERS = NodeSpec("markers", "markers_node", lifecycle=False)  # memory on the map (RViz)
# The robot's one copy of the local LLM (llm/complete), loaded on first use: the planner,
# plan gate and consolidation share it (their llm.service) instead of loading one each.
LLM = NodeSpec("llm", "llm_node")
# Real robot: navigate_to_waypoint over Nav2 (its navigate_to_pose action, or the
# goal_pose topic without nav2_msgs), the map pose from AMCL's amcl_pose.
WAYPOINT_NAV = NodeSpec("waypoint_nav", "waypoint_nav_node", (("pose", "amcl_pose"),))
# Gazebo: the world file's drift events applied to the running world (gz service calls).
GZ_EVENTS = NodeSpec("gz_events", "gz_events_node", lifecycle=False)

# HiWonder JetRover (ROS 2 Humble image): Orbbec camera and battery topic names, relative
# so that they follow the robot's namespace. Check `ros2 topic list` on your robot; change
# them here (odometry is `odom` already).
JETROVER_CAMERA = "depth_cam/rgb/image_raw"
JETROVER_CAMERA_ANGSTRONG = "/ascamera/camera_publisher/rgb0/image"
JETROVER_BATTERY = "ros_robot_controller/battery"

#: the launch arguments of the physical JetRover (``ros2 launch glove_ros jetrover.launch.py
#: camera_topic:=...`` or ``glove-ros launch jetrover --arg camera_topic=...``)
JETROVER_ARGS = (
    RobotArg("site", "", "your site file (waypoints and corridors in the map frame, "
             "docs/robot.md); '' = the world named in params_file",
             params=(("planner", "world"), ("plan_gate", "world"), ("waypoint_nav", "world"),
                     ("markers", "world"))),
    RobotArg("camera_topic", JETROVER_CAMERA,
             "colour image topic: the Dabai camera's (default); Angstrong units publish "
             f"{JETROVER_CAMERA_ANGSTRONG}", remap=("perception", "camera/image_raw")),
    RobotArg("battery_topic", JETROVER_BATTERY, "the battery topic of the base driver",
             remap=("consolidation", "battery")),
    RobotArg("battery_type", "UInt16", "UInt16 (millivolts, HiWonder's driver: charging = "
             "rising voltage) or BatteryState (sensor_msgs)",
             params=(("consolidation", "battery.type"),), choices=("UInt16", "BatteryState")),
    RobotArg("dock_waypoint", "dock", "the waypoint the charger is at: docked = charging "
             "there; '' = charging anywhere", params=(("consolidation", "dock.waypoint"),)),
    RobotArg("pose_source", "amcl", "where the planner reads the map pose: amcl (amcl_pose, "
             "silent while standing still), odom (nav_msgs/Odometry) or pose (PoseStamped)",
             params=(("planner", "pose_source"),), choices=("amcl", "odom", "pose")),
)

DEPLOYMENTS: dict[str, Deployment] = {
    "sim": Deployment(
        "sim", "sim.yaml",
        (SIMULATOR, PERCEPTION, MEMORY, VERIFIER, PLANNER, PLAN_GATE, CONSOLIDATION, MARKERS),
        "built-in simulator: the whole stack on one machine, simulated time on /clock",
        own_clock=True,
    ),
    "gazebo": Deployment(
        "gazebo", "gazebo.yaml",
        (PERCEPTION, MEMORY, VERIFIER, PLANNER, PLAN_GATE, CONSOLIDATION, WAYPOINT_NAV,
         MARKERS, GZ_EVENTS),
        "Gazebo (Fortress or Harmonic) world, robot and map generated from a world file; "
        "ros_gz_bridge, Nav2 with AMCL, waypoint_nav drives it, gz_events applies the "
        "world's drift events (docs/gazebo.md)",
    ),
    "jetrover": Deployment(
        "jetrover", "jetrover.yaml",
        (PERCEPTION, MEMORY, VERIFIER, PLANNER, PLAN_GATE, CONSOLIDATION, WAYPOINT_NAV,
         MARKERS, LLM),
        "the physical JetRover: async GLOVE, nothing probed by default; one shared LLM "
        "(llm node), loaded only when a node uses it",
        robot_args=JETROVER_ARGS,
    ),
    "bag_replay": Deployment(
        "bag_replay", "bag_replay.yaml", (PERCEPTION, OBSERVER, MEMORY),
        "replay a recorded bag (glove-ros bag replay) through perception and memory",
    ),
}


#: perception backends that run a trained detector: its classes are names a task may use
#: ("find the cup"), so the planner's ``objects`` follows perception (:func:`linked_params`)
DETECTOR_BACKENDS = ("darknet", "yolo")


def linked_params(values: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, object]]:
    """Parameters that one node's settings imply for another, for whatever builds the node
    commands to add beneath its own overrides (an explicit value always wins).

    ``values``: node name -> the parameters it gets (parameter file and overrides). One rule
    today: when ``perception.backend`` is a trained detector (:data:`DETECTOR_BACKENDS`) and
    the planner's ``objects`` is not given, the planner understands the detector's classes:
    perception's ``classes`` of interest when it lists any, else ``['coco']`` (all 80).
    """
    perception, planner = values.get("perception", {}), values.get("planner", {})
    if str(perception.get("backend", "")) not in DETECTOR_BACKENDS or "objects" in planner:
        return {}
    classes = perception.get("classes", ())
    named = [str(c) for c in (classes if isinstance(classes, (list, tuple)) else [classes])
             if str(c).strip()]
    return {"planner": {"objects": named or ["coco"]}}


def file_parameters(params_file: str, node: str, namespace: str = "") -> dict[str, object]:
    """The values a ROS 2 parameter file gives ``node`` in ``namespace``
    (:func:`section_parameters`). ``{}`` when the file cannot be read: the node itself
    reports that."""
    try:
        import yaml

        with open(params_file) as f:
            doc = yaml.safe_load(f)
    except Exception:  # a missing or bad file is the node's error to report, not ours
        return {}
    return section_parameters(doc, node, namespace)


def section_parameters(doc: object, node: str, namespace: str = "") -> dict[str, object]:
    """The values a parameter file's content ``doc`` gives ``node`` in ``namespace`` (sections
    ``/**``, ``/**/node``, ``node``, ``/ns/node`` in file order, later ones winning; nested
    names dotted: ``verifier.mode``)."""
    fqn = f"{normalize_namespace(namespace)}/{node}"
    out: dict[str, object] = {}
    for key, section in (doc.items() if isinstance(doc, dict) else ()):
        params = section.get("ros__parameters") if isinstance(section, dict) else None
        if isinstance(key, str) and isinstance(params, dict) and _section_matches(key, fqn):
            out.update(_flatten(params))
    return out


def _section_matches(key: str, node_fqn: str) -> bool:
    k = key.strip() if key.strip().startswith("/") else "/" + key.strip()
    pattern = re.escape(k).replace(r"/\*\*", "(?:/[^/]+)*").replace(r"\*", "[^/]+")
    return re.fullmatch(pattern, node_fqn) is not None


def _flatten(params: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def deployment(name: str) -> Deployment:
    """The deployment called ``name``; ValueError listing the known ones."""
    try:
        return DEPLOYMENTS[name]
    except KeyError:
        raise ValueError(f"unknown deployment '{name}'; known: {', '.join(DEPLOYMENTS)}") from None


LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
_NS_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def normalize_namespace(namespace: str) -> str:
    """``""`` or an absolute namespace (``robot1`` -> ``/robot1``); ValueError if invalid."""
    ns = (namespace or "").strip().strip("/")
    if not ns:
        return ""
    parts = ns.split("/")
    bad = [p for p in parts if not _NS_PART.fullmatch(p)]
    if bad:
        raise ValueError(f"invalid namespace '{namespace}': each part must start with a letter "
                         f"or '_' and hold only letters, digits and '_' (bad: {bad})")
    return "/" + "/".join(parts)


def robot_settings(dep: Deployment, values: Mapping[str, str] | None = None
                   ) -> tuple[dict[str, dict[str, object]], dict[str, list[tuple[str, str]]]]:
    """Per node: the parameter overrides and remaps of the deployment's robot arguments.

    ``values`` (argument name -> text) override the defaults; an unknown name or a value
    outside an argument's choices is a ValueError naming the known ones. An empty value of an
    argument that sets parameters leaves those parameters to the params file.
    """
    values = dict(values or {})
    known = {a.name: a for a in dep.robot_args}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{dep.name} has no robot argument {', '.join(unknown)}; known: "
                         f"{', '.join(known) or 'none'}")
    params: dict[str, dict[str, object]] = {}
    remaps: dict[str, list[tuple[str, str]]] = {}
    for arg in dep.robot_args:
        value = str(values.get(arg.name, arg.default)).strip()
        if arg.choices and value not in arg.choices:
            raise ValueError(f"{arg.name} must be one of {', '.join(arg.choices)} "
                             f"(got '{value}')")
        if arg.remap is not None:
            if not value:
                raise ValueError(f"{arg.name} is empty: give the topic name")
            remaps.setdefault(arg.remap[0], []).append((arg.remap[1], value))
        if value or arg.name == "dock_waypoint":  # '' is a meaningful dock: anywhere
            for node, name in arg.params:
                params.setdefault(node, {})[name] = value
    return params, remaps


def node_remaps(dep: Deployment, spec: NodeSpec, namespace: str = "",
                robot: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The remappings of ``spec`` in ``dep`` (all relative; see the module docstring), with
    those of the robot arguments (``robot``: name -> value; defaults otherwise)."""
    remaps = list(spec.remaps) + robot_settings(dep, robot)[1].get(spec.name, [])
    if dep.own_clock and normalize_namespace(namespace):
        remaps.append(("/clock", "clock"))  # this robot's simulator, this robot's time
    return remaps


def launch_nodes(dep: Deployment, namespace: str = "", use_sim_time: bool | None = None,
                 log_level: str = "", exit_on_failure: bool = False,
                 robot: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """Per node: the keyword arguments of a ``launch_ros`` Node, minus ``parameters``.

    ``use_sim_time`` None leaves it to the parameter file; ``log_level`` "" leaves the
    default. ``exit_on_failure`` makes a lifecycle node whose start fails exit (for a
    launch that respawns it) instead of staying unconfigured. ``robot``: values of the
    deployment's robot arguments. The launch files add the parameter files and respawn
    settings.
    """
    ns = normalize_namespace(namespace)
    if log_level and log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)} (got '{log_level}')")
    robot_params = robot_settings(dep, robot)[0]
    out = []
    for spec in dep.nodes:
        overrides: dict[str, object] = dict(robot_params.get(spec.name, {}))
        if use_sim_time is not None and spec is not SIMULATOR:
            overrides["use_sim_time"] = bool(use_sim_time)
        if exit_on_failure and spec.lifecycle:
            overrides["exit_on_failure"] = True
        out.append({
            "executable": spec.executable, "name": spec.name, "namespace": ns,
            "remappings": node_remaps(dep, spec, ns, robot), "overrides": overrides,
            "arguments": ["--ros-args", "--log-level", log_level] if log_level else [],
        })
    return out


def process_command(spec: NodeSpec, params_file: str, overrides: Mapping[str, object] = (),
                    remaps: Sequence[tuple[str, str]] = (), namespace: str = "",
                    deployment_name: str = "", log_level: str = "",
                    exit_on_failure: bool = False,
                    robot: Mapping[str, str] | None = None,
                    others: Mapping[str, Mapping[str, object]] | None = None) -> list[str]:
    """The command line that runs ``spec`` as its own process (what launch would do).

    ``deployment_name`` adds the deployment's per-namespace remaps (:func:`node_remaps`).
    ``exit_on_failure`` (for a supervisor that restarts the process) makes a lifecycle node
    exit with code 1 when its start fails instead of staying alive unconfigured. ``robot``:
    values of the deployment's robot arguments (with ``deployment_name``); ``overrides``
    win over them. What other nodes' settings imply for this one (:func:`linked_params`:
    a trained detector in perception -> the planner's ``objects``) is read from
    ``params_file`` and ``others`` (node name -> that node's overrides) and set beneath
    everything explicit.
    """
    ns = normalize_namespace(namespace)
    if log_level and log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)} (got '{log_level}')")
    cmd = [sys.executable, "-u", "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}",
           "--params-file", params_file]
    if ns:
        cmd += ["-r", f"__ns:={ns}"]
    if log_level:
        cmd += ["--log-level", log_level]
    values = dict(overrides)
    if deployment_name:
        values = {**robot_settings(deployment(deployment_name), robot)[0].get(spec.name, {}),
                  **values}
    if exit_on_failure and spec.lifecycle:
        values.setdefault("exit_on_failure", True)
    if spec.name == "planner":  # the only node a link sets today; no file read for others
        seen = {n: {**file_parameters(params_file, n, ns), **dict((others or {}).get(n, {}))}
                for n in ("perception", spec.name)}
        seen[spec.name].update(values)
        values = {**linked_params(seen).get(spec.name, {}), **values}
    for key, value in values.items():
        cmd += ["-p", f"{key}:={_param_text(value)}"]
    base = (node_remaps(deployment(deployment_name), spec, ns, robot) if deployment_name
            else list(spec.remaps))
    for old, new in (*base, *remaps):
        cmd += ["-r", f"{old}:={new}"]
    return cmd


def _param_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(f"'{v}'" if isinstance(v, str) else _param_text(v)
                              for v in value) + "]"
    return str(value)
