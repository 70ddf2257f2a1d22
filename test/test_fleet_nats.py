"""Fleet memory through real NATS JetStream servers on loopback: a hub and two robots'
leaf servers, each robot with its own SQLite store and outbox.

What must hold: robot A's verified suppression reaches robot B's SQLite file and hides B's
matching memory; while the hub is down (killed with SIGKILL) A's writes are acknowledged
by its own server and reach B after the hub returns; a re-send after a crash between
publish and "sent" is a duplicate at the server, not a second event; the hub holds
exactly the events the robots wrote, each once.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("nats")

from glove_ros import fleet as fl  # noqa: E402
from glove_ros.core.memory.experience import Transition  # noqa: E402
from glove_ros.core.memory.fleet import Outbox  # noqa: E402
from glove_ros.core.memory.store import ExperienceStore  # noqa: E402


def _t(state, outcome):
    return Transition(state, "look", outcome, robot_id="r", episode_id="e")


async def _until(link_b, pred, timeout=30.0, also=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await link_b.sync(wait=0.1)
        if also is not None:
            await also.sync(wait=0.01)
        if pred():
            return time.monotonic()
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s; B stats {link_b.stats}")


async def _fleet_msgs(url):
    return await fl.stream_count(url, fl.HUB_DOMAIN, fl.FLEET_STREAM) or 0


@pytest.mark.usefixtures("nats_server")
def test_a_suppression_reaches_the_other_robot_also_across_a_hub_outage(tmp_path):
    hub, leaves = fl.local_servers(["rA", "rB"], tmp_path)
    a_store = ExperienceStore(str(tmp_path / "a.db"))
    b_store = ExperienceStore(str(tmp_path / "b.db"))
    try:
        hub.start()
        for s in leaves.values():
            s.start()
        a, b = Outbox(a_store, "rA"), Outbox(b_store, "rB")

        async def scenario():
            await fl.ensure_hub(hub.url, ["rA", "rB"])
            async with fl.FleetLink(a, leaves["rA"].url) as la, \
                    fl.FleetLink(b, leaves["rB"].url) as lb:
                ea = a_store.record(_t("room_a", "colors=red"))
                b_red = b_store.record(_t("room_a", "colors=red"))
                a_store.suppress([ea], "dissonance: saw colors=blue")
                t0 = time.monotonic()
                await la.publish_pending()

                def b_hidden(entry=b_red):
                    return b_store.get(entry).status.name == "SUPPRESSED"
                took = await _until(lb, b_hidden) - t0
                assert b_store.pending_for("room_a", "look") is not None

                # the hub is killed (SIGKILL: no clean shutdown); A keeps writing,
                # acknowledged by its own server
                hub.kill9()
                eb = a_store.record(_t("room_b", "colors=green"))
                b_green = b_store.record(_t("room_b", "colors=green"))
                a_store.suppress([eb], "dissonance: saw colors=")
                assert await la.publish_pending() == 2
                await lb.sync(rounds=3)
                assert b_store.get(b_green).status.name == "TRUSTED"  # nothing can arrive
                hub.start()
                t1 = time.monotonic()
                # (the hub re-creates its source consumers on its own back-off: ~40 s here)
                caught_up = await _until(
                    lb, lambda: b_store.get(b_green).status.name == "SUPPRESSED", timeout=90,
                    also=la)
                print(f"alert A -> B: {took * 1000:.0f} ms; caught up "
                      f"{caught_up - t1:.1f} s after the hub returned")

                # a crash after the server acknowledged but before "sent" was written:
                # the re-send is a duplicate at the server, not a new event
                with a_store.transaction():
                    a_store._exec("UPDATE fleet_outbox SET sent=0")
                before = la.stats.duplicates
                resent = await la.publish_pending()
                assert la.stats.duplicates - before == resent == len(a.events())

                # the hub holds every event each robot wrote, once
                await lb.publish_pending()
                total = len(a.events()) + len(b.events())
                end = time.monotonic() + 30
                while await _fleet_msgs(hub.url) < total and time.monotonic() < end:
                    await asyncio.sleep(0.1)
                assert await _fleet_msgs(hub.url) == total
                assert lb.stats.malformed == 0 and la.stats.malformed == 0
                return took

        took = asyncio.run(scenario())
        assert took < 30
    finally:
        a_store.close()
        b_store.close()
        for s in [*leaves.values(), hub]:
            s.stop()


@pytest.mark.usefixtures("nats_server")
def test_bench_fleet_smoke(tmp_path):
    """``glove-ros bench fleet`` on a tiny fleet (3 robots, no hub outage, no leaf
    restart and no conflict phase: test_fleet_faults.py runs it; three crashes of 3
    events; a 2-robot value phase on the small world) writes its JSON: every suppression
    reached every other robot, the hub holds what was written, a robot killed with SIGKILL
    mid-publish loses and duplicates nothing, and sharing never adds stale goals."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "glove_ros.cli", "bench", "fleet", "--robots", "3",
         "--alerts", "3", "--duration", "2", "--rate", "20", "--outage", "0",
         "--leaf-outage", "0", "--crash-events", "3", "--no-conflict",
         "--value-robots", "2", "--world", "small", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "fleet.json").read_text())
    (run,) = doc["runs"]
    value = doc["value"]
    assert value["robots"] == 2 and value["world"] == "small"
    for arm in ("alone", "shared"):  # the same tasks in both arms
        assert value[arm]["tasks_after_drift"] == value["alone"]["tasks_after_drift"] > 0
    assert value["shared"]["stale_goals"] <= value["alone"]["stale_goals"]
    prop = run["propagation"]
    assert prop["applied"] == 3 * 2 and prop["missed_after_30s"] == 0
    assert run["throughput"]["catch_up_after_s"] is not None
    assert run["partition"] is None and run["link_errors"] == 0
    assert run["leaf_restart"] is None
    acked = {"before_publish": 0, "mid_batch": 2, "after_ack": 3}  # of 3, before the kill
    for name, n in acked.items():
        crash = run["crashes"][name]
        assert crash["same_ids_pending"] and crash["pending_after_restart"] == 3
        assert crash["duplicates_at_server"] == crash["acked_before_kill"] == n
        assert crash["lost"] == crash["duplicates_at_hub"] == crash["missing_at_hub"] == 0
    assert "robot killed -9" in out.stdout
    assert "alert->all" in out.stdout


@pytest.mark.usefixtures("nats_server")
def test_a_robot_that_boots_before_the_hub_gets_a_fresh_inbox_once_registered(tmp_path):
    """A robot whose streams were made while the hub was down: once it is registered, its
    still empty ``IN_`` stream is re-made (the old one's source waits out the server's
    back-off) and receives another robot's event; an ``IN_`` that holds events is never
    re-made (nothing it holds is thrown away)."""
    hub, leaves = fl.local_servers(["rA", "rB"], tmp_path)
    b_store = ExperienceStore(str(tmp_path / "b.db"))
    b = Outbox(b_store, "rB")

    async def in_count(robot):
        return await fl.stream_count(leaves[robot].url, robot, f"IN_{robot}") or 0

    try:
        leaves["rA"].start()
        fl.run(fl.prepare_robot(leaves["rA"].url, "rA"))  # the hub is not running yet
        hub.start()
        leaves["rB"].start()
        fl.run(fl.ensure_hub(hub.url, []))
        fl.run(fl.prepare_robot(leaves["rB"].url, "rB"))
        for robot in ("rA", "rB"):  # each registers itself once its leaf link is up
            end = time.monotonic() + 30
            while True:
                try:
                    fl.run(fl.ensure_hub(leaves[robot].url, [robot], timeout=2.0))
                    break
                except Exception:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.5)
        assert fl.run(fl.restart_empty_inbox(leaves["rA"].url, "rA")) is True
        b_store.record(_t("room", "colors=red"))

        async def send_and_wait():
            async with fl.FleetLink(b, leaves["rB"].url) as link:
                await link.publish_pending()
            end = time.monotonic() + 60
            while time.monotonic() < end:
                if await in_count("rA") and await in_count("rB"):
                    return
                await asyncio.sleep(0.2)
            raise AssertionError("rB's event never reached IN_rA / IN_rB")

        fl.run(send_and_wait())
        held = fl.run(in_count("rA"))
        assert fl.run(fl.restart_empty_inbox(leaves["rA"].url, "rA")) is False
        assert fl.run(in_count("rA")) == held  # kept, with what it holds
    finally:
        b_store.close()
        for s in [*leaves.values(), hub]:
            s.stop()


@pytest.mark.usefixtures("nats_server")
def test_a_hub_on_a_taken_port_says_why_and_exits_1(tmp_path):
    """``glove-ros fleet hub`` on ports another hub holds: one line naming the port, exit
    code 1, no traceback, and the first hub keeps running."""
    import subprocess
    import sys

    port, leaf = fl.free_port(), fl.free_port()
    cmd = [sys.executable, "-m", "glove_ros.cli", "fleet", "hub", "--port", str(port),
           "--leaf-port", str(leaf)]
    first = subprocess.Popen([*cmd, "--store", str(tmp_path / "a")], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert "hub up" in first.stdout.readline()
        second = subprocess.run([*cmd, "--store", str(tmp_path / "b")], capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 1
        assert "cannot start the hub server" in second.stderr
        assert "address already in use" in second.stderr
        assert "Traceback" not in second.stderr + second.stdout
        assert first.poll() is None
    finally:
        first.terminate()
        first.wait(30)
