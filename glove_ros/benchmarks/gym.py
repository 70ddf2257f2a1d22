"""Bring your own environment: any gymnasium env with discrete actions, every memory rule.

``glove-ros bench gym --scenario my_env.yaml`` runs a gymnasium environment through the
same memory rules as the FrozenLake benchmark (core/memory_rules.py: GLOVE, its ablations,
the paper's baselines, Static; no Oracle, the adapter cannot know the truth of your world),
on one generic agent, with a drift schedule of phases, each rebuilding the env with changed
keyword arguments. What the adapter needs from you:

* ``state_key``: ``module:function(obs, env) -> hashable``: which observations are "the same
  state" for memory (default: the observation itself, for Discrete observation spaces;
  MiniGrid: ``glove_ros.benchmarks._gym_minigrid:pose``, the agent's cell and heading);
* ``outcome``: ``module:function(next_obs, reward, terminated, truncated, info, env) ->
  (next_state_key, kind)``: the outcome signature memory stores, ``kind`` one of ``goal``
  (the task succeeded), ``fail`` (a failure: a negative memory, e.g. a hole) or ``ok``
  (default: the state key of the next observation, and terminated with reward > 0 is a
  goal, terminated otherwise a failure; :func:`default_outcome` with the default key).

The generic agent plans by value iteration over what memory believes (goal +1, fail -1,
discount ``gamma``); an action memory knows nothing about is worth ``unknown_value``
(optimism: the agent explores). One agent runs through every phase of a method: the states
it has seen stay known across a drift (what it believes about them is the memory rule's
business: a rule that forgets leaves their actions unknown again), so after a drift it acts
on its memory and meets the change where memory is wrong. Value iteration is vectorised
(numpy over the known states x actions, the same values as the plain loop) and reused while
memory's beliefs do not change. ``actions`` restricts the agent to a subset of the env's
discrete actions (MiniGrid's seven include four that do nothing when navigating); memory
keys them by the env's own action numbers. When every action of its state is believed to
fail or lead nowhere, it calls the rule's ``on_stuck`` (GLOVE re-tests stale negative
memories; PageHinkley resets; PeriodicRefresh refreshes; local rules do nothing). It never
calls ``on_blocked`` (the detour hook of the FrozenLake agent): without a map it cannot tell
that a remembered failure stands in the way of a shorter route (tried: re-testing whenever
an unknown action looked better cost GLOVE 2 of 16 drift-II successes on gym_frozenlake).
A generic env cannot be reset into a given state, so GLOVE-sync gets no replay here: its
probe requests are cancelled and handled asynchronously (by natural visits), as on a
physical robot. The JSON reports each method's decision time per step (``decision_ms``).

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
  actions: [0, 1, 2]          # optional: the env actions the agent may take (default: all)
  agent: {gamma: 0.95, unknown_value: 0.5}
  glove: {}                   # VerifierConfig overrides (defaults: nothing to tune)
  methods: [GLOVE-async, RecentK, Static]

``bench/scenarios/gym_frozenlake.yaml`` is FrozenLake as one instance of it,
``bench/scenarios/gym_minigrid_doors.yaml`` a MiniGrid world whose door a drift closes.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import time
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
    "keyed_outcome",
    "load_scenario",
    "main",
    "parse_actions",
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


def keyed_outcome(state_key: Callable[..., Hashable]) -> Callable[..., tuple[Hashable, str]]:
    """The default outcome with the scenario's own state key for the next observation."""
    if state_key is identity:
        return default_outcome

    def outcome(next_obs: Any, reward: float, terminated: bool, truncated: bool,
                info: Any = None, env: Any = None) -> tuple[Hashable, str]:
        kind = (GOAL if reward > 0 else FAIL) if terminated else OK
        return state_key(next_obs, env), kind

    return outcome


def _hashable(value: Any, where: str) -> Hashable:
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"{where} gave an unhashable {type(value).__name__}: memory needs a hashable "
            "state; set state_key: module:function in the scenario (MiniGrid: "
            "glove_ros.benchmarks._gym_minigrid:pose)") from None
    return value


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


def parse_actions(value: Any, where: str) -> tuple[int, ...] | None:
    """An ``actions`` subset: distinct non-negative ints, at least one (None: all)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{where}: actions must be a non-empty list of action numbers, "
                         f"got {value!r}")
    out = []
    for a in value:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or a < 0:
            raise ValueError(f"{where}: actions must be non-negative integers, got {a!r}")
        out.append(int(a))
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: actions {out} repeat an action")
    return tuple(out)


@dataclass(frozen=True)
class GymScenario:
    """A parsed scenario (see the module docstring)."""

    name: str
    env: str
    kwargs: Mapping[str, Any]
    phases: tuple[tuple[str, int, Mapping[str, Any]], ...]  # (name, episodes, kwargs)
    state_key: Callable[..., Hashable] = identity
    #: None: :func:`keyed_outcome` of ``state_key``
    outcome: Callable[..., tuple[Hashable, str]] | None = None
    max_episode_steps: int = 100
    seed: int = 0
    gamma: float = 0.95
    unknown_value: float = 0.5
    glove: Mapping[str, Any] = field(default_factory=dict)
    methods: tuple[str, ...] = DEFAULT_METHODS
    #: the env actions the agent may take (None: every action of the env's Discrete space)
    actions: tuple[int, ...] | None = None


def load_scenario(path: str | Path) -> GymScenario:
    """Read, check and resolve a scenario file; errors name the key."""
    from glove_ros.paths import resolve_bundled

    p = resolve_bundled(str(path), "bench/scenarios")
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{p}: a scenario must be a mapping")
    known = {"name", "env", "import", "kwargs", "state_key", "outcome", "max_episode_steps",
             "seed", "source", "drift", "agent", "glove", "methods", "description",
             "actions"}
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
        outcome=_resolve(data["outcome"], "outcome") if "outcome" in data else None,
        max_episode_steps=int(data.get("max_episode_steps", 100)),
        seed=int(data.get("seed", 0)),
        gamma=float(agent.get("gamma", 0.95)),
        unknown_value=float(agent.get("unknown_value", 0.5)),
        glove=dict(data.get("glove") or {}),
        methods=methods,
        actions=parse_actions(data.get("actions"), f"{p}"),
    )
    if not 0 < sc.gamma < 1:
        raise ValueError(f"{p}: agent.gamma must be in (0, 1)")
    return sc


class GenericAgent:
    """Value iteration over the believed outcomes of every (state, action) memory knows.

    ``actions``: the env actions it may take (an int n: ``range(n)``). The states it has
    seen (:meth:`add_state`) stay known for its lifetime; what happens in them is asked of
    the memory rule at every decision. The model is kept as numpy arrays over (state,
    action) rows and re-read only where memory's answer changed; value iteration runs
    vectorised, and only when the model changed (else the last values stand: they are a
    function of the model).
    """

    def __init__(self, actions: int | Sequence[int], gamma: float, unknown_value: float,
                 max_iterations: int = 200, tolerance: float = 1e-6) -> None:
        acts = range(actions) if isinstance(actions, (int, np.integer)) else actions
        self.actions: tuple[int, ...] = tuple(int(a) for a in acts)
        if not self.actions:
            raise ValueError("the agent needs at least one action")
        self.gamma = gamma
        self.unknown_value = unknown_value
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self._index: dict[Hashable, int] = {}
        self._order: list[Hashable] = []
        # per row (state i, action k at i * len(actions) + k): the constant part of its value
        # (goal +1, fail -1, gamma x unknown_value per next state not known; unknown_value
        # when memory knows nothing), and its moves to known states (next state, gamma x
        # probability), padded with (0, 0.0) to the widest row
        self._const = np.zeros(0)
        self._next = np.zeros((0, 1), dtype=np.intp)
        self._gprob = np.zeros((0, 1))
        self._seen: list[dict[Any, float] | None] = []  # the belief each row was read from
        self._open: list[bool] = []  # the row leads to a state that was not known then
        self._read_states = 0  # how many states were known when the rows were last read
        self._v: np.ndarray | None = None  # V of the current rows (None: to be solved)

    @property
    def n_actions(self) -> int:
        return len(self.actions)

    @property
    def states(self) -> frozenset[Hashable]:
        """The states the agent has seen."""
        return frozenset(self._order)

    def add_state(self, state: Hashable) -> None:
        """Remember ``state`` as known (it stays known across phases)."""
        if state in self._index:
            return
        self._index[state] = len(self._order)
        self._order.append(state)
        n_a = len(self.actions)
        self._const = np.concatenate([self._const, np.full(n_a, self.unknown_value)])
        self._next = np.concatenate([self._next, np.zeros((n_a, self._next.shape[1]),
                                                          dtype=np.intp)])
        self._gprob = np.concatenate([self._gprob, np.zeros((n_a, self._gprob.shape[1]))])
        self._seen += [None] * n_a
        self._open += [False] * n_a
        self._v = None

    def _read_row(self, r: int, dist: dict[Any, float] | None) -> None:
        """Write row ``r`` from memory's belief ``dist`` (None: unknown)."""
        self._seen[r] = dist
        self._open[r] = False
        if dist is None:
            self._const[r] = self.unknown_value
            self._gprob[r] = 0.0
            self._next[r] = 0
            return
        total = 0.0
        moves: list[tuple[int, float]] = []
        for outcome, p in dist.items():
            if isinstance(outcome, tuple) and len(outcome) == 2:
                nxt, kind = outcome
            else:
                nxt, kind = outcome, OK
            if kind == GOAL:
                total += p
            elif kind == FAIL:
                total -= p
            else:
                j = self._index.get(nxt)
                if j is None:
                    total += p * self.gamma * self.unknown_value
                    self._open[r] = True
                else:
                    moves.append((j, self.gamma * p))
        width = self._next.shape[1]
        if len(moves) > width:
            pad = len(moves) - width
            self._next = np.pad(self._next, ((0, 0), (0, pad)))
            self._gprob = np.pad(self._gprob, ((0, 0), (0, pad)))
        self._const[r] = total
        self._next[r] = 0
        self._gprob[r] = 0.0
        for c, (j, gp) in enumerate(moves):
            self._next[r, c] = j
            self._gprob[r, c] = gp

    def _refresh(self, rule: MemoryRule) -> None:
        """Ask memory about every known (state, action); re-read the rows whose belief
        changed, and those that led to a state not known then once more states are."""
        more_states = len(self._order) != self._read_states
        distribution = rule.distribution
        seen, open_ = self._seen, self._open
        r = -1
        for s in self._order:
            for a in self.actions:
                r += 1
                dist = distribution(s, a) or None
                if dist == seen[r] and not (more_states and open_[r]):
                    continue
                self._read_row(r, None if dist is None else dict(dist))
                self._v = None
        self._read_states = len(self._order)

    def _sweep(self, v: np.ndarray) -> np.ndarray:
        """Q of every row under state values ``v``."""
        return self._const + (self._gprob * v[self._next]).sum(axis=1)

    def _solve(self) -> np.ndarray:
        """V by synchronous value iteration from 0 (until the largest change < tolerance,
        at most ``max_iterations`` sweeps): the plain loop's values, vectorised."""
        if self._v is not None:
            return self._v
        n_states = len(self._order)
        v = np.zeros(n_states)
        for _ in range(self.max_iterations):
            new = self._sweep(v).reshape(n_states, -1).max(axis=1)
            delta = float(np.abs(new - v).max())
            v = new
            if delta < self.tolerance:
                break
        self._v = v
        return v

    def q_values(self, rule: MemoryRule, state: Hashable) -> np.ndarray:
        """Q(state, .) over :attr:`actions` under the rule's beliefs (unknown pairs:
        ``unknown_value``), by value iteration over the known states and ``state`` (a
        state not known is not learnt by asking)."""
        if state not in self._index:
            other = GenericAgent(self.actions, self.gamma, self.unknown_value,
                                 self.max_iterations, self.tolerance)
            for s in [*self._order, state]:
                other.add_state(s)
            return other.q_values(rule, state)
        self._refresh(rule)
        v = self._solve()
        n_a = len(self.actions)
        rows = slice(self._index[state] * n_a, (self._index[state] + 1) * n_a)
        return self._const[rows] + (self._gprob[rows] * v[self._next[rows]]).sum(axis=1)

    def choose(self, rule: MemoryRule, state: Hashable,
               tried: Mapping[tuple[Hashable, int], int]) -> tuple[int, bool]:
        """(action, stuck): the best believed action (ties: the least tried this episode,
        then the lowest number); stuck when none is worth anything."""
        q = self.q_values(rule, state)
        best = float(q.max())
        options = [a for k, a in enumerate(self.actions) if q[k] >= best - 1e-9]
        action = min(options, key=lambda a: (tried.get((state, a), 0), a))
        return action, best <= 0.0


def _env_actions(sc: GymScenario, env: Any, phase: str) -> tuple[int, ...]:
    """The agent's actions in this phase's env: the scenario's subset, checked against the
    env's Discrete action space, or all of them."""
    n = getattr(env.action_space, "n", None)
    if n is None:
        raise ValueError(f"{sc.env}: the adapter needs a Discrete action space, got "
                         f"{env.action_space}")
    if sc.actions is None:
        return tuple(range(int(n)))
    bad = [a for a in sc.actions if a >= int(n)]
    if bad:
        raise ValueError(f"actions {bad} are not actions of {sc.env} in phase {phase} "
                         f"(its actions are 0..{int(n) - 1})")
    return sc.actions


def _timing(ms: Sequence[float]) -> dict[str, float]:
    if not ms:
        return {"mean": 0.0, "median": 0.0, "p95": 0.0, "max": 0.0}
    a = np.asarray(ms)
    return {"mean": round(float(a.mean()), 4), "median": round(float(np.median(a)), 4),
            "p95": round(float(np.percentile(a, 95)), 4), "max": round(float(a.max()), 4)}


def run_method(sc: GymScenario, method: str) -> dict[str, Any]:
    """One method through every phase, on one agent; per-phase successes, steps, alerts
    (``first_alert_step``: the phase's step that raised its first), known states and
    decision time (ms per step: the agent's choice, an ``on_stuck`` call included)."""
    import gymnasium as gym

    rule = make_rule(method, sc.glove, is_negative=lambda o, r: (
        isinstance(o, tuple) and len(o) == 2 and o[1] == FAIL))
    outcome_of = sc.outcome or keyed_outcome(sc.state_key)
    phases = []
    decision_ms: list[float] = []
    agent: GenericAgent | None = None
    step = 0
    try:
        for i, (name, episodes, kwargs) in enumerate(sc.phases):
            env = gym.make(sc.env, max_episode_steps=sc.max_episode_steps, **kwargs)
            try:
                actions = _env_actions(sc, env, name)
                if agent is not None and agent.actions != actions:
                    raise ValueError(f"phase {name}: {sc.env} has other actions than before "
                                     f"({list(actions)} vs {list(agent.actions)})")
            except ValueError:
                env.close()
                raise
            if agent is None:
                agent = GenericAgent(actions, sc.gamma, sc.unknown_value)
            rule.begin_phase(name, learning=i == 0)
            alerts0 = rule.alerts
            res = {"phase": name, "episodes": episodes, "successes": 0, "steps": 0,
                   "stuck_calls": 0, "known_states_at_start": len(agent.states),
                   "first_alert_step": None}
            phase_ms: list[float] = []
            for ep in range(episodes):
                obs, _ = env.reset(seed=sc.seed + 1000 * i + ep)
                state = _hashable(sc.state_key(obs, env), "state_key")
                tried: dict[tuple[Hashable, int], int] = {}
                asked: set[Hashable] = set()
                for _ in range(sc.max_episode_steps):
                    t0 = time.perf_counter()
                    agent.add_state(state)
                    action, stuck = agent.choose(rule, state, tried)
                    if stuck and state not in asked:
                        asked.add(state)
                        res["stuck_calls"] += 1
                        for target in rule.on_stuck(state, step, sorted(agent.states, key=repr)):
                            rule.apply_probes(target, [])  # no replay: async handling
                        action, _ = agent.choose(rule, state, tried)
                    phase_ms.append(1000.0 * (time.perf_counter() - t0))
                    tried[(state, action)] = tried.get((state, action), 0) + 1
                    nxt, reward, term, trunc, info = env.step(action)
                    outcome = outcome_of(nxt, float(reward), bool(term), bool(trunc), info, env)
                    _hashable(outcome, "outcome")
                    rule.observe(state, action, outcome, float(reward), step)
                    for target in rule.probe_requests():
                        rule.apply_probes(target, [])
                    step += 1
                    res["steps"] += 1
                    if res["first_alert_step"] is None and rule.alerts > alerts0:
                        res["first_alert_step"] = res["steps"]  # steps into the phase
                    if term or trunc:
                        res["successes"] += int(term and reward > 0)
                        break
                    state = _hashable(sc.state_key(nxt, env), "state_key")
            env.close()
            res["alerts"] = rule.alerts - alerts0
            res["known_states"] = len(agent.states)
            res["decision_ms_mean"] = _timing(phase_ms)["mean"]
            decision_ms += phase_ms
            phases.append(res)
        stats = rule.stats()
    finally:
        rule.close()
    drift = phases[1:]
    return {"phases": phases,
            "drift_successes": sum(p["successes"] for p in drift),
            "drift_episodes": sum(p["episodes"] for p in drift),
            "known_states": len(agent.states) if agent else 0,
            "decision_ms": _timing(decision_ms),
            "rule_stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))}}


def run_benchmark(sc: GymScenario, methods: Sequence[str] | None = None) -> dict[str, Any]:
    """Every method on the scenario; the JSON document."""
    names = list(methods or sc.methods)
    return {
        "benchmark": "gym",
        "scenario": {"name": sc.name, "env": sc.env, "phases": [
            {"name": n, "episodes": e, "kwargs": dict(k)} for n, e, k in sc.phases],
            "seed": sc.seed, "max_episode_steps": sc.max_episode_steps,
            "actions": list(sc.actions) if sc.actions is not None else None,
            "agent": {"gamma": sc.gamma, "unknown_value": sc.unknown_value},
            "glove": dict(sc.glove)},
        "methods": {m: run_method(sc, m) for m in names},
    }


def format_table(doc: Mapping[str, Any]) -> str:
    """Successes per phase per method, drift alerts, decision time per step."""
    phases = [p["name"] for p in doc["scenario"]["phases"]]
    head = (f"{'method':<24}" + "".join(f"{p:>14}" for p in phases)
            + f"{'drift':>10}{'alerts':>8}{'ms/step':>9}{'states':>8}")
    lines = [f"gym drift benchmark '{doc['scenario']['name']}' ({doc['scenario']['env']})",
             head, "-" * len(head)]
    for m, r in doc["methods"].items():
        cells = "".join(f"{p['successes']}/{p['episodes']:<}".rjust(14) for p in r["phases"])
        alerts = sum(p["alerts"] for p in r["phases"][1:])
        lines.append(f"{m:<24}{cells}{r['drift_successes']:>5}/{r['drift_episodes']:<4}"
                     f"{alerts:>8}{r['decision_ms']['mean']:>9.2f}{r['known_states']:>8}")
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
    parser.add_argument("--actions", nargs="+", type=int, metavar="A",
                        help="the env actions the agent may take, by number (default: the "
                             "file's 'actions', else all; MiniGrid navigation: 0 1 2)")
    parser.add_argument("--out", default="bench/results", help="output folder")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def main(args: argparse.Namespace) -> int:
    """``glove-ros bench gym``."""
    sc = load_scenario(args.scenario)
    if getattr(args, "actions", None):
        sc = dataclasses.replace(sc, actions=parse_actions(args.actions, "--actions"))
    doc = run_benchmark(sc, args.methods)
    return write_results(doc, args.out, f"gym_{sc.name}", write_plot, format_table, args.json)
