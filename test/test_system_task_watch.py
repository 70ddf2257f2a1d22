"""``glove-ros task`` and ``glove-ros watch`` against a graph started by ``glove-ros launch sim``.

The launch runs on the small world without ROS_DOMAIN_ID set: the launcher picks a domain
and the two commands find it through the launch's run file (as in a newcomer's three
terminals). What must hold: a task prints feedback and its result and exits 0; after the
announced drift (episode 3 swaps the blocks) watch prints the dissonance at room_a and
the suppression as readable lines; an unknown task exits 1 with its reason; Ctrl-C ends
watch and the launch without a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-u", "-m", "glove_ros.cli", *args]


def test_task_and_watch_against_launched_sim(tmp_path):
    params = yaml.safe_load((ROOT / "config" / "sim.yaml").read_text())
    for node in ("simulator", "planner", "plan_gate"):
        key = next(k for k in params if k.rsplit("/", 1)[-1] == node)  # "/**/planner"
        params[key]["ros__parameters"]["world"] = "small"
    # the paper's count detector with p_th = 2: the task sequence below makes exactly two
    # contradicting looks at room_a (this test is about task and watch, not the detector)
    memory = next(k for k in params if k.endswith("memory"))
    params[memory]["ros__parameters"]["verifier"].update(detector="p_th", p_th=2)
    (tmp_path / "sim_small.yaml").write_text(yaml.safe_dump(params))
    env = {k: v for k, v in os.environ.items() if k != "ROS_DOMAIN_ID"}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)  # this test's launches only
    launch_log = open(tmp_path / "launch.log", "w")  # noqa: SIM115 - closed below
    watch_log = open(tmp_path / "watch.log", "w")  # noqa: SIM115 - closed below
    launch = subprocess.Popen(_cli("launch", "sim", "--params-file", "sim_small.yaml"),
                              cwd=tmp_path, env=env, stdout=launch_log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    watch = None

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in (tmp_path / "launch.log", tmp_path / "watch.log"))

    def task(text: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(_cli("task", text, "--wait", "120", *extra), cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=240)

    try:
        wait_for(lambda: "planner active" in (tmp_path / "launch.log").read_text(), 120,
                 "the planner", logs)
        watch = subprocess.Popen(_cli("watch"), cwd=tmp_path, env=env, stdout=watch_log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "listening on" in (tmp_path / "watch.log").read_text(), 60,
                 "watch", logs)

        first = task("find the red block", "--task-id", "t0")
        assert first.returncode == 0, first.stdout + first.stderr + logs()
        assert "ROS domain" in first.stderr and "glove-ros launch sim" in first.stderr
        assert "feedback: step=" in first.stdout
        assert "result: success=True" in first.stdout and "found_at='room_a'" in first.stdout

        # episode 3 of worlds/small.yaml swaps the blocks; looking at room_a twice more
        # (p_th = 2, set above) contradicts the remembered red block
        runs = [task("find the blue block", "--episode", "3")]
        runs += [task(f"find the {c} block") for c in ("red", "blue", "red")]
        assert all(r.returncode == 0 for r in runs), [r.stdout + r.stderr for r in runs]
        assert "episode 3 announced" in runs[0].stdout

        bad = task("dance the tango")
        assert bad.returncode == 1 and "reason='invalid_task'" in bad.stdout, bad.stdout

        def watched() -> str:
            return (tmp_path / "watch.log").read_text()

        wait_for(lambda: "DISSONANCE (room_a, look)" in watched()
                 and "memory SUPPRESSED (room_a, look)" in watched(), 30,
                 "dissonance and suppression lines", logs)
        wait_for(lambda: "task 'find the red block' [t0]: found at room_a" in watched(), 10,
                 "the first task's outcome", logs)
        assert "saw 'colors=blue'" in watched()

        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 130
        os.killpg(launch.pid, signal.SIGINT)
        assert launch.wait(60) == 130
    finally:
        for p in (watch, launch):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        launch_log.close()
        watch_log.close()
    out = logs()
    assert "Traceback" not in out and "never retrieved" not in out, out
