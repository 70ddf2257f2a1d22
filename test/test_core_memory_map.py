"""MemoryStatusMap: memory status per (state, action, arg) from the event stream."""

from __future__ import annotations

from glove_ros.core.memory import memory_map as mm


def test_status_follows_suppress_queue_replace():
    m = mm.MemoryStatusMap()
    m.apply(mm.RECORDED, "kitchen", "look", "", [1])
    m.apply(mm.RECORDED, "kitchen", "look", "", [2])
    m.apply(mm.RECORDED, "hall", "navigate_to", "lab", [3])
    assert m.snapshot() == {("kitchen", "look", ""): "trusted",
                            ("hall", "navigate_to", "lab"): "trusted"}
    m.apply(mm.SUPPRESSED, "kitchen", "look", "", [1])
    assert m.snapshot()[("kitchen", "look", "")] == "trusted"  # entry 2 is still trusted
    m.apply(mm.SUPPRESSED, "kitchen", "look", "", [2])
    assert m.snapshot()[("kitchen", "look", "")] == "suppressed"
    m.apply(mm.QUEUED, "kitchen", "look", "", [1, 2])
    assert m.snapshot()[("kitchen", "look", "")] == "pending"
    m.apply(mm.REPLACED, "kitchen", "look", "", [1, 2], [9])
    assert m.snapshot()[("kitchen", "look", "")] == "trusted"
    m.apply(mm.SUPPRESSED, "hall", "navigate_to", "lab", [3])
    m.apply(mm.RESTORED, "hall", "navigate_to", "lab", [3])
    assert m.snapshot()[("hall", "navigate_to", "lab")] == "trusted"


def test_places_and_corridors_take_the_worst_status():
    snap = {("kitchen", "look", ""): "trusted", ("hall", "navigate_to", "lab"): "trusted",
            ("lab", "navigate_to", "hall"): "suppressed", ("lab", "look", ""): "pending"}
    assert mm.place_status(snap) == {"kitchen": "trusted", "lab": "pending"}
    assert mm.edge_status(snap) == {frozenset(("hall", "lab")): "suppressed"}
    assert mm.worst([]) is None
