"""The house rules of glove_ros/core (issue 30), checked from the source so they stay true:
core holds subpackages only, each room imports only the rooms below it (the table in
glove_ros/core/__init__.py), core imports nothing from ROS or the CLI, and no module grows
past 1,000 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "glove_ros"
CORE = PKG / "core"

#: room -> the rooms it may import (glove_ros/core/__init__.py)
ALLOWED = {
    "memory": set(), "llm": set(), "ops": set(),
    "verify": {"memory"}, "world": {"memory"},
    "plan": {"memory", "llm", "world"},
    "consolidate": {"memory", "llm", "plan"},
    "bag": {"memory", "verify", "world"},
}
FORBIDDEN_TOP = ("rclpy", "launch", "launch_ros")


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_core_holds_rooms_only_and_every_room_is_known():
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules directly in glove_ros/core (give them a room): {loose}"
    rooms = {p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == set(ALLOWED), rooms ^ set(ALLOWED)
    for room in rooms:
        init = CORE / room / "__init__.py"
        assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), \
            f"core/{room}/__init__.py needs a docstring saying what lives there"


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_each_room_imports_only_the_rooms_below_it(room):
    bad = []
    for f in sorted((CORE / room).glob("*.py")):
        for mod in _imports(f):
            parts = mod.split(".")
            if parts[0] in FORBIDDEN_TOP or parts[0].endswith("_msgs"):
                bad.append(f"{f.name} imports {mod} (core is ROS-free)")
            elif parts[:2] == ["glove_ros", "core"] and len(parts) > 2:
                other = parts[2]
                if other != room and other not in ALLOWED[room]:
                    bad.append(f"{f.name} imports {mod} (core/{room} may import "
                               f"{sorted(ALLOWED[room]) or 'no other room'})")
            elif parts[0] == "glove_ros" and parts[1:2] not in (["core"], ["paths"]):
                bad.append(f"{f.name} imports {mod} (core may import glove_ros.paths, not the "
                           "layers above it)")
    assert bad == []


def test_no_module_over_a_thousand_lines():
    big = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 1000}
    assert big == {}, f"split by responsibility (issue 30): {big}"
