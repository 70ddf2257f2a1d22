"""JetRover search benchmark: the core loop of one memory method (:class:`ModeRunner`).

Simulator, camera frames and detector (the colour detector, or the shipped darknet
YOLOv3-tiny with its detections cached per frame: :class:`DetectionCache`), the task agent,
experience memory with the GLOVE verifier or a baseline view, probes and the stuck hook: one
method through the task sequence, and its per-phase result. Separate from the entry points
that run methods side by side and from the report.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks._jetrover_config import (
    GLOVE_PARAMS,
    METHOD_ALIASES,
    METHODS,
    BenchConfig,
    default_episodes,
    make_tasks,
    phase_plan,
    verifier_settings,
)
from glove_ros.benchmarks._jetrover_drift import DetectorRates, DriftTracker, place_of
from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.memory.looks import look_counts, look_names
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.plan.agent import AgentConfig, TaskAgent
from glove_ros.core.plan.agent_memory import MemoryView, StoreMemoryView
from glove_ros.core.plan.agent_policy import GreedyPlanner
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
    Finish,
    Look,
    NavigateTo,
    WorldMap,
)
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_views import RULE_PARAMS, OracleView, RuleView, make_view
from glove_ros.core.verify.retest import make_retest_view, retest_names, split_retest
from glove_ros.core.verify.verifier import GloveVerifier
from glove_ros.core.world.observation import Frame, LookConfig, judge_frames
from glove_ros.core.world.perception import (
    ColorBlockDetector,
    ColorDetectorConfig,
    Detection,
    outcome_signature,
)
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import World, edge_key

__all__ = [
    "DetectionCache",
    "ModeRunner",
    "frame_digest",
]


# --------------------------------------------------------------------------- darknet


def frame_digest(frame: np.ndarray) -> str:
    """A digest of a frame's pixels (and shape): equal digests, equal frames."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((frame.shape, str(frame.dtype))).encode())
    h.update(np.ascontiguousarray(frame).tobytes())
    return h.hexdigest()


class DetectionCache:
    """The darknet detector's detections per frame, keyed by the digest of the frame's
    pixels; one per process and detector setting (:meth:`shared`), optionally kept in a
    folder across runs.

    Why the pixels: with common noise the k-th look at a waypoint in an episode renders the
    same frame in every method whose world is the same there (placements, nuisance obstacles,
    dropouts, pose); the pixel digest states that condition exactly, where a key built by
    hand from (noise key, placements, pose) would miss a dropout or a passing obstacle. The
    frame is rendered anyway (rendering is a few ms, and it consumes the simulator's dropout
    frames: skipping it would change the run); what a hit saves is the ~60-100 ms forward
    pass. Detections are the same whether they came from the cache or the network, so a
    result never depends on the cache.

    On disk (``folder``): ``<folder>/darknet-<key>.jsonl``, ``key`` a hash of the detector
    config, the weights' sha256 and the OpenCV version (:attr:`settings`); one JSON line
    per frame, ``{"frame": digest, "detections": [[label, score, x, y, w, h], ...]}``,
    appended as frames are first detected. No world file hash is needed: the pixels name the
    scene. Delete the folder to start afresh.
    """

    _shared: dict[tuple[str, str], DetectionCache] = {}

    def __init__(self, detector: Any, folder: str | Path | None = None) -> None:
        import cv2

        from glove_ros.core.world.darknet import SHIPPED_FILES

        self.detector = detector
        self.settings = {
            "backend": "darknet",
            "config": asdict(detector.config),
            "weights_sha256": SHIPPED_FILES["weights"][2]
            if Path(detector.model.weights).name == SHIPPED_FILES["weights"][0]
            else str(detector.model.weights),
            "opencv": cv2.__version__,
        }
        self.key = hashlib.sha256(json.dumps(self.settings, sort_keys=True).encode()
                                  ).hexdigest()[:16]
        self._memo: dict[str, tuple[Detection, ...]] = {}
        self._from_disk: set[str] = set()
        self.path: Path | None = None
        if folder:
            self.path = Path(folder) / f"darknet-{self.key}.jsonl"
            self._load()
        self.runs = 0
        self.hits = 0
        self.disk_hits = 0
        self.detect_s = 0.0

    @classmethod
    def shared(cls, folder: str = "", config: Any = None) -> DetectionCache:
        """The process's cache for the shipped detector with ``config`` (default
        :class:`~glove_ros.core.world.darknet.DarknetConfig`) and ``folder``."""
        from glove_ros.core.world.darknet import DarknetConfig, DarknetDetector

        cfg = config or DarknetConfig()
        k = (json.dumps(asdict(cfg), sort_keys=True), str(folder))
        if k not in cls._shared:
            cls._shared[k] = cls(DarknetDetector(cfg), folder or None)
        return cls._shared[k]

    def _load(self) -> None:
        assert self.path is not None
        if not self.path.exists():
            return
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                row = json.loads(line)
                dets = tuple(Detection(str(d[0]), "", int(d[2]), int(d[3]), int(d[4]),
                                       int(d[5]), float(d[1])) for d in row["detections"])
                self._memo[str(row["frame"])] = dets
                self._from_disk.add(str(row["frame"]))
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise ValueError(f"{self.path}:{n}: not a detection cache line ({exc}); "
                                 "delete the file to rebuild it") from exc

    def detect(self, frame: np.ndarray) -> tuple[str, tuple[Detection, ...], str]:
        """``(digest, detections, source)`` of ``frame``; source ``run`` (the network ran),
        ``memory`` (seen before in this process) or ``disk`` (from the folder)."""
        digest = frame_digest(frame)
        dets = self._memo.get(digest)
        if dets is not None:
            if digest in self._from_disk:
                self._from_disk.discard(digest)  # counted once; later hits are in memory
                self.disk_hits += 1
                return digest, dets, "disk"
            self.hits += 1
            return digest, dets, "memory"
        t0 = time.perf_counter()
        dets = tuple(self.detector.detect(frame))
        self.detect_s += time.perf_counter() - t0
        self.runs += 1
        self._memo[digest] = dets
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            row = {"frame": digest, "detections": [[d.label, d.confidence, d.x, d.y, d.width,
                                                     d.height] for d in dets]}
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
        return digest, dets, "run"

    def stats(self) -> dict[str, Any]:
        """Frames detected by the network, hits in memory and from disk, seconds spent."""
        return {"detector_runs": self.runs, "cache_hits": self.hits,
                "disk_hits": self.disk_hits, "detect_s": round(self.detect_s, 3),
                "settings": self.settings, "file": str(self.path) if self.path else None}


def _truth(sim: Simulator) -> tuple[dict[str, str], frozenset[tuple[str, str]]]:
    return ({w: sim.state.expected_signature(w) for w in sim.world.waypoint_ids},
            sim.state.blocked_edges)


def _painted(sim: Simulator, waypoint: str) -> dict[str, int]:
    """Class -> instances painted in the last rendered frame (what the detector could see:
    nuisance-hidden blocks and obstacles left out); the state's truth at ``waypoint`` when
    the render does not say."""
    counts = getattr(getattr(sim, "last_render", None), "counts", None)
    if counts is None:
        return look_counts(sim.state.expected_signature(waypoint))
    return dict(counts)


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
    answers the stuck hook by its rule; ``<baseline>+retest`` answers it with GLOVE's
    stale-negative re-test and knows the world's unique colours as GLOVE does
    (:mod:`glove_ros.core.verify.retest`).

    ``planner_factory`` builds a fresh planner (default :class:`GreedyPlanner`); ``db_path``
    is the store file (default: a temporary directory removed afterwards); ``rates``
    tallies the detector's measured rates (:class:`DetectorRates`, shared by the methods
    of one benchmark run; default: this runner's own).

    Looks (:meth:`look_signature`) come from the configured perception: the colour
    detector on rendered frames (colour worlds), the darknet detector on rendered frames
    judged by the k-of-n look rule (object worlds), or the simulator's ground truth
    (``perception="oracle"``).
    """

    def __init__(self, world: World, mode: str, config: BenchConfig | None = None,
                 planner_factory: Callable[[], Any] | None = None,
                 db_path: str | Path | None = None,
                 params: Mapping[str, Any] | None = None,
                 rates: DetectorRates | None = None) -> None:
        mode = METHOD_ALIASES.get(mode, mode)
        base, retest = split_retest(mode)
        if mode not in METHODS and not (retest and base in RULE_PARAMS):
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(METHODS)} or "
                             f"a baseline's re-test arm ({', '.join(retest_names(RULE_PARAMS))})")
        params = dict(params or {})
        self.view: RuleView | None = None
        if retest:  # the view is built once the verifier settings are known (below)
            make_view(base, params)  # bad parameters fail here, as for the bare rule
            self.params = {**RULE_PARAMS[base][1], **params}
        elif mode in ("async", "sync"):
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
        self.config = (config or BenchConfig()).resolve(world)
        self.episodes = self.config.episodes or default_episodes(world)
        self.tasks = make_tasks(world, self.episodes, self.config.seed)
        self.phases = phase_plan(world, self.episodes)
        # the same arrival, the same stop pose (and, with common noise, the same frame)
        self.sim = Simulator(world, seed=world.seed + self.config.seed,
                             keyed_arrivals=bool(self.config.keyed_arrivals))
        dcfg = None if self.config.detector_min_area is None else \
            ColorDetectorConfig(min_area=self.config.detector_min_area)
        self.detector = ColorBlockDetector(dcfg)
        self.darknet: DetectionCache | None = None
        if self.config.perception == "camera" and self.config.detector == "darknet":
            self.darknet = DetectionCache.shared(self.config.detection_cache)
        self.look_config = LookConfig(frames=self.config.look_frames,
                                      min_count=self.config.min_count, min_frames=1)
        self.rates = rates if rates is not None else DetectorRates()
        self.looks = 0
        self.frames = Counter({"frames": 0, "run": 0, "memory": 0, "disk": 0})
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
        if retest:  # the shared re-test policy, with what GLOVE knows of this world
            self.view = make_retest_view(mode, params, VerifierConfig.from_dict(
                verifier_settings(world, self.config.verifier, "async")))
        elif mode == "oracle":
            self.view = OracleView(self._oracle_truth)
        elif mode == "static":  # every entry the store holds, read from memory (fast)
            self.view = RuleView()
        self.memory: MemoryView = self.view if self.view is not None \
            else StoreMemoryView(self.store)
        self.planner = planner_factory() if planner_factory else GreedyPlanner()
        self.agent_config = AgentConfig(max_steps=self.config.max_steps,
                                        believed_order=self.config.believed_order)
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
        """One look at the current pose, its outcome signature.

        Colour detector: render ``look_frames`` frames, colours seen in any frame. Darknet:
        render ``look_frames`` (n) frames, detect each (cached, :class:`DetectionCache`), a
        class is seen when detected in at least k of them (``BenchConfig.min_count``,
        :func:`~glove_ros.core.world.observation.judge_frames`), ``objects=`` with counts.
        Oracle perception: the simulator's ground truth, nothing rendered.

        With ``common_noise`` the k-th look at a waypoint within an episode draws its frame
        noise (and missed detections) from (episode, waypoint, k, frame): every method
        compared side by side meets the same misses on the same visits; with
        ``keyed_arrivals`` (on with darknet) the simulator also keys each stop pose's jitter
        by its arrival: the k-th arrival at a waypoint in an episode stands at the same pose
        in every method, so the same look key there renders the same frame."""
        w, h = self.config.frame_size
        here = self.sim.at_waypoint or self.sim.last_waypoint
        key: list[int] | None = None
        if self.config.common_noise:
            ep = self._ep.episode if self._ep is not None else self.sim.episode
            k = self._look_counts.get((ep, here), 0)
            self._look_counts[(ep, here)] = k + 1
            key = [max(ep, 0), self._wp_index[here], k]
        self.looks += 1
        if self.config.perception == "oracle":
            return self.sim.state.expected_signature(here)
        if self.darknet is not None:
            return self._darknet_look(here, key)
        detections = []
        for j in range(self.config.look_frames):
            frame = self.sim.render_camera(w, h, noise_key=None if key is None else
                                           [*key, j])
            detections += self.detector.detect(frame)
        return outcome_signature(detections)

    def _darknet_look(self, here: str, key: list[int] | None) -> str:
        assert self.darknet is not None
        w, h = self.config.frame_size
        frames, digests = [], []
        for j in range(self.config.look_frames):
            img = self.sim.render_camera(w, h, noise_key=None if key is None else [*key, j])
            digest, dets, source = self.darknet.detect(img)
            self.frames["frames"] += 1
            self.frames[source] += 1
            frame = Frame.from_detections(here, dets, kind="objects")
            self.rates.frame(digest, _painted(self.sim, here), frame.counts)
            frames.append(frame)
            digests.append(digest)
        look = judge_frames(frames, self.look_config, here, kind="objects")
        self.rates.look(tuple(digests), look_counts(self.sim.state.expected_signature(here)),
                        dict(look.instances))
        return look.outcome

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
            # the samples are observations: the same false-alarm reading as a transition
            self.tracker.check(place_of(req.state_key, req.action, req.action_arg),
                               len(outcomes))
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
                                 not in look_names(self.sim.state.expected_signature(
                                     report.first_goal)))
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
        if self.darknet is not None or self.config.perception != "camera":
            out["perception"] = self.perception_stats()
        fallbacks = getattr(self.planner, "fallbacks", None)
        if isinstance(fallbacks, dict):
            out["llm"] = {"calls": getattr(self.planner, "calls", 0),
                          "fallbacks_by_reason": dict(fallbacks)}
        return out

    def perception_stats(self) -> dict[str, Any]:
        """Looks made (agent and probes), frames rendered for darknet, and where their
        detections came from: ``detector_runs`` (the network ran), ``cache_hits`` (another
        method, or an earlier look, had the same frame), ``disk_hits``."""
        out: dict[str, Any] = {"perception": self.config.perception, "looks": self.looks}
        if self.darknet is not None:
            out.update(frames=self.frames["frames"], detector_runs=self.frames["run"],
                       cache_hits=self.frames["memory"], disk_hits=self.frames["disk"])
        return out

    def metrics(self) -> dict[str, Any]:
        """Drift metrics of the finished run, JSON-ready (see :func:`run_world`)."""
        first = self.phases[1]["start"] if len(self.phases) > 1 else 0
        after = [e for e in self.results if e.episode >= first]
        n = len(after)
        transitions = self.tracker.step
        observed = self.tracker.observations  # transitions and sync probes' samples
        # one definition of a false alarm for every method (DriftTracker)
        false_alarms = self.tracker.false_alarms
        corrections = self.tracker.corrections
        if self.verifier is not None:
            alerts = sum(e.alerts for e in self.results)
            vstats = self.verifier.stats()
            probes = int(vstats.get("probes", 0))
        else:
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
            "observations": observed,
            "false_alarms_per_1000": round(1000.0 * false_alarms / observed, 3)
            if observed else 0.0,
            "looks": self.looks,
            "false_alarms_per_1000_looks": round(1000.0 * false_alarms / self.looks, 3)
            if self.looks else 0.0,
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
