"""MiniGrid for ``glove-ros bench gym``: the agent's pose as the state key, and a two-room
MiniGrid world whose doors a drift schedule closes (``GloveRos/MiniGridDoors-v0``).

MiniGrid observations are dicts (an egocentric image, a direction, a mission): not a state
memory can key. :func:`pose` keys the state by where the agent stands and which way it
faces, read from the env (``state_key: glove_ros.benchmarks._gym_minigrid:pose``); the
adapter's default outcome then signs a move by the pose it led to. Importing this module
registers the doors world (``import: [glove_ros.benchmarks._gym_minigrid]``); the world
itself imports ``minigrid`` (the ``bench`` extra) only when it is made.

The doors world (``width`` x ``height``, walls around it)::

    #########
    #A..N..G#     A: start, facing east; G: the goal; N and S: doors in the middle wall
    #...#...#
    #...#...#
    #...#...#
    #...S...#
    #########

``north`` and ``south`` are each ``open``, ``closed`` or ``locked`` (keyword arguments, so a
drift phase can change them). MiniGrid's seven actions stay (left, right, forward, pickup,
drop, toggle, done); without a key only ``toggle`` in front of a closed door does anything
of the last four. A scenario that gives the agent ``actions: [0, 1, 2]`` makes a closed door
a wall for it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["ENV_ID", "DOOR_STATES", "pose", "register"]

ENV_ID = "GloveRos/MiniGridDoors-v0"
DOOR_STATES = ("open", "closed", "locked")
_CLASS: list[type] = []


def pose(obs: Any, env: Any) -> Hashable:
    """(x, y, direction) of the MiniGrid agent: the state key of a navigation task."""
    u = env.unwrapped
    return (int(u.agent_pos[0]), int(u.agent_pos[1]), int(u.agent_dir))


def _doors_class() -> type:
    """The env class (built on first use: MiniGrid is an optional dependency)."""
    if _CLASS:
        return _CLASS[0]
    from minigrid.core.grid import Grid
    from minigrid.core.mission import MissionSpace
    from minigrid.core.world_object import Door, Goal
    from minigrid.minigrid_env import MiniGridEnv

    class MiniGridDoorsEnv(MiniGridEnv):
        """Two rooms, a wall between them with a north and a south door, the goal in the
        east room level with the north door."""

        def __init__(self, width: int = 9, height: int = 7, north: str = "open",
                     south: str = "open", max_steps: int | None = None,
                     **kwargs: Any) -> None:
            for name, state in (("north", north), ("south", south)):
                if state not in DOOR_STATES:
                    raise ValueError(f"{name} must be one of {', '.join(DOOR_STATES)}, "
                                     f"got {state!r}")
            if width < 7 or width % 2 == 0 or height < 5:
                raise ValueError(f"the doors world needs an odd width >= 7 and height >= 5, "
                                 f"got {width} x {height}")
            self.doors = {"north": north, "south": south}
            super().__init__(mission_space=MissionSpace(mission_func=lambda: "reach the goal"),
                             width=width, height=height, see_through_walls=True,
                             max_steps=max_steps or 4 * width * height, **kwargs)

        def _gen_grid(self, width: int, height: int) -> None:
            self.grid = Grid(width, height)
            self.grid.wall_rect(0, 0, width, height)
            mid = width // 2
            self.grid.vert_wall(mid, 0)
            for (name, state), y in zip(self.doors.items(), (1, height - 2), strict=True):
                self.grid.set(mid, y, Door("yellow" if name == "north" else "blue",
                                           is_open=state == "open",
                                           is_locked=state == "locked"))
            self.put_obj(Goal(), width - 2, 1)
            self.agent_pos = (1, 1)
            self.agent_dir = 0
            self.mission = "reach the goal"

    _CLASS.append(MiniGridDoorsEnv)
    return MiniGridDoorsEnv


def make_doors(**kwargs: Any) -> Any:
    """gymnasium entry point of ``GloveRos/MiniGridDoors-v0``."""
    return _doors_class()(**kwargs)


def register() -> None:
    """Register ``GloveRos/MiniGridDoors-v0`` with gymnasium (once)."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=f"{__name__}:make_doors")


register()
