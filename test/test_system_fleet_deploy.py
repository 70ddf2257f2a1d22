"""The fleet deployment with no hand steps: ``glove-ros fleet hub`` on the "building
server", ``glove-ros launch bag_replay --fleet-robot r1 --fleet-hub ...`` on a "robot"
(the launch starts the robot's leaf server with its nodes), ``glove-ros fleet status``.

What must hold: the robot registers itself at the hub (nobody lists it there); what its
memory node records reaches the hub's FLEET stream and shows in ``fleet status``; a leaf
server killed with SIGKILL is restarted by the launch and memory recorded afterwards
reaches the hub too (nothing lost, nothing counted twice); SIGTERM stops the launch and the
hub with exit code 0 and leaves no nats-server running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("nats")
pytestmark = pytest.mark.ros

from rosproc import call, ros_client, wait_for, warm_record  # noqa: E402

from glove_ros import fleet as fl  # noqa: E402


class _Proc:
    """A ``glove-ros`` command in its own session, output to a file."""

    def __init__(self, tmp_path: Path, name: str, *args: str) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in finish()
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "glove_ros.cli", *args],
                                     cwd=tmp_path, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def finish(self, timeout: float = 30) -> int:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            self._log.close()


def _status(hub_port: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "glove_ros.cli", "fleet", "status", "--hub",
                          f"nats://127.0.0.1:{hub_port}", "--json"],
                         capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def _events(hub_port: int, robot: str) -> tuple[int, int]:
    r = _status(hub_port).get("robots", {}).get(robot, {})
    return r.get("events", 0), r.get("duplicates", 0)


def _pids(*needles: str) -> list[int]:
    """Processes whose command line holds every one of ``needles``."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(n in text for n in needles):
            out.append(int(cmdline.parent.name))
    return out


def _leaf_pids(tmp_path: Path) -> list[int]:
    """Processes running this test's leaf command."""
    return _pids("fleet leaf r1", str(tmp_path))


def _nats_servers(tmp_path: Path) -> list[int]:
    return _pids("nats-server", str(tmp_path))


@pytest.mark.usefixtures("nats_server")
def test_hub_and_a_launched_robot_share_memory_and_survive_a_killed_leaf(tmp_path):
    from glove_ros.msg import Transition
    from glove_ros.srv import RecordTransition

    hub_port, leaf_port, robot_port = fl.free_port(), fl.free_port(), fl.free_port()
    hub = _Proc(tmp_path, "hub", "fleet", "hub", "--port", str(hub_port), "--leaf-port",
                str(leaf_port), "--store", str(tmp_path / "hub"))
    robot = None

    def logs() -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log()[-3000:]}"
                         for p in (hub, robot) if p is not None)

    try:
        wait_for(lambda: "hub up" in hub.log(), 30, "the hub", logs)
        robot = _Proc(tmp_path, "robot", "launch", "bag_replay", "--fleet-robot", "r1",
                      "--fleet-hub", f"nats-leaf://127.0.0.1:{leaf_port}",
                      "--fleet-port", str(robot_port), "--fleet-store", str(tmp_path / "r1"),
                      "-p", f"memory.db_path:={tmp_path / 'r1.db'}")
        wait_for(lambda: "r1 registered at the hub" in robot.log()
                 and "fleet link up" in robot.log(), 90, "r1 registered and linked", logs)
        with ros_client("fleet_deploy_test") as node:
            record = node.create_client(RecordTransition, "record_transition")
            warm_record(node, record, timeout=60)

            def put(state: str) -> None:
                t = Transition(state_key=state, action="look", outcome="colors=red",
                               robot_id="r1", episode_id="e")
                assert call(node, record, RecordTransition.Request(transition=t)).accepted

            put("room_a")
            put("room_b")
            wait_for(lambda: _events(hub_port, "r1")[0] >= 2, 60, "r1's 2 events at the hub",
                     logs)
            old = _leaf_pids(tmp_path)
            assert len(old) == 1, old
            os.kill(old[0], signal.SIGKILL)  # its nats-server dies with it
            wait_for(lambda: _leaf_pids(tmp_path) not in ([], old), 60,
                     "the leaf server restarted by the launch", logs)
            put("room_c")
            wait_for(lambda: _events(hub_port, "r1")[0] >= 3, 90,
                     "r1's event after the leaf restart at the hub", logs)
        assert _events(hub_port, "r1") == (3, 0)  # each once: nothing lost, none twice
        assert "restarting fleet-leaf" in robot.log()
        report = _status(hub_port)
        assert report["robots"]["r1"]["registered"] and report["suppressed"] == []
    finally:
        codes = [p.finish() for p in (robot, hub) if p is not None]
    assert codes == [0, 0], logs()
    assert "Traceback" not in logs()
    wait_for(lambda: not _nats_servers(tmp_path), 15, "every nats-server stopped", logs)
