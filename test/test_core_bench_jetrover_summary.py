"""Summing several `bench jetrover` runs (glove_ros.benchmarks.jetrover_summary).

What must hold: steps per task are summed over tasks (not averaged over runs), false alarms
per 1,000 looks carry a Poisson interval, the best baseline is the most successful then the
fewest steps, and runs of different worlds or a repeated seed are refused.
"""

from __future__ import annotations

import json

import pytest

from glove_ros.benchmarks.jetrover_summary import format_table, main, summarize


def _mode(tasks, ok, steps, stale=0, fa=0, looks=100):
    return {"drift": {"drift_tasks": tasks, "drift_successes": ok, "steps_per_task": steps,
                      "stale_goals": stale, "false_alarms": fa, "looks": looks}}


def _run(seed, world="w", async_steps=5.0, rule_steps=4.0, rule_ok=10):
    return {"world": world, "config": {"seed": seed, "look_frames": 3},
            "baseline_tuning": {"settings": {"Rule": {}}},
            "best_baseline": {"bare": {"name": "Rule"}},
            "modes": {"async": _mode(10, 10, async_steps), "sync": _mode(10, 10, 5.0),
                      "static": _mode(10, 10, 6.0, stale=3), "oracle": _mode(10, 10, 4.0),
                      "Rule": _mode(10, rule_ok, rule_steps, fa=2),
                      "Other": _mode(10, 10, 5.5)}}


def test_runs_are_summed_over_tasks_and_the_best_baseline_is_most_successful_first():
    doc = summarize([_run(1, async_steps=4.0), _run(2, async_steps=6.0, rule_ok=9)])
    a = doc["modes"]["async"]
    assert (a["tasks"], a["successes"], a["steps_per_task"]) == (20, 20, 5.0)
    # Rule has fewer steps but 19/20 successes: Other (20/20) is the best baseline
    assert doc["best_baseline_summed"] == "Other"
    r = doc["modes"]["Rule"]
    assert r["false_alarms"] == 4 and r["looks"] == 200
    assert r["false_alarms_per_1000_looks"] == 20.0
    lo, hi = r["ci95_per_1000_looks"]
    assert lo < 20.0 < hi
    assert doc["modes"]["static"]["steps_vs_glove_async"] == pytest.approx(1.2)


def test_mixed_worlds_and_repeated_seeds_are_refused():
    with pytest.raises(ValueError, match="differ"):
        summarize([_run(1), _run(2, world="other")])
    with pytest.raises(ValueError, match="seed appears twice"):
        summarize([_run(1), _run(1)])


def test_command_line_writes_the_summary(tmp_path, capsys):
    paths = []
    for s in (1, 2):
        p = tmp_path / f"r{s}.json"
        p.write_text(json.dumps(_run(s)))
        paths.append(str(p))
    out = tmp_path / "sum.json"
    assert main([*paths, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["seeds"] == [1, 2]
    assert "best baseline over the runs" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2


def test_steps_and_stale_goals_after_the_first_drift_are_broken_down_by_target():
    def eps(*rows):  # (episode, target, steps, stale)
        return [{"episode": e, "color": t, "steps": n, "stale_goal": s} for e, t, n, s in rows]
    runs = []
    for seed in (1, 2):
        r = _run(seed)
        r["phases"] = [{"start": 0}, {"start": 2}]
        r["modes"]["async"]["episodes"] = eps((1, "cup", 9, False), (2, "cup", 4, True),
                                              (3, "person", 3, False))
        r["modes"]["Rule+retest"] = _mode(10, 10, 4.5)
        runs.append(r)
    doc = summarize(runs)
    # the episode before the first drift (1) is not counted; both seeds are summed
    assert doc["modes"]["async"]["by_target"] == {
        "cup": {"tasks": 2, "steps": 8, "stale_goals": 2},
        "person": {"tasks": 2, "steps": 6, "stale_goals": 0}}
    assert "by_target" not in doc["modes"]["static"]  # no episodes in the run: nothing made up
    assert doc["best_retest_summed"] == "Rule+retest"


def test_runs_of_glove_alone_sum_too():
    """An ablation or the oracle's perception runs GLOVE async alone (no static, no
    baselines): the summary has no best baseline and the text says so; nothing crashes."""
    alone = [{"world": "w", "config": {"seed": s, "look_frames": 3},
              "modes": {"async": _mode(10, 10, 5.0 + s, fa=s)}} for s in (1, 2)]
    doc = summarize(alone)
    assert doc["best_baseline_summed"] is None and doc["best_retest_summed"] is None
    assert doc["modes"]["async"]["steps_per_task"] == 6.5
    assert doc["modes"]["async"]["false_alarms"] == 3
    text = format_table(doc)
    assert "best baseline over the runs (most successes, then fewest steps): none run" in text
    assert "1: async 6.00; 2: async 7.00" in text
