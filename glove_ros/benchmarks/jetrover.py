"""JetRover block-search benchmark: GLOVE (async, sync) against static memory, without DDS.

The core loop the ROS nodes run, in one process: the built-in :class:`Simulator` plays a
world file (drift and nuisance events by episode), every look renders real camera frames that
:class:`ColorBlockDetector` turns into an outcome signature, the :class:`TaskAgent` plans
from trusted experience memory (an :class:`ExperienceStore` in a temporary SQLite file), and
every transition it returns is recorded through the :class:`GloveVerifier` (or, for static
memory, stored unverified). Each episode is one task "find the <colour> block", colours drawn
from the world's blocks with a seeded generator; the same task sequence runs in every mode.
Each task starts at a seeded random waypoint (``--task-start random``, the default: a
patrolling robot gets its task wherever it is; with a fixed start the result would mostly
measure whether the old place happens to lie on the way to the new one), or at the dock, or
where the previous task ended; the battery is recharged between tasks.

Modes:
  async   GLOVE replay-relaxed: refuted memory is suppressed, natural visits re-verify it
  sync    GLOVE synchronous replay: the simulator re-drives / re-looks (alpha samples) at once;
          probe drives and looks are charged as steps
  static  every transition stored, nothing ever verified (the memory keeps what it learnt)

Any memory method runs through the same loop (:class:`ModeRunner`, :data:`METHODS`): besides
the modes above, ``oracle`` (memory is the simulator's current truth: the upper bound) and
the baseline rules of :mod:`glove_ros.core.verify.memory_views` (``LatestOverwrite``, ``RecentK``,
``SlidingWindow``, ``RecencyWeighted``, ``PageHinkleyReset``, ``PeriodicRefresh``, each a
view over the same store with settable parameters). Every method gets the same stuck hook
and answers it by its own rule. :func:`run_world` runs one method on one world (e.g. from
:func:`glove_ros.core.world.worldgen.generate_world`) fast and returns its drift metrics
(:class:`DriftTracker`: detection delay in visits, false alarms per 1,000 transitions,
deadlocks, ...). When the verifier knows ``unique_objects``, the colours that occur once
among the world's blocks are passed to it (:func:`verifier_settings`).

A look grabs ``--look-frames`` frames and counts a colour seen in any of them. When the
agent's trusted memory allows no route to the waypoints left (or only a long detour), it asks
the verifier to re-verify stale negative memories (``recheck_negatives(stuck=True)``; sync
mode probes them, charged as steps). The verifier runs with VerifierConfig defaults unless
``--verifier KEY=VALUE`` overrides them.

Phases split at the world's episode-triggered drift events. Per phase and mode: success
rate, steps per task (task + probe), dissonance alerts, false alarms (alerts on a
(state, action) no drift event touched -- a look at a waypoint whose blocks did not change, a
corridor whose blocked state did not change -- where memory agreed with the world; an alert
there against memory that missed detections had made wrong is counted as a correction),
memories suppressed, probes, LLM fallbacks, and "stale goals": tasks whose first goal was a
waypoint memory believed held the colour when it did not (driving back to the old place).

Writes <out>/jetrover_<world>.json and <out>/jetrover_<world>.png (rolling success rate,
steps per task and cumulative stale goals over episodes, per mode, drift events marked; a
leading "jetrover_" of the world name is not doubled). :func:`run_mode` runs one mode and is
what ``glove-ros demo`` calls for its static-memory column; :func:`run_benchmark` runs
several side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import write_results
from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.plan.agent import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
    AgentConfig,
    Finish,
    GreedyPlanner,
    LlmPlanner,
    LlmPlannerConfig,
    Look,
    MemoryView,
    NavigateTo,
    StoreMemoryView,
    Task,
    TaskAgent,
    WorldMap,
    colors_of,
)
from glove_ros.core.verify.memory_views import RULE_PARAMS, OracleView, RuleView, make_view
from glove_ros.core.verify.verifier import GloveVerifier, VerifierConfig
from glove_ros.core.world.perception import (
    ColorBlockDetector,
    ColorDetectorConfig,
    outcome_signature,
)
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import World, edge_key, load_world

__all__ = [
    "FAST_FRAME",
    "FAST_MIN_AREA",
    "FAST_NAV_DT",
    "GLOVE_PARAMS",
    "METHODS",
    "METHOD_ALIASES",
    "MODES",
    "BenchConfig",
    "DriftTracker",
    "ModeRunner",
    "add_arguments",
    "default_episodes",
    "format_table",
    "main",
    "make_tasks",
    "phase_plan",
    "place_of",
    "result_stem",
    "run_benchmark",
    "run_mode",
    "run_world",
    "verifier_settings",
    "write_plot",
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
DEFAULT_OUT = Path("bench/results")


@dataclass(frozen=True)
class BenchConfig:
    """Benchmark settings; ``validate()`` explains bad values.

    ``episodes``: tasks per mode (0: :func:`default_episodes`); ``seed``: task sequence,
    start waypoints and simulator noise offset; ``max_steps``: step limit per task;
    ``look_frames``: frames per look; ``frame_size``: (width, height) of the rendered
    frames; ``task_start``: ``random`` | ``dock`` | ``stay`` (:data:`TASK_STARTS`);
    ``verifier``: overrides of :class:`~glove_ros.core.verify.verifier.VerifierConfig` fields
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


def _truth(sim: Simulator) -> tuple[dict[str, str], frozenset[tuple[str, str]]]:
    return ({w: sim.state.expected_signature(w) for w in sim.world.waypoint_ids},
            sim.state.blocked_edges)


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


Place = tuple[str, ...]  # ("look", waypoint) or ("edge", a, b) with a <= b


def place_of(state_key: str, action: str, action_arg: str) -> Place | None:
    """The place a transition (or alert) is about: the waypoint of a look, the corridor of a
    navigation (either direction); None for anything else."""
    if action == ACTION_LOOK:
        return ("look", state_key)
    if action == ACTION_NAVIGATE and action_arg:
        return ("edge", *edge_key(state_key, action_arg))
    return None


def _place_name(place: Place) -> str:
    return place[1] if place[0] == "look" else f"{place[1]}-{place[2]}"


class DriftTracker:
    """Drift metrics of one run (fed by :class:`ModeRunner`).

    A *change* is a place whose truth changed (a waypoint whose blocks changed, a corridor
    that closed or opened). It is *stale* for the method when, at that moment, the method's
    memory at the place contradicts the new truth (a look memory believing other colours;
    a corridor believed blocked / open); empty memory is not stale. *Visits* to the place
    after the change: looks at the waypoint / traversal attempts of the corridor in either
    direction, the agent's and probes'. The *detection delay* of a stale change is the
    number of visits up to the method's detection (0: before any visit): for GLOVE the
    first alert about the place or the first moment its trusted memory there matches the
    truth (a suppression or re-test without an alert); for the other methods the first
    moment the memory it reads there matches the truth. None: never.

    False alarms of the non-GLOVE methods: a recorded transition at a place no drift ever
    touched after which the memory there stops matching the truth (a nuisance flipped the
    belief), plus PageHinkley alarms with no drift since the previous alarm; the reverse (a
    wrong belief there made right) is a correction. (GLOVE's false alarms are its alerts
    about untouched places where its memory agreed with the world, counted by the runner.)

    Deadlock: a stale re-opened corridor (memory believes it blocked) that is neither
    re-tried nor seen as open by the memory before the phase ends.
    """

    def __init__(self, runner: ModeRunner) -> None:
        self.r = runner
        self.step = 0
        self.changes: list[dict[str, Any]] = []
        self.pending: dict[Place, dict[str, Any]] = {}
        self.watch: dict[Place, dict[str, Any]] = {}  # latest change record per place
        self.false_alarms = 0
        self.corrections = 0  # wrong memory at an untouched place made right
        self.stuck_calls = 0
        self._before: tuple[Place, bool] | None = None
        self._drift_steps: list[int] = []
        self._ph_alarms = 0
        self._last_alarm_step = 0

    @property
    def glove(self) -> bool:
        return self.r.verifier is not None

    def _episode(self) -> int:
        return self.r._ep.episode if self.r._ep is not None else self.r.sim.episode

    def matches(self, place: Place) -> bool:
        """Whether the memory the method reads agrees with the truth at ``place`` (empty
        memory agrees: it does not mislead the planner)."""
        if self.r.mode == "oracle":
            return True  # the truth by construction
        mem, state, cfg = self.r.memory, self.r.sim.state, self.r.agent_config
        if place[0] == "look":
            outs = [e.transition.outcome for e in mem.trusted(state_key=place[1],
                                                               action=ACTION_LOOK)]
            if not outs:
                return True
            seen = [colors_of(o) for o in outs]
            believed = {c for c in set().union(*seen)
                        if sum(c in x for x in seen) / len(seen) >= cfg.belief_threshold}
            return believed == set(state.colors_at(place[1]))
        a, b = place[1], place[2]
        believed_blocked = False
        for src, dst in ((a, b), (b, a)):
            outs = [e.transition.outcome for e in mem.trusted(state_key=src,
                                                               action=ACTION_NAVIGATE)
                    if e.transition.action_arg == dst
                    and e.transition.outcome in (OUTCOME_REACHED, OUTCOME_BLOCKED)]
            if outs and outs.count(OUTCOME_BLOCKED) / len(outs) >= cfg.blocked_threshold:
                believed_blocked = True
        return believed_blocked == state.is_blocked(a, b)

    # ------------------------------------------------------------------ events

    def on_change(self, looks: set[str], edges: set[tuple[str, str]]) -> None:
        """The truth changed at these places (just now)."""
        ep = self._episode()
        self._drift_steps.append(self.step)
        places: list[Place] = [("look", w) for w in sorted(looks)]
        places += [("edge", *e) for e in sorted(edges)]
        for place in places:
            old = self.pending.pop(place, None)
            if old is not None:
                old["superseded"] = True
            stale = not self.matches(place)
            rec: dict[str, Any] = {
                "place": _place_name(place), "kind": place[0], "episode": ep,
                "stale": stale, "visits": 0, "delay": None, "detected_episode": None,
                "visit_episodes": [],
            }
            if place[0] == "edge":
                rec["now"] = "blocked" if self.r.sim.state.is_blocked(*place[1:]) else "open"
            self.changes.append(rec)
            self.watch[place] = rec
            if stale:
                self.pending[place] = rec

    def visit(self, place: Place | None) -> None:
        """A look at / traversal attempt of ``place``."""
        rec = self.watch.get(place) if place is not None else None
        if rec is not None:
            rec["visits"] += 1
            rec["visit_episodes"].append(self._episode())

    def before_record(self, t: Transition) -> None:
        place = place_of(t.state_key, t.action, t.action_arg)
        self._before = None
        if self.glove or place is None:
            return
        untouched = (t.action == ACTION_LOOK and t.state_key not in self.r.touched_looks) or \
            (t.action == ACTION_NAVIGATE
             and edge_key(t.state_key, t.action_arg) not in self.r.touched_edges)
        if untouched:
            self._before = (place, self.matches(place))

    def after_record(self, t: Transition, alert: Any) -> None:
        self.step += 1
        self.visit(place_of(t.state_key, t.action, t.action_arg))
        if alert is not None:
            ap = place_of(alert.state_key, alert.action, alert.action_arg)
            if ap in self.pending:
                self._detect(ap)
        self._check_pending()
        if self._before is not None:
            bp, was = self._before
            if was and not self.matches(bp):
                self.false_alarms += 1
            elif not was and self.matches(bp):
                self.corrections += 1
        view = self.r.view
        if view is not None and view.alerts > self._ph_alarms:
            self._ph_alarms = view.alerts
            if not any(self._last_alarm_step < d <= self.step for d in self._drift_steps):
                self.false_alarms += 1
            self._last_alarm_step = self.step

    def check(self) -> None:
        """Memory may have changed outside a recorded transition (a probe's result, the
        stuck hook): detect what now matches."""
        self._check_pending()

    def _check_pending(self) -> None:
        for place in list(self.pending):
            if self.matches(place):
                self._detect(place)

    def _detect(self, place: Place) -> None:
        rec = self.pending.pop(place)
        rec["delay"] = rec["visits"]
        rec["detected_episode"] = self._episode()

    # ------------------------------------------------------------------ results

    def deadlocks(self, episodes: int) -> list[str]:
        """Stale re-opened corridors neither re-tried nor seen open within their phase."""
        drift_eps = sorted({c["episode"] for c in self.changes})
        out = []
        for c in self.changes:
            if c["kind"] != "edge" or c.get("now") != "open" or not c["stale"]:
                continue
            end = min((e for e in drift_eps if e > c["episode"]), default=episodes)
            tried = any(e < end for e in c["visit_episodes"])
            seen = c["detected_episode"] is not None and c["detected_episode"] < end
            if not tried and not seen:
                out.append(c["place"])
        return out


@dataclass
class _Episode:
    episode: int
    phase: str
    color: str
    success: bool = False
    reason: str = ""
    task_steps: int = 0
    probe_steps: int = 0
    alerts: int = 0
    false_alarms: int = 0
    corrections: int = 0
    stale_goal: bool = False
    first_goal: str = ""
    first_goal_kind: str = ""
    found_at: str = ""
    fallbacks: int = 0
    llm_decisions: int = 0
    reverify_calls: int = 0
    blocked: int = 0

    @property
    def steps(self) -> int:
        return self.task_steps + self.probe_steps


class ModeRunner:
    """Runs one memory method (:data:`METHODS`) through the task sequence.

    Every method drives the same agent, records every transition in the same kind of store
    and gets the same ``reverify`` hook when the agent is stuck; only what the agent reads
    back differs: GLOVE (``async``, ``sync``) reads the verifier's trusted entries and
    re-tests stale negatives when stuck (``params={"recheck": False}``: not); ``static``
    reads everything; ``oracle`` reads the simulator's current truth; a baseline rule
    (``LatestOverwrite``, ``RecentK``, ...; ``params`` as in
    :data:`~glove_ros.core.verify.memory_views.RULE_PARAMS`) reads its view of the entries and
    answers the stuck hook by its rule.

    ``planner_factory`` builds a fresh planner (default :class:`GreedyPlanner`); ``db_path``
    is the store file (default: a temporary directory removed afterwards).
    """

    def __init__(self, world: World, mode: str, config: BenchConfig | None = None,
                 planner_factory: Callable[[], Any] | None = None,
                 db_path: str | Path | None = None,
                 params: Mapping[str, Any] | None = None) -> None:
        mode = METHOD_ALIASES.get(mode, mode)
        if mode not in METHODS:
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(METHODS)}")
        params = dict(params or {})
        self.view: RuleView | None = None
        if mode in ("async", "sync"):
            unknown = sorted(set(params) - set(GLOVE_PARAMS))
            if unknown:
                raise ValueError(f"GLOVE-{mode} does not take {', '.join(unknown)}; its "
                                 f"parameters: {', '.join(GLOVE_PARAMS)}")
            self.params = {**GLOVE_PARAMS, **params}
        elif mode in RULE_PARAMS:
            self.view = make_view(mode, params)
            self.params = {**RULE_PARAMS[mode][1], **params}
        elif params:
            raise ValueError(f"{mode} takes no parameters, got {', '.join(sorted(params))}")
        else:
            self.params = {}
        self.world = world
        self.mode = mode
        self.config = (config or BenchConfig()).validate()
        self.episodes = self.config.episodes or default_episodes(world)
        self.tasks = make_tasks(world, self.episodes, self.config.seed)
        self.phases = phase_plan(world, self.episodes)
        self.sim = Simulator(world, seed=world.seed + self.config.seed)
        dcfg = None if self.config.detector_min_area is None else \
            ColorDetectorConfig(min_area=self.config.detector_min_area)
        self.detector = ColorBlockDetector(dcfg)
        self._tmp = None
        if db_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"jetrover_{mode}_")
            db_path = Path(self._tmp.name) / "memory.db"
        self.store = ExperienceStore(str(db_path), synchronous="NORMAL",
                                     clock=lambda: self.sim.time)
        self.verifier = None
        if mode in ("async", "sync"):
            vcfg = VerifierConfig.from_dict(verifier_settings(world, self.config.verifier,
                                                              mode))
            self.verifier = GloveVerifier(self.store, vcfg)
        if mode == "oracle":
            self.view = OracleView(self._oracle_truth)
        elif mode == "static":  # every entry the store holds, read from memory (fast)
            self.view = RuleView()
        self.memory: MemoryView = self.view if self.view is not None \
            else StoreMemoryView(self.store)
        self.planner = planner_factory() if planner_factory else GreedyPlanner()
        self.agent_config = AgentConfig(max_steps=self.config.max_steps)
        self.agent = TaskAgent(
            WorldMap.from_world(world), self.planner, self.memory,
            self.config.robot_id, config=self.agent_config,
            reverify=self._reverify,
            start_waypoint=self.sim.at_waypoint or world.start_waypoint,
        )
        self.tracker = DriftTracker(self)
        self._look_counts: dict[tuple[int, str], int] = {}
        self._wp_index = {w: i for i, w in enumerate(world.waypoint_ids)}
        self.touched_looks: set[str] = set()
        self.touched_edges: set[tuple[str, str]] = set()
        self._truth = _truth(self.sim)
        self.alerts: list[dict[str, Any]] = []
        self.results: list[_Episode] = []
        self._ep: _Episode | None = None
        self.wall_s = 0.0

    # ------------------------------------------------------------------ world truth

    def _track_drift(self) -> None:
        sigs, blocked = _truth(self.sim)
        old_sigs, old_blocked = self._truth
        looks = {w for w in sigs if sigs[w] != old_sigs.get(w)}
        edges = set(blocked ^ old_blocked)
        self.touched_looks |= looks
        self.touched_edges |= edges
        self._truth = (sigs, blocked)
        if looks or edges:
            self.tracker.on_change(looks, edges)

    def _oracle_truth(self) -> tuple[dict[str, str], frozenset[tuple[str, str]],
                                     list[tuple[str, str]]]:
        sigs, blocked = _truth(self.sim)
        return sigs, blocked, [(e.a, e.b) for e in self.world.edges]

    def _caused_by_drift(self, state_key: str, action: str, action_arg: str) -> bool:
        if action == ACTION_LOOK:
            return state_key in self.touched_looks
        if action == ACTION_NAVIGATE:
            return edge_key(state_key, action_arg) in self.touched_edges
        return False

    # ------------------------------------------------------------------ robot

    def look_signature(self) -> str:
        """Render ``look_frames`` frames at the current pose; colours seen in any frame.

        With ``common_noise`` the k-th look at a waypoint within an episode draws its frame
        noise (and missed detections) from (episode, waypoint, k, frame): every method
        compared side by side meets the same misses on the same visits."""
        w, h = self.config.frame_size
        key: list[int] | None = None
        if self.config.common_noise:
            here = self.sim.at_waypoint or self.sim.last_waypoint
            ep = self._ep.episode if self._ep is not None else self.sim.episode
            k = self._look_counts.get((ep, here), 0)
            self._look_counts[(ep, here)] = k + 1
            key = [max(ep, 0), self._wp_index[here], k]
        detections = []
        for j in range(self.config.look_frames):
            frame = self.sim.render_camera(w, h, noise_key=None if key is None else
                                           [*key, j])
            detections += self.detector.detect(frame)
        return outcome_signature(detections)

    def _pose(self) -> tuple[float, float, float]:
        p = self.sim.odometry()
        return (p.x, p.y, p.yaw)

    def _drive(self, target: str) -> tuple[bool, int]:
        """Drive (several corridors) to ``target`` avoiding remembered blockages."""
        avoid = set(self.agent.beliefs().blocked_edges)
        hops = 0
        for _ in range(4):
            res = self.sim.navigate(target, avoid_edges=avoid, dt=self.config.nav_dt)
            hops += max(0, len(res.visited) - 1)
            if res.outcome == OUTCOME_REACHED:
                return True, hops
            if res.outcome == OUTCOME_BLOCKED and res.blocked_edge is not None:
                avoid.add(edge_key(*res.blocked_edge))
                continue
            return False, hops
        return False, hops

    # ------------------------------------------------------------------ memory

    def record(self, t: Transition) -> None:
        """Store ``t`` (static, oracle, baseline views) or verify it (GLOVE); act on alerts
        and probe requests; feed the drift metrics."""
        self.tracker.before_record(t)
        if self.verifier is None:
            eid = self.store.record(t)
            if self.view is not None:
                self.view.record(MemoryEntry(eid, t, Status.TRUSTED, float(self.sim.time)))
            self.tracker.after_record(t, None)
            return
        place = place_of(t.state_key, t.action, t.action_arg)
        was_right = place is None or self.tracker.matches(place)
        result = self.verifier.observe(t)
        self.tracker.after_record(t, result.alert)
        if result.alert is not None:
            a = result.alert
            true = self._caused_by_drift(a.state_key, a.action, a.action_arg)
            ep = self._ep
            self.alerts.append({
                "episode": ep.episode if ep else -1, "phase": ep.phase if ep else "",
                "state_key": a.state_key, "action": a.action, "action_arg": a.action_arg,
                "observed": a.observed_outcome, "expected": [list(x) for x in a.expected],
                "suppressed": len(a.suppressed_ids), "probes_requested": a.probes_requested,
                "caused_by_drift": true, "memory_was_right": was_right,
            })
            if ep is not None:
                ep.alerts += 1
                # an alarm at a place no drift touched is false where memory agreed with
                # the world; where missed detections had made it wrong, it is a correction
                ep.false_alarms += 0 if true or not was_right else 1
                ep.corrections += 0 if true or was_right else 1
        for req in result.probe_requests:
            self._probe(req)
        if result.probe_requests:
            self.tracker.check()

    def _probe(self, req: Any) -> None:
        """Synchronous replay: re-drive to the request's state and repeat its action."""
        assert self.verifier is not None
        ok, steps = self._drive(req.state_key) if self.sim.at_waypoint != req.state_key \
            else (True, 0)
        outcomes: list[str] = []
        if ok:
            for j in range(req.alpha):
                if req.action == ACTION_LOOK:
                    outcomes.append(self.look_signature())
                    steps += 1
                    self.tracker.visit(("look", req.state_key))
                elif req.action == ACTION_NAVIGATE:
                    res = self.sim.navigate(req.action_arg, dt=self.config.nav_dt)
                    steps += 1
                    self.tracker.visit(("edge", *edge_key(req.state_key, req.action_arg)))
                    if res.outcome not in (OUTCOME_REACHED, OUTCOME_BLOCKED):
                        break
                    outcomes.append(res.outcome)
                    if res.outcome == OUTCOME_REACHED and j + 1 < req.alpha:
                        back, hops = self._drive(req.state_key)
                        steps += hops
                        if not back:
                            break
                else:
                    break
        if len(outcomes) >= req.alpha:
            self.verifier.apply_probes(req, outcomes)
        else:
            self.verifier.cancel_probe(req, "probe could not be completed")
        if self._ep is not None:
            self._ep.probe_steps += steps
        here = self.sim.at_waypoint or self.sim.last_waypoint
        if self.agent.awaiting is None:
            self.agent.relocate(here, self._pose())

    def _reverify(self, keys: list[tuple[str, str, str]]) -> bool:
        """The agent is stuck behind remembered blockages: each method answers by its rule
        (GLOVE re-tests stale negatives, PageHinkleyReset resets, PeriodicRefresh
        refreshes, local rules and the oracle do nothing)."""
        self.tracker.stuck_calls += 1
        if self.verifier is None:
            acted = self.view.on_stuck(keys) if self.view is not None else False
            if acted:
                self.tracker.check()
            return acted
        if not self.params.get("recheck", True):
            return False
        states = sorted({k[0] for k in keys})
        rr = self.verifier.recheck_negatives(states or None, stuck=True)
        for req in rr.probe_requests:
            self._probe(req)
        self.tracker.check()
        return bool(rr.suppressed_ids)

    # ------------------------------------------------------------------ run

    def phase_of(self, episode: int) -> str:
        """Name of the phase ``episode`` belongs to."""
        for p in self.phases:
            if p["start"] <= episode < p["end"]:
                return p["name"]
        return self.phases[-1]["name"]

    def _task_start(self, episode: int) -> str:
        how = self.config.task_start
        if how == "dock":
            return self.world.start_waypoint
        if how == "stay":
            return self.sim.at_waypoint or self.sim.last_waypoint
        ids = self.world.waypoint_ids
        return ids[int(np.random.default_rng([self.config.seed, 13, episode]).integers(len(ids)))]

    def run_episode(self, episode: int) -> _Episode:
        """Run task ``episode`` of the sequence."""
        task = self.tasks[episode]
        phase = self.phase_of(episode)
        if self.verifier is not None:
            self.verifier.phase = phase
        self.sim.begin_episode(episode)
        self._track_drift()
        start = self._task_start(episode)
        self.sim.teleport(start, battery=1.0)
        if self.agent.awaiting is None:
            self.agent.relocate(start)
        ep = self._ep = _Episode(episode, phase, task.color)
        self.agent.start(task, at_waypoint=self.sim.at_waypoint or self.sim.last_waypoint,
                         pose=self._pose())
        report = self.agent.report
        assert report is not None
        while True:
            action = self.agent.next_action()
            if isinstance(action, Finish):
                break
            if report.first_goal and not ep.first_goal:
                ep.first_goal, ep.first_goal_kind = report.first_goal, report.first_goal_kind
                ep.stale_goal = (report.first_goal_kind == "believed" and task.color
                                 not in self.sim.state.colors_at(report.first_goal))
            if isinstance(action, NavigateTo):
                res = self.sim.navigate(action.waypoint, dt=self.config.nav_dt)
                ts = self.agent.on_navigation(res.outcome, res.final_waypoint, self._pose())
            elif isinstance(action, Look):
                ts = self.agent.on_look(self.look_signature())
            else:  # pragma: no cover - exhaustive
                raise TypeError(f"unknown action {action!r}")
            for t in ts:
                self.record(t)
            self._track_drift()
        ep.success, ep.reason = report.success, report.reason
        ep.task_steps = report.steps
        ep.found_at = report.found_at
        ep.fallbacks, ep.llm_decisions = report.fallbacks, report.llm_decisions
        ep.reverify_calls, ep.blocked = report.reverify_calls, report.blocked
        self.results.append(ep)
        self._ep = None
        return ep

    def run(self, tick: Callable[[], Any] | None = None) -> dict[str, Any]:
        """Run every episode (``tick`` after each); returns this mode's JSON-ready result."""
        t0 = time.perf_counter()
        try:
            for episode in range(self.episodes):
                self.run_episode(episode)
                if tick is not None:
                    tick()
        finally:
            self.wall_s = time.perf_counter() - t0
            self.close()
        return self.summary()

    def close(self) -> None:
        """Close the store and remove the temporary directory."""
        if not self.store.closed:
            self.store.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def summary(self) -> dict[str, Any]:
        """Per-phase aggregates, totals, per-episode rows and alerts."""
        vstats = self.verifier.stats() if self.verifier is not None else None
        phases = []
        for p in self.phases:
            eps = [e for e in self.results if p["start"] <= e.episode < p["end"]]
            phases.append(self._aggregate(p["name"], eps, vstats))
        out = {
            "mode": self.mode,
            "planner": getattr(self.planner, "name", type(self.planner).__name__),
            "phases": phases,
            "totals": self._aggregate("total", self.results, vstats),
            "episodes": [self._episode_row(e) for e in self.results],
            "alerts": list(self.alerts),
            "wall_s": round(self.wall_s, 3),
        }
        if vstats is not None:
            out["verifier"] = {k: v for k, v in vstats.items() if k != "phases"}
        fallbacks = getattr(self.planner, "fallbacks", None)
        if isinstance(fallbacks, dict):
            out["llm"] = {"calls": getattr(self.planner, "calls", 0),
                          "fallbacks_by_reason": dict(fallbacks)}
        return out

    def metrics(self) -> dict[str, Any]:
        """Drift metrics of the finished run, JSON-ready (see :func:`run_world`)."""
        first = self.phases[1]["start"] if len(self.phases) > 1 else 0
        after = [e for e in self.results if e.episode >= first]
        n = len(after)
        transitions = self.tracker.step
        if self.verifier is not None:
            false_alarms = sum(e.false_alarms for e in self.results)
            corrections = sum(e.corrections for e in self.results)
            alerts = sum(e.alerts for e in self.results)
            vstats = self.verifier.stats()
            probes = int(vstats.get("probes", 0))
        else:
            false_alarms = self.tracker.false_alarms
            corrections = self.tracker.corrections
            alerts = self.view.alerts if self.view is not None else 0
            probes = 0
        stale_changes = [c for c in self.tracker.changes if c["stale"]]
        return {
            "method": self.mode,
            "params": dict(self.params),
            "episodes": self.episodes,
            "first_drift": first if len(self.phases) > 1 else None,
            "drift_tasks": n,
            "drift_successes": sum(e.success for e in after),
            "drift_success": round(sum(e.success for e in after) / n, 4) if n else None,
            "success_rate": round(sum(e.success for e in self.results) / len(self.results), 4)
            if self.results else None,
            "steps_per_task": round(sum(e.steps for e in after) / n, 3) if n else None,
            "stale_goals": sum(e.stale_goal for e in after),
            "detection_delays": [c["delay"] for c in stale_changes],
            "changes": [{k: v for k, v in c.items() if k != "visit_episodes"}
                        for c in self.tracker.changes],
            "alerts": alerts,
            "false_alarms": false_alarms,
            "corrections": corrections,
            "transitions": transitions,
            "false_alarms_per_1000": round(1000.0 * false_alarms / transitions, 3)
            if transitions else 0.0,
            "probes": probes,
            "probe_steps": sum(e.probe_steps for e in self.results),
            "stuck_calls": self.tracker.stuck_calls,
            "resets": self.view.resets if self.view is not None else 0,
            "deadlocks": len(self.tracker.deadlocks(self.episodes)),
            "deadlock_corridors": self.tracker.deadlocks(self.episodes),
            "phases": [self._aggregate(p["name"], [e for e in self.results
                                                   if p["start"] <= e.episode < p["end"]],
                                       None) | {"start": p["start"], "end": p["end"]}
                       for p in self.phases],
            "wall_s": round(self.wall_s, 3),
        }

    @staticmethod
    def _episode_row(e: _Episode) -> dict[str, Any]:
        return {
            "episode": e.episode, "phase": e.phase, "color": e.color, "success": e.success,
            "reason": e.reason, "steps": e.steps, "task_steps": e.task_steps,
            "probe_steps": e.probe_steps, "alerts": e.alerts, "false_alarms": e.false_alarms,
            "first_goal": e.first_goal, "first_goal_kind": e.first_goal_kind,
            "stale_goal": e.stale_goal, "found_at": e.found_at, "fallbacks": e.fallbacks,
            "reverify_calls": e.reverify_calls, "blocked": e.blocked,
        }

    def _aggregate(self, name: str, eps: Sequence[_Episode],
                   vstats: Mapping[str, Any] | None) -> dict[str, Any]:
        n = len(eps)
        ok = sum(e.success for e in eps)
        if vstats is None:
            v: Mapping[str, Any] = {}
        elif name == "total":
            v = vstats
        else:
            v = vstats.get("phases", {}).get(name, {})
        return {
            "name": name,
            "episodes": n,
            "successes": ok,
            "success_rate": round(ok / n, 4) if n else 0.0,
            "steps_per_task": round(sum(e.steps for e in eps) / n, 3) if n else 0.0,
            "task_steps": sum(e.task_steps for e in eps),
            "probe_steps": sum(e.probe_steps for e in eps),
            "alerts": sum(e.alerts for e in eps),
            "false_alarms": sum(e.false_alarms for e in eps),
            "suppressed": int(v.get("suppressions", 0)),
            "replaced": int(v.get("replacements", 0)),
            "probes": int(v.get("probes", 0)),
            "rechecks": int(v.get("rechecks", 0)),
            "stale_goals": sum(e.stale_goal for e in eps),
            "reverify_calls": sum(e.reverify_calls for e in eps),
            "llm_decisions": sum(e.llm_decisions for e in eps),
            "llm_fallbacks": sum(e.fallbacks for e in eps),
        }


# --------------------------------------------------------------------------- entry points


def _planner_factory(planner: str, llm: Any = None,
                     llm_config: LlmPlannerConfig | None = None) -> Callable[[], Any]:
    if planner == "greedy":
        return GreedyPlanner
    if planner == "llm":
        if llm is None:
            from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

            llm = LlamaBackend(LlmConfig(n_ctx=1024, max_tokens=32, timeout_s=20.0)).load()
        backend = llm
        return lambda: LlmPlanner(backend, llm_config)
    raise ValueError(f"unknown planner {planner!r}; choose greedy or llm")


def run_mode(world: World | str | Path, mode: str = "static",
             config: BenchConfig | None = None, planner: str = "greedy",
             llm: Any = None) -> dict[str, Any]:
    """Run one mode on a world (a World, a path or a bundled name); its JSON-ready result.

    ``glove-ros demo`` calls ``run_mode(world, "static")`` for the static-memory column.
    """
    w = world if isinstance(world, World) else load_world(world)
    return ModeRunner(w, mode, config, _planner_factory(planner, llm)).run()


#: settings of :func:`run_world`: one-frame looks on 80x60 frames (the detector's minimum
#: blob scaled to the frame), tasks starting at random waypoints
FAST_FRAME = (80, 60)
FAST_MIN_AREA = 8
FAST_NAV_DT = 0.5


def run_world(world: World | str | Path, method: str, params: Mapping[str, Any] | None = None,
              seed: int = 0, episodes: int = 0,
              verifier_overrides: Mapping[str, Any] | None = None,
              max_steps: int | None = None) -> dict[str, Any]:
    """Run one memory ``method`` (:data:`METHODS`, with ``params``) on ``world``: its drift
    metrics, JSON-ready and fast (80x60 frames, one frame per look, so a world's
    ``miss_detections`` rate is the per-look miss rate; common random numbers: every
    method meets the same misses on its k-th look at a place in an episode; greedy planner).

    ``seed``: task sequence, task starts and noise; ``episodes``: 0 for
    :func:`default_episodes`; ``verifier_overrides``: VerifierConfig fields for GLOVE;
    ``max_steps``: step limit per task (default ``max(30, 4 * waypoints)``: a missed
    detection at the right place costs a tour of every other waypoint before the re-look,
    even for the oracle).
    Returns ``{world, seed, method, params, episodes, first_drift, drift_tasks,
    drift_successes, drift_success, success_rate, steps_per_task, stale_goals,
    detection_delays, changes, alerts, false_alarms, transitions, false_alarms_per_1000,
    probes, probe_steps, stuck_calls, resets, deadlocks, deadlock_corridors, phases,
    wall_s}``: success, steps and stale goals over the tasks from the first drift on (all
    tasks in a nuisance-only world); the rest as :class:`DriftTracker` defines them.
    """
    w = world if isinstance(world, World) else load_world(world)
    limit = max_steps if max_steps is not None else max(30, 4 * len(w.waypoints))
    cfg = BenchConfig(episodes=episodes, seed=seed, max_steps=limit, look_frames=1,
                      frame_size=FAST_FRAME,
                      detector_min_area=FAST_MIN_AREA, nav_dt=FAST_NAV_DT, common_noise=True,
                      verifier=dict(verifier_overrides or {}))
    runner = ModeRunner(w, method, cfg, params=params)
    runner.run()
    return {"world": w.name, "seed": seed, **runner.metrics()}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def run_benchmark(world: World | str | Path, modes: Sequence[str] = MODES,
                  config: BenchConfig | None = None, planner: str = "greedy",
                  llm: Any = None, tick: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Run ``modes`` side by side on the same task sequence; the JSON result document.
    ``tick`` is called after every task (progress)."""
    w = world if isinstance(world, World) else load_world(world)
    cfg = (config or BenchConfig()).validate()
    episodes = cfg.episodes or default_episodes(w)
    factory = _planner_factory(planner, llm)
    results = {}
    for mode in modes:
        results[mode] = ModeRunner(w, mode, cfg, factory).run(tick)
    phases = phase_plan(w, episodes)
    doc: dict[str, Any] = {
        "benchmark": "jetrover",
        "world": {
            "name": w.name, "source": Path(w.source).name if w.source else "",
            "description": w.description,
            "drift_events": [_event_doc(e) for e in w.drift_events()],
            "nuisance_events": [_event_doc(e) for e in w.nuisance_events()],
        },
        "config": {"episodes": episodes, "seed": cfg.seed, "max_steps": cfg.max_steps,
                   "look_frames": cfg.look_frames, "frame_size": list(cfg.frame_size),
                   "task_start": cfg.task_start, "planner": planner},
        "verifier": VerifierConfig.from_dict(verifier_settings(w, cfg.verifier, "async")
                                             ).to_dict(),
        "phases": phases,
        "tasks": [t.color for t in make_tasks(w, episodes, cfg.seed)],
        "modes": results,
    }
    doc["verifier"].pop("mode", None)
    doc["ratios"] = _ratios(results, phases)
    return doc


def _event_doc(e: Any) -> dict[str, Any]:
    d = {"type": e.type, "category": e.category}
    if e.episode is not None:
        d["episode"] = e.episode
    if e.time is not None:
        d["time"] = e.time
    return d


def _ratios(results: Mapping[str, Any], phases: Sequence[Mapping[str, Any]]
            ) -> dict[str, Any]:
    """Side-by-side ratios over the phases after the first drift (or overall)."""
    after = [p["name"] for p in phases[1:]] or [phases[0]["name"]]
    agg: dict[str, dict[str, float]] = {}
    for mode, r in results.items():
        ph = [p for p in r["phases"] if p["name"] in after]
        n = sum(p["episodes"] for p in ph)
        agg[mode] = {
            "episodes": n,
            "success_rate": sum(p["successes"] for p in ph) / n if n else 0.0,
            "steps_per_task": sum(p["steps_per_task"] * p["episodes"] for p in ph) / n
            if n else 0.0,
            "stale_goals": sum(p["stale_goals"] for p in ph),
        }
    out: dict[str, Any] = {"over_phases": after}
    for m, a in agg.items():
        out[f"{m}_success_rate"] = round(a["success_rate"], 4)
        out[f"{m}_steps_per_task"] = round(a["steps_per_task"], 3)
        out[f"{m}_stale_goals"] = a["stale_goals"]
    if "static" in agg:
        for m in ("async", "sync"):
            if m in agg:
                out[f"steps_static_over_{m}"] = _ratio(agg["static"]["steps_per_task"],
                                                       agg[m]["steps_per_task"])
    return out


def format_table(doc: Mapping[str, Any]) -> str:
    """The comparison table printed by the CLI."""
    cfg = doc["config"]
    lines = [f"jetrover '{doc['world']['name']}': {cfg['episodes']} tasks, planner "
             f"{cfg['planner']}, seed {cfg['seed']}, step limit {cfg['max_steps']}, tasks start "
             f"at {cfg.get('task_start', 'random')}"]
    head = ["phase", "mode", "success", "steps/task", "probe steps", "alerts", "false alarms",
            "suppressed", "probes", "stale goals", "llm fallbacks"]
    rows = [head]
    for p in doc["phases"]:
        label = f"{p['name']} [{p['start']}-{p['end'] - 1}]"
        for mode, r in doc["modes"].items():
            a = next(x for x in r["phases"] if x["name"] == p["name"])
            rows.append([label, mode, f"{a['successes']}/{a['episodes']}",
                         f"{a['steps_per_task']:.2f}", str(a["probe_steps"]), str(a["alerts"]),
                         str(a["false_alarms"]), str(a["suppressed"]), str(a["probes"]),
                         str(a["stale_goals"]), str(a["llm_fallbacks"])])
            label = ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(wd) if i < 2 else c.rjust(wd)
                               for i, (c, wd) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * wd for wd in widths))
    ratios = doc.get("ratios", {})
    over = ", ".join(ratios.get("over_phases", []))
    parts = []
    for m in doc["modes"]:
        if f"{m}_success_rate" in ratios:
            parts.append(f"{m} {ratios[f'{m}_success_rate']:.0%} success, "
                         f"{ratios[f'{m}_steps_per_task']:.2f} steps/task, "
                         f"{ratios[f'{m}_stale_goals']} stale goals")
    if parts:
        where = f"after drift ({over})" if len(doc["phases"]) > 1 else "overall"
        lines.append(f"{where}: " + "; ".join(parts))
    for m in ("async", "sync"):
        v = ratios.get(f"steps_static_over_{m}")
        if v is not None:
            lines.append(f"static memory needs {v:.2f}x the steps per task of GLOVE-{m}")
    lines.append("false alarms: alerts on a (state, action) no drift event touched where "
                 "memory agreed with the world; stale goals: first goal believed to hold the "
                 "colour but did not")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path, window: int = 5) -> None:
    """Per mode over episodes: rolling success rate, steps per task, and the cumulative
    count of stale goals (drives to where memory wrongly believed the block was); drift
    events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8.0, 8.0), sharex=True)
    ax1, ax2, ax3 = axes
    styles = {"async": ("-", 2.5), "sync": ("--", 1.8), "static": (":", 2.2)}
    for mode, r in doc["modes"].items():
        eps = r["episodes"]
        ls, lw = styles.get(mode, ("-", 1.5))
        x = np.array([e["episode"] for e in eps])
        ok = np.array([1.0 if e["success"] else 0.0 for e in eps])
        steps = np.array([e["steps"] for e in eps], dtype=float)
        stale = np.cumsum([1 if e["stale_goal"] else 0 for e in eps])
        k = max(1, min(window, len(ok)))
        roll = np.array([ok[max(0, i - k + 1): i + 1].mean() for i in range(len(ok))])
        ax1.plot(x, roll, ls, linewidth=lw, label=mode, drawstyle="steps-post")
        ax2.plot(x, steps, ls, linewidth=lw, label=mode, marker=".")
        ax3.plot(x, stale, ls, linewidth=lw, label=mode, drawstyle="steps-post")
    ax1.set_ylim(-0.05, 1.1)
    ax1.set_ylabel(f"success (rolling {window})")
    ax2.set_ylabel("steps per task")
    ax3.set_ylabel("stale goals (cumulative)")
    ax3.set_xlabel("episode (one task each)")
    for ax in axes:
        for e in doc["world"]["drift_events"]:
            if "episode" in e:
                ax.axvline(e["episode"], color="red", linestyle="--", linewidth=1)
                ax.text(e["episode"], ax.get_ylim()[1], f" {e['type']}", color="red",
                        fontsize=7, va="top")
    ax1.legend(fontsize=8, loc="lower left")
    cfg = doc["config"]
    ax1.set_title(f"JetRover '{doc['world']['name']}': {cfg['planner']} planner, tasks start "
                  f"at {cfg.get('task_start', 'random')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="WORLD",
                        help="world file (worlds/*.yaml) or a bundled world's name")
    parser.add_argument("--mode", choices=("all", *MODES), default="all",
                        help="memory mode; 'all' (default) runs async, sync and static side "
                        "by side")
    parser.add_argument("--planner", choices=("greedy", "llm"), default="greedy",
                        help="greedy (deterministic) or llm (bundled GGUF, greedy fallback)")
    parser.add_argument("--episodes", type=int, default=0, metavar="N",
                        help="tasks per mode (default: 20 after the last drift event)")
    parser.add_argument("--seed", type=int, default=0, help="task sequence / noise seed")
    parser.add_argument("--max-steps", type=int, default=BenchConfig.max_steps,
                        help="step limit per task (default: %(default)s)")
    parser.add_argument("--look-frames", type=int, default=BenchConfig.look_frames,
                        help="camera frames per look (default: %(default)s)")
    parser.add_argument("--task-start", choices=TASK_STARTS, default=BenchConfig.task_start,
                        help="where each task starts (default: %(default)s)")
    parser.add_argument("--verifier", action="append", default=[], metavar="KEY=VALUE",
                        help="override a VerifierConfig field, e.g. --verifier p_th=2 "
                        "(repeatable)")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where jetrover_<world>.json and .png go (default: %(default)s)")


def result_stem(world: World) -> str:
    """``jetrover_<world name>`` without a doubled prefix (jetrover_maze -> jetrover_maze)."""
    name = world.name[len("jetrover_"):] if world.name.startswith("jetrover_") else world.name
    return f"jetrover_{name}"


def _parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--verifier expects KEY=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed arguments; 0 on success, 2 on bad input."""
    try:
        world = load_world(args.scenario)
        cfg = BenchConfig(episodes=args.episodes, seed=args.seed, max_steps=args.max_steps,
                          look_frames=args.look_frames, task_start=args.task_start,
                          verifier=_parse_overrides(args.verifier)).validate()
    except (ValueError, FileNotFoundError) as exc:
        print(f"glove-ros bench jetrover: {exc}", file=sys.stderr)
        return 2
    modes = MODES if args.mode == "all" else (args.mode,)
    from tqdm import tqdm

    bar = tqdm(total=(cfg.episodes or default_episodes(world)) * len(modes), desc="tasks",
               unit="task", file=sys.stderr, leave=False, dynamic_ncols=True)
    try:
        doc = run_benchmark(world, modes, cfg, args.planner, tick=lambda: bar.update(1))
    except Exception as exc:  # e.g. the LLM cannot be loaded
        from glove_ros.core.llm.runtime import LlmLoadError

        if isinstance(exc, (LlmLoadError, ValueError)):
            print(f"glove-ros bench jetrover: {exc}", file=sys.stderr)
            return 2
        raise
    finally:
        bar.close()
    # the LLM planner's results sit beside the greedy planner's, never over them
    stem = result_stem(world) + ("_llm" if args.planner == "llm" else "")
    return write_results(doc, args.out, stem, write_plot, format_table, args.json)
