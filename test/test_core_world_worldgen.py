"""Tests of the generated waypoint worlds of the drift suite (glove_ros.core.world.worldgen)."""

from __future__ import annotations

import itertools

import pytest

from glove_ros.core.world.sim import WorldState
from glove_ros.core.world.worldevents import (
    BlockEdge,
    MissDetections,
    MoveBlock,
    OpenEdge,
    SwapBlocks,
)
from glove_ros.core.world.worldfile import BLOCK_COLORS, World, edge_key, load_world
from glove_ros.core.world.worldgen import (
    DRIFT_KINDS,
    GRID_SPACING,
    check_connected_always,
    generate_world,
    is_connected,
    save_world,
    summary,
    to_yaml,
)

SEEDS = range(12)


def _cross(p1, p2, p3, p4) -> bool:
    """Whether segments p1-p2 and p3-p4 properly cross (shared end points do not)."""
    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if abs(v) < 1e-12 else (1 if v > 0 else -1)
    if {p1, p2} & {p3, p4}:
        return False
    return orient(p1, p2, p3) * orient(p1, p2, p4) < 0 and \
        orient(p3, p4, p1) * orient(p3, p4, p2) < 0


def test_same_seed_same_world_other_seed_other_world():
    for kind in DRIFT_KINDS:
        a = generate_world(5, kind=kind)
        assert a == generate_world(5, kind=kind)
        assert to_yaml(a) == to_yaml(generate_world(5, kind=kind))
        assert a != generate_world(6, kind=kind)


@pytest.mark.parametrize("kind", DRIFT_KINDS)
def test_maps_are_connected_planar_grids_with_cycles(kind):
    sizes = set()
    for seed in SEEDS:
        w = generate_world(seed, kind=kind)
        n = len(w.waypoints)
        sizes.add(n)
        assert 6 <= n <= 16
        assert is_connected(w.waypoint_ids, [e.key for e in w.edges])
        assert len(w.edges) >= n, "a spanning tree plus at least one cycle edge"
        pos = {p.id: (p.x, p.y) for p in w.waypoints}
        for e in w.edges:  # corridors join grid neighbours (jitter <= 0.2 m each end)
            assert GRID_SPACING - 0.6 < e.length < GRID_SPACING + 0.6, e
        for e, f in itertools.combinations(w.edges, 2):
            assert not _cross(pos[e.a], pos[e.b], pos[f.a], pos[f.b]), (seed, e, f)
        assert check_connected_always(w) == []
    assert len(sizes) > 3, "sizes vary with the seed"


def test_blocks_have_unique_detector_colours_at_distinct_waypoints():
    counts = set()
    for seed, kind in itertools.product(SEEDS, DRIFT_KINDS):
        w = generate_world(seed, kind=kind)
        counts.add(len(w.blocks))
        assert 2 <= len(w.blocks) <= 5
        colors = [b.color for b in w.blocks]
        assert len(set(colors)) == len(colors) and set(colors) <= set(BLOCK_COLORS)
        places = [b.waypoint for b in w.blocks]
        assert len(set(places)) == len(places) and w.dock not in places
    assert counts == {2, 3, 4, 5}


def _replay_blocked(w: World) -> dict[int, frozenset]:
    """Blocked corridors after each drift moment, from the simulator's own world state."""
    st = WorldState(w)
    out = {0: st.blocked_edges}
    for ep in sorted({e.episode for e in w.events if e.episode}):
        st.advance(episode=ep)
        out[ep] = st.blocked_edges
    return out


def test_drift_kinds_schedule_the_right_events():
    for seed in SEEDS:
        swap = generate_world(seed, kind="swap", first_drift=9)
        (ev,) = swap.drift_events()
        assert isinstance(ev, SwapBlocks) and ev.episode == 9

        move = generate_world(seed, kind="move")
        (ev,) = move.drift_events()
        assert isinstance(ev, MoveBlock)
        assert ev.waypoint not in {b.waypoint for b in move.blocks}, "to a free waypoint"

        close = generate_world(seed, kind="close")
        (ev,) = close.drift_events()
        assert isinstance(ev, BlockEdge) and not any(e.blocked for e in close.edges)

        opened = generate_world(seed, kind="open")
        (ev,) = opened.drift_events()
        assert isinstance(ev, OpenEdge)
        assert opened.edge(*ev.edge).blocked, "re-opens a corridor closed from the start"

        cr = generate_world(seed, kind="close_reopen", phase_len=10)
        drift = cr.drift_events()
        assert isinstance(drift[0], BlockEdge)
        moments = sorted({e.episode for e in drift})
        assert 2 <= len(moments) <= 3 and moments == [15 + 10 * k for k in range(len(moments))]
        blocked = _replay_blocked(cr)
        prev = blocked[moments[0]]
        for m in moments[1:]:  # the previous corridor re-opens while another closes
            assert len(blocked[m]) == 1 and blocked[m] != prev and not prev & blocked[m]
            prev = blocked[m]

        combo = generate_world(seed, kind="combo")
        cats = {e.category for e in combo.drift_events()}
        assert cats == {"semantic", "topological"}

        nuis = generate_world(seed, kind="nuisance")
        assert nuis.drift_events() == () and nuis.nuisance_events()
    phases = {len({e.episode for e in generate_world(s, kind="close_reopen").drift_events()})
              for s in range(30)}
    assert phases == {2, 3}


def test_nuisance_settings():
    rates = []
    for seed in SEEDS:
        w = generate_world(seed, kind="nuisance")
        types = {e.type for e in w.nuisance_events()}
        assert {"pose_jitter", "detection_dropout", "shift_block", "new_obstacle"} <= types
        miss = [e for e in w.events if isinstance(e, MissDetections)]
        rates += [e.rate for e in miss]
        assert all(0 < e.rate <= 0.15 for e in miss)
    assert len(set(rates)) > 3
    w = generate_world(1, kind="swap", miss_rate=0.1)
    assert [e.rate for e in w.events if isinstance(e, MissDetections)] == [0.1]
    assert generate_world(1, kind="swap", nuisance=False).nuisance_events() == ()


def test_saved_world_loads_back_unchanged(tmp_path):
    w = generate_world(3, kind="combo")
    path = save_world(w, tmp_path / "sub" / "gen.yaml")
    back = load_world(path)
    assert back == w and back.to_dict() == w.to_dict()
    assert World.from_dict(w.to_dict()) == w
    s = summary(w)
    assert s["waypoints"] == len(w.waypoints) and len(s["drift"]) == len(w.drift_events())


def test_bad_arguments_are_refused():
    for kw in ({"kind": "earthquake"}, {"n_waypoints": 5}, {"n_waypoints": 17},
               {"first_drift": 0}, {"phases": 4}, {"miss_rate": 0.9},
               {"n_waypoints": 6, "n_blocks": 5}):
        with pytest.raises(ValueError):
            generate_world(1, **kw)
    with pytest.raises(ValueError):
        generate_world(-1)
    w = generate_world(2, kind="close", n_waypoints=8, n_blocks=3)
    assert len(w.waypoints) == 8 and len(w.blocks) == 3


def test_check_connected_always_finds_a_cut():
    w = generate_world(4, kind="nuisance", nuisance=False)
    wp = w.waypoint_ids[0]  # close every corridor of one waypoint: it is cut off
    events = [{"episode": 3, "type": "block_edge", "edge": list(edge_key(e.a, e.b))}
              for e in w.edges if wp in (e.a, e.b)]
    cut = World.from_dict({**w.to_dict(), "events": events})
    problems = check_connected_always(cut)
    assert len(problems) == 1 and problems[0].startswith("episode 3")
