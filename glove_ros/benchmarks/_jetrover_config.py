"""JetRover search benchmark: its settings, memory methods and task sequence.

:class:`BenchConfig` (validated, and resolved against a world: which detector, whether
noise is common), the methods a run can compare (:data:`METHODS`), the seeded task sequence
("find the <colour>" on colour worlds, "find the <class>" on object worlds: the names of the
world's look kind, :func:`task_names`) and the phases split at drift events: what a run is
set up from, shared by the run loop, the Janus and fleet benchmarks and ``glove-ros demo``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from glove_ros.core.plan.agent_policy import check_believed_order
from glove_ros.core.plan.agent_types import Task
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_views import RULE_PARAMS
from glove_ros.core.world.worldfile import World

__all__ = [
    "BASELINE_SWEEP",
    "DETECTORS",
    "GLOVE_PARAMS",
    "METHODS",
    "METHOD_ALIASES",
    "MODES",
    "PERCEPTIONS",
    "TASK_STARTS",
    "BenchConfig",
    "default_episodes",
    "look_kind_of",
    "make_tasks",
    "phase_plan",
    "task_names",
    "verifier_settings",
]


MODES = ("async", "sync", "static")
#: every memory method a ModeRunner runs: GLOVE (async, sync), static memory, the truth
#: (oracle, the upper bound) and the baseline rules of :mod:`glove_ros.core.verify.memory_views`
METHODS = (*MODES, "oracle", *RULE_PARAMS)
#: other spellings of the GLOVE methods
METHOD_ALIASES = {"GLOVE-async": "async", "GLOVE-sync": "sync", "Static": "static"}
#: parameters of the GLOVE methods: ``recheck`` False drops the project's stale-negative
#: re-test when stuck (the reverify hook then does nothing), an ablation
GLOVE_PARAMS = {"recheck": True}
#: where each task starts: the dock, where the last task ended, or a seeded random waypoint
TASK_STARTS = ("dock", "stay", "random")
#: what turns camera frames into looks: ``color`` (HSV thresholds, colour blocks), ``darknet``
#: (the shipped YOLOv3-tiny, object classes), ``auto`` (the one that fits the world's look
#: kind: darknet for ``objects`` worlds, color for ``colors`` worlds)
DETECTORS = ("auto", "color", "darknet")
#: where looks come from: ``camera`` (rendered frames through the detector) or ``oracle``
#: (the simulator's ground truth, ``WorldState.expected_signature``: no detector, no noise)
PERCEPTIONS = ("camera", "oracle")
#: each baseline's parameter values ``--sweep`` runs (those of
#: ``bench/scenarios/suite_fair.yaml`` for waypoint worlds); the best setting of each is
#: reported, chosen on the same run (the strongest opponent GLOVE could face)
BASELINE_SWEEP: Mapping[str, tuple[float, ...]] = {
    "RecentK": (1, 3, 8),
    "SlidingWindow": (10, 30, 100),
    "RecencyWeighted": (2, 5, 20),
    "PageHinkleyReset": (0.5, 1.0, 4.0),
    "PeriodicRefresh": (30, 60, 120),
}
_KIND_DETECTOR = {"colors": "color", "objects": "darknet"}


@dataclass(frozen=True)
class BenchConfig:
    """Benchmark settings; ``validate()`` explains bad values.

    ``episodes``: tasks per mode (0: :func:`default_episodes`); ``seed``: task sequence,
    start waypoints and simulator noise offset; ``max_steps``: step limit per task;
    ``look_frames``: frames per look; ``frame_size``: (width, height) of the rendered
    frames; ``task_start``: ``random`` | ``dock`` | ``stay`` (:data:`TASK_STARTS`);
    ``verifier``: overrides of :class:`~glove_ros.core.verify.config.VerifierConfig` fields
    (``mode`` is set per mode); ``detector_min_area``: the colour detector's smallest blob
    in pixels (None: its default, sized for 640x480; small frames need a smaller one);
    ``nav_dt``: simulation step while driving, seconds (travel times and outcomes do not
    depend on it; a larger one runs faster); ``common_noise``: the k-th look at a waypoint
    in an episode gets the same frame noise and misses in every method (common
    random numbers: side-by-side differences are the methods', not the dice's); None: on with
    the darknet detector (so that methods side by side share its cached detections), off
    with the colour detector (today's numbers). ``keyed_arrivals``: the k-th arrival at a
    waypoint in an episode gets the same stop-pose jitter in every method (the simulator's
    ``keyed_arrivals``), so with ``common_noise`` the same look sees the same frame; None: on
    with the darknet detector, off with the colour detector (the drift suite's and the
    colour worlds' numbers were measured with the sequential draw).

    ``detector``: ``color`` | ``darknet`` | ``auto`` (:data:`DETECTORS`; auto: darknet on a
    world whose ``look_kind`` is ``objects``, else color). With darknet a look renders
    ``look_frames`` (n) frames and judges them by the look rule of
    :func:`glove_ros.core.world.observation.judge_frames`: a class is seen when it is
    detected in at least ``look_min_count`` (k) of them (None: ``ceil(2n/3)``, the rule's
    default 2 of 3 scaled to n), with the most common count; the colour detector keeps its
    rule (a colour seen in any frame). ``perception``: ``camera`` | ``oracle``
    (:data:`PERCEPTIONS`; oracle: every look is the simulator's ground truth, no frames).
    ``detection_cache``: a folder where darknet detections are kept across runs (files keyed
    by the detector's settings, lines by the frame's pixel digest; "": per process only).
    :meth:`resolve` fixes ``auto`` and ``None`` for a world.
    """

    episodes: int = 0
    seed: int = 0
    max_steps: int = 30
    look_frames: int = 2
    frame_size: tuple[int, int] = (640, 480)
    robot_id: str = "jetrover"
    task_start: str = "random"
    verifier: Mapping[str, Any] = field(default_factory=dict)
    detector_min_area: int | None = None
    nav_dt: float = 0.1
    common_noise: bool | None = None
    keyed_arrivals: bool | None = None
    detector: str = "auto"
    perception: str = "camera"
    look_min_count: int | None = None
    detection_cache: str = ""
    believed_order: str = "nearest"

    def validate(self) -> BenchConfig:
        """Raise ValueError naming the bad field; return ``self``."""
        if not isinstance(self.episodes, int) or self.episodes < 0:
            raise ValueError(f"episodes must be an int >= 0 (0: automatic), got {self.episodes!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        if not isinstance(self.look_frames, int) or not 1 <= self.look_frames <= 10:
            raise ValueError(f"look_frames must be an int in 1..10, got {self.look_frames!r}")
        w, h = self.frame_size
        if w < 64 or h < 48:
            raise ValueError(f"frame_size must be at least 64x48, got {w}x{h}")
        if self.task_start not in TASK_STARTS:
            raise ValueError(f"task_start must be one of {', '.join(TASK_STARTS)}, got "
                             f"{self.task_start!r}")
        m = self.detector_min_area
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ValueError(f"detector_min_area must be an int >= 1 or None, got {m!r}")
        if isinstance(self.nav_dt, bool) or not isinstance(self.nav_dt, (int, float)) \
                or not 0 < self.nav_dt <= 5:
            raise ValueError(f"nav_dt must be in (0, 5] seconds, got {self.nav_dt!r}")
        if "mode" in self.verifier:
            raise ValueError("verifier overrides must not set 'mode': it is set per mode")
        VerifierConfig.from_dict({"mode": "async", **self.verifier})
        if self.common_noise is not None and not isinstance(self.common_noise, bool):
            raise ValueError(f"common_noise must be true, false or None (automatic), got "
                             f"{self.common_noise!r}")
        if self.keyed_arrivals is not None and not isinstance(self.keyed_arrivals, bool):
            raise ValueError(f"keyed_arrivals must be true, false or None (automatic), got "
                             f"{self.keyed_arrivals!r}")
        if self.detector not in DETECTORS:
            raise ValueError(f"detector must be one of {', '.join(DETECTORS)}, got "
                             f"{self.detector!r}")
        if self.perception not in PERCEPTIONS:
            raise ValueError(f"perception must be one of {', '.join(PERCEPTIONS)}, got "
                             f"{self.perception!r}")
        k = self.look_min_count
        if k is not None and (isinstance(k, bool) or not isinstance(k, int)
                              or not 1 <= k <= self.look_frames):
            raise ValueError(f"look_min_count must be None (automatic) or an int in "
                             f"1..look_frames={self.look_frames}, got {k!r}")
        check_believed_order(self.believed_order)
        if not isinstance(self.detection_cache, str):
            raise ValueError(f"detection_cache must be a folder path or '' (none), got "
                             f"{self.detection_cache!r}")
        return self

    @property
    def min_count(self) -> int:
        """k of the darknet look rule: ``look_min_count`` or ``ceil(2 n / 3)``."""
        if self.look_min_count is not None:
            return self.look_min_count
        return -(-2 * self.look_frames // 3)

    def resolve(self, world: World) -> BenchConfig:
        """This config for ``world``, validated: ``detector="auto"`` becomes the detector of
        the world's look kind and ``common_noise=None`` on (darknet) or off (color).

        ValueError when the detector cannot see the world's looks (the colour detector on an
        object world, darknet on a colour world), naming what fits, or for a
        ``look_min_count`` where no darknet look rule runs."""
        self.validate()
        kind = look_kind_of(world)
        fits = _KIND_DETECTOR[kind]
        detector = fits if self.detector == "auto" else self.detector
        if detector != fits:
            raise ValueError(f"the {detector} detector cannot see the looks of world "
                             f"'{world.name}' (look kind {kind}): use detector {fits} (or auto), "
                             "or perception oracle")
        if self.look_min_count is not None and (detector != "darknet"
                                                or self.perception != "camera"):
            raise ValueError("look_min_count is the darknet look rule's k; the colour "
                             "detector counts a colour seen in any frame and oracle perception "
                             "renders no frames: leave it unset")
        noise = self.common_noise
        if noise is None:
            noise = detector == "darknet"
        keyed = self.keyed_arrivals
        if keyed is None:
            keyed = detector == "darknet"
        return replace(self, detector=detector, common_noise=noise, keyed_arrivals=keyed)

    def describe(self) -> dict[str, Any]:
        """The perception settings as the JSON document records them."""
        out: dict[str, Any] = {"perception": self.perception,
                               "detector": self.detector if self.perception == "camera"
                               else "none (ground truth)",
                               "common_noise": self.common_noise,
                               "keyed_arrivals": self.keyed_arrivals}
        if self.perception == "camera" and self.detector == "darknet":
            out["look_rule"] = {"frames": self.look_frames, "min_count": self.min_count}
        return out


def look_kind_of(world: World) -> str:
    """The world's look kind: ``"objects"`` (object blocks, a trained detector's classes)
    or ``"colors"`` (colour blocks; worlds that do not say)."""
    kind = getattr(world, "look_kind", "colors") or "colors"
    if kind not in _KIND_DETECTOR:
        raise ValueError(f"world '{world.name}' has look kind {kind!r}; expected one of "
                         f"{', '.join(_KIND_DETECTOR)}")
    return kind


def task_names(world: World) -> tuple[str, ...]:
    """What the tasks search for: the world's colours, or its object classes on an object
    world (sorted, distinct)."""
    if look_kind_of(world) == "objects":
        return tuple(world.objects)
    return tuple(world.colors)


def default_episodes(world: World) -> int:
    """20 episodes after the last episode-triggered drift event; else 30 (at least 10 after
    the last scheduled event)."""
    drift = [e.episode for e in world.drift_events() if e.episode is not None]
    if drift:
        return max(drift) + 20
    last = max((e.episode for e in world.events if e.episode is not None), default=0)
    return max(30, last + 10)


def make_tasks(world: World, episodes: int, seed: int = 0) -> list[Task]:
    """The seeded task sequence: one random name of :func:`task_names` per episode (a block
    colour, or an object class on an object world)."""
    colors = list(task_names(world))
    if not colors:
        raise ValueError(f"world '{world.name}' has no blocks: nothing to search for")
    rng = np.random.default_rng([seed, 11])
    return [Task(colors[int(rng.integers(len(colors)))], id=f"ep{ep:03d}")
            for ep in range(episodes)]


def phase_plan(world: World, episodes: int) -> list[dict[str, Any]]:
    """Phases ``[{name, start, end}]`` (end exclusive), split at drift events by episode."""
    cuts: dict[int, list[str]] = {}
    for e in world.drift_events():
        if e.episode is not None and 0 < e.episode < episodes:
            cuts.setdefault(e.episode, []).append(e.type)
    starts = [0, *sorted(cuts)]
    out = []
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else episodes
        name = "before drift" if i == 0 and cuts else ("all" if not cuts else
                                                       "+".join(cuts[s]) + f"@{s}")
        out.append({"name": name, "start": s, "end": end})
    return out


def verifier_settings(world: World, overrides: Mapping[str, Any], mode: str
                      ) -> dict[str, Any]:
    """VerifierConfig settings for ``world``: ``overrides`` plus ``mode``, and, when the
    verifier knows ``unique_objects``, the world's unique names (unless overridden):
    declared in the world file, else the colours of one block each in a colour world, none
    in an object world (:meth:`~glove_ros.core.world.worldfile.World.unique_names`)."""
    out = {**overrides, "mode": mode}
    if "unique_objects" in {f.name for f in fields(VerifierConfig)} \
            and "unique_objects" not in overrides:
        out["unique_objects"] = tuple(world.unique_names())
    return out
