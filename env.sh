# Source this file (bash/zsh) to get a shell where `glove-ros` and the glove_ros nodes run:
#   source env.sh                          # ROS 2 Kilted wheels (.venv, install/)
#   GLOVE_ROS_DISTRO=jazzy source env.sh   # ROS 2 Jazzy wheels (.venv-jazzy, install-jazzy/)
# It activates the project venv, overlays the colcon install of glove_ros, keeps DDS
# discovery on this machine and ROS logs inside build/.
# Created by `make setup` (scripts/setup.sh); on a robot with system ROS use
# `source install/setup.bash` of your workspace instead (docs/robot.md).
if [ -n "${BASH_SOURCE[0]:-}" ]; then _glove_root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
else _glove_root="$(cd "$(dirname "$0")" && pwd)"; fi
case "${GLOVE_ROS_DISTRO:-kilted}" in
  kilted) _glove_venv="$_glove_root/.venv"; _glove_install="$_glove_root/install" ;;
  jazzy) _glove_venv="$_glove_root/.venv-jazzy"; _glove_install="$_glove_root/install-jazzy" ;;
  *) echo "glove_ros: GLOVE_ROS_DISTRO must be kilted or jazzy (got '$GLOVE_ROS_DISTRO')" >&2
     return 1 2>/dev/null || exit 1 ;;
esac
if [ ! -f "$_glove_install/setup.sh" ] || [ ! -x "$_glove_venv/bin/python" ]; then
  echo "glove_ros: not set up yet for ${GLOVE_ROS_DISTRO:-kilted}; run 'make setup' first" >&2
  return 1 2>/dev/null || exit 1
fi
. "$_glove_venv/bin/activate"
export AMENT_PREFIX_PATH="$_glove_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
COLCON_CURRENT_PREFIX="$_glove_install" . "$_glove_install/local_setup.sh"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST   # Jazzy and Kilted ignore ROS_LOCALHOST_ONLY
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export ROS_LOG_DIR="$_glove_root/build/ros_log"
export GLOVE_ROS_ROOT="$_glove_root"
export YOLO_OFFLINE=1 HF_HUB_OFFLINE=1
unset _glove_root _glove_venv _glove_install
