"""The gz_events node in its own process, on simulated time, against a stand-in ``ign`` command.

No Gazebo here: a small script named ``ign`` on PATH records each command line and answers
as ``ign service`` does (``data: true``), except that it lets ``remove`` calls time out.
What must hold: timed events run at their /clock time, in order, once; an episode event runs
when ``episode_start`` announces it; a failed call is logged as an error and the node lives
on.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time

import pytest
import yaml

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, ros_client, wait_for  # noqa: E402

from glove_ros.core.world.worldfile import load_world  # noqa: E402

FAKE_IGN = """\
import json, sys
with open({calls!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
service = sys.argv[sys.argv.index("-s") + 1]
print("Service call timed out" if service.endswith("/remove") else "data: true")
"""


def _world(tmp_path) -> str:
    d = load_world("corridor_blocked").to_dict()
    d["events"] = [
        {"time": 4.0, "type": "open_edge", "edge": ["hall", "goal"]},
        {"time": 2.0, "type": "block_edge", "edge": ["hall", "goal"]},
        {"episode": 3, "type": "move_block", "block": "green_block", "waypoint": "far"},
    ]
    path = tmp_path / "timed.yaml"
    path.write_text(yaml.safe_dump(d))
    return str(path)


def test_events_run_at_sim_time_and_on_episode_start(tmp_path):
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import String, UInt32

    calls = tmp_path / "calls.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ign = bin_dir / "ign"
    ign.write_text(f"#!{sys.executable}\n" + FAKE_IGN.format(calls=str(calls)))
    ign.chmod(ign.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def commands() -> list[list[str]]:
        if not calls.exists():
            return []
        return [json.loads(line) for line in calls.read_text().splitlines()]

    with ros_client("gz_events_test") as node:
        clock = node.create_publisher(Clock, "/clock", 10)
        episodes = node.create_publisher(UInt32, "episode_start", 10)
        lines = Collector(node, String, "gz_events")
        proc = NodeProcess("glove_ros.nodes.gz_events_node", tmp_path,
                           {"world": _world(tmp_path), "gz_version": "fortress",
                            "use_sim_time": True, "period": 0.1, "timeout": 2.0}, env=env)
        stop = threading.Event()
        sim = {"t": 0.0}

        def tick() -> None:  # simulated time: 0.1 s per 20 ms of wall time, up to 6 s
            while not stop.is_set():
                sim["t"] = min(sim["t"] + 0.1, 6.0)
                msg = Clock()
                msg.clock.sec = int(sim["t"])
                msg.clock.nanosec = int(round((sim["t"] % 1) * 1e9))
                clock.publish(msg)
                time.sleep(0.02)

        try:
            wait_for(lambda: node.count_subscribers("/clock") > 0, 20, "the node on /clock",
                     proc.log)
            wait_for(lambda: node.count_subscribers("episode_start") > 0, 20,
                     "episode_start subscription", proc.log)
            assert commands() == []  # nothing before its time
            episodes.publish(UInt32(data=3))
            wait_for(lambda: len(commands()) == 1, 20, "the episode event's call", proc.log)
            threading.Thread(target=tick, daemon=True).start()
            wait_for(lambda: len(commands()) == 3, 30, "both timed events' calls", proc.log)
            time.sleep(0.5)  # a little more simulated time: nothing fires twice
            cmds = commands()
            assert len(cmds) == 3
            services = [c[c.index("-s") + 1] for c in cmds]
            assert services == ["/world/corridor_blocked/set_pose",
                                "/world/corridor_blocked/create",
                                "/world/corridor_blocked/remove"]
            assert all(c[0] == "service" for c in cmds)
            assert cmds[0][cmds[0].index("--reqtype") + 1] == "ignition.msgs.Pose"
            assert 'name: "barrier_goal_hall"' in cmds[2][cmds[2].index("--req") + 1]
            wait_for(lambda: len(lines) >= 3, 10, "gz_events lines", proc.log)
            texts = [m.data for m in lines.items]
            assert texts[0] == "episode 3: set_pose block_green_block: ok"
            assert texts[1] == "t=2.00s: create barrier_goal_hall: ok"
            assert texts[2] == "t=4.00s: remove barrier_goal_hall: FAILED"
            log = proc.log()
            assert "remove barrier_goal_hall: FAILED (Gazebo did not confirm" in log
            assert proc.alive()
        finally:
            stop.set()
            assert proc.stop() == 0, proc.log()
