"""``glove-ros launch``: signals to the launcher or its process group, and the supervisor.

What must hold: SIGINT or SIGTERM, sent to the launcher alone or to the whole process
group (a terminal's Ctrl-C), stops every node; nothing prints a traceback or "exception
was never retrieved"; no node process survives; the exit code is 130 after SIGINT and 0
after SIGTERM. A node killed with SIGKILL is restarted and the graph keeps running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import wait_for  # noqa: E402

BAD_OUTPUT = ("Traceback", "never retrieved", "KeyboardInterrupt", "Failed to publish")


def _children(pid: int) -> set[int]:
    """Pids whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text.rsplit(")", 1)[1].split()[0] != "Z"


class Launch:
    """``glove-ros launch bag_replay`` in its own process group, output to a file."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.log_path = tmp_path / "launch.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in finish()
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "glove_ros.cli", "launch", "bag_replay", *extra],
            cwd=tmp_path, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.seen: set[int] = set()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def nodes(self) -> set[int]:
        pids = _children(self.proc.pid)
        self.seen |= pids
        return pids

    def finish(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            for pid in self.seen:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
            self._log.close()


@pytest.mark.parametrize("signum,target,when", [
    (signal.SIGINT, "group", "active"),
    (signal.SIGINT, "launcher", "active"),
    (signal.SIGTERM, "group", "active"),
    (signal.SIGTERM, "launcher", "active"),
    (signal.SIGINT, "group", "starting"),
])
def test_signal_stops_every_node_without_traceback(tmp_path, signum, target, when):
    launch = Launch(tmp_path)
    if when == "active":
        wait_for(lambda: len(launch.nodes()) == 3 and launch.log().count(" active") >= 3,
                 120, "three active nodes", launch.log)
    else:
        wait_for(lambda: len(launch.nodes()) >= 1, 60, "the first node process", launch.log)
    nodes = launch.nodes()
    if target == "group":
        os.killpg(launch.proc.pid, signum)
    else:
        launch.proc.send_signal(signum)
    code = launch.finish()
    out = launch.log()
    assert code == (130 if signum == signal.SIGINT else 0), out
    assert not [b for b in BAD_OUTPUT if b in out], out
    assert nodes and not [p for p in launch.seen if _alive(p)], out
    assert "stopped all nodes" in out


def test_crashed_node_is_restarted_and_graph_keeps_running(tmp_path):
    launch = Launch(tmp_path)
    wait_for(lambda: len(launch.nodes()) == 3 and launch.log().count(" active") >= 3,
             120, "three active nodes", launch.log)
    first = launch.nodes()
    victim = next(p for p in first if "memory_node" in Path(f"/proc/{p}/cmdline").read_text())
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: "restarting memory" in launch.log(), 30, "a restart", launch.log)
    wait_for(lambda: len(launch.nodes()) == 3 and launch.log().count("memory active") >= 2,
             60, "memory active again", launch.log)
    assert launch.proc.poll() is None
    assert (first - {victim}) <= launch.nodes()  # the other nodes were left alone
    launch.proc.send_signal(signal.SIGTERM)
    assert launch.finish() == 0
    assert not [p for p in launch.seen if _alive(p)]


def test_node_that_keeps_failing_stops_the_graph(tmp_path):
    db = tmp_path / "not_a_database.db"
    db.write_text("a text file where the memory database should be\n" * 4)
    params = tmp_path / "bad.yaml"
    params.write_text(f"memory:\n  ros__parameters:\n    db_path: {db}\n")
    launch = Launch(tmp_path, "--params-file", str(params), "--max-restarts", "1")
    code = launch.finish(180)
    out = launch.log()
    assert code == 1, out
    assert "memory exited with 1" in out and "stopping the graph" in out
    assert "restarting memory" in out  # it was given a second chance first
    assert db.read_text().startswith("a text file")  # refused, not overwritten
    assert not [p for p in launch.seen if _alive(p)]
