"""JetRover block-search benchmark: its settings, memory methods and task sequence.

:class:`BenchConfig` (validated), the methods a run can compare (:data:`METHODS`), the
seeded task sequence and the phases split at drift events: what a run is set up from,
shared by the run loop, the Janus and fleet benchmarks and ``glove-ros demo``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from glove_ros.core.plan.agent_types import Task
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_views import RULE_PARAMS
from glove_ros.core.world.worldfile import World

__all__ = [
    "GLOVE_PARAMS",
    "METHODS",
    "METHOD_ALIASES",
    "MODES",
    "TASK_STARTS",
    "BenchConfig",
    "default_episodes",
    "make_tasks",
    "phase_plan",
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
    in an episode gets the same frame noise and misses in every method (common random
    numbers: side-by-side differences are the methods', not the dice's).
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
    common_noise: bool = False

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
        return self


def default_episodes(world: World) -> int:
    """20 episodes after the last episode-triggered drift event; else 30 (at least 10 after
    the last scheduled event)."""
    drift = [e.episode for e in world.drift_events() if e.episode is not None]
    if drift:
        return max(drift) + 20
    last = max((e.episode for e in world.events if e.episode is not None), default=0)
    return max(30, last + 10)


def make_tasks(world: World, episodes: int, seed: int = 0) -> list[Task]:
    """The seeded task sequence: one random block colour per episode."""
    colors = list(world.colors)
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
    verifier knows ``unique_objects``, the colours of the world's blocks that occur exactly
    once (unless overridden)."""
    out = {**overrides, "mode": mode}
    if "unique_objects" in {f.name for f in fields(VerifierConfig)} \
            and "unique_objects" not in overrides:
        counts = Counter(b.color for b in world.blocks)
        out["unique_objects"] = tuple(sorted(c for c, k in counts.items() if k == 1))
    return out
