"""Core types and equivalence rules: values match the msg constants, bad input is rejected."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from glove_ros.core.memory.equivalence import (
    ExactStateRule,
    PoseRadiusRule,
    WaypointRule,
    cell_of,
    make_rule,
)
from glove_ros.core.memory.experience import (
    MAX_CONTEXT_CHARS,
    MAX_KEY_CHARS,
    MAX_OUTCOME_CHARS,
    EventKind,
    Source,
    Status,
    Transition,
)

ROOT = Path(__file__).resolve().parents[1]


def _msg_constants(name: str) -> dict[str, int]:
    text = (ROOT / "msg" / name).read_text()
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^uint8\s+([A-Z_]+)\s*=\s*(\d+)", text, flags=re.MULTILINE)
    }


def test_enum_values_match_msg_constants():
    transition = _msg_constants("Transition.msg")
    assert {f"SOURCE_{s.name}": int(s) for s in Source} == transition
    entry = _msg_constants("MemoryEntry.msg")
    assert {f"STATUS_{s.name}": int(s) for s in Status} == entry
    event = _msg_constants("MemoryEvent.msg")
    assert {k.name: int(k) for k in EventKind} == event


def _ok(**kw) -> Transition:
    base = dict(state_key="wp_kitchen", action="look_at", outcome="colors=red")
    base.update(kw)
    return Transition(**base)


def test_valid_transition_passes_and_normalises():
    t = _ok(pose=[1.0, 2.0, 0.5], source=1, reward=1, stamp=12.5)
    assert t.validate() is t
    assert t.pose == (1.0, 2.0, 0.5)
    assert t.source is Source.PROBED
    assert t.key == ("wp_kitchen", "look_at", "")
    assert t.has_pose


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"state_key": ""}, "state_key"),
        ({"state_key": "   "}, "state_key"),
        ({"action": ""}, "action"),
        ({"outcome": ""}, "outcome"),
        ({"state_key": None}, "state_key"),
        ({"pose": (float("nan"), 0.0, 0.0)}, "pose x"),
        ({"pose": (0.0, float("inf"), 0.0)}, "pose y"),
        ({"pose": (0.0, 0.0, float("-inf"))}, "pose yaw"),
        ({"pose": (1.0, 2.0)}, "pose"),
        ({"pose": ("a", 0.0, 0.0)}, "pose x"),
        ({"pose": (1e12, 0.0, 0.0)}, "pose"),
        ({"reward": float("nan")}, "reward"),
        ({"reward": float("inf")}, "reward"),
        ({"reward": "1"}, "reward"),
        ({"stamp": float("nan")}, "stamp"),
        ({"stamp": float("inf")}, "stamp"),
        ({"stamp": -1.0}, "stamp"),
        ({"source": 7}, "source"),
        ({"source": "observed"}, "source"),
        ({"state_key": "s" * (MAX_KEY_CHARS + 1)}, "state_key"),
        ({"action_arg": "a" * (MAX_KEY_CHARS + 1)}, "action_arg"),
        ({"robot_id": "r" * (MAX_KEY_CHARS + 1)}, "robot_id"),
        ({"outcome": "o" * (MAX_OUTCOME_CHARS + 1)}, "outcome"),
        ({"context": "c" * (MAX_CONTEXT_CHARS + 1)}, "context"),
        ({"episode_id": "bad\x00id"}, "episode_id"),
        # issue 31: control characters printed keys across lines in explanations
        ({"state_key": "hall\nkitchen"}, "state_key contains the control character"),
        ({"action_arg": "a\rb"}, "action_arg"),
        ({"robot_id": "r\x1b[31m"}, "robot_id"),
    ],
)
def test_invalid_transitions_are_rejected_with_the_field_named(changes, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        _ok(**changes).validate()


def test_limits_are_inclusive():
    _ok(state_key="s" * MAX_KEY_CHARS, outcome="o" * MAX_OUTCOME_CHARS).validate()


def test_dict_round_trip_and_unknown_keys():
    t = _ok(pose=(1.0, -2.0, 3.0), robot_id="jr1", reward=-1.0, source=Source.IMPORTED)
    d = t.to_dict()
    assert d["source"] == "IMPORTED" and d["pose"] == [1.0, -2.0, 3.0]
    assert Transition.from_dict(d) == t
    with pytest.raises(ValueError, match="unknown transition field"):
        Transition.from_dict({**d, "colour": "red"})
    with pytest.raises(ValueError, match="source"):
        Transition.from_dict({**d, "source": "dreamed"})
    with pytest.raises(ValueError, match="outcome"):
        Transition.from_dict({"state_key": "a", "action": "b"})


# ----------------------------------------------------------------------------- equivalence


def test_make_rule_validates():
    assert isinstance(make_rule("state"), ExactStateRule)
    assert isinstance(make_rule("waypoint"), WaypointRule)
    assert make_rule("pose", radius=0.3) == PoseRadiusRule(0.3)
    with pytest.raises(ValueError, match="unknown equivalence rule"):
        make_rule("nearby")
    with pytest.raises(ValueError, match="needs radius"):
        make_rule("pose")
    with pytest.raises(ValueError, match="only to the 'pose'"):
        make_rule("state", radius=0.5)
    for bad in (0.0, -1.0, float("nan"), float("inf"), "0.3", True):
        with pytest.raises(ValueError, match="radius"):
            make_rule("pose", radius=bad)


def test_key_rules_compare_state_keys_only():
    a = _ok(state_key="wp1", pose=(0.0, 0.0, 0.0))
    b = _ok(state_key="wp1", pose=(50.0, 50.0, 0.0))
    c = _ok(state_key="wp2", pose=(0.0, 0.0, 0.0))
    for rule in (make_rule("state"), make_rule("waypoint")):
        assert rule.key_based
        assert rule.equivalent(a, b)
        assert not rule.equivalent(a, c)


def test_pose_rule_radius_and_label_fallback():
    rule = make_rule("pose", radius=0.3)
    a = _ok(state_key="wp1", pose=(1.0, 1.0, 0.0))
    assert rule.equivalent(a, _ok(state_key="other", pose=(1.2, 1.2, 3.0)))  # 0.28 m, label ignored
    assert not rule.equivalent(a, _ok(state_key="wp1", pose=(1.3, 1.3, 0.0)))  # 0.42 m
    unposed_same = _ok(state_key="wp1")
    unposed_other = _ok(state_key="wp2")
    assert rule.equivalent(a, unposed_same) and rule.equivalent(unposed_same, a)
    assert not rule.equivalent(a, unposed_other)
    assert rule.equivalent(unposed_same, _ok(state_key="wp1"))


@pytest.mark.parametrize("cell_size", [0.1, 0.25, 0.5, 2.0])
@pytest.mark.parametrize("radius", [0.05, 0.3, 1.0])
def test_pose_index_query_covers_every_neighbour(cell_size, radius):
    """Every point within the radius lies in a cell the index query asks for."""
    rule = PoseRadiusRule(radius)
    rng = random.Random(7)
    for _ in range(400):
        x, y = rng.uniform(-20, 20), rng.uniform(-20, 20)
        t = _ok(pose=(x, y, 0.0))
        q = rule.index_query(t, cell_size)
        assert q.uses_cells and q.unposed_only and q.state_key == t.state_key
        ang, dist = rng.uniform(0, 2 * math.pi), radius * math.sqrt(rng.random())
        qx, qy = x + dist * math.cos(ang), y + dist * math.sin(ang)
        cx, cy = cell_of(qx, qy, cell_size)
        assert cx in q.cell_xs and q.cell_y_min <= cy <= q.cell_y_max
        if radius <= cell_size:
            assert len(q.cell_xs) <= 3 and q.cell_y_max - q.cell_y_min <= 2


def test_cell_of_handles_negative_coordinates():
    assert cell_of(-0.01, 0.0, 0.5) == (-1, 0)
    assert cell_of(0.49, -0.5, 0.5) == (0, -1)
