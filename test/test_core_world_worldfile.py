"""World files: the bundled worlds, the schema, validation errors and graph queries."""

from __future__ import annotations

import copy
import math

import pytest

from glove_ros.core.world.worldevents import EVENT_TYPES, BlockEdge, OpenEdge, SwapBlocks
from glove_ros.core.world.worldfile import (
    BLOCK_COLORS,
    World,
    load_world,
    resolve_world_path,
    worlds_dir,
)

BUNDLED = ("jetrover_maze", "small", "nuisance_only", "corridor_blocked")


def base() -> dict:
    """A small valid world as a dict; tests break one thing at a time."""
    return {
        "name": "t",
        "dock": "dock",
        "waypoints": [
            {"id": "dock", "x": 0.0, "y": 0.0},
            {"id": "a", "x": 1.0, "y": 0.0},
            {"id": "b", "x": 1.0, "y": 1.0, "yaw": 1.57},
        ],
        "edges": [["dock", "a"], ["a", "b", 1.2]],
        "blocks": [
            {"id": "red_block", "color": "red", "waypoint": "a"},
            {"id": "blue_block", "color": "blue", "waypoint": "b", "offset": [0.5, 0.05]},
        ],
        "events": [{"episode": 2, "type": "swap_blocks", "blocks": ["red_block", "blue_block"]}],
    }


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_worlds_load_and_validate(name):
    w = load_world(name)
    assert w.name == name
    assert w.problems() == []
    assert w.has_waypoint(w.dock)
    assert w.source.endswith(f"{name}.yaml")
    # every waypoint reachable from the dock in the map
    for wp in w.waypoint_ids:
        assert w.shortest_path(w.dock, wp) is not None


def test_default_world_is_a_maze_with_a_swap():
    w = load_world()  # the embedded default
    assert w.name == "jetrover_maze"
    assert 8 <= len(w.waypoints) <= 10
    assert 3 <= len(w.blocks) <= 4
    swaps = [e for e in w.events if isinstance(e, SwapBlocks)]
    assert len(swaps) == 1 and swaps[0].episode and swaps[0].episode > 0
    assert len(set(w.colors)) == len(w.blocks)


def test_small_world_is_small():
    w = load_world("small")
    assert 4 <= len(w.waypoints) <= 5
    assert any(isinstance(e, SwapBlocks) for e in w.events)


def test_nuisance_only_world_has_no_drift_and_every_nuisance():
    w = load_world("nuisance_only")
    assert w.drift_events() == ()
    kinds = {e.type for e in w.nuisance_events()}
    assert kinds == {"shift_block", "miss_detections", "pose_jitter", "new_obstacle",
                     "detection_dropout"}


def test_corridor_blocked_blocks_then_reopens_the_same_edge():
    w = load_world("corridor_blocked")
    blocks = [e for e in w.events if isinstance(e, BlockEdge)]
    opens = [e for e in w.events if isinstance(e, OpenEdge)]
    assert len(blocks) == 1 and len(opens) == 1
    assert set(blocks[0].edge) == set(opens[0].edge)
    assert blocks[0].episode < opens[0].episode
    assert all(e.category == "topological" and e.is_drift for e in w.events)
    # there is a detour around the blocked corridor
    a, b = blocks[0].edge
    assert w.shortest_path(a, b, avoid_edges=[(a, b)]) is not None


def test_round_trip_through_dict():
    for name in BUNDLED:
        w = load_world(name)
        again = World.from_dict(w.to_dict())
        assert again == w


def test_short_edge_form_uses_straight_line_length():
    w = World.from_dict(base())
    assert w.edge("a", "dock").length == pytest.approx(1.0)
    assert w.edge("b", "a").length == pytest.approx(1.2)
    assert w.edge("dock", "b") is None


def test_defaults():
    w = World.from_dict(base())
    assert w.start_waypoint == "dock"
    assert w.block("red_block").offset == (0.6, 0.0)
    assert w.robot.speed > 0 and w.camera.hfov_deg > 0
    assert w.neighbors("a") == ("b", "dock")
    assert [b.id for b in w.blocks_at("a")] == ["red_block"]


def _mutate(path, value):
    d = base()
    target = d
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


_DELETE = object()

BAD = [
    # (what, mutation (path, value), expected text in the error)
    ("unknown waypoint in a block", (("blocks", 0, "waypoint"), "nowhere"),
     "unknown waypoint 'nowhere'"),
    ("duplicate waypoint id", (("waypoints", 2, "id"), "a"), "duplicate waypoint id 'a'"),
    ("edge to nowhere", (("edges", 0), ["dock", "mars"]), "leads to nowhere"),
    ("bad colour", (("blocks", 0, "color"), "magenta"), "bad colour 'magenta'"),
    ("negative length", (("edges", 1), ["a", "b", -1.0]), "length must be a positive"),
    ("zero length", (("edges", 1), ["a", "b", 0]), "length must be a positive"),
    ("self loop", (("edges", 1), ["a", "a"]), "connects a waypoint to itself"),
    ("duplicate block id", (("blocks", 1, "id"), "red_block"), "duplicate block id"),
    ("unknown dock", (("dock",), "garage"), "dock 'garage' is not a waypoint"),
    ("bad id", (("waypoints", 1, "id"), "a b"), "must match"),
    ("block out of view", (("blocks", 0, "offset"), [0.6, 0.5]), "outside the camera"),
    ("block behind camera", (("blocks", 0, "offset"), [0.1, 0.0]), "in front of the camera"),
    ("negative speed", (("robot",), {"speed": -1}), "robot.speed must be > 0"),
    ("swap unknown block", (("events", 0, "blocks"), ["red_block", "green_block"]),
     "unknown block 'green_block'"),
    ("swap with itself", (("events", 0, "blocks"), ["red_block", "red_block"]), "with itself"),
    ("negative episode", (("events", 0, "episode"), -1), "episode must be >= 0"),
]


@pytest.mark.parametrize("what,mutation,expected", BAD, ids=[b[0] for b in BAD])
def test_validation_errors_are_clear(what, mutation, expected):
    with pytest.raises(ValueError) as exc:
        World.from_dict(_mutate(*mutation))
    assert expected in str(exc.value), str(exc.value)


BAD_EVENTS = [
    ({"episode": 1, "type": "teleport_block"}, "unknown event type 'teleport_block'"),
    ({"episode": 1, "type": "block_edge", "edge": ["dock", "b"]}, "there is no edge dock-b"),
    ({"episode": 1, "type": "open_edge", "edge": ["dock", "zz"]}, "unknown waypoint 'zz'"),
    ({"episode": 1, "type": "shift_block", "block": "red_block", "dx": 0.5},
     "more than a nuisance"),
    ({"episode": 1, "type": "miss_detections", "rate": 1.5}, "rate must be in 0..1"),
    ({"type": "detection_dropout", "frames": 1}, "exactly one trigger"),
    ({"episode": 1, "time": 3.0, "type": "detection_dropout"}, "exactly one trigger"),
    ({"episode": 1, "type": "detection_dropout", "frames": 0}, "frames must be >= 1"),
    ({"episode": 3, "until_episode": 2, "type": "pose_jitter"}, "until_episode must be after"),
    ({"episode": 1, "type": "pose_jitter", "sigma_xy": 1.0}, "sigma_xy must be in"),
    ({"episode": 1, "type": "move_block", "block": "red_block", "waypoint": "nope"},
     "unknown waypoint 'nope'"),
    ({"episode": 1, "type": "new_obstacle", "id": "a", "waypoint": "b"}, "duplicate id 'a'"),
    ({"episode": 1, "type": "swap_blocks", "blocks": ["red_block"]}, "exactly 2 ids"),
    ({"episode": 1, "type": "shift_block", "block": "red_block", "dz": 0.01},
     "unknown key(s) dz"),
]


@pytest.mark.parametrize("event,expected", BAD_EVENTS, ids=[e[1] for e in BAD_EVENTS])
def test_event_validation(event, expected):
    d = base()
    d["events"].append(event)
    with pytest.raises(ValueError) as exc:
        World.from_dict(d)
    assert expected in str(exc.value), str(exc.value)


def test_unknown_key_is_reported_with_the_expected_ones():
    d = base()
    d["waypiont"] = []
    with pytest.raises(ValueError, match="unknown key.*waypiont.*expected some of"):
        World.from_dict(d)


def test_every_problem_is_listed_at_once():
    d = base()
    d["blocks"][0]["color"] = "pink"
    d["edges"][1] = ["a", "b", -2]
    with pytest.raises(ValueError) as exc:
        World.from_dict(d)
    text = str(exc.value)
    assert "bad colour 'pink'" in text and "length must be a positive" in text


def test_disconnected_waypoint_is_an_error():
    d = base()
    d["waypoints"].append({"id": "island", "x": 5, "y": 5})
    with pytest.raises(ValueError, match="island cannot be reached from the dock"):
        World.from_dict(d)


def test_wrong_types_are_errors():
    d = base()
    d["waypoints"][0]["x"] = "zero"
    with pytest.raises(ValueError, match=r"waypoints\[0\]: 'x' must be a number"):
        World.from_dict(d)
    with pytest.raises(ValueError, match="expected a mapping"):
        World.from_dict(["not", "a", "world"])


def test_validate_false_defers_problems():
    d = base()
    d["blocks"][0]["color"] = "pink"
    w = World.from_dict(d, validate=False)
    assert any("pink" in p for p in w.problems())
    with pytest.raises(ValueError):
        w.validate()


def test_shortest_path_is_deterministic_and_avoids_edges():
    w = load_world("jetrover_maze")
    p1 = w.shortest_path("dock", "office")
    assert p1 == w.shortest_path("dock", "office")
    assert p1[0] == "dock" and p1[-1] == "office"
    assert w.path_length(p1) == pytest.approx(6.0)
    p2 = w.shortest_path("dock", "office", avoid_edges=[("lab", "office"), ("lounge", "office")])
    assert p2 is None
    p3 = w.shortest_path("dock", "garage", avoid_edges=[("garage", "entry")])
    assert p3 == ["dock", "entry", "hall", "lounge", "garage"]
    assert w.shortest_path("hall", "hall") == ["hall"]
    with pytest.raises(KeyError, match="unknown waypoint 'moon'"):
        w.shortest_path("dock", "moon")


def test_event_categories():
    for cls in EVENT_TYPES.values():
        assert cls.category in ("semantic", "topological", "nuisance")
    w = load_world("jetrover_maze")
    assert [e.type for e in w.drift_events()] == ["swap_blocks"]
    assert "red_block<->blue_block" in w.drift_events()[0].describe()


def test_colour_palette_is_distinct():
    assert len(set(BLOCK_COLORS.values())) == len(BLOCK_COLORS)
    assert {"red", "green", "blue", "yellow"} <= set(BLOCK_COLORS)


def test_load_world_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="jetrover_maze"):
        load_world("no_such_world")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_world(bad)
    broken = tmp_path / "broken.yaml"
    d = copy.deepcopy(base())
    d["blocks"][0]["color"] = "teal"
    import yaml

    broken.write_text(yaml.safe_dump(d))
    with pytest.raises(ValueError, match=r"broken\.yaml.*teal|teal"):
        load_world(broken)


def test_load_world_from_a_path(tmp_path):
    import yaml

    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(base()))
    w = load_world(p)
    assert w.name == "t" and w.source == str(p)
    assert resolve_world_path("small") == worlds_dir() / "small.yaml"
    assert math.isclose(w.edge("dock", "a").length, 1.0)
