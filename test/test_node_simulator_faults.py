"""A publish failure inside the simulator's timer (RCLError under load, seen in a reliability
trial: the battery publish failed and the node died, resetting the world) loses one sample and
never the node (issue 31). In-process: the node's publishers are made to fail."""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros


def test_a_failing_publish_in_the_timer_is_counted_and_the_world_goes_on():
    from rclpy.lifecycle import TransitionCallbackReturn

    from glove_ros.nodes.simulator_node import SimulatorNode

    rclpy.init(args=["--ros-args", "-p", "world:=small", "-p", "autostart:=false"])
    try:
        node = SimulatorNode()
        try:
            assert node.on_configure(None) == TransitionCallbackReturn.SUCCESS
            assert node.on_activate(None) == TransitionCallbackReturn.SUCCESS

            def boom(*_a, **_k):
                raise RuntimeError("Failed to publish: simulated RCLError")

            for pub in node._pubs.values():
                pub.publish = boom
            t0 = node._sim.time
            for _ in range(3):
                node._step()  # must not raise
            assert node._publish_failures == 3
            assert node._sim.time > t0  # the world kept moving
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
