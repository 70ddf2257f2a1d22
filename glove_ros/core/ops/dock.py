"""Is the robot docked? From where it stands and what its battery says (ROS-free).

Dock-time consolidation runs while the robot charges. Robots say "charging" differently:

* ``BatteryState`` (sensor_msgs): ``power_supply_status`` CHARGING or FULL means on the
  charger. Our simulator and many bases publish it.
* ``UInt16`` millivolts: HiWonder's JetRover driver publishes only the pack voltage
  (``/ros_robot_controller/battery``, std_msgs/UInt16) and has no dock service. A charger
  shows as the voltage *rising*: :class:`DockDetector` calls the robot charging when the
  newest reading is at least ``rise_mv`` above the lowest reading of the last ``window_s``
  seconds, and no longer charging when it is ``rise_mv`` below the highest one (unplugged:
  the voltage sags back under load). Between the two it keeps its last verdict
  (hysteresis), so sensor noise smaller than ``rise_mv`` never flips it.

Docked = charging **and** standing at the dock waypoint (when one is named): a robot charged
by hand in the corridor is not on its dock, and one parked at the dock with a flat,
unplugged battery is not charging. Leaving the dock waypoint undocks at once.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

BATTERY_TYPES = ("BatteryState", "UInt16")


@dataclass(frozen=True)
class DockConfig:
    """How docking is recognised.

    Attributes:
        battery_type: ``BatteryState`` (charging from its status) or ``UInt16`` (millivolts;
            charging from a rising voltage).
        dock_waypoint: the waypoint the charger is at; ``""`` = charging anywhere counts.
        rise_mv: the voltage rise (and, unplugged, the fall) that decides, millivolts.
        window_s: seconds of readings the rise is measured over.
    """

    battery_type: str = "BatteryState"
    dock_waypoint: str = ""
    rise_mv: float = 40.0
    window_s: float = 30.0

    def validate(self) -> None:
        """Raise ValueError with a message a user can act on."""
        if self.battery_type not in BATTERY_TYPES:
            raise ValueError(f"battery type must be one of {', '.join(BATTERY_TYPES)} "
                             f"(got '{self.battery_type}')")
        if not (math.isfinite(self.rise_mv) and self.rise_mv > 0):
            raise ValueError(f"charging rise must be > 0 mV (got {self.rise_mv})")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"charging window must be > 0 s (got {self.window_s})")


class DockDetector:
    """Folds waypoint and battery readings into one ``docked`` verdict."""

    def __init__(self, config: DockConfig) -> None:
        config.validate()
        self.config = config
        self.charging = False
        self.waypoint = ""  # where the robot stands ("" while driving or unknown)
        self._volts: deque[tuple[float, float]] = deque()  # (time s, millivolts)

    @property
    def docked(self) -> bool:
        """Charging, at the dock waypoint when one is named."""
        at_dock = not self.config.dock_waypoint or self.waypoint == self.config.dock_waypoint
        return self.charging and at_dock

    def on_waypoint(self, waypoint: str) -> None:
        """The robot's current waypoint (``""`` while driving). Leaving the dock forgets the
        charging verdict: coming back must show charging again."""
        dock = self.config.dock_waypoint
        if dock and waypoint != dock and self.waypoint == dock:
            self.charging = False
            self._volts.clear()
        self.waypoint = waypoint

    def on_status(self, charging: bool) -> None:
        """A BatteryState reading: CHARGING or FULL is ``charging``."""
        self.charging = bool(charging)

    def on_millivolts(self, t: float, millivolts: float) -> str:
        """A voltage reading at time ``t`` (seconds). Returns ``""``, or why it was ignored
        (zero, negative or non-finite readings: a driver that has not read the pack yet)."""
        if not (math.isfinite(millivolts) and millivolts > 0 and math.isfinite(t)):
            return f"ignored battery reading {millivolts} mV"
        if self._volts and t < self._volts[-1][0]:
            self._volts.clear()  # the clock ran backwards: start a new window
        self._volts.append((t, float(millivolts)))
        while self._volts and self._volts[0][0] < t - self.config.window_s:
            self._volts.popleft()
        values = [mv for _t, mv in self._volts]
        if millivolts - min(values) >= self.config.rise_mv:
            self.charging = True
        elif max(values) - millivolts >= self.config.rise_mv:
            self.charging = False
        return ""
