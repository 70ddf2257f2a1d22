"""JetRover search benchmark: GLOVE (async, sync) against static memory, without DDS.

The core loop the ROS nodes run, in one process: the built-in :class:`Simulator` plays a
world file (drift and nuisance events by episode), every look renders real camera frames that
a detector turns into an outcome signature, the :class:`TaskAgent` plans
from trusted experience memory (an :class:`ExperienceStore` in a temporary SQLite file), and
every transition it returns is recorded through the :class:`GloveVerifier` (or, for static
memory, stored unverified). Each episode is one task "find the <colour> block" (or, on an
object world, "find the <class>"), names drawn from the world's blocks with a seeded
generator; the same task sequence runs in every mode.

Perception (``--detector``, ``--perception``): on colour worlds :class:`ColorBlockDetector`
(HSV thresholds) reads the colour blocks, exactly as always. On object worlds (``look_kind:
objects``, the simulator paints real photo crops) the shipped darknet YOLOv3-tiny decides
what is seen: a look renders ``--look-frames`` (n) frames and a class counts as seen when it
is detected in at least k of them (``--look-min-count``, default ``ceil(2n/3)``: the look
rule of :mod:`glove_ros.core.world.observation`), with the most common count
(``objects=cup,person*2``). Common random numbers are on with darknet, so the k-th look at
a waypoint in an episode renders the same frame for every method whose world is the same
there, and the detector's results are cached per frame (keyed by the pixels' digest: in
memory per process, and with ``--detection-cache DIR`` on disk across runs; see
:class:`~glove_ros.benchmarks._jetrover_runner.DetectionCache`); the JSON reports the
network runs and cache hits. The detector's measured rates on the bench's own frames and
looks (per class: hit rate where present, false detections where absent) are in the
document's ``perception.rates``. ``--perception oracle`` makes every look the simulator's
ground truth (no frames, no detector): the same world with the oracle's perception, for
comparison.

Baselines (``--baselines``): any baseline rule of :mod:`glove_ros.core.verify.memory_views`
and its fair arm ``<Rule>+retest`` (GLOVE's stale-negative re-test policy,
:mod:`glove_ros.core.verify.retest`) run through the same loop; ``--sweep`` runs each over
its parameter values (:data:`BASELINE_SWEEP`, suite_fair's) and reports each at its best
setting on this run (most successes after the first drift, then fewest steps: chosen
after the fact, the strongest opponent GLOVE could face, but tuned on the seed it reports).
The project's rule is to tune on one seed range and report on another: ``--tune-from
A.json B.json ... --write-baseline-params FILE`` sums the sweeps of development-seed runs
and freezes each baseline's best setting in FILE; ``--baseline-params FILE`` then runs each
baseline once at its frozen setting and records the file, the seeds it was tuned on and the
settings in ``baseline_tuning`` (:mod:`glove_ros.benchmarks._jetrover_tuning`).
``best_baseline`` names the best bare rule and the best re-test arm; the ratios give steps of
static memory and of the best baseline over GLOVE's.
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
(:class:`DriftTracker`: detection delay in visits, false alarms per 1,000 observations,
deadlocks, ...). When the verifier knows ``unique_objects``, the colours that occur once
among the world's blocks are passed to it (:func:`verifier_settings`).

A look grabs ``--look-frames`` frames and counts a colour seen in any of them. When the
agent's trusted memory allows no route to the waypoints left (or only a long detour), it asks
the verifier to re-verify stale negative memories (``recheck_negatives(stuck=True)``; sync
mode probes them, charged as steps). The verifier runs with VerifierConfig defaults unless
``--verifier KEY=VALUE`` overrides them.

Phases split at the world's episode-triggered drift events. Per phase and mode: success
rate, steps per task (task + probe), dissonance alerts, false alarms (one definition for
every mode and rule, :class:`DriftTracker`: an observation after which the belief at a place
no drift event touched -- a waypoint whose blocks did not change, a corridor whose blocked
state did not change -- goes from right to wrong; forgetting is not an alarm), memories
suppressed, probes, LLM fallbacks, and "stale goals": tasks whose first goal was a
waypoint memory believed held the colour when it did not (driving back to the old place).

Drift metrics per method (``modes.<m>.drift``, :class:`DriftTracker`): detection delay of
each stale change in visits, false alarms per 1,000 transitions and per 1,000 looks (every
false alarm of the run over every look the robot made, the agent's and probes'), deadlocks.

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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.benchmarks import write_results
from glove_ros.benchmarks._jetrover_config import (
    BASELINE_SWEEP,
    DETECTORS,
    MODES,
    PERCEPTIONS,
    TASK_STARTS,
    BenchConfig,
    default_episodes,
    make_tasks,
    phase_plan,
    verifier_settings,
)
from glove_ros.benchmarks._jetrover_drift import DetectorRates
from glove_ros.benchmarks._jetrover_report import format_table, write_plot
from glove_ros.benchmarks._jetrover_runner import ModeRunner
from glove_ros.benchmarks._jetrover_tuning import load_params, write_params
from glove_ros.core.plan.agent_policy import (
    BELIEVED_ORDERS,
    GreedyPlanner,
    LlmPlanner,
    LlmPlannerConfig,
)
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_rules import BASELINE_PARAMS
from glove_ros.core.verify.memory_views import RULE_PARAMS
from glove_ros.core.verify.retest import retest_names, split_retest
from glove_ros.core.world.worldfile import World, load_world
from glove_ros.progress import Progress, add_progress_argument

__all__ = [
    "FAST_FRAME",
    "FAST_MIN_AREA",
    "FAST_NAV_DT",
    "add_arguments",
    "config_doc",
    "parse_baselines",
    "main",
    "result_stem",
    "run_benchmark",
    "run_mode",
    "run_world",
]

DEFAULT_OUT = Path("bench/results")


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


def _settings(name: str, sweep: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """The parameter settings a baseline runs: one per swept value, else its defaults."""
    param = BASELINE_PARAMS.get(split_retest(name)[0])
    values = (sweep or {}).get(split_retest(name)[0], ()) if param else ()
    return [{param: v} for v in values] if values else [{}]


def _after_drift(r: Mapping[str, Any], phases: Sequence[Mapping[str, Any]]
                 ) -> tuple[int, float]:
    """(successes, steps per task) over the phases after the first drift (or overall)."""
    after = {p["name"] for p in phases[1:]} or {phases[0]["name"]}
    ph = [p for p in r["phases"] if p["name"] in after]
    n = sum(p["episodes"] for p in ph)
    return (sum(p["successes"] for p in ph),
            sum(p["steps_per_task"] * p["episodes"] for p in ph) / n if n else 0.0)


def _after_phases(r: Mapping[str, Any], phases: Sequence[Mapping[str, Any]]
                  ) -> list[Mapping[str, Any]]:
    after = {p["name"] for p in phases[1:]} or {phases[0]["name"]}
    return [p for p in r["phases"] if p["name"] in after]


def _tasks_after_drift(r: Mapping[str, Any], phases: Sequence[Mapping[str, Any]]) -> int:
    return sum(p["episodes"] for p in _after_phases(r, phases))


def _stale_after_drift(r: Mapping[str, Any], phases: Sequence[Mapping[str, Any]]) -> int:
    return sum(p["stale_goals"] for p in _after_phases(r, phases))


def _drift_doc(m: Mapping[str, Any]) -> dict[str, Any]:
    """The drift metrics of :meth:`ModeRunner.metrics` that the document keeps."""
    delays = m["detection_delays"]
    found = sorted(d for d in delays if d is not None)
    keys = ("drift_tasks", "drift_successes", "drift_success", "steps_per_task",
            "stale_goals", "detection_delays", "alerts", "false_alarms", "corrections",
            "transitions", "false_alarms_per_1000", "looks", "false_alarms_per_1000_looks",
            "probes", "probe_steps", "stuck_calls", "resets", "deadlocks")
    out = {k: m[k] for k in keys}
    out["stale_changes"] = len(delays)
    out["undetected"] = sum(d is None for d in delays)
    out["delay_median"] = found[(len(found) - 1) // 2] if found else None
    out["delay_max"] = found[-1] if found else None
    return out


def run_benchmark(world: World | str | Path, modes: Sequence[str] = MODES,
                  config: BenchConfig | None = None, planner: str = "greedy",
                  llm: Any = None, tick: Callable[[], Any] | None = None,
                  baselines: Sequence[str] = (),
                  sweep: Mapping[str, Sequence[Any]] | None = None,
                  frozen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run ``modes`` and ``baselines`` side by side on the same task sequence; the JSON
    result document. ``tick`` is called after every task (progress).

    ``baselines``: baseline rules (:data:`~glove_ros.core.verify.memory_views.RULE_PARAMS`)
    and ``<Rule>+retest`` arms; ``sweep``: rule -> parameter values each is run with (e.g.
    :data:`BASELINE_SWEEP`), the best setting kept (most successes after the first drift,
    then fewest steps), every setting's score in ``baseline_sweep``; ``frozen``: settings
    tuned on other seeds (:func:`~glove_ros.benchmarks._jetrover_tuning.load_params`'s
    document): each baseline runs once at its frozen setting, recorded in
    ``baseline_tuning`` (not with ``sweep``)."""
    w = world if isinstance(world, World) else load_world(world)
    cfg = (config or BenchConfig()).resolve(w)
    if sweep and frozen:
        raise ValueError("sweep or frozen baseline settings, not both: a sweep picks settings "
                         "on this run, frozen settings were picked on other seeds")
    fixed = dict((frozen or {}).get("settings", {}))
    unset = [b for b in baselines if frozen is not None and b not in fixed]
    if unset:
        raise ValueError(f"no frozen setting for {', '.join(unset)}")
    for b in baselines:
        base, _ = split_retest(b)
        if base not in RULE_PARAMS or b in modes:
            raise ValueError(f"baseline {b!r}: expected one of {', '.join(RULE_PARAMS)} or "
                             f"its re-test arm ({', '.join(retest_names(RULE_PARAMS))}), "
                             "each once and not among the modes")
    episodes = cfg.episodes or default_episodes(w)
    phases = phase_plan(w, episodes)
    factory = _planner_factory(planner, llm)
    rates = DetectorRates()
    runners: list[ModeRunner] = []
    results: dict[str, dict[str, Any]] = {}

    def run(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        runner = ModeRunner(w, name, cfg, factory, params=params, rates=rates)
        runners.append(runner)
        r = runner.run(tick)
        r["drift"] = _drift_doc(runner.metrics())
        if params is not None:
            r["params"] = dict(runner.params)
        return r

    for mode in modes:
        results[mode] = run(mode)
    sweep_doc: dict[str, list[dict[str, Any]]] = {}
    for b in baselines:
        scored = []
        for setting in [dict(fixed[b])] if frozen is not None else _settings(b, sweep):
            r = run(b, setting)
            ok, steps = _after_drift(r, phases)
            scored.append((ok, -steps, r))
        scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
        results[b] = scored[0][2]
        sweep_doc[b] = [{"params": r["params"], "successes_after_drift": ok,
                         "steps_per_task_after_drift": round(-st, 3),
                         "tasks_after_drift": _tasks_after_drift(r, phases),
                         "stale_goals_after_drift": _stale_after_drift(r, phases),
                         "false_alarms": r["drift"]["false_alarms"],
                         "looks": r["drift"]["looks"]} for ok, st, r in scored]
    doc: dict[str, Any] = {
        "benchmark": "jetrover",
        "world": {
            "name": w.name, "source": Path(w.source).name if w.source else "",
            "description": w.description,
            "drift_events": [_event_doc(e) for e in w.drift_events()],
            "nuisance_events": [_event_doc(e) for e in w.nuisance_events()],
        },
        "config": config_doc(cfg, episodes, planner),
        "verifier": VerifierConfig.from_dict(verifier_settings(w, cfg.verifier, "async")
                                             ).to_dict(),
        "phases": phases,
        "tasks": [t.color for t in make_tasks(w, episodes, cfg.seed)],
        "modes": results,
    }
    doc["verifier"].pop("mode", None)
    if sweep_doc and frozen is None:
        doc["baseline_sweep"] = sweep_doc
    if frozen is not None:
        doc["baseline_tuning"] = {k: frozen[k] for k in ("file", "tuned_on_seeds",
                                                         "seed_in_tuning_set", "selection")
                                  if k in frozen}
        doc["baseline_tuning"]["settings"] = {b: dict(fixed[b]) for b in baselines}
    bare = [b for b in baselines if not split_retest(b)[1]]
    fair = [b for b in baselines if split_retest(b)[1]]
    best = {k: _best(results, names, phases) for k, names in (("bare", bare), ("retest", fair))
            if names}
    if best:
        doc["best_baseline"] = best
    doc["ratios"] = _ratios(results, phases, best)
    if cfg.perception == "camera" and cfg.detector == "darknet":
        cache = next(r.darknet for r in runners if r.darknet is not None)
        doc["perception"] = {
            **cfg.describe(),
            "frames": sum(r.frames["frames"] for r in runners),
            "detector_runs": sum(r.frames["run"] for r in runners),
            "cache_hits": sum(r.frames["memory"] for r in runners),
            "disk_hits": sum(r.frames["disk"] for r in runners),
            "detector_settings": cache.settings,
            "cache_file": str(cache.path) if cache.path else None,
            "rates": rates.summary(),
        }
    return doc


def config_doc(cfg: BenchConfig, episodes: int, planner: str = "greedy") -> dict[str, Any]:
    """The document's ``config`` block for a resolved ``cfg`` (what a frozen-settings file
    is checked against)."""
    return {"episodes": episodes, "seed": cfg.seed, "max_steps": cfg.max_steps,
            "look_frames": cfg.look_frames, "frame_size": list(cfg.frame_size),
            "task_start": cfg.task_start, "planner": planner,
            **({"believed_order": cfg.believed_order} if cfg.believed_order != "nearest" else {}),
            **cfg.describe()}


def _best(results: Mapping[str, Any], names: Sequence[str],
          phases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The strongest of ``names`` at its best setting: most successes after the first drift,
    then fewest steps per task."""
    def score(b: str) -> tuple[int, float]:
        ok, steps = _after_drift(results[b], phases)
        return ok, -steps

    name = max(names, key=score)
    return {"name": name, "params": results[name].get("params", {})}


def _event_doc(e: Any) -> dict[str, Any]:
    d = {"type": e.type, "category": e.category}
    if e.episode is not None:
        d["episode"] = e.episode
    if e.time is not None:
        d["time"] = e.time
    return d


def _ratios(results: Mapping[str, Any], phases: Sequence[Mapping[str, Any]],
            best: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Side-by-side ratios over the phases after the first drift (or overall); with
    ``best`` also the best baselines' steps over GLOVE's."""
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
    for kind, b in (best or {}).items():
        label = "best_baseline" if kind == "bare" else "best_retest"
        for m in ("async", "sync"):
            if m in agg:
                out[f"steps_{label}_over_{m}"] = _ratio(agg[b["name"]]["steps_per_task"],
                                                        agg[m]["steps_per_task"])
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    add_progress_argument(parser)
    parser.add_argument("--scenario", required=True, metavar="WORLD",
                        help="world file (worlds/*.yaml) or a bundled world's name")
    parser.add_argument("--mode", choices=("all", *MODES, "oracle"), default="all",
                        help="memory mode; 'all' (default) runs async, sync, static and the "
                        "oracle (memory = the simulator's current truth: the room left) side "
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
    parser.add_argument("--believed-order", choices=BELIEVED_ORDERS,
                        default=BenchConfig.believed_order,
                        help="of several places memory believes hold the target, every method's "
                        "agent goes to the nearest first or to the one looked at latest "
                        "(default: %(default)s)")
    parser.add_argument("--baselines", default="none", metavar="LIST",
                        help="baseline rules to run beside the modes: comma-separated names "
                        f"({', '.join(RULE_PARAMS)}, each optionally with +retest), 'all' "
                        "(every rule), 'fair' (every rule and its +retest arm) or 'none' "
                        "(default)")
    parser.add_argument("--sweep", action="store_true",
                        help="run each baseline over its parameter values (suite_fair's) and "
                        "report its best setting on this run (tuned on the reported seed: for "
                        "development; report runs use --baseline-params)")
    parser.add_argument("--baseline-params", default="", metavar="FILE",
                        help="run each baseline once at the setting frozen in FILE (tuned on "
                        "development seeds: --tune-from ... --write-baseline-params); the "
                        "document records the file, its seeds and settings (not with --sweep)")
    parser.add_argument("--tune-from", nargs="+", default=[], metavar="RESULT_JSON",
                        help="with --write-baseline-params: the JSON documents of --sweep runs "
                        "on development seeds (one per seed); their summed scores pick each "
                        "baseline's setting; runs nothing else")
    parser.add_argument("--write-baseline-params", default="", metavar="FILE",
                        help="where --tune-from writes the frozen settings")
    parser.add_argument("--detector", choices=DETECTORS, default="auto",
                        help="color (HSV, colour blocks), darknet (the shipped YOLOv3-tiny, "
                        "object classes) or auto (default: the one that fits the world)")
    parser.add_argument("--perception", choices=PERCEPTIONS, default="camera",
                        help="camera (rendered frames through the detector, default) or "
                        "oracle (every look is the simulator's ground truth)")
    parser.add_argument("--look-min-count", type=int, default=None, metavar="K",
                        help="darknet: frames of a look a class must be detected in "
                        "(default: ceil(2n/3) of n = --look-frames)")
    parser.add_argument("--frame-size", default=None, metavar="WxH",
                        help="rendered frame size (default: 640x480)")
    parser.add_argument("--detection-cache", default="", metavar="DIR",
                        help="darknet: keep detections in DIR across runs (e.g. "
                        "build/detection_cache; keyed by detector settings and frame pixels)")
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


def parse_baselines(text: str) -> tuple[str, ...]:
    """``--baselines``: ``none``, ``all`` (every rule), ``fair`` (every rule and its
    ``+retest`` arm) or comma-separated names; ValueError naming the accepted ones."""
    text = (text or "none").strip()
    if text == "none":
        return ()
    if text == "all":
        return tuple(RULE_PARAMS)
    if text == "fair":
        return (*RULE_PARAMS, *retest_names(RULE_PARAMS))
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if split_retest(n)[0] not in RULE_PARAMS:
            raise ValueError(f"--baselines: unknown rule {n!r}; choose from "
                             f"{', '.join(RULE_PARAMS)} (each optionally with +retest), all, "
                             "fair or none")
    if len(set(names)) != len(names):
        raise ValueError(f"--baselines names a rule twice: {text!r}")
    return names


def _parse_size(text: str | None) -> tuple[int, int]:
    if not text:
        return BenchConfig.frame_size
    w, sep, h = text.lower().partition("x")
    if not sep or not w.strip().isdigit() or not h.strip().isdigit():
        raise ValueError(f"--frame-size expects WIDTHxHEIGHT, e.g. 416x312, got {text!r}")
    return int(w), int(h)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed arguments; 0 on success, 2 on bad input."""
    try:
        world = load_world(args.scenario)
        cfg = BenchConfig(episodes=args.episodes, seed=args.seed, max_steps=args.max_steps,
                          look_frames=args.look_frames, task_start=args.task_start,
                          believed_order=getattr(args, "believed_order", "nearest"),
                          verifier=_parse_overrides(args.verifier),
                          frame_size=_parse_size(getattr(args, "frame_size", None)),
                          detector=getattr(args, "detector", "auto"),
                          perception=getattr(args, "perception", "camera"),
                          look_min_count=getattr(args, "look_min_count", None),
                          detection_cache=getattr(args, "detection_cache", "")).resolve(world)
        baselines = parse_baselines(getattr(args, "baselines", "none"))
        tune_from = getattr(args, "tune_from", []) or []
        write_to = getattr(args, "write_baseline_params", "") or ""
        if bool(tune_from) != bool(write_to):
            raise ValueError("--tune-from and --write-baseline-params go together")
        if tune_from:
            tuned = write_params(tune_from, write_to)
            if tuned["world"] != world.name:
                raise ValueError(f"--tune-from: the documents are of world {tuned['world']!r}, "
                                 f"not {world.name!r}")
            print(f"wrote {write_to}: tuned on seeds {tuned['tuned_on_seeds']}: "
                  + ", ".join(f"{b} {p or 'defaults'}" for b, p in tuned["settings"].items()))
            return 0
        sweep = BASELINE_SWEEP if getattr(args, "sweep", False) else None
        frozen = None
        params_file = getattr(args, "baseline_params", "") or ""
        if params_file:
            if sweep:
                raise ValueError("--baseline-params and --sweep exclude each other: frozen "
                                 "settings were picked on other seeds, a sweep picks on this run")
            if not baselines:
                raise ValueError("--baseline-params needs --baselines (e.g. fair)")
            frozen = load_params(params_file, world.name,
                                 config_doc(cfg, cfg.episodes or default_episodes(world),
                                            args.planner), baselines)
            if frozen["seed_in_tuning_set"]:
                print(f"glove-ros bench jetrover: note: seed {cfg.seed} is one of the seeds "
                      f"{frozen['tuned_on_seeds']} these settings were tuned on (a development "
                      "run, not a report)", file=sys.stderr)
    except (ValueError, FileNotFoundError) as exc:
        print(f"glove-ros bench jetrover: {exc}", file=sys.stderr)
        return 2
    modes = (*MODES, "oracle") if args.mode == "all" else (args.mode,)
    runs = len(modes) + sum(len(_settings(b, sweep)) for b in baselines)
    bar = Progress((cfg.episodes or default_episodes(world)) * runs, "tasks", "task",
                   enabled=args.progress)
    try:
        doc = run_benchmark(world, modes, cfg, args.planner, tick=lambda: bar.update(1),
                            baselines=baselines, sweep=sweep, frozen=frozen)
    except Exception as exc:  # e.g. the LLM cannot be loaded
        from glove_ros.core.llm.runtime import LlmLoadError

        if isinstance(exc, (LlmLoadError, ValueError)):
            print(f"glove-ros bench jetrover: {exc}", file=sys.stderr)
            return 2
        raise
    finally:
        bar.close()
    # the LLM planner's results sit beside the greedy planner's, never over them; the
    # oracle's perception beside the camera's
    stem = result_stem(world) + ("_llm" if args.planner == "llm" else "") \
        + ("_oracle_perception" if cfg.perception == "oracle" else "")
    return write_results(doc, args.out, stem, write_plot, format_table, args.json)
