"""Generated waypoint worlds for the drift suite: a seed in, a :class:`World` out.

:func:`generate_world` builds a world in the same format as ``worlds/*.yaml`` (a
:class:`~glove_ros.core.world.worldfile.World`, validated; :func:`to_yaml` / :func:`save_world`
write
it so :func:`~glove_ros.core.world.worldfile.load_world` reads it back unchanged), deterministic per
``(seed, kind, options)``:

* **Map**: 6-16 waypoints on cells of a 1.5 m grid, each jittered by up to 0.2 m; corridors
  join grid neighbours only (axis-aligned unit steps between lattice cells never cross, so
  the map is planar): a random spanning tree plus extra cycle edges (at least one cycle).
* **Blocks**: 2-5 blocks of distinct colours from the colour detector's set
  (:data:`~glove_ros.core.world.worldfile.BLOCK_COLORS`, the hues of
  :mod:`glove_ros.core.world.perception`), each at its own waypoint (never the dock).
* **Drift** (``kind``, :data:`DRIFT_KINDS`), first at ``first_drift``, later phases every
  ``phase_len`` episodes:

  ``swap``          two blocks trade places (``swap_blocks``)
  ``move``          a block is carried to a free waypoint (``move_block``)
  ``close``         a corridor closes (``block_edge``)
  ``open``          a corridor closed from the start re-opens (``open_edge``)
  ``close_reopen``  a corridor closes; a phase later it re-opens while a corridor of the
                    detour closes; with three phases the detour re-opens while a third closes
  ``combo``         a semantic drift (swap or move) and a topological one (close or
                    close_reopen), at the same episode or one phase apart
  ``nuisance``      no drift at all (nuisance-only world)

  A closed corridor never disconnects the map: at every moment the open corridors connect
  every waypoint (:func:`check_connected_always` replays the schedule to prove it).
* **Nuisance** (unless ``nuisance=False``): missed detections at ``miss_rate`` (default drawn
  in 0-0.15), pose jitter, one or two detection dropouts, a nudged block and a new
  obstacle. ``miss_detections`` acts per camera frame and per block: a look of one frame
  (the suite's setting) misses a present block with exactly ``miss_rate``; a look of ``n``
  frames counting a colour seen in any frame misses it with ``miss_rate ** n``.

Only the event types of :mod:`glove_ros.core.world.worldevents` are used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.core.world.worldevents import (
    BlockEdge,
    DetectionDropout,
    Event,
    MissDetections,
    MoveBlock,
    NewObstacle,
    OpenEdge,
    PoseJitter,
    ShiftBlock,
    SwapBlocks,
)
from glove_ros.core.world.worldfile import BLOCK_COLORS, World, edge_key
from glove_ros.core.world.worldparts import Block, CameraSpec, Edge, RobotSpec, Waypoint

__all__ = [
    "DRIFT_KINDS",
    "GRID_SPACING",
    "check_connected_always",
    "generate_world",
    "is_connected",
    "save_world",
    "summary",
    "to_yaml",
]

#: drift kinds :func:`generate_world` accepts (``nuisance``: no drift)
DRIFT_KINDS = ("swap", "move", "close", "open", "close_reopen", "combo", "nuisance")
#: metres between grid cells
GRID_SPACING = 1.5
_JITTER = 0.2
_YAWS = (0.0, math.pi / 2, math.pi, -math.pi / 2)


def _rng(seed: int, kind: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), DRIFT_KINDS.index(kind), 15])


def is_connected(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> bool:
    """Whether ``edges`` (pairs) connect every node of ``nodes``."""
    nodes = list(nodes)
    if not nodes:
        return True
    adj: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    seen = {nodes[0]}
    stack = [nodes[0]]
    while stack:
        for m in adj[stack.pop()]:
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return len(seen) == len(nodes)


def _grid_cells(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """``n`` distinct cells grown as a connected blob on a near-square grid, from a 2x2
    square (so the map always has a cycle)."""
    cols = int(math.ceil(math.sqrt(n * 1.4)))
    rows = int(math.ceil(n / cols)) + 1
    c0, r0 = int(rng.integers(cols - 1)), int(rng.integers(rows - 1))
    cells = [(c0, r0), (c0 + 1, r0), (c0, r0 + 1), (c0 + 1, r0 + 1)]  # a square: a cycle
    taken = set(cells)
    while len(cells) < n:
        frontier = sorted({(c + dc, r + dr) for c, r in cells
                           for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1))
                           if 0 <= c + dc < cols and 0 <= r + dr < rows} - taken)
        cell = frontier[int(rng.integers(len(frontier)))]
        cells.append(cell)
        taken.add(cell)
    return sorted(cells, key=lambda cr: (cr[1], cr[0]))


def _grid_edges(rng: np.random.Generator, cells: list[tuple[int, int]], extra: int
                ) -> list[tuple[int, int]]:
    """Index pairs: a random spanning tree over grid neighbours plus ``extra`` cycle edges."""
    index = {c: i for i, c in enumerate(cells)}
    cand = sorted({tuple(sorted((i, index[(c + dc, r + dr)])))
                   for i, (c, r) in enumerate(cells)
                   for dc, dr in ((1, 0), (0, 1)) if (c + dc, r + dr) in index})
    order = [cand[k] for k in rng.permutation(len(cand))]
    parent = list(range(len(cells)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    tree, rest = [], []
    for a, b in order:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            tree.append((a, b))
        else:
            rest.append((a, b))
    return tree + rest[:max(1, extra)] if rest else tree


def _bridges_free(nodes: list[str], edges: list[tuple[str, str]],
                  closed: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Open edges whose closing (on top of ``closed``) keeps the map connected."""
    open_edges = [e for e in edges if e not in closed]
    return [e for e in open_edges
            if is_connected(nodes, [x for x in open_edges if x != e])]


def _detour(nodes: list[str], edges: list[tuple[str, str]], closed: set[tuple[str, str]],
            a: str, b: str) -> list[tuple[str, str]]:
    """Edges of the shortest (hop) open path a -> b avoiding ``closed``."""
    adj: dict[str, list[str]] = {n: [] for n in nodes}
    for x, y in edges:
        if (x, y) not in closed:
            adj[x].append(y)
            adj[y].append(x)
    prev = {a: a}
    queue = [a]
    for node in queue:
        for m in sorted(adj[node]):
            if m not in prev:
                prev[m] = node
                queue.append(m)
    if b not in prev:
        return []
    path = [b]
    while path[-1] != a:
        path.append(prev[path[-1]])
    return [edge_key(x, y) for x, y in zip(path[:-1], path[1:], strict=True)]


def generate_world(seed: int, *, kind: str = "combo", n_waypoints: int | None = None,
                   n_blocks: int | None = None, first_drift: int = 15, phase_len: int = 12,
                   phases: int | None = None, nuisance: bool = True,
                   miss_rate: float | None = None, name: str | None = None) -> World:
    """A random waypoint world with scheduled drift (see the module docstring).

    Args:
        seed: the world's seed (same arguments, same world).
        kind: one of :data:`DRIFT_KINDS`.
        n_waypoints: 6..16 (default: drawn).
        n_blocks: 2..5, at most ``n_waypoints - 2`` (default: drawn).
        first_drift: episode of the first drift event (>= 1).
        phase_len: episodes between drift phases (>= 1).
        phases: drift phases of ``close_reopen`` (2 or 3; default: drawn).
        nuisance: add the nuisance events (``nuisance`` kind worlds always have them).
        miss_rate: per-frame missed-detection rate 0..0.5 (default: drawn in 0..0.15).
        name: world name (default ``gen_<kind>_<seed>``).

    Raises ValueError for bad arguments; the world is validated.
    """
    if kind not in DRIFT_KINDS:
        raise ValueError(f"unknown drift kind {kind!r}; choose from {', '.join(DRIFT_KINDS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if n_waypoints is not None and not 6 <= n_waypoints <= 16:
        raise ValueError(f"n_waypoints must be in 6..16, got {n_waypoints!r}")
    if first_drift < 1 or phase_len < 1:
        raise ValueError(f"first_drift and phase_len must be >= 1, got {first_drift}, "
                         f"{phase_len}")
    if phases is not None and phases not in (2, 3):
        raise ValueError(f"phases must be 2 or 3, got {phases!r}")
    if miss_rate is not None and not 0.0 <= miss_rate <= 0.5:
        raise ValueError(f"miss_rate must be in 0..0.5, got {miss_rate!r}")
    rng = _rng(seed, kind)
    n = int(n_waypoints) if n_waypoints is not None else int(rng.integers(6, 17))
    max_blocks = min(5, n - 2)
    if n_blocks is not None and not 2 <= n_blocks <= max_blocks:
        raise ValueError(f"n_blocks must be in 2..{max_blocks} for {n} waypoints, got "
                         f"{n_blocks!r}")
    nb = int(n_blocks) if n_blocks is not None else int(rng.integers(2, max_blocks + 1))

    # ---- map
    cells = _grid_cells(rng, n)
    ids = [f"wp{i:02d}" for i in range(n)]
    waypoints = []
    for i, (c, r) in enumerate(cells):
        jx, jy = rng.uniform(-_JITTER, _JITTER, 2)
        waypoints.append(Waypoint(ids[i], round(c * GRID_SPACING + float(jx), 3),
                                  round(r * GRID_SPACING + float(jy), 3),
                                  _YAWS[int(rng.integers(4))],
                                  "cardboard" if rng.random() < 0.3 else "plain"))
    pairs = _grid_edges(rng, cells, extra=max(1, n // 4 + int(rng.integers(0, 2))))
    edges_ids = sorted(edge_key(ids[a], ids[b]) for a, b in pairs)
    pos = {w.id: (w.x, w.y) for w in waypoints}
    edges = tuple(Edge(a, b, round(math.dist(pos[a], pos[b]), 3)) for a, b in edges_ids)
    dock = ids[int(rng.integers(n))]

    # ---- blocks
    colors = list(BLOCK_COLORS)
    chosen = [colors[k] for k in rng.permutation(len(colors))[:nb]]
    spots = [w for w in ids if w != dock]
    places = [spots[k] for k in rng.permutation(len(spots))[:nb]]
    blocks = tuple(Block(f"{c}_block", c, p, (round(float(rng.uniform(0.55, 0.7)), 3),
                                              round(float(rng.uniform(-0.05, 0.05)), 3)))
                   for c, p in zip(chosen, places, strict=True))

    # ---- drift
    events: list[Event] = []
    initially_blocked: set[tuple[str, str]] = set()
    if kind == "combo":
        sem_kind = "swap" if rng.random() < 0.5 else "move"
        topo_kind = "close" if rng.random() < 0.5 else "close_reopen"
        topo_at = first_drift + (phase_len if rng.random() < 0.5 else 0)
    else:
        sem_kind = kind if kind in ("swap", "move") else ""
        topo_kind = kind if kind in ("close", "open", "close_reopen") else ""
        topo_at = first_drift
    if sem_kind:
        if sem_kind == "swap":
            a, b = (blocks[k].id for k in rng.permutation(len(blocks))[:2])
            events.append(SwapBlocks(episode=first_drift, blocks=(a, b)))
        else:
            blk = blocks[int(rng.integers(len(blocks)))]
            free = [w for w in ids if w not in {b.waypoint for b in blocks}]
            to = free[int(rng.integers(len(free)))]
            events.append(MoveBlock(episode=first_drift, block=blk.id, waypoint=to,
                                    offset=(round(float(rng.uniform(0.55, 0.7)), 3), 0.0)))
    if topo_kind:
        events.extend(_topology_events(rng, ids, edges_ids, blocks, dock, topo_kind, topo_at,
                                       phase_len, phases, initially_blocked))
    if initially_blocked:
        edges = tuple(Edge(e.a, e.b, e.length, e.key in initially_blocked) for e in edges)

    # ---- nuisance
    nuisances: list[Event] = []
    if nuisance or kind == "nuisance":
        rate = float(miss_rate) if miss_rate is not None else round(float(rng.uniform(0, 0.15)),
                                                                    3)
        last = max((e.episode or 0 for e in events), default=0)
        horizon = max(30, last + phase_len + 8)
        if rate > 0:
            nuisances.append(MissDetections(episode=0, rate=rate))
        nuisances.append(PoseJitter(episode=0, sigma_xy=round(float(rng.uniform(0, 0.03)), 3),
                                    sigma_yaw=round(float(rng.uniform(0, 0.04)), 3)))
        for _ in range(int(rng.integers(1, 3))):
            nuisances.append(DetectionDropout(episode=int(rng.integers(1, horizon)),
                                              frames=int(rng.integers(1, 3))))
        nudged = blocks[int(rng.integers(len(blocks)))]
        nuisances.append(ShiftBlock(episode=int(rng.integers(1, horizon)), block=nudged.id,
                                    dx=round(float(rng.uniform(-0.04, 0.04)), 3),
                                    dy=round(float(rng.uniform(-0.03, 0.03)), 3)))
        nuisances.append(NewObstacle(episode=int(rng.integers(1, horizon)), id="crate_1",
                                     waypoint=ids[int(rng.integers(n))],
                                     offset=(0.95, round(float(rng.uniform(-0.25, 0.25)), 3)),
                                     size=round(float(rng.uniform(0.2, 0.3)), 3)))
    all_events = sorted([*events, *nuisances], key=lambda e: e.episode or 0)

    world = World(
        name=name or f"gen_{kind}_{seed}",
        waypoints=tuple(waypoints),
        edges=edges,
        dock=dock,
        blocks=blocks,
        events=tuple(all_events),
        robot=RobotSpec(speed=0.5),
        camera=CameraSpec(),
        description=f"generated: kind {kind}, seed {seed}, {n} waypoints, {len(edges)} "
                    f"corridors, {nb} blocks",
        seed=int(seed),
    )
    return world.validate()


def _topology_events(rng: np.random.Generator, ids: list[str], edges: list[tuple[str, str]],
                     blocks: tuple[Block, ...], dock: str, kind: str, at: int, phase_len: int,
                     phases: int | None, initially_blocked: set[tuple[str, str]]
                     ) -> list[Event]:
    """Corridor events that never disconnect the map."""
    block_wps = {b.waypoint for b in blocks} | {dock}

    def pick(closed: set[tuple[str, str]], among: list[tuple[str, str]] | None = None
             ) -> tuple[str, str] | None:
        ok = _bridges_free(ids, edges, closed)
        if among is not None:
            ok = [e for e in ok if e in among]
        if not ok:
            return None
        # prefer corridors next to the places tasks go to (they are on the routes)
        near = [e for e in ok if e[0] in block_wps or e[1] in block_wps]
        pool = near or ok
        return pool[int(rng.integers(len(pool)))]

    first = pick(set())
    if first is None:  # a tree cannot lose an edge; _grid_edges always adds a cycle
        raise ValueError("map has no cycle: no corridor can close without disconnecting it")
    if kind == "close":
        return [BlockEdge(episode=at, edge=first)]
    if kind == "open":
        initially_blocked.add(first)
        return [OpenEdge(episode=at, edge=first)]
    out: list[Event] = [BlockEdge(episode=at, edge=first)]
    count = phases if phases is not None else int(rng.integers(2, 4))
    closed = {first}
    for k in range(1, count):
        ep = at + k * phase_len
        detour = _detour(ids, edges, closed, *first)
        nxt = pick(set(), [e for e in detour if e != first]) or pick(closed)
        if nxt is None:
            break
        out.append(OpenEdge(episode=ep, edge=first))
        out.append(BlockEdge(episode=ep, edge=nxt))
        closed = {nxt}
        first = nxt
    return out


def check_connected_always(world: World) -> list[str]:
    """Replay the world's corridor events; problems where open corridors leave a waypoint
    cut off (empty when the map stays connected at every drift moment)."""
    closed = {e.key for e in world.edges if e.blocked}
    all_edges = [e.key for e in world.edges]
    out = []
    moments = sorted({e.episode or 0 for e in world.events} | {0})
    for m in moments:
        for ev in world.events:
            if (ev.episode or 0) != m:
                continue
            if isinstance(ev, BlockEdge):
                closed.add(edge_key(*ev.edge))
            elif isinstance(ev, OpenEdge):
                closed.discard(edge_key(*ev.edge))
        if not is_connected(world.waypoint_ids, [e for e in all_edges if e not in closed]):
            out.append(f"episode {m}: closed corridors {sorted(closed)} disconnect the map")
    return out


def to_yaml(world: World) -> str:
    """The world as YAML text that :func:`~glove_ros.core.world.worldfile.load_world` reads back."""
    header = f"# {world.description}\n" if world.description else ""
    return header + yaml.safe_dump(world.to_dict(), sort_keys=False, default_flow_style=None)


def save_world(world: World, path: str | Path) -> Path:
    """Write :func:`to_yaml` to ``path`` (parents created); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_yaml(world), encoding="utf-8")
    return p


def summary(world: World) -> dict[str, Any]:
    """JSON-ready facts of a (generated) world: sizes, drift and nuisance events."""
    return {"name": world.name, "waypoints": len(world.waypoints),
            "corridors": len(world.edges), "blocks": len(world.blocks),
            "drift": [e.to_dict() for e in world.drift_events()],
            "nuisance": [e.to_dict() for e in world.nuisance_events()]}
