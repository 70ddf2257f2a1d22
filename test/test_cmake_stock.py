"""The CMake include fix-up is a no-op in a stock ROS 2 workspace (no patched wheels).

Only the project's patched Kilted wheels give the generated Python target an
INTERFACE_INCLUDE_DIRECTORIES property; on apt-installed Humble / Jazzy / Kilted it is
unset. Each case configures and generates a small CMake project that installs and exports
a stand-in for ``glove_ros__rosidl_generator_py`` (generation is where CMake checks the
exported include paths) and applies ``cmake/glove_build_only_includes.cmake`` to it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "cmake" / "glove_build_only_includes.cmake"

# The fix-up as it was before the guard (CMakeLists.txt up to this test): proves the harness
# reproduces the stock-workspace failure, so the guarded cases below can fail.
UNGUARDED = """
get_target_property(_glove_dirs ${T} INTERFACE_INCLUDE_DIRECTORIES)
set(_glove_fixed "")
foreach(_dir IN LISTS _glove_dirs)
  string(FIND "${_dir}" "${CMAKE_SOURCE_DIR}/" _pos)
  if(_pos EQUAL 0)
    list(APPEND _glove_fixed "$<BUILD_INTERFACE:${_dir}>")
  else()
    list(APPEND _glove_fixed "${_dir}")
  endif()
endforeach()
set_target_properties(${T} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_glove_fixed}")
"""

GUARDED = f"""
include("{MODULE.as_posix()}")
glove_build_only_source_includes(${{T}} "${{CMAKE_SOURCE_DIR}}")
"""

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


def _configure(tmp_path: Path, includes: str | None, fixup: str) -> subprocess.CompletedProcess:
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "venv_inc").mkdir(parents=True)
    prop = ("" if includes is None else
            f'set_target_properties(${{T}} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "{includes}")')
    (src / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.16)
project(stock_check NONE)
set(T glove_ros__rosidl_generator_py)
add_library(${{T}} INTERFACE)
{prop}
{fixup}
install(TARGETS ${{T}} EXPORT stockExport)
install(EXPORT stockExport DESTINATION share/stock_check/cmake)
get_target_property(_final ${{T}} INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "FINAL=${{_final}}")
""")
    return subprocess.run(["cmake", "-S", str(src), "-B", str(build)],
                          capture_output=True, text=True, timeout=120)


def test_harness_reproduces_the_stock_workspace_failure(tmp_path):
    r = _configure(tmp_path, None, UNGUARDED)
    assert r.returncode != 0
    assert "NOTFOUND" in r.stderr


def test_property_unset_as_in_a_stock_workspace_generates(tmp_path):
    r = _configure(tmp_path, None, GUARDED)
    assert r.returncode == 0, r.stderr
    assert "FINAL=_final-NOTFOUND" in r.stdout  # left unset, not written back


def test_source_tree_include_becomes_build_only(tmp_path):
    venv_inc = (tmp_path / "src" / "venv_inc").as_posix()
    r = _configure(tmp_path, f"/usr/include;{venv_inc}", GUARDED)
    assert r.returncode == 0, r.stderr
    assert f"FINAL=/usr/include;$<BUILD_INTERFACE:{venv_inc}>" in r.stdout


def test_source_tree_include_unwrapped_is_what_cmake_refuses(tmp_path):
    venv_inc = (tmp_path / "src" / "venv_inc").as_posix()
    r = _configure(tmp_path, venv_inc, "")
    assert r.returncode != 0
    assert "source directory" in r.stderr


def test_cmakelists_uses_the_guarded_module():
    text = (ROOT / "CMakeLists.txt").read_text()
    assert "glove_build_only_source_includes(" in text
    assert "get_target_property" not in text  # every property read goes through the guard
