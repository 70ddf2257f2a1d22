"""``glove-ros task`` notices when the planner dies mid-goal (issue 31: it waited its full
300 s). A stand-in run_task server accepts the goal and never answers; it is killed with
SIGKILL. What must hold: the command exits 1 well before its --timeout, saying the server
went away and that the outcome is unknown (never that the task failed or succeeded)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import wait_for  # noqa: E402

SERVER = """
import rclpy, time
from rclpy.action import ActionServer, GoalResponse
from rclpy.executors import MultiThreadedExecutor
from glove_ros.action import RunTask
rclpy.init()
node = rclpy.create_node("planner")
def execute(handle):
    print("goal running", flush=True)
    while True:
        time.sleep(0.1)
ActionServer(node, RunTask, "run_task", execute, goal_callback=lambda _g: GoalResponse.ACCEPT)
print("server up", flush=True)
ex = MultiThreadedExecutor()
ex.add_node(node)
ex.spin()
"""


def test_task_exits_soon_after_the_planner_dies_mid_goal(tmp_path):
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen([sys.executable, "-u", "-c", SERVER], stdout=log,
                              stderr=subprocess.STDOUT)
    task = None
    try:
        wait_for(lambda: "server up" in (tmp_path / "server.log").read_text(), 30,
                 "the stand-in server", lambda: (tmp_path / "server.log").read_text())
        task = subprocess.Popen([sys.executable, "-u", "-m", "glove_ros.cli", "task",
                                 "find the red block", "--timeout", "300", "--wait", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "goal running" in (tmp_path / "server.log").read_text(), 60,
                 "the goal", lambda: (tmp_path / "server.log").read_text())
        server.kill()
        t0 = time.monotonic()
        out, err = task.communicate(timeout=120)
        waited = time.monotonic() - t0
        assert task.returncode == 1, out + err
        assert "went away" in err and "outcome is unknown" in err, out + err
        assert "result:" not in out
        assert waited < 60, f"noticed only after {waited:.0f}s"
    finally:
        server.kill()
        server.wait(10)
        log.close()
        if task is not None and task.poll() is None:
            task.kill()
