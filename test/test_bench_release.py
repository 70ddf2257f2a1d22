"""The release evaluation (``glove-ros bench release``; no ROS).

What must hold: the report range is a pure function of the commit's sha and never touches a
development range (0-99, 1000-1019, 2000-2059, 3000-5099, every range in
bench/scenarios/*.yaml) nor an earlier release's; a dirty tree is refused unless
--allow-dirty (then recorded); a second run on the same commit is refused unless --force
(then recorded); a tiny end-to-end run writes the JSON, table and plot with the commit, the
tree state, the seeds and how they were drawn, the date, wall time, CPU count, the
development effort on each side and the statement that earlier report ranges are
development ranges now.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from glove_ros.benchmarks import release, suite

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "bench" / "scenarios"
SHA = "abcdef0123456789abcdef0123456789abcdef01"

TINY = """
tune_seeds: [0, 1]
report_seeds: [3000, 3001]     # placeholder: only its width (1 world) is read
families: [frozenlake_det]
baselines: [LatestOverwrite, RecentK, RecentK+retest]
sweep: {RecentK: [1, 3]}
family: {frozenlake_det: {sizes: [4, 4], episodes: 6}}
"""


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    base = {"scenario": str(scenario), "seeds": None, "allow_dirty": False, "force": False,
            "jobs": 1, "out": str(tmp_path / "out"), "plan": False, "json": False}
    base.update(kw)
    return argparse.Namespace(**base)


def _clean(monkeypatch, sha: str = SHA, dirty: tuple[str, ...] = ()) -> None:
    monkeypatch.setattr(release, "git_state", lambda root=None: release.GitState(sha, dirty))


def test_the_report_range_is_a_function_of_the_commit_and_avoids_every_development_range():
    # 0xabcdef = 11259375; 11259375 % 800000 = 59375
    assert release.derive_seeds(SHA, 100) == (159375, 159475)
    assert release.derive_seeds(SHA.upper(), 100) == (159375, 159475)
    assert release.derive_seeds("123456" + SHA[6:], 100) != release.derive_seeds(SHA, 100)
    known = release.known_seed_ranges(SCENARIOS)
    # every range the project used is known, development and earlier report ranges alike
    spans = {(a, b) for a, b, _ in known}
    for rng in ((0, 100), (1000, 1020), (2000, 2060), (3000, 5100), (3000, 3020), (0, 10)):
        assert rng in spans, rng
    width = max(release._report_width(suite.load_suite(SCENARIOS / "suite_release.yaml")), 1000)
    for i in range(2000):
        sha = hashlib.sha1(str(i).encode()).hexdigest()
        lo, hi = release.derive_seeds(sha, width)
        assert release.SEED_FLOOR <= lo < release.SEED_FLOOR + release.SEED_SPAN
        assert not release._overlaps((lo, hi), known), (sha, lo, hi)
    for bad in ("", "abc", "xyz123", "12345g"):
        with pytest.raises(ValueError, match="hex"):
            release.derive_seeds(bad, 10)
    assert release.parse_seeds("900000:900020") == (900000, 900020)
    for bad in ("900000", "a:b", "20:10", "-1:5", "1:2:3"):
        with pytest.raises(ValueError, match="--seeds"):
            release.parse_seeds(bad)


def test_the_release_scenario_runs_every_baseline_and_its_retest_arm_on_all_families():
    config = suite.load_suite(SCENARIOS / "suite_release.yaml")
    assert sorted(config.families) == sorted(suite.FAMILIES)
    bare = [b for b in config.baselines if "+" not in b]
    assert set(bare) == {"LatestOverwrite", "RecentK", "SlidingWindow", "RecencyWeighted",
                         "PageHinkleyReset", "PeriodicRefresh"}
    assert set(config.baselines) == set(bare) | {f"{b}+retest" for b in bare}
    # its report range is a placeholder inside the development seeds
    assert 3000 <= config.report_seeds[0] < config.report_seeds[1] <= 5100
    # the nuisance-only family has more report worlds than any other (its false-alarm
    # interval), and the range the release draws holds them all
    counts = {f: config.family[f]["report"] for f in config.families}
    assert counts["waypoint_nuisance"] > max(v for f, v in counts.items()
                                             if f != "waypoint_nuisance")
    assert release._report_width(config) >= counts["waypoint_nuisance"]
    # a wider sweep than the development suites': every value they tried and more, and
    # more world runs per baseline than their 3 settings x 10 tune worlds where it drifts
    dev = suite.load_suite(SCENARIOS / "suite.yaml")
    for fam in config.families:
        grid, dev_grid = release._family_sweep(config, fam), release._family_sweep(dev, fam)
        for rule, values in dev_grid.items():
            assert set(values) < set(grid[rule]), (fam, rule)
    effort = release.baseline_effort(config)["families"]
    for fam in ("frozenlake_det", "frozenlake_slip", "waypoint"):
        assert effort[fam]["baselines"]["RecentK+retest"]["world_runs"] > 30


def test_git_state_counts_tracked_changes_and_untracked_code_as_dirty(tmp_path):
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                        "user.email=t@example.com", *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "glove_ros").mkdir()
    (tmp_path / "glove_ros" / "a.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    clean = release.git_state(tmp_path)
    assert len(clean.sha) == 40 and not clean.dirty
    (tmp_path / "notes.txt").write_text("untracked, outside what the run reads\n")
    assert not release.git_state(tmp_path).dirty
    (tmp_path / "glove_ros" / "b.py").write_text("y = 2\n")  # untracked code: dirty
    assert release.git_state(tmp_path).dirty_paths == ("glove_ros/b.py",)
    (tmp_path / "glove_ros" / "b.py").unlink()
    (tmp_path / "glove_ros" / "a.py").write_text("x = 2\n")  # tracked change: dirty
    assert release.git_state(tmp_path).dirty_paths == ("glove_ros/a.py",)


def test_a_dirty_tree_is_refused_without_the_flag(tmp_path, monkeypatch):
    _clean(monkeypatch, dirty=("glove_ros/core/verify/verifier.py",))
    with pytest.raises(ValueError, match="--allow-dirty"):
        release.main(_args(tmp_path))
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_hand_drawn_seeds_that_touch_a_development_range_are_refused(tmp_path, monkeypatch):
    _clean(monkeypatch)
    for seeds in ("1010:1030", "0:5", "5099:5200", "2059:2061"):
        with pytest.raises(ValueError, match="overlap seeds used before"):
            release.main(_args(tmp_path, seeds=seeds))


def test_a_tiny_release_records_everything_and_runs_once(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gymnasium")
    _clean(monkeypatch)
    assert release.main(_args(tmp_path)) == 0
    stem = tmp_path / "out" / "release-abcdef012345"
    doc = json.loads(stem.with_suffix(".json").read_text())
    assert stem.with_suffix(".txt").read_text().startswith(f"Release evaluation of commit {SHA}")
    assert stem.with_suffix(".png").stat().st_size > 0
    rel = doc["release"]
    assert rel["commit"] == SHA and rel["dirty"] is False and rel["dirty_paths"] == []
    assert rel["allow_dirty"] is False and rel["forced"] is False
    assert rel["seeds"]["report"] == [159375, 159376] and rel["seeds"]["derived"] == "commit"
    assert rel["seeds"]["tune"] == [0, 1]
    assert doc["report_seeds"] == [159375, 159376]  # the suite ran on the derived range
    assert rel["date"].endswith("+00:00") and rel["wall_s"] > 0 and rel["cpu_count"] >= 1
    assert "development range" in rel["statement"] and "1000-1019" in rel["statement"]
    assert [1000, 1020] in [r[:2] for r in rel["development_ranges"]]
    glove = rel["development_effort"]["glove"]
    assert glove["distinct_seeds_searched"] == 100 + 2100 + 20 + 60
    assert glove["report_world_runs_read"] == 15 * 20 * 4 + 8 * 60 * 2
    base = rel["development_effort"]["baselines_release"]["families"]["frozenlake_det"]
    assert base["baselines"]["RecentK"] == {"settings": 2, "tune_worlds": 1, "world_runs": 2}
    assert base["baselines"]["RecentK+retest"]["world_runs"] == 2
    assert base["baselines"]["LatestOverwrite"]["world_runs"] == 1
    assert len(rel["scenario_sha256"]) == 64
    methods = doc["families"]["frozenlake_det"]["methods"]
    assert {"GLOVE-async", "RecentK", "RecentK+retest", "Oracle"} <= set(methods)
    assert methods["RecentK"]["worlds"] == 1
    # run once: the same commit again is refused, the result stays as it was
    before = stem.with_suffix(".json").read_text()
    with pytest.raises(ValueError, match="--force"):
        release.main(_args(tmp_path))
    assert stem.with_suffix(".json").read_text() == before
    # a later commit may not reuse an earlier release's seeds, hand-drawn or not
    _clean(monkeypatch, sha="fedcba" + SHA[6:])
    with pytest.raises(ValueError, match="earlier release"):
        release.main(_args(tmp_path, seeds="159375:159380"))
    # --force replaces it, and says so
    _clean(monkeypatch)
    assert release.main(_args(tmp_path, force=True, seeds="900000:900001")) == 0
    rel = json.loads(stem.with_suffix(".json").read_text())["release"]
    assert rel["forced"] is True and rel["seeds"]["derived"] == "drawn by hand"
    assert rel["seeds"]["report"] == [900000, 900001]
    assert "Release evaluation of commit" in capsys.readouterr().out


def test_the_command_is_registered(tmp_path):
    from glove_ros.cli import main as cli

    args = cli.build_parser().parse_args(["bench", "release", "--seeds", "900000:900010",
                                          "--allow-dirty", "--out", str(tmp_path)])
    assert args.func is release.main and args.seeds == "900000:900010"
    assert args.allow_dirty and not args.force and args.jobs == 2


def test_plan_estimates_on_development_seeds_and_writes_nothing(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gymnasium")
    _clean(monkeypatch, dirty=("glove_ros/x.py",))  # --plan runs nothing of the release
    assert release.main(_args(tmp_path, plan=True, estimate=1)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["report_seeds"] == [159375, 159376] and doc["dirty_paths"] == ["glove_ros/x.py"]
    fam = doc["world_runs"]["frozenlake_det"]
    # LatestOverwrite 1 + RecentK 2 + RecentK+retest 2 settings, 1 tune world; 2 GLOVE + 5
    # ablations + 3 baselines + Static, Oracle and the learner's reference on 1 report world
    assert fam["tune_runs"] == 5 and fam["report_runs"] == fam["methods"] == 13
    est = doc["estimate"]["families"]["frozenlake_det"]
    assert est["timed_runs"] == 18 and est["cpu_s_per_run"] > 0
    assert est["planned_cpu_s"] == pytest.approx(est["cpu_s_per_run"] * 18)
    assert not (tmp_path / "out").exists()
    # the estimate runs the scenario's own report range: it must be development seeds
    with pytest.raises(ValueError, match="not development seeds"):
        release.estimate(suite.load_suite(tmp_path / "tiny.yaml").__class__(
            tune_seeds=(0, 1), report_seeds=(200000, 200001), families=("frozenlake_det",)),
            1, 1)
    with pytest.raises(ValueError, match="goes with --plan"):
        release.main(_args(tmp_path, estimate=1))


def test_the_wall_time_takes_families_in_order_on_free_workers():
    # two workers: 10 | 10, then the 5 joins the first (15), the 9 the second (19)
    assert release._makespan([10, 10, 5, 9], 2) == 19
    assert release._makespan([10, 10, 5, 9], 1) == 34
    assert release._makespan([10, 10, 5, 9], 8) == 10
