"""Bring your own environment: any gymnasium env with discrete actions, every memory rule.

``glove-ros bench gym --scenario my_env.yaml`` runs a gymnasium environment through the
same memory rules as the FrozenLake benchmark (core/memory_rules.py: GLOVE, its ablations,
the paper's baselines, Static; no Oracle, the adapter cannot know the truth of your world),
on one generic agent, with a drift schedule of phases, each rebuilding the env with changed
keyword arguments. What the adapter needs from you:

* ``state_key``: ``module:function(obs, env) -> hashable``: which observations are "the same
  state" for memory (default: the observation itself, for Discrete observation spaces);
* ``outcome``: ``module:function(next_obs, reward, terminated, truncated, info, env) ->
  (next_state_key, kind)``: the outcome signature memory stores, ``kind`` one of ``goal``
  (the task succeeded), ``fail`` (a failure: a negative memory, e.g. a hole) or ``ok``
  (default: :func:`default_outcome`: terminated with reward > 0 is a goal, terminated
  otherwise a failure).

The generic agent plans by value iteration over what memory believes (goal +1, fail -1,
discount ``gamma``); an action memory knows nothing about is worth ``unknown_value``
(optimism: the agent explores). When every action of its state is believed to fail or lead
nowhere, it calls the rule's ``on_stuck`` (GLOVE re-tests stale negative memories;
PageHinkley resets; PeriodicRefresh refreshes; local rules do nothing). It never calls
``on_blocked`` (the detour hook of the FrozenLake agent): without a map it cannot tell that
a remembered failure stands in the way of a shorter route (tried: re-testing whenever an
unknown action looked better cost GLOVE 2 of 16 drift-II successes on
gym_frozenlake). A generic env cannot
be reset into a given state, so GLOVE-sync gets no replay here: its probe requests are
cancelled and handled asynchronously (by natural visits), as on a physical robot.

Scenario YAML (unknown keys are errors)::

  name: my_env
  env: FrozenLake-v1          # a registered gymnasium id
  import: []                  # modules to import first (their import registers your env)
  kwargs: {...}               # gymnasium.make keyword arguments of the source phase
  state_key: module:function  # optional
  outcome: module:function    # optional
  max_episode_steps: 50
  seed: 0
  source: {episodes: 20}
  drift:                      # each phase: kwargs merged over the previous phase's
    - {name: drift_I, episodes: 20, kwargs: {...}}
  agent: {gamma: 0.95, unknown_value: 0.5}
  glove: {}                   # VerifierConfig overrides (defaults: nothing to tune)
  methods: [GLOVE-async, RecentK, Static]

``bench/scenarios/gym_frozenlake.yaml`` is FrozenLake as one instance of it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from glove_ros.benchmarks import write_results
from glove_ros.core.verify.memory_rules import MemoryRule, make_rule, rule_names

__all__ = [
    "GymScenario",
    "GenericAgent",
    "default_outcome",
    "identity",
    "load_scenario",
    "main",
    "run_benchmark",
    "run_method",
]

GOAL, FAIL, OK = "goal", "fail", "ok"
DEFAULT_METHODS = ("GLOVE-async", "GLOVE-sync", "LatestOverwrite", "RecentK", "SlidingWindow",
                   "RecencyWeighted", "PageHinkleyReset", "PeriodicRefresh", "Static")


def identity(obs: Any, env: Any = None) -> Hashable:
    """Default state key: the observation itself (ints for Discrete spaces)."""
    if isinstance(obs, np.ndarray):
        return tuple(obs.ravel().tolist())
    if isinstance(obs, (np.integer,)):
        return int(obs)
    return obs


def default_outcome(next_obs: Any, reward: float, terminated: bool, truncated: bool,
                    info: Any = None, env: Any = None) -> tuple[Hashable, str]:
    """(next state key, goal | fail | ok): terminated with reward > 0 is a goal."""
    kind = (GOAL if reward > 0 else FAIL) if terminated else OK
    return identity(next_obs), kind


def _resolve(spec: str, where: str) -> Callable[..., Any]:
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"{where} must be 'module:function', got {spec!r}")
    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{where}: cannot load {spec!r}: {exc}") from None
    if not callable(fn):
        raise ValueError(f"{where}: {spec!r} is not callable")
    return fn


@dataclass(frozen=True)
class GymScenario:
    """A parsed scenario (see the module docstring)."""

    name: str
    env: str
    kwargs: Mapping[str, Any]
    phases: tuple[tuple[str, int, Mapping[str, Any]], ...]  # (name, episodes, kwargs)
    state_key: Callable[..., Hashable] = identity
    outcome: Callable[..., tuple[Hashable, str]] = default_outcome
    max_episode_steps: int = 100
    seed: int = 0
    gamma: float = 0.95
    unknown_value: float = 0.5
    glove: Mapping[str, Any] = field(default_factory=dict)
    methods: tuple[str, ...] = DEFAULT_METHODS


def load_scenario(path: str | Path) -> GymScenario:
    """Read, check and resolve a scenario file; errors name the key."""
    from glove_ros.paths import resolve_bundled

    p = resolve_bundled(str(path), "bench/scenarios")
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{p}: a scenario must be a mapping")
    known = {"name", "env", "import", "kwargs", "state_key", "outcome", "max_episode_steps",
             "seed", "source", "drift", "agent", "glove", "methods", "description"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{p}: unknown key(s) {', '.join(unknown)}")
    if not isinstance(data.get("env"), str):
        raise ValueError(f"{p}: 'env' (a gymnasium id) is required")
    for mod in data.get("import", []) or []:
        importlib.import_module(mod)
    kwargs = dict(data.get("kwargs") or {})
    phases: list[tuple[str, int, Mapping[str, Any]]] = [
        ("source", int((data.get("source") or {}).get("episodes", 20)), kwargs)]
    for i, ph in enumerate(data.get("drift") or []):
        if not isinstance(ph, dict) or "episodes" not in ph:
            raise ValueError(f"{p}: drift[{i}] needs episodes (and kwargs)")
        kwargs = {**kwargs, **dict(ph.get("kwargs") or {})}
        phases.append((str(ph.get("name", f"drift_{i + 1}")), int(ph["episodes"]), kwargs))
    if len(phases) < 2:
        raise ValueError(f"{p}: at least one drift phase is needed")
    agent = dict(data.get("agent") or {})
    methods = tuple(data.get("methods") or DEFAULT_METHODS)
    for m in methods:
        if m not in rule_names() or m == "Oracle":
            raise ValueError(f"{p}: unknown method {m!r}")
    sc = GymScenario(
        name=str(data.get("name", p.stem)),
        env=data["env"],
        kwargs=phases[0][2],
        phases=tuple(phases),
        state_key=_resolve(data["state_key"], "state_key") if "state_key" in data else identity,
        outcome=_resolve(data["outcome"], "outcome") if "outcome" in data else default_outcome,
        max_episode_steps=int(data.get("max_episode_steps", 100)),
        seed=int(data.get("seed", 0)),
        gamma=float(agent.get("gamma", 0.95)),
        unknown_value=float(agent.get("unknown_value", 0.5)),
        glove=dict(data.get("glove") or {}),
        methods=methods,
    )
    if not 0 < sc.gamma < 1:
        raise ValueError(f"{p}: agent.gamma must be in (0, 1)")
    return sc


class GenericAgent:
    """Value iteration over the believed outcomes of every (state, action) memory knows."""

    def __init__(self, n_actions: int, gamma: float, unknown_value: float) -> None:
        self.n_actions = n_actions
        self.gamma = gamma
        self.unknown_value = unknown_value
        self.states: set[Hashable] = set()

    def q_values(self, rule: MemoryRule, state: Hashable) -> np.ndarray:
        """Q(state, .) under the rule's beliefs (unknown pairs: ``unknown_value``)."""
        states = sorted(self.states | {state}, key=repr)
        beliefs = {(s, a): rule.distribution(s, a) for s in states
                   for a in range(self.n_actions)}
        v = {s: 0.0 for s in states}
        for _ in range(200):
            new = {}
            for s in states:
                new[s] = max(self._q(beliefs[(s, a)], v) for a in range(self.n_actions))
            delta = max(abs(new[s] - v[s]) for s in states)
            v = new
            if delta < 1e-6:
                break
        return np.array([self._q(beliefs[(state, a)], v) for a in range(self.n_actions)])

    def _q(self, dist: Mapping[Any, float] | None, v: Mapping[Hashable, float]) -> float:
        if not dist:
            return self.unknown_value
        total = 0.0
        for outcome, p in dist.items():
            nxt, kind = outcome if isinstance(outcome, tuple) and len(outcome) == 2 else (
                outcome, OK)
            if kind == GOAL:
                total += p
            elif kind == FAIL:
                total -= p
            else:
                total += p * self.gamma * v.get(nxt, self.unknown_value)
        return total

    def choose(self, rule: MemoryRule, state: Hashable,
               tried: Mapping[tuple[Hashable, int], int]) -> tuple[int, bool]:
        """(action, stuck): the best believed action; stuck when none is worth anything."""
        q = self.q_values(rule, state)
        best = float(q.max())
        options = [a for a in range(self.n_actions) if q[a] >= best - 1e-9]
        action = min(options, key=lambda a: (tried.get((state, a), 0), a))
        return action, best <= 0.0


def run_method(sc: GymScenario, method: str) -> dict[str, Any]:
    """One method through every phase; per-phase successes, steps and alerts."""
    import gymnasium as gym

    rule = make_rule(method, sc.glove, is_negative=lambda o, r: (
        isinstance(o, tuple) and len(o) == 2 and o[1] == FAIL))
    phases = []
    step = 0
    try:
        for i, (name, episodes, kwargs) in enumerate(sc.phases):
            env = gym.make(sc.env, max_episode_steps=sc.max_episode_steps, **kwargs)
            agent = GenericAgent(int(env.action_space.n), sc.gamma, sc.unknown_value)
            rule.begin_phase(name, learning=i == 0)
            alerts0 = rule.alerts
            res = {"phase": name, "episodes": episodes, "successes": 0, "steps": 0,
                   "stuck_calls": 0}
            for ep in range(episodes):
                obs, _ = env.reset(seed=sc.seed + 1000 * i + ep)
                state = sc.state_key(obs, env)
                tried: dict[tuple[Hashable, int], int] = {}
                asked: set[Hashable] = set()
                for _ in range(sc.max_episode_steps):
                    agent.states.add(state)
                    action, stuck = agent.choose(rule, state, tried)
                    if stuck and state not in asked:
                        asked.add(state)
                        res["stuck_calls"] += 1
                        for target in rule.on_stuck(state, step, sorted(agent.states, key=repr)):
                            rule.apply_probes(target, [])  # no replay: async handling
                        action, _ = agent.choose(rule, state, tried)
                    tried[(state, action)] = tried.get((state, action), 0) + 1
                    nxt, reward, term, trunc, info = env.step(action)
                    outcome = sc.outcome(nxt, float(reward), bool(term), bool(trunc), info, env)
                    rule.observe(state, action, outcome, float(reward), step)
                    for target in rule.probe_requests():
                        rule.apply_probes(target, [])
                    step += 1
                    res["steps"] += 1
                    if term or trunc:
                        res["successes"] += int(term and reward > 0)
                        break
                    state = sc.state_key(nxt, env)
            env.close()
            res["alerts"] = rule.alerts - alerts0
            phases.append(res)
        stats = rule.stats()
    finally:
        rule.close()
    drift = phases[1:]
    return {"phases": phases,
            "drift_successes": sum(p["successes"] for p in drift),
            "drift_episodes": sum(p["episodes"] for p in drift),
            "rule_stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))}}


def run_benchmark(sc: GymScenario, methods: Sequence[str] | None = None) -> dict[str, Any]:
    """Every method on the scenario; the JSON document."""
    names = list(methods or sc.methods)
    return {
        "benchmark": "gym",
        "scenario": {"name": sc.name, "env": sc.env, "phases": [
            {"name": n, "episodes": e, "kwargs": dict(k)} for n, e, k in sc.phases],
            "seed": sc.seed, "max_episode_steps": sc.max_episode_steps,
            "agent": {"gamma": sc.gamma, "unknown_value": sc.unknown_value},
            "glove": dict(sc.glove)},
        "methods": {m: run_method(sc, m) for m in names},
    }


def format_table(doc: Mapping[str, Any]) -> str:
    """Successes per phase per method."""
    phases = [p["name"] for p in doc["scenario"]["phases"]]
    head = f"{'method':<24}" + "".join(f"{p:>12}" for p in phases) + f"{'drift':>10}{'alerts':>8}"
    lines = [f"gym drift benchmark '{doc['scenario']['name']}' ({doc['scenario']['env']})",
             head, "-" * len(head)]
    for m, r in doc["methods"].items():
        cells = "".join(f"{p['successes']}/{p['episodes']:<}".rjust(12) for p in r["phases"])
        alerts = sum(p["alerts"] for p in r["phases"][1:])
        lines.append(f"{m:<24}{cells}{r['drift_successes']:>5}/{r['drift_episodes']:<4}"
                     f"{alerts:>8}")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """Success rate per phase per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = [p["name"] for p in doc["scenario"]["phases"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    for m, r in doc["methods"].items():
        ax.plot(phases, [p["successes"] / p["episodes"] for p in r["phases"]], marker="o",
                label=m)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title(f"{doc['scenario']['name']} ({doc['scenario']['env']})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``glove-ros bench gym``."""
    parser.description = ("Bring your own gymnasium environment (discrete actions): every "
                          "memory rule on your env and drift schedule, from a YAML file.")
    parser.add_argument("--scenario", required=True, help="scenario YAML (see the module doc)")
    parser.add_argument("--methods", nargs="+", help="methods to run (default: the file's)")
    parser.add_argument("--out", default="bench/results", help="output folder")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def main(args: argparse.Namespace) -> int:
    """``glove-ros bench gym``."""
    sc = load_scenario(args.scenario)
    doc = run_benchmark(sc, args.methods)
    return write_results(doc, args.out, f"gym_{sc.name}", write_plot, format_table, args.json)
