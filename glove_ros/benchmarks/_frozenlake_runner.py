"""FrozenLake drift benchmark: one method's run through the scenario's phases.

:class:`Runner` runs episodes and probes on the env, charges every step to the drift
phases' :class:`Budget` and measures each phase (:class:`PhaseResult`: successes, steps,
alerts, the self-confirming deadlock). Separate from the agent's planning and from the
result document, so the suite can run it on generated worlds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from glove_ros.benchmarks._frozenlake_agent import (
    MemoryAgent,
    make_env,
    move,
    outcome_of,
    true_model,
)
from glove_ros.benchmarks._frozenlake_scenario import Scenario
from glove_ros.core.verify.memory_rules import MemoryRule, ProbeTarget


@dataclass
class Budget:
    """The drift phases' interaction budget: task and probe steps share ``total``."""

    total: int
    probe_cap: int
    task_used: int = 0
    probe_used: int = 0

    @property
    def left(self) -> int:
        """Steps left for anything."""
        return self.total - self.task_used - self.probe_used

    def can_probe(self) -> bool:
        """One more probe step fits both the total and the probe cap."""
        return self.left > 0 and self.probe_used < self.probe_cap


@dataclass
class PhaseResult:
    """What one method did in one phase."""

    phase: str
    episodes: int
    successes: int = 0
    task_steps: int = 0
    probe_steps: int = 0
    probes: int = 0
    alerts: int = 0
    decisions: int = 0
    budget_exhausted_episodes: int = 0
    reopened_tiles: list[list[int]] = field(default_factory=list)
    negative_entries: list[list[int]] = field(default_factory=list)
    entry_retries_task: int = 0
    entry_retries_probe: int = 0
    deadlock: bool | None = None
    stale_kept: bool | None = None
    #: episode starts at which the re-opened tile's stale negative memory made the believed
    #: route from the start longer than the same memory with those entries corrected
    costly_episodes: int = 0
    #: the earlier, end-of-phase reading of a deadlock (kept, and the believed route at the
    #: end of the phase longer than the world's shortest for any reason), for comparison
    deadlock_at_end: bool | None = None
    #: failed episodes that ended in the first fall into a tile that became a hole in this
    #: phase: what no method that learns from experience can avoid (the oracle is told)
    first_contact_falls: int = 0
    #: failed episodes that ended in the first fall into a hole that was already one before
    #: this phase but that the agent had never fallen into since it last changed (a hole
    #: met on a new route): no memory can hold it either
    unmet_hole_falls: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (see the README's JSON shape)."""
        return {
            "phase": self.phase,
            "episodes": self.episodes,
            "successes": self.successes,
            "success_rate": self.successes / self.episodes if self.episodes else 0.0,
            "task_steps": self.task_steps,
            "probe_steps": self.probe_steps,
            "probes": self.probes,
            "alerts": self.alerts,
            "decisions": self.decisions,
            "budget_exhausted_episodes": self.budget_exhausted_episodes,
            "reopened_tiles": self.reopened_tiles,
            "negative_entries": self.negative_entries,
            "entry_retries_task": self.entry_retries_task,
            "entry_retries_probe": self.entry_retries_probe,
            "deadlock": self.deadlock,
            "stale_kept": self.stale_kept,
            "costly_episodes": self.costly_episodes,
            "deadlock_at_end": self.deadlock_at_end,
            "first_contact_falls": self.first_contact_falls,
            "unmet_hole_falls": self.unmet_hole_falls,
        }


class Runner:
    """Runs one method (one memory rule) through the scenario's phases."""

    def __init__(self, scenario: Scenario, rule: MemoryRule, policy: Any = None) -> None:
        self.sc = scenario
        self.rule = rule
        goals = [r * scenario.ncol + c for r, row in enumerate(scenario.map)
                 for c, ch in enumerate(row) if ch == "G"]
        self.agent = MemoryAgent(scenario.nrow, scenario.ncol, goals, scenario.agent)
        self.policy = policy
        self.step = 0  # global interaction step (task and probe), all phases
        self.budget: Budget | None = None
        self._track: set[tuple[int, int]] = set()
        self._result: PhaseResult | None = None
        self._new_holes: set[int] = set()  # tiles that became holes in this phase
        self._met: set[int] = set()  # holes fallen into since they last changed kind

    # ---- probing
    def _run_probes(self, targets: Sequence[ProbeTarget], probe_env: Any) -> None:
        for target in targets:
            outcomes = []
            attempts = 0
            while len(outcomes) < target.count and attempts < 2 * target.count:
                attempts += 1
                got = self._probe_once(target, probe_env)
                if got is None:
                    break
                if got is not False:
                    outcomes.append(got)
            self.rule.apply_probes(target, outcomes)

    def _probe_once(self, target: ProbeTarget, env: Any) -> Any:
        """One probe episode on the probe env: reset, replay to state, take action.

        Returns the outcome, False when the replay went astray (steps still charged), or
        None when no probe can be made (budget or probe cap spent, or no known route)."""
        res = self._result
        assert res is not None
        if self.budget is not None and not self.budget.can_probe():
            return None
        obs, _ = env.reset()
        state = int(obs)
        for _ in range(self.sc.max_episode_steps):
            if self.budget is not None and not self.budget.can_probe():
                return None
            if state == target.state:
                action = int(target.action)
            else:
                path = self.agent.path_to(state, int(target.state), self.agent.beliefs(self.rule))
                if path is None:
                    return None
                action = path[0]
            nxt, reward, term, trunc, _ = env.step(action)
            self._charge_probe()
            if state == target.state:
                res.probes += 1
                if (state, action) in self._track:
                    res.entry_retries_probe += 1
                return outcome_of(nxt, reward, term)
            state = int(nxt)
            if term or trunc:
                return False
        return False

    def _charge_probe(self) -> None:
        assert self._result is not None
        self._result.probe_steps += 1
        self.step += 1
        if self.budget is not None:
            self.budget.probe_used += 1

    # ---- episodes
    def _episode(self, env: Any, probe_env: Any, seed: int | None) -> tuple[bool, bool]:
        """Run one task episode; returns (success, ran out of budget)."""
        res = self._result
        assert res is not None
        if self.budget is not None and self.budget.left <= 0:
            return False, True
        obs, _ = env.reset(seed=seed)
        state = int(obs)
        tried: dict[tuple[int, int], int] = {}
        asked_stuck: set[int] = set()
        asked_blocked: set[tuple[tuple[int, int], ...]] = set()
        for _ in range(self.sc.max_episode_steps):
            if self.budget is not None and self.budget.left <= 0:
                return False, True
            beliefs = self.agent.beliefs(self.rule)
            if state not in asked_stuck and self.agent.stuck(state, beliefs):
                asked_stuck.add(state)
                targets = self.rule.on_stuck(state, self.step,
                                             self.agent.reachable(state, beliefs))
                if targets:
                    self._run_probes(targets, probe_env)
                    beliefs = self.agent.beliefs(self.rule)
                    if self.budget is not None and self.budget.left <= 0:
                        return False, True
            beliefs, exhausted = self._ask_blocked(state, beliefs, probe_env, asked_blocked)
            if exhausted:
                return False, True
            if self.policy is not None:
                action = self.policy.choose(self, state, beliefs, tried)
            else:
                action = self.agent.choose(state, beliefs, tried)
            tried[(state, action)] = tried.get((state, action), 0) + 1
            res.decisions += 1
            if (state, action) in self._track:
                res.entry_retries_task += 1
            nxt, reward, term, trunc, _ = env.step(action)
            res.task_steps += 1
            if self.budget is not None:
                self.budget.task_used += 1
            self.rule.observe(state, action, outcome_of(nxt, reward, term), float(reward),
                              self.step)
            self.step += 1
            targets = self.rule.probe_requests()
            if targets:
                self._run_probes(targets, probe_env)
            if term:
                nxt_i = int(nxt)
                if reward <= 0 and nxt_i not in self._met:  # first fall since it changed
                    self._met.add(nxt_i)
                    if nxt_i in self._new_holes:
                        res.first_contact_falls += 1
                    else:
                        res.unmet_hole_falls += 1
                return reward > 0, False
            if trunc:
                return False, False
            state = int(nxt)
        return False, False

    def _ask_blocked(self, state: int, beliefs: dict, probe_env: Any,
                     asked: set[tuple[tuple[int, int], ...]]) -> tuple[dict, bool]:
        """The detour hook: hand the rule the remembered failures that block a shorter
        route (each set once per episode); where it stands by them, look for the next
        shorter route past them. Returns (beliefs, budget exhausted)."""
        kept: set[int] = set()
        no_route: bool | None = None  # beliefs stay the same until the loop returns
        while True:
            blocking = tuple(self.agent.blocking_pairs(state, beliefs, frozenset(kept)))
            if not blocking or blocking in asked:
                return beliefs, False
            asked.add(blocking)
            if no_route is None:
                no_route = not self.agent.route_known(state, beliefs)
            targets = self.rule.on_blocked(blocking, self.step, no_route=no_route)
            if targets:
                self._run_probes(targets, probe_env)
            now = self.agent.beliefs(self.rule)
            if self.budget is not None and self.budget.left <= 0:
                return now, True
            if targets or any(now[p] != beliefs[p] for p in blocking):
                return now, False
            kept |= {move(s, a, self.sc.nrow, self.sc.ncol) for s, a in blocking}

    def _route_from_start(self, desc: Sequence[str], model: Mapping[tuple[int, int], Any]
                          ) -> float:
        """Fewest possible moves from the start tile to a goal over ``model`` (beliefs or
        the true model; inf when there is no route)."""
        start = next(r * self.sc.ncol + c for r, row in enumerate(desc)
                     for c, ch in enumerate(row) if ch == "S")
        holes = self.agent.hole_tiles(model)
        return self.agent._route_length(start, model, holes, False)[0]

    def _route_longer_than_true(self, desc: Sequence[str],
                                truth: Mapping[tuple[int, int], Any]) -> bool:
        """Whether the route memory believes in from the start tile is longer than the
        world's shortest (both over possible moves; no believed route counts as longer)."""
        beliefs = self.agent.beliefs(self.rule)
        return self._route_from_start(desc, beliefs) > self._route_from_start(desc, truth)

    def _stale_costly(self, desc: Sequence[str], truth: Mapping[tuple[int, int], Any]) -> bool:
        """Whether the tracked stale negatives, if still believed and never re-tried this
        phase, make the believed route from the start tile longer than the same beliefs
        with those pairs corrected (their true outcomes): the memory itself, not other
        errors, is what costs the detour."""
        res = self._result
        assert res is not None
        if not self._track or res.entry_retries_task or res.entry_retries_probe:
            return False
        beliefs = self.agent.beliefs(self.rule)
        if not any(self.agent.hole_risk(beliefs[p]) >= 0.5 for p in self._track):
            return False
        fixed = {**beliefs, **{p: dict(truth[p]) for p in self._track}}
        return self._route_from_start(desc, beliefs) > self._route_from_start(desc, fixed)

    def _deadlock_setup(self, prev: Sequence[str] | None, cur: Sequence[str]) -> None:
        res = self._result
        assert res is not None
        self._track = set()
        if prev is None:
            return
        nrow, ncol = self.sc.nrow, self.sc.ncol
        reopened = [(r, c) for r in range(nrow) for c in range(ncol)
                    if prev[r][c] == "H" and cur[r][c] != "H"]
        res.reopened_tiles = [list(t) for t in reopened]
        if not reopened:
            return
        for r, c in reopened:
            tile = r * ncol + c
            for s in range(nrow * ncol):
                sr, sc_ = divmod(s, ncol)
                if cur[sr][sc_] in "HG" or s == tile:
                    continue
                for a in range(4):
                    if move(s, a, nrow, ncol) != tile:
                        continue
                    if self.agent.hole_risk(self.rule.distribution(s, a)) >= 0.5:
                        self._track.add((s, a))
        res.negative_entries = sorted([s, a] for s, a in self._track)

    def run(self) -> list[PhaseResult]:
        """Source phase then every drift phase; returns one result per phase."""
        maps = self.sc.maps()
        names = ["source", *[p.name for p in self.sc.phases]]
        episodes = [self.sc.source_episodes, *[p.episodes for p in self.sc.phases]]
        results = []
        for i, (name, desc, n_eps) in enumerate(zip(names, maps, episodes, strict=True)):
            learning = i == 0
            if i == 1:
                self.budget = Budget(self.sc.budget_total, self.sc.probe_cap)
            self._result = res = PhaseResult(name, n_eps)
            env = make_env(desc, self.sc)
            probe_env = make_env(desc, self.sc)
            if hasattr(self.rule, "set_world"):  # the oracle knows the true current world
                self.rule.set_world(true_model(env))
            self.rule.begin_phase(name, learning)
            self._deadlock_setup(maps[i - 1] if i else None, desc)
            changed = set() if not i else {
                r * self.sc.ncol + c for r, row in enumerate(desc) for c, ch in enumerate(row)
                if ch != maps[i - 1][r][c]}
            self._new_holes = {t for t in changed
                               if desc[t // self.sc.ncol][t % self.sc.ncol] == "H"}
            self._met -= changed  # a tile that changed kind is unmet again
            alerts0 = self.rule.alerts
            probe_env.reset(seed=self.sc.seed + 7919 * (i + 1))
            truth = true_model(env) if res.reopened_tiles else {}
            try:
                for ep in range(n_eps):
                    if res.reopened_tiles and self._stale_costly(desc, truth):
                        res.costly_episodes += 1
                    seed = self.sc.seed + 1000 * i if ep == 0 else None
                    ok, exhausted = self._episode(env, probe_env, seed)
                    res.successes += int(ok)
                    res.budget_exhausted_episodes += int(exhausted)
            finally:
                env.close()
                probe_env.close()
            res.alerts = self.rule.alerts - alerts0
            if res.reopened_tiles:
                # self-confirming: memory still believes the entry ends in a hole and never
                # tried it again (a rule that re-tested and dropped the belief is not stuck)
                still = [p for p in self._track
                         if self.agent.hole_risk(self.rule.distribution(*p)) >= 0.5]
                kept = bool(still) and (
                    res.entry_retries_task == 0 and res.entry_retries_probe == 0
                )
                # a deadlock: kept although it cost a longer route at the start of an
                # episode of this phase (so the rule had an episode to re-test it in)
                costly = kept and res.costly_episodes > 0
                res.deadlock = costly
                res.stale_kept = kept and not costly
                res.deadlock_at_end = kept and self._route_longer_than_true(desc, truth)
            results.append(res)
        return results
