"""Docking without a dock service (issue 31): HiWonder's JetRover publishes only the pack
voltage (std_msgs/UInt16 millivolts); docked = at the dock waypoint and charging, charging
read from a rising voltage (or a BatteryState status)."""

from __future__ import annotations

import math

import pytest

from glove_ros.core.ops.dock import DockConfig, DockDetector


def _volts(det, start_t, mvs, dt=1.0):
    for i, mv in enumerate(mvs):
        det.on_millivolts(start_t + i * dt, mv)


def test_rising_voltage_at_the_dock_is_docked_and_a_sag_undocks():
    det = DockDetector(DockConfig("UInt16", "dock", rise_mv=40, window_s=30))
    det.on_waypoint("dock")
    _volts(det, 0, [11800] * 5)  # parked, not plugged in
    assert not det.docked
    _volts(det, 5, [11820, 11850, 11900])  # the charger lifts the pack voltage
    assert det.charging and det.docked
    _volts(det, 8, [11905 + i for i in range(60)])  # full: flat, still charging
    assert det.docked
    _volts(det, 68, [11950, 11850])  # unplugged under load
    assert not det.charging and not det.docked


def test_noise_below_the_rise_never_flips_the_verdict():
    det = DockDetector(DockConfig("UInt16", "dock", rise_mv=40, window_s=30))
    det.on_waypoint("dock")
    _volts(det, 0, [11800, 11825, 11795, 11820, 11790, 11825] * 5)  # 35 mV of noise
    assert not det.charging


def test_charging_away_from_the_dock_is_not_docked_and_leaving_forgets_it():
    det = DockDetector(DockConfig("UInt16", "dock", rise_mv=40, window_s=30))
    det.on_waypoint("kitchen")
    _volts(det, 0, [11800, 11900])
    assert det.charging and not det.docked  # charged by hand in the kitchen
    det.on_waypoint("dock")
    _volts(det, 2, [11800, 11900])
    assert det.docked
    det.on_waypoint("")  # drove off
    assert not det.docked
    det.on_waypoint("dock")  # back, not plugged in: must show charging again
    _volts(det, 10, [11700, 11700])
    assert not det.docked


def test_battery_state_status_and_any_place_when_no_dock_is_named():
    det = DockDetector(DockConfig("BatteryState", ""))
    det.on_waypoint("hall")
    det.on_status(True)
    assert det.docked
    det.on_status(False)
    assert not det.docked


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf])
def test_bad_readings_are_ignored_with_a_reason(bad):
    det = DockDetector(DockConfig("UInt16", "dock"))
    det.on_waypoint("dock")
    _volts(det, 0, [11800, 11900])
    assert "ignored" in det.on_millivolts(3, bad)
    assert det.docked  # the bad reading changed nothing


def test_clock_running_backwards_starts_a_new_window():
    det = DockDetector(DockConfig("UInt16", "dock", rise_mv=40, window_s=30))
    det.on_waypoint("dock")
    _volts(det, 100, [11800, 11800])
    _volts(det, 0, [11900])  # a restarted clock: no comparison across it
    assert not det.charging


@pytest.mark.parametrize("cfg, match", [
    (DockConfig("Float32"), "battery type"),
    (DockConfig("UInt16", rise_mv=0), "rise"),
    (DockConfig("UInt16", window_s=math.nan), "window"),
])
def test_config_is_validated(cfg, match):
    with pytest.raises(ValueError, match=match):
        DockDetector(cfg)
