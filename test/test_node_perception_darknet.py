"""The perception node with the shipped detector (backend darknet), in its own process: a
real photo on the camera topic comes back as a DetectionArray with the object in it; a bad
class of interest keeps the node inactive with a log line that says why. Downstream, the
observer turns a trained detector's frames into object looks (``objects=cup``), not colours."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from conftest import require_darknet  # noqa: E402
from rosproc import Collector, NodeProcess, ros_client, wait_for  # noqa: E402

from glove_ros.benchmarks._perception_darknet import PHOTO_TRUTH, package_file  # noqa: E402

NODE = "glove_ros.nodes.perception_node"


def _image_msg(path):
    import cv2
    from sensor_msgs.msg import Image

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    msg = Image(height=bgr.shape[0], width=bgr.shape[1], encoding="bgr8",
                step=bgr.shape[1] * 3)
    msg.data = bgr.tobytes()
    return msg


@pytest.fixture(scope="module")
def coffee():
    require_darknet()
    path = package_file(*PHOTO_TRUTH["coffee.png"][:2])
    assert path is not None, "scikit-image's coffee.png is missing: run scripts/setup.sh"
    return path


def test_a_photo_of_a_cup_is_published_as_a_cup(tmp_path, coffee):
    from glove_ros.msg import DetectionArray

    proc = NodeProcess(NODE, tmp_path, {"backend": "darknet", "infer_when": "always",
                                        "classes": ["mug", "person"],  # mug: COCO's cup
                                        "darknet.class_thresholds": ["cup=0.5"]})
    try:
        with ros_client("darknet_test") as node:
            got = Collector(node, DetectionArray, "detections")
            pub = node.create_publisher(type(_image_msg(coffee)), "camera/image_raw", 5)
            msg = _image_msg(coffee)

            def answered() -> bool:
                if not got.items:
                    pub.publish(msg)  # until the node is active and matched
                return bool(got.items)

            wait_for(answered, 60, "a DetectionArray for the coffee photo", proc.log)
            out = got.items[0]
            assert out.backend == "darknet"
            assert [d.label for d in out.detections] == ["cup"], out.detections
            cup = out.detections[0]
            assert cup.confidence > 0.5 and cup.color == ""
            assert cup.x >= 0 and cup.x + cup.width <= 600 and cup.y + cup.height <= 400
        assert "perception active with the darknet backend (classes: mug, person)" in proc.log()
    finally:
        assert proc.stop() == 0, proc.log()


def test_an_unknown_class_keeps_the_node_inactive(tmp_path, coffee):
    proc = NodeProcess(NODE, tmp_path, {"backend": "darknet", "classes": ["unicorn"]})
    try:
        wait_for(lambda: "cannot load the darknet detector" in proc.log()
                 or not proc.alive(), 60, "the failed activate", proc.log)
        log = proc.log()
        assert "'unicorn' is not one of the model's 80 classes" in log, log
        assert proc.alive(), log
    finally:
        proc.stop()


def test_trained_detector_messages_carry_the_canonical_class_and_no_colour():
    """What perception publishes for each backend: darknet and yolo send the canonical class
    with an empty colour (a red sofa is a couch, not "red"); color sends label and colour."""
    from glove_ros.core.world.perception import Detection as Det
    from glove_ros.nodes.perception_node import detection_msgs

    dets = [Det("sofa", "red", 1, 2, 3, 4, 0.9), Det("tvmonitor", "", 5, 6, 7, 8, 0.2)]
    for backend in ("darknet", "yolo"):
        msgs = detection_msgs(dets, backend, min_confidence=0.1)
        assert [(m.label, m.color, m.x, m.height) for m in msgs] == [
            ("couch", "", 1, 4), ("tv", "", 5, 8)]
        assert [m.label for m in detection_msgs(dets, backend, 0.5)] == ["couch"]
    msgs = detection_msgs([Det("block", "red", 1, 2, 3, 4, 0.9)], "color")
    assert [(m.label, m.color) for m in msgs] == [("block", "red")]


def test_observer_frames_take_their_kind_from_the_backend():
    """An empty DetectionArray of darknet is an object frame (so its look reads 'objects='),
    one of the color backend a colour frame; an unknown backend is refused."""
    from glove_ros.msg import Detection, DetectionArray
    from glove_ros.nodes.observer_node import frame_from_msg

    empty = frame_from_msg(DetectionArray(backend="darknet", waypoint="hall"))
    assert (empty.waypoint, empty.kind, dict(empty.counts)) == ("hall", "objects", {})
    two = DetectionArray(backend="yolo", waypoint="hall", detections=[
        Detection(label="person", confidence=0.9), Detection(label="person", confidence=0.8)])
    assert dict(frame_from_msg(two).counts) == {"person": 2}
    colour = DetectionArray(backend="color", waypoint="hall", detections=[
        Detection(label="block", color="red", confidence=0.9)])
    assert (frame_from_msg(colour).kind, frame_from_msg(colour).colors) == (
        "colors", frozenset({"red"}))
    with pytest.raises(ValueError, match="unknown perception backend 'hsv'"):
        frame_from_msg(DetectionArray(backend="hsv"))


def test_camera_perception_observer_record_a_cup_as_an_object_look(tmp_path, coffee):
    """Over DDS: the coffee photo at 'kitchen' -> perception (darknet) -> observer -> the
    look (kitchen, look, objects=cup): an object class, not the cup's colour."""
    from std_msgs.msg import String

    from glove_ros.msg import Transition
    from glove_ros.nodes.common import latched_qos

    perception = NodeProcess(NODE, tmp_path, {"backend": "darknet", "classes": ["cup", "person"],
                                              "darknet.class_thresholds": ["cup=0.5"]})
    observer = NodeProcess("glove_ros.nodes.observer_node", tmp_path,
                           {"robot_id": "rover", "episode_id": "ep1"})

    def logs() -> str:
        return perception.log() + "\n--- observer ---\n" + observer.log()

    try:
        with ros_client("darknet_observer_test") as node:
            looks = Collector(node, Transition, "transitions")
            where = node.create_publisher(String, "current_waypoint", latched_qos())
            where.publish(String(data="kitchen"))  # perception infers only at a waypoint
            msg = _image_msg(coffee)
            pub = node.create_publisher(type(msg), "camera/image_raw", 5)

            def looked() -> bool:
                if not looks.items:
                    pub.publish(msg)  # one frame per poll until the look is out
                return bool(looks.items)

            wait_for(looked, 90, "the observer's look at kitchen", logs)
            look = looks.items[0]
            assert (look.state_key, look.action, look.outcome, look.robot_id) == (
                "kitchen", "look", "objects=cup", "rover"), logs()
        assert "look at kitchen: objects=cup (3 frames)" in observer.log()
    finally:
        assert observer.stop() == 0, observer.log()
        assert perception.stop() == 0, perception.log()
