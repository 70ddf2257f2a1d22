"""Dock-time consolidation benchmark: writer-only memory vs writer + consolidation.

One long task stream ("find the <colour> block", colours drawn with a seeded generator) runs
over a world file with its drift events (blocks swapped, corridors blocked / re-opened). Each
episode is produced by a memory-independent explorer (:func:`explore`): from the dock or a
seeded random waypoint it drives corridor by corridor to seeded random targets, looking at
every new waypoint, until it sees the colour or its drive budget is spent; blocked corridors
are found by driving into them, and a look misses a block with probability ``miss_rate``
(nuisance). The same episodes feed every arm's fast writer
(:class:`~glove_ros.core.consolidate.writer.FastWriter`), so the arms differ only in what
consolidation does with the memory:

  writer_only   fast writes only (the paper's "Writer-only")
  dedup_recency the strongest non-consolidating baseline: at every dock, duplicate facts
                (same text up to the episode id) are dropped, newest kept, then the oldest
                entries are pruned until memory fits ``baseline_budget_tokens`` (default:
                the planner's budget -- a memory the planner reads whole), ReMEmbR-style
  rule          + the deterministic consolidator at every dock (every ``every_k`` episodes)
  llm           + the local LLM consolidator (the default model, or ``--model NAME|PATH``)

Measured per episode and arm, side by side: active memory tokens (the whole plan memory as
the planner-facing text, approximate tokens) and entries, and task success by *rehearsal*:
before the episode runs, the planner's first decision for the task is rehearsed on the memory
it would read (ranked for the task, under ``planner_budget_tokens``;
:func:`~glove_ros.core.consolidate.acceptance.rehearse_find`) and counts as a success when
the block is really there (simulator ground truth). Corridor accuracy: for every corridor
any event blocks, does memory believe its current state
(:func:`~glove_ros.core.consolidate.acceptance.rehearse_corridor`)? Per consolidation run:
status, tokens before / after, compression, fan-in, steps, time and LLM tokens.

This is a rehearsal benchmark: the explorer does not use memory, so success is "memory gives
the planner the right first goal", not the JetRover core loop's steps per task (that is
``glove-ros bench jetrover``). The acceptance test inside consolidation uses the same reader
but the robot's own traces as truth, never the simulator.

Scenario YAML (``bench/scenarios/consolidation_*.yaml``)::

  name: maze                    # result stem consolidation_<name> (default: file stem)
  description: "..."
  world: jetrover_maze          # bundled world name or path to a world file (required)
  episodes: 120                 # tasks in the stream (required)
  seed: 0                       # task colours, starts, explorer, misses
  start: random                 # random | dock: where each task starts
  max_drives: 14                # corridor drives before a search gives up
  miss_rate: 0.05               # probability that a look misses a block
  every_k: 10                   # the robot docks after every k episodes
  planner_budget_tokens: 400    # memory budget of the rehearsed planner
  baseline_budget_tokens: 400   # token budget of the dedup_recency baseline (default: the
                                # planner budget)
  checkpoint_every: 0           # > 0: the long-stream mode (planner-read tokens, success,
                                # memory, dock cost per window of this many episodes;
                                # glove_ros/benchmarks/_consolidation_stream.py)
  events: []                    # extra world events (world-file syntax), appended
  consolidation: {}             # ConsolidationConfig fields for the rule arm
  llm:                          # the llm arm (--consolidator llm|both)
    n_ctx: 2048
    n_threads: 1
    call_max_tokens: 128
    max_tokens: 800             # per run
    max_steps: 8                # per run
    timeout_s: 30.0             # per call
    region_budget_tokens: 500
    max_region_entries: 16

Writes ``<out>/consolidation_<name>[_llm|_both].json`` and ``.png`` (active tokens and
rolling success over episodes per arm; drift events and commits marked) and prints a table
with the paper's reference numbers next to the measured ones.

Long-stream mode (``checkpoint_every`` > 0 or ``--checkpoint-every N``;
``bench/scenarios/consolidation_stream.yaml``, 1,000 episodes): the same stream and arms,
measured where it matters -- the tokens the planner actually reads for each task under its
budget, the success of the decisions taken from them, memory size and dock cost, per
checkpoint window and per dock (:mod:`glove_ros.benchmarks._consolidation_stream`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.core.consolidate.acceptance import (
    memory_tokens,
    rehearse_corridor,
    rehearse_find,
)
from glove_ros.core.consolidate.consolidation import ConsolidationReport, Consolidator
from glove_ros.core.consolidate.policies import LlmPolicy, RulePolicy
from glove_ros.core.consolidate.region import ConsolidationConfig
from glove_ros.core.consolidate.writer import FastWriter
from glove_ros.core.plan.plan_entries import Edit, PlanEntry
from glove_ros.core.plan.plan_memory import PlanMemoryStore
from glove_ros.core.plan.updater import EpisodeOutcome, Observation, Traversal
from glove_ros.core.world.sim import WorldState
from glove_ros.core.world.worldfile import World, edge_key, load_world

__all__ = [
    "ARMS",
    "PAPER",
    "Scenario",
    "ScenarioError",
    "add_arguments",
    "explore",
    "format_table",
    "load_scenario",
    "main",
    "parse_scenario",
    "run_benchmark",
    "write_plot",
]

ARMS = ("writer_only", "dedup_recency", "rule", "llm")
DEFAULT_OUT = Path("bench/results")

#: Auto-Dreamer's reported numbers (papers/auto-dreamer.md), quoted next to ours.
PAPER: dict[str, Any] = {
    "source": "Auto-Dreamer (NeurIPS 2026, arXiv 2605.20616), continual-memory deployment",
    "claim": "5.7x-11.6x smaller active memory than the strongest baseline with equal or "
             "better success; untrained region rewriting alone gives 6-11x vs writer-only",
    "vs_strongest_baseline": {
        "ScienceWorld": {"tokens": [80918, 6947], "compression": 11.6, "success": [34.1, 41.1]},
        "ALFWorld": {"tokens": [62947, 10954], "compression": 5.7, "success": [58.4, 60.2]},
    },
    "untrained_vs_writer_only": {
        "ScienceWorld": {"tokens": [61679, 5700], "compression": 10.8, "success": [29.6, 31.4]},
        "ALFWorld": {"tokens": [50735, 6900], "compression": 7.4, "success": [48.0, 59.2]},
    },
}


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the key."""


_LLM_KEYS = {"n_ctx": 2048, "n_threads": 1, "call_max_tokens": 128, "max_tokens": 800,
             "max_steps": 8, "timeout_s": 30.0, "region_budget_tokens": 500,
             "max_region_entries": 16}


@dataclass(frozen=True)
class Scenario:
    """A validated consolidation scenario (keys: module docstring)."""

    name: str
    world: World
    episodes: int
    seed: int = 0
    start: str = "random"
    max_drives: int = 14
    miss_rate: float = 0.05
    every_k: int = 10
    planner_budget_tokens: int = 400
    description: str = ""
    consolidation: Mapping[str, Any] = field(default_factory=dict)
    llm: Mapping[str, Any] = field(default_factory=lambda: dict(_LLM_KEYS))
    file: str = ""
    baseline_budget_tokens: int = 0
    checkpoint_every: int = 0


_TOP = {"name", "description", "world", "episodes", "seed", "start", "max_drives", "miss_rate",
        "every_k", "planner_budget_tokens", "baseline_budget_tokens", "events",
        "consolidation", "llm", "checkpoint_every"}


def parse_scenario(data: Any, default_name: str = "scenario", file: str = "") -> Scenario:
    """Validate a scenario mapping (as loaded from YAML)."""
    if not isinstance(data, Mapping):
        raise ScenarioError("a scenario must be a mapping")
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise ScenarioError(f"unknown key(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(_TOP))}")
    for k in ("world", "episodes"):
        if k not in data:
            raise ScenarioError(f"missing required key {k!r}")
    try:
        world = load_world(str(data["world"]))
        if data.get("events"):
            if not isinstance(data["events"], list):
                raise ScenarioError("events must be a list of world events")
            doc = world.to_dict()
            doc["events"] = list(doc.get("events", [])) + list(data["events"])
            world = World.from_dict(doc, source=world.source)
    except (FileNotFoundError, ValueError) as exc:
        raise ScenarioError(f"world: {exc}") from exc

    def as_int(k: str, default: int, lo: int) -> int:
        v = data.get(k, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ScenarioError(f"{k} must be an int >= {lo} (got {v!r})")
        return v

    episodes = as_int("episodes", 0, 1)
    miss = data.get("miss_rate", 0.05)
    if isinstance(miss, bool) or not isinstance(miss, (int, float)) or not 0 <= miss < 1:
        raise ScenarioError(f"miss_rate must be in [0, 1) (got {miss!r})")
    start = data.get("start", "random")
    if start not in ("random", "dock"):
        raise ScenarioError(f"start must be 'random' or 'dock' (got {start!r})")
    cons = data.get("consolidation") or {}
    names = {f.name for f in fields(ConsolidationConfig)}
    if not isinstance(cons, Mapping) or set(cons) - names:
        raise ScenarioError(f"consolidation: unknown key(s) {sorted(set(cons) - names)}; "
                            f"ConsolidationConfig fields: {', '.join(sorted(names))}")
    llm = {**_LLM_KEYS, **(data.get("llm") or {})}
    if set(llm) - set(_LLM_KEYS):
        raise ScenarioError(f"llm: unknown key(s) {sorted(set(llm) - set(_LLM_KEYS))}; "
                            f"allowed: {', '.join(_LLM_KEYS)}")
    sc = Scenario(
        str(data.get("name") or default_name), world, episodes, as_int("seed", 0, 0), start,
        as_int("max_drives", 14, 1), float(miss), as_int("every_k", 10, 1),
        as_int("planner_budget_tokens", 400, 16), str(data.get("description", "")),
        dict(cons), llm, file, as_int("baseline_budget_tokens", 0, 0),
        as_int("checkpoint_every", 0, 0),
    )
    if not world.colors:
        raise ScenarioError(f"world {world.name!r} has no blocks: nothing to search for")
    try:
        _rule_config(sc)
        _llm_config(sc)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from exc
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"scenario file not found: {path}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{p}: not valid YAML: {exc}") from exc
    stem = p.stem[len("consolidation_"):] if p.stem.startswith("consolidation_") else p.stem
    try:
        return parse_scenario(data, stem or "scenario", str(p))
    except ScenarioError as exc:
        raise ScenarioError(f"{p}: {exc}") from exc


def _baseline_budget(sc: Scenario) -> int:
    return sc.baseline_budget_tokens or sc.planner_budget_tokens


def _rule_config(sc: Scenario) -> ConsolidationConfig:
    base = {"every_k_episodes": sc.every_k, "require_dock": False,
            "planner_budget_tokens": sc.planner_budget_tokens, "max_region_entries": 256,
            "region_budget_tokens": 20000, "max_steps": 2000}
    return ConsolidationConfig(**{**base, **sc.consolidation}).validate()


def _llm_config(sc: Scenario) -> ConsolidationConfig:
    c = sc.llm
    base = {"every_k_episodes": sc.every_k, "require_dock": False,
            "planner_budget_tokens": sc.planner_budget_tokens,
            "max_region_entries": int(c["max_region_entries"]),
            "region_budget_tokens": int(c["region_budget_tokens"]),
            "max_steps": int(c["max_steps"]), "max_tokens": int(c["max_tokens"]),
            "call_max_tokens": int(c["call_max_tokens"]), "llm_timeout_s": float(c["timeout_s"]),
            # an LLM refit would be a new sample nobody held out: commit the validated one
            "refit_after_heldout": False}
    keep = {k: v for k, v in sc.consolidation.items() if k not in base}
    return ConsolidationConfig(**{**base, **keep}).validate()


# ------------------------------------------------------------------------------ the stream


def explore(state: WorldState, world: World, start: str, colour: str, episode_id: str,
            rng: np.random.Generator, max_drives: int, miss_rate: float,
            next_id: Any) -> EpisodeOutcome:
    """One memory-independent search episode (see the module docstring)."""
    at = start
    looked: set[str] = set()
    known_blocked: set[tuple[str, str]] = set()
    obs: list[Observation] = []
    trav: list[Traversal] = []
    found = ""

    def look(wp: str) -> None:
        nonlocal found
        seen = tuple(c for c in state.colors_at(wp) if rng.random() >= miss_rate)
        obs.append(Observation(wp, seen, next_id()))
        looked.add(wp)
        if colour in seen:
            found = wp

    look(at)
    drives = 0
    order = [str(w) for w in rng.permutation(list(world.waypoint_ids))]
    for target in order:
        while not found and at != target and drives < max_drives:
            path = world.shortest_path(at, target, avoid_edges=known_blocked)
            if path is None:
                break
            nxt = path[1]
            drives += 1
            if state.is_blocked(at, nxt):
                trav.append(Traversal(at, nxt, True, next_id()))
                known_blocked.add(edge_key(at, nxt))
                continue
            trav.append(Traversal(at, nxt, False, next_id()))
            at = nxt
            if at not in looked:
                look(at)
        if found or drives >= max_drives:
            break
    return EpisodeOutcome(
        episode_id, f"find the {colour} block", colour, bool(found), found or None,
        tuple(obs), tuple(trav), "" if found else "drive budget spent",
    ).validate()


def _truth_location(state: WorldState, colour: str) -> str | None:
    for p in state.placements():
        if p.color == colour:
            return p.waypoint
    return None


def _watched_edges(world: World) -> list[tuple[str, str]]:
    """Corridors that are blocked at some point: initially or by an event."""
    out = {e.key for e in world.edges if e.blocked}
    for ev in world.events:
        edge = getattr(ev, "edge", None)
        if edge is not None and ev.type in ("block_edge", "open_edge"):
            out.add(edge_key(*edge))
    return sorted(out)


_EPISODE_REF = re.compile(r"\s*\(?\b(?:in\s+)?episode\s+\S+?\)?(?=[.;,]|$)", re.IGNORECASE)


def dedup_recency(entries: Sequence[PlanEntry], budget_tokens: int) -> list[str]:
    """The strongest non-consolidating baseline's pruning: names of the entries to drop.

    Duplicates -- the same kind and text once the episode reference is taken out ("Saw the
    red block at kitchen (episode ep004).") -- keep only their newest entry; then the oldest
    entries are dropped until the rest fits ``budget_tokens`` (:func:`memory_tokens`). No
    rewriting, no merging: only selection.
    """
    newest_first = sorted(entries, key=lambda e: -(e.entry_id or 0))
    seen: set[tuple[str, str]] = set()
    keep: list[PlanEntry] = []
    drop: list[str] = []
    for e in newest_first:
        key = (e.kind, _EPISODE_REF.sub("", e.body).strip().lower())
        if key in seen:
            drop.append(e.name)
            continue
        seen.add(key)
        keep.append(e)
    used = 0
    for e in keep:
        cost = memory_tokens([e])
        if used + cost > budget_tokens:
            drop.append(e.name)
            continue
        used += cost
    return drop


@dataclass
class _Arm:
    name: str
    store: PlanMemoryStore
    writer: FastWriter
    consolidator: Consolidator | None = None
    policy_factory: Any = None
    episodes: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    write_s: float = 0.0


def _run_doc(ep: int, r: ConsolidationReport) -> dict[str, Any]:
    ev = r.evaluation
    return {
        "after_episode": ep, "status": r.status, "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after, "candidate_tokens": r.candidate_tokens,
        "entries_before": r.entries_before, "entries_after": r.entries_after,
        "compression": round(r.compression, 3), "region_entries": r.region_entries,
        "synthesized": r.synthesized, "fan_in_mean": round(r.fan_in_mean, 3),
        "fan_in_max": r.fan_in_max, "steps": r.steps, "llm_tokens": r.llm_tokens,
        "elapsed_s": round(r.elapsed_s, 4),
        "heldout_judged": None if ev is None else ev.heldout_judged,
        "heldout_old": None if ev is None or ev.heldout_old is None else round(ev.heldout_old, 4),
        "heldout_new": None if ev is None or ev.heldout_new is None else round(ev.heldout_new, 4),
        "utility_old": None if ev is None else round(ev.utility_old, 4),
        "utility_new": None if ev is None else round(ev.utility_new, 4),
        "counterfactual": None if ev is None else round(ev.counterfactual, 4),
        "message": r.message[:300],
    }


def _make_arms(sc: Scenario, names: Sequence[str],
               model_path: str = "") -> tuple[list[_Arm], Any]:
    """One in-memory store, fast writer and (rule / llm) consolidator per arm; returns the
    arms and the loaded LLM backend (``None`` without an llm arm). The caller closes both
    (the stores are closed here if building a later arm fails)."""
    for a in names:
        if a not in ARMS:
            raise ValueError(f"unknown arm {a!r}; arms: {', '.join(ARMS)}")
    out: list[_Arm] = []
    backend = None
    try:
        for name in names:
            store = PlanMemoryStore(":memory:", synchronous="NORMAL")
            arm = _Arm(name, store, FastWriter(store))
            out.append(arm)
            if name == "rule":
                arm.consolidator = Consolidator(store, _rule_config(sc))
                arm.policy_factory = RulePolicy
            elif name == "llm":
                from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

                c = sc.llm
                backend = LlamaBackend(LlmConfig(
                    model_path=model_path, n_ctx=int(c["n_ctx"]), n_threads=int(c["n_threads"]),
                    max_tokens=int(c["call_max_tokens"]), timeout_s=float(c["timeout_s"])))
                backend.load()
                arm.consolidator = Consolidator(store, _llm_config(sc))
                b = backend
                arm.policy_factory = lambda b=b: LlmPolicy(b, n_ctx=int(sc.llm["n_ctx"]))
    except BaseException:
        for arm in out:
            arm.store.close()
        if backend is not None:
            backend.close()
        raise
    return out, backend


def _dock(arm: _Arm, sc: Scenario, ep: int, log: Any = None) -> ConsolidationReport | None:
    """What ``arm`` does at the dock after episode ``ep``: the baseline prunes, a
    consolidating arm runs its consolidator (the run is appended to ``arm.runs``)."""
    if arm.name == "dedup_recency":
        drop = dedup_recency(arm.store.entries(), _baseline_budget(sc))
        if drop:
            arm.store.apply([Edit.remove(n, "dedup + recency pruning") for n in drop],
                            source="baseline", reason="dedup + recency pruning at the dock")
        return None
    if arm.consolidator is None:
        return None
    r = arm.consolidator.run(arm.policy_factory(), reason="docked")
    arm.runs.append(_run_doc(ep, r))
    if log is not None:
        log(f"[{arm.name}] after episode {ep}: {r.status} "
            f"{r.tokens_before}->{r.tokens_after} tokens ({r.elapsed_s:.2f} s)")
    return r


def run_benchmark(sc: Scenario, arms: Sequence[str] = ("writer_only", "dedup_recency", "rule"),
                  model_path: str = "", log: Any = None) -> dict[str, Any]:
    """Run the arms side by side on one stream; returns the JSON document."""
    world = sc.world
    wps = list(world.waypoint_ids)
    watched = _watched_edges(world)
    backend = None
    state_arms: list[_Arm] = []
    try:
        state_arms, backend = _make_arms(sc, arms, model_path)

        state = WorldState(world)
        rng = np.random.default_rng([sc.seed, 29])
        colours = list(world.colors)
        counter = [0]

        def next_id() -> int:
            counter[0] += 1
            return counter[0]

        for ep in range(sc.episodes):
            state.advance(episode=ep)
            colour = colours[int(rng.integers(len(colours)))]
            start = world.dock if sc.start == "dock" else wps[int(rng.integers(len(wps)))]
            truth = _truth_location(state, colour)
            for arm in state_arms:
                entries = arm.store.entries()
                first = rehearse_find(entries, colour, wps,
                                      budget_tokens=sc.planner_budget_tokens)
                corr = [rehearse_corridor(entries, a, b, budget_tokens=sc.planner_budget_tokens)
                        == state.is_blocked(a, b) for a, b in watched]
                arm.episodes.append({
                    "episode": ep, "colour": colour, "success": first == truth,
                    "first_goal": first, "corridors_ok": int(sum(corr)),
                    "corridors": len(corr), "tokens": memory_tokens(entries),
                    "entries": len(entries),
                })
            outcome = explore(state, world, start, colour, f"ep{ep:04d}", rng, sc.max_drives,
                              sc.miss_rate, next_id)
            for arm in state_arms:
                t0 = time.perf_counter()
                arm.writer.write(outcome)
                arm.write_s += time.perf_counter() - t0
            if (ep + 1) % sc.every_k == 0:
                for arm in state_arms:
                    _dock(arm, sc, ep, log)
        doc = _document(sc, state_arms, watched, model_path if backend else None)
    finally:
        for arm in state_arms:
            arm.store.close()
        if backend is not None:
            backend.close()
    return doc


def _summary(arm: _Arm, sc: Scenario, drift_at: int | None) -> dict[str, Any]:
    eps = arm.episodes
    n = len(eps)
    ok = [e["success"] for e in eps]
    after = [e["success"] for e in eps if drift_at is not None and e["episode"] >= drift_at]
    corr = sum(e["corridors_ok"] for e in eps)
    corr_n = sum(e["corridors"] for e in eps)
    runs = arm.runs
    st = {s: sum(1 for r in runs if r["status"] == s) for s in
          ("committed", "rejected", "aborted", "cancelled", "unchanged", "skipped")}
    committed = [r for r in runs if r["status"] == "committed"]
    half = eps[n // 2:] or eps
    judged = [r for r in runs if r.get("heldout_judged")]
    return {
        "success_rate": round(float(np.mean(ok)), 4) if ok else 0.0,
        "success_rate_second_half": round(float(np.mean([e["success"] for e in half])), 4)
        if half else 0.0,
        "rejection_rate": round(st["rejected"] / len(runs), 4) if runs else 0.0,
        "heldout_judged_runs": len(judged),
        "success_rate_after_drift": round(float(np.mean(after)), 4) if after else None,
        "corridor_accuracy": round(corr / corr_n, 4) if corr_n else None,
        "final_tokens": eps[-1]["tokens"] if eps else 0,
        "final_entries": eps[-1]["entries"] if eps else 0,
        "mean_tokens_second_half": round(float(np.mean([e["tokens"] for e in half])), 1),
        # tokens written by the fast writer since the last dock (episode i reads the memory
        # left by the dock before episode (i // k) * k plus the writes since)
        "mean_tokens_written_since_dock_second_half": round(float(np.mean([
            e["tokens"] - eps[(e["episode"] // sc.every_k) * sc.every_k]["tokens"]
            for e in half])), 1) if half else 0.0,
        "runs": len(runs), **{f"runs_{k}": v for k, v in st.items()},
        "mean_run_s": round(float(np.mean([r["elapsed_s"] for r in runs])), 4) if runs else 0.0,
        "llm_tokens": int(sum(r["llm_tokens"] for r in runs)),
        "mean_fan_in": round(float(np.mean([r["fan_in_mean"] for r in committed])), 3)
        if committed else 0.0,
        "max_fan_in": max((r["fan_in_max"] for r in committed), default=0),
        "write_ms_per_episode": round(1000 * arm.write_s / max(1, n), 3),
    }


def _model_name(model: str) -> str:
    """The GGUF file the llm arm ran ('' = the default model, resolved as the LLM does)."""
    from glove_ros.core.llm.models import ModelFileError, resolve_model

    try:
        return resolve_model(model).name
    except (ModelFileError, ValueError):
        return model or "default model (not installed)"


def _document(sc: Scenario, arms: Sequence[_Arm], watched: Sequence[tuple[str, str]],
              model: str | None) -> dict[str, Any]:
    w = sc.world
    drift = sorted(e.episode for e in w.drift_events() if e.episode is not None)
    drift_at = drift[0] if drift else None
    summaries = {a.name: _summary(a, sc, drift_at) for a in arms}
    ratios: dict[str, Any] = {}
    base = summaries.get("writer_only")
    if base:
        for name, s in summaries.items():
            if name == "writer_only":
                continue
            ratios[f"{name}_compression_final"] = round(
                base["final_tokens"] / s["final_tokens"], 2) if s["final_tokens"] else None
            ratios[f"{name}_compression_second_half"] = round(
                base["mean_tokens_second_half"] / s["mean_tokens_second_half"], 2) \
                if s["mean_tokens_second_half"] else None
            ratios[f"{name}_success_minus_writer_only"] = round(
                s["success_rate"] - base["success_rate"], 4)
    strong = summaries.get("dedup_recency")
    if strong:
        for name, s in summaries.items():
            if name in ("writer_only", "dedup_recency"):
                continue
            ratios[f"{name}_vs_baseline_final"] = round(
                strong["final_tokens"] / s["final_tokens"], 2) if s["final_tokens"] else None
            ratios[f"{name}_vs_baseline_second_half"] = round(
                strong["mean_tokens_second_half"] / s["mean_tokens_second_half"], 2) \
                if s["mean_tokens_second_half"] else None
            ratios[f"{name}_later_success_minus_baseline"] = round(
                s["success_rate_second_half"] - strong["success_rate_second_half"], 4)
            # what no rewrite can remove: the fast writes since the last dock (the same
            # in every arm); even an empty consolidated memory stays above them
            written = s["mean_tokens_written_since_dock_second_half"]
            ratios[f"{name}_vs_baseline_bound"] = round(
                strong["mean_tokens_second_half"] / written, 2) if written else None
    curve = []
    by = {a.name: a.episodes for a in arms}
    for i in range(sc.every_k - 1, sc.episodes - 1, sc.every_k):
        # active tokens right after the dock: the memory the next episode reads
        row: dict[str, Any] = {"episodes": i + 1}
        for name, eps in by.items():
            row[name] = eps[i + 1]["tokens"]
        for name in by:
            if name in ("writer_only", "dedup_recency") or not row[name]:
                continue
            if "writer_only" in row:
                row[f"{name}_vs_writer_only"] = round(row["writer_only"] / row[name], 2)
            if "dedup_recency" in row:
                row[f"{name}_vs_baseline"] = round(row["dedup_recency"] / row[name], 2)
        curve.append(row)
    return {
        "benchmark": "consolidation",
        "scenario": {
            "name": sc.name, "file": sc.file, "description": sc.description,
            "world": w.name, "episodes": sc.episodes, "seed": sc.seed, "start": sc.start,
            "max_drives": sc.max_drives, "miss_rate": sc.miss_rate, "every_k": sc.every_k,
            "planner_budget_tokens": sc.planner_budget_tokens,
            "baseline_budget_tokens": _baseline_budget(sc),
            "drift_events": [{"type": e.type, "episode": e.episode} for e in w.drift_events()],
            "watched_corridors": [list(e) for e in watched],
        },
        "config": {
            "rule": {k: v for k, v in _rule_config(sc).__dict__.items()},
            "llm": ({**dict(sc.llm), "model": _model_name(model)}
                    if model is not None else None),
        },
        "paper": PAPER,
        "arms": {a.name: {"summary": summaries[a.name], "runs": a.runs, "episodes": a.episodes}
                 for a in arms},
        "ratios": ratios,
        "curve": curve,
    }


# ------------------------------------------------------------------------------ output


def format_table(doc: Mapping[str, Any]) -> str:
    """The side-by-side table the CLI prints."""
    sc = doc["scenario"]
    lines = [f"consolidation '{sc['name']}' on world {sc['world']}: {sc['episodes']} tasks, "
             f"dock every {sc['every_k']}, planner budget {sc['planner_budget_tokens']} tokens, "
             f"miss rate {sc['miss_rate']:g}"]
    head = ["arm", "success", "2nd half", "after drift", "corridors", "final tokens",
            "entries", "vs writer", "tokens 2nd half", "vs writer", "vs baseline",
            "runs c/r/a", "s/run", "LLM tok", "fan-in"]
    rows = [head]
    ratios = doc.get("ratios", {})
    for name, a in doc["arms"].items():
        s = a["summary"]
        comp = ratios.get(f"{name}_compression_final")
        comp2 = ratios.get(f"{name}_compression_second_half")
        after = s["success_rate_after_drift"]
        vsb = ratios.get(f"{name}_vs_baseline_second_half")
        rows.append([
            name, f"{s['success_rate']:.1%}", f"{s['success_rate_second_half']:.1%}",
            "-" if after is None else f"{after:.1%}",
            "-" if s["corridor_accuracy"] is None else f"{s['corridor_accuracy']:.1%}",
            str(s["final_tokens"]), str(s["final_entries"]),
            "1.00x" if name == "writer_only" else ("-" if comp is None else f"{comp:.2f}x"),
            f"{s['mean_tokens_second_half']:.0f}",
            "1.00x" if name == "writer_only" else ("-" if comp2 is None else f"{comp2:.2f}x"),
            "1.00x" if name == "dedup_recency" else ("-" if vsb is None else f"{vsb:.2f}x"),
            f"{s['runs_committed']}/{s['runs_rejected']}/{s['runs_aborted']}",
            f"{s['mean_run_s']:.3f}", str(s["llm_tokens"]),
            f"{s['mean_fan_in']:.1f} (max {s['max_fan_in']})",
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                               for i, (c, wd) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * wd for wd in widths))
    p = doc["paper"]
    u = p["untrained_vs_writer_only"]
    lines.append("paper: " + p["claim"] + "; writer-only -> untrained: " + ", ".join(
        f"{env} {v['tokens'][0]} -> {v['tokens'][1]} tokens ({v['compression']}x), success "
        f"{v['success'][0]} -> {v['success'][1]}%" for env, v in u.items()))
    lines.append("success = rehearsed first goal is where the block really is; 2nd half = "
                 "the later half of the stream; corridors = memory's belief about each "
                 "event-touched corridor matches the world; vs baseline = dedup_recency's "
                 "mean tokens (2nd half) / this arm's; runs c/r/a = committed / rejected "
                 "(held-out or in-sample acceptance) / aborted")
    curve = doc.get("curve", [])
    for name in doc["arms"]:
        bound = ratios.get(f"{name}_vs_baseline_bound")
        if bound is not None:
            written = doc["arms"][name]["summary"]["mean_tokens_written_since_dock_second_half"]
            lines.append(
                f"{name}: {written:.0f} of its mean tokens (2nd half) are fast writes since "
                f"the last dock, the same in every arm: even an empty consolidated memory "
                f"would be at most {bound:.2f}x smaller than the baseline")
    if curve and "rule_vs_baseline" in curve[0]:
        step = max(1, len(curve) // 6)
        pts = curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else [])
        lines.append("rule vs baseline over the stream: " + ", ".join(
            f"{r['episodes']} eps {r.get('rule_vs_baseline', 0):.1f}x" for r in pts))
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path, window: int = 10) -> None:
    """Active memory tokens (log scale) and rolling success over episodes, per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8.0, 6.5), sharex=True)
    styles = {"writer_only": ("-", "tab:gray"), "rule": ("-", "tab:blue"),
              "llm": ("--", "tab:orange"), "dedup_recency": (":", "tab:green")}
    for name, a in doc["arms"].items():
        eps = a["episodes"]
        ls, col = styles.get(name, ("-", None))
        x = np.array([e["episode"] for e in eps])
        ax1.plot(x, [max(1, e["tokens"]) for e in eps], ls, color=col, label=name)
        ok = np.array([1.0 if e["success"] else 0.0 for e in eps])
        k = max(1, min(window, len(ok)))
        roll = [ok[max(0, i - k + 1): i + 1].mean() for i in range(len(ok))]
        ax2.plot(x, roll, ls, color=col, label=name, drawstyle="steps-post")
        for r in a["runs"]:
            if r["status"] == "committed":
                ax1.plot(r["after_episode"] + 1, max(1, r["tokens_after"]), "v", color=col,
                         markersize=4)
    ax1.set_yscale("log")
    ax1.set_ylabel("active memory tokens")
    ax2.set_ylabel(f"success (rolling {window})")
    ax2.set_ylim(-0.05, 1.1)
    ax2.set_xlabel("episode (one task each)")
    for ax in (ax1, ax2):
        for e in doc["scenario"]["drift_events"]:
            if e["episode"] is not None:
                ax.axvline(e["episode"], color="red", linestyle="--", linewidth=1)
                ax.text(e["episode"], ax.get_ylim()[1], f" {e['type']}", color="red",
                        fontsize=7, va="top")
    ax1.legend(fontsize=8, loc="upper left")
    sc = doc["scenario"]
    ax1.set_title(f"consolidation '{sc['name']}' ({sc['world']}): dock every {sc['every_k']} "
                  "episodes (v = commit)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="FILE",
                        help="scenario YAML (bench/scenarios/consolidation_*.yaml)")
    parser.add_argument("--consolidator", choices=("rule", "llm", "both"), default="rule",
                        help="which consolidating arm runs next to writer-only (default: "
                        "%(default)s; llm uses the default model or --model)")
    parser.add_argument("--model", default="", metavar="PATH",
                        help="model name or GGUF path for the llm arm (default: the default "
                        "model, qwen2.5-coder-1.5b, or $GLOVE_LLM_MODEL)")
    parser.add_argument("--episodes", type=int, default=0, metavar="N",
                        help="override the scenario's episode count")
    parser.add_argument("--seed", type=int, default=None, metavar="N",
                        help="override the scenario's seed (the results then go to "
                        "consolidation_<name>_seed<N>[...].json)")
    parser.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                        help="long-stream mode: planner-read tokens, success, memory and "
                        "dock cost per window of N episodes (default: the scenario's "
                        "checkpoint_every; 0 there = the short mode)")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where consolidation_<name>[_llm|_both].json and .png go "
                        "(default: %(default)s)")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 on success, 2 on bad input."""
    from glove_ros.benchmarks import _consolidation_stream as stream

    try:
        sc = load_scenario(args.scenario)
        if args.episodes:
            if args.episodes < 1:
                raise ScenarioError("--episodes must be >= 1")
            sc = Scenario(**{**sc.__dict__, "episodes": int(args.episodes)})
        seed = getattr(args, "seed", None)
        if seed is not None:
            if seed < 0:
                raise ScenarioError(f"--seed must be >= 0 (got {seed})")
            sc = Scenario(**{**sc.__dict__, "seed": int(seed)})
        every = int(getattr(args, "checkpoint_every", 0) or 0)
        if every < 0:
            raise ScenarioError(f"--checkpoint-every must be >= 0 (got {every})")
        every = every or sc.checkpoint_every
    except (ScenarioError, FileNotFoundError) as exc:
        print(f"glove-ros bench consolidation: {exc}", file=sys.stderr)
        return 2
    arms = {"rule": ("writer_only", "dedup_recency", "rule"),
            "llm": ("writer_only", "dedup_recency", "llm"),
            "both": ("writer_only", "dedup_recency", "rule", "llm")}[args.consolidator]
    log = (lambda m: print(m, file=sys.stderr)) if not args.json else None
    try:
        if every:
            doc = stream.run_stream(sc, arms, every, args.model, log=log)
        else:
            doc = run_benchmark(sc, arms, args.model, log=log)
    except Exception as exc:
        from glove_ros.core.llm.runtime import LlmLoadError

        if isinstance(exc, (LlmLoadError, ValueError)):
            print(f"glove-ros bench consolidation: {exc}", file=sys.stderr)
            return 2
        raise
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.consolidator == "rule" else f"_{args.consolidator}"
    if seed is not None:
        suffix = f"_seed{seed}{suffix}"
    stem = f"consolidation_{sc.name}{suffix}"
    jpath, ppath = out / f"{stem}.json", out / f"{stem}.png"
    jpath.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if every:
        stream.write_stream_plot(doc, ppath)
    else:
        write_plot(doc, ppath)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(stream.stream_table(doc) if every else format_table(doc))
        print(f"wrote {jpath} and {ppath}", file=sys.stderr)
    return 0
