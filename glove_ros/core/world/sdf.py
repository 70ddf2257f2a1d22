"""Gazebo SDF (1.9) world generated from a world file (no ROS, no Gazebo needed).

:func:`world_to_sdf` writes one ``<world>`` holding:

* ``ground_plane``: a static plane under the whole maze, and a sun;
* ``maze_walls``: one static model with a box per wall: the maze boundary (a rectangle
  ``camera.wall_distance`` outside the outermost waypoints, so the simulated camera and
  Gazebo agree on how far the wall behind a block is), the world file's extra ``walls``,
  and walls between *absent* edges (two waypoints as close as the map's shortest corridor
  with no corridor between them get a wall across the midpoint, unless it would cut an
  open corridor, a waypoint or a block);
* ``barrier_A_B``: a static wall across each corridor blocked at the chosen episode. Each
  is its own model so that the gz_events node can delete it to re-open the corridor (or
  spawn :func:`barrier_sdf` to block one; :mod:`glove_ros.core.world.gzevents`);
* ``block_ID``: a small dynamic box of the block's colour where the block is at the chosen
  episode (swaps and moves applied; :func:`block_sdf` gives one for spawning);
* ``obstacle_ID``: grey boxes of ``new_obstacle`` nuisances active at that episode;
* ``waypoint_ID``: visual-only markers (a disc and an arrow along the waypoint's yaw; the
  dock's disc is green), no collision;
* the world's system plugins (Physics, UserCommands for the create / remove / set_pose
  services the drift events use, SceneBroadcaster, Sensors with ogre2), named for Gazebo
  Fortress or Harmonic (``gz_version``; :mod:`glove_ros.core.world.gzrobot`);
* ``jetrover``: the robot model (diff drive, camera, 2-D lidar) at ``world.start_waypoint``
  (its pose is also written in a comment at the top of the world); ``robot=False`` leaves
  it out, to spawn :func:`~glove_ros.core.world.gzrobot.robot_sdf` yourself.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from glove_ros.core.world.gzrobot import ROBOT, gz_flavour, robot_model_sdf, world_plugins
from glove_ros.core.world.sim import Obstacle, WorldState
from glove_ros.core.world.worldfile import BLOCK_COLORS, World, edge_key

__all__ = ["SDF_VERSION", "barrier_sdf", "block_sdf", "maze_walls", "obstacle_sdf",
           "world_to_sdf"]

#: SDF version written (libsdformat 12 / Gazebo Fortress and newer read it).
SDF_VERSION = "1.9"

_WALL_HEIGHT = 0.3
_WALL_THICKNESS = 0.05
_CORRIDOR_WIDTH = 0.8


def _f(x: float) -> str:
    """Compact decimal for SDF text (no exponent, no -0)."""
    s = f"{x:.4f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _rgba(bgr: tuple[int, int, int], alpha: float = 1.0) -> str:
    b, g, r = bgr
    return f"{_f(r / 255)} {_f(g / 255)} {_f(b / 255)} {_f(alpha)}"


def _material(rgba: str) -> str:
    return (f"<material><ambient>{rgba}</ambient><diffuse>{rgba}</diffuse>"
            "<specular>0.1 0.1 0.1 1</specular></material>")


def _box_geometry(sx: float, sy: float, sz: float) -> str:
    return f"<geometry><box><size>{_f(sx)} {_f(sy)} {_f(sz)}</size></box></geometry>"


def _pose(x: float, y: float, z: float, yaw: float = 0.0) -> str:
    return f"<pose>{_f(x)} {_f(y)} {_f(z)} 0 0 {_f(yaw)}</pose>"


# --------------------------------------------------------------------------- geometry


Segment = tuple[float, float, float, float, float, float]  # x1, y1, x2, y2, height, thickness


def _segments_cross(p1, p2, q1, q2) -> bool:
    """Proper intersection of segments p1p2 and q1q2 (touching ends count)."""

    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if abs(v) < 1e-12 else (1 if v > 0 else -1)

    def on_seg(a, b, c):
        return (min(a[0], b[0]) - 1e-9 <= c[0] <= max(a[0], b[0]) + 1e-9
                and min(a[1], b[1]) - 1e-9 <= c[1] <= max(a[1], b[1]) + 1e-9)

    o1, o2 = orient(p1, p2, q1), orient(p1, p2, q2)
    o3, o4 = orient(q1, q2, p1), orient(q1, q2, p2)
    if o1 != o2 and o3 != o4:
        return True
    return ((o1 == 0 and on_seg(p1, p2, q1)) or (o2 == 0 and on_seg(p1, p2, q2))
            or (o3 == 0 and on_seg(q1, q2, p1)) or (o4 == 0 and on_seg(q1, q2, p2)))


def _point_segment_distance(p, a, b) -> float:
    ax, ay = a
    bx, by = b
    dx, dy = bx - ax, by - ay
    n2 = dx * dx + dy * dy
    t = 0.0 if n2 == 0 else max(0.0, min(1.0, ((p[0] - ax) * dx + (p[1] - ay) * dy) / n2))
    return math.hypot(p[0] - (ax + t * dx), p[1] - (ay + t * dy))


def _across(world: World, a: str, b: str, length: float) -> tuple[float, float, float, float]:
    """A segment of ``length`` across the straight line a-b at its midpoint."""
    wa, wb = world.waypoint(a), world.waypoint(b)
    mx, my = (wa.x + wb.x) / 2, (wa.y + wb.y) / 2
    dx, dy = wb.x - wa.x, wb.y - wa.y
    n = math.hypot(dx, dy) or 1.0
    px, py = -dy / n * length / 2, dx / n * length / 2
    return (mx - px, my - py, mx + px, my + py)


def _bounds(world: World) -> tuple[float, float, float, float]:
    m = world.camera.wall_distance
    xs = [w.x for w in world.waypoints]
    ys = [w.y for w in world.waypoints]
    return (min(xs) - m, min(ys) - m, max(xs) + m, max(ys) + m)


def maze_walls(world: World, *, absent_edge_walls: bool = True) -> list[Segment]:
    """Wall segments of the maze (boundary, the file's ``walls``, absent-edge walls).

    Barriers on blocked corridors are not included (they change with the episode).
    """
    x0, y0, x1, y1 = _bounds(world)
    h, t = _WALL_HEIGHT, _WALL_THICKNESS
    out: list[Segment] = [
        (x0, y0, x1, y0, h, t), (x1, y0, x1, y1, h, t),
        (x1, y1, x0, y1, h, t), (x0, y1, x0, y0, h, t),
    ]
    out.extend((w.x1, w.y1, w.x2, w.y2, w.height, w.thickness) for w in world.walls)
    if not absent_edge_walls or not world.edges:
        return out
    pos = {w.id: (w.x, w.y) for w in world.waypoints}
    straight = [math.dist(pos[e.a], pos[e.b]) for e in world.edges]
    reach = 1.05 * min(straight)
    have = {e.key for e in world.edges}
    objects = [pos[w] for w in pos]
    state = WorldState(world)
    objects.extend(state.block_position(b.id) for b in world.blocks)
    ids = world.waypoint_ids
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if edge_key(a, b) in have or math.dist(pos[a], pos[b]) > reach:
                continue
            seg = _across(world, a, b, 0.9 * math.dist(pos[a], pos[b]))
            p, q = (seg[0], seg[1]), (seg[2], seg[3])
            if any(_segments_cross(p, q, pos[e.a], pos[e.b]) for e in world.edges):
                continue
            if any(_point_segment_distance(o, p, q) < 0.15 for o in objects):
                continue
            out.append((*seg, h, t))
    return out


# --------------------------------------------------------------------------- models


def _wall_elements(name: str, seg: Segment) -> str:
    x1, y1, x2, y2, h, t = seg
    length = math.hypot(x2 - x1, y2 - y1)
    yaw = math.atan2(y2 - y1, x2 - x1)
    pose = _pose((x1 + x2) / 2, (y1 + y2) / 2, h / 2, yaw)
    geom = _box_geometry(length + t, t, h)
    return (f'<collision name="{name}_collision">{pose}{geom}</collision>'
            f'<visual name="{name}_visual">{pose}{geom}'
            f"{_material('0.85 0.82 0.76 1')}</visual>")


def _barrier_model(world: World, a: str, b: str) -> str:
    a, b = edge_key(a, b)
    x1, y1, x2, y2 = _across(world, a, b, _CORRIDOR_WIDTH)
    seg = (x1, y1, x2, y2, _WALL_HEIGHT, 0.1)
    return (f'<model name="barrier_{a}_{b}"><static>true</static><link name="link">'
            f"{_wall_elements('barrier', seg)}</link></model>")


def _box_model(name: str, x: float, y: float, yaw: float, size: float, height: float,
               rgba: str, *, static: bool, mass: float = 0.05) -> str:
    geom = _box_geometry(size, size, height)
    inertial = ""
    if not static:
        i_xx = mass * (size * size + height * height) / 12
        i_zz = mass * (2 * size * size) / 12
        inertial = (f"<inertial><mass>{_f(mass)}</mass><inertia><ixx>{i_xx:.3e}</ixx>"
                    f"<ixy>0</ixy><ixz>0</ixz><iyy>{i_xx:.3e}</iyy><iyz>0</iyz>"
                    f"<izz>{i_zz:.3e}</izz></inertia></inertial>")
    return (f'<model name="{name}"><static>{str(static).lower()}</static>'
            f"{_pose(x, y, height / 2, yaw)}<link name=\"link\">{inertial}"
            f'<collision name="collision">{geom}</collision>'
            f'<visual name="visual">{geom}{_material(rgba)}</visual></link></model>')


def _block_model(world: World, state: WorldState, block_id: str) -> str:
    p = state.placement(block_id)
    x, y = state.block_position(block_id)
    yaw = world.waypoint(p.waypoint).yaw
    if not p.color:  # an object block: a stand-in box of its size (no photo in Gazebo; give
        # the model a mesh of the real thing for a trained detector to see)
        return _box_model(f"object_{block_id}", x, y, yaw, p.size, p.size,
                          "0.85 0.85 0.85 1", static=False)
    return _box_model(f"block_{block_id}", x, y, yaw, p.size, p.size,
                      _rgba(BLOCK_COLORS[p.color]), static=False)


def _waypoint_model(world: World, waypoint: str) -> str:
    w = world.waypoint(waypoint)
    dock = waypoint == world.dock
    disc = "0.2 0.75 0.3 0.8" if dock else "0.95 0.85 0.2 0.6"
    r = 0.12 if dock else 0.08
    return (f'<model name="waypoint_{w.id}"><static>true</static>{_pose(w.x, w.y, 0.001, w.yaw)}'
            '<link name="link">'
            f'<visual name="disc"><geometry><cylinder><radius>{_f(r)}</radius>'
            f"<length>0.002</length></cylinder></geometry>{_material(disc)}</visual>"
            f'<visual name="arrow"><pose>{_f(r)} 0 0.001 0 0 0</pose>'
            f"{_box_geometry(0.1, 0.02, 0.002)}{_material('0.2 0.2 0.2 1')}</visual>"
            "</link></model>")


def _wrap_model(model_xml: str) -> str:
    return f'<?xml version="1.0" ?>\n<sdf version="{SDF_VERSION}">{model_xml}</sdf>\n'


def barrier_sdf(world: World, a: str, b: str) -> str:
    """A standalone SDF model ``barrier_A_B`` blocking corridor a-b (for spawning)."""
    if world.edge(a, b) is None:
        raise ValueError(f"there is no edge {a}-{b} in world '{world.name}'")
    return _wrap_model(_barrier_model(world, a, b))


def block_sdf(world: World, block_id: str, *, episode: int = 0) -> str:
    """A standalone SDF model ``block_ID`` where the block is at ``episode``."""
    world.block(block_id)
    state = WorldState(world)
    state.advance(episode=episode)
    return _wrap_model(_block_model(world, state, block_id))


def _obstacle_model(world: World, state: WorldState, o: Obstacle) -> str:
    x, y = state.object_position(o.waypoint, o.offset)
    return _box_model(f"obstacle_{o.id}", x, y, world.waypoint(o.waypoint).yaw,
                      o.size, o.size * 0.8, "0.36 0.37 0.38 1", static=True)


def obstacle_sdf(world: World, obstacle: Obstacle) -> str:
    """A standalone SDF model ``obstacle_ID`` of a ``new_obstacle`` nuisance (for spawning)."""
    world.waypoint(obstacle.waypoint)
    return _wrap_model(_obstacle_model(world, WorldState(world), obstacle))


def world_to_sdf(world: World, *, episode: int = 0, absent_edge_walls: bool = True,
                 waypoint_markers: bool = True, gz_version: str = "fortress",
                 robot: bool = True) -> str:
    """The Gazebo world of ``world`` as it stands when ``episode`` begins (SDF 1.9 text).

    Blocked corridors, block places and nuisance obstacles follow the events due by
    ``episode``; ``gz_version`` (fortress | harmonic) names the system plugins; ``robot``
    puts the robot model at the start waypoint. See the module docstring.
    """
    if episode < 0:
        raise ValueError(f"episode must be >= 0, got {episode}")
    flavour = gz_flavour(gz_version)
    state = WorldState(world)
    state.advance(episode=episode)
    x0, y0, x1, y1 = _bounds(world)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    sx, sy = x1 - x0 + 4, y1 - y0 + 4
    start = world.waypoint(world.start_waypoint)
    desc = escape(world.description.replace("--", "-"))

    parts = [
        '<?xml version="1.0" ?>',
        f"<!-- generated by glove_ros from world '{world.name}' at episode {episode}: "
        f"{desc} -->",
        f"<!-- robot start: waypoint {start.id} x={_f(start.x)} y={_f(start.y)} "
        f"yaw={_f(start.yaw)} -->",
        f'<sdf version="{SDF_VERSION}">',
        f'<world name="{world.name}">',
        world_plugins(flavour),
        "<gravity>0 0 -9.8</gravity>",
        "<scene><ambient>0.6 0.6 0.6 1</ambient><background>0.8 0.85 0.9 1</background>"
        "<shadows>true</shadows></scene>",
        '<light type="directional" name="sun"><cast_shadows>true</cast_shadows>'
        "<pose>0 0 10 0 0 0</pose><diffuse>0.8 0.8 0.8 1</diffuse>"
        "<specular>0.2 0.2 0.2 1</specular><direction>-0.4 0.2 -0.9</direction></light>",
        '<model name="ground_plane"><static>true</static>'
        f"{_pose(cx, cy, 0)}<link name=\"link\">"
        '<collision name="collision"><geometry><plane><normal>0 0 1</normal>'
        f"<size>{_f(sx)} {_f(sy)}</size></plane></geometry></collision>"
        '<visual name="visual"><geometry><plane><normal>0 0 1</normal>'
        f"<size>{_f(sx)} {_f(sy)}</size></plane></geometry>"
        f"{_material('0.45 0.45 0.47 1')}</visual></link></model>",
    ]
    walls = maze_walls(world, absent_edge_walls=absent_edge_walls)
    parts.append('<model name="maze_walls"><static>true</static><link name="link">'
                 + "".join(_wall_elements(f"wall_{i}", s) for i, s in enumerate(walls))
                 + "</link></model>")
    for a, b in sorted(state.blocked_edges):
        parts.append(_barrier_model(world, a, b))
    for p in state.placements():
        parts.append(_block_model(world, state, p.block_id))
    for o in state.obstacles():
        parts.append(_obstacle_model(world, state, o))
    if waypoint_markers:
        parts.extend(_waypoint_model(world, w.id) for w in world.waypoints)
    if robot:
        parts.append(robot_model_sdf(flavour, (start.x, start.y, start.yaw),
                                     camera_height=world.camera.height,
                                     camera_hfov_deg=world.camera.hfov_deg, robot=ROBOT))
    parts.append("</world>")
    parts.append("</sdf>")
    return "\n".join(parts) + "\n"
