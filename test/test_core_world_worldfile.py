"""World files: the bundled worlds, the schema, validation errors and graph queries."""

from __future__ import annotations

import copy
import math

import pytest

from glove_ros.core.world.worldevents import (
    EVENT_TYPES,
    BlockEdge,
    MoveBlock,
    OpenEdge,
    SwapBlocks,
)
from glove_ros.core.world.worldfile import (
    BLOCK_COLORS,
    OBJECT_SIZE,
    World,
    load_world,
    resolve_world_path,
    worlds_dir,
)
from glove_ros.core.world.worldparts import Block

BUNDLED = ("jetrover_maze", "small", "nuisance_only", "corridor_blocked", "drift_demo",
           "home_objects")


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


# ---------------------------------------------------------------- object blocks


def objects_base() -> dict:
    """base() with objects instead of colour blocks (one world, one kind)."""
    d = base()
    d["blocks"] = [
        {"id": "cup", "object": "cup", "waypoint": "a", "offset": [0.9, 0.0], "size": 0.3},
        {"id": "guest", "object": "person", "waypoint": "b", "offset": [0.9, 0.0]},
    ]
    d["events"] = [{"episode": 2, "type": "swap_blocks", "blocks": ["cup", "guest"]}]
    return d


def test_object_blocks_parse_with_their_class_and_default_size():
    w = World.from_dict(objects_base())
    cup, guest = w.block("cup"), w.block("guest")
    assert (cup.object, cup.color, cup.name, cup.size) == ("cup", "", "cup", 0.3)
    # an object's default size is its photo height, not a colour block's 5 cm
    assert (guest.object, guest.size) == ("person", OBJECT_SIZE)
    assert OBJECT_SIZE >= 0.3
    assert w.objects == ("cup", "person")
    assert w.colors == ()
    assert w.look_kind == "objects"


def test_colour_worlds_keep_colours_and_their_look_kind():
    w = World.from_dict(base())
    assert w.colors == ("blue", "red") and w.objects == () and w.look_kind == "colors"
    assert all(b.object == "" and b.name == b.color for b in w.blocks)
    # a colour block's dict has no 'object' key: old files round-trip to the same mapping
    assert all("object" not in b and "color" in b for b in w.to_dict()["blocks"])


@pytest.mark.parametrize("written,canonical", [("mug", "cup"), ("Person", "person"),
                                               ("tv_monitor", "tv"), ("sofa", "couch"),
                                               ("potted-plant", "potted plant")])
def test_object_class_goes_through_the_synonym_table(written, canonical):
    d = objects_base()
    d["blocks"][0]["object"] = written
    assert World.from_dict(d).block("cup").object == canonical


def test_object_blocks_round_trip_and_keep_object():
    w = World.from_dict(objects_base())
    d = w.to_dict()
    assert d["blocks"][0] == {"id": "cup", "object": "cup", "waypoint": "a",
                              "offset": [0.9, 0.0], "size": 0.3}
    assert World.from_dict(d) == w


BAD_OBJECTS = [
    # (what, change to objects_base()["blocks"][0], expected text in the error)
    ("unknown class", {"object": "spaceship"}, "unknown object class 'spaceship'"),
    ("both keys", {"color": "red"}, "not both"),
    ("empty class", {"object": " "}, "'object' is empty"),
    ("too small", {"size": 0.05}, "an object's size (its height) must be 0.1..0.8 m"),
    ("too tall", {"size": 1.2}, "must be 0.1..0.8 m, got 1.2"),
    # a 0.3 m cup photo is 0.27 m wide: 0.2 m to the side is at the edge of the view
    ("out of view", {"offset": [0.9, 0.2]}, "outside the camera's view"),
]


@pytest.mark.parametrize("what,change,expected", BAD_OBJECTS, ids=[b[0] for b in BAD_OBJECTS])
def test_bad_object_blocks_are_refused_by_name(what, change, expected):
    d = objects_base()
    d["blocks"][0].update(change)
    with pytest.raises(ValueError) as exc:
        World.from_dict(d)
    assert expected in str(exc.value), str(exc.value)


def test_a_block_needs_a_colour_or_an_object():
    d = objects_base()
    del d["blocks"][0]["object"]
    with pytest.raises(ValueError, match=r"blocks\[0\]: missing 'color' .* or 'object'"):
        World.from_dict(d)


def test_a_world_mixing_colour_blocks_and_objects_is_refused():
    d = objects_base()
    d["blocks"].append({"id": "red_block", "color": "red", "waypoint": "dock",
                        "offset": [0.6, 0.0]})
    with pytest.raises(ValueError) as exc:
        World.from_dict(d)
    text = str(exc.value)
    assert "colour blocks or objects, not both" in text
    assert "colour: red_block" in text and "object: cup, guest" in text


def test_a_block_built_in_code_must_use_the_canonical_class():
    # from_dict maps synonyms; a Block made directly with one is refused, with the word to use
    w = World(name="t", waypoints=World.from_dict(base()).waypoints,
              edges=World.from_dict(base()).edges, dock="dock",
              blocks=(Block("mug_1", "", "a", (0.9, 0.0), 0.3, object="mug"),))
    problems = w.problems()
    assert any("unknown object class 'mug' (write 'cup')" in p for p in problems), problems
    both = Block("x", "red", "a", (0.9, 0.0), 0.3, object="cup")
    assert both.name == "cup"
    w2 = World(name="t", waypoints=w.waypoints, edges=w.edges, dock="dock", blocks=(both,))
    assert any("not both" in p for p in w2.problems())


def test_events_on_objects_are_checked_with_the_object_width():
    d = objects_base()
    # the person photo (0.4 m tall, 0.29 m wide) fits at 0.9 m straight ahead (0.4 m wide
    # it would not: the view check takes the photo's width, not the height) ...
    d["events"].append({"episode": 3, "type": "move_block", "block": "guest",
                        "waypoint": "dock", "offset": [0.9, 0.0]})
    World.from_dict(d)
    # ... not 0.15 m to the side, where a 5 cm block would fit
    d["events"][-1]["offset"] = [0.9, 0.15]
    with pytest.raises(ValueError, match=r"events\[1\] \(move_block\).*outside the camera"):
        World.from_dict(d)


def test_home_objects_world_has_objects_and_drift():
    w = load_world("home_objects")
    assert w.look_kind == "objects" and w.colors == ()
    assert {"cup", "person"} <= set(w.objects)
    assert 6 <= len(w.waypoints) <= 8 and w.dock == "dock"
    moves = [e for e in w.events if isinstance(e, MoveBlock)]
    cup_moves = [e for e in moves if w.block(e.block).object == "cup"]
    assert cup_moves and cup_moves[0].waypoint != w.block("cup").waypoint
    # a person passes through: moved somewhere and back where it was
    person = next(b for b in w.blocks if b.object == "person")
    trip = [e for e in moves if e.block == person.id]
    assert len(trip) == 2 and trip[0].waypoint != person.waypoint
    assert trip[1].waypoint == person.waypoint and trip[1].episode - trip[0].episode <= 3
    closes = [e for e in w.events if isinstance(e, BlockEdge)]
    assert len(closes) == 1
    a, b = closes[0].edge
    assert w.shortest_path(a, b, avoid_edges=[(a, b)]) is not None  # a detour exists
    assert {e.type for e in w.nuisance_events()} >= {"shift_block", "new_obstacle"}


def test_unique_objects_are_declared_at_a_site_or_inferred_for_colour_blocks():
    """A colour world infers its unique colours (one block each); an object world assumes
    nothing unique unless its file says so (a person is not a fixture); a declared name
    that no block has is refused by name."""
    from glove_ros.core.world.worldfile import load_world

    assert load_world("small").unique_names() == ("blue", "red")
    home = load_world("home_objects")
    assert home.unique_objects == ("cup",) and home.unique_names() == ("cup",)
    data = home.to_dict()
    assert World.from_dict(data) == home
    data.pop("unique_objects")
    assert World.from_dict(data).unique_names() == ()  # nothing assumed of cat or person
    data["unique_objects"] = ["mug"]  # a synonym: the cup
    assert World.from_dict(data).unique_names() == ("cup",)
    data["unique_objects"] = ["dog"]
    with pytest.raises(ValueError, match="unique_objects: 'dog' is not the colour or class"):
        World.from_dict(data)
    data["unique_objects"] = "cup"
    with pytest.raises(ValueError, match="unique_objects must be a list"):
        World.from_dict(data)
