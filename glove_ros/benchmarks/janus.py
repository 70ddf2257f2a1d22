"""Janus benchmark: plan-memory updates with and without the gate, on the robot's real wiring.

``glove-ros bench janus --scenario bench/scenarios/janus_worlds.yaml``

A stream of "find the <colour> block" tasks runs in several worlds with drift (the JetRover
core loop of :mod:`glove_ros.benchmarks.jetrover` without DDS: simulator, perception,
experience memory with the async GLOVE verifier, the task agent). **The planner reads both
memories, as on the robot**: trusted experience memory first, plan memory a prior where it
is silent (:class:`~glove_ros.core.plan.plan_planner.PlanAwarePlanner`). After every task the
same updater proposes a plan-memory candidate and a gate decides; the arms differ only in
the gate's trigger:

  never               no gate: every candidate deployed (the plain updater)
  clean               no gate and no injected errors: the ceiling any gate could reach
  always              compare every update
  momentum            Janus: memory momentum trigger (cos(z, m) < tau)
  evidence            compare when what the robot knows speaks against the update
                      (:class:`~glove_ros.core.plan.plan_planner.ExperienceRisk`: the edit
                      touches a waypoint whose look GLOVE recently found dissonant, places a
                      colour where trusted looks saw others, or drops one they confirm)
  evidence+momentum   either
  touches             the cheap experience-aware baseline: compare only when verified
                      experience memory holds any trusted evidence about what the update
                      changes (a look at a waypoint whose plan prior it changes, a drive
                      through a corridor whose lesson or route it changes); deploy otherwise
  periodic:K, random:P   ablations; ``random:~LABEL`` / ``periodic:~LABEL`` take the
                      comparison rate LABEL measured (equal comparison budgets)

**Harmful updates** come from :class:`~glove_ros.benchmarks._janus_kinds.NoisyUpdater` (the
rule updater with seeded errors of the kinds a small reflecting LLM makes, the same coin
flips in every arm; every injected candidate carries its kinds). Four are about where a
block is, what a look confirms: *wrong place* (the block seen here written at another
waypoint), *stale place* (written where an earlier episode saw it, before it moved),
*over-generalisation* (every colour written at the waypoint where this block was found),
*forgotten fact* (a block fact dropped). Four are about what no look confirms:
*unvisited place* (the fact also names a waypoint never looked at), *false route* (a
"corridor blocked" lesson for a corridor never driven), *forgotten lesson* (a corridor
lesson or route dropped), *reflection* (a plausible, wrong free-text note). With
``per_kind_arms`` every kind is also run alone (the same coin flips) for per-kind results
(:mod:`glove_ros.benchmarks._janus_perkind`).

**Scored on what the updates did not see**: task success on the *later* episodes (the
second half of each run), and held-out questions asked every ``eval_every`` tasks from
start waypoints the tasks never start from (``heldout_fraction`` of the waypoints): *find*
(the planner's first goal, both memories, holds the block -- or the block is at the start),
*fetch* (find, then the remembered route back to the dock is really open), *go-to* (the
remembered route to each other waypoint is really open), *corridor* (is this corridor
blocked? experience memory first, plan memory's corridor lessons where it is silent),
answered with both memories and scored against the simulator's ground truth; and
*new robot* (find, go-to and corridor for a robot whose experience memory is empty -- new on
the site, or its store reset -- reading this plan memory: where plan memory is the only
knowledge). The gate's own rehearsal scorer never sees these (it scores against verified
experience memory), and it rehearses one question type only (the first goal of a find):
``rehearsed`` averages the held-out types it also asks (find, new-robot find),
``unrehearsed`` the ones it never asks (fetch, go-to, corridor, new-robot go-to and
corridor).

Reported per arm over every (world, seed) run: means, per-run figures, the paired gain over
``never`` with a 95% t-interval, comparisons (and relative to ``always``), the share of
always-compare's gain kept, harmful candidates proposed / deployed, clean candidates
rejected, how often plan memory changed the planner's first option (``prior_used``), wall
time. The plot is the Pareto view: gain against comparisons for every trigger.

Scenario file (YAML; every key but ``name`` optional)::

    name: worlds                   # results go to janus_<name>.json / .png
    description: "free text"
    worlds:                        # one run per (world, seed); or world: + events: for one
      - {world: jetrover_maze, events: [...]}
      - {world: corridor_blocked}
    episodes: 60                   # tasks per run
    seeds: [0, 1, 2]               # task sequence / start / noise seeds
    max_steps: 6                   # step limit per task (navigations + looks)
    perception: symbolic           # symbolic (ground-truth colours) | camera (OpenCV)
    verifier: {}                   # VerifierConfig overrides (mode is async), e.g.
                                   # {detector: p_th, p_th: 2} for the paper's rule
    belief_threshold: 0.5          # the gate's truth: share of trusted looks that must agree
    embedder: onnx                 # onnx (all-MiniLM-L6-v2 int8) | hashing
    eval_every: 5                  # held-out questions every k tasks (and after the last)
    heldout_fraction: 0.5          # share of waypoints kept as held-out start waypoints
    updater:
      kind: rule                   # rule | llm
      wrong_place_rate: 0.15       # P(error of that kind) per task (rule only)
      stale_place_rate: 0.15
      overgeneral_rate: 0.1
      forget_rate: 0.1
      unvisited_place_rate: 0.1    # kinds beyond looks (default 0)
      false_route_rate: 0.1
      forget_lesson_rate: 0.1
      reflection_rate: 0.1
      miss_threshold: 2            # rule updater
    janus: {beta: 0.9, tau: 0.0, warmup: 3, coverage_k: 8, boundary_max: 16,
            fresh_max: 16, seed: 0, accept_ties: true}
    arms: [never, clean, always, momentum, evidence, touches, "random:~evidence"]
    # or {label, trigger, scorer: experience | simulator}; simulator = an oracle
    per_kind_arms: [never, always, evidence, touches]   # each kind alone (needs never;
                                   # default none; no clean or budget-matched arms)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import write_results
from glove_ros.benchmarks._janus_arm import KIND_COUNTERS, ArmRunner
from glove_ros.benchmarks._janus_perkind import interval, run_per_kind
from glove_ros.benchmarks._janus_report import format_table, write_plot
from glove_ros.benchmarks._janus_scenario import (
    EMBEDDERS,
    ERROR_KINDS,
    UPDATERS,
    Arm,
    Scenario,
    load_scenario,
    matched_spec,
)
from glove_ros.core.plan.janus import JanusConfig

__all__ = [
    "PAPER",
    "interval",
    "run_benchmark",
    "result_stem",
    "add_arguments",
    "main",
]

DEFAULT_OUT = Path("bench/results")

#: The paper's figures (papers/janus.md, section 4), quoted next to ours.
PAPER: dict[str, Any] = {
    "source": "Janus (Chen et al., 2026), papers/janus.md section 4",
    "accuracy_gain_points": [2.7, 4.6],
    "examples": [
        {"backbone": "Qwen3-8B", "updater": "DC-RS", "without": 79.5, "with_janus": 83.2},
        {"backbone": "DeepSeek-V4-Flash", "updater": "ExpeL", "without": 79.6,
         "with_janus": 82.3},
    ],
    "trigger_ablation": "the momentum trigger beats random and periodic triggers and reaches "
                        "similar or better accuracy than always-compare with markedly fewer "
                        "comparisons",
    "setting": "six datasets (MATH500, GPQA, MMLU-Pro, HumanEval, APIBench, ...), LLM "
               "reasoning tasks; accuracy = average over the task stream",
}


# --------------------------------------------------------------------------- the benchmark


def _make_embedder(kind: str) -> Any:
    if kind == "onnx":
        from glove_ros.core.llm.embedding import Embedder

        return Embedder().load()
    from glove_ros.core.llm.embedding import HashingEmbedder

    return HashingEmbedder()


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


_HEADLINE = ("later", "heldout", "new_robot", "rehearsed", "unrehearsed")


def _metric(run: Mapping[str, Any], which: str) -> float:
    """A run's headline figure: later-half task success, held-out accuracy (all question
    types; the types the gate rehearses; the types it never rehearses) or held-out find
    accuracy of a new robot (empty experience memory)."""
    if which == "later":
        return float(run["later"]["success_rate"])
    key = {"heldout": "all", "new_robot": "cold_find"}.get(which, which)
    return float(run["heldout"][key])


def _merge(label: str, arm: Arm, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean over runs (every world x seed) of one arm, and the per-run figures."""
    def mean_agg(aggs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        out = {"name": aggs[0]["name"], "episodes": aggs[0]["episodes"]}
        for k in ("success_rate", "steps_per_task", "first_goal_hit_rate", "plan_accuracy"):
            out[k] = round(_mean([a[k] for a in aggs]), 4)
        return out

    totals = mean_agg([r["totals"] for r in runs])
    later = mean_agg([r["later"] for r in runs])
    heldout = {k: round(_mean([r["heldout"][k] for r in runs]), 4) for k in runs[0]["heldout"]}
    gate = {k: round(_mean([r["gate"][k] for r in runs]), 2) for k in runs[0]["gate"]}
    return {
        "label": label, "trigger": arm.trigger, "scorer": arm.scorer,
        "totals": totals, "later": later, "heldout": heldout, "gate": gate,
        "harmful_by_kind": {k: round(_mean([r["harmful_by_kind"][k] for r in runs]), 2)
                            for k in ERROR_KINDS},
        "by_kind": {k: {c: round(_mean([r["by_kind"][k][c] for r in runs]), 2)
                        for c in KIND_COUNTERS} for k in (*ERROR_KINDS, "clean")},
        "prior_used_per_task": round(_mean([r["prior_used_per_task"] for r in runs]), 4),
        "llm_calls": round(_mean([r["llm_calls"] for r in runs]), 2),
        "wall_s": round(_mean([r["wall_s"] for r in runs]), 3),
        "gate_wall_s": round(_mean([r["gate_wall_s"] for r in runs]), 3),
        "resolved_trigger": runs[0].get("resolved_trigger", arm.trigger),
        # per-task rows of the first run only (the plot); the other runs by their figures
        "runs": [{"world": r["world"], "seed": r["seed"], "totals": r["totals"],
                  "later": r["later"], "heldout": r["heldout"], "phases": r["phases"],
                  "gate": r["gate"], "prior_used_per_task": r["prior_used_per_task"],
                  **({"episodes": r["episodes"], "evals": r["evals"]} if i == 0 else {})}
                 for i, r in enumerate(runs)],
    }


def _resolve(arm: Arm, arms: Mapping[str, Any], config: JanusConfig) -> str:
    """The concrete trigger spec of ``arm`` (a budget-matched one takes the comparison rate
    its reference arm measured)."""
    m = matched_spec(arm.trigger)
    if m is None:
        return "never" if arm.trigger == "clean" else arm.trigger
    kind, ref = m
    g = arms[ref]["gate"]
    rate = g["comparisons"] / g["proposals"] if g["proposals"] else 0.0
    if kind == "random":
        return f"random:{min(1.0, max(0.0, rate)):.4f}"
    return f"periodic:{max(1, int(round(1.0 / rate))) if rate > 0 else 10**6}"


def run_benchmark(scenario: Scenario, *, llm: Any = None, embedder: Any = None
                  ) -> dict[str, Any]:
    """Run every arm on every (world, seed) side by side; the JSON result document."""
    sc = scenario.validate()
    worlds = sc.load_worlds()
    if sc.updater == "llm" and llm is None:
        from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

        llm = LlamaBackend(LlmConfig(n_ctx=2048, n_threads=1, max_tokens=256,
                                     timeout_s=60.0)).load()
    emb = embedder if embedder is not None else _make_embedder(sc.embedder)
    arms: dict[str, Any] = {}
    t0 = time.perf_counter()
    for arm in sc.arms:
        spec = _resolve(arm, arms, sc.janus)
        runs = []
        for world in worlds:
            for seed in sc.seeds:
                r = ArmRunner(world, sc, arm, seed, emb, llm, spec).run_all()
                r.update(world=world.name, seed=seed, resolved_trigger=spec)
                runs.append(r)
        arms[arm.label] = _merge(arm.label, arm, runs)

    def run_one(world: Any, arm: Arm, seed: int, kind: str) -> dict[str, Any]:
        r = ArmRunner(world, sc, arm, seed, emb, llm, _resolve(arm, arms, sc.janus),
                      only_kind=kind).run_all()
        return {k: v for k, v in r.items() if k not in ("episodes", "evals")}

    clean = next((a for a in arms.values() if a["trigger"] == "clean"), None)
    per_kind = run_per_kind(sc, worlds, run_one, clean["runs"] if clean else None)
    doc: dict[str, Any] = {
        "benchmark": "janus",
        "scenario": sc.to_dict(),
        "worlds": [{"name": w.name, "waypoints": len(w.waypoint_ids), "colours": list(w.colors),
                    "drift_events": [{"type": e.type, "episode": e.episode}
                                     for e in w.drift_events() if e.episode is not None]}
                   for w in worlds],
        "arms": arms,
        "per_kind": per_kind,
        "wall_s": round(time.perf_counter() - t0, 3),
        "paper": PAPER,
    }
    doc["comparison"] = _comparison(arms)
    return doc


def _comparison(arms: Mapping[str, Any]) -> dict[str, Any]:
    """Paired gains over the no-gate arm (mean and 95% interval over runs), comparisons
    relative to always-compare and the share of always-compare's gain kept."""
    base = next((a for a in arms.values() if a["trigger"] == "never"), None)
    always = next((a for a in arms.values()
                   if a["trigger"] == "always" and a["scorer"] == "experience"), None)
    out: dict[str, Any] = {}
    gains_always: dict[str, float] = {}
    if base is not None and always is not None:
        for which in _HEADLINE:
            gains_always[which] = 100 * _mean([
                _metric(x, which) - _metric(y, which)
                for x, y in zip(always["runs"], base["runs"], strict=True)])
    for label, a in arms.items():
        row: dict[str, Any] = {"comparisons": a["gate"]["comparisons"]}
        if base is not None and a is not base:
            for which in _HEADLINE:
                per = [round(100 * (_metric(x, which) - _metric(y, which)), 2)
                       for x, y in zip(a["runs"], base["runs"], strict=True)]
                row[f"{which}_points_vs_no_gate"] = interval(per)
                row[f"{which}_points_vs_no_gate_per_run"] = per
                g_all = gains_always.get(which)
                if g_all is not None and abs(g_all) > 1e-9 and a is not always:
                    row[f"{which}_share_of_always_gain"] = round(_mean(per) / g_all, 3)
        if always is not None and always["gate"]["comparisons"] and a["trigger"] not in (
                "never", "clean"):
            row["comparisons_vs_always"] = round(
                a["gate"]["comparisons"] / always["gate"]["comparisons"], 3)
        out[label] = row
    return out


# --------------------------------------------------------------------------- output


def result_stem(scenario: Scenario) -> str:
    """``janus_<name>`` without a doubled prefix."""
    name = scenario.name[len("janus_"):] if scenario.name.startswith("janus_") else scenario.name
    return f"janus_{name}"


# --------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="FILE",
                        help="scenario file (bench/scenarios/janus_*.yaml)")
    parser.add_argument("--updater", choices=UPDATERS, default=None,
                        help="override the scenario's updater: rule (deterministic, with the "
                        "scenario's injected noise) or llm (bundled GGUF; slow)")
    parser.add_argument("--episodes", type=int, default=0, metavar="N",
                        help="override the number of tasks (0: the scenario's)")
    parser.add_argument("--seeds", default="", metavar="S,S,...",
                        help="override the seeds, e.g. 0,1,2")
    parser.add_argument("--arms", default="", metavar="SPEC,SPEC",
                        help="override the arms by trigger spec, e.g. never,evidence,always")
    parser.add_argument("--embedder", choices=EMBEDDERS, default=None,
                        help="override the scenario's embedder")
    parser.add_argument("--tau", type=float, default=None,
                        help="override janus.tau (momentum trigger threshold), for sweeps")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where janus_<scenario>.json and .png go (default: %(default)s)")


def _overrides(sc: Scenario, args: argparse.Namespace) -> Scenario:
    kw: dict[str, Any] = {}
    if getattr(args, "updater", None):
        kw["updater"] = args.updater
    if getattr(args, "episodes", 0):
        kw["episodes"] = int(args.episodes)
    if getattr(args, "seeds", ""):
        try:
            kw["seeds"] = tuple(int(s) for s in str(args.seeds).split(",") if s.strip())
        except ValueError as exc:
            raise ValueError(f"--seeds expects comma-separated ints: {exc}") from None
    if getattr(args, "arms", ""):
        kw["arms"] = tuple(Arm(s.strip(), s.strip()) for s in str(args.arms).split(",")
                           if s.strip())
    if getattr(args, "embedder", None):
        kw["embedder"] = args.embedder
    if getattr(args, "tau", None) is not None:
        kw["janus"] = replace(sc.janus, tau=float(args.tau))
    return replace(sc, **kw).validate() if kw else sc


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed arguments; 0 on success, 2 on bad input."""
    try:
        sc = _overrides(load_scenario(args.scenario), args)
        sc.load_worlds()
    except (ValueError, FileNotFoundError, TypeError) as exc:
        print(f"glove-ros bench janus: {exc}", file=sys.stderr)
        return 2
    try:
        doc = run_benchmark(sc)
    except Exception as exc:  # e.g. the LLM or the embedding model cannot be loaded
        from glove_ros.core.llm.embedding import EmbeddingLoadError
        from glove_ros.core.llm.runtime import LlmLoadError

        if isinstance(exc, (LlmLoadError, EmbeddingLoadError)):
            print(f"glove-ros bench janus: {exc}", file=sys.stderr)
            return 2
        raise
    return write_results(doc, args.out, result_stem(sc), write_plot, format_table, args.json)
