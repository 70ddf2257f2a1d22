"""FrozenLake drift benchmark: GLOVE against the paper's memory-update baselines.

Every method drives the same memory-driven agent on gymnasium's FrozenLake-v1; only the
memory update rule differs (glove_ros/core/verify/memory_rules.py). The agent is told the grid and
where the goal is; what each action does it knows only from its memory of (state, action)
-> outcome transitions. It runs value iteration over the believed outcomes (goal +1, hole
-hole_penalty); an action memory knows nothing about is assumed to make its intended move
(free-space assumption, worth unknown_trust times that), into a hole if memory holds the
target tile is one. So it follows a remembered route, explores toward the goal, and never
takes an action its memory says ends in a hole. When no believed route is left it is
stuck: it asks its memory rule for probes (GLOVE re-tests stale negative memories),
otherwise it wanders on the moves it believes safest until the episode's step limit.

Phases: a source phase (learning, no budget), then drift phases, each rebuilding the env
from the previous map with some tiles changed. One interaction budget covers all drift
phases: every task step and every probe step (a reset of a second env and a replay along
remembered moves to (s, a), then a; replay steps are charged but only the probed outcome
is handed to memory) is charged to it; an episode the budget cannot finish is a failure.
A probe cap bounds the probe steps within it (paper: B = 310 = 280 task + 30 probe).
For a phase that re-opens a hole the benchmark reports the self-confirming deadlock: the
method's memory believed an entry to the re-opened tile to be a hole at the start of the
phase, still believes it at the end, neither the agent nor a probe ever tried that entry
again, and it cost: at the start of one of the phase's episodes, the route memory believed
in from the start tile was longer than with those entries corrected (or there was none), so
the memory itself forced a detour while the method had an episode to re-test it in. A
wrong memory that cost nothing (another route is as short) is reported apart as
``stale_kept``. ``deadlock_at_end`` keeps the earlier reading (kept, and the believed route
at the end of the phase longer than the world's shortest, for any reason).

The agent hands its memory rule two hooks, the same for every rule: ``on_stuck`` when no
believed route is left, and ``on_blocked(pairs)`` when remembered falls are all that stand
between it and a shorter route (GLOVE re-tests those not re-confirmed since its latest
dissonance; the local rules keep what they believe).

Scenario YAML keys (unknown keys are errors):

  name               str, optional; results go to frozenlake_<name>.json (default: the
                     file name without .yaml and without a leading "frozenlake_")
  description        str, optional
  map                list of equal-length rows over S F H G: one S, at least one G
  is_slippery        bool (default false)
  success_rate       float in (0, 1], slippery only: probability of the intended move
                     (default 1/3, gymnasium's)
  seed               int (default 0)
  max_episode_steps  int >= 1 (default 4 * rows * cols)
  source             {episodes: int >= 1}: the learning phase, not charged to the budget
  drift              list (>= 1) of {name: str, episodes: int >= 1,
                     set: list of {row: int, col: int, tile: H or F}}; each phase changes
                     the previous phase's map; S and G tiles cannot change
  budget             {total: int >= 1, probe_cap: int >= 0 (default: total)}
  agent              {gamma: (0, 1) default 0.95, unknown_trust: (0, 1] default 0.9,
                     hole_penalty: >= 0 default 1.0, prior_weight: >= 0 default 0}
  glove              mapping passed to the core VerifierConfig (e.g. epsilon, delta,
                     p_th, outcome_modes); keys are checked against it
  methods            list of method names run by default (default: all)
  paper              optional reference numbers {method: {phase: "16/20"}} for the table

Output per method and phase: successes/episodes, task steps, probe steps, alerts, budget
exhaustion and the deadlock flag; a table (or JSON with --json), and
<out>/frozenlake_<name>.json plus a PNG of success per phase per method
(frozenlake_<name>_llm.* with --policy llm).

JSON shape:

  {"benchmark": "frozenlake", "policy": "greedy" | "llm",
   "scenario": {name, file, description, map, phase_maps: {phase: rows}, is_slippery,
                success_rate, seed, max_episode_steps, budget: {total, probe_cap},
                agent: {...}, glove: {...}},
   "phases": ["source", <drift phase names>...],
   "methods": {<method>: {
       "phases": [{phase, episodes, successes, success_rate, task_steps, probe_steps,
                   probes, alerts, decisions, budget_exhausted_episodes,
                   reopened_tiles: [[row, col]], negative_entries: [[state, action]],
                   entry_retries_task, entry_retries_probe,
                   deadlock: true | false | null (no tile re-opened in this phase),
                   stale_kept: true | false | null, first_contact_falls,
                   unmet_hole_falls}],
       "drift_successes", "drift_episodes",
       "budget_used": {task, probe, left}, "rule_stats": {...},
       "llm": {calls, fallbacks} (policy llm only)}},
   "paper": {<method>: {<phase>: "k/n"}}}
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from glove_ros.benchmarks._frozenlake_agent import ACTION_NAMES, GOAL, HOLE, ICE, MemoryAgent, move
from glove_ros.benchmarks._frozenlake_report import format_table, write_plot
from glove_ros.benchmarks._frozenlake_runner import Runner
from glove_ros.benchmarks._frozenlake_scenario import Scenario, load_scenario
from glove_ros.core.verify.memory_rules import make_rule, rule_names
from glove_ros.core.verify.retest import is_rule_name

DEFAULT_OUT = Path("bench/results")


# --------------------------------------------------------------------------- benchmark


def run_benchmark(scenario: Scenario, methods: Sequence[str], policy: str = "greedy",
                  scenario_file: str = "", llm: Any = None, threads: int = 0,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every method on the scenario; returns the JSON-ready result document.

    ``llm`` (a glove_ros.core.llm.runtime JsonLlm) is used by ``policy="llm"``; by default the
    default GGUF is loaded with ``threads`` llama.cpp threads (0: half the cores).
    ``progress`` gets one line per finished method."""
    if policy not in ("greedy", "llm"):
        raise ValueError(f"unknown policy {policy!r}; choose greedy or llm")
    for name in methods:
        if not is_rule_name(name):
            raise ValueError(f"unknown method {name!r}; choose from {', '.join(rule_names())} "
                             "(a baseline may add +retest)")
    report: dict[str, Any] = {
        "benchmark": "frozenlake",
        "scenario": {
            "name": scenario.name,
            "file": scenario_file,
            "description": scenario.description,
            "map": list(scenario.map),
            "phase_maps": {n: list(m) for n, m in zip(
                ["source", *[p.name for p in scenario.phases]], scenario.maps(), strict=True)},
            "is_slippery": scenario.is_slippery,
            "success_rate": scenario.success_rate if scenario.is_slippery else 1.0,
            "seed": scenario.seed,
            "max_episode_steps": scenario.max_episode_steps,
            "budget": {"total": scenario.budget_total, "probe_cap": scenario.probe_cap},
            "agent": {"gamma": scenario.agent.gamma,
                      "unknown_trust": scenario.agent.unknown_trust,
                      "hole_penalty": scenario.agent.hole_penalty,
                      "prior_weight": scenario.agent.prior_weight},
            "glove": dict(scenario.glove),
        },
        "policy": policy,
        "phases": ["source", *[p.name for p in scenario.phases]],
        "methods": {},
        "paper": scenario.paper,
    }
    llm_policy = _make_policy(policy, llm, threads)
    t0 = time.monotonic()
    for i, name in enumerate(methods, 1):
        rule = make_rule(name, scenario.glove, is_negative=lambda o, r: o[1] == HOLE)
        calls0 = llm_policy.calls if llm_policy else 0
        fallbacks0 = llm_policy.fallbacks if llm_policy else 0
        try:
            runner = Runner(scenario, rule, llm_policy)
            phases = runner.run()
            rule_stats = rule.stats()
        finally:
            rule.close()
        budget = runner.budget
        drift = phases[1:]
        report["methods"][name] = {
            "phases": [p.to_json() for p in phases],
            "drift_successes": sum(p.successes for p in drift),
            "drift_episodes": sum(p.episodes for p in drift),
            "budget_used": {"task": budget.task_used if budget else 0,
                            "probe": budget.probe_used if budget else 0,
                            "left": budget.left if budget else scenario.budget_total},
            "rule_stats": rule_stats,
        }
        if llm_policy is not None:
            report["methods"][name]["llm"] = {
                "calls": llm_policy.calls - calls0,
                "fallbacks": llm_policy.fallbacks - fallbacks0,
            }
        if progress is not None:
            done = report["methods"][name]
            progress(f"{name}: {done['drift_successes']}/{done['drift_episodes']} drift "
                     f"successes ({i}/{len(methods)} methods, {time.monotonic() - t0:.0f} s)")
    return report


class LlmPolicy:
    """The agent's action choice through the local LLM (glove_ros.core.llm.runtime).

    The prompt gives the position, the goal and, for each of the four moves, what memory
    says it does and the memory planner's estimate; the reply is forced by a JSON schema to
    ``{"move": one of left/down/right/up}``. Every move is offered, remembered holes
    included: whether the model avoids them is part of what is measured. A failed reply
    (invalid JSON, timeout) falls back to the greedy planner's move and is counted.
    """

    def __init__(self, llm: Any) -> None:
        from glove_ros.core.llm.runtime import choice_schema

        self.llm = llm
        self.schema = choice_schema(list(ACTION_NAMES), key="move")
        self.calls = 0
        self.fallbacks = 0

    def prompt(self, agent: MemoryAgent, state: int, beliefs: dict) -> list[dict[str, str]]:
        """The chat messages for one decision."""
        holes = agent.hole_tiles(beliefs)
        q = agent.q_values(beliefs)[state]
        r, c = divmod(state, agent.ncol)
        goals = ", ".join(f"row {g // agent.ncol} col {g % agent.ncol}"
                          for g in sorted(agent.goals))
        lines = []
        for a, name in enumerate(ACTION_NAMES):
            dist = beliefs[(state, a)]
            if dist:
                parts = []
                for (nxt, kind), p in sorted(dist.items(), key=lambda kv: -kv[1]):
                    where = f"row {nxt // agent.ncol} col {nxt % agent.ncol}"
                    what = {GOAL: "reached the goal at", HOLE: "fell into a hole at",
                            ICE: "moved to"}[kind]
                    parts.append(f"{what} {where} ({p:.0%})")
                seen = "memory: " + "; ".join(parts)
            else:
                nxt = move(state, a, agent.nrow, agent.ncol)
                seen = (f"never tried; it should lead to row {nxt // agent.ncol} "
                        f"col {nxt % agent.ncol}")
                if nxt in holes:
                    seen += ", where memory has a hole"
            lines.append(f"- {name}: {seen}; planner estimate {q[a]:+.2f}")
        return [
            {"role": "system", "content": (
                f"You move an agent on a frozen lake, a grid of {agent.nrow} rows and "
                f"{agent.ncol} columns. Reach the goal. Stepping into a hole ends the "
                "episode as a failure. Answer with the next move as JSON.")},
            {"role": "user", "content": (
                f"You are at row {r} col {c}. The goal is at {goals}.\n"
                + "\n".join(lines) + "\nWhich move?")},
        ]

    def choose(self, runner: Runner, state: int, beliefs: dict,
               tried: dict[tuple[int, int], int]) -> int:
        """Ask the LLM for the move; the greedy planner's move if the reply is unusable."""
        self.calls += 1
        result = self.llm.complete_json(self.prompt(runner.agent, state, beliefs),
                                        self.schema, max_tokens=16)
        if result.ok:
            return ACTION_NAMES.index(result.data["move"])
        self.fallbacks += 1
        return runner.agent.choose(state, beliefs, tried)


def _make_policy(policy: str, llm: Any = None, threads: int = 0) -> LlmPolicy | None:
    if policy == "greedy":
        return None
    if policy == "llm":
        if llm is None:
            if importlib.util.find_spec("glove_ros.core.llm.runtime") is None:
                raise ValueError("--policy llm needs glove_ros/core/llm/runtime.py, which this "
                                 "checkout does not have; use --policy greedy")
            from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig

            llm = LlamaBackend(LlmConfig(n_ctx=1024, max_tokens=16, temperature=0.0,
                                         n_threads=int(threads)))
        return LlmPolicy(llm)
    raise ValueError(f"unknown policy {policy!r}; choose greedy or llm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options on ``parser``."""
    parser.add_argument("--scenario", required=True, metavar="FILE",
                        help="scenario YAML (see bench/scenarios/frozenlake_*.yaml)")
    parser.add_argument("--policy", choices=("greedy", "llm"), default="greedy",
                        help="how the agent picks actions (default: greedy memory planner)")
    parser.add_argument("--methods", nargs="+", metavar="NAME",
                        help="memory rules to compare (space or comma separated; default: "
                        "the scenario's list, else all): " + ", ".join(rule_names())
                        + "; any baseline with +retest (GLOVE's stale-negative re-test, e.g. "
                        "RecentK+retest)")
    parser.add_argument("--threads", type=int, default=0, metavar="N",
                        help="llama.cpp threads for --policy llm (default: 0, half the cores)")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help="where frozenlake_<name>[_llm].json and .png go "
                        "(default: %(default)s)")


def _parse_methods(raw: Sequence[str] | None, scenario: Scenario) -> list[str]:
    if not raw:
        return list(scenario.methods) or rule_names()
    names = [n.strip() for item in raw for n in item.split(",") if n.strip()]
    for n in names:
        if not is_rule_name(n):
            raise ValueError(f"unknown method {n!r}; choose from {', '.join(rule_names())} "
                             "(a baseline may add +retest)")
    return list(dict.fromkeys(names))


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; prints the table (or JSON) and writes JSON + PNG under --out."""
    scenario = load_scenario(args.scenario)
    methods = _parse_methods(args.methods, scenario)
    report = run_benchmark(scenario, methods, args.policy, str(args.scenario),
                           threads=args.threads,
                           progress=lambda line: print(f"[frozenlake] {line}", file=sys.stderr,
                                                       flush=True))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"frozenlake_{scenario.name}" + ("_llm" if args.policy == "llm" else "")
    json_path = out / f"{stem}.json"
    png_path = out / f"{stem}.png"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    write_plot(report, png_path)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report))
        print(f"wrote {json_path} and {png_path}", file=sys.stderr)
    return 0
