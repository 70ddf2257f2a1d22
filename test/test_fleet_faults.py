"""Fleet memory under faults, through real NATS JetStream servers on loopback: a robot
process killed with SIGKILL while it publishes, and a robot whose own leaf server restarts.

What must hold after each fault: the hub's ``FLEET`` stream holds exactly the event ids in
the robot's SQLite outbox, each once (compared id by id: none lost, none duplicated); an
event committed before the kill is pending again after the restart under the same id; a
re-send of an event the server had already acknowledged is a duplicate at the server and
nothing new at the hub; what a robot writes while its own server is down stays pending and
is delivered after the server returns.

The robot process is a real child process (``glove_ros.benchmarks.fleet.crash_robot``,
the same one ``glove-ros bench fleet`` kills in its crashes phase); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

pytest.importorskip("nats")

from glove_ros import fleet as fl  # noqa: E402
from glove_ros.benchmarks import fleet as bf  # noqa: E402
from glove_ros.core.memory.experience import Transition  # noqa: E402
from glove_ros.core.memory.fleet import Outbox  # noqa: E402
from glove_ros.core.memory.store import ExperienceStore  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("nats_server")]


def _t(state, outcome, robot="r"):
    return Transition(state, "look", outcome, robot_id=robot, episode_id="e")


@contextlib.contextmanager
def _servers(tmp_path, robots):
    """A hub and the robots' leaf servers, started; stopped afterwards."""
    hub, leaves = fl.local_servers(robots, tmp_path)
    try:
        hub.start()
        for s in leaves.values():
            s.start()
        yield hub, leaves
    finally:
        for s in [*leaves.values(), hub]:
            s.stop()


def _first_start(db, robot, leaf_url, hub_url):
    """The robot's first start: its outbox and streams exist before the hub sources them
    (a hub sourcing a stream that does not exist yet backs off for many seconds)."""

    async def go():
        with ExperienceStore(db) as store:
            async with fl.FleetLink(Outbox(store, robot), leaf_url):
                pass
        await fl.ensure_hub(hub_url, [robot])

    asyncio.run(asyncio.wait_for(go(), 30))


def _recover(db, robot, leaf_url, hub_url):
    return asyncio.run(asyncio.wait_for(
        bf.recover_robot(db, robot, leaf_url, hub_url, timeout=30), 60))


def _assert_hub_equals_robot(rec, expected_ids):
    """The hub holds every id of the robot's outbox once, and nothing else of it."""
    hub_ids, robot_ids = rec["hub_ids"], rec["robot_ids"]
    assert len(set(hub_ids)) == len(hub_ids), "duplicates at the hub"
    assert sorted(hub_ids) == sorted(robot_ids) == sorted(expected_ids)
    assert rec["duplicates_at_hub"] == rec["missing_at_hub"] == rec["unknown_at_hub"] == 0


def test_a_robot_killed_between_commit_and_publish_loses_and_duplicates_nothing(tmp_path):
    """A robot process publishes 5 transitions, commits 10 more (each with its outbox row)
    and is killed with SIGKILL before publishing them. After the restart exactly those 10
    ids are pending, in order; publishing them adds 10 new messages at the robot's server
    (no duplicate); the hub then holds the robot's 15 ids, each once."""
    with _servers(tmp_path, ["rA"]) as (hub, leaves):
        db, url = str(tmp_path / "rA.db"), leaves["rA"].url
        _first_start(db, "rA", url, hub.url)
        child = bf.run_crashed_robot(db, "rA", url, sent=5, committed=10, acked=0,
                                     timeout=60)
        assert len(child["sent"]) == 5 and len(child["committed"]) == 10
        t0 = time.monotonic()
        rec = _recover(db, "rA", url, hub.url)
        assert rec["pending_ids"] == child["committed"]  # the same ids again
        assert rec["published"] == 10 and rec["duplicates_at_server"] == 0
        assert rec["left_pending"] == 0 and rec["hub_complete_s"] is not None
        _assert_hub_equals_robot(rec, child["sent"] + child["committed"])
        print(f"recovered (all acknowledged) {rec['recovered_s'] * 1000:.0f} ms, hub "
              f"complete {rec['hub_complete_s'] * 1000:.0f} ms after the restart "
              f"({time.monotonic() - t0:.1f} s with the id check)")


def test_a_robot_killed_after_the_ack_before_mark_sent_resends_only_duplicates(tmp_path):
    """Killed after its leaf server acknowledged the publish but before the outbox marked
    the rows sent: first all 10 committed events acknowledged, then (a second run of the
    same robot) 4 of 10. What must hold: what the server acknowledged reaches the hub
    although the process died; after each restart all the unmarked ids are pending again;
    re-sending them is a duplicate at the server for each acknowledged one and adds
    nothing new at the hub for them; the hub holds exactly the robot's ids, each once."""
    with _servers(tmp_path, ["rA"]) as (hub, leaves):
        db, url = str(tmp_path / "rA.db"), leaves["rA"].url
        _first_start(db, "rA", url, hub.url)
        expected: list[str] = []
        for sent, committed, acked in ((5, 10, 10), (0, 10, 4)):
            child = bf.run_crashed_robot(db, "rA", url, sent=sent, committed=committed,
                                         acked=acked, timeout=60)
            assert len(child["sent"]) == sent and len(child["committed"]) == committed
            expected += child["sent"] + child["committed"]
            at_kill = len(expected) - committed + acked  # at the hub before the restart
            assert asyncio.run(bf.until_robot_at_hub(hub.url, "rA", at_kill, 30)) \
                is not None, f"the {acked} acknowledged events did not reach the hub"
            rec = _recover(db, "rA", url, hub.url)
            assert rec["pending_ids"] == child["committed"]  # acknowledged, never marked
            assert rec["published"] == committed and rec["left_pending"] == 0
            assert rec["duplicates_at_server"] == acked  # the re-send of those: duplicates
            assert rec["hub_events"] == len(expected)  # only the unacknowledged are new
            _assert_hub_equals_robot(rec, expected)
            print(f"{acked} of {committed} acked before the kill: {acked} duplicates at "
                  f"the server; recovered {rec['recovered_s'] * 1000:.0f} ms, hub complete "
                  f"{rec['hub_complete_s'] * 1000:.0f} ms")


def test_a_robot_whose_own_leaf_server_restarts_delivers_what_it_wrote_meanwhile(tmp_path):
    """Robot A's own leaf server is stopped for 3 s and restarted while A keeps writing
    (10 transitions/s; while the server is down A's verifier also suppresses its memory of
    the red block at room_x). A's link is the memory node's ``FleetBridge`` (reconnects with
    back-off). What must hold: every event A wrote while its server was down is still
    pending in its outbox when the server returns (nothing is marked sent that no server
    acknowledged); afterwards A's link publishes them; the hub holds exactly A's and B's
    outbox ids, each once; and B's own memory of the red block at room_x is suppressed (A's
    discovery made while cut off reached B)."""
    with _servers(tmp_path, ["rA", "rB"]) as (hub, leaves):
        a_store = ExperienceStore(str(tmp_path / "a.db"))
        b_store = ExperienceStore(str(tmp_path / "b.db"))
        a, b = Outbox(a_store, "rA"), Outbox(b_store, "rB")
        logs: list[str] = []
        bridges = [fl.FleetBridge(box, leaves[r].url, period=0.1, log=logs.append)
                   for box, r in ((a, "rA"), (b, "rB"))]
        try:
            for br in bridges:
                br.start()
            end = time.monotonic() + 20
            while not all(br.connected for br in bridges) and time.monotonic() < end:
                time.sleep(0.05)
            assert all(br.connected for br in bridges), logs
            asyncio.run(fl.ensure_hub(hub.url, ["rA", "rB"]))  # streams exist by now
            b_red = b_store.record(_t("room_x", "colors=red", "rB"))

            def write(seconds, tag):
                stop = time.monotonic() + seconds
                i = 0
                while time.monotonic() < stop:
                    a_store.record(_t(f"{tag}{i}", "colors=", "rA"))
                    i += 1
                    time.sleep(0.1)

            write(1.0, "up")
            before = {e.event_id for e in a.events()}
            leaves["rA"].stop()
            write(1.5, "down")
            a_red = a_store.record(_t("room_x", "colors=red", "rA"))
            a_store.suppress([a_red], "dissonance: saw colors=blue")
            write(1.5, "down2")
            wrote_down = [e.event_id for e in a.events() if e.event_id not in before]
            pending = {e.event_id for _, e in a.pending(10**6)}
            assert len(wrote_down) >= 20
            assert set(wrote_down) <= pending, "an event written with the server down " \
                "was marked sent"
            assert b_store.get(b_red).status.name == "TRUSTED"
            leaves["rA"].start()
            t_up = time.monotonic()
            write(1.0, "back")

            published = at_hub = None
            end = time.monotonic() + 60
            while time.monotonic() < end:
                if published is None and not a.pending(1):
                    published = time.monotonic() - t_up
                done = (published is not None and not b.pending(1)
                        and b_store.get(b_red).status.name == "SUPPRESSED"
                        and asyncio.run(bf.hub_robot_count(hub.url, "rA")) == len(a.events())
                        and asyncio.run(bf.hub_robot_count(hub.url, "rB")) == len(b.events()))
                if done:
                    at_hub = time.monotonic() - t_up
                    break
                time.sleep(0.2)
            assert published is not None, f"A's link never published again: {logs}"
            assert at_hub is not None, (
                f"not caught up 60 s after A's server returned: hub "
                f"{asyncio.run(bf.hub_robot_count(hub.url, 'rA'))} of {len(a.events())} A "
                f"events; B's red memory {b_store.get(b_red).status.name}; {logs}")
            time.sleep(1.0)  # a late duplicate would arrive meanwhile
            hub_ids = asyncio.run(asyncio.wait_for(bf.hub_event_ids(hub.url), 30))
            robot_ids = [e.event_id for e in a.events()] + [e.event_id for e in b.events()]
            assert len(set(hub_ids)) == len(hub_ids), "duplicates at the hub"
            assert sorted(hub_ids) == sorted(robot_ids)
            assert b_store.pending_for("room_x", "look") is not None  # B re-verifies
            print(f"A's server down 3 s: {len(wrote_down)} events held back; A's link "
                  f"published them {published:.1f} s after its server returned; hub and B "
                  f"caught up {at_hub:.1f} s after")
        finally:
            for br in bridges:
                br.stop()
            a_store.close()
            b_store.close()


@pytest.mark.timeout(180)
def test_conflict_and_skew_converge_over_the_servers(tmp_path):
    """The issue's conflict case over real servers (``bench fleet``'s conflict phase): cA,
    offline, suppresses E; cB re-trusts E with an older clock; cX's clock is 5 s ahead.
    Afterwards every robot has received every event, every robot's fold gives the same
    digest with E suppressed, and cA and cB flagged cX's clock (its events still applied)."""
    r = asyncio.run(bf.run_conflict(tmp_path, skew_ms=5000, timeout=120))
    assert r["converged_after_s"] is not None, r
    assert set(r["e_status"].values()) == {"suppressed"}, r
    assert r["digests_equal"], r
    assert r["skew_flags"]["cA"] >= 1 and r["skew_flags"]["cB"] >= 1, r
    assert r["skew_flags"]["cX"] == 0, r
