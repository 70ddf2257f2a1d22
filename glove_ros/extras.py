"""Which pip extra (or which environment) provides an optional module: one-line messages.

``pip install glove_ros`` installs the ROS-free core; the rest comes in extras named in the
README. When an import fails, :func:`missing_message` names the extra to install (or says
that ROS 2 has to be sourced) instead of a traceback.
"""

from __future__ import annotations

import importlib.util

#: top-level module -> (pip extra, what it is for)
EXTRAS: dict[str, tuple[str, str]] = {
    "gymnasium": ("bench", "the FrozenLake benchmark"),
    "minigrid": ("bench", "MiniGrid worlds in bench gym"),
    "matplotlib": ("bench", "plots of the benchmarks and the demo"),
    "rosbags": ("bags", "rosbag2 recording, replay and drift tests"),
    "cv2": ("vision", "OpenCV colour-block perception"),
    "ultralytics": ("vision", "the YOLO perception backend (see requirements/vision.txt)"),
    "torch": ("vision", "the YOLO perception backend (see requirements/vision.txt)"),
    "llama_cpp": ("llm", "the local LLM (llama.cpp)"),
    "onnxruntime": ("embed", "MiniLM text embeddings (Janus gate)"),
    "tokenizers": ("embed", "MiniLM text embeddings (Janus gate)"),
    "nats": ("fleet", "fleet memory over NATS JetStream (docs/fleet.md)"),
}

#: modules that come from a ROS 2 environment, not from pip extras
ROS_MODULES = ("rclpy", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs",
               "nav_msgs", "builtin_interfaces", "rosgraph_msgs", "visualization_msgs",
               "glove_ros.msg", "glove_ros.srv", "glove_ros.action")

ROS_HINT = ("source env.sh in the project (after 'make setup'), or the install/setup.bash of "
            "your colcon workspace on a robot")


def missing_message(module: str | None) -> str | None:
    """A one-line explanation for a missing ``module`` (its dotted name), or None."""
    if not module:
        return None
    top = module.split(".")[0]
    if module.startswith(("glove_ros.msg", "glove_ros.srv", "glove_ros.action")) or \
            top in {m.split(".")[0] for m in ROS_MODULES if not m.startswith("glove_ros")}:
        return (f"this needs ROS 2 and the generated glove_ros interfaces (no module "
                f"'{module}'): {ROS_HINT}")
    if top in EXTRAS:
        extra, what = EXTRAS[top]
        return (f"this needs '{top}' for {what}: pip install 'glove_ros[{extra}]' "
                f"(or the project's requirements/*.txt)")
    return None


def available(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ModuleNotFoundError, ValueError):
        return False
