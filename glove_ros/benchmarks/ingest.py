"""``glove-ros bench ingest``: the memory node under load, through DDS.

For each durability setting (``--synchronous``: FULL, NORMAL) and each offered rate
(``--rates``, transitions per second) one run starts, as separate processes on one ROS domain
of its own:

* the memory node (``glove_ros.nodes.memory_node``, verifier on, defaults otherwise) on a
  fresh database, subscribed to ``transitions``;
* a bare rclpy subscriber on the same topic with the same QoS (reliable, the same depth) that only
  counts messages: what DDS + rclpy deliver on this machine, measured beside the node in the
  same run;
* a query client, as the planner is on the robot, that calls ``query_memory`` back to back
  (one waypoint, newest 20) and times every call; the calls sent between the first publish
  and the last commit count.

This process publishes ``--duration`` seconds of transitions at the offered rate (50
waypoints, ``look``, one outcome per waypoint: the verifier's steady state; the messages are
built before the clock starts and stamped as they are sent). When publishing ends it waits
until the node's ``memory_stats`` show an empty queue, stops the processes and counts the
rows in the database. (Until 2026-12-04 the query client ran in this process, where the
publishing loop's Python delayed its replies: p99 8-128 ms and one 0.2-2.2 s stall per run,
none of it spent in the memory node, whose callbacks took over 30 ms once in four runs.)

Reported per run: offered and achieved publish rate, rows stored, sustained ingest rate
(rows / time from the first publish to the last commit), the node's own counters (dropped,
failed, rejected, dds_lost), **unreported loss** = published - stored - every counted drop
(the promise is 0), what the bare subscriber received, the ratio ours / bare, and query
latency p50 / p99 / max while ingesting. ``--json`` prints the JSON document, which is also
written to ``--out``/ingest.json (plus ingest.png).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import write_results
from glove_ros.procs import stop_process, wait_until

TARGET_RATE = 1000.0
TARGET_P99_MS = 50.0
_WAYPOINTS = 50
_COLOURS = ("red", "green", "blue", "yellow")

_BARE = r"""
import signal, sys, rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from glove_ros.msg import Transition
rclpy.init()
node = rclpy.create_node("bare_subscriber")
count = [0]
def cb(msg):
    count[0] += 1
node.create_subscription(Transition, "transitions", cb,
                         QoSProfile(depth=int(sys.argv[1]), reliability=ReliabilityPolicy.RELIABLE))
stop = [False]
signal.signal(signal.SIGINT, lambda *a: stop.__setitem__(0, True))
print("ready", flush=True)
while not stop[0]:
    rclpy.spin_once(node, timeout_sec=0.1)
print("received", count[0], flush=True)
node.destroy_node()
rclpy.try_shutdown()
"""

# The query client: its own process, as the planner is on the robot, so the publisher's
# Python loop in this process does not delay its replies. It calls ``query_memory`` back to
# back until SIGINT and writes "<wall time sent> <latency s>" lines to argv[1].
_QUERIER = r"""
import signal, sys, threading, time, rclpy
from rclpy.executors import SingleThreadedExecutor
from glove_ros.srv import QueryMemory
rclpy.init()
node = rclpy.create_node("bench_querier")
client = node.create_client(QueryMemory, "query_memory")
executor = SingleThreadedExecutor()
executor.add_node(node)
spinner = threading.Thread(target=executor.spin, daemon=True)
spinner.start()
stop = [False]
signal.signal(signal.SIGINT, lambda *a: stop.__setitem__(0, True))
client.wait_for_service(timeout_sec=60)
req = QueryMemory.Request(state_key=sys.argv[2], action="look", max_results=20)
for _ in range(3):  # the first reply after discovery may be lost: warm the path up
    fut = client.call_async(req)
    done = threading.Event()
    fut.add_done_callback(lambda _f, d=done: d.set())
    done.wait(2.0)
print("ready", flush=True)
with open(sys.argv[1], "w") as out:
    while not stop[0]:
        sent, t0 = time.time(), time.perf_counter()
        fut = client.call_async(req)
        done = threading.Event()
        fut.add_done_callback(lambda _f, d=done: d.set())
        if not done.wait(10.0):
            client.remove_pending_request(fut)
        out.write(f"{sent:.6f} {time.perf_counter() - t0:.6f}\n")
executor.shutdown()
spinner.join(5)
node.destroy_node()
rclpy.try_shutdown()
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench ingest``."""
    parser.add_argument("--rates", default="1000,1500",
                        help="offered rates, transitions/s, comma-separated (default %(default)s)")
    parser.add_argument("--synchronous", default="FULL,NORMAL",
                        help="durability settings to run (default %(default)s)")
    parser.add_argument("--duration", type=float, default=10.0,
                        help="seconds of publishing per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per (setting, rate), for the run-to-run spread")
    parser.add_argument("--seed", type=int, default=0, help="seed of the waypoint order")
    parser.add_argument("--depth", type=int, default=10000,
                        help="DDS history depth of both subscribers (default %(default)s)")
    parser.add_argument("--out", default="bench/results", help="directory for ingest.json")
    parser.add_argument("--stem", default="ingest", help="file name stem of the results")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def _transition(i: int, order: list[int]) -> Any:
    from glove_ros.msg import Transition

    wp = order[i % len(order)]
    return Transition(robot_id="bench", episode_id=f"e{i // 100}", state_key=f"wp{wp}",
                      action="look", outcome=f"colors={_COLOURS[wp % len(_COLOURS)]}",
                      context=f"seq={i}")


def _stamped(t: Any) -> Any:
    """``t`` stamped now (the publish time)."""
    now = time.time()
    t.header.stamp.sec = int(now)
    t.header.stamp.nanosec = int((now % 1) * 1e9)
    return t


def _spawn(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                            env=env)


def run_once(sync: str, rate: float, duration: float, seed: int, depth: int,
             workdir: Path) -> dict[str, Any]:
    """One run (see the module docstring); returns its measurements."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from glove_ros.msg import Transition
    from glove_ros.nodes.common import BackgroundSpinner

    env = dict(os.environ)
    db = workdir / f"ingest_{sync}_{int(rate)}_{seed}.db"
    node_log, bare_log = workdir / f"memory_{sync}.log", workdir / f"bare_{sync}.log"
    memory = _spawn([sys.executable, "-m", "glove_ros.nodes.memory_node", "--ros-args",
                     "-p", f"db_path:={db}", "-p", f"synchronous:={sync}",
                     "-p", f"ingest.depth:={depth}", "-p", "stats_period:=0.1"], node_log, env)
    bare = _spawn([sys.executable, "-u", "-c", _BARE, str(depth)], bare_log, env)
    order = list(range(_WAYPOINTS))
    random.Random(seed).shuffle(order)
    query_log, latency_file = workdir / f"querier_{sync}.log", workdir / f"latency_{sync}.txt"
    latency_file.unlink(missing_ok=True)
    querier = _spawn([sys.executable, "-u", "-c", _QUERIER, str(latency_file),
                      f"wp{order[0]}"], query_log, env)
    node = rclpy.create_node(f"bench_ingest_{os.getpid()}")
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    spinner = BackgroundSpinner(executor)
    stats: list[dict[str, int]] = []

    def on_stats(msg: DiagnosticStatus) -> None:
        stats.append({kv.key: int(kv.value) for kv in msg.values})

    try:
        node.create_subscription(DiagnosticStatus, "memory_stats", on_stats, 10)
        pub = node.create_publisher(
            Transition, "transitions",
            QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() >= 2 and "ready" in bare_log.read_text()
              and "ready" in query_log.read_text(), 90, "both subscribers and the querier")
        time.sleep(1.0)  # let discovery settle on both sides
        n = int(round(rate * duration))
        messages = [_transition(i, order) for i in range(n)]  # built before the clock starts
        start, wall_start = time.perf_counter(), time.time()
        for i in range(n):
            due = start + i / rate
            lag = due - time.perf_counter()
            if lag > 0:
                time.sleep(lag)
            pub.publish(_stamped(messages[i]))
        publish_s = time.perf_counter() - start

        last_change = [time.perf_counter(), -1]

        def settled() -> bool:
            """Everything accounted for, or nothing new committed for 3 s (the rest is lost)."""
            if not stats:
                return False
            s = stats[-1]
            if s["committed"] != last_change[1]:
                last_change[:] = [time.perf_counter(), s["committed"]]
            accounted = (s["committed"] + s["rejected"] + s["dropped"] + s["failed"]
                         + s["dds_lost"])
            return s.get("queued", 1) == 0 and (
                accounted >= n or time.perf_counter() - last_change[0] > 3.0)

        wait_until(settled, duration * 6 + 60, "the node to commit what it received")
        # the last commit happened before the stats message that showed it
        ingest_s = (last_change[0] if last_change[1] >= 0 else time.perf_counter()) - start
        window = (wall_start, wall_start + ingest_s)
        final = dict(stats[-1])
    finally:
        spinner.stop()  # no callback outlives the executor
        node.destroy_node()
        stop_process(querier)
        code = stop_process(memory)
        stop_process(bare)
    received = 0
    for line in bare_log.read_text().splitlines():
        if line.startswith("received"):
            received = int(line.split()[1])
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        stored = int(c.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
    counted = final["dropped"] + final["failed"] + final["rejected"] + final["dds_lost"]
    latencies = []  # the calls sent while transitions were published and committed
    for line in latency_file.read_text().splitlines() if latency_file.exists() else []:
        sent, took = (float(v) for v in line.split())
        if window[0] <= sent <= window[1]:
            latencies.append(took)
    lat = np.array(latencies) * 1000.0
    return {
        "synchronous": sync,
        "offered_rate": rate,
        "published": n,
        "publish_s": round(publish_s, 3),
        "achieved_publish_rate": round(n / publish_s, 1),
        "stored": stored,
        "ingest_s": round(ingest_s, 3),
        "sustained_rate": round(stored / ingest_s, 1),
        "drain_s": round(ingest_s - publish_s, 3),
        "node_counters": final,
        "counted_drops": counted,
        "unreported_loss": n - stored - counted,
        "bare_received": received,
        "bare_loss": n - received,
        "ratio_stored_to_bare": round(stored / received, 4) if received else None,
        "queries": len(latencies),
        "query_p50_ms": round(float(np.percentile(lat, 50)), 2) if len(lat) else None,
        "query_p99_ms": round(float(np.percentile(lat, 99)), 2) if len(lat) else None,
        "query_max_ms": round(float(lat.max()), 2) if len(lat) else None,
        "node_exit_code": code,
        "largest_batch": final.get("largest_batch"),
        "batches": final.get("batches"),
    }


def format_table(doc: Mapping[str, Any]) -> str:
    """One line per run."""
    head = (f"{'sync':<7}{'offered/s':>10}{'pub/s':>9}{'stored':>8}{'ingest/s':>10}"
            f"{'counted':>9}{'unrep.':>8}{'bare rx':>9}{'ours/bare':>10}{'q p50':>8}"
            f"{'q p99':>8}{'q max':>8}")
    lines = [head]
    for r in doc["runs"]:
        lines.append(
            f"{r['synchronous']:<7}{r['offered_rate']:>10.0f}{r['achieved_publish_rate']:>9.0f}"
            f"{r['stored']:>8}{r['sustained_rate']:>10.0f}{r['counted_drops']:>9}"
            f"{r['unreported_loss']:>8}{r['bare_received']:>9}"
            f"{(r['ratio_stored_to_bare'] or 0):>10.3f}{r['query_p50_ms']:>8.1f}"
            f"{r['query_p99_ms']:>8.1f}{r['query_max_ms']:>8.1f}")
    v = doc["verdict"]
    lines.append(f"target: >= {TARGET_RATE:.0f}/s sustained, 0 unreported loss, query p99 < "
                 f"{TARGET_P99_MS:.0f} ms -> {'MET' if v['met'] else 'NOT MET'} ({v['why']})")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """Sustained ingest vs bare-subscriber delivery, and query p99, per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = doc["runs"]
    labels = [f"{r['synchronous']}\n{r['offered_rate']:.0f}/s" for r in runs]
    x = np.arange(len(runs))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    ax1.bar(x - 0.2, [r["sustained_rate"] for r in runs], 0.4, label="memory node stored/s")
    ax1.bar(x + 0.2, [r["bare_received"] / r["ingest_s"] for r in runs], 0.4,
            label="bare subscriber received/s")
    ax1.axhline(TARGET_RATE, color="k", ls="--", lw=0.8)
    ax1.set_xticks(x, labels)
    ax1.set_ylabel("transitions / s")
    ax1.legend(fontsize=8)
    ax2.bar(x, [r["query_p99_ms"] for r in runs], 0.5, color="tab:orange")
    ax2.axhline(TARGET_P99_MS, color="k", ls="--", lw=0.8)
    ax2.set_xticks(x, labels)
    ax2.set_ylabel("query_memory p99 while ingesting, ms")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdict(runs: list[Mapping[str, Any]]) -> tuple[bool, str]:
    """The issue's target: every run loses nothing unreported and answers queries with p99
    under 50 ms, and for every durability setting some run sustains >= 1,000 stored/s.

    A run offered exactly 1,000/s cannot show 1,000/s sustained (the last commit comes a
    few ms after the last publish), so the sustained rate is shown by an offered rate above
    it; a run that falls behind its offered rate shows as a large ``drain_s``.
    """
    if not runs:
        return False, "no runs"
    problems = [f"{r['synchronous']} {r['offered_rate']:.0f}/s: unreported "
                f"{r['unreported_loss']}, p99 {r['query_p99_ms']} ms" for r in runs
                if r["unreported_loss"] != 0 or r["query_p99_ms"] is None
                or r["query_p99_ms"] >= TARGET_P99_MS]
    for sync in sorted({r["synchronous"] for r in runs}):
        best = max(r["sustained_rate"] for r in runs if r["synchronous"] == sync)
        if best < TARGET_RATE:
            problems.append(f"{sync}: best sustained {best:.0f}/s < {TARGET_RATE:.0f}/s")
    if problems:
        return False, "; ".join(problems)
    return True, ("every run: 0 unreported loss, query p99 < 50 ms; every setting sustains "
                  ">= 1000/s")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; print the table (or JSON) and write ``ingest.json``."""
    try:
        rates = [float(r) for r in str(args.rates).split(",") if r.strip()]
        syncs = [s.strip().upper() for s in str(args.synchronous).split(",") if s.strip()]
        if not rates or any(r <= 0 for r in rates):
            raise ValueError("--rates needs positive numbers")
        if not syncs or any(s not in ("FULL", "NORMAL") for s in syncs):
            raise ValueError("--synchronous takes FULL and/or NORMAL")
        if args.duration <= 0 or args.repeats < 1:
            raise ValueError("--duration must be > 0 and --repeats >= 1")
    except ValueError as exc:
        print(f"bench ingest: {exc}", file=sys.stderr)
        return 2
    try:
        import rclpy
    except ImportError:
        print("bench ingest: needs ROS 2 (rclpy); source env.sh", file=sys.stderr)
        return 2
    if "ROS_DOMAIN_ID" not in os.environ:  # a domain of its own: no cross-talk
        os.environ["ROS_DOMAIN_ID"] = str(random.Random().randint(110, 200))
    runs: list[dict[str, Any]] = []
    rclpy.init()
    try:
        with tempfile.TemporaryDirectory(prefix="glove_ingest_") as tmp:
            for rep in range(args.repeats):
                for sync in syncs:
                    for rate in rates:
                        r = run_once(sync, rate, args.duration, args.seed + rep, args.depth,
                                     Path(tmp))
                        r["repeat"] = rep
                        runs.append(r)
                        print(f"  {sync} {rate:.0f}/s rep {rep}: stored {r['stored']}/"
                              f"{r['published']}, {r['sustained_rate']:.0f}/s, unreported "
                              f"{r['unreported_loss']}, q p99 {r['query_p99_ms']} ms",
                              file=sys.stderr, flush=True)
    finally:
        rclpy.try_shutdown()
    met, why = verdict(runs)
    load = os.getloadavg()
    doc = {
        "benchmark": "ingest",
        "settings": {"rates": rates, "synchronous": syncs, "duration_s": args.duration,
                     "repeats": args.repeats, "seed": args.seed, "depth": args.depth,
                     "waypoints": _WAYPOINTS, "verifier": "on (node defaults)",
                     "ingest": "node defaults (max_batch 256, max_delay 2 ms, queue 20000)",
                     "query": "query_memory one waypoint, newest 20, back to back",
                     "bare_subscriber": "rclpy.spin_once loop, counts only, same QoS"},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_at_end": [round(x, 2) for x in load],
                    "rmw": os.environ.get("RMW_IMPLEMENTATION", "")},
        "runs": runs,
        "verdict": {"met": met, "why": why},
    }
    return write_results(doc, args.out, args.stem, write_plot, format_table, args.json)
