"""The world file's drift events, applied to a running Gazebo through its entity services.

:class:`GzEventScheduler` keeps the world's ground truth (a
:class:`~glove_ros.core.world.sim.WorldState`, started where the generated SDF was) and,
as simulated time or the episode moves on, turns what changed into gz service requests
(:class:`GzRequest`) on the world's UserCommands services:

* a block that moved (``swap_blocks``, ``move_block``, ``shift_block``):
  ``/world/<w>/set_pose`` with a ``Pose`` (name, position, orientation);
* a corridor blocked (``block_edge``): ``/world/<w>/create`` with an ``EntityFactory``
  holding the ``barrier_A_B`` model's SDF; re-opened (``open_edge``): ``/world/<w>/remove``
  with an ``Entity`` (name, type MODEL);
* a ``new_obstacle`` appearing: create ``obstacle_ID``; its window ending: remove it.

Detection nuisances (``miss_detections``, ``pose_jitter``, ``detection_dropout``) act on the
built-in simulator's camera and odometry only; they have no Gazebo counterpart and are
reported as not applied.

Events fire once each, in trigger order: advancing the time by a large step visits every
pending trigger time (and every obstacle window end) in turn. Episode events fire when the
episode is announced (``episode_start``). Requests run as ``ign service`` (Fortress) or
``gz service`` (Harmonic) command lines through a runner (:func:`run_command` by default,
or a fake in tests); a failed call is reported, never raised.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from glove_ros.core.world.gzrobot import GzFlavour
from glove_ros.core.world.sdf import barrier_sdf, obstacle_sdf
from glove_ros.core.world.sim import Obstacle, WorldState
from glove_ros.core.world.worldevents import (
    DetectionDropout,
    Event,
    MissDetections,
    NewObstacle,
    PoseJitter,
)
from glove_ros.core.world.worldfile import World

__all__ = ["GzOutcome", "GzRequest", "GzEventScheduler", "GzStep", "Runner", "apply_requests",
           "proto_string", "run_command"]

#: runner(argv, timeout_s) -> (ok, output)
Runner = Callable[[Sequence[str], float], tuple[bool, str]]
_NOT_IN_GAZEBO = (MissDetections, PoseJitter, DetectionDropout)


def proto_string(text: str) -> str:
    """``text`` as a protobuf text-format string literal (quoted, escaped)."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out.replace(chr(13), "")}"'


def _num(x: float) -> str:
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


@dataclass(frozen=True)
class GzRequest:
    """One gz-transport service call: ``service`` with a text-format ``request``."""

    service: str
    reqtype: str  # message name without package, e.g. "Pose"
    request: str
    what: str  # for logs, e.g. "set_pose block_red_block"
    reptype: str = "Boolean"

    def command(self, flavour: GzFlavour, timeout_s: float = 5.0) -> list[str]:
        """The ``ign service`` / ``gz service`` command line of this request."""
        return [flavour.cli, "service", "-s", self.service,
                "--reqtype", flavour.msg(self.reqtype), "--reptype", flavour.msg(self.reptype),
                "--timeout", str(max(1, int(timeout_s * 1000))), "--req", self.request]


def set_pose_request(world_name: str, model: str, x: float, y: float, z: float,
                     yaw: float) -> GzRequest:
    """Move ``model`` to (x, y, z) facing ``yaw``."""
    text = (f"name: {proto_string(model)} position {{ x: {_num(x)} y: {_num(y)} z: {_num(z)} }} "
            f"orientation {{ x: 0 y: 0 z: {_num(math.sin(yaw / 2))} "
            f"w: {_num(math.cos(yaw / 2))} }}")
    return GzRequest(f"/world/{world_name}/set_pose", "Pose", text, f"set_pose {model}")


def remove_request(world_name: str, model: str) -> GzRequest:
    """Delete the model called ``model``."""
    return GzRequest(f"/world/{world_name}/remove", "Entity",
                     f"name: {proto_string(model)} type: MODEL", f"remove {model}")


def create_request(world_name: str, model: str, sdf: str) -> GzRequest:
    """Spawn the SDF ``sdf`` (one model called ``model``)."""
    return GzRequest(f"/world/{world_name}/create", "EntityFactory",
                     f"sdf: {proto_string(sdf)} allow_renaming: false", f"create {model}")


@dataclass(frozen=True)
class GzStep:
    """What one trigger point changed: the events it fired and the requests they need."""

    time: float | None
    episode: int | None
    events: tuple[Event, ...]
    requests: tuple[GzRequest, ...]
    skipped: tuple[Event, ...] = ()  # fired, but nothing in Gazebo to change


@dataclass
class _Snapshot:
    blocks: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    blocked: frozenset[tuple[str, str]] = frozenset()
    obstacles: dict[str, Obstacle] = field(default_factory=dict)


class GzEventScheduler:
    """Turns a world's timed and episode events into Gazebo requests (see module doc).

    ``world_name``: the ``<world name>`` of the SDF (default: the world file's name).
    ``episode``: the episode the SDF was generated at (its events are already in it).
    """

    def __init__(self, world: World, *, world_name: str = "", episode: int = 0) -> None:
        if episode < 0:
            raise ValueError(f"episode must be >= 0, got {episode}")
        self.world = world
        self.world_name = world_name or world.name
        self.state = WorldState(world)
        self.state.advance(episode=episode)

    @property
    def time(self) -> float:
        """The simulated time reached so far."""
        return self.state.time

    @property
    def episode(self) -> int:
        """The episode reached so far."""
        return self.state.episode

    def pending(self) -> list[Event]:
        """Events not fired yet, in file order."""
        fired = {id(e) for e in self.state.applied_events}
        return [e for e in self.world.events if id(e) not in fired]

    def advance(self, *, time: float | None = None, episode: int | None = None) -> list[GzStep]:
        """Move to ``time`` / ``episode`` (never backwards: ignored when behind) and return a
        step per trigger point passed on the way, in order; steps with nothing to do are
        left out."""
        steps: list[GzStep] = []
        if episode is not None and episode > self.state.episode:
            steps.append(self._step(time=None, episode=episode))
        if time is not None and time > self.state.time:
            for t in self._trigger_times(time):
                steps.append(self._step(time=t, episode=None))
        return [s for s in steps if s.events or s.requests]

    def _trigger_times(self, until: float) -> list[float]:
        now = self.state.time
        times = {e.time for e in self.pending() if e.time is not None}
        times |= {e.until_time for e in self.world.events
                  if isinstance(e, NewObstacle) and e.until_time is not None}
        return sorted({t for t in times if now < t <= until} | {until})

    def _snapshot(self) -> _Snapshot:
        s = self.state
        blocks = {}
        for p in s.placements():
            x, y = s.block_position(p.block_id)
            blocks[p.block_id] = (x, y, self.world.waypoint(p.waypoint).yaw, p.size)
        return _Snapshot(blocks, s.blocked_edges, {o.id: o for o in s.obstacles()})

    def _step(self, *, time: float | None, episode: int | None) -> GzStep:
        before = self._snapshot()
        fired = self.state.advance(time=time, episode=episode)
        after = self._snapshot()
        w = self.world_name
        requests: list[GzRequest] = []
        for a, b in sorted(before.blocked - after.blocked):
            requests.append(remove_request(w, f"barrier_{a}_{b}"))
        for a, b in sorted(after.blocked - before.blocked):
            requests.append(create_request(w, f"barrier_{a}_{b}", barrier_sdf(self.world, a, b)))
        for oid in sorted(set(before.obstacles) - set(after.obstacles)):
            requests.append(remove_request(w, f"obstacle_{oid}"))
        for oid in sorted(set(after.obstacles) - set(before.obstacles)):
            requests.append(create_request(w, f"obstacle_{oid}",
                                           obstacle_sdf(self.world, after.obstacles[oid])))
        for bid in sorted(after.blocks):
            if after.blocks[bid] != before.blocks.get(bid):
                x, y, yaw, size = after.blocks[bid]
                requests.append(set_pose_request(w, f"block_{bid}", x, y, size / 2, yaw))
        skipped = tuple(e for e in fired if isinstance(e, _NOT_IN_GAZEBO))
        return GzStep(time, episode, tuple(fired), tuple(requests), skipped)


@dataclass(frozen=True)
class GzOutcome:
    """The result of one request."""

    request: GzRequest
    ok: bool
    output: str


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[bool, str]:
    """Run a gz service command line; ok when it exits 0 and the reply says ``data: true``.

    Never raises: a missing ``gz`` / ``ign`` tool, a timeout or an error exit is a failed
    call with the reason as output.
    """
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        return False, f"'{argv[0]}' not found: is Gazebo installed and on PATH?"
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout_s:.1f} s"
    except OSError as exc:
        return False, f"could not run '{argv[0]}': {exc}"
    text = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        return False, f"exit code {done.returncode}: {text or 'no output'}"
    if "data: true" not in text:
        return False, f"Gazebo did not confirm ({text or 'empty reply'})"
    return True, text


def apply_requests(requests: Sequence[GzRequest], flavour: GzFlavour, runner: Runner = run_command,
                   timeout_s: float = 5.0) -> list[GzOutcome]:
    """Run each request in order; one failing does not stop the rest."""
    out = []
    for req in requests:
        try:
            ok, text = runner(req.command(flavour, timeout_s), timeout_s + 1.0)
        except Exception as exc:  # a runner must not take the caller down
            ok, text = False, f"runner failed: {exc!r}"
        out.append(GzOutcome(req, ok, text))
    return out
