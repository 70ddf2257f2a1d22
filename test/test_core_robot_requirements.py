"""The robot's pip requirements never replace what apt owns (numpy above all).

A pip-installed numpy 2 shadows the system numpy 1.x that cv_bridge and the other apt
extensions were compiled against, and breaks them. requirements/robot.txt must not name
numpy, PyYAML or OpenCV, and every supported distribution has a constraints file that pins
numpy to the version its apt ships.
"""

from __future__ import annotations

import re
from pathlib import Path

REQ = Path(__file__).resolve().parent.parent / "requirements"
APT_OWNED = ("numpy", "pyyaml", "opencv-python", "opencv-python-headless", "opencv-contrib-python")
DISTRO_NUMPY = {"humble": "1.21.5", "jazzy": "1.26.4"}


def _names(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", line)
            assert m, f"{path.name}: cannot parse '{line}'"
            out[m.group(1).lower()] = m.group(2)
    return out


def test_robot_requirements_leave_apt_packages_alone():
    names = _names(REQ / "robot.txt")
    assert names, "robot.txt lists nothing"
    assert not set(names) & set(APT_OWNED), sorted(set(names) & set(APT_OWNED))
    assert all(not spec.startswith("==") for spec in names.values()), \
        "exact pins cannot fit every distribution's numpy; use ranges"


def test_each_distribution_pins_its_system_numpy():
    for distro, version in DISTRO_NUMPY.items():
        pins = _names(REQ / f"robot-constraints-{distro}.txt")
        assert pins.get("numpy") == f"=={version}", distro
