"""Memory status of map elements for the markers (glove_ros.core.world.markers), without ROS."""

from __future__ import annotations

from glove_ros.core.world.markers import EntryView, beliefs, memory_layers

SUP, TRU, REP = 1, 0, 2


def _e(i, state, action, outcome, status=TRU, arg=""):
    return EntryView(i, state, action, arg, outcome, status)


def test_status_precedence_pending_stale_trusted_suppressed():
    entries = [
        _e(1, "a", "look", "colors=red", SUP), _e(2, "a", "look", "colors=blue"),
        _e(3, "a", "navigate_to", "blocked", arg="b"),
        _e(4, "b", "look", "colors=red", REP),
        *[_e(5 + i, "c", "look", "colors=green") for i in range(3)],
    ]
    got = beliefs(entries, ["blocked"], stale_after=3)
    assert got[("a", "look", "")].status == "pending"
    assert got[("a", "look", "")].outcomes == ("colors=blue",)
    assert got[("a", "navigate_to", "b")].status == "stale_negative"  # 4 newer entries
    assert got[("b", "look", "")].status == "suppressed"  # only history left
    assert got[("c", "look", "")].status == "trusted"
    assert beliefs(entries, ["blocked"], stale_after=0)[("a", "navigate_to", "b")].status == \
        "trusted"  # 0 disables staleness


def test_layers_draw_map_corridor_status_and_blocks():
    wps = {"a": (0.0, 0.0), "b": (1.0, 0.0), "c": (2.0, 0.0)}
    shapes = memory_layers(wps, [("a", "b"), ("c", "b"), ("b", "zz")],
                           [_e(1, "b", "navigate_to", "blocked", arg="a"),
                            _e(2, "c", "look", "colors=blue,red")], stale_after=50)
    by_key = {(s.layer, s.key): s for s in shapes}
    assert by_key[("corridors", "a:b")].status == "trusted"
    assert ("corridors", "a:b/blocked") in by_key  # memory believes it blocked
    assert by_key[("corridors", "b:c")].status == ""  # nothing known: unknown colour
    assert ("corridors", "b:zz") not in by_key  # not on the map: not drawn
    cubes = [s for s in shapes if s.kind == "cube"]
    assert {s.key for s in cubes} == {"c/blue", "c/red"}
    assert by_key[("blocks", "c/label")].text == "blue,red (trusted)"
    assert {s.key for s in shapes if s.layer == "waypoints" and s.kind == "disc"} == set(wps)


def test_object_looks_are_drawn_with_their_counts():
    shapes = memory_layers({"k": (0.0, 0.0)}, [],
                           [_e(1, "k", "look", "objects=cup,person*2")], stale_after=50)
    by_key = {(s.layer, s.key): s for s in shapes}
    assert {s.key for s in shapes if s.kind == "cube"} == {"k/cup", "k/person*2"}
    assert by_key[("blocks", "k/label")].text == "cup,person*2 (trusted)"
