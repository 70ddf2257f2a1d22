"""The occupancy map for Nav2 (map_server / AMCL) generated from a world's walls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from glove_ros.core.world.gzmap import FREE, OCCUPIED, UNKNOWN, occupancy_map, read_pgm
from glove_ros.core.world.sdf import maze_walls
from glove_ros.core.world.sim import WorldState
from glove_ros.core.world.worldfile import World, load_world

BUNDLED = ("jetrover_maze", "small", "nuisance_only", "corridor_blocked", "drift_demo")


def _seg_distance(p, seg) -> float:
    x1, y1, x2, y2 = seg[:4]
    dx, dy = x2 - x1, y2 - y1
    t = max(0.0, min(1.0, ((p[0] - x1) * dx + (p[1] - y1) * dy) / (dx * dx + dy * dy)))
    return math.hypot(p[0] - x1 - t * dx, p[1] - y1 - t * dy)


@pytest.mark.parametrize("name", BUNDLED)
def test_occupied_cells_are_exactly_the_walls(name):
    w = load_world(name)
    m = occupancy_map(w)
    walls = maze_walls(w)
    rows, cols = np.nonzero(m.image == OCCUPIED)
    assert len(rows) > 0
    for r, c in zip(rows, cols, strict=True):  # every occupied cell is on a wall
        p = m.centre(r, c)
        assert min(_seg_distance(p, s) - s[5] / 2 for s in walls) <= m.resolution / 2 + 1e-9
    for s in walls:  # every wall is drawn, along its whole length
        for f in np.linspace(0, 1, 21):
            x, y = s[0] + f * (s[2] - s[0]), s[1] + f * (s[3] - s[1])
            assert m.value(x, y) == OCCUPIED, (s, f)


@pytest.mark.parametrize("name", BUNDLED)
def test_waypoints_and_blocks_are_free_and_outside_is_unknown(name):
    w = load_world(name)
    m = occupancy_map(w)
    for wp in w.waypoints:
        for dx, dy in [(0, 0), (0.15, 0), (-0.15, 0), (0, 0.15), (0, -0.15)]:  # robot footprint
            assert m.value(wp.x + dx, wp.y + dy) == FREE, wp.id
    state = WorldState(w)
    for b in w.blocks:  # blocks move: never in the static map
        assert m.value(*state.block_position(b.id)) == FREE
    assert m.image[0, 0] == UNKNOWN and m.image[-1, -1] == UNKNOWN


def test_corridors_stay_open_on_the_map():
    """Every corridor's straight line is free of walls (the map agrees with the graph)."""
    w = load_world("jetrover_maze")
    m = occupancy_map(w)
    for e in w.edges:
        a, b = w.waypoint(e.a), w.waypoint(e.b)
        for f in np.linspace(0.0, 1.0, 31):
            assert m.value(a.x + f * (b.x - a.x), a.y + f * (b.y - a.y)) == FREE, e


def test_extra_walls_of_the_world_file_are_mapped():
    d = load_world("small").to_dict()
    d["walls"] = [{"x1": 0.3, "y1": -0.5, "x2": 0.3, "y2": 0.5}]
    w = World.from_dict(d)
    m = occupancy_map(w)
    assert m.value(0.3, 0.0) == OCCUPIED
    assert occupancy_map(load_world("small")).value(0.3, 0.0) == FREE


def test_files_are_what_map_server_loads(tmp_path):
    m = occupancy_map(load_world("jetrover_maze"), resolution=0.1)
    pgm, meta = m.write(tmp_path, "maze")
    doc = yaml.safe_load(meta.read_text())
    assert set(doc) == {"image", "mode", "resolution", "origin", "negate", "occupied_thresh",
                        "free_thresh"}
    assert doc["image"] == "maze.pgm" and (tmp_path / doc["image"]) == pgm  # relative to YAML
    assert doc["mode"] == "trinary" and doc["negate"] == 0 and doc["resolution"] == 0.1
    assert len(doc["origin"]) == 3 and doc["origin"][2] == 0.0
    assert (doc["origin"][0], doc["origin"][1]) == pytest.approx(m.origin)
    # map_server's trinary reading: p = (255 - value) / 255 (negate 0)
    p = {v: (255 - v) / 255 for v in (OCCUPIED, FREE, UNKNOWN)}
    assert p[OCCUPIED] > doc["occupied_thresh"]
    assert p[FREE] < doc["free_thresh"]
    assert doc["free_thresh"] <= p[UNKNOWN] <= doc["occupied_thresh"]
    assert pgm.read_bytes().startswith(b"P5")
    image = read_pgm(pgm)
    assert image.shape == (m.height, m.width) and np.array_equal(image, m.image)
    # the origin is the lower-left corner: the bottom-left cell's centre is half a cell in
    assert m.centre(m.height - 1, 0) == pytest.approx((m.origin[0] + 0.05, m.origin[1] + 0.05))


def test_bad_arguments_and_bad_pgm_are_clear_errors(tmp_path):
    w = load_world("small")
    with pytest.raises(ValueError, match="resolution must be in"):
        occupancy_map(w, resolution=0)
    with pytest.raises(ValueError, match="margin must be >= 0"):
        occupancy_map(w, margin=-1)
    bad = tmp_path / "bad.pgm"
    bad.write_bytes(b"P2\n2 2\n255\n0 0 0 0\n")
    with pytest.raises(ValueError, match="not a binary 8-bit PGM"):
        read_pgm(bad)
    short = tmp_path / "short.pgm"
    short.write_bytes(b"P5\n4 4\n255\n" + bytes(5))
    with pytest.raises(ValueError, match="5 pixel bytes, expected 16"):
        read_pgm(short)
    with pytest.raises(IndexError, match="outside the map"):
        occupancy_map(w).value(100.0, 0.0)
