#!/usr/bin/env python3
"""Repair the CMake files exported by the ROS 2 Kilted PyPI wheels.

The wheels were built in a manylinux container; their exported
``*__rosidl_generator_pyExport.cmake`` files name that container's Python include
directory (``/opt/python/cp311-cp311/include/python3.11``) and its numpy include
directory. CMake refuses imported targets whose include directories do not exist, so
building our interfaces against them fails. This rewrites those paths to the local
interpreter's. Idempotent; prints how many files it changed.

Usage: python scripts/fix_ros_wheels.py [PREFIX]   (PREFIX defaults to sys.prefix)
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

FOREIGN_PYTHON = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
FOREIGN_NUMPY = re.compile(
    r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/(?:_)?core/include"
)


def main(argv: list[str]) -> int:
    """Rewrite foreign include paths under PREFIX/share/*/cmake; return an exit code."""
    import numpy

    prefix = Path(argv[1]) if len(argv) > 1 else Path(sys.prefix)
    py_inc = sysconfig.get_paths()["include"]
    np_inc = numpy.get_include()
    if not Path(py_inc, "Python.h").exists():
        print(f"error: Python headers not found in {py_inc}; install python3-dev", file=sys.stderr)
        return 1
    changed = 0
    for path in sorted((prefix / "share").glob("*/cmake/*.cmake")):
        text = path.read_text()
        new = FOREIGN_NUMPY.sub(np_inc, text)
        new = FOREIGN_PYTHON.sub(py_inc, new)
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"fix_ros_wheels: rewrote {changed} CMake export file(s) under {prefix}/share")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
