"""FrozenLake drift benchmark: the world (gymnasium FrozenLake-v1, outcome signatures, grid
moves) and the memory-driven agent every method drives.

:class:`MemoryAgent` plans on a memory rule's beliefs (value iteration, route searches,
the remembered falls that block a shorter route); it is separate from the run loop that
charges the budget and from the scenario loader.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from glove_ros.benchmarks._frozenlake_scenario import AgentConfig, Scenario
from glove_ros.core.verify.memory_rules import MemoryRule

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
ACTION_NAMES = ("left", "down", "right", "up")
_MOVES = {LEFT: (0, -1), DOWN: (1, 0), RIGHT: (0, 1), UP: (-1, 0)}
GOAL, HOLE, ICE = "goal", "hole", "ice"

TOL = 1e-9
_GOAL_NODE = -1  # the route search's one node for every goal outcome


# --------------------------------------------------------------------------- world


def make_env(desc: Sequence[str], scenario: Scenario) -> Any:
    """gymnasium's FrozenLake-v1 on ``desc`` (imported lazily: an optional dependency)."""
    import gymnasium as gym

    kwargs: dict[str, Any] = {"desc": list(desc), "is_slippery": scenario.is_slippery,
                              "max_episode_steps": scenario.max_episode_steps}
    if scenario.is_slippery:
        kwargs["success_rate"] = scenario.success_rate
    return gym.make("FrozenLake-v1", **kwargs)


def true_model(env: Any) -> dict[tuple[int, int], dict[tuple[int, str], float]]:
    """The true outcome distribution of every (state, action) of a FrozenLake env."""
    table = env.unwrapped.P
    out: dict[tuple[int, int], dict[tuple[int, str], float]] = {}
    for s, actions in table.items():
        for a, branches in actions.items():
            dist: dict[tuple[int, str], float] = {}
            for p, nxt, reward, term in branches:
                if p > 0:
                    o = outcome_of(nxt, reward, term)
                    dist[o] = dist.get(o, 0.0) + p
            out[(int(s), int(a))] = dist
    return out


def outcome_of(next_state: int, reward: float, terminated: bool) -> tuple[int, str]:
    """The outcome signature the memories store: (next state, goal | hole | ice)."""
    if terminated:
        return (int(next_state), GOAL if reward > 0 else HOLE)
    return (int(next_state), ICE)


def move(state: int, action: int, nrow: int, ncol: int) -> int:
    """The intended (non-slipping) successor of ``state`` under ``action``."""
    r, c = divmod(state, ncol)
    dr, dc = _MOVES[action]
    r = min(max(r + dr, 0), nrow - 1)
    c = min(max(c + dc, 0), ncol - 1)
    return r * ncol + c


# --------------------------------------------------------------------------- agent


class MemoryAgent:
    """Plans on a memory rule's beliefs plus task knowledge: the grid and the goal tiles.

    Memory is the only source of what an action does. A pair the memory knows nothing about
    is planned with the free-space assumption: it is believed to make its intended move,
    into a hole if memory holds that its target tile is a hole (a remembered fall into a tile
    generalises to every way into it), and it is worth ``unknown_trust`` times that. The
    agent is stuck when no believed route reaches a goal; it then wanders on the moves it
    believes least likely to end in a hole.
    """

    def __init__(self, nrow: int, ncol: int, goals: Sequence[int], config: AgentConfig) -> None:
        self.nrow, self.ncol = nrow, ncol
        self.n_states = nrow * ncol
        self.goals = frozenset(goals)
        self.cfg = config

    def beliefs(self, rule: MemoryRule) -> dict[tuple[int, int], dict[Hashable, float] | None]:
        """The rule's believed outcome distribution of every (state, action).

        With ``prior_weight`` w > 0 a belief resting on n samples is blended with the
        intended move, (n * memory + w * intended) / (n + w): a pair seen once is not taken
        as certain (slippery worlds). The intended move is left out when memory holds a hole
        at its target (what the agent planned never happens there)."""
        out = {}
        w = self.cfg.prior_weight
        for s in range(self.n_states):
            for a in range(4):
                dist = rule.distribution(s, a)
                if dist and w > 0:
                    n = rule.support(s, a)
                    nxt = move(s, a, self.nrow, self.ncol)
                    kind = GOAL if nxt in self.goals else ICE
                    if (nxt, HOLE) not in dist:
                        mixed = {o: p * n / (n + w) for o, p in dist.items()}
                        mixed[(nxt, kind)] = mixed.get((nxt, kind), 0.0) + w / (n + w)
                        dist = mixed
                out[(s, a)] = dist
        return out

    @staticmethod
    def hole_tiles(beliefs: dict) -> set[int]:
        """Tiles memory believes are holes: some pair most likely falls into them."""
        out = set()
        for dist in beliefs.values():
            if dist:
                for (nxt, kind), p in dist.items():
                    if kind == HOLE and p >= 0.5:
                        out.add(nxt)
        return out

    def model(self, state: int, action: int, beliefs: dict,
              holes: set[int]) -> tuple[dict[Hashable, float], bool]:
        """Believed outcome distribution of a pair, and whether it is a free-space guess."""
        dist = beliefs[(state, action)]
        if dist:
            return dist, False
        nxt = move(state, action, self.nrow, self.ncol)
        kind = HOLE if nxt in holes else GOAL if nxt in self.goals else ICE
        return {(nxt, kind): 1.0}, True

    def q_values(self, beliefs: dict) -> np.ndarray:
        """Value iteration over the believed model (goal +1, hole -hole_penalty)."""
        n = self.n_states
        holes = self.hole_tiles(beliefs)
        g = self.cfg.gamma
        reward = np.zeros(n * 4)  # immediate value of goal / hole outcomes
        trust = np.ones(n * 4)
        rows: list[int] = []
        cols: list[int] = []
        probs: list[float] = []
        for s in range(n):
            for a in range(4):
                dist, guessed = self.model(s, a, beliefs, holes)
                i = s * 4 + a
                if guessed:
                    trust[i] = self.cfg.unknown_trust
                for (nxt, kind), p in dist.items():
                    if kind == GOAL:
                        reward[i] += p
                    elif kind == HOLE:
                        reward[i] -= p * self.cfg.hole_penalty
                    else:
                        rows.append(i)
                        cols.append(int(nxt))
                        probs.append(p)
        trans = np.zeros((n * 4, n))
        np.add.at(trans, (np.array(rows, dtype=int), np.array(cols, dtype=int)),
                  np.array(probs, dtype=float))
        v = np.zeros(n)
        q = reward * trust
        for _ in range(1000):
            q = (reward + g * (trans @ v)) * trust
            new_v = q.reshape(n, 4).max(axis=1)
            if np.max(np.abs(new_v - v)) < 1e-10:
                v = new_v
                break
            v = new_v
        return q.reshape(n, 4)

    def stuck(self, state: int, beliefs: dict) -> bool:
        """True when no believed route (memory, or free-space guesses) reaches a goal."""
        holes = self.hole_tiles(beliefs)
        seen = {state}
        queue = deque([state])
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist, _ = self.model(s, a, beliefs, holes)
                for (nxt, kind), p in dist.items():
                    if p <= 0:
                        continue
                    if kind == GOAL:
                        return False
                    if kind == ICE and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
        return True

    def reachable(self, state: int, beliefs: dict) -> set[int]:
        """States the agent believes it can reach from ``state`` (free-space guesses too)."""
        holes = self.hole_tiles(beliefs)
        seen = {state}
        queue = deque([state])
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist, _ = self.model(s, a, beliefs, holes)
                for (nxt, kind), p in dist.items():
                    if p > 0 and kind == ICE and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
        return seen

    def _route_length(self, state: int, beliefs: dict, holes: set[int], optimistic: bool,
                      kept: frozenset[int] = frozenset(), guess_cost: float = 0.0
                      ) -> tuple[float, list[tuple[int, int]]]:
        """Cheapest way to a goal over believed ice transitions, and the pairs used; a pair
        believed more likely than not to end in a hole is no move at all.

        Every move costs 1, a free-space guess ``1 + guess_cost`` (0: the fewest moves).
        ``optimistic``: such a pair (remembered, or guessed into a remembered hole tile) is
        planned as its intended move instead (a remembered one as a known move: the route
        as it would be were that memory wrong), unless it leads into a tile of ``kept``
        (holes memory was asked about and stands by)."""
        goal = _GOAL_NODE
        prev: dict[int, tuple[int, int]] = {}
        best = {state: 0.0}
        heap = [(0.0, 0, state)]  # (cost, push order: ties go first-found, as in a BFS)
        pushed = 0
        while heap:
            d, _, s = heapq.heappop(heap)
            if s == goal:
                path = [prev[goal]]
                while path[-1][0] != state:
                    path.append(prev[path[-1][0]])
                return d, path[::-1]
            if d > best[s]:
                continue
            for a, cost, nodes in self._moves(s, beliefs, holes, optimistic, kept, guess_cost):
                step = d + cost
                for node in nodes:
                    if step >= best.get(node, math.inf):
                        continue
                    best[node] = step
                    prev[node] = (s, a)
                    pushed += 1
                    heapq.heappush(heap, (step, pushed, node))
        return math.inf, []

    def _moves(self, s: int, beliefs: dict, holes: set[int], optimistic: bool,
               kept: frozenset[int], guess_cost: float
               ) -> Iterator[tuple[int, float, list[int]]]:
        """The route search's moves from ``s``: (action, cost, nodes it may reach), a goal
        outcome as ``_GOAL_NODE`` (see :meth:`_route_length`)."""
        for a in range(4):
            dist, guessed = self.model(s, a, beliefs, holes)
            nxt = move(s, a, self.nrow, self.ncol)
            if self.hole_risk(dist) >= 0.5:  # the agent never takes such a move
                if not optimistic or nxt in kept:
                    continue
                dist = {(nxt, GOAL if nxt in self.goals else ICE): 1.0}
            nodes = [_GOAL_NODE if kind == GOAL else nxt for (nxt, kind), p in dist.items()
                     if p > 0 and kind in (GOAL, ICE)]
            if nodes:
                yield a, 1.0 + (guess_cost if guessed else 0.0), nodes

    def _cheapest_route_pairs(self, state: int, beliefs: dict, holes: set[int],
                              kept: frozenset[int], guess_cost: float) -> set[tuple[int, int]]:
        """Every pair on some cheapest optimistic route from ``state`` to a goal (all the
        routes that tie, not only the first found; empty when there is none)."""
        edges: list[tuple[int, int, float, list[int]]] = []
        frm = {state: 0.0}
        heap = [(0.0, state)]
        while heap:
            d, s = heapq.heappop(heap)
            if d > frm[s] or s == _GOAL_NODE:
                continue
            for a, cost, nodes in self._moves(s, beliefs, holes, True, kept, guess_cost):
                edges.append((s, a, cost, nodes))
                for node in nodes:
                    if d + cost < frm.get(node, math.inf):
                        frm[node] = d + cost
                        heapq.heappush(heap, (d + cost, node))
        total = frm.get(_GOAL_NODE, math.inf)
        if not math.isfinite(total):
            return set()
        to_goal = {_GOAL_NODE: 0.0}  # cheapest cost on to a goal, over the same moves
        changed = True
        while changed:  # Bellman-Ford over at most n_states nodes
            changed = False
            for s, _a, cost, nodes in edges:
                via = min(cost + to_goal.get(n, math.inf) for n in nodes)
                if via < to_goal.get(s, math.inf) - TOL:
                    to_goal[s] = via
                    changed = True
        return {(s, a) for s, a, cost, nodes in edges
                if any(abs(frm[s] + cost + to_goal.get(n, math.inf) - total) <= TOL
                       for n in nodes)}

    def blocking_pairs(self, state: int, beliefs: dict,
                       kept: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        """Remembered failures that stand between ``state`` and a shorter route.

        Empty unless ignoring what memory says ends in a hole (but the ``kept`` tiles)
        would shorten the way to a goal (the agent detours, or is stuck); then the
        remembered pairs whose failure blocks that shorter route: the pair itself, and the
        pairs that remember falling into the same tile.

        Routes are compared as the planner values them: a move memory knows nothing about is
        worth ``unknown_trust`` of a known one, so it costs ln(unknown_trust) / ln(gamma)
        moves more; a remembered failure is planned as a known move (the route were that
        memory wrong). A route through unexplored tiles is a guess: a remembered failure
        that alone stands in the way of a known route is worth asking about before the agent
        explores round it. When memory leaves no route at all, the remembered failures on
        every cheapest route are named (any of them is as good a way on)."""
        holes = self.hole_tiles(beliefs)
        guess = self._guess_cost()
        believed, _ = self._route_length(state, beliefs, holes, False, guess_cost=guess)
        free, path = self._route_length(state, beliefs, holes, True, kept, guess)
        if not free < believed:
            return []
        if not math.isfinite(believed):
            # memory leaves no route at all: every cheapest route is as good a way on, so
            # the remembered falls on all of them are named, not those of the first found
            path = sorted(self._cheapest_route_pairs(state, beliefs, holes, kept, guess))
        out: list[tuple[int, int]] = []
        for s, a in path:
            dist, guessed = self.model(s, a, beliefs, holes)
            if self.hole_risk(dist) < 0.5:
                continue
            if not guessed:
                out.append((s, a))
            # a remembered fall into a tile blocks every way into it
            tile = move(s, a, self.nrow, self.ncol)
            out += [pair for pair, d in beliefs.items() if d and any(
                nxt == tile and kind == HOLE and p >= 0.5 for (nxt, kind), p in d.items())]
        return sorted(set(out))

    def _guess_cost(self) -> float:
        """Extra moves a free-space guess is worth: ln(unknown_trust) / ln(gamma)."""
        return math.log(self.cfg.unknown_trust) / math.log(self.cfg.gamma)

    def route_known(self, state: int, beliefs: dict) -> bool:
        """Whether memory leaves a route to a goal from ``state`` at all (over moves not
        believed more likely than not to end in a hole, free-space guesses included)."""
        holes = self.hole_tiles(beliefs)
        cost, _ = self._route_length(state, beliefs, holes, False,
                                     guess_cost=self._guess_cost())
        return math.isfinite(cost)

    @staticmethod
    def hole_risk(dist: dict[Hashable, float] | None) -> float:
        """Believed probability that a pair ends in a hole (0 for unknown pairs)."""
        if not dist:
            return 0.0
        return sum(p for (_, kind), p in dist.items() if kind == HOLE)

    def choose(self, state: int, beliefs: dict, tried: dict[tuple[int, int], int]) -> int:
        """The agent's action: best believed value, or a safe wander when stuck."""
        if self.stuck(state, beliefs):
            holes = self.hole_tiles(beliefs)
            risks = [self.hole_risk(self.model(state, a, beliefs, holes)[0]) for a in range(4)]
            best = min(risks)
            options = [a for a in range(4) if risks[a] <= best + TOL]
            return min(options, key=lambda a: (tried.get((state, a), 0), a))
        q = self.q_values(beliefs)[state]
        best = q.max()
        return int(min(a for a in range(4) if q[a] >= best - TOL))

    def path_to(self, start: int, target: int, beliefs: dict) -> list[int] | None:
        """Shortest action sequence from ``start`` to ``target`` over remembered moves
        (most likely outcome of each pair), or None when memory knows no such route."""
        if start == target:
            return []
        prev: dict[int, tuple[int, int]] = {}
        queue = deque([start])
        seen = {start}
        while queue:
            s = queue.popleft()
            for a in range(4):
                dist = beliefs[(s, a)]
                if not dist:
                    continue
                (nxt, kind), _ = max(dist.items(), key=lambda kv: kv[1])
                if kind != ICE or nxt in seen:
                    continue
                seen.add(nxt)
                prev[nxt] = (s, a)
                if nxt == target:
                    actions = []
                    cur = nxt
                    while cur != start:
                        ps, pa = prev[cur]
                        actions.append(pa)
                        cur = ps
                    return actions[::-1]
                queue.append(nxt)
        return None
