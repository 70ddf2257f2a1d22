"""The generated drift suite: every memory rule on worlds nobody tuned for.

``glove-ros bench suite`` generates worlds from seeds (families below), runs every method on
the same agent with the same hooks, and reports per family and method: drift success (mean
over worlds with a 95% bootstrap interval), steps per solved task (every drift step, probes and
failed episodes included, divided by the tasks solved) relative to the oracle, detection
delay (visits to a changed place after the change until the method's belief there matches
the truth; median and p90, never-detected counted as infinite), false alarms under one
definition for every method (:mod:`glove_ros.benchmarks._suite_alarms`: a transition after
which the method's belief at a place no drift touched goes from right to wrong), per 1,000
transitions and, on waypoint worlds, per 1,000 looks, with exact Poisson 95% intervals
(``false_alarms: {count, transitions, per_1000, ci95[, looks, per_1000_looks,
ci95_looks]}``), probe steps, deadlocks (a re-opened place memory still
believes closed, never re-tried, although at an episode start of the phase it made the
believed route longer than the same memory with it corrected; ``deadlocks_at_end``: the
earlier end-of-phase reading, any longer route than the world's shortest) and stale (the
same wrong memory kept where it cost no detour), and success per phase (the source phase,
before any drift, then each drift phase in order; a method's gap to the oracle there before
the first drift is learning, not memory going stale);
on FrozenLake also the failed drift episodes and how many of them were the first fall into a
tile that had just become a hole, or into a hole the agent had never met since it last
changed (on a route it had never taken): what no method that learns from experience can
avoid; the oracle is told the map.

Families (``bench/scenarios/suite.yaml``):

``frozenlake_det``    deterministic FrozenLake, 4x4 to 8x8, random holes; the drift closes
                      the learnt route, then (2-3 phases) re-opens it while closing the
                      detour, or closes it again
``frozenlake_slip``   the same on slippery ice (success rate 0.9): every move may slide
``waypoint``          random planar waypoint graphs with cycles (6-16 waypoints, coloured
                      blocks), drift: swaps, moves, corridors closing and re-opening, with
                      nuisance (missed detections 0-15%, jitter, dropouts, nudges, crates)
``waypoint_nuisance`` the same worlds with nuisance only: no place ever changes, so every
                      belief flip from right to wrong is a false alarm (``report: N``
                      gives it more worlds than the others, for a tight interval)

Seed discipline: the baselines' parameters (RecentK's K, SlidingWindow's W,
RecencyWeighted's half-life, PageHinkley's threshold, PeriodicRefresh's period) are swept on
the *tune* seeds, the best setting of each (by mean drift success, then fewer steps) is
then run on the disjoint *report* seeds with every other method. GLOVE runs with the
verifier's defaults on both; nothing of GLOVE is tuned here. The methods: GLOVE-async,
GLOVE-sync, the ablations of the project's extensions (GLOVE-async-pth: the paper's p_th
count instead of the calibrated detector; GLOVE-async-norecheck: without the stale-negative
re-test; GLOVE-async-noobject: without object-level / corridor evidence, waypoint families),
every baseline at its best setting, Static (lower bound) and Oracle (upper bound). The
FrozenLake families add LearnerReference, a reference (not a bound) for anything that
learns from the agent's own moves: it knows the exact outcome odds of every move it has
tried, meets a change for the worse by trying the move again or by seeing the place it
leads to as its new kind (place-level generalisation, as GLOVE's place view), and is told
every change for the better; a rule can beat it
(:class:`glove_ros.core.verify.memory_rules.LearnerReference`).

A baseline listed as ``<Rule>+retest`` (``bench/scenarios/suite_fair.yaml``) runs with
GLOVE's stale-negative re-test policy (:mod:`glove_ros.core.verify.retest`), swept over its
base rule's parameter; the document then also pairs GLOVE with the best such arm
(``paired_vs_best_retest``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.benchmarks import write_results
from glove_ros.benchmarks._suite_alarms import BeliefFlips, alarm_table, rate_summary
from glove_ros.core.verify.memory_rules import BASELINE_PARAMS, BASELINE_RULES, make_rule
from glove_ros.core.verify.retest import split_retest

__all__ = [
    "FAMILIES",
    "SuiteConfig",
    "aggregate",
    "format_table",
    "generate_frozenlake",
    "load_suite",
    "main",
    "run_frozenlake_world",
    "run_suite",
    "run_suite_parallel",
    "write_plot",
]

DEFAULT_SCENARIO = Path("bench/scenarios/suite.yaml")
DEFAULT_OUT = Path("bench/results")
FAMILIES = ("frozenlake_det", "frozenlake_slip", "waypoint", "waypoint_nuisance")
GLOVE_METHODS = ("GLOVE-async", "GLOVE-sync")
ABLATIONS = {
    "frozenlake_det": ("GLOVE-async-pth", "GLOVE-async-norecheck", "GLOVE-async-anyrecheck",
                       "GLOVE-async-nostructure", "GLOVE-async-noplace"),
    "frozenlake_slip": ("GLOVE-async-pth", "GLOVE-async-norecheck", "GLOVE-async-anyrecheck",
                        "GLOVE-async-nostructure", "GLOVE-async-noplace"),
    "waypoint": ("GLOVE-async-pth", "GLOVE-async-norecheck", "GLOVE-async-noobject"),
    "waypoint_nuisance": ("GLOVE-async-pth", "GLOVE-async-noobject"),
}
BOUNDS = ("Static", "Oracle")
#: family -> references beyond BOUNDS (they need the benchmark to tell them the true world)
REFERENCES = {"frozenlake_det": ("LearnerReference",),
              "frozenlake_slip": ("LearnerReference",)}


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class SuiteConfig:
    """The suite's scenario file (``bench/scenarios/suite.yaml``); see its comments."""

    tune_seeds: tuple[int, int] = (0, 8)
    report_seeds: tuple[int, int] = (1000, 1012)
    families: tuple[str, ...] = FAMILIES
    sweep: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    baselines: tuple[str, ...] = ("LatestOverwrite", "RecentK", "SlidingWindow",
                                  "RecencyWeighted", "PageHinkleyReset", "PeriodicRefresh")
    family: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def validate(self) -> SuiteConfig:
        """Raise ValueError naming the bad key; return ``self``."""
        for name in ("tune_seeds", "report_seeds"):
            lo, hi = getattr(self, name)
            if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo < hi):
                raise ValueError(f"{name} must be [first, end) with 0 <= first < end")
        a, b = self.tune_seeds, self.report_seeds
        if a[0] < b[1] and b[0] < a[1]:
            raise ValueError(f"tune_seeds {list(a)} and report_seeds {list(b)} must not overlap")
        for f in self.families:
            if f not in FAMILIES:
                raise ValueError(f"unknown family {f!r}; choose from {', '.join(FAMILIES)}")
        for name in self.baselines:
            if split_retest(name)[0] not in BASELINE_RULES:
                raise ValueError(f"baselines: unknown rule {name!r}; choose from "
                                 f"{', '.join(BASELINE_RULES)}, each optionally with +retest")
        for fam, opts in self.family.items():
            for key in ("tune", "report"):
                n = (opts or {}).get(key)
                if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                    raise ValueError(f"family {fam}: {key} must be a seed count >= 1, got {n!r}")
            ft = (a[0], a[0] + int((opts or {}).get("tune", a[1] - a[0])))
            fr = (b[0], b[0] + int((opts or {}).get("report", b[1] - b[0])))
            if ft[0] < fr[1] and fr[0] < ft[1]:
                raise ValueError(f"family {fam}: its tune seeds {list(ft)} and report seeds "
                                 f"{list(fr)} must not overlap (lower its tune / report count)")
        for name, values in self.sweep.items():
            if name not in BASELINE_PARAMS:
                raise ValueError(f"sweep: {name!r} has no parameter to sweep; choose from "
                                 f"{', '.join(BASELINE_PARAMS)}")
            if not values:
                raise ValueError(f"sweep: {name} needs at least one value")
        return self


def _family_ranges(config: SuiteConfig, opts: Mapping[str, Any], tune: int | None,
                   report: int | None) -> tuple[int, int]:
    """The ends of a family's tune and report ranges: the family's ``tune`` / ``report``
    counts from the start of each range (else the whole range), at most ``tune`` /
    ``report`` (the command line) seeds."""
    ends = []
    for key, (lo, hi), cap in (("tune", config.tune_seeds, tune),
                               ("report", config.report_seeds, report)):
        n = int(opts[key]) if key in opts else hi - lo
        ends.append(lo + (min(n, cap) if cap is not None else n))
    return ends[0], ends[1]


def load_suite(path: str | Path = DEFAULT_SCENARIO) -> SuiteConfig:
    """Read and validate the suite's YAML (a path, or a bundled scenario name)."""
    from glove_ros.paths import resolve_bundled

    path = resolve_bundled(str(path), "bench/scenarios")
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the suite file must be a mapping")
    known = {"tune_seeds", "report_seeds", "families", "sweep", "baselines", "family",
             "description"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; "
                         f"accepted: {', '.join(sorted(known))}")
    kw: dict[str, Any] = {}
    for k in ("tune_seeds", "report_seeds"):
        if k in data:
            kw[k] = tuple(int(x) for x in data[k])
    if "families" in data:
        kw["families"] = tuple(data["families"])
    if "baselines" in data:
        kw["baselines"] = tuple(data["baselines"])
    if "sweep" in data:
        kw["sweep"] = {k: tuple(v) for k, v in data["sweep"].items()}
    if "family" in data:
        kw["family"] = dict(data["family"])
    return SuiteConfig(**kw).validate()


# --------------------------------------------------------------------------- FrozenLake


def _bfs_path(desc: Sequence[str], n: int) -> list[tuple[int, int]] | None:
    """Shortest path S -> G over non-hole tiles (4-neighbour), or None."""
    start, goal = (0, 0), (n - 1, n - 1)
    prev: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            path = []
            cur: tuple[int, int] | None = goal
            while cur is not None:
                path.append(cur)
                cur = prev[cur]
            return path[::-1]
        for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < n and 0 <= nc < n and (nr, nc) not in prev and desc[nr][nc] != "H":
                prev[(nr, nc)] = (r, c)
                queue.append((nr, nc))
    return None


def _set(desc: Sequence[str], tile: tuple[int, int], ch: str) -> list[str]:
    rows = [list(r) for r in desc]
    rows[tile[0]][tile[1]] = ch
    return ["".join(r) for r in rows]


def generate_frozenlake(seed: int, *, slippery: bool = False, sizes: Sequence[int] = (4, 8),
                        episodes: int = 20, hole_density: float = 0.15) -> dict[str, Any]:
    """A FrozenLake drift scenario (the dict :func:`_frozenlake_scenario.parse_scenario` reads).

    Deterministic per seed. S top-left, G bottom-right, random holes (the map stays
    solvable). Drift I closes the learnt (shortest) route at a tile of it; drift II (2-3
    phase kinds) re-opens that tile and closes the detour the agent had to take; a third
    phase, when drawn, closes the re-opened route again. Every phase map is solvable.
    """
    rng = np.random.default_rng([seed, 15, int(slippery)])
    for _attempt in range(200):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        desc = ["F" * n for _ in range(n)]
        for r in range(n):
            for c in range(n):
                if (r, c) not in ((0, 0), (n - 1, n - 1)) and rng.random() < hole_density:
                    desc = _set(desc, (r, c), "H")
        desc = _set(_set(desc, (0, 0), "S"), (n - 1, n - 1), "G")
        route = _bfs_path(desc, n)
        if route is None or len(route) < 4:
            continue
        phases: list[dict[str, Any]] = []
        kind = ["close", "close_reopen", "close_reopen_close"][int(rng.integers(3))]
        inner = route[1:-1]
        cut = inner[int(rng.integers(len(inner)))]
        m1 = _set(desc, cut, "H")
        detour = _bfs_path(m1, n)
        if detour is None:
            continue
        phases.append({"name": "drift_I", "episodes": episodes,
                       "set": [{"row": cut[0], "col": cut[1], "tile": "H"}]})
        if kind != "close":
            spots = [t for t in detour[1:-1] if t not in route]
            if not spots:
                continue
            cut2 = spots[int(rng.integers(len(spots)))]
            m2 = _set(_set(m1, cut, "F"), cut2, "H")
            if _bfs_path(m2, n) is None:
                continue
            phases.append({"name": "drift_II", "episodes": episodes,
                           "set": [{"row": cut[0], "col": cut[1], "tile": "F"},
                                   {"row": cut2[0], "col": cut2[1], "tile": "H"}]})
            if kind == "close_reopen_close":
                m3 = _set(_set(m2, cut2, "F"), cut, "H")
                if _bfs_path(m3, n) is None:
                    continue
                phases.append({"name": "drift_III", "episodes": episodes,
                               "set": [{"row": cut2[0], "col": cut2[1], "tile": "F"},
                                       {"row": cut[0], "col": cut[1], "tile": "H"}]})
        steps = 4 * n * n if not slippery else 6 * n * n
        data: dict[str, Any] = {
            "name": f"gen{'slip' if slippery else 'det'}{seed}",
            "description": f"generated {n}x{n}, {kind}, seed {seed}",
            "map": desc,
            "is_slippery": slippery,
            "seed": int(seed),
            "max_episode_steps": min(steps, 8 * n),
            "source": {"episodes": episodes},
            "drift": phases,
            "budget": {"total": len(phases) * episodes * min(steps, 8 * n), "probe_cap": 30},
            "agent": ({"gamma": 0.95, "unknown_trust": 0.9, "hole_penalty": 0.0,
                       "prior_weight": 2.0} if slippery else
                      {"gamma": 0.95, "unknown_trust": 0.9, "hole_penalty": 1.0}),
        }
        if slippery:
            data["success_rate"] = 0.9
        return data
    raise RuntimeError(f"could not generate a FrozenLake world for seed {seed}")


def _base(name: str) -> str:
    """The baseline a suite method is built on (``RecentK+retest``: ``RecentK``)."""
    return split_retest(name)[0]


def _mode(dist: Mapping[Any, float] | None) -> Any:
    if not dist:
        return None
    return max(dist.items(), key=lambda kv: (kv[1], repr(kv[0])))[0]


class _Tracker:
    """Wraps a rule's observe: detection delay per changed pair."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.changed: dict[tuple[Any, Any], Any] = {}  # pair -> true mode now
        self.visits: dict[tuple[Any, Any], int] = {}
        self.delays: list[float] = []
        self._orig = rule.observe
        rule.observe = self._observe

    def begin(self, changed: Mapping[tuple[Any, Any], Any]) -> None:
        self.finish()
        self.changed = dict(changed)
        self.visits = {}
        # pairs whose belief is already right need no detection (delay 0)
        for pair, truth in list(self.changed.items()):
            if _mode(self.rule.distribution(*pair)) == truth:
                self.delays.append(0.0)
                del self.changed[pair]

    def finish(self) -> None:
        for pair in self.changed:
            if self.visits.get(pair):
                self.delays.append(math.inf)
        self.changed = {}

    def _observe(self, state: Any, action: Any, outcome: Any, reward: float = 0.0,
                 step: int = 0) -> None:
        self._orig(state, action, outcome, reward, step)
        pair = (state, action)
        if pair in self.changed:
            self.visits[pair] = self.visits.get(pair, 0) + 1
            if _mode(self.rule.distribution(*pair)) == self.changed[pair]:
                self.delays.append(float(self.visits[pair]))
                del self.changed[pair]


def run_frozenlake_world(data: Mapping[str, Any], method: str,
                         params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One generated FrozenLake world x one method: the suite's per-world record."""
    from glove_ros.benchmarks._frozenlake_agent import HOLE, make_env, true_model
    from glove_ros.benchmarks._frozenlake_runner import Runner
    from glove_ros.benchmarks._frozenlake_scenario import parse_scenario

    sc = parse_scenario(dict(data), default_name=str(data.get("name", "gen")))
    rule = make_rule(method, sc.glove, is_negative=lambda o, r: o[1] == HOLE,
                     params=params)
    tracker = _Tracker(rule)
    flips = BeliefFlips(rule)  # false alarms, one definition for every method
    runner = Runner(sc, rule)
    maps = sc.maps()
    models = []
    for desc in maps:
        env = make_env(desc, sc)
        models.append(true_model(env))
        env.close()
    orig_begin = rule.begin_phase
    phase_index = {"source": 0, **{p.name: i + 1 for i, p in enumerate(sc.phases)}}

    def begin_phase(phase: str, learning: bool) -> None:
        orig_begin(phase, learning)
        i = phase_index[phase]
        flips.set_world(models[i])
        if i == 0:
            tracker.begin({})
            return
        old, new = models[i - 1], models[i]
        changed = {pair: _mode(new[pair]) for pair in new
                   if _mode(new[pair]) != _mode(old.get(pair))}
        tracker.begin(changed)

    rule.begin_phase = begin_phase  # type: ignore[method-assign]
    try:
        phases = runner.run()
        tracker.finish()
        stats = rule.stats()
    finally:
        rule.close()
    drift = phases[1:]
    episodes = sum(p.episodes for p in drift)
    return {
        "world": sc.name,
        "method": method,
        "params": dict(params or {}),
        "drift_success": sum(p.successes for p in drift) / episodes,
        "drift_episodes": episodes,
        "task_steps": sum(p.task_steps for p in drift),
        "probe_steps": sum(p.probe_steps for p in drift),
        # every drift step (task and probe, failed episodes too) per task solved
        "steps_per_task": (sum(p.task_steps + p.probe_steps for p in drift)
                           / max(1, sum(p.successes for p in drift))),
        "delays": tracker.delays,
        "false_alarms": flips.false_alarms,
        "fa_transitions": flips.transitions,
        "deadlocks": sum(1 for p in drift if p.deadlock),
        "deadlocks_at_end": sum(1 for p in drift if p.deadlock_at_end),
        "stale_kept": sum(1 for p in drift if p.stale_kept),
        "failed_episodes": episodes - sum(p.successes for p in drift),
        "first_contact_falls": sum(p.first_contact_falls for p in drift),
        "unmet_hole_falls": sum(p.unmet_hole_falls for p in drift),
        "alerts": int(stats.get("alerts", 0)),
        "phase_success": {phase_label(i): p.successes / p.episodes
                          for i, p in enumerate(phases)},
    }


# --------------------------------------------------------------------------- waypoints


def _waypoint_method(method: str, params: Mapping[str, Any] | None
                     ) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(jetrover method name, verifier overrides, view params) of a suite method."""
    from glove_ros.core.verify.memory_rules import GLOVE_ABLATIONS

    if method == "Oracle":
        return "oracle", {}, None
    if method in GLOVE_ABLATIONS:
        mode, overrides = GLOVE_ABLATIONS[method]
        return f"GLOVE-{mode}", dict(overrides), None
    return method, {}, dict(params) if params else None


def _waypoint_runner(nuisance_only: bool, opts: Mapping[str, Any]) -> Callable[..., Any]:
    from glove_ros.benchmarks import jetrover
    from glove_ros.core.world import worldgen

    kinds = tuple(opts.get("kinds") or [k for k in worldgen.DRIFT_KINDS if k != "nuisance"])

    def run(seed: int, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        kind = "nuisance" if nuisance_only else kinds[seed % len(kinds)]
        world = worldgen.generate_world(seed, kind=kind)
        name, overrides, view_params = _waypoint_method(method, params)
        rec = jetrover.run_world(world, name, view_params, seed, int(opts.get("episodes", 0)),
                                 overrides)
        return {
            "world": rec.get("world", world.name),
            "kind": kind,
            "method": method,
            "params": dict(params or {}),
            "drift_success": float(rec["drift_success"]),
            "steps_per_task": float(rec["steps_per_task"]),
            "delays": [math.inf if d is None else float(d)
                       for d in rec.get("detection_delays", [])],
            # false alarms: one definition for every method (_suite_alarms), over every
            # observation the memory learnt from (transitions, sync probes' samples)
            "false_alarms": int(rec.get("false_alarms", 0)),
            "fa_transitions": int(rec.get("observations", rec.get("transitions", 0))),
            "looks": int(rec.get("looks", 0)),
            "corrections": int(rec.get("corrections", 0)),
            "probe_steps": int(rec.get("probe_steps", 0)),
            "deadlocks": int(rec.get("deadlocks", 0)),
            "stale_goals": int(rec.get("stale_goals", 0)),
            "phase_success": {phase_label(i): float(p["success_rate"])
                              for i, p in enumerate(rec.get("phases", []))},
        }

    return run


def _family_runner(family: str, opts: Mapping[str, Any]) -> Callable[..., dict[str, Any]]:
    if family.startswith("frozenlake"):
        slippery = family == "frozenlake_slip"
        sizes = tuple(opts.get("sizes", (4, 6) if slippery else (4, 8)))
        episodes = int(opts.get("episodes", 20))

        def run(seed: int, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
            data = generate_frozenlake(seed, slippery=slippery, sizes=sizes,
                                       episodes=episodes)
            return run_frozenlake_world(data, method, params)

        return run
    return _waypoint_runner(family == "waypoint_nuisance", opts)


# --------------------------------------------------------------------------- statistics


def _bootstrap(values: Sequence[float], seed: int = 0, n: int = 2000) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    if len(arr) < 2:
        v = float(arr.mean()) if len(arr) else math.nan
        return v, v
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(n, len(arr)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    v = float(np.percentile(np.asarray(values, dtype=float), q, method="lower"))
    return v


_NUMERALS = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X")


def phase_label(index: int) -> str:
    """A phase's name by its place in the run: ``source`` (before any drift), then
    ``drift_I``, ``drift_II``, ... (the FrozenLake scenarios' names; waypoint worlds name
    their phases by the change and the episode it came at, which differ world to world)."""
    if index == 0:
        return "source"
    return f"drift_{_NUMERALS[index - 1]}" if index <= len(_NUMERALS) else f"drift_{index}"


def _per_phase(records: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float],
                                                              dict[str, int]]:
    """Mean success of each phase over the worlds that have it, and how many do."""
    values: dict[str, list[float]] = {}
    for r in records:
        for phase, v in (r.get("phase_success") or {}).items():
            values.setdefault(phase, []).append(float(v))
    return ({k: float(np.mean(v)) for k, v in values.items()},
            {k: len(v) for k, v in values.items()})


def aggregate(records: Sequence[Mapping[str, Any]],
              oracle: Sequence[Mapping[str, Any]] | None = None,
              learner_reference: Sequence[Mapping[str, Any]] | None = None
              ) -> dict[str, Any]:
    """Per-method summary over worlds (see the module docstring); with the oracle's (and
    LearnerReference's) records of the same worlds, success and steps relative to them."""
    succ = [float(r["drift_success"]) for r in records]
    lo, hi = _bootstrap(succ)
    delays = [d for r in records for d in r.get("delays", [])]
    fa = sum(int(r.get("false_alarms", 0)) for r in records)
    observed = sum(int(r.get("fa_transitions", 0)) for r in records)
    looks = sum(int(r.get("looks", 0)) for r in records) if any(
        "looks" in r for r in records) else None
    steps = sum(float(r["steps_per_task"]) for r in records)
    phase_success, phase_worlds = _per_phase(records)
    out: dict[str, Any] = {
        "worlds": len(records),
        "drift_success": float(np.mean(succ)) if succ else math.nan,
        "ci95": [lo, hi],
        "steps_per_task": steps / len(records) if records else math.nan,
        "detection_median": _pct(delays, 50),
        "detection_p90": _pct(delays, 90),
        "detected": sum(1 for d in delays if math.isfinite(d)),
        "changes_visited": len(delays),
        # one definition for every method (_suite_alarms): transitions after which a right
        # belief at a place no drift touched is wrong; per 1,000 transitions (and looks)
        # with the exact Poisson 95% interval
        "false_alarms": rate_summary(fa, observed, looks),
        # waypoint families: transitions that made a wrong belief at an untouched place
        # right (missed detections had made it wrong); not false alarms
        "corrections": sum(int(r.get("corrections", 0)) for r in records),
        "probe_steps": sum(int(r.get("probe_steps", 0)) for r in records),
        "deadlocks": sum(int(r.get("deadlocks", 0)) for r in records),
        "deadlocks_at_end": sum(int(r.get("deadlocks_at_end", 0)) for r in records),
        "stale_kept": sum(int(r.get("stale_kept", 0)) for r in records),
        "failed_episodes": sum(int(r.get("failed_episodes", 0)) for r in records),
        "first_contact_falls": sum(int(r.get("first_contact_falls", 0)) for r in records),
        "unmet_hole_falls": sum(int(r.get("unmet_hole_falls", 0)) for r in records),
        "phase_success": phase_success,
        "phase_worlds": phase_worlds,
        "per_world": [float(r["drift_success"]) for r in records],
        "per_world_steps": [float(r["steps_per_task"]) for r in records],
    }
    if oracle:
        o_steps = sum(float(r["steps_per_task"]) for r in oracle) / len(oracle)
        out["steps_vs_oracle"] = out["steps_per_task"] / o_steps if o_steps else None
    for name, ref in (("oracle", oracle), ("learner_reference", learner_reference)):
        if ref:
            r_succ = float(np.mean([float(r["drift_success"]) for r in ref]))
            out[f"success_vs_{name}"] = out["drift_success"] / r_succ if r_succ else None
    return out


def paired_vs_best(methods: Mapping[str, Mapping[str, Any]],
                   baselines: Sequence[str]) -> dict[str, Any]:
    """Each GLOVE method minus the best baseline on the same worlds (paired differences of
    drift success and steps per task; mean and 95% bootstrap interval).

    The best baseline is the one with the highest mean drift success here, then fewer
    steps: chosen on the report seeds after the fact, so the strongest opponent GLOVE could
    face (conservative for GLOVE)."""
    present = [b for b in baselines if b in methods]
    if not present:
        return {}
    best = max(present, key=lambda b: (methods[b]["drift_success"],
                                       -methods[b]["steps_per_task"]))
    out: dict[str, Any] = {"baseline": best, "params": methods[best].get("params", {})}
    for m in GLOVE_METHODS:
        if m not in methods:
            continue
        entry = {}
        for key, name in (("per_world", "success"), ("per_world_steps", "steps_per_task")):
            diff = [a - b for a, b in zip(methods[m][key], methods[best][key], strict=True)]
            lo, hi = _bootstrap(diff)
            entry[name] = {"mean": float(np.mean(diff)), "ci95": [lo, hi]}
        out[m] = entry
    return out


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else "inf"
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


# --------------------------------------------------------------------------- the suite


class _Eta:
    """World runs done of ``total``, time spent and the time left at that pace."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.t0 = total, 0, time.perf_counter()

    def __str__(self) -> str:
        spent = time.perf_counter() - self.t0
        left = spent / self.done * (self.total - self.done) if self.done else 0.0
        return f"{self.done}/{self.total} world runs, {spent:.0f}s, ETA {left:.0f}s"


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def run_suite(config: SuiteConfig, *, families: Sequence[str] | None = None,
              tune: int | None = None, report: int | None = None,
              quiet: bool = False) -> dict[str, Any]:
    """Sweep baselines on the tune seeds, run every method on the report seeds."""
    fams = list(families or config.families)
    t_lo, t_hi = config.tune_seeds
    r_lo, r_hi = config.report_seeds
    if tune is not None:
        t_hi = min(t_hi, t_lo + tune)
    if report is not None:
        r_hi = min(r_hi, r_lo + report)
    doc: dict[str, Any] = {
        "benchmark": "suite",
        "tune_seeds": [t_lo, t_hi],
        "report_seeds": [r_lo, r_hi],
        "sweep": {k: list(v) for k, v in config.sweep.items()},
        "families": {},
    }
    t0 = time.perf_counter()
    for fam in fams:
        opts = config.family.get(fam) or {}
        try:
            run = _family_runner(fam, opts)
        except (ImportError, AttributeError) as exc:
            _progress(f"[suite] {fam}: skipped ({exc})", quiet)
            continue
        # a family may run its own number of seeds from the start of each range, fewer
        # (its cost per world is higher) or more (nuisance-only worlds: enough transitions
        # for a tight false-alarm interval); --tune / --report still take the first N
        ft_hi, fr_hi = _family_ranges(config, opts, tune, report)
        # 1. sweep the baselines on the tune seeds
        best: dict[str, dict[str, Any]] = {}
        sweep_doc: dict[str, Any] = {}
        sweep = {**config.sweep, **{k: tuple(v) for k, v in (opts.get("sweep") or {}).items()}}
        methods = [*GLOVE_METHODS, *ABLATIONS.get(fam, ()), *config.baselines, *BOUNDS,
                   *REFERENCES.get(fam, ())]
        # a +retest arm is swept over its baseline's parameter, as the bare rule
        n_settings = sum(max(1, len(sweep.get(_base(b), ()))) if BASELINE_PARAMS.get(_base(b))
                         else 1 for b in config.baselines)
        clock = _Eta(n_settings * (ft_hi - t_lo) + len(methods) * (fr_hi - r_lo))
        for name in config.baselines:
            param = BASELINE_PARAMS.get(_base(name))
            values = sweep.get(_base(name), ()) if param else ()
            settings = [{param: v} for v in values] if param and values else [{}]
            scores = []
            for setting in settings:
                recs = [run(s, name, setting) for s in range(t_lo, ft_hi)]
                clock.done += len(recs)
                agg = aggregate(recs)
                scores.append((agg["drift_success"], -agg["steps_per_task"], setting, agg))
            scores.sort(key=lambda x: (x[0], x[1]), reverse=True)
            best[name] = scores[0][2]
            sweep_doc[name] = [{"params": s[2], "drift_success": s[0],
                                "steps_per_task": -s[1]} for s in scores]
            _progress(f"[suite] {fam}: tuned {name} -> {best[name]} ({clock})", quiet)
        # 2. every method on the report seeds
        records: dict[str, list[dict[str, Any]]] = {}
        for m in methods:
            params = best.get(m) or None
            records[m] = [run(s, m, params) for s in range(r_lo, fr_hi)]
            clock.done += fr_hi - r_lo
            _progress(f"[suite] {fam}: {m} on {fr_hi - r_lo} report worlds ({clock})", quiet)
        oracle = records.get("Oracle")
        doc["families"][fam] = {
            "options": dict(opts),
            "tune_seeds": [t_lo, ft_hi],
            "report_seeds": [r_lo, fr_hi],
            "best_params": best,
            "sweep_on_tune_seeds": sweep_doc,
            "methods": {m: {**aggregate(recs, oracle, records.get("LearnerReference")),
                            "params": best.get(m, {})}
                        for m, recs in records.items()},
        }
        bare = [b for b in config.baselines if not split_retest(b)[1]]
        retest = [b for b in config.baselines if split_retest(b)[1]]
        doc["families"][fam]["paired_vs_best_baseline"] = paired_vs_best(
            doc["families"][fam]["methods"], bare)
        if retest:  # GLOVE against the best baseline given the same re-test policy
            doc["families"][fam]["paired_vs_best_retest"] = paired_vs_best(
                doc["families"][fam]["methods"], retest)
    doc["wall_s"] = time.perf_counter() - t0
    return _json_safe(doc)


# --------------------------------------------------------------------------- output


def _fmt(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    if v == "inf":
        return "inf"
    return format(v, spec)


def _fails(r: Mapping[str, Any]) -> str:
    """Failed drift episodes (FrozenLake) and, in brackets, how many were the first fall
    into a tile that had just become a hole + the first fall into a hole that was one
    before but never met since it last changed (no method that learns can avoid those)."""
    if "failed_episodes" not in r:
        return "-"
    return (f"{r['failed_episodes']}({r.get('first_contact_falls', 0)}"
            f"+{r.get('unmet_hole_falls', 0)})")


def _phase_table(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Success per phase, every method: the phases in run order, each with the number of
    worlds that have it (worlds differ in how many drift phases they have)."""
    worlds: dict[str, int] = {}
    for r in methods.values():
        for phase, n in (r.get("phase_worlds") or {}).items():
            worlds[phase] = max(worlds.get(phase, 0), int(n))
    if not worlds:
        return []
    order = {phase_label(i): i for i in range(len(_NUMERALS) + 1)}
    phases = sorted(worlds, key=lambda p: (order.get(p, len(order)), p))
    cols = [f"{p}({worlds[p]})" for p in phases]
    head = f"{'success per phase (worlds)':<41} " + " ".join(f"{c:>13}" for c in cols)
    out = [head]
    for m, r in methods.items():
        ps = r.get("phase_success") or {}
        out.append(f"{m:<41} " + " ".join(f"{_fmt(ps.get(p)):>13}" for p in phases))
    return out


def format_table(doc: Mapping[str, Any]) -> str:
    """One table per family: every method, with the settings it ran with."""
    lines = [f"Generated drift suite: baselines tuned on seeds {doc['tune_seeds']}, "
             f"reported on seeds {doc['report_seeds']} (GLOVE: verifier defaults)"]
    for fam, fd in doc["families"].items():
        lines.append("")
        lines.append(f"{fam} ({len(next(iter(fd['methods'].values()))['per_world'])} worlds)")
        head = (f"{'method':<24} {'params':<16} {'success':>7} {'95% CI':>13} "
                f"{'steps/oracle':>12} {'detect med/p90':>14} {'FA/1k':>6} "
                f"{'probes':>6} {'deadlk':>6} {'stale':>5} {'fails(new+unmet)':>16}")
        lines += [head, "-" * len(head)]
        for m, r in fd["methods"].items():
            params = ",".join(f"{k}={v:g}" for k, v in (r.get("params") or {}).items())
            ci = r["ci95"]
            lines.append(
                f"{m:<24} {params or '-':<16} {_fmt(r['drift_success']):>7} "
                f"{'[' + _fmt(ci[0]) + ', ' + _fmt(ci[1]) + ']':>13} "
                f"{_fmt(r.get('steps_vs_oracle')):>12} "
                f"{_fmt(r['detection_median'], 'g') + '/' + _fmt(r['detection_p90'], 'g'):>14} "
                f"{_fmt((r.get('false_alarms') or {}).get('per_1000')):>6} "
                f"{r['probe_steps']:>6} "
                f"{r['deadlocks']:>6} {r.get('stale_kept', 0):>5} {_fails(r):>16}")
        lines += _phase_table(fd["methods"])
        for key, label in (("paired_vs_best_baseline", "best baseline"),
                           ("paired_vs_best_retest", "best baseline + re-test")):
            pair = fd.get(key) or {}
            for m in GLOVE_METHODS:
                if m in pair:
                    sd, st = pair[m]["success"], pair[m]["steps_per_task"]
                    lines.append(
                        f"paired, same worlds: {m} - {pair['baseline']} ({label}): success "
                        f"{sd['mean']:+.3f} [{sd['ci95'][0]:+.3f}, {sd['ci95'][1]:+.3f}], "
                        f"steps/task {st['mean']:+.2f} "
                        f"[{st['ci95'][0]:+.2f}, {st['ci95'][1]:+.2f}]")
        for m in GLOVE_METHODS:
            r = fd["methods"].get(m) or {}
            if r.get("success_vs_learner_reference") is not None:
                lines.append(f"{m}: {100 * r['success_vs_oracle']:.1f}% of the oracle's drift "
                             f"success, {100 * r['success_vs_learner_reference']:.1f}% of "
                             "LearnerReference's (a reference, not a bound)")
        lines += alarm_table(fd["methods"])
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """One panel per family: drift success with its 95% interval, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = list(doc["families"])
    fig, axes = plt.subplots(1, max(1, len(fams)), figsize=(5.2 * max(1, len(fams)), 4.6),
                             squeeze=False)
    for ax, fam in zip(axes[0], fams, strict=False):
        methods = doc["families"][fam]["methods"]
        names = list(methods)
        means = [methods[m]["drift_success"] or 0.0 for m in names]
        lo = [max(0.0, means[i] - (methods[m]["ci95"][0] or 0.0)) for i, m in enumerate(names)]
        hi = [max(0.0, (methods[m]["ci95"][1] or 0.0) - means[i]) for i, m in enumerate(names)]
        refs = (*BOUNDS, *REFERENCES.get(fam, ()))
        colors = ["tab:green" if m.startswith("GLOVE") and "-" not in m[6:] else
                  "tab:olive" if m.startswith("GLOVE") else
                  "tab:gray" if m in refs else
                  "tab:purple" if split_retest(m)[1] else "tab:blue" for m in names]
        ax.barh(range(len(names)), means, xerr=[lo, hi], color=colors, capsize=3)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.05)
        ax.set_xlabel("drift success (mean over report worlds, 95% CI)")
        ax.set_title(fam)
    fig.suptitle(f"Generated drift suite (report seeds {doc['report_seeds']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``glove-ros bench suite``."""
    parser.description = (
        "Generated drift suite: every memory rule on generated FrozenLake and waypoint "
        "worlds; baselines swept on the tune seeds, every method reported on the report "
        "seeds (both fixed in the scenario file). Writes <out>/suite.json and suite.png.")
    parser.add_argument("--scenario", default="suite",
                        help="suite YAML, a path or a bundled name (default: %(default)s, "
                        "bench/scenarios/suite.yaml)")
    parser.add_argument("--families", nargs="+", choices=FAMILIES,
                        help="run only these families")
    parser.add_argument("--tune", type=int, help="use only the first N tune seeds")
    parser.add_argument("--report", type=int, help="use only the first N report seeds")
    parser.add_argument("--jobs", type=int, default=1,
                        help="families run in parallel processes (default: %(default)s; the "
                        "results do not depend on it)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output folder")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def _run_family(args: tuple[SuiteConfig, str, int | None, int | None, bool]) -> dict[str, Any]:
    config, family, tune, report, quiet = args
    return run_suite(config, families=[family], tune=tune, report=report, quiet=quiet)


def run_suite_parallel(config: SuiteConfig, *, families: Sequence[str] | None = None,
                       tune: int | None = None, report: int | None = None,
                       quiet: bool = False, jobs: int = 1) -> dict[str, Any]:
    """:func:`run_suite` with one process per family (``jobs`` at a time); same document."""
    fams = list(families or config.families)
    if jobs <= 1 or len(fams) <= 1:
        return run_suite(config, families=fams, tune=tune, report=report, quiet=quiet)
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(jobs, len(fams))) as pool:
        parts = list(pool.map(_run_family, [(config, f, tune, report, quiet) for f in fams]))
    doc = dict(parts[0])
    doc["families"] = {f: p["families"][f] for f, p in zip(fams, parts, strict=True)
                       if f in p["families"]}
    doc["wall_s"] = time.perf_counter() - t0
    return doc


def main(args: argparse.Namespace) -> int:
    """``glove-ros bench suite``."""
    config = load_suite(args.scenario)
    for name in ("tune", "report"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise ValueError(f"--{name} must be >= 1")
    jobs = int(getattr(args, "jobs", 1) or 1)
    if jobs < 1:
        raise ValueError("--jobs must be >= 1")
    doc = run_suite_parallel(config, families=args.families, tune=args.tune,
                             report=args.report, quiet=args.json, jobs=jobs)
    doc["scenario_file"] = str(args.scenario)
    return write_results(doc, args.out, "suite", write_plot, format_table, args.json)
