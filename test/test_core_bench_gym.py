"""The bring-your-own-environment adapter (glove_ros/benchmarks/gym.py): the generic agent
keeps what it knows across phases, its vectorised value iteration gives the plain loop's
values, it takes only the actions a scenario allows, and bad input gets a clear error."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from glove_ros.benchmarks import gym as gymb  # noqa: E402
from glove_ros.core.verify.memory_rules import make_rule  # noqa: E402


def _scenario(tmp_path: Path, text: str) -> gymb.GymScenario:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return gymb.load_scenario(f)


def test_an_unchanged_world_after_a_phase_is_walked_on_the_shortest_route(tmp_path):
    """What the agent learnt in the source phase carries into the next phase: in an
    unchanged 8x8 FrozenLake every episode takes the shortest route (14 moves). The old
    agent started each phase knowing no state, valued every next state as unknown
    (optimistic) and re-explored (79 to 93 moves for these 5 episodes)."""
    sc = _scenario(tmp_path, "env: FrozenLake-v1\n"
                             "kwargs: {map_name: 8x8, is_slippery: false}\n"
                             "max_episode_steps: 64\nsource: {episodes: 40}\n"
                             "drift: [{name: unchanged, episodes: 5}]\n")
    for method in ("Static", "LatestOverwrite", "GLOVE-async"):
        src, same = gymb.run_method(sc, method)["phases"]
        assert src["successes"] > 0
        assert same["known_states_at_start"] == src["known_states"] > 14
        assert same["successes"] == 5 and same["steps"] == 5 * 14, method


def _plain_q(rule, states, state, n_actions, gamma, unknown_value):
    """The adapter's value iteration before it was vectorised (a plain loop over dicts)."""
    states = sorted(set(states) | {state}, key=repr)
    beliefs = {(s, a): rule.distribution(s, a) for s in states for a in range(n_actions)}

    def q(dist, v):
        if not dist:
            return unknown_value
        total = 0.0
        for outcome, p in dist.items():
            nxt, kind = outcome if isinstance(outcome, tuple) and len(outcome) == 2 else (
                outcome, "ok")
            if kind == "goal":
                total += p
            elif kind == "fail":
                total -= p
            else:
                total += p * gamma * v.get(nxt, unknown_value)
        return total

    v = {s: 0.0 for s in states}
    for _ in range(200):
        new = {s: max(q(beliefs[(s, a)], v) for a in range(n_actions)) for s in states}
        delta = max(abs(new[s] - v[s]) for s in states)
        v = new
        if delta < 1e-6:
            break
    return np.array([q(beliefs[(state, a)], v) for a in range(n_actions)])


@pytest.mark.parametrize("method", ["RecentK", "LatestOverwrite", "RecencyWeighted",
                                    "PageHinkleyReset", "GLOVE-async"])
def test_vectorised_value_iteration_gives_the_plain_loops_values_and_choices(method):
    """A small random world (stochastic outcomes, goals, failures, moves to states the agent
    does not know yet, pairs memory knows nothing about), learnt in stages while the agent
    learns more states: after every stage, the same Q values and the same choice in every
    state as the plain loop (so the rows the agent keeps between decisions are re-read
    where memory changed, or where a next state became known)."""
    rnd = random.Random(7)
    rule = make_rule(method, is_negative=lambda o, r: isinstance(o, tuple) and o[1] == "fail")
    states = [(x, y) for x in range(5) for y in range(4)]
    far = [("far", i) for i in range(3)]
    agent = gymb.GenericAgent(4, 0.95, 0.5)
    known: list = []
    differ = 0
    try:
        for stage in range(4):
            for step in range(150 * stage, 150 * (stage + 1)):
                s, a = rnd.choice(states), rnd.randrange(4)
                if (sum(s) + a) % 7 == 0:
                    continue  # never tried: unknown
                roll = rnd.random()
                if roll < 0.05:
                    outcome = ((9, 9), "goal")
                elif roll < 0.12:
                    outcome = (s, "fail")
                elif roll < 0.18:
                    outcome = (rnd.choice(far), "ok")  # known to the agent only later
                else:
                    outcome = (rnd.choice(states[:12]), "ok")
                rule.observe(s, a, outcome, 0.0, step)
            if stage % 2 == 0:  # stages 1 and 3 change only what memory believes
                known += states[5 * stage:5 * stage + 10] + ([far[0]] if stage else [])
            for s in known:
                agent.add_state(s)
            for s in [*states, *far, ("new", 0)]:
                plain = _plain_q(rule, known, s, 4, 0.95, 0.5)
                q = agent.q_values(rule, s)
                np.testing.assert_allclose(q, plain, rtol=0, atol=1e-12)
                tried = {(s, 0): 1}
                best = max(range(4), key=lambda a: (plain[a] >= plain.max() - 1e-9,
                                                    -tried.get((s, a), 0), -a))
                assert agent.choose(rule, s, tried)[0] == best
                differ += len(set(np.round(plain, 9))) > 1
            assert agent.states == frozenset(known)  # asking about a state does not learn it
        assert differ >= 20  # the world is not one where every action is worth the same
    finally:
        rule.close()


def test_the_agent_takes_only_the_allowed_actions():
    rule = make_rule("LatestOverwrite")
    agent = gymb.GenericAgent([0, 1, 2], 0.95, 0.5)
    agent.add_state("s")
    # actions 3..6 would look best (memory says they reach the goal): not allowed
    for a in (3, 4, 5, 6):
        rule.observe("s", a, ("g", "goal"), 1.0, 0)
    rule.observe("s", 0, ("s", "ok"), 0.0, 1)
    rule.observe("s", 1, ("s", "ok"), 0.0, 2)
    action, stuck = agent.choose(rule, "s", {})
    assert action == 2 and not stuck  # the unknown allowed action (optimism)
    rule.observe("s", 2, ("s", "fail"), 0.0, 3)
    assert agent.q_values(rule, "s").shape == (3,)
    action, stuck = agent.choose(rule, "s", {("s", 0): 1})
    assert action == 1 and stuck  # nothing allowed is worth anything


def test_scenario_actions_reach_the_env_and_the_json(tmp_path, monkeypatch):
    sc = _scenario(tmp_path, "env: FrozenLake-v1\nkwargs: {is_slippery: false}\n"
                             "max_episode_steps: 8\nsource: {episodes: 3}\n"
                             "drift: [{episodes: 2}]\nactions: [1, 2]\n")
    assert sc.actions == (1, 2)
    taken: list[int] = []
    make = gymb.make_rule

    def spying_rule(*args, **kwargs):
        rule = make(*args, **kwargs)
        observe = rule.observe

        def spy(state, action, *rest):
            taken.append(action)
            return observe(state, action, *rest)

        rule.observe = spy
        return rule

    monkeypatch.setattr(gymb, "make_rule", spying_rule)
    doc = gymb.run_benchmark(sc, ["LatestOverwrite"])
    assert doc["scenario"]["actions"] == [1, 2]
    assert set(taken) == {1, 2}  # down and right only, both tried
    r = doc["methods"]["LatestOverwrite"]
    assert set(r["decision_ms"]) == {"mean", "median", "p95", "max"}
    assert r["decision_ms"]["max"] >= r["decision_ms"]["mean"] > 0


def test_cli_actions_override_the_file(tmp_path, capsys):
    f = tmp_path / "tiny.yaml"
    f.write_text("name: tiny\nenv: FrozenLake-v1\nkwargs: {is_slippery: false}\n"
                 "max_episode_steps: 8\nsource: {episodes: 2}\ndrift: [{episodes: 1}]\n"
                 "methods: [LatestOverwrite]\n")
    from glove_ros.cli.main import build_parser

    args = build_parser().parse_args(["bench", "gym", "--scenario", str(f), "--actions", "1",
                                      "2", "--out", str(tmp_path)])
    assert gymb.main(args) == 0
    doc = json.loads((tmp_path / "gym_tiny.json").read_text())
    assert doc["scenario"]["actions"] == [1, 2]
    assert "ms/step" in capsys.readouterr().out


@pytest.mark.parametrize("actions, match", [
    ("[]", "non-empty"), ("[0, 0]", "repeat"), ("[-1]", "non-negative"),
    ("[left]", "non-negative integers"), ("2", "non-empty list")])
def test_bad_actions_are_clear_errors(tmp_path, actions, match):
    with pytest.raises(ValueError, match=match):
        _scenario(tmp_path, f"env: FrozenLake-v1\ndrift: [{{episodes: 1}}]\n"
                            f"actions: {actions}\n")


def test_actions_the_env_lacks_and_unhashable_states_are_clear_errors(tmp_path):
    sc = _scenario(tmp_path, "env: FrozenLake-v1\nsource: {episodes: 1}\n"
                             "drift: [{name: d1, episodes: 1}]\nactions: [0, 9]\n")
    with pytest.raises(ValueError, match=r"actions \[9\] are not actions of FrozenLake-v1"):
        gymb.run_method(sc, "LatestOverwrite")
    with pytest.raises(ValueError, match="unhashable dict.*state_key"):
        gymb._hashable({"image": 0}, "state_key")
