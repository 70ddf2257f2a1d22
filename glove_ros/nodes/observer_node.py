"""Observer node: per-frame detections -> one look transition per stay at a waypoint.

Turns perception's detection stream into the memory's look experiences, so that
camera -> perception -> observer -> memory works without the planner (a bag replayed
with ``glove-ros bag replay``, a robot driven by hand or by another stack). The rule
(a colour, or an object class, seen in >= k of the first n frames of each stay; robust to
one missed detection) lives in :mod:`glove_ros.core.world.observation`.

The look's kind follows the ``backend`` of each DetectionArray: ``color`` gives colour looks
(``colors=blue,red``), ``darknet`` and ``yolo`` object looks with counts
(``objects=cup,person*2``: a class's count is the number of instances most of the frames
that showed it agree on, ties to the smaller), an empty ``backend`` (old bags) is inferred
from the detections. A frame from an unknown backend, or with a class name a look cannot
hold, is dropped with a warning.

Interfaces (relative names; remap in launch):
  sub  detections          glove_ros/DetectionArray  tagged with the waypoint by perception
  sub  current_waypoint    std_msgs/String  only with use_current_waypoint: ends a stay at
                           once when the robot leaves. Stays are already delimited by the
                           waypoint tags of the detections (in order); use this only when the
                           camera does not stream while driving and the same waypoint can be
                           looked at twice in a row. A waypoint message may overtake the last
                           detections of a stay (separate topics), cutting it short.
  pub  transitions         glove_ros/Transition  (W, "look", "colors=..." or
                           "objects=...") per stay

Lifecycle: configure validates the parameters; activate opens the interfaces; deactivate
closes them and emits the look of an unfinished stay if it has enough frames.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import String

from glove_ros import conversions as conv
from glove_ros.core.world.observation import (
    Frame,
    Look,
    LookAggregator,
    LookConfig,
    kind_of_backend,
)
from glove_ros.msg import DetectionArray
from glove_ros.msg import Transition as TransitionMsg
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    latched_qos,
    param_values,
    run,
    validating_callback,
)

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("robot_id", "", "robot_id of the published transitions, e.g. 'jetrover_1'"),
    Param("episode_id", "", "episode_id of the published transitions (live: set per task)"),
    Param("context", "", "task context of the published transitions (informational)"),
    Param("look.frames", 3, "frames judged per stay (n)", read_only=True),
    Param("look.min_count", 2, "frames out of n a colour or object class must be seen in (k)",
          read_only=True),
    Param("look.min_frames", 2, "a stay with fewer judged frames gives no look",
          read_only=True),
    Param("look.skip_frames", 0, "frames dropped at the start of each stay (camera settling)",
          read_only=True),
    Param("look.min_confidence", 0.0, "detections below this confidence are ignored",
          read_only=True),
    Param("look.max_gap", 5.0, "seconds between frames of one waypoint that split two stays "
          "(0 disables)", read_only=True),
    Param("use_current_waypoint", False, "also end a stay when current_waypoint changes",
          read_only=True),
)


def look_config(values: dict[str, Any]) -> LookConfig:
    """The core look rule from the ``look.*`` parameters (validated)."""
    raw = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("look.")}
    return LookConfig.from_dict(raw)


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    look_config(values)
    for key in ("robot_id", "episode_id"):
        if len(str(values[key])) > 256:
            raise ValueError(f"{key} is longer than 256 characters")


def frame_from_msg(msg: DetectionArray, min_confidence: float = 0.0) -> Frame:
    """glove_ros/DetectionArray -> core Frame (waypoint tag, colours or object classes with
    counts, header stamp); the frame's kind comes from ``msg.backend``
    (:func:`~glove_ros.core.world.observation.kind_of_backend`), so a trained detector's
    empty frame is an object frame. ValueError for an unknown backend or a class name that
    a look signature cannot hold."""
    return Frame.from_detections(msg.waypoint, msg.detections,
                                 conv.seconds_from_time(msg.header.stamp), min_confidence,
                                 kind=kind_of_backend(msg.backend))


class ObserverNode(LifecycleNode):
    """Publishes one look transition per stay (thin: the rule lives in glove_ros.core)."""

    def __init__(self) -> None:
        super().__init__("observer")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._config: LookConfig | None = None
        self._agg: LookAggregator | None = None
        self._lock = threading.Lock()
        self._handles: list[Any] = []
        self._pub = None

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            values = param_values(self, PARAMS)
            validate(values)
            self._config = look_config(values)
        except ValueError as exc:
            self.get_logger().error(f"cannot configure observer: {exc}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._agg = LookAggregator(self._config)
        self._pub = self.create_publisher(TransitionMsg, "transitions", 50)
        self._handles = [self.create_subscription(DetectionArray, "detections",
                                                  self._on_detections, 50)]
        if self.get_parameter("use_current_waypoint").value:
            self._handles.append(self.create_subscription(String, "current_waypoint",
                                                          self._on_waypoint, latched_qos()))
        c = self._config
        assert c is not None
        self.get_logger().info(
            f"observer active: a colour or object class counts when seen in {c.min_count} of "
            f"the first {c.frames} frames of a stay")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        for h in self._handles:
            self.destroy_subscription(h)
        self._handles = []
        with self._lock:
            looks = self._agg.flush() if self._agg is not None else []
        self._publish(looks)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._agg = None
        return TransitionCallbackReturn.SUCCESS

    def _on_detections(self, msg: DetectionArray) -> None:
        assert self._config is not None
        try:
            frame = frame_from_msg(msg, self._config.min_confidence)
        except ValueError as exc:  # unknown backend, unusable class name: drop, keep running
            self.get_logger().warning(f"dropped detections at '{msg.waypoint}': {exc}",
                                      throttle_duration_sec=10.0)
            return
        with self._lock:
            mixed = self._agg.mixed_kinds if self._agg is not None else 0
            looks = self._agg.add(frame) if self._agg is not None else []
            if self._agg is not None and self._agg.mixed_kinds > mixed:
                self.get_logger().warning(
                    f"the detections at '{msg.waypoint}' changed kind to {frame.kind} "
                    f"(backend '{msg.backend}') within one stay: judging it by the "
                    f"{frame.kind} frames only")
        self._publish(looks)

    def _on_waypoint(self, msg: String) -> None:
        with self._lock:
            looks = self._agg.waypoint_changed(msg.data) if self._agg is not None else []
        self._publish(looks)

    def _publish(self, looks: Sequence[Look]) -> None:
        if not looks or self._pub is None:
            return
        robot = str(self.get_parameter("robot_id").value)
        episode = str(self.get_parameter("episode_id").value)
        context = str(self.get_parameter("context").value)
        for look in looks:
            try:
                t = look.to_transition(robot, episode, context=context)
            except ValueError as exc:  # e.g. an over-long waypoint tag: drop, keep running
                self.get_logger().warning(f"dropped look at '{look.waypoint}': {exc}")
                continue
            self._pub.publish(conv.transition_to_msg(t))
            self.get_logger().info(
                f"look at {look.waypoint}: {look.outcome} ({look.judged} frames"
                f"{', partial stay' if look.partial else ''})")


def main(args: Sequence[str] | None = None) -> int:
    """Run the observer node."""
    return run(ObserverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
