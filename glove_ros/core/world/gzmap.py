"""Occupancy map of a world's walls for Nav2's map_server and AMCL (PGM + map YAML).

:func:`occupancy_map` rasterises the walls that never move, the ones
:func:`~glove_ros.core.world.sdf.maze_walls` puts into the Gazebo world (maze boundary, the
file's ``walls``, the walls between absent corridors), at ``resolution`` metres per cell.
Corridor barriers, blocks and nuisance obstacles are left out: they come and go with the
world's events, so the lidar finds them (Nav2's obstacle layer), as a closed door would be
found on the real robot.

The ``map`` frame is the SDF world frame (the world file's coordinates). The image follows
map_server's convention: row 0 is the top (largest y), ``origin`` is the world position of
the lower-left corner of the image. Cells: 0 occupied (black), 254 free, 205 unknown (outside
the maze boundary), read in ``trinary`` mode with ``negate: 0``, ``occupied_thresh: 0.65``
and ``free_thresh: 0.196`` (205 reads as unknown, 254 as free, 0 as occupied).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glove_ros.core.world.sdf import maze_walls
from glove_ros.core.world.worldfile import World

__all__ = ["FREE", "OCCUPIED", "UNKNOWN", "OccupancyMap", "occupancy_map", "read_pgm"]

OCCUPIED, FREE, UNKNOWN = 0, 254, 205
OCCUPIED_THRESH = 0.65
FREE_THRESH = 0.196


@dataclass(frozen=True)
class OccupancyMap:
    """A grey-level occupancy image (rows top to bottom) placed in the map frame."""

    image: np.ndarray  # uint8, shape (height, width)
    resolution: float  # metres per cell
    origin: tuple[float, float]  # map-frame x, y of the image's lower-left corner

    @property
    def width(self) -> int:
        """Cells per row."""
        return int(self.image.shape[1])

    @property
    def height(self) -> int:
        """Rows."""
        return int(self.image.shape[0])

    def cell(self, x: float, y: float) -> tuple[int, int]:
        """(row, column) of the cell holding map point (x, y); IndexError outside."""
        col = math.floor((x - self.origin[0]) / self.resolution)
        row = self.height - 1 - math.floor((y - self.origin[1]) / self.resolution)
        if not (0 <= row < self.height and 0 <= col < self.width):
            raise IndexError(f"({x}, {y}) is outside the map")
        return row, col

    def value(self, x: float, y: float) -> int:
        """The image value at map point (x, y)."""
        row, col = self.cell(x, y)
        return int(self.image[row, col])

    def centre(self, row: int, col: int) -> tuple[float, float]:
        """Map-frame centre of cell (row, col)."""
        return (self.origin[0] + (col + 0.5) * self.resolution,
                self.origin[1] + (self.height - row - 0.5) * self.resolution)

    def pgm_bytes(self) -> bytes:
        """The image as binary PGM (P5, maxval 255)."""
        header = f"P5\n# glove_ros occupancy map\n{self.width} {self.height}\n255\n"
        return header.encode("ascii") + np.ascontiguousarray(self.image, np.uint8).tobytes()

    def yaml_dict(self, image: str) -> dict[str, object]:
        """The map YAML map_server loads (``image`` relative to the YAML's folder)."""
        return {"image": image, "mode": "trinary", "resolution": self.resolution,
                "origin": [round(self.origin[0], 6), round(self.origin[1], 6), 0.0],
                "negate": 0, "occupied_thresh": OCCUPIED_THRESH, "free_thresh": FREE_THRESH}

    def write(self, directory: str | Path, stem: str = "map") -> tuple[Path, Path]:
        """Write ``stem.pgm`` and ``stem.yaml`` into ``directory``; returns both paths."""
        import yaml

        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        pgm, meta = folder / f"{stem}.pgm", folder / f"{stem}.yaml"
        pgm.write_bytes(self.pgm_bytes())
        meta.write_text(yaml.safe_dump(self.yaml_dict(pgm.name), sort_keys=False))
        return pgm, meta


def occupancy_map(world: World, *, resolution: float = 0.05, margin: float = 0.5,
                  absent_edge_walls: bool = True) -> OccupancyMap:
    """The walls of ``world`` rasterised for map_server (see the module docstring).

    A cell is occupied when its centre lies within half a wall's thickness plus half a cell
    of the wall's centre line (so a 5 cm wall is a closed line at 5 cm cells); cells inside
    the maze boundary are free, those outside unknown. ``margin``: metres of map around the
    outermost wall.
    """
    if not 0.005 <= resolution <= 1.0:
        raise ValueError(f"resolution must be in [0.005, 1] m per cell, got {resolution}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    walls = maze_walls(world, absent_edge_walls=absent_edge_walls)
    xs = [c for s in walls for c in (s[0], s[2])]
    ys = [c for s in walls for c in (s[1], s[3])]
    pad = margin + max(s[5] for s in walls)
    x0 = math.floor((min(xs) - pad) / resolution) * resolution
    y0 = math.floor((min(ys) - pad) / resolution) * resolution
    width = math.ceil((max(xs) + pad - x0) / resolution)
    height = math.ceil((max(ys) + pad - y0) / resolution)
    cx = x0 + (np.arange(width) + 0.5) * resolution  # cell centres, columns
    cy = y0 + (height - np.arange(height) - 0.5) * resolution  # rows, top first
    px, py = np.meshgrid(cx, cy)
    bx0, by0, bx1, by1 = _boundary(walls)
    image = np.full((height, width), UNKNOWN, np.uint8)
    image[(px >= bx0) & (px <= bx1) & (py >= by0) & (py <= by1)] = FREE
    for x1, y1, x2, y2, _h, thickness in walls:
        near = _distance(px, py, x1, y1, x2, y2) <= thickness / 2 + resolution / 2
        image[near] = OCCUPIED
    return OccupancyMap(image, resolution, (x0, y0))


def _boundary(walls) -> tuple[float, float, float, float]:
    """The maze boundary rectangle: the first four segments of maze_walls."""
    xs = [c for s in walls[:4] for c in (s[0], s[2])]
    ys = [c for s in walls[:4] for c in (s[1], s[3])]
    return min(xs), min(ys), max(xs), max(ys)


def _distance(px: np.ndarray, py: np.ndarray, x1: float, y1: float, x2: float,
              y2: float) -> np.ndarray:
    dx, dy = x2 - x1, y2 - y1
    n2 = dx * dx + dy * dy
    t = np.zeros_like(px) if n2 == 0 else np.clip(((px - x1) * dx + (py - y1) * dy) / n2, 0, 1)
    return np.hypot(px - (x1 + t * dx), py - (y1 + t * dy))


def read_pgm(path: str | Path) -> np.ndarray:
    """A binary (P5, maxval < 256) PGM as a uint8 array; ValueError for anything else."""
    data = Path(path).read_bytes()
    fields: list[bytes] = []
    pos = 0
    while len(fields) < 4:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while end < len(data) and not data[end:end + 1].isspace():
            end += 1
        if end == pos:
            raise ValueError(f"{path}: truncated PGM header")
        fields.append(data[pos:end])
        pos = end
    magic, width, height, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    if magic != b"P5" or not 0 < maxval < 256:
        raise ValueError(f"{path}: not a binary 8-bit PGM (magic {magic!r}, maxval {maxval})")
    pixels = data[pos + 1:pos + 1 + width * height]
    if len(pixels) != width * height:
        raise ValueError(f"{path}: {len(pixels)} pixel bytes, expected {width * height}")
    return np.frombuffer(pixels, np.uint8).reshape(height, width)
