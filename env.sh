# Source this file (bash/zsh) to get a shell where `glove-ros` and the glove_ros nodes run:
#   source env.sh
# It activates the project venv (ROS 2 Kilted wheels), overlays the colcon install of
# glove_ros, keeps DDS discovery on this machine and ROS logs inside build/.
# Created by `make setup` (scripts/setup.sh); on a robot with system ROS use
# `source install/setup.bash` of your workspace instead.
if [ -n "${BASH_SOURCE[0]:-}" ]; then _glove_root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
else _glove_root="$(cd "$(dirname "$0")" && pwd)"; fi
if [ ! -f "$_glove_root/install/setup.sh" ]; then
  echo "glove_ros: not set up yet; run 'make setup' first" >&2
  return 1 2>/dev/null || exit 1
fi
. "$_glove_root/.venv/bin/activate"
export AMENT_PREFIX_PATH="$_glove_root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
COLCON_CURRENT_PREFIX="$_glove_root/install" . "$_glove_root/install/local_setup.sh"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST   # Kilted ignores ROS_LOCALHOST_ONLY
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export ROS_LOG_DIR="$_glove_root/build/ros_log"
export GLOVE_ROS_ROOT="$_glove_root"
export YOLO_OFFLINE=1 HF_HUB_OFFLINE=1
unset _glove_root
