"""Gazebo events node: the world file's drift events, applied to the running Gazebo world.

Timed events (``time:`` in the world file) fire when simulated time (``/clock``, so run it
with ``use_sim_time: true``) reaches them; episode events when an ``episode_start``
announces their episode (``glove-ros demo`` / ``live`` publish it). Each event becomes gz
service calls on the world's UserCommands services: a block moved -> ``set_pose``, a
corridor blocked / re-opened -> ``create`` / ``remove`` of its barrier, a nuisance obstacle
-> ``create`` / ``remove`` (:mod:`glove_ros.core.world.gzevents`). The calls run as the
``ign service`` (Fortress) or ``gz service`` (Harmonic) command with a timeout; a call that
fails is logged as an error with the command's answer and the node goes on.

Interfaces (relative names):
  sub  episode_start      std_msgs/UInt32
  pub  gz_events          std_msgs/String (one line per applied or failed request)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String, UInt32

from glove_ros.core.world.gzevents import GzEventScheduler, Runner, apply_requests, run_command
from glove_ros.core.world.gzrobot import gz_flavour
from glove_ros.core.world.worldfile import load_world
from glove_ros.nodes.common import Param, declare_params, param_values, run
from glove_ros.paths import resolve_world

PARAMS = (
    Param("world", "jetrover_maze", "world file (a path or a bundled world's name): the one "
          "the Gazebo world was generated from", read_only=True),
    Param("gz_version", "", "fortress (ign service) or harmonic (gz service); '' = from "
          "ROS_DISTRO (humble -> fortress, jazzy/kilted -> harmonic)", read_only=True),
    Param("world_name", "", "the SDF <world name> the services live under; '' = the world "
          "file's name (what glove-ros sdf writes)", read_only=True),
    Param("episode", 0, "the episode the SDF was generated at (its events are in it already)",
          read_only=True),
    Param("period", 0.25, "seconds (simulated) between checks of the clock", read_only=True),
    Param("timeout", 5.0, "seconds one gz service call may take before it counts as failed"),
)


class GzEventsNode(Node):
    """Applies the world's events to Gazebo at their simulated time or episode."""

    def __init__(self, runner: Runner = run_command) -> None:
        super().__init__("gz_events")
        declare_params(self, PARAMS)
        values = param_values(self, PARAMS)
        world = load_world(resolve_world(str(values["world"])))
        self._flavour = gz_flavour(str(values["gz_version"]))
        self._runner = runner
        self._scheduler = GzEventScheduler(world, world_name=str(values["world_name"]),
                                           episode=int(values["episode"]))
        group = MutuallyExclusiveCallbackGroup()
        self._pub = self.create_publisher(String, "gz_events", 10)
        self.create_subscription(UInt32, "episode_start", self._on_episode, 10,
                                 callback_group=group)
        self._timer = self.create_timer(float(values["period"]), self._on_tick,
                                        callback_group=group)
        pending = self._scheduler.pending()
        self.get_logger().info(
            f"{len(pending)} pending event(s) of world '{world.name}' for Gazebo "
            f"{self._flavour.name} ({self._flavour.cli} service on "
            f"/world/{self._scheduler.world_name}/...)")

    def _on_episode(self, msg: UInt32) -> None:
        self._apply(self._scheduler.advance(episode=int(msg.data)))

    def _on_tick(self) -> None:
        now = self.get_clock().now().nanoseconds / 1e9
        if now > 0.0:  # 0 until the first /clock message arrives
            self._apply(self._scheduler.advance(time=now))

    def _apply(self, steps: Sequence[Any]) -> None:
        timeout = float(self.get_parameter("timeout").value)
        for step in steps:
            when = f"t={step.time:.2f}s" if step.time is not None else f"episode {step.episode}"
            for ev in step.events:
                self.get_logger().info(f"{when}: {ev.describe()}")
            for ev in step.skipped:
                self.get_logger().info(f"{when}: {ev.type} acts on the built-in simulator's "
                                       "camera / odometry only; nothing to change in Gazebo")
            for outcome in apply_requests(step.requests, self._flavour, self._runner, timeout):
                line = f"{when}: {outcome.request.what}: " + ("ok" if outcome.ok else "FAILED")
                if outcome.ok:
                    self.get_logger().info(line)
                else:
                    self.get_logger().error(
                        f"{line} ({outcome.output}); command: "
                        f"{' '.join(outcome.request.command(self._flavour, timeout)[:5])} ...")
                self._pub.publish(String(data=line))


def main(args: Sequence[str] | None = None) -> int:
    """Run the gz_events node."""
    return run(GzEventsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
