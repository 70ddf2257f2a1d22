"""``glove-ros fleet``: run a building's fleet-memory servers and see the fleet's state.

One building server and N robots (docs/fleet.md):

  # the building server, once: the hub (JetStream domain "hub"), open to the robots
  glove-ros fleet hub --listen 0.0.0.0

  # each robot: its own leaf server and the stack, in one command
  glove-ros launch jetrover --fleet-robot robot1 --fleet-hub nats-leaf://server:7422
  # (or: ros2 launch glove_ros jetrover.launch.py fleet_robot:=robot1 \\
  #        fleet_hub:=nats-leaf://server:7422; or the server alone: glove-ros fleet leaf)

  # anywhere that reaches the hub
  glove-ros fleet status --hub nats://server:4222

A robot's leaf server registers the robot at the hub itself (the hub's FLEET stream gains
its MEM_<robot> stream as a source), so adding a robot is starting it. The servers keep
their JetStream files under --store (default ~/.local/state/glove_ros/fleet): events a
robot wrote while the hub was away are sent when the link returns, also after a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.core.memory.fleet import FleetError, check_robot_id, fold


def default_store() -> Path:
    """Where the servers keep their JetStream files unless told otherwise."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".local", "state")
    return Path(base) / "glove_ros" / "fleet"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``fleet`` subcommands."""
    sub = parser.add_subparsers(dest="fleet", metavar="ACTION", required=True)
    p = sub.add_parser("hub", help="run the building's hub server (until Ctrl-C / SIGTERM)",
                       description="Run the hub nats-server (JetStream domain 'hub', fsync per "
                       "write) and create its FLEET stream. Robots connect to --leaf-port.")
    p.add_argument("--port", type=int, default=4222, help="client port (default 4222)")
    p.add_argument("--leaf-port", type=int, default=7422,
                   help="port robots' leaf servers connect to (default 7422)")
    p.add_argument("--listen", default="127.0.0.1",
                   help="interface to listen on; 0.0.0.0 for robots on the network "
                   "(default 127.0.0.1: this machine only)")
    p.add_argument("--store", type=Path, default=None,
                   help=f"folder of its JetStream files (default {default_store()}/hub)")
    p.set_defaults(func=hub_main)

    p = sub.add_parser("leaf", help="run one robot's leaf server (until Ctrl-C / SIGTERM)",
                       description="Run a robot's own nats-server (JetStream domain = the "
                       "robot id, leaf connection to the hub): its writes are acknowledged "
                       "here while the hub is unreachable. Registers the robot at the hub "
                       "as soon as the hub answers. The memory node's fleet.url points here.")
    p.add_argument("robot", help="robot id (letters, digits, _ . -): its JetStream domain")
    p.add_argument("--hub", required=True,
                   help="the hub's leaf URL, e.g. nats-leaf://server:7422")
    p.add_argument("--port", type=int, default=4222,
                   help="client port on 127.0.0.1 (default 4222; the memory node's fleet.url)")
    p.add_argument("--store", type=Path, default=None,
                   help=f"folder of its JetStream files (default {default_store()}/<robot>)")
    p.set_defaults(func=leaf_main)

    p = sub.add_parser("status", help="each robot's lag, last event and clock offset; the "
                       "fleet's suppressed memories",
                       description="Read the hub's FLEET stream (nothing is changed) and "
                       "print, per robot: events at the hub, how far the hub's copy lags its "
                       "stream, its last event, and its clock offset (the smallest hub arrival "
                       "time minus event clock: quickest transit plus the robot's clock lag; "
                       "negative = the robot's clock is ahead). Then the memories the "
                       "fleet holds suppressed (the fold every robot computes alike).")
    p.add_argument("--hub", default="nats://127.0.0.1:4222", help="the hub's client URL")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--max-suppressed", type=int, default=20,
                   help="suppressed memories listed (default 20; all are counted)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the hub")
    p.set_defaults(func=status_main)


# ----------------------------------------------------------------------------- servers

class _Signals:
    """SIGINT / SIGTERM set an event instead of raising (the main loop stops the server)."""

    def __init__(self) -> None:
        self.got: int | None = None
        self.event = threading.Event()
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.got = self.got or signum
        self.event.set()


def _start(server: Any) -> bool:
    """Start ``server`` (it stops with this process); False after saying why it did not."""
    try:
        server.start(die_with_parent=True)
        time.sleep(0.3)  # a port taken by another process answers the readiness check
        if server.proc.poll() is not None:
            last = (server.log().strip().splitlines() or [""])[-1]
            raise RuntimeError(f"it exited with {server.proc.returncode}: "
                               f"{last.split('] ', 2)[-1]} (log: {server.log_path})")
    except (OSError, RuntimeError) as exc:
        print(f"[fleet] cannot start the {server.name} server on port {server.port}: {exc}",
              file=sys.stderr, flush=True)
        return False
    return True


def _serve(server: Any, stop: _Signals, every: float = 0.5,
           tick: Any = None) -> int:
    """Run ``server`` until a signal (exit 0 / 130) or until it exits on its own (1)."""
    try:
        while not stop.event.wait(every):
            if server.proc.poll() is not None:
                print(f"[fleet] nats-server {server.name} exited with {server.proc.returncode};"
                      f" its log: {server.log_path}", file=sys.stderr, flush=True)
                return 1
            if tick is not None:
                tick()
    finally:
        server.stop()
    print(f"[fleet] {server.name} server stopped", flush=True)
    return 130 if stop.got == signal.SIGINT else 0


def hub_main(args: argparse.Namespace) -> int:
    """``glove-ros fleet hub``."""
    from glove_ros import fleet

    stop = _Signals()
    store = args.store or default_store() / "hub"
    server = fleet.NatsServer("hub", fleet.hub_config(args.port, args.leaf_port,
                                                      store / "jetstream", host=args.listen),
                              store, args.port)
    if not _start(server):
        return 1
    try:
        sourced = asyncio.run(fleet.ensure_hub(server.url, []))
    except Exception as exc:
        server.stop()
        print(f"[fleet] cannot create the hub's FLEET stream: {exc}", file=sys.stderr)
        return 1
    print(f"[fleet] hub up: clients {args.listen}:{args.port}, robots' leaf servers "
          f"{args.listen}:{args.leaf_port}, files {store}; sourcing "
          f"{', '.join(sourced) or 'no robot yet'} (robots register themselves)", flush=True)
    return _serve(server, stop)


class _Registration:
    """Registers a robot at the hub through its leaf server: retried every ``every``
    seconds until the hub answers (a robot that starts offline registers when the uplink
    comes up), then checked every ``recheck`` seconds (two robots registering at once can
    overwrite each other's update; a hub that lost its files forgets them)."""

    def __init__(self, url: str, robot: str, every: float = 5.0, recheck: float = 30.0
                 ) -> None:
        self.url, self.robot, self.every, self.recheck = url, robot, every, recheck
        self.done, self._next, self._said = False, 0.0, ""

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        from glove_ros import fleet

        self._next = time.monotonic() + self.every
        try:
            sourced = asyncio.run(fleet.ensure_hub(self.url, [self.robot], timeout=2.0))
        except Exception as exc:  # hub not reachable yet: robot works alone meanwhile
            text = fleet.error_text(exc, "the hub")
            if text != self._said:
                print(f"[fleet] hub not reachable ({text}); {self.robot} keeps its events "
                      f"here and retries every {self.every:.0f} s", flush=True)
                self._said = text
            return
        self._next = time.monotonic() + self.recheck
        if not self.done:
            print(f"[fleet] {self.robot} registered at the hub (fleet: {', '.join(sourced)})",
                  flush=True)
            try:  # an inbox made while the hub was away would wait out the server's back-off
                if asyncio.run(fleet.restart_empty_inbox(self.url, self.robot, timeout=2.0)):
                    print(f"[fleet] {self.robot}'s inbox IN_{self.robot} re-made to source "
                          "the hub now", flush=True)
            except Exception as exc:
                print(f"[fleet] could not re-make IN_{self.robot} ({exc}); it catches up "
                      "after the server's retry", flush=True)
        self.done, self._said = True, ""


def leaf_main(args: argparse.Namespace) -> int:
    """``glove-ros fleet leaf``."""
    from glove_ros import fleet

    try:
        robot = check_robot_id(args.robot)
    except FleetError as exc:
        print(f"glove-ros fleet leaf: {exc}", file=sys.stderr)
        return 2
    stop = _Signals()
    store = args.store or default_store() / robot
    server = fleet.NatsServer(robot, fleet.leaf_config(robot, args.port, args.hub,
                                                       store / "jetstream"), store, args.port)
    if not _start(server):
        return 1
    try:
        asyncio.run(fleet.prepare_robot(server.url, robot))
    except Exception as exc:
        server.stop()
        print(f"[fleet] cannot create {robot}'s streams: {exc}", file=sys.stderr)
        return 1
    print(f"[fleet] {robot}'s leaf server up: {server.url} (the memory node's fleet.url), "
          f"hub {args.hub}, files {store}", flush=True)
    reg = _Registration(server.url, robot)
    return _serve(server, stop, tick=reg.tick)


def leaf_launch(robot: str, hub: str, port: int | str = 4222, store: str = "",
                option: str = "fleet_") -> tuple[list[str], dict[str, str]] | None:
    """What a launch adds for a fleet robot: the command of its leaf server and the memory
    node's ``fleet.*`` parameters; None when ``robot`` is empty (no fleet). ValueError
    (naming the options ``<option>robot`` / ``<option>hub``) when they do not fit."""
    robot, hub = robot.strip(), hub.strip()
    if not robot:
        if hub:
            raise ValueError(f"{option}hub needs {option}robot (this robot's id)")
        return None
    if not hub:
        raise ValueError(f"{option}robot needs {option}hub (e.g. nats-leaf://server:7422)")
    check_robot_id(robot)
    port = int(port)
    cmd = [sys.executable, "-u", "-m", "glove_ros.cli", "fleet", "leaf", robot, "--hub", hub,
           "--port", str(port)]
    if store:
        cmd += ["--store", str(store)]
    return cmd, {"fleet.url": f"nats://127.0.0.1:{port}", "fleet.robot_id": robot}


# ----------------------------------------------------------------------------- status

def status_report(messages: Sequence[Any], sources: Mapping[str, Mapping[str, Any]],
                  now: float | None = None, max_skew_s: float = 2.0) -> dict[str, Any]:
    """The fleet's state from the hub's messages (:class:`glove_ros.fleet.HubMessage`) and
    its stream sources (robot -> ``{"lag": int, "active_s": float | None, "error": str}``).

    Per robot: events at the hub, duplicates, the source's lag and last activity, the last
    event, and the clock offset: the smallest, over its last 200 events, of hub arrival
    minus the event's clock, in seconds. Transit only adds to it, so it is the robot's
    clock lag behind the hub plus the quickest transit (negative: the robot's clock is
    ahead). ``skewed`` when an event's clock is more than ``max_skew_s`` after its
    arrival (the robot's clock is ahead by more than the fleet's bound). Then the fold's suppressed
    entries, newest first.
    """
    now = time.time() if now is None else now
    per: dict[str, list[Any]] = defaultdict(list)
    seen: set[str] = set()
    dup: dict[str, int] = defaultdict(int)
    malformed = 0
    for m in messages:
        if m.event is None:
            malformed += 1
            continue
        robot = m.event.robot_id
        if m.msg_id in seen:
            dup[robot] += 1
            continue
        seen.add(m.msg_id)
        per[robot].append(m)
    robots = {}
    for robot in sorted(set(per) | set(sources)):
        msgs = per.get(robot, [])
        src = sources.get(robot, {})
        offsets = [m.stored - m.event.clock.wall_ms / 1000 for m in msgs[-200:]]
        last = msgs[-1] if msgs else None
        robots[robot] = {
            "events": len(msgs), "duplicates": dup.get(robot, 0),
            "lag": src.get("lag"), "source_active_s": src.get("active_s"),
            "source_error": src.get("error", ""), "registered": robot in sources,
            "last_event": None if last is None else {
                "kind": last.event.kind, "entry": last.event.entry,
                "place": list(last.event.place), "clock": last.event.clock.text(),
                "age_s": round(now - last.stored, 1)},
            "clock_offset_s": round(min(offsets), 3) if offsets else None,
            "skewed": any(o < -max_skew_s for o in offsets),
        }
    events = [m.event for ms in per.values() for m in ms]
    places = {e.entry: e.place for e in events}
    statuses = fold(events)
    suppressed = sorted(((k, s) for k, s in statuses.items() if s.status == "suppressed"),
                        key=lambda kv: kv[1].clock.text(), reverse=True)
    return {
        "robots": robots, "malformed": malformed,
        "entries": len(statuses),
        "suppressed": [{"entry": k, "place": list(places.get(k, ("", "", ""))),
                        "by": s.clock.robot_id, "clock": s.clock.text(), "reason": s.reason}
                       for k, s in suppressed],
    }


async def _read_hub(url: str, timeout: float) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    import nats

    from glove_ros import fleet

    nc = await nats.connect(url, connect_timeout=timeout, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(domain=fleet.HUB_DOMAIN, timeout=timeout)
        info = await js.stream_info(fleet.FLEET_STREAM)
    finally:
        await nc.close()
    sources: dict[str, dict[str, Any]] = {}
    for src in info.config.sources or []:
        sources[src.name.removeprefix("MEM_")] = {"lag": None, "active_s": None, "error": ""}
    for si in info.sources or []:
        entry = sources.setdefault(si.name.removeprefix("MEM_"), {})
        active = getattr(si, "active", None)  # nanoseconds since the source last delivered
        err = getattr(si, "error", None)
        entry.update({"lag": si.lag, "active_s": None if active in (None, -1)
                      else round(active / 1e9, 1), "error": str(err) if err else ""})
    return await fleet.hub_messages(url, timeout=timeout), sources


def format_status(report: Mapping[str, Any], max_suppressed: int = 20) -> str:
    """The report as the table ``glove-ros fleet status`` prints."""
    rows = [f"{'robot':<14} {'events':>7} {'lag':>5} {'dup':>4} {'clock offset':>13} "
            f"{'last event':<42} note"]
    for robot, r in report["robots"].items():
        last = r["last_event"]
        text = "-" if last is None else (f"{last['kind']} {last['place'][0]}/"
                                         f"{last['place'][1]} {last['age_s']:.0f}s ago")
        off = "-" if r["clock_offset_s"] is None else f"{r['clock_offset_s'] * 1000:+.0f} ms"
        notes = []
        if not r["registered"]:
            notes.append("not a source of FLEET")
        if r["skewed"]:
            notes.append("CLOCK AHEAD (flagged)")
        if r["source_error"]:
            notes.append(f"source error: {r['source_error']}")
        if r["source_active_s"] is not None and r["source_active_s"] > 60:
            notes.append(f"link quiet {r['source_active_s']:.0f}s")
        lag = "-" if r["lag"] is None else str(r["lag"])
        rows.append(f"{robot:<14} {r['events']:>7} {lag:>5} {r['duplicates']:>4} {off:>13} "
                    f"{text[:42]:<42} {'; '.join(notes)}")
    sup = report["suppressed"]
    rows.append(f"\n{len(sup)} of {report['entries']} fleet memories suppressed"
                + (f"; {report['malformed']} malformed message(s) at the hub"
                   if report["malformed"] else ""))
    for s in sup[:max_suppressed]:
        rows.append(f"  {s['entry']:<18} {'/'.join(p for p in s['place'] if p):<34} "
                    f"by {s['by']}: {s['reason']}")
    if len(sup) > max_suppressed:
        rows.append(f"  ... {len(sup) - max_suppressed} more (--max-suppressed, --json)")
    return "\n".join(rows)


def status_main(args: argparse.Namespace) -> int:
    """``glove-ros fleet status``."""
    try:
        messages, sources = asyncio.run(_read_hub(args.hub, args.timeout))
    except Exception as exc:
        print(f"glove-ros fleet status: cannot read the hub at {args.hub} "
              f"({type(exc).__name__}: {exc}); is 'glove-ros fleet hub' running?",
              file=sys.stderr)
        return 1
    report = status_report(messages, sources)
    print(json.dumps(report, indent=2) if args.json
          else format_status(report, args.max_suppressed))
    return 0
