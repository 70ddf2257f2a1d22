"""bench jetrover's baseline tuning protocol: settings picked on development seeds (summed),
frozen in a file, and used unchanged (and recorded) by the report run; plus the common-noise
wiring that gives every method the same stop poses."""

from __future__ import annotations

import argparse
import copy
import json

import pytest

from glove_ros.benchmarks import jetrover
from glove_ros.benchmarks._jetrover_config import BenchConfig
from glove_ros.benchmarks._jetrover_runner import ModeRunner
from glove_ros.benchmarks._jetrover_tuning import FORMAT, load_params, tune_from_docs
from glove_ros.core.world.worldfile import load_world

_CFG = {"episodes": 10, "max_steps": 30, "look_frames": 3, "task_start": "random",
        "perception": "camera", "detector": "darknet", "frame_size": [640, 480]}


def _row(params, ok, steps, stale=0):
    return {"params": params, "successes_after_drift": ok, "steps_per_task_after_drift": steps,
            "tasks_after_drift": 8, "stale_goals_after_drift": stale, "false_alarms": 0,
            "looks": 50}


def _doc(seed, recent_k, world="w"):
    """A --sweep result document: RecentK rows as given, one LatestOverwrite row."""
    return {"world": {"name": world}, "config": {**_CFG, "seed": seed},
            "phases": [{"name": "before drift", "start": 0, "end": 2},
                       {"name": "move_block@2", "start": 2, "end": 10}],
            "baseline_sweep": {"RecentK": recent_k,
                               "LatestOverwrite": [_row({}, 8, 4.0)],
                               "RecentK+retest": [_row({"k": 1, "x": 9}, 8, 3.0)]}}


def test_settings_are_picked_on_the_summed_scores_not_per_seed():
    """Seed 4 alone prefers k=1 (fewer steps at equal successes), seed 5 prefers k=3 by far;
    the sum over both picks k=3. Successes come first: k=8 has the fewest steps but fails."""
    docs = [_doc(4, [_row({"k": 1}, 8, 3.0), _row({"k": 3}, 8, 3.1), _row({"k": 8}, 7, 2.0)]),
            _doc(5, [_row({"k": 3}, 8, 3.0), _row({"k": 1}, 8, 5.0), _row({"k": 8}, 7, 2.0)])]
    out = tune_from_docs(docs, ["a.json", "b.json"])
    assert out["format"] == FORMAT and out["world"] == "w" and out["tuned_on_seeds"] == [4, 5]
    assert out["settings"] == {"RecentK": {"k": 3}, "LatestOverwrite": {},
                               "RecentK+retest": {"k": 1}}  # only the swept parameter kept
    best = out["scores"]["RecentK"][0]
    assert best["successes_after_drift"] == 16
    assert best["steps_after_drift"] == pytest.approx((3.1 + 3.0) * 8)
    assert set(best["per_seed"]) == {"4", "5"}


@pytest.mark.parametrize("change, message", [
    (lambda d: d[1].update(config={**_CFG, "seed": 4}), "seed repeats"),
    (lambda d: d[1].update(world={"name": "other"}), "different worlds"),
    (lambda d: d[1]["config"].update(look_frames=2), "different settings"),
    (lambda d: d[1].pop("baseline_sweep"), "no baseline_sweep"),
    (lambda d: d[1]["baseline_sweep"]["RecentK"].pop(), "not run on every seed"),
])
def test_tuning_refuses_documents_that_do_not_fit_together(change, message):
    docs = [_doc(4, [_row({"k": 1}, 8, 3.0), _row({"k": 3}, 8, 3.1)]),
            _doc(5, [_row({"k": 1}, 8, 3.0), _row({"k": 3}, 8, 3.1)])]
    docs = copy.deepcopy(docs)
    change(docs)
    with pytest.raises(ValueError, match=message):
        tune_from_docs(docs)


def test_load_params_checks_world_config_and_baselines(tmp_path):
    path = tmp_path / "params.json"
    doc = tune_from_docs([_doc(4, [_row({"k": 3}, 8, 3.0)]), _doc(5, [_row({"k": 3}, 8, 3.0)])])
    path.write_text(json.dumps(doc))
    got = load_params(path, "w", {**_CFG, "seed": 7}, ["RecentK", "LatestOverwrite"])
    assert got["settings"] == {"RecentK": {"k": 3}, "LatestOverwrite": {}}
    assert got["tuned_on_seeds"] == [4, 5] and got["seed_in_tuning_set"] is False
    assert load_params(path, "w", {**_CFG, "seed": 5}, ["RecentK"])["seed_in_tuning_set"]
    with pytest.raises(ValueError, match="tuned on world 'w'"):
        load_params(path, "v", {**_CFG, "seed": 7}, ["RecentK"])
    with pytest.raises(ValueError, match="other settings"):
        load_params(path, "w", {**_CFG, "seed": 7, "look_frames": 2}, ["RecentK"])
    with pytest.raises(ValueError, match="no setting for PageHinkleyReset"):
        load_params(path, "w", {**_CFG, "seed": 7}, ["PageHinkleyReset"])
    # settings tuned with the agent going to the latest sighting first fit only such runs
    latest = [_doc(4, [_row({"k": 3}, 8, 3.0)]), _doc(5, [_row({"k": 3}, 8, 3.0)])]
    for d in latest:
        d["config"]["believed_order"] = "latest"
    path.write_text(json.dumps(tune_from_docs(latest)))
    assert load_params(path, "w", {**_CFG, "seed": 7, "believed_order": "latest"}, ["RecentK"])
    with pytest.raises(ValueError, match="believed_order"):
        load_params(path, "w", {**_CFG, "seed": 7}, ["RecentK"])
    # and settings tuned under one frame in three fit only runs under that look rule
    one_in_three = {"frames": 3, "min_count": 1}
    for d in latest:
        d["config"]["look_rule"] = one_in_three
    path.write_text(json.dumps(tune_from_docs(latest)))
    late = {**_CFG, "seed": 7, "believed_order": "latest"}
    assert load_params(path, "w", {**late, "look_rule": one_in_three}, ["RecentK"])
    with pytest.raises(ValueError, match="look_rule"):
        load_params(path, "w", {**late, "look_rule": {"frames": 3, "min_count": 2}},
                    ["RecentK"])
    path.write_text("{}")
    with pytest.raises(ValueError, match="is not a"):
        load_params(path, "w", {**_CFG, "seed": 7}, ["RecentK"])


def test_cli_tunes_on_dev_seeds_and_the_report_run_uses_the_frozen_settings(tmp_path, capsys):
    """Two --sweep runs (dev seeds 0, 1) -> --tune-from writes the file -> a run on seed 2
    with --baseline-params runs each baseline once at the frozen setting and records it."""
    parser = argparse.ArgumentParser()
    jetrover.add_arguments(parser)
    common = ["--scenario", "small", "--episodes", "4", "--mode", "static",
              "--baselines", "RecentK,RecentK+retest", "--frame-size", "320x240"]
    for seed in (0, 1):
        args = parser.parse_args([*common, "--seed", str(seed), "--sweep",
                                  "--out", str(tmp_path / f"s{seed}")])
        assert jetrover.main(args) == 0
    params = tmp_path / "params.json"
    args = parser.parse_args([*common, "--tune-from", str(tmp_path / "s0/jetrover_small.json"),
                              str(tmp_path / "s1/jetrover_small.json"),
                              "--write-baseline-params", str(params)])
    assert jetrover.main(args) == 0
    tuned = json.loads(params.read_text())
    assert tuned["tuned_on_seeds"] == [0, 1] and set(tuned["settings"]) == {
        "RecentK", "RecentK+retest"}
    assert len(tuned["scores"]["RecentK"]) == 3  # every swept value scored
    args = parser.parse_args([*common, "--seed", "2", "--baseline-params", str(params),
                              "--out", str(tmp_path / "s2")])
    assert jetrover.main(args) == 0
    assert "tuned on seeds [0, 1]" in capsys.readouterr().out
    doc = json.loads((tmp_path / "s2/jetrover_small.json").read_text())
    assert "baseline_sweep" not in doc
    assert doc["baseline_tuning"]["tuned_on_seeds"] == [0, 1]
    assert doc["baseline_tuning"]["seed_in_tuning_set"] is False
    assert doc["baseline_tuning"]["settings"] == tuned["settings"]
    for b in ("RecentK", "RecentK+retest"):
        assert doc["modes"][b]["params"]["k"] == tuned["settings"][b]["k"]
    # a sweep and frozen settings exclude each other; a mismatched config is refused
    capsys.readouterr()
    for extra in (["--sweep"], ["--look-frames", "3"]):
        args = parser.parse_args([*common, "--seed", "2", "--baseline-params", str(params),
                                  "--out", str(tmp_path / "bad"), *extra])
        assert jetrover.main(args) == 2
    assert "--baseline-params" in capsys.readouterr().err


def test_common_noise_keys_the_simulators_stop_poses():
    """With the darknet detector every method's simulator draws stop poses from the arrival's
    key (keyed_arrivals on, recorded in the config); the colour detector's default keeps the
    sequential draw (the drift suite's numbers), unless asked."""
    objects = ModeRunner(load_world("home_objects_hard"), "static", BenchConfig())
    colours = ModeRunner(load_world("jetrover_maze"), "static", BenchConfig())
    asked = ModeRunner(load_world("jetrover_maze"), "static", BenchConfig(keyed_arrivals=True))
    try:
        assert objects.sim.keyed_arrivals and not colours.sim.keyed_arrivals
        assert asked.sim.keyed_arrivals
        assert objects.config.describe()["keyed_arrivals"] is True
    finally:
        for r in (objects, colours, asked):
            r.close()
    with pytest.raises(ValueError, match="keyed_arrivals"):
        BenchConfig(keyed_arrivals="yes").validate()
