"""`glove-ros bag record` and `replay` across processes, and replay driving the observer.

The recorder and the player are separate processes (``python -m glove_ros.cli.bags``); the
test node publishes and subscribes over DDS on the per-run domain set by conftest.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("rosbags")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, call_retry, ros_client, wait_for  # noqa: E402

from glove_ros.core.bag.bagfile import NS, BagReader, BagWriter  # noqa: E402
from glove_ros.core.bag.typestore import make_typestore  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "bags"


def _bag_cmd(*argv) -> list[str]:
    return [sys.executable, "-u", "-m", "glove_ros.cli.bags", *[str(a) for a in argv]]




def _play_paused(node, collectors, *argv) -> subprocess.CompletedProcess:
    """Replay with --start-paused; resume once every collector sees the player, so that no
    message is published before the test's subscriptions matched (DDS discovery)."""
    from std_srvs.srv import Trigger

    proc = subprocess.Popen(_bag_cmd("replay", *argv, "--start-paused", "--delay", "0"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: all(c.sub.get_publisher_count() > 0 for c in collectors), 30,
                 "the player's publishers")
        resume = node.create_client(Trigger, "/glove_bag_player/resume")
        assert call_retry(node, resume, Trigger.Request()).success
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _messages(i: int):
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from glove_ros.msg import Detection, DetectionArray, Transition

    t = Transition(state_key=f"wp{i}", action="look", outcome=f"colors=red{i}",
                   robot_id="rover", episode_id="e1", source=Transition.SOURCE_OBSERVED)
    t.header.stamp.sec, t.header.stamp.nanosec = 100 + i, 5
    d = DetectionArray(waypoint=f"wp{i}", backend="color", detections=[
        Detection(label="block", color="red", x=i, y=2, width=3, height=4, confidence=0.5)])
    img = Image(height=2, width=3, encoding="bgr8", step=9, data=bytes(range(i, i + 18)))
    return {"transitions": t, "detections": d, "camera/image_raw": img,
            "current_waypoint": String(data=f"wp{i}")}


def test_record_then_replay_round_trip(tmp_path):
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from glove_ros.msg import DetectionArray, Transition

    bag = tmp_path / "run"
    log = open(tmp_path / "record.log", "w")  # noqa: SIM115 - closed below
    rec = subprocess.Popen(_bag_cmd("record", bag, "--progress", "0.1", "--topics",
                                    "transitions", "detections", "camera/image_raw",
                                    "current_waypoint", "world_events"),
                           stdout=log, stderr=subprocess.STDOUT)
    types = {"transitions": Transition, "detections": DetectionArray,
             "camera/image_raw": Image, "current_waypoint": String}
    # latched publishers keep their 5 messages for the recorder however late it matches
    latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    sent = [_messages(i) for i in range(5)]
    try:
        with ros_client("publisher") as node:
            pubs = {t: node.create_publisher(cls, t, latched) for t, cls in types.items()}
            wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 30,
                     "the recorder to subscribe", lambda: (tmp_path / "record.log").read_text())
            hashes = {t: str(node.get_publishers_info_by_topic("/" + t)[0].topic_type_hash)
                      for t in types}
            for msgs in sent:
                for t, msg in msgs.items():
                    pubs[t].publish(msg)
            wait_for(lambda: "record: 20 messages so far" in (tmp_path / "record.log")
                     .read_text(), 30, "all 20 messages recorded",
                     lambda: (tmp_path / "record.log").read_text())
        rec.send_signal(signal.SIGINT)
        assert rec.wait(20) == 0
    finally:
        if rec.poll() is None:
            rec.kill()
        log.close()
    text = (tmp_path / "record.log").read_text()
    assert "20 messages on 4 topics" in text and "/world_events never appeared" in text

    # the bag is complete: metadata, type hashes of the live publishers, content in order
    with BagReader(bag) as r:
        assert {t: n for t, (_typ, n) in r.topics.items()} == {
            "/transitions": 5, "/detections": 5, "/camera/image_raw": 5, "/current_waypoint": 5}
        outcomes = [r.decode(typ, raw).outcome
                    for _t, typ, _ns, raw in r.messages(["/transitions"])]
        assert outcomes == [f"colors=red{i}" for i in range(5)]
        assert r.qos("/current_waypoint").transient_local
    import yaml

    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["message_count"] == 20 and meta["version"] == 8
    for entry in meta["topics_with_message_count"]:
        tm = entry["topic_metadata"]
        assert tm["type_description_hash"] == hashes[tm["name"].lstrip("/")]

    # replay: same messages, same order, remapped where asked
    with ros_client("listener") as node:
        got = {"transitions": Collector(node, Transition, "/replayed/transitions"),
               "detections": Collector(node, DetectionArray, "detections"),
               "camera/image_raw": Collector(node, Image, "camera/image_raw"),
               "current_waypoint": Collector(node, String, "current_waypoint", latched)}
        original = Collector(node, Transition, "transitions")
        play = _play_paused(node, list(got.values()), bag, "--rate", "4",
                            "--remap", "/transitions:=/replayed/transitions")
        assert play.returncode == 0, play.stderr
        assert "published 20 messages" in play.stderr
        wait_for(lambda: all(len(c) == 5 for c in got.values()), 20, "replayed messages")
    assert got["transitions"].items == [m["transitions"] for m in sent]
    assert got["detections"].items == [m["detections"] for m in sent]
    assert [m.data.tobytes() if hasattr(m.data, "tobytes") else bytes(m.data)
            for m in got["camera/image_raw"].items] == [
        bytes(m["camera/image_raw"].data) for m in sent]
    assert [m.data for m in got["current_waypoint"].items] == [f"wp{i}" for i in range(5)]
    assert len(original) == 0  # remapped away


def test_replay_publishes_clock_from_bag_time():
    from rosgraph_msgs.msg import Clock

    from glove_ros.msg import Transition

    with BagReader(FIX / "small_source") as r:
        start, end = r.start_ns, r.end_ns
    with ros_client("clock_listener") as node:
        clock = Collector(node, Clock, "/clock", 1000)
        transitions = Collector(node, Transition, "/transitions")
        play = _play_paused(node, [clock, transitions], FIX / "small_source", "--topics",
                            "/transitions", "--clock", "--rate", "50")
        assert play.returncode == 0, play.stderr
        wait_for(lambda: len(clock) > 10 and len(transitions) == 30, 10, "/clock",
                 lambda: f"{len(clock)} clock, {len(transitions)} transitions")
    stamps = [c.clock.sec * NS + c.clock.nanosec for c in clock.items]
    assert all(start <= s <= end for s in stamps)
    assert stamps == sorted(stamps)


def test_replay_drives_the_observer(tmp_path):
    """Recorded detections -> observer process -> the same looks the robot recorded."""
    from glove_ros.msg import Transition

    with BagReader(FIX / "small_drifted") as r:
        recorded = [(m.state_key, m.outcome) for m in (
            r.decode(typ, raw) for _t, typ, _ns, raw in r.messages(["/transitions"]))
            if m.action == "look"]
    obs = NodeProcess("glove_ros.nodes.observer_node", tmp_path,
                      {"robot_id": "replayed", "episode_id": "bag"})
    try:
        with ros_client() as node:
            looks = Collector(node, Transition, "transitions")
            wait_for(lambda: node.count_publishers("transitions") > 0, 20, "observer", obs.log)
            play = subprocess.run(
                _bag_cmd("replay", FIX / "small_drifted", "--topics", "/detections",
                         "--rate", "50", "--wait-subscribers", "30"),
                capture_output=True, text=True, timeout=120)
            assert play.returncode == 0, play.stderr
            wait_for(lambda: len(looks) >= len(recorded), 20, "looks", obs.log)
        assert [(m.state_key, m.outcome) for m in looks.items] == recorded
        assert {(m.action, m.robot_id, m.episode_id) for m in looks.items} == {
            ("look", "replayed", "bag")}
    finally:
        assert obs.stop() == 0, obs.log()


def test_replay_of_a_type_not_installed_here(tmp_path):
    from rosbags.typesys import get_types_from_msg

    ts = make_typestore()
    ts.register(get_types_from_msg("int32 x", "acme_msgs/msg/Widget"))
    bag = tmp_path / "foreign"
    with BagWriter(bag, typestore=ts) as w:
        w.write_msg("/widget", 10 * NS, ts.types["acme_msgs/msg/Widget"](x=1))
        w.write_msg("/world_events", 11 * NS, ts.types["std_msgs/msg/String"](data="hi"))
    named = subprocess.run(_bag_cmd("replay", bag, "--topics", "/widget", "--delay", "0"),
                           capture_output=True, text=True, timeout=60)
    assert named.returncode == 2 and "Traceback" not in named.stderr
    assert named.stderr.strip().splitlines() == [named.stderr.strip()]
    assert "acme_msgs/msg/Widget" in named.stderr and "not installed" in named.stderr
    rest = subprocess.run(_bag_cmd("replay", bag, "--delay", "0"), capture_output=True,
                          text=True, timeout=60)
    assert rest.returncode == 0, rest.stderr
    assert "skipping /widget" in rest.stderr and "published 1 messages" in rest.stderr
