"""``glove-ros bench robot``: the ``jetrover`` profile against the stock-JetRover emulation.

Robot truth (issue 31): the nodes are measured against an independent emulation of the stack
a stock HiWonder JetRover runs underneath them (test/stock_jetrover.py: AMCL-style
``amcl_pose`` that is silent while the robot stands, the ``UInt16`` millivolt battery that
rises on the charger, the Dabai camera topic, a ``navigate_to_pose`` server that plans its own
route over the site's corridors, closes corridors on request and honours cancel). The graph is
started exactly as test/test_system_stock_jetrover.py starts it (test/stock_rig.py: every node
of the ``jetrover`` deployment in its own process, config/jetrover.yaml, a site file with
waypoints and corridors and no blocks, the greedy planner, the rule consolidator, dock by
voltage, ``every_k_episodes`` 1). The emulator is a test double and stays under test/: this
benchmark runs from a source checkout only (exit 2 from a pip install).

``--tasks N`` tasks (default 20), drawn with ``--seed``: four scenarios once each at seeded
places in the sequence, the rest from a mix of "go to the <waypoint>" (half), "find the
<colour> block" (a quarter; colours from perception's colour table) and "return to the dock"
(a quarter, never right after a dock: it would drive nothing); targets are drawn when the
task comes, from where the robot then is.

* **still**: the robot stands ``--still`` s (default 30) wherever it is, then a "go to" task.
* **cancel**: "go to" a waypoint two or more corridors away, cancelled 0.5 s after the robot
  began driving along a corridor; latency = cancel request -> the emulator's report that the
  goal ended (it stops the robot first); odometry's stop is reported beside it.
* **detour**: a corridor from the robot's waypoint (one on a loop) is closed in the emulator,
  then "go to" its other end: Nav2 drives around; the corridor is reopened after.
* **dock_voltage**: "return to the dock" (after a set-up "find" when no episode waits for
  consolidation), then the robot stays until a consolidation report arrives (at most 60 s)
  and 10 s more.

Measured: task success (go: succeeded and odometry at the waypoint; find: found, or "searched
every reachable waypoint" - the site has no blocks and the camera sees a plain wall; dock:
succeeded and at the dock; cancel: ended as cancelled); transitions recorded (navigate_to
entries of the memory database, per task) vs corridors driven (consecutive waypoints of each
``emulator/route``), with those missing and extra; transitions dropped (the planner's "not
recording" warnings; those during a stand-still and its next task separately) and "driver
restarted" warnings; wrong corridor outcomes (a closed corridor recorded as reached while it
was closed, an open corridor recorded as blocked); cancel latency; consolidations per dock
(docks from the consolidation node's "docked" / "undocked" log lines; a dock with episodes
waiting should give exactly one run, one without none). Set-up tasks are run and reported but
not counted in the success rate. Writes ``--out``/robot.json (settings, seed, every task) and
robot.png; prints a table (``--json``: the JSON).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import re
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from glove_ros.benchmarks import write_results
from glove_ros.procs import private_ros_domain
from glove_ros.progress import Progress, add_progress_argument

TARGETS = {"success_rate": 0.95, "dropped_stationary": 0, "wrong_corridor_outcomes": 0,
           "cancel_latency_s": 1.0, "consolidations_per_dock": 1}
SCENARIOS = ("still", "cancel", "detour", "dock_voltage")
MIX = (("go", 0.5), ("find", 0.25), ("dock", 0.25))
TIMEOUTS = {"find": 300.0}  # seconds per task; others 120
DOCK_WAIT_S, DOCK_SETTLE_S = 60.0, 10.0
_LOG_LINE = re.compile(r"\[(\d+(?:\.\d+)?)\] \[[^\]]*\]: (docked|undocked)\s*$")
_NOT_RECORDING = re.compile(r"not recording (\d+) transition")
_RESTART = "driver restarted; no transition"  # the planner's warning when its pose stream restarts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench robot``."""
    parser.add_argument("--tasks", type=int, default=20,
                        help="tasks in the run, the four scenarios included (>= 4; default "
                        "%(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task draw")
    parser.add_argument("--still", type=float, default=30.0,
                        help="seconds the robot stands still before one task (default "
                        "%(default)s: AMCL stays silent meanwhile)")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="m/s of the emulated robot (default %(default)s; the real one "
                        "drives 0.3-0.5)")
    parser.add_argument("--workdir", default="",
                        help="keep the site file, database and node logs here (default: a "
                        "temporary folder, removed)")
    parser.add_argument("--out", default="bench/results", help="directory for robot.json")
    parser.add_argument("--stem", default="robot", help="file name stem of the results")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    add_progress_argument(parser)


# ---------------------------------------------------------------- pure parts (no ROS)


def draw_plan(n: int, seed: int) -> list[str]:
    """The kinds of ``n`` tasks: each scenario once at a seeded place, the rest from MIX.

    A "return to the dock" is never drawn where the robot is at the dock already (first, or
    after a dock): it would drive nothing; another kind of the mix is drawn instead."""
    rng = random.Random(seed)
    kinds, weights = [k for k, _ in MIX], [w for _, w in MIX]
    plan = rng.choices(kinds, weights, k=n)
    for kind, i in zip(SCENARIOS, rng.sample(range(n), len(SCENARIOS)), strict=True):
        plan[i] = kind
    prev = "dock"  # the robot starts at the dock
    for i, kind in enumerate(plan):
        if kind == "dock" and prev in ("dock", "dock_voltage"):
            plan[i] = rng.choices([k for k in kinds if k != "dock"],
                                  [w for k, w in MIX if k != "dock"])[0]
        prev = plan[i]
    return plan


def hops(corridors: list[tuple[str, str]], start: str) -> dict[str, int]:
    """Corridors between ``start`` and every waypoint (breadth first)."""
    out, queue = {start: 0}, deque([start])
    while queue:
        w = queue.popleft()
        for a, b in corridors:
            n = b if a == w else a if b == w else None
            if n is not None and n not in out:
                out[n] = out[w] + 1
                queue.append(n)
    return out


def loop_corridors(corridors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Corridors on a loop: closing one leaves every waypoint reachable (Nav2 drives around)."""
    everyone = {w for c in corridors for w in c}
    return [c for c in corridors
            if set(hops([d for d in corridors if d != c], c[0])) == everyone]


def route_pairs(route: str, corridors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The corridors a route ``"a,b,c"`` drove, in its direction."""
    known = {frozenset(c) for c in corridors}
    wps = [w for w in route.split(",") if w]
    return [(a, b) for a, b in zip(wps, wps[1:], strict=False) if frozenset((a, b)) in known]


def compare_drives(driven: list[tuple[str, str]], recorded: list[tuple[str, str]]
                   ) -> tuple[int, int]:
    """(missing, extra): corridors driven without a reached entry, and the reverse."""
    d, r = Counter(driven), Counter(recorded)
    return sum((d - r).values()), sum((r - d).values())


def per_dock(docks: list[tuple[float, float]], reports: list[float], outcomes: list[float]
             ) -> list[dict[str, Any]]:
    """Consolidation runs per dock interval ``(docked, undocked)`` and the episodes waiting
    at docking (task outcomes since the last run before it)."""
    out = []
    for t0, t1 in docks:
        before = [t for t in reports if t < t0]
        since = before[-1] if before else -math.inf
        waiting = sum(1 for t in outcomes if since <= t < t0)
        runs = sum(1 for t in reports if t0 <= t <= t1 + 2.0)
        out.append({"docked_s": round(t0, 1), "undocked_s": round(t1, 1),
                    "episodes_waiting": waiting, "consolidations": runs,
                    "expected": 1 if waiting else 0})
    return out


def verdict(m: Mapping[str, Any]) -> tuple[bool, str]:
    """Issue 31's Done-when numbers."""
    problems = []
    if m["success_rate"] < TARGETS["success_rate"]:
        problems.append(f"success {m['success_rate']:.0%} < 95%")
    if m["transitions_dropped_stationary"]:
        problems.append(f"{m['transitions_dropped_stationary']} dropped while stationary")
    if m["wrong_corridor_outcomes"]:
        problems.append(f"{m['wrong_corridor_outcomes']} wrong corridor outcome(s)")
    lat = m["cancel_latency_max_s"]
    if lat is None or lat > TARGETS["cancel_latency_s"]:
        problems.append(f"cancel latency {lat} s > 1 s" if lat is not None
                        else "no cancel measured")
    docks = [d for d in m["docks"] if d["expected"]]
    if not docks:
        problems.append("no dock with episodes waiting")
    bad = [d for d in m["docks"] if d["consolidations"] != d["expected"]]
    if bad:
        problems.append(f"{len(bad)} dock(s) without exactly the expected consolidation "
                        f"({[d['consolidations'] for d in bad]})")
    if problems:
        return False, "; ".join(problems)
    return True, "success >= 95%, 0 dropped while stationary, 0 wrong corridor outcomes, " \
                 "cancel <= 1 s, one consolidation per dock"


def format_table(doc: Mapping[str, Any]) -> str:
    """Per task kind, then the measures against issue 31's targets."""
    m, s = doc["metrics"], doc["settings"]
    lines = [f"bench robot: {s['tasks']} tasks (seed {s['seed']}) on the stock-JetRover "
             f"emulation, {doc['wall_s']:.0f} s", f"{'kind':<14}{'tasks':>6}{'ok':>5}"
             f"{'mean s':>8}"]
    for kind, k in m["by_kind"].items():
        lines.append(f"{kind:<14}{k['tasks']:>6}{k['ok']:>5}{k['mean_s']:>8.1f}")
    setups = [t for t in doc["tasks"] if t["role"] == "setup"]
    if setups:
        lines.append(f"(+ {len(setups)} set-up task(s), {sum(t['success'] for t in setups)} ok)")
    lat = m["cancel_latency_max_s"]
    docks = [d["consolidations"] for d in m["docks"] if d["expected"]]
    rows = [
        ("task success", f"{m['tasks_ok']}/{m['tasks']} ({m['success_rate']:.0%})", ">= 95%",
         m["success_rate"] >= TARGETS["success_rate"]),
        ("transitions recorded / driven", f"{m['transitions_recorded']} / "
         f"{m['corridors_driven']} (missing {m['transitions_missing']}, extra "
         f"{m['transitions_extra']})", "", None),
        ("transitions dropped", f"{m['transitions_dropped']} ({m['drop_warnings']} warnings)",
         "", None),
        ("  of them while stationary", str(m["transitions_dropped_stationary"]), "0",
         m["transitions_dropped_stationary"] == 0),
        ("driver-restart warnings", f"{m['driver_restarts']} "
         f"({m['driver_restarts_stationary']} while stationary)", "", None),
        ("wrong corridor outcomes", str(m["wrong_corridor_outcomes"]), "0",
         m["wrong_corridor_outcomes"] == 0),
        ("cancel latency (max)", "-" if lat is None else f"{lat:.2f} s (odometry "
         f"{m['cancel_stop_odom_max_s']} s)", "<= 1 s",
         lat is not None and lat <= TARGETS["cancel_latency_s"]),
        ("consolidations per dock", f"{docks} ({len(m['docks'])} dock(s) in all)", "1",
         bool(docks) and all(d["consolidations"] == d["expected"] for d in m["docks"])),
    ]
    lines.append(f"{'measure':<32}{'value':<34}{'target':<9}")
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("ok" if ok else "FAIL")
        lines.append(f"{name:<32}{value:<34}{target:<9}{mark}")
    v = doc["verdict"]
    lines.append(f"Done-when: {'MET' if v['met'] else 'NOT MET'} ({v['why']})")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """Seconds per task in run order, coloured by success, labelled by kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    tasks = doc["tasks"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(tasks) + 2), 3.8))
    colours = [to_rgba("tab:green" if t["success"] else "tab:red",
                       1.0 if t["role"] == "plan" else 0.4) for t in tasks]  # pale: set-up
    ax.bar(range(len(tasks)), [t["seconds"] for t in tasks], color=colours)
    ax.set_xticks(range(len(tasks)), [t["kind"] for t in tasks], rotation=70, fontsize=7)
    ax.set_ylabel("seconds (green: success)")
    m = doc["metrics"]
    lat = m["cancel_latency_max_s"]
    ax.set_title(f"success {m['success_rate']:.0%}, recorded/driven "
                 f"{m['transitions_recorded']}/{m['corridors_driven']}, wrong "
                 f"{m['wrong_corridor_outcomes']}, cancel "
                 f"{'-' if lat is None else f'{lat:.2f} s'}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- the run (ROS)


def _checkout() -> Path | None:
    """The source checkout holding the emulator and the shared rig, or None."""
    from glove_ros.paths import checkout_root

    env = os.environ.get("GLOVE_ROS_ROOT")
    for root in (checkout_root(), Path(env) if env else None):
        if root is not None and all((root / "test" / f).is_file()
                                    for f in ("stock_jetrover.py", "stock_rig.py")):
            return root
    return None


class _Run:
    """One benchmark run on a started rig: sends the tasks and keeps what it saw."""

    def __init__(self, rig: Any, sr: Any, args: argparse.Namespace, say: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        from glove_ros.core.world.perception import color_vocabulary
        from glove_ros.msg import ConsolidationReport, TaskOutcome

        self.rig, self.sr, self.args, self.say = rig, sr, args, say
        self.rng = random.Random(args.seed)
        self.colours = color_vocabulary()
        self.corridors = [tuple(c) for c in sr.CORRIDORS]
        qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.routes = sr.Timed(rig.node, String, "emulator/route", qos)
        self.reports = sr.Timed(rig.node, ConsolidationReport, "consolidation_report")
        self.outcomes = sr.Timed(rig.node, TaskOutcome, "task_outcomes")
        self.tasks: list[dict[str, Any]] = []
        self.closed: dict[str, frozenset] = {}  # task id -> corridor closed during it
        self.cancels: list[dict[str, Any]] = []
        self.stills: list[dict[str, Any]] = []
        self.stationary: list[tuple[int, int]] = []  # planner log spans of stand-stills
        self.dock_windows: list[tuple[float, float]] = []
        self.t0 = time.monotonic()

    # one task --------------------------------------------------------------------
    def task(self, kind: str, text: str, role: str = "plan", target: str = "",
             handle: Any = None, t_send: float | None = None) -> dict[str, Any]:
        """Run ``text`` (or wait for ``handle``, sent at ``t_send`` as :meth:`next_id`)
        and judge it."""
        rig, sr = self.rig, self.sr
        tid = self.next_id()
        rec: dict[str, Any] = {"i": len(self.tasks), "kind": kind, "role": role, "text": text,
                               "task_id": tid, "target": target}
        self.tasks.append(rec)
        t_send = time.monotonic() if t_send is None else t_send
        try:
            if handle is None:
                handle = sr.send_task(rig, text, task_id=tid)
            res = sr.wait_future(handle.get_result_async(), TIMEOUTS.get(kind, 120.0),
                                 f"the result of {text!r}", rig).result
            rec.update(result_success=bool(res.success), reason=res.reason,
                       found_at=res.found_at)
        except AssertionError as exc:  # no answer: the task failed, the run goes on
            rec.update(result_success=False, reason=f"no answer: {str(exc).splitlines()[0]}",
                       found_at="")
        t_end = time.monotonic()
        goals = [t for t, m in rig.events.since(t_send) if m.data.startswith("goal")]
        rec.update(t_send=round(t_send - self.t0, 2), t_end=round(t_end - self.t0, 2),
                   seconds=round(t_end - t_send, 2),
                   start_delay_s=round(goals[0] - t_send, 2) if goals else None,
                   at=sr.standing_at(rig))
        rec["success"] = self._judge(kind, rec)
        self.say(f"  {rec['i'] + 1:>3} {role:<5} {kind:<12} {text!r:<30} "
                 f"{'ok' if rec['success'] else 'FAIL'} ({rec['reason']}) {rec['seconds']:.1f} s")
        return rec

    def next_id(self) -> str:
        """The task id (= memory's episode id) of the next task."""
        return f"bench{len(self.tasks) + 1}"

    @staticmethod
    def _judge(kind: str, rec: Mapping[str, Any]) -> bool:
        reason = str(rec["reason"])
        if kind == "find":
            return rec["result_success"] or reason.startswith("searched every reachable")
        if kind == "cancel":
            return "cancel" in reason
        return bool(rec["result_success"]) and rec["at"] == rec["target"]

    def _elsewhere(self) -> str:
        """A waypoint the robot does not stand at (seeded)."""
        here = self.sr.standing_at(self.rig)
        return self.rng.choice(sorted(set(self.sr.WAYPOINTS) - {here}))

    # kinds and scenarios -----------------------------------------------------------
    def go(self, kind: str = "go", role: str = "plan", target: str = "") -> dict[str, Any]:
        target = target or self._elsewhere()
        return self.task(kind, f"go to the {target}", role, target)

    def find(self, role: str = "plan") -> dict[str, Any]:
        return self.task("find", f"find the {self.rng.choice(self.colours)} block", role)

    def dock(self, kind: str = "dock") -> dict[str, Any]:
        return self.task(kind, "return to the dock", target="dock")

    def still(self) -> dict[str, Any]:
        planner = self.rig.procs["planner"]
        time.sleep(1.0)  # the last scan of the drive before
        n_amcl, log_at = len(self.rig.amcl), len(planner.log())
        time.sleep(self.args.still)
        info = {"seconds": self.args.still, "at": self.sr.standing_at(self.rig),
                "amcl_while_still": len(self.rig.amcl) - n_amcl}
        rec = self.go("still")
        self.stationary.append((log_at, len(planner.log())))
        info["start_delay_s"] = rec["start_delay_s"]
        self.stills.append(info)
        return rec

    def cancel(self) -> dict[str, Any]:
        rig, sr = self.rig, self.sr
        here = sr.standing_at(rig)
        far = [w for w, h in hops(self.corridors, here).items() if h >= 2] if here else []
        target = self.rng.choice(sorted(far or set(sr.WAYPOINTS) - {here}))
        tid = self.next_id()
        t_send = time.monotonic()
        info: dict[str, Any] = {"text": f"go to the {target}", "latency_s": None,
                                "stop_odom_s": None}
        self.cancels.append(info)
        try:
            handle = sr.send_task(rig, info["text"], task_id=tid)
        except AssertionError as exc:
            rec = self.task("cancel", info["text"], target=target)
            rec["reason"] = f"not sent: {str(exc).splitlines()[0]}"
            return rec
        # cancel once the robot drives along a corridor (not while it turns on the spot)
        sr.poll(lambda: any(m.twist.twist.linear.x > 0 for _t, m in rig.odom.since(t_send)),
                20.0)
        time.sleep(0.5)
        tc = time.monotonic()
        try:
            sr.wait_future(handle.cancel_goal_async(), 15, "the cancel response", rig)
        except AssertionError:
            pass

        def stop() -> tuple[float, str] | None:  # the emulator: the goal ended, robot stopped
            return next(((t, m.data) for t, m in rig.events.since(tc)
                         if m.data in ("canceled", "succeeded") or m.data.startswith("aborted")),
                        None)

        sr.poll(lambda: stop() is not None, 30.0)
        stopped, stop_odom = stop(), sr.stopped_at(rig, tc)
        info.update(latency_s=round(stopped[0] - tc, 3) if stopped else None,
                    emulator_event=stopped[1] if stopped else None,
                    stop_odom_s=round(stop_odom - tc, 3) if stop_odom is not None else None)
        return self.task("cancel", info["text"], target=target, handle=handle, t_send=t_send)

    def detour(self) -> dict[str, Any]:
        from std_msgs.msg import String

        rig, sr = self.rig, self.sr
        loops = loop_corridors(self.corridors)
        here = sr.standing_at(rig)
        if not any(here in c for c in loops):  # not on a loop: a set-up drive onto one
            self.go(role="setup", target=self.rng.choice(sorted({w for c in loops for w in c}
                                                                 - {here})))
            here = sr.standing_at(rig)
        options = sorted(c for c in loops if here in c)
        if not options:
            return self.task("detour", "go to the dock (no loop corridor here)", target="?")
        corridor = self.rng.choice(options)
        target = corridor[1] if corridor[0] == here else corridor[0]
        text = f"{here}:{target}"
        t0 = time.monotonic()
        rig.close_corridor.publish(String(data=text))
        try:
            sr.poll(lambda: any(m.data == f"closed {text}" for _t, m in rig.events.since(t0)),
                    10.0)
            rec = self.go("detour", target=target)
            self.closed[rec["task_id"]] = frozenset(corridor)
            rec["closed"] = text
        finally:
            rig.open_corridor.publish(String(data=text))
            sr.poll(lambda: any(m.data == f"opened {text}" for _t, m in rig.events.since(t0)),
                    10.0)
        return rec

    def dock_voltage(self) -> dict[str, Any]:
        last_run = self.reports.items[-1][0] if self.reports.items else -math.inf
        if not any(t > last_run for t, _m in self.outcomes.items):
            self.find(role="setup")  # an episode for consolidation to work on
        n_reports = len(self.reports.items)
        rec = self.dock("dock_voltage")
        t0 = time.monotonic()
        self.sr.poll(lambda: len(self.reports.items) > n_reports, DOCK_WAIT_S)
        time.sleep(DOCK_SETTLE_S)  # still on the charger: no second run may follow
        self.dock_windows.append((t0, time.monotonic()))
        return rec

    # accounting ------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        rig, sr = self.rig, self.sr
        planner_log = rig.procs["planner"].log()
        drops = [(m.start(), int(m.group(1))) for m in _NOT_RECORDING.finditer(planner_log)]
        drops += [(i.start(), 1) for i in re.finditer("not recording the corridors driven",
                                                      planner_log)]
        still_drops = sum(n for at, n in drops
                          if any(a <= at < b for a, b in self.stationary))
        restarts = [m.start() for m in re.finditer(re.escape(_RESTART), planner_log)]
        # corridors driven per task: each route goes to the last task sent before it
        starts = [(t["t_send"] + self.t0, t["task_id"]) for t in self.tasks]
        driven: dict[str, list[tuple[str, str]]] = {}
        for ts, msg in self.routes.items:
            owner = [tid for t, tid in starts if t <= ts]
            if owner:
                driven.setdefault(owner[-1], []).extend(route_pairs(msg.data, self.corridors))
                next(t for t in self.tasks if t["task_id"] == owner[-1]).setdefault(
                    "routes", []).append(msg.data)
        entries = sr.drive_entries(rig)
        recorded: dict[str, list[tuple[str, str]]] = {}
        wrong, outcomes = [], Counter()
        ids = {t["task_id"] for t in self.tasks}
        for e in entries:
            tr = e.transition
            if tr.episode_id not in ids:
                continue
            outcomes[tr.outcome] += 1
            key = frozenset((tr.state_key, tr.action_arg))
            closed = self.closed.get(tr.episode_id)
            if tr.outcome == "reached":
                recorded.setdefault(tr.episode_id, []).append((tr.state_key, tr.action_arg))
                if closed == key:
                    wrong.append(f"#{e.id} {tr.state_key}->{tr.action_arg} reached while "
                                 f"closed ({tr.episode_id})")
            elif tr.outcome == "blocked" and closed != key:
                wrong.append(f"#{e.id} {tr.state_key}->{tr.action_arg} blocked while open "
                             f"({tr.episode_id})")
        missing = extra = 0
        for t in self.tasks:
            d, r = driven.get(t["task_id"], []), recorded.get(t["task_id"], [])
            t["driven"] = [f"{a}:{b}" for a, b in d]
            t["recorded"] = [f"{a}:{b}" for a, b in r]
            mi, ex = compare_drives(d, r)
            missing, extra = missing + mi, extra + ex
        docks = self._docks()
        plan = [t for t in self.tasks if t["role"] == "plan"]
        by_kind: dict[str, dict[str, Any]] = {}
        for t in plan:
            k = by_kind.setdefault(t["kind"], {"tasks": 0, "ok": 0, "seconds": 0.0})
            k["tasks"] += 1
            k["ok"] += int(t["success"])
            k["seconds"] += t["seconds"]
        for k in by_kind.values():
            k["mean_s"] = round(k.pop("seconds") / k["tasks"], 1)
        lats = [c["latency_s"] for c in self.cancels]
        ok = sum(t["success"] for t in plan)
        return {
            "tasks": len(plan), "tasks_ok": ok,
            "success_rate": round(ok / len(plan), 4) if plan else 0.0,
            "by_kind": by_kind,
            "corridors_driven": sum(len(v) for v in driven.values()),
            "transitions_recorded": sum(len(v) for v in recorded.values()),
            "transitions_missing": missing, "transitions_extra": extra,
            "navigate_to_outcomes": dict(outcomes),
            "transitions_dropped": sum(n for _at, n in drops), "drop_warnings": len(drops),
            "transitions_dropped_stationary": still_drops,
            "drop_lines": [ln for ln in planner_log.splitlines() if "not recording" in ln],
            "driver_restarts": len(restarts),
            "driver_restarts_stationary": sum(1 for at in restarts
                                              if any(a <= at < b for a, b in self.stationary)),
            "restart_lines": [ln for ln in planner_log.splitlines() if _RESTART in ln],
            "wrong_corridor_outcomes": len(wrong), "wrong_details": wrong,
            "cancels": self.cancels,
            "cancel_latency_max_s": (max(lats) if lats and None not in lats else None),
            "cancel_stop_odom_max_s": max((c["stop_odom_s"] for c in self.cancels
                                           if c["stop_odom_s"] is not None), default=None),
            "stills": self.stills,
            "docks": docks,
            "consolidations": len(self.reports.items),
            "consolidation_statuses": [m.status for _t, m in self.reports.items],
        }

    def _docks(self) -> list[dict[str, Any]]:
        """Dock intervals from the consolidation node's log (wall time -> monotonic)."""
        offset = time.time() - time.monotonic()
        spans: list[tuple[float, float]] = []
        start = None
        for line in self.rig.procs["consolidation"].log().splitlines():
            m = _LOG_LINE.search(line)
            if not m:
                continue
            t = float(m.group(1)) - offset
            if m.group(2) == "docked" and start is None:
                start = t
            elif m.group(2) == "undocked" and start is not None:
                spans.append((start, t))
                start = None
        if start is not None:
            spans.append((start, time.monotonic()))
        # a dock-by-voltage scenario the node never recognised is a dock with no run
        for w0, w1 in self.dock_windows:
            if not any(a <= w1 and b >= w0 for a, b in spans):
                spans.append((w0, w0))
        spans.sort()
        out = per_dock(spans, [t for t, _m in self.reports.items],
                       [t for t, _m in self.outcomes.items])
        for d, (a, b) in zip(out, spans, strict=True):
            d["docked_s"], d["undocked_s"] = round(a - self.t0, 1), round(b - self.t0, 1)
            d["recognised"] = b > a
        return out


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; print the table (or JSON) and write ``robot.json``."""
    if args.tasks < len(SCENARIOS) or args.still < 0 or args.speed <= 0:
        print(f"bench robot: --tasks must be >= {len(SCENARIOS)} (the scenarios), --still "
              ">= 0 and --speed > 0", file=sys.stderr)
        return 2
    root = _checkout()
    if root is None:
        print("bench robot: needs the source checkout: the stock-JetRover emulator "
              "(test/stock_jetrover.py) and its rig (test/stock_rig.py) are test code, not "
              "installed by pip; run it from a clone (source env.sh; glove-ros bench robot)",
              file=sys.stderr)
        return 2
    try:
        import rclpy  # noqa: F401

        from glove_ros.action import RunTask  # noqa: F401
    except ImportError as exc:
        print(f"bench robot: needs ROS 2 and the built interfaces ({exc}); source env.sh",
              file=sys.stderr)
        return 2
    if str(root / "test") not in sys.path:
        sys.path.insert(0, str(root / "test"))
    try:
        import stock_rig as sr
    except ImportError as exc:
        print(f"bench robot: cannot load test/stock_rig.py ({exc}); the checkout's test "
              "dependencies (pytest, colcon for the nav2_msgs stand-in) are needed",
              file=sys.stderr)
        return 2
    plan = draw_plan(args.tasks, args.seed)
    t_start = time.monotonic()
    progress = Progress(len(plan), "bench robot", "task", enabled=args.progress)

    def say(line: str) -> None:
        progress.write(line, file=sys.stderr)

    with private_ros_domain(), tempfile.TemporaryDirectory(prefix="glove_robot_") as tmp:
        scratch = Path(args.workdir).expanduser() if args.workdir else Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            with sr.start(scratch, speed=args.speed, client="bench_robot") as rig:
                say(f"bench robot: graph up in {time.monotonic() - t_start:.0f} s; plan "
                    f"{' '.join(plan)}")
                run = _Run(rig, sr, args, say)
                for kind in plan:
                    {"go": run.go, "find": run.find, "dock": run.dock, "still": run.still,
                     "cancel": run.cancel, "detour": run.detour,
                     "dock_voltage": run.dock_voltage}[kind]()
                    progress.update()
                    if not sr.all_alive(rig):
                        say("bench robot: a node process died; stopping the run")
                        break
                metrics = run.metrics()
                tasks = run.tasks
                dead = [n for n, p in rig.procs.items() if not p.alive()]
        except AssertionError as exc:  # the graph did not come up
            progress.close()
            print(f"bench robot: the graph did not start: {str(exc)[-4000:]}", file=sys.stderr)
            return 1
    progress.close()
    metrics["dead_processes"] = dead
    met, why = verdict(metrics)
    doc = {
        "benchmark": "robot",
        "settings": {
            "tasks": args.tasks, "seed": args.seed, "still_s": args.still,
            "speed_m_s": args.speed, "plan": plan, "mix": dict(MIX),
            "site": "test/stock_rig.py SITE: 5 waypoints, 5 corridors (4 on a loop), no "
                    "blocks",
            "profile": "jetrover deployment, config/jetrover.yaml, robot-argument defaults; "
                       "planner greedy, consolidator rule, every_k_episodes 1, battery UInt16, "
                       "dock.waypoint dock",
            "emulator": "test/stock_jetrover.py defaults (AMCL update 0.25 m / 0.2 rad, "
                        "plug_delay 5 s, plug +300 mV)",
            "dock_wait_s": DOCK_WAIT_S, "dock_settle_s": DOCK_SETTLE_S,
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
                    "rmw": os.environ.get("RMW_IMPLEMENTATION", ""),
                    "ros_distro": os.environ.get("ROS_DISTRO", "")},
        "wall_s": round(time.monotonic() - t_start, 1),
        "tasks": tasks,
        "metrics": metrics,
        "targets": TARGETS,
        "verdict": {"met": met, "why": why},
    }
    return write_results(doc, args.out, args.stem, write_plot, format_table, args.json)
