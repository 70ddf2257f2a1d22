"""The world file: an indoor maze as a waypoint graph, coloured blocks or objects, and
scheduled drift.

A world file is YAML. It describes the *ground truth* the built-in simulator
(:mod:`glove_ros.core.world.sim`) plays and the Gazebo world (:mod:`glove_ros.core.world.sdf`) is
generated from; the robot's memory never reads it. Load it with :func:`load_world`
(or :meth:`World.from_dict`), which validates and raises :class:`ValueError` with every
problem listed, each naming the entry at fault.

Schema (all lengths in metres, angles in radians, times in simulated seconds)::

    name: jetrover_maze            # required, [A-Za-z][A-Za-z0-9_]*
    description: "free text"       # optional
    seed: 0                        # optional int: default seed of the simulator's noise
    dock: dock                     # required: waypoint id of the charging dock
    start: dock                    # optional: where the robot starts (default: dock)

    robot:                         # optional, every key optional (defaults shown)
      speed: 0.3                   # m/s along corridors
      battery_initial: 1.0         # state of charge, 0..1
      drain_per_m: 0.01            # charge used per metre driven
      drain_per_s: 0.0002          # charge used per second when not docked
      charge_per_s: 0.01           # charge gained per second while docked
      blocked_stop_fraction: 0.5   # how far along a blocked corridor the robot gets
      odom_sigma_xy: 0.0           # odometry noise (always on), metres
      odom_sigma_yaw: 0.0          # odometry noise (always on), radians

    camera:                        # optional, every key optional (defaults shown)
      hfov_deg: 70.0               # horizontal field of view
      height: 0.2                  # lens height above the floor
      wall_distance: 1.2           # distance of the wall behind the blocks (and of the
                                   # Gazebo maze boundary from the outer waypoints)
      noise_sigma: 3.0             # per-pixel Gaussian noise, 0..255 scale

    waypoints:                     # required, at least one
      - {id: dock, x: 0.0, y: 0.0, yaw: 0.0}
      - {id: hall, x: 2.0, y: 0.0, yaw: 1.5708, wall: cardboard}  # wall: plain|cardboard
                                                                  # (what the camera sees)
    edges:                         # corridors, undirected; the planner's map
      - [dock, hall]               # length defaults to the straight-line distance
      - [hall, lab, 2.5]           # explicit length
      - {a: lab, b: store, length: 3.0, blocked: true}   # starts blocked (closed door)

    walls:                         # optional extra wall segments (Gazebo only)
      - {x1: 0, y1: -1, x2: 4, y2: -1, height: 0.3, thickness: 0.05}

    blocks:                        # coloured blocks (red|orange|yellow|green|blue|purple)
      - {id: red_block, color: red, waypoint: hall, offset: [0.6, 0.1], size: 0.05}
        # offset = [forward, left] in the waypoint's frame (x along yaw); default [0.6, 0]
        # size = the cube's edge, 0.01..0.5 m
      # ... or objects (a world holds one kind or the other, never both):
      - {id: cup, object: cup, waypoint: kitchen, offset: [0.9, 0.0], size: 0.35}
        # object = a COCO class (any spelling labels.canonical_label knows: mug -> cup);
        # the simulator shows a real photo of it (glove_ros.core.world.photos), size = its
        # height, 0.1..0.8 m, default 0.4 (OBJECT_SIZE); its width follows the photo
    unique_objects: [cup]          # optional: the names (colours or classes) that exist once
                                   # at this site, what the verifier may treat as "seen
                                   # elsewhere = moved"; absent: a colour world infers the
                                   # colours of one block each, an object world declares none
                                   # (a person or a cat is not a fixture)
    scene: {scale: [0.5, 0.9], blur: [0, 1.5]}   # optional, object worlds: each frame's
                                   # photos smaller, off place, cut or covered, the frame
                                   # darker, blurred, noisier (glove_ros/core/world/scene.py)

    events:                        # optional; each has exactly one trigger:
                                   #   episode: N  (applied when episode N begins)
                                   #   time: T     (applied once sim time >= T)
      # drift (must be detected):
      - {episode: 20, type: swap_blocks, blocks: [red_block, blue_block]}   # semantic
      - {episode: 30, type: move_block, block: green_block, waypoint: lab,
         offset: [0.6, 0.0]}                                                # semantic
      - {episode: 10, type: block_edge, edge: [hall, lab]}                  # topological
      - {episode: 40, type: open_edge, edge: [hall, lab]}                   # topological
      # nuisance (must NOT count as drift):
      - {episode: 5, type: shift_block, block: red_block, dx: 0.03, dy: -0.02}  # <= 0.15 m
      - {episode: 0, until_episode: 50, type: miss_detections, rate: 0.1,
         blocks: [red_block]}      # per frame, each listed block (default: all) unseen
      - {episode: 0, until_episode: 50, type: pose_jitter, sigma_xy: 0.02,
         sigma_yaw: 0.03}          # arrival pose and odometry noise
      - {episode: 12, type: new_obstacle, id: box_1, waypoint: store,
         offset: [0.9, -0.3], size: 0.25}   # grey box; never blocks a corridor
      - {episode: 15, type: detection_dropout, frames: 2}  # next N camera frames empty

A world's blocks are either all colour blocks (looks report ``colors=blue,red``) or all
objects (looks report ``objects=cup,person*2``, :mod:`glove_ros.core.memory.looks`):
:attr:`World.look_kind` says which. Events move, swap, shift and hide objects exactly as
they do colour blocks.

Windowed nuisances (``miss_detections``, ``pose_jitter``, ``new_obstacle``) accept
``until_episode`` / ``until_time``: active while ``episode < until_episode`` and
``time < until_time``. Events due at the same moment apply in file order.

Everything is a frozen dataclass; :class:`World` also answers graph questions
(:meth:`World.shortest_path`, :meth:`World.neighbors`, :meth:`World.edge`). Its parts live
beside this module: waypoints, edges, blocks, walls and the robot / camera models in
:mod:`glove_ros.core.world.worldparts`, the events in :mod:`glove_ros.core.world.worldevents`,
the YAML value readers and the event parser in :mod:`glove_ros.core.world.worldparse`.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from glove_ros.core.world.labels import COCO_CLASSES, canonical_label
from glove_ros.core.world.photos import OBJECT_PHOTOS
from glove_ros.core.world.scene import Scene, parse_scene
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
    _Windowed,
)
from glove_ros.core.world.worldparse import _as_float, _Ctx, _list, _parse_event
from glove_ros.core.world.worldparts import (
    OBJECT_SIZE,
    Block,
    CameraSpec,
    Edge,
    RobotSpec,
    Wall,
    Waypoint,
    _fmt,
    edge_key,
)

__all__ = [
    "BLOCK_COLORS",
    "DEFAULT_WORLD",
    "MAX_NUISANCE_SHIFT",
    "OBJECT_SIZE",
    "OBJECT_SIZE_RANGE",
    "World",
    "edge_key",
    "load_world",
    "resolve_world_path",
    "worlds_dir",
]

#: Name of the world the built-in simulator plays when none is given.
DEFAULT_WORLD = "jetrover_maze"

#: Block colours a world may use, with the BGR colour the simulator paints them in.
#: The hues sit in the middle of the HSV ranges of :mod:`glove_ros.core.world.perception`.
BLOCK_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (35, 35, 200),
    "orange": (20, 120, 230),
    "yellow": (30, 210, 220),
    "green": (50, 170, 40),
    "blue": (200, 80, 30),
    "purple": (160, 40, 140),
}

#: Largest shift (metres) a ``shift_block`` nuisance may apply; more is a ``move_block``.
MAX_NUISANCE_SHIFT = 0.15

#: Heights (metres) an object block may have: smaller photos are lost by the detector,
#: taller ones leave the camera's view.
OBJECT_SIZE_RANGE = (0.1, 0.8)

WALL_STYLES = ("plain", "cardboard")

_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------- world


@dataclass(frozen=True)
class World:
    """A validated world: the maze graph, the blocks and the event schedule.

    Build it with :func:`load_world` or :meth:`from_dict`; both call :meth:`validate`.
    """

    name: str
    waypoints: tuple[Waypoint, ...]
    edges: tuple[Edge, ...]
    dock: str
    blocks: tuple[Block, ...] = ()
    events: tuple[Event, ...] = ()
    walls: tuple[Wall, ...] = ()
    start: str | None = None
    robot: RobotSpec = field(default_factory=RobotSpec)
    camera: CameraSpec = field(default_factory=CameraSpec)
    description: str = ""
    seed: int = 0
    unique_objects: tuple[str, ...] | None = None  # declared; None: see unique_names()
    scene: Scene | None = None  # how frames vary (glove_ros/core/world/scene.py); None: plain
    source: str = field(default="", compare=False)  # file it was loaded from, if any

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "", validate: bool = True) -> World:
        """Build a world from the YAML structure documented in the module docstring.

        Raises ValueError naming the entry at fault (unknown keys, wrong types, and, when
        ``validate`` is true, every problem :meth:`validate` finds).
        """
        where = f"world {source}" if source else "world"
        c = _Ctx(data, where)
        c.check_keys({"name", "description", "seed", "dock", "start", "robot", "camera",
                      "waypoints", "edges", "walls", "blocks", "events", "unique_objects",
                      "scene"})
        name = c.str("name")

        robot = RobotSpec()
        if c.has("robot"):
            rc = _Ctx(data["robot"], f"{where}: robot")
            rc.check_keys(f.name for f in fields(RobotSpec))
            robot = RobotSpec(**{f.name: rc.float(f.name, f.default) for f in fields(RobotSpec)})
        camera = CameraSpec()
        if c.has("camera"):
            cc = _Ctx(data["camera"], f"{where}: camera")
            cc.check_keys(f.name for f in fields(CameraSpec))
            camera = CameraSpec(
                **{f.name: cc.float(f.name, f.default) for f in fields(CameraSpec)})

        waypoints = []
        for i, raw in enumerate(_list(data, "waypoints", where, required=True)):
            wc = _Ctx(raw, f"{where}: waypoints[{i}]")
            wc.check_keys({"id", "x", "y", "yaw", "wall"})
            waypoints.append(Waypoint(id=wc.str("id"), x=wc.float("x"), y=wc.float("y"),
                                      yaw=wc.float("yaw", 0.0), wall=wc.str("wall", "plain")))
        poses = {w.id: w for w in waypoints}

        edges = []
        for i, raw in enumerate(_list(data, "edges", where)):
            ew = f"{where}: edges[{i}]"
            blocked = False
            length: float | None = None
            if isinstance(raw, Sequence) and not isinstance(raw, str):
                if len(raw) not in (2, 3):
                    raise ValueError(f"{ew}: expected [a, b] or [a, b, length], got {raw!r}")
                a, b = raw[0], raw[1]
                if not isinstance(a, str) or not isinstance(b, str):
                    raise ValueError(f"{ew}: waypoint ids must be strings, got {raw!r}")
                if len(raw) == 3:
                    length = _as_float(raw[2], f"{ew}: length")
            else:
                ec = _Ctx(raw, ew)
                ec.check_keys({"a", "b", "length", "blocked"})
                a, b = ec.str("a"), ec.str("b")
                length = ec.float("length", None)
                blocked = ec.bool("blocked", False)
            if length is None:
                if a in poses and b in poses:
                    length = math.hypot(poses[a].x - poses[b].x, poses[a].y - poses[b].y)
                else:
                    length = float("nan")  # reported by validate() as an edge to nowhere
            edges.append(Edge(a=a, b=b, length=length, blocked=blocked))

        walls = []
        for i, raw in enumerate(_list(data, "walls", where)):
            wc = _Ctx(raw, f"{where}: walls[{i}]")
            wc.check_keys({"x1", "y1", "x2", "y2", "height", "thickness"})
            walls.append(Wall(x1=wc.float("x1"), y1=wc.float("y1"), x2=wc.float("x2"),
                              y2=wc.float("y2"), height=wc.float("height", 0.3),
                              thickness=wc.float("thickness", 0.05)))

        blocks = []
        for i, raw in enumerate(_list(data, "blocks", where)):
            bc = _Ctx(raw, f"{where}: blocks[{i}]")
            bc.check_keys({"id", "color", "object", "waypoint", "offset", "size"})
            if bc.has("object"):
                if bc.has("color"):
                    raise ValueError(f"{bc.where}: give 'color' (a colour block) or 'object' "
                                     "(a COCO class), not both")
                if not bc.str("object").strip():
                    raise ValueError(f"{bc.where}: 'object' is empty; name a COCO class "
                                     "(e.g. cup, person)")
                blocks.append(Block(id=bc.str("id"), color="",
                                    object=canonical_label(bc.str("object")),
                                    waypoint=bc.str("waypoint"),
                                    offset=bc.pair("offset", (0.6, 0.0)),
                                    size=bc.float("size", OBJECT_SIZE)))
                continue
            if not bc.has("color"):
                raise ValueError(f"{bc.where}: missing 'color' (a colour block: "
                                 f"{', '.join(BLOCK_COLORS)}) or 'object' (a COCO class, "
                                 "e.g. cup, person)")
            blocks.append(Block(id=bc.str("id"), color=bc.str("color"),
                                waypoint=bc.str("waypoint"), offset=bc.pair("offset", (0.6, 0.0)),
                                size=bc.float("size", 0.05)))

        events = [_parse_event(raw, f"{where}: events[{i}]")
                  for i, raw in enumerate(_list(data, "events", where))]

        world = cls(
            name=name,
            waypoints=tuple(waypoints),
            edges=tuple(edges),
            dock=c.str("dock"),
            blocks=tuple(blocks),
            events=tuple(events),
            walls=tuple(walls),
            start=c.str("start", None),
            robot=robot,
            camera=camera,
            description=c.str("description", ""),
            seed=c.int("seed", 0),
            unique_objects=_unique_objects(data, where),
            scene=parse_scene(data.get("scene"), where),
            source=source,
        )
        if validate:
            world.validate()
        return world

    def to_dict(self) -> dict[str, Any]:
        """The YAML structure of this world; ``World.from_dict(w.to_dict()) == w``."""
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["seed"] = self.seed
        d["dock"] = self.dock
        if self.start is not None:
            d["start"] = self.start
        d["robot"] = {f.name: getattr(self.robot, f.name) for f in fields(RobotSpec)}
        d["camera"] = {f.name: getattr(self.camera, f.name) for f in fields(CameraSpec)}
        d["waypoints"] = [{"id": w.id, "x": w.x, "y": w.y, "yaw": w.yaw, "wall": w.wall}
                          for w in self.waypoints]
        d["edges"] = [{"a": e.a, "b": e.b, "length": e.length, "blocked": e.blocked}
                      for e in self.edges]
        if self.walls:
            d["walls"] = [{"x1": w.x1, "y1": w.y1, "x2": w.x2, "y2": w.y2, "height": w.height,
                           "thickness": w.thickness} for w in self.walls]
        d["blocks"] = [{"id": b.id, **({"object": b.object} if b.object else {"color": b.color}),
                        "waypoint": b.waypoint, "offset": list(b.offset), "size": b.size}
                       for b in self.blocks]
        d["events"] = [e.to_dict() for e in self.events]
        if self.unique_objects is not None:
            d["unique_objects"] = list(self.unique_objects)
        if self.scene is not None:
            d["scene"] = self.scene.to_dict()
        return d

    # ------------------------------------------------------------------ validation

    def problems(self) -> list[str]:
        """Every problem with this world, as actionable messages (empty when valid)."""
        out: list[str] = []
        if not _ID_RE.match(self.name):
            out.append(f"name '{self.name}' must match [A-Za-z][A-Za-z0-9_]*")
        out.extend(self.robot.problems())
        out.extend(self.camera.problems())

        # waypoints
        if not self.waypoints:
            out.append("waypoints: at least one waypoint is required")
        wp_ids: set[str] = set()
        for w in self.waypoints:
            if not _ID_RE.match(w.id):
                out.append(f"waypoint id '{w.id}' must match [A-Za-z][A-Za-z0-9_]* "
                           "(it becomes a ROS name and an SDF model name)")
            if w.id in wp_ids:
                out.append(f"duplicate waypoint id '{w.id}'")
            wp_ids.add(w.id)
            if not all(math.isfinite(v) for v in (w.x, w.y, w.yaw)):
                out.append(f"waypoint '{w.id}': x, y, yaw must be finite numbers")
            if w.wall not in WALL_STYLES:
                out.append(f"waypoint '{w.id}': wall '{w.wall}' is not one of "
                           f"{', '.join(WALL_STYLES)}")
        for label, ref in (("dock", self.dock), ("start", self.start)):
            if ref is not None and ref not in wp_ids:
                out.append(f"{label} '{ref}' is not a waypoint (known: {_known(wp_ids)})")

        # edges
        seen_edges: set[tuple[str, str]] = set()
        for e in self.edges:
            label = f"edge {e.a}-{e.b}"
            missing = [x for x in (e.a, e.b) if x not in wp_ids]
            if missing:
                out.append(f"{label} leads to nowhere: unknown waypoint(s) "
                           f"{', '.join(missing)} (known: {_known(wp_ids)})")
                continue
            if e.a == e.b:
                out.append(f"{label} connects a waypoint to itself")
            if e.key in seen_edges:
                out.append(f"duplicate {label} (edges are undirected: list each pair once)")
            seen_edges.add(e.key)
            if not math.isfinite(e.length) or e.length <= 0:
                out.append(f"{label}: length must be a positive number of metres, "
                           f"got {_fmt(e.length)}")

        # connectivity (ignoring blocked state: the map a planner has)
        if self.dock in wp_ids and not [p for p in out if p.startswith("edge")]:
            reach = self._reachable(self.dock)
            cut = [w.id for w in self.waypoints if w.id not in reach]
            if cut:
                out.append(f"waypoint(s) {', '.join(cut)} cannot be reached from the dock "
                           f"'{self.dock}' through any edge: add an edge or remove them")

        for i, w in enumerate(self.walls):
            if not all(math.isfinite(v) for v in (w.x1, w.y1, w.x2, w.y2)):
                out.append(f"walls[{i}]: coordinates must be finite")
            if w.length <= 1e-6:
                out.append(f"walls[{i}]: zero-length wall")
            if w.height <= 0 or w.thickness <= 0:
                out.append(f"walls[{i}]: height and thickness must be > 0")

        # blocks
        block_ids: set[str] = set()
        for b in self.blocks:
            if not _ID_RE.match(b.id):
                out.append(f"block id '{b.id}' must match [A-Za-z][A-Za-z0-9_]*")
            if b.id in block_ids:
                out.append(f"duplicate block id '{b.id}'")
            if b.id in wp_ids:
                out.append(f"block id '{b.id}' is also a waypoint id; use distinct names")
            block_ids.add(b.id)
            if b.object:
                out.extend(_object_problems(b))
            elif b.color not in BLOCK_COLORS:
                out.append(f"block '{b.id}': bad colour '{b.color}'; use one of "
                           f"{', '.join(BLOCK_COLORS)}")
            if b.waypoint not in wp_ids:
                out.append(f"block '{b.id}': unknown waypoint '{b.waypoint}' "
                           f"(known: {_known(wp_ids)})")
            if not b.object and not (math.isfinite(b.size) and 0.01 <= b.size <= 0.5):
                out.append(f"block '{b.id}': size must be 0.01..0.5 m, got {_fmt(b.size)}")
            out.extend(self._view_problems(f"block '{b.id}'", b.offset, _extent(b)))
        kinds = {"object" if b.object else "colour" for b in self.blocks}
        if len(kinds) > 1:
            colour = sorted(b.id for b in self.blocks if not b.object)
            objects = sorted(b.id for b in self.blocks if b.object)
            out.append(f"blocks: a world holds colour blocks or objects, not both (colour: "
                       f"{', '.join(colour)}; object: {', '.join(objects)}); a look reports "
                       "either colors= or objects=")

        # events
        obstacle_ids: set[str] = set()
        for i, ev in enumerate(self.events):
            label = f"events[{i}] ({ev.type})"
            if (ev.episode is None) == (ev.time is None):
                out.append(f"{label}: give exactly one trigger, 'episode' or 'time'")
            if ev.episode is not None and ev.episode < 0:
                out.append(f"{label}: episode must be >= 0, got {ev.episode}")
            if ev.time is not None and not (math.isfinite(ev.time) and ev.time >= 0):
                out.append(f"{label}: time must be >= 0 s, got {_fmt(ev.time)}")
            if isinstance(ev, _Windowed):
                if ev.until_episode is not None and ev.episode is not None \
                        and ev.until_episode <= ev.episode:
                    out.append(f"{label}: until_episode must be after episode")
                if ev.until_time is not None and ev.time is not None \
                        and ev.until_time <= ev.time:
                    out.append(f"{label}: until_time must be after time")
            out.extend(self._event_problems(label, ev, wp_ids, block_ids, seen_edges,
                                            obstacle_ids))
        return out

    def validate(self) -> World:
        """Raise ValueError listing every problem; return ``self`` when valid."""
        problems = self.problems()
        names = {b.name for b in self.blocks}
        problems += [f"unique_objects: '{n}' is not the colour or class of any block (blocks: "
                     f"{', '.join(sorted(names)) or 'none'})"
                     for n in self.unique_objects or () if n not in names]
        if problems:
            where = f" ({self.source})" if self.source else ""
            raise ValueError(f"invalid world '{self.name}'{where}:\n  - "
                             + "\n  - ".join(problems))
        return self

    def _view_problems(self, label: str, offset: tuple[float, float], size: float) -> list[str]:
        fwd, left = offset
        if not (math.isfinite(fwd) and math.isfinite(left)):
            return [f"{label}: offset must be finite"]
        half = math.radians(self.camera.hfov_deg) / 2
        if fwd < 0.25 or fwd > self.camera.wall_distance - 0.1:
            return [f"{label}: offset forward {_fmt(fwd)} m must be in 0.25.."
                    f"{_fmt(self.camera.wall_distance - 0.1)} (in front of the camera, before "
                    "the wall)"]
        limit = fwd * math.tan(half) * 0.8 - size - MAX_NUISANCE_SHIFT
        if abs(left) > limit:
            return [f"{label}: offset left {_fmt(left)} m puts it at the edge of or outside "
                    f"the camera's view; keep |left| <= {_fmt(round(max(limit, 0.0), 3))} at "
                    f"forward {_fmt(fwd)}"]
        return []

    def _event_problems(self, label: str, ev: Event, wp_ids: set[str], block_ids: set[str],
                        edge_keys: set[tuple[str, str]], obstacle_ids: set[str]) -> list[str]:
        out: list[str] = []

        def need_block(bid: str) -> None:
            if bid not in block_ids:
                out.append(f"{label}: unknown block '{bid}' (known: {_known(block_ids)})")

        def need_waypoint(wid: str) -> None:
            if wid not in wp_ids:
                out.append(f"{label}: unknown waypoint '{wid}' (known: {_known(wp_ids)})")

        if isinstance(ev, SwapBlocks):
            for bid in ev.blocks:
                need_block(bid)
            if ev.blocks[0] == ev.blocks[1]:
                out.append(f"{label}: cannot swap block '{ev.blocks[0]}' with itself")
        elif isinstance(ev, MoveBlock):
            need_block(ev.block)
            need_waypoint(ev.waypoint)
            size = next((_extent(b) for b in self.blocks if b.id == ev.block), 0.05)
            out.extend(self._view_problems(label, ev.offset, size))
        elif isinstance(ev, (BlockEdge, OpenEdge)):
            a, b = ev.edge
            for wid in (a, b):
                need_waypoint(wid)
            if a in wp_ids and b in wp_ids and edge_key(a, b) not in edge_keys:
                out.append(f"{label}: there is no edge {a}-{b}; {ev.type} only applies to "
                           "corridors listed under 'edges'")
        elif isinstance(ev, ShiftBlock):
            need_block(ev.block)
            shift = math.hypot(ev.dx, ev.dy)
            if not math.isfinite(shift) or shift > MAX_NUISANCE_SHIFT:
                out.append(f"{label}: a shift of {_fmt(shift)} m is more than a nuisance "
                           f"(max {_fmt(MAX_NUISANCE_SHIFT)} m); use move_block for drift")
        elif isinstance(ev, MissDetections):
            if not (math.isfinite(ev.rate) and 0.0 <= ev.rate <= 1.0):
                out.append(f"{label}: rate must be in 0..1, got {_fmt(ev.rate)}")
            for bid in ev.blocks:
                need_block(bid)
        elif isinstance(ev, PoseJitter):
            if not (0.0 <= ev.sigma_xy <= 0.1):
                out.append(f"{label}: sigma_xy must be in 0..0.1 m, got {_fmt(ev.sigma_xy)}")
            if not (0.0 <= ev.sigma_yaw <= 0.1):
                out.append(f"{label}: sigma_yaw must be in 0..0.1 rad, got "
                           f"{_fmt(ev.sigma_yaw)}")
        elif isinstance(ev, NewObstacle):
            if not _ID_RE.match(ev.id):
                out.append(f"{label}: obstacle id '{ev.id}' must match [A-Za-z][A-Za-z0-9_]*")
            if ev.id in obstacle_ids or ev.id in block_ids or ev.id in wp_ids:
                out.append(f"{label}: duplicate id '{ev.id}' (obstacle ids must differ from "
                           "other obstacles, blocks and waypoints)")
            obstacle_ids.add(ev.id)
            need_waypoint(ev.waypoint)
            if not (0.02 <= ev.size <= 1.0):
                out.append(f"{label}: size must be 0.02..1.0 m, got {_fmt(ev.size)}")
            if not (0.2 <= ev.offset[0] <= self.camera.wall_distance):
                out.append(f"{label}: offset forward must be 0.2.."
                           f"{_fmt(self.camera.wall_distance)} m")
        elif isinstance(ev, DetectionDropout) and ev.frames < 1:
            out.append(f"{label}: frames must be >= 1, got {ev.frames}")
        return out

    # ------------------------------------------------------------------ queries

    @property
    def start_waypoint(self) -> str:
        """Where the robot starts: ``start`` if given, else the dock."""
        return self.start if self.start is not None else self.dock

    @property
    def waypoint_ids(self) -> tuple[str, ...]:
        """Waypoint ids in file order."""
        return tuple(w.id for w in self.waypoints)

    @property
    def colors(self) -> tuple[str, ...]:
        """Sorted distinct colours of the colour blocks (() in an object world)."""
        return tuple(sorted({b.color for b in self.blocks if not b.object}))

    @property
    def objects(self) -> tuple[str, ...]:
        """Sorted distinct object classes of the object blocks (() in a colour world)."""
        return tuple(sorted({b.object for b in self.blocks if b.object}))

    def unique_names(self) -> tuple[str, ...]:
        """The names the verifier may treat as existing once here: the declared
        ``unique_objects``, else, in a colour world, the colours of exactly one block (an
        object world declares its fixtures; nothing is assumed of a person)."""
        if self.unique_objects is not None:
            return self.unique_objects
        if self.look_kind == "objects":
            return ()
        counts: dict[str, int] = {}
        for b in self.blocks:
            counts[b.name] = counts.get(b.name, 0) + 1
        return tuple(sorted(n for n, k in counts.items() if k == 1))

    @property
    def look_kind(self) -> str:
        """What a look reports here: ``"objects"`` when the world has object blocks, else
        ``"colors"`` (the kinds of :mod:`glove_ros.core.memory.looks`)."""
        return "objects" if any(b.object for b in self.blocks) else "colors"

    def has_waypoint(self, waypoint_id: str) -> bool:
        """Whether ``waypoint_id`` names a waypoint."""
        return any(w.id == waypoint_id for w in self.waypoints)

    def waypoint(self, waypoint_id: str) -> Waypoint:
        """The waypoint named ``waypoint_id``; KeyError with the known ids otherwise."""
        for w in self.waypoints:
            if w.id == waypoint_id:
                return w
        raise KeyError(f"unknown waypoint '{waypoint_id}' (known: {_known(self.waypoint_ids)})")

    def block(self, block_id: str) -> Block:
        """The block named ``block_id``; KeyError otherwise."""
        for b in self.blocks:
            if b.id == block_id:
                return b
        raise KeyError(f"unknown block '{block_id}'")

    def edge(self, a: str, b: str) -> Edge | None:
        """The edge between ``a`` and ``b`` (either order), or None."""
        key = edge_key(a, b)
        for e in self.edges:
            if e.key == key:
                return e
        return None

    def neighbors(self, waypoint_id: str) -> tuple[str, ...]:
        """Waypoints one edge away (blocked or not), sorted."""
        return tuple(sorted(e.other(waypoint_id) for e in self.edges
                            if waypoint_id in (e.a, e.b)))

    def blocks_at(self, waypoint_id: str) -> tuple[Block, ...]:
        """Blocks initially placed at ``waypoint_id`` (before any event)."""
        return tuple(b for b in self.blocks if b.waypoint == waypoint_id)

    def drift_events(self) -> tuple[Event, ...]:
        """Events the memory must notice (semantic and topological)."""
        return tuple(e for e in self.events if e.is_drift)

    def nuisance_events(self) -> tuple[Event, ...]:
        """Events the memory must tolerate."""
        return tuple(e for e in self.events if not e.is_drift)

    def shortest_path(
        self,
        start: str,
        goal: str,
        *,
        avoid_edges: Iterable[tuple[str, str]] = (),
    ) -> list[str] | None:
        """Shortest waypoint path from ``start`` to ``goal`` over the map (Dijkstra).

        The map holds every edge, including ones whose ground truth is blocked: the robot
        learns about blockages by driving. ``avoid_edges`` (pairs, either order) are left
        out, e.g. corridors the agent's memory believes blocked. Ties break by waypoint id,
        so the answer is deterministic. Returns None when no path exists; KeyError for an
        unknown waypoint.
        """
        self.waypoint(start)
        self.waypoint(goal)
        avoid = {edge_key(a, b) for a, b in avoid_edges}
        adjacency: dict[str, list[tuple[str, float]]] = {w.id: [] for w in self.waypoints}
        for e in self.edges:
            if e.key in avoid:
                continue
            adjacency[e.a].append((e.b, e.length))
            adjacency[e.b].append((e.a, e.length))
        best = {start: 0.0}
        prev: dict[str, str] = {}
        heap: list[tuple[float, str]] = [(0.0, start)]
        done: set[str] = set()
        while heap:
            dist, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            if node == goal:
                break
            for nxt, length in sorted(adjacency[node]):
                nd = dist + length
                if nd < best.get(nxt, math.inf) - 1e-12:
                    best[nxt] = nd
                    prev[nxt] = node
                    heapq.heappush(heap, (nd, nxt))
        if goal not in done:
            return None
        path = [goal]
        while path[-1] != start:
            path.append(prev[path[-1]])
        return path[::-1]

    def path_length(self, path: Sequence[str]) -> float:
        """Total edge length along ``path``; ValueError if two steps are not connected."""
        total = 0.0
        for a, b in zip(path[:-1], path[1:], strict=True):
            e = self.edge(a, b)
            if e is None:
                raise ValueError(f"no edge {a}-{b}")
            total += e.length
        return total

    def _reachable(self, start: str) -> set[str]:
        seen = {start}
        stack = [start]
        while stack:
            node = stack.pop()
            for nxt in self.neighbors(node):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


def _known(ids: Iterable[str]) -> str:
    ids = sorted(ids)
    return ", ".join(ids) if ids else "none"


def _extent(b: Block) -> float:
    """How wide a block is across the camera's view: a cube's edge; an object's height
    times its photo's aspect (the height where the class has no photo)."""
    if not b.object:
        return b.size
    photo = OBJECT_PHOTOS.get(b.object)
    return b.size * (photo.aspect if photo is not None else 1.0)


def _object_problems(b: Block) -> list[str]:
    out = []
    if b.color:
        out.append(f"block '{b.id}': give a colour ('{b.color}') or an object class "
                   f"('{b.object}'), not both")
    if b.object not in COCO_CLASSES:
        canon = canonical_label(b.object)
        hint = (f" (write '{canon}')" if canon in COCO_CLASSES else
                " (not one of the 80 COCO classes the detector knows, e.g. "
                f"{', '.join(COCO_CLASSES[:6])}, cup, chair, ...; synonyms such as mug, "
                "sofa, tv monitor are accepted)")
        out.append(f"block '{b.id}': unknown object class '{b.object}'{hint}")
    lo, hi = OBJECT_SIZE_RANGE
    if not (math.isfinite(b.size) and lo <= b.size <= hi):
        out.append(f"block '{b.id}': an object's size (its height) must be {_fmt(lo)}.."
                   f"{_fmt(hi)} m, got {_fmt(b.size)}")
    return out


# --------------------------------------------------------------------------- files


def worlds_dir() -> Path:
    """The bundled worlds: ``glove_ros/data/worlds`` when installed, else the repo's
    ``worlds/`` folder next to the package."""
    here = Path(__file__).resolve().parents[2]  # the glove_ros package
    installed = here / "data" / "worlds"
    if installed.is_dir():
        return installed
    return here.parent / "worlds"


def resolve_world_path(name_or_path: str | Path) -> Path:
    """A path to a world file: an existing path as is, else ``NAME`` or ``NAME.yaml`` in
    :func:`worlds_dir`. FileNotFoundError lists the bundled worlds."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    base = worlds_dir()
    for candidate in (base / p.name, base / f"{p.name}.yaml"):
        if candidate.is_file():
            return candidate
    bundled = sorted(x.stem for x in base.glob("*.yaml")) if base.is_dir() else []
    raise FileNotFoundError(f"world file '{name_or_path}' not found (bundled worlds in {base}: "
                            f"{', '.join(bundled) or 'none'})")


def load_world(path: str | Path = DEFAULT_WORLD) -> World:
    """Read, parse and validate a world file (a path or a bundled world's name)."""
    resolved = resolve_world_path(path)
    try:
        data = yaml.safe_load(resolved.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"world file {resolved}: not valid YAML: {exc}") from exc
    return World.from_dict(data, source=str(resolved))


def _unique_objects(data: Any, where: str) -> tuple[str, ...] | None:
    """The optional top-level ``unique_objects`` list, canonical and sorted."""
    if not isinstance(data, dict) or "unique_objects" not in data:
        return None
    raw = data["unique_objects"]
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise ValueError(f"{where}: unique_objects must be a list of names (colours or object "
                         f"classes), got {raw!r}")
    return tuple(sorted({canonical_label(x) for x in raw}))
