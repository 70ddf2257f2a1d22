"""Launcher logic without ROS: restart back-off, run files and domain joining, db folders."""

from __future__ import annotations

import json
import os

import pytest

from glove_ros.cli import launcher


def test_backoff_doubles_caps_and_gives_up_after_quick_failures():
    b = launcher.Backoff(max_restarts=6, first=1.0, cap=8.0, healthy_after=60.0)
    assert [b.failed(0.5) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert b.failed(0.5) is None


def test_backoff_resets_after_a_run_that_lasted():
    b = launcher.Backoff(max_restarts=2, healthy_after=60.0)
    assert b.failed(1) == 1.0 and b.failed(1) == 2.0
    assert b.failed(120) == 1.0  # it ran healthy for two minutes: a new streak
    assert b.failed(1) == 2.0
    assert b.failed(1) is None


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    d = launcher.run_dir()
    d.mkdir(parents=True)
    return d


def test_join_domain_reads_the_only_live_launch(run_dir):
    (run_dir / "launch-1.json").write_text(json.dumps(
        {"pid": os.getpid(), "domain": 42, "deployment": "sim", "started": 1}))
    # a run file whose launcher is gone is ignored
    (run_dir / "launch-2.json").write_text(json.dumps(
        {"pid": 2 ** 22 + 7, "domain": 9, "deployment": "sim", "started": 2}))
    note = launcher.join_domain()
    assert os.environ["ROS_DOMAIN_ID"] == "42" and "sim" in note
    assert launcher.choose_domain() != 42


def test_join_domain_refuses_to_guess_between_two_launches(run_dir):
    for i, dom in ((1, 42), (2, 43)):
        (run_dir / f"launch-{i}.json").write_text(json.dumps(
            {"pid": os.getpid(), "domain": dom, "deployment": "sim", "started": i}))
    with pytest.raises(ValueError, match="--domain"):
        launcher.join_domain()
    assert launcher.join_domain(7) and os.environ["ROS_DOMAIN_ID"] == "7"


def test_join_domain_keeps_an_explicit_environment(run_dir, monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "5")
    assert "ROS_DOMAIN_ID" in launcher.join_domain()
    assert os.environ["ROS_DOMAIN_ID"] == "5"


def test_make_db_dirs_creates_only_relative_parents(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        "memory:\n  ros__parameters:\n    db_path: build/x/memory.db\n"
        "planner:\n  ros__parameters:\n    plan_db_path: /nonexistent_abs/m.db\n"
        "    nested: {experience_db_path: ''}\n")
    said = []
    launcher.make_db_dirs(str(params), said.append)
    assert (tmp_path / "build" / "x").is_dir()
    assert not os.path.exists("/nonexistent_abs")
    assert len(said) == 1
