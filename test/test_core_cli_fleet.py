"""``glove-ros fleet`` and the fleet options of ``glove-ros launch``, without servers.

What must hold: the status report counts each event id once per robot (duplicates are
counted, not folded twice), names malformed messages, lists the fleet's suppressed
memories newest first, flags a robot whose clock is ahead of the hub by more than the bound,
and shows a registered robot that has sent nothing; the launch options refuse a robot
without a hub (and the reverse), a bad robot id, and a ``--param`` that names no node.
"""

from __future__ import annotations

import argparse

import pytest

from glove_ros.cli import fleet as fleet_cli
from glove_ros.cli import launcher
from glove_ros.core.memory.fleet import FleetError, FleetEvent, Hlc


class _Msg:
    def __init__(self, event: FleetEvent | None, stored: float, msg_id: str = "") -> None:
        self.event, self.stored = event, stored
        self.msg_id = msg_id or (event.event_id if event else "bad")
        self.subject = "glove.mem.x.recorded"


def _ev(robot: str, ms: int, kind: str, entry: str, place: str = "room_a",
        reason: str = "") -> FleetEvent:
    return FleetEvent(Hlc(ms, 0, robot), kind, entry, (place, "look", ""), "colors=red",
                      reason)


T0 = 1_800_000_000_000  # ms


def test_status_report_per_robot_and_the_fleets_suppressions():
    a1 = _ev("rA", T0, "recorded", "rA/1")
    a2 = _ev("rA", T0 + 1000, "suppressed", "rA/1", reason="dissonance: saw blue")
    b1 = _ev("rB", T0 + 500, "recorded", "rB/1", place="hall")
    b2 = _ev("rB", T0 + 2000, "suppressed", "rB/1", place="hall", reason="fleet: rA ...")
    skewed = _ev("rC", T0 + 9000, "recorded", "rC/1")  # 9 s ahead of the hub at arrival
    msgs = [_Msg(a1, T0 / 1000 + 0.05), _Msg(b1, T0 / 1000 + 0.6),
            _Msg(a2, T0 / 1000 + 1.02), _Msg(a2, T0 / 1000 + 1.5),  # a re-send
            _Msg(None, T0 / 1000 + 1.6), _Msg(b2, T0 / 1000 + 2.01),
            _Msg(skewed, T0 / 1000 + 3.0)]
    sources = {"rA": {"lag": 0, "active_s": 0.2, "error": ""},
               "rB": {"lag": 3, "active_s": 0.1, "error": ""},
               "rC": {"lag": 0, "active_s": 0.1, "error": ""},
               "rD": {"lag": 0, "active_s": None, "error": ""}}
    report = fleet_cli.status_report(msgs, sources, now=T0 / 1000 + 10)
    r = report["robots"]
    assert list(r) == ["rA", "rB", "rC", "rD"]
    assert (r["rA"]["events"], r["rA"]["duplicates"]) == (2, 1)
    assert r["rA"]["clock_offset_s"] == pytest.approx(0.02)  # the quickest of its events
    assert r["rB"]["lag"] == 3 and r["rB"]["last_event"]["kind"] == "suppressed"
    assert r["rB"]["last_event"]["age_s"] == pytest.approx(8.0, abs=0.1)
    assert r["rC"]["skewed"] and not r["rA"]["skewed"] and not r["rB"]["skewed"]
    assert r["rD"]["events"] == 0 and r["rD"]["registered"] and r["rD"]["last_event"] is None
    assert report["malformed"] == 1 and report["entries"] == 3
    assert [s["entry"] for s in report["suppressed"]] == ["rB/1", "rA/1"]  # newest first
    assert report["suppressed"][1]["reason"] == "dissonance: saw blue"
    text = fleet_cli.format_status(report, max_suppressed=1)
    assert "CLOCK AHEAD" in text and "2 of 3 fleet memories suppressed" in text
    assert "1 malformed" in text and "... 1 more" in text


def test_status_of_a_robot_the_hub_does_not_source_is_marked():
    report = fleet_cli.status_report([_Msg(_ev("rX", T0, "recorded", "rX/1"), T0 / 1000)],
                                     {}, now=T0 / 1000)
    assert not report["robots"]["rX"]["registered"]
    assert "not a source of FLEET" in fleet_cli.format_status(report)


def test_leaf_launch_gives_the_leaf_command_and_the_memory_parameters():
    assert fleet_cli.leaf_launch("", "") is None
    cmd, params = fleet_cli.leaf_launch("robot1", "nats-leaf://srv:7422", "4300", "/data/f")
    assert cmd[-8:] == ["leaf", "robot1", "--hub", "nats-leaf://srv:7422", "--port", "4300",
                        "--store", "/data/f"]
    assert params == {"fleet.url": "nats://127.0.0.1:4300", "fleet.robot_id": "robot1"}
    with pytest.raises(ValueError, match="fleet_robot needs fleet_hub"):
        fleet_cli.leaf_launch("robot1", "")
    with pytest.raises(ValueError, match="--fleet-hub needs --fleet-robot"):
        fleet_cli.leaf_launch("", "nats-leaf://srv:7422", option="--fleet-")
    with pytest.raises(FleetError, match="robot_id must be"):
        fleet_cli.leaf_launch("robot 1", "nats-leaf://srv:7422")


def test_launch_param_overrides_name_a_node_of_the_deployment():
    assert launcher.parse_params(["memory.db_path:=/d/r1.db", "memory.fleet.period:=0.1",
                                  "perception.backend:=color"], ["memory", "perception"]) == {
        "memory": {"db_path": "/d/r1.db", "fleet.period": "0.1"},
        "perception": {"backend": "color"}}
    with pytest.raises(ValueError, match="expected NODE.NAME:=VALUE"):
        launcher.parse_params(["db_path=/x"], ["memory"])
    with pytest.raises(ValueError, match="no node 'planner' in this deployment"):
        launcher.parse_params(["planner.x:=1"], ["memory"])


def test_launch_fleet_options_fit_together():
    ns = argparse.Namespace(fleet_robot="r1", fleet_hub="", fleet_port=4222, fleet_store="")
    with pytest.raises(ValueError, match="--fleet-robot needs --fleet-hub"):
        launcher.fleet_child(ns)
    ns.fleet_hub = "nats-leaf://srv:7422"
    cmd, params = launcher.fleet_child(ns)
    assert "leaf" in cmd and params["fleet.robot_id"] == "r1"
