"""Memory node: persistent experience memory with GLOVE verification on its write path.

Every transition (topic ``transitions`` or service ``record_transition``) is validated,
committed to SQLite (WAL) and checked by the GLOVE verifier before it is acknowledged, so
nothing is retrievable before it was verified and nothing acknowledged is lost on a
crash. Retrieval (``query_memory``) excludes suppressed and replaced entries unless
asked; ``explain_entry`` says why an entry is trusted, suppressed or replaced.

Load. Writes go through one group-commit thread (:mod:`glove_ros.core.memory.ingest`): whatever
arrived while the previous commit ran is verified and committed together (at most
``ingest.max_batch``, waiting at most ``ingest.max_delay_ms`` for company), and a service
call is answered only after its commit. Reads use their own SQLite connection in their own
callback group, so a query never waits for a write. Nothing is dropped silently: a full
queue, a rejected or failed write and a sample DDS reports lost are counted, logged and
published on ``memory_stats`` (``dds_lost`` counts samples DDS reported lost and, where rclpy
passes message info (Iron and later), gaps in each publisher's sequence numbers: a sample
overwritten in a publisher's history before this node took it). One memory node writes a
database: a second one on the same file refuses to configure (an advisory lock the kernel
drops when the holder dies, so a restarted node never waits for a dead one; a graph check
would, for the DDS lease time).

Interfaces (relative names; remap in launch):
  sub  transitions          glove_ros/Transition     observed outcomes to remember
  pub  memory_events        glove_ros/MemoryEvent    every recorded / suppressed / replaced entry
  pub  dissonance           glove_ros/DissonanceAlert  memory contradicts the world
  pub  probe_requests       glove_ros/ProbeRequest   evidence wanted (sync mode, stale negatives)
  pub  fleet_suppressions   glove_ros/MemoryEvent    (fleet only; transient-local, last 100)
                            memories here suppressed because another robot found them stale
  srv  record_transition    glove_ros/RecordTransition
  srv  query_memory         glove_ros/QueryMemory
  srv  explain_entry        glove_ros/ExplainEntry
  srv  reverify_negatives   std_srvs/Trigger  the planner has no route its memory allows:
                            re-verify suspected stale negative memories (GLOVE deadlock rule)
  pub  memory_stats         diagnostic_msgs/DiagnosticStatus  ingest counters (received,
                            committed, rejected, dropped, failed, dds_lost, queued)
  pub  /diagnostics         diagnostic_msgs/DiagnosticArray: database size and health,
                            entries by status, pending queue, probe budget left, fleet link

Fleet (``fleet.url`` and ``fleet.robot_id`` set; docs/fleet.md): every memory event also
goes to an outbox in the same SQLite transaction and is published to this robot's NATS
leaf server; another robot's verified suppression hides the same stale memory here and
queues it for this robot's own re-verification (a warning line, a ``memory_events``
message and a latched ``fleet_suppressions`` message say so).

Lifecycle: configure validates parameters and opens the database (a corrupt file fails
the transition and is left untouched); activate opens the interfaces; deactivate closes
them; cleanup closes the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from glove_ros import conversions as conv
from glove_ros.core.memory.experience import MemoryEvent, Source, Transition
from glove_ros.core.memory.ingest import GroupCommitter, IngestConfig, Ticket
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.ops.health import ERROR, OK, WARN
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.events import VerifyResult
from glove_ros.core.verify.verifier import GloveVerifier
from glove_ros.msg import DissonanceAlert, ProbeRequest
from glove_ros.msg import MemoryEvent as MemoryEventMsg
from glove_ros.msg import Transition as TransitionMsg
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    destroy_handles,
    param_values,
    run,
)
from glove_ros.nodes.diagnostics import NodeDiagnostics
from glove_ros.paths import make_private_dirs
from glove_ros.srv import ExplainEntry, QueryMemory, RecordTransition

FLEET_LATCHED = 100  # fleet_suppressions kept for late subscribers

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("db_path", "glove_memory.db", "SQLite file of experience memory (created if absent)",
          read_only=True),
    Param("max_results", 100, "default cap on entries returned by query_memory"),
    Param("synchronous", "FULL", "SQLite durability: FULL (acknowledged writes survive power "
          "loss) or NORMAL (survive a killed process; one fsync less per commit)",
          read_only=True),
    Param("ingest.max_batch", 256, "transitions verified and committed together at most (live)"),
    Param("ingest.max_delay_ms", 2.0, "longest a transition waits for others to share its "
          "commit, ms (live)"),
    Param("ingest.queue_size", 20000, "transitions waiting for a commit at most; more are "
          "refused, counted and logged (live)"),
    Param("ingest.depth", 10000, "DDS history depth of the transitions subscription (10 s "
          "of a 1 kHz burst: bench ingest lost 3-10% to DDS at 1000)", read_only=True),
    Param("ingest.reply_timeout", 30.0, "seconds record_transition waits for its commit"),
    Param("stats_period", 1.0, "seconds between memory_stats messages (drops are logged then)",
          read_only=True),
    Param("verifier.enabled", True, "run GLOVE verification on every recorded transition"),
    Param("verifier.mode", "async", "'async' (replay-relaxed, physical robot) or 'sync' (probe)"),
    Param("verifier.epsilon", 0.1, "surprise threshold on Q_hist(s'|s,a)"),
    Param("verifier.detector", "bayes", "'bayes': calibrated Bayes-factor test with online "
          "noise rates (default, nothing to tune); 'p_th': the paper's consecutive-surprise count"),
    Param("verifier.p_th", 3, "consecutive surprises that make dissonance (detector 'p_th' only)"),
    Param("verifier.alarm_delta", 0.005, "bayes detector: alarm when the Bayes factor for drift "
          "exceeds 1/alarm_delta"),
    Param("verifier.min_miss_rate", 0.02, "bayes detector: a missed object is never taken as "
          "less likely than this"),
    Param("verifier.min_extra_rate", 0.02, "bayes detector: an object class memory has never "
          "held, reported where memory shows none, is never taken as less likely than this"),
    Param("verifier.noise_prior_rate", 0.05, "bayes detector: prior observation-noise rate"),
    Param("verifier.noise_prior_weight", 5.0, "bayes detector: the prior's weight in samples"),
    Param("verifier.unique_objects", [""], "objects that exist once (e.g. block colours): seen "
          "at a new place, their old place's memory is suppressed at once"),
    Param("verifier.object_action", "look", "the action whose outcome lists objects "
          "('colors=a,b')"),
    Param("verifier.symmetric_actions", ["navigate_to"], "actions whose outcome is the same in "
          "both directions of a link (evidence shared)"),
    Param("verifier.stale_negative_recheck", True, "the deadlock rule: re-test stale negative "
          "memories when the planner is stuck"),
    Param("verifier.recheck_volatile_first", True, "re-test remembered failures at places an "
          "alarm already overturned (or remembered both working and failing) first: only "
          "those on a detour, the others after them when stuck"),
    Param("verifier.structured_noise", True, "learn a noise rate per kind of disagreement "
          "for structured outcomes (in-process adapters; string outcomes unaffected)"),
    Param("verifier.delta", 0.05, "confidence parameter of the Hoeffding bound / probe budget"),
    Param("verifier.k_modes", 1, "outcome modes K per (s,a); 1 = deterministic (alpha = 1)"),
    Param("verifier.rule", "waypoint", "equivalence rule: 'state', 'waypoint' or 'pose'"),
    Param("verifier.radius", 0.3, "pose rule radius, metres"),
    Param("verifier.never_probe", [""], "actions never probed (irreversible or unsafe)"),
    Param("verifier.max_probe_budget", 30, "probe samples the verifier may request; -1 unlimited"),
    Param("verifier.evidence_threshold", 0, "fresh samples that complete async re-verification "
          "(0: alpha)"),
    Param("verifier.negative_outcomes", ["hole", "blocked", "collision", "failed", "unreachable"],
          "outcome signatures that make a memory negative (deadlock rule)"),
    Param("verifier.recheck_on_dissonance", False, "re-test stale negatives after each dissonance"),
    Param("verifier.stale_negative_after", 50, "transitions after which a stuck planner may "
          "re-test an unconfirmed negative memory"),
    Param("verifier.phase", "default", "label under which verification cost is counted (live)"),
    Param("fleet.url", "", "this robot's NATS leaf server (e.g. nats://127.0.0.1:4222): share "
          "verified memory with the fleet (docs/fleet.md); empty: no fleet", read_only=True),
    Param("fleet.robot_id", "", "this robot's id in the fleet (required with fleet.url; the "
          "leaf server's JetStream domain)", read_only=True),
    Param("fleet.period", 0.2, "seconds between fleet publish / apply rounds", read_only=True),
)


def verifier_config(values: dict[str, Any]) -> VerifierConfig:
    """Build and validate the core verifier config from ``verifier.*`` parameters."""
    raw = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("verifier.")}
    raw.pop("enabled", None)
    raw.pop("phase", None)
    raw["never_probe"] = tuple(a for a in raw.get("never_probe", ()) if a)
    raw["negative_outcomes"] = tuple(a for a in raw.get("negative_outcomes", ()) if a)
    for name in ("unique_objects", "symmetric_actions"):
        raw[name] = tuple(a for a in raw.get(name, ()) if a)
    if int(raw.get("max_probe_budget", 0)) < 0:
        raw["max_probe_budget"] = None
    return VerifierConfig.from_dict(raw)


def ingest_config(values: dict[str, Any]) -> IngestConfig:
    """Build and validate the group-commit limits from ``ingest.*`` parameters."""
    return IngestConfig(
        max_batch=values["ingest.max_batch"],
        max_delay=float(values["ingest.max_delay_ms"]) / 1000.0,
        queue_size=values["ingest.queue_size"],
    ).validate()


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if not str(values["db_path"]).strip():
        raise ValueError("db_path is empty; give a file path for the memory database")
    if int(values["max_results"]) <= 0:
        raise ValueError("max_results must be > 0")
    if str(values["synchronous"]).upper() not in ("FULL", "NORMAL"):
        raise ValueError(f"synchronous must be FULL or NORMAL, got {values['synchronous']!r}")
    for name in ("ingest.depth", "ingest.reply_timeout", "stats_period", "fleet.period"):
        if not float(values[name]) > 0:
            raise ValueError(f"{name} must be > 0, got {values[name]!r}")
    if str(values["fleet.url"]).strip() and not str(values["fleet.robot_id"]).strip():
        raise ValueError("fleet.url is set but fleet.robot_id is empty: name this robot")
    if not str(values["verifier.phase"]).strip():
        raise ValueError("verifier.phase is empty: give the label statistics are counted under "
                         "(e.g. 'source')")
    ingest_config(values)
    verifier_config(values).validate()


class WriterLock:
    """One writer per database file: an exclusive advisory lock on ``<db>-writer.lock``.

    Held while the node is configured; the kernel releases it when the process dies (kill -9
    included), so a restarted node takes over at once.
    """

    def __init__(self, db_path: str) -> None:
        self.path = f"{db_path}-writer.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``RuntimeError`` naming the holder's pid."""
        make_private_dirs(Path(self.path).parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RuntimeError(
                f"another memory node (pid {holder}) already writes this database; refusing "
                "to be a second writer (every write would be stored twice)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class MemoryNode(LifecycleNode):
    """Experience memory server (thin: all decisions live in glove_ros.core)."""

    def __init__(self) -> None:
        super().__init__("memory")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(self._on_set_params)
        self._store: ExperienceStore | None = None
        self._reader: ExperienceStore | None = None
        self._verifier: GloveVerifier | None = None
        self._committer: GroupCommitter | None = None
        self._writer_lock: WriterLock | None = None
        self._write_lock = threading.RLock()
        self._intake: Intake | None = None  # the transitions topic, on its own thread
        self._call_group = ReentrantCallbackGroup()  # service callers wait for their commit
        self._read_group = ReentrantCallbackGroup()  # queries never wait for writes
        self._handles: list[Any] = []
        self._event_pub = self._alert_pub = self._probe_pub = self._stats_pub = None
        self._stats_timer = None
        self._dds_lost = 0
        self._reported: dict[str, int] = {}
        self._probe_outcomes: dict[int, list[Transition]] = {}
        self._fleet: Any = None  # glove_ros.fleet.FleetBridge while fleet.url is set
        self._fleet_pub: Any = None  # fleet_suppressions (latched), with a fleet only
        self._outbox: Any = None
        self._diagnostics = NodeDiagnostics(self, self._diagnose)

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        path = str(values["db_path"])
        try:
            validate(values)
            if path != ":memory:":
                self._writer_lock = WriterLock(path)
                self._writer_lock.acquire()
            sync = str(values["synchronous"]).upper()
            self._store = ExperienceStore(path, synchronous=sync)
            self._reader = (ExperienceStore(path, synchronous=sync) if path != ":memory:"
                            else self._store)
        except Exception as exc:  # ValueError, damaged / read-only database, second writer
            self.get_logger().error(f"cannot configure memory: {exc}")
            self._close()
            return TransitionCallbackReturn.FAILURE
        if str(values["fleet.url"]).strip():
            try:  # before the verifier writes anything: every event goes to the outbox
                from glove_ros.core.memory.fleet import Outbox

                self._outbox = Outbox(self._store, str(values["fleet.robot_id"]).strip())
            except Exception as exc:
                self.get_logger().error(f"cannot configure the fleet outbox: {exc}")
                self._close()
                return TransitionCallbackReturn.FAILURE
        if values["verifier.enabled"]:
            self._verifier = GloveVerifier(self._store, verifier_config(values))
            self._verifier.phase = str(values["verifier.phase"])
        self._committer = GroupCommitter(  # _apply is atomic per item: no extra savepoint
            self._store.transaction, self._apply, savepoint=contextlib.nullcontext,
            committed=self._after_commit,
            failed=self._after_failure, lock=self._write_lock, config=ingest_config(values))
        stats = self._store.stats()
        # publishers live from configure to cleanup (as ros2/demos lifecycle_py does), so a
        # deactivate / activate cycle never stacks a second publisher on a topic
        self._event_pub = self.create_publisher(MemoryEventMsg, "memory_events", 50)
        self._alert_pub = self.create_publisher(DissonanceAlert, "dissonance", 10)
        self._probe_pub = self.create_publisher(ProbeRequest, "probe_requests", 10)
        self._stats_pub = self.create_publisher(DiagnosticStatus, "memory_stats", 10)
        if self._outbox is not None:  # latched: a node that starts later still hears them
            self._fleet_pub = self.create_publisher(
                MemoryEventMsg, "fleet_suppressions",
                QoSProfile(depth=FLEET_LATCHED, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.get_logger().info(f"memory open: {path} {stats}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self._store is not None
        self._store.add_listener(self._publish_event)
        depth = int(self.get_parameter("ingest.depth").value)
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        self._intake = Intake(self, self.resolve_topic_name("transitions"), qos,
                              self._on_transition, self._on_lost)
        self._handles = [
            self.create_service(RecordTransition, "record_transition", self._on_record,
                                callback_group=self._call_group),
            self.create_service(QueryMemory, "query_memory", self._on_query,
                                callback_group=self._read_group),
            self.create_service(ExplainEntry, "explain_entry", self._on_explain,
                                callback_group=self._read_group),
            self.create_service(Trigger, "reverify_negatives", self._on_reverify,
                                callback_group=self._call_group),
        ]
        self._stats_timer = self.create_timer(
            float(self.get_parameter("stats_period").value), self._publish_stats)
        if self._outbox is not None:
            try:
                from glove_ros.fleet import FleetBridge
            except ImportError as exc:  # nats-py missing: the node works, unshared
                self.get_logger().error(f"fleet.url set but {exc}: pip install "
                                        "'glove_ros[fleet]'; memory is not shared")
            else:
                self._fleet = FleetBridge(
                    self._outbox, str(self.get_parameter("fleet.url").value),
                    period=float(self.get_parameter("fleet.period").value),
                    lock=self._write_lock, on_applied=self._on_fleet_applied,
                    log=self.get_logger().info).start()
        self.get_logger().info("memory active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_fleet()
        if self._intake is not None:
            self._intake.close()
            self._intake = None
        destroy_handles(self, self._handles)
        if self._stats_timer is not None:
            self.destroy_timer(self._stats_timer)
            self._stats_timer = None
        if self._store is not None:
            self._store.remove_listener(self._publish_event)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close()
        for pub in (self._event_pub, self._alert_pub, self._probe_pub, self._stats_pub,
                    self._fleet_pub):
            if pub is not None:
                self.destroy_publisher(pub)
        self._event_pub = self._alert_pub = self._probe_pub = self._stats_pub = None
        self._fleet_pub = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    def destroy_node(self) -> None:
        """Stop the intake thread and commit what is queued before the node goes away."""
        if self._intake is not None:
            self._intake.close()
            self._intake = None
        self._close()
        super().destroy_node()

    def _stop_fleet(self) -> None:
        if self._fleet is not None:
            self._fleet.stop()
            self._fleet = None

    def _on_fleet_applied(self, event: Any, ids: list[int]) -> None:
        """Another robot's suppression hid ``ids`` here (called on the fleet thread)."""
        text = (f"fleet: {event.robot_id} found {event.outcome!r} at {event.place[0]} "
                f"{event.place[1]} {event.place[2]}".rstrip())
        self.get_logger().warning(f"{text} stale; {len(ids)} memory(ies) here suppressed "
                                  "and queued for re-verification")
        if self._fleet_pub is not None:
            msg = MemoryEventMsg(kind=MemoryEventMsg.SUPPRESSED, state_key=event.place[0],
                                 action=event.place[1], action_arg=event.place[2],
                                 entry_ids=[int(i) for i in ids],
                                 reason=f"{text} stale ({event.reason})")
            msg.header.stamp = self.get_clock().now().to_msg()
            self._fleet_pub.publish(msg)

    def _close(self) -> None:
        self._stop_fleet()
        self._outbox = None
        if self._committer is not None:
            self._committer.close()  # commits what is queued first
            self._log_drops()
        if self._verifier is not None and self._store is not None and not self._store.closed:
            with self._write_lock:
                try:
                    self._verifier.flush()  # the learnt noise rates survive the restart
                except Exception as exc:  # a damaged store must not block the shutdown
                    self.get_logger().warning(f"could not store the noise tally: {exc}")
        for store in (self._reader, self._store):
            if store is not None and not store.closed:
                store.close()
        if self._writer_lock is not None:
            self._writer_lock.release()
        self._store = self._reader = self._verifier = None
        self._committer = self._writer_lock = None

    def _on_set_params(self, changes: list[Any]) -> SetParametersResult:
        """Validate, then apply live changes (verifier.*, ingest.*); refuse what cannot work."""
        values = param_values(self, PARAMS)
        for change in changes:
            values[change.name] = change.value
        try:
            validate(values)
            config = verifier_config(values)
            ingest = ingest_config(values)
        except (ValueError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        names = {c.name for c in changes}
        if self._committer is not None and names & {p.name for p in PARAMS
                                                    if p.name.startswith("ingest.")}:
            self._committer.config = ingest
        if self._store is not None and any(n.startswith("verifier.") for n in names):
            try:  # a parameter callback refuses; it never raises (that would end the node)
                with self._write_lock:
                    verifier = self._verifier
                    if not values["verifier.enabled"]:
                        verifier = None
                    elif verifier is None:
                        verifier = GloveVerifier(self._store, config)
                    else:
                        verifier.reconfigure(config)  # validates first: nothing half-applied
                    if verifier is not None:
                        verifier.phase = str(values["verifier.phase"])
                    self._verifier = verifier
            except Exception as exc:
                self.get_logger().error(f"refused verifier parameters {sorted(names)}: {exc}")
                return SetParametersResult(successful=False, reason=str(exc))
            self.get_logger().info(f"verifier parameters applied: {sorted(names)}")
        return SetParametersResult(successful=True)

    def _diagnose(self) -> tuple[int, str, dict[str, Any]]:
        """/diagnostics: database size and health, pending queue, probe budget."""
        store, verifier = self._store, self._verifier
        if store is None:
            return WARN, "not configured (no database open)", {}
        try:
            stats = store.stats()
        except Exception as exc:  # locked, corrupt or vanished file
            return ERROR, f"database unreadable: {exc}", {"db_path": store.path}
        values: dict[str, Any] = {
            "db_path": stats["path"], "db_bytes": stats["bytes"], "entries": stats["total"],
            "trusted": stats["trusted"], "suppressed": stats["suppressed"],
            "replaced": stats["replaced"], "pending_queue": stats["pending"],
            "verifier": verifier.config.mode if verifier is not None else "off",
        }
        if verifier is not None:
            left = verifier.probe_budget_left
            values["probe_budget_left"] = "unlimited" if left is None else left
        ingest = self.ingest_stats()
        values.update({f"ingest_{k}": v for k, v in sorted(ingest.items())})
        if self._fleet is not None:
            fs = self._fleet.stats
            values.update({"fleet_connected": str(self._fleet.connected).lower(),
                           "fleet_published": fs.published, "fleet_received": fs.received,
                           "fleet_applied_suppressions": fs.applied_suppressions,
                           "fleet_malformed": fs.malformed,
                           "fleet_skew_flags": fs.skew_flags})
        lost = ingest["dropped"] + ingest["failed"] + ingest["dds_lost"]
        summary = f"{stats['total']} entries, {stats['pending']} pending re-verification"
        if lost:
            return WARN, f"{summary}; {lost} transition(s) not stored", values
        return OK, summary, values

    # write path ------------------------------------------------------------------------
    def _apply(self, msg: TransitionMsg) -> tuple[int, str, Any]:
        """Store one transition inside the batch transaction (``ValueError``: rejected)."""
        t = conv.transition_from_msg(msg)
        assert self._store is not None
        stored = self._store.find_resent(t)
        if stored is not None:  # its answer was lost and the client re-sent it
            return stored, f"already stored as #{stored} (a re-sent request), not again", None
        if self._verifier is not None and t.source == Source.PROBED:
            taken = self._take_probe(t)
            if taken is not None:
                return taken, "probe outcome applied", None
        if self._verifier is not None:
            result = self._verifier.observe(t)
            return int(result.entry_id), "recorded and verified", result
        return int(self._store.record(t)), "recorded", None

    def _after_commit(self, tickets: Sequence[Ticket]) -> None:
        for ticket in tickets:
            if ticket.accepted and ticket.result is not None:
                self._act_on(ticket.result)
            elif not ticket.accepted:
                self.get_logger().warning(f"rejected transition ({ticket.message}); memory "
                                          "unchanged")

    def _after_failure(self, exc: BaseException, tickets: Sequence[Ticket]) -> None:
        self.get_logger().error(f"could not store {len(tickets)} transition(s), none was "
                                f"acknowledged: {exc}")
        if self._verifier is not None and self._store is not None:
            with self._write_lock:  # its in-memory streaks may hold rolled-back entries
                self._verifier = GloveVerifier(self._store, self._verifier.config)

    def _submit(self, msg: TransitionMsg) -> Ticket | None:
        committer = self._committer
        return committer.submit(msg) if committer is not None else None

    def _take_probe(self, t: Transition) -> int | None:
        """Collect a probed outcome for an outstanding request; apply when alpha are in.

        Returns the id of the first new entry once applied, 0 while still collecting, None
        when no request is outstanding for this (state, action) (then it is observed as
        ordinary evidence).
        """
        assert self._verifier is not None
        for req in self._verifier.outstanding_probes():
            if req.pair == t.key:
                got = self._probe_outcomes.setdefault(req.request_id, [])
                got.append(t)
                if len(got) < req.alpha:
                    return 0
                del self._probe_outcomes[req.request_id]
                new_ids = self._verifier.apply_probes(req, got)
                self.get_logger().info(
                    f"realigned ({req.state_key}, {req.action} {req.action_arg}) with "
                    f"{len(got)} probed outcome(s): {sorted({g.outcome for g in got})}")
                return int(new_ids[0]) if new_ids else 0
        return None

    def _act_on(self, result: VerifyResult) -> None:
        for a in result.alerts if self._alert_pub is not None else ():
            msg = DissonanceAlert(
                state_key=a.state_key, action=a.action, action_arg=a.action_arg,
                observed_outcome=a.observed_outcome,
                expected_outcomes=a.expected_outcomes,
                expected_probabilities=[float(p) for p in a.expected_probabilities],
                observed_probability=float(a.observed_probability),
                history_size=int(a.history_size), hoeffding_bound=float(a.hoeffding_bound),
                consecutive_surprises=int(a.consecutive_surprises), mode=a.mode,
                suppressed_ids=conv.ids(a.suppressed_ids),
                probes_requested=int(a.probes_requested),
                kind=a.kind, observed_at=a.observed_at or a.state_key, reason=a.reason,
            )
            msg.header.stamp = self.get_clock().now().to_msg()
            self._alert_pub.publish(msg)
            self.get_logger().warning(
                f"DISSONANCE ({a.state_key}, {a.action} {a.action_arg}): {a.reason}; "
                f"{len(a.suppressed_ids)} suppressed"
            )
        for req in result.probe_requests:
            self._publish_probe(req)

    def _publish_probe(self, req: Any) -> None:
        if self._probe_pub is None or self._store is None:
            return
        pending = self._store.get_pending(req.pending_key)
        msg = ProbeRequest(state_key=req.state_key, action=req.action,
                           action_arg=req.action_arg, samples=int(req.alpha),
                           reason=req.reason,
                           entry_ids=conv.ids(pending.suppressed_ids if pending else ()))
        msg.header.stamp = self.get_clock().now().to_msg()
        self._probe_pub.publish(msg)

    def _publish_event(self, event: MemoryEvent) -> None:
        if self._event_pub is not None:
            self._event_pub.publish(conv.event_to_msg(event))

    # counters --------------------------------------------------------------------------
    def _on_lost(self, info: Any) -> None:
        self._dds_lost += int(getattr(info, "total_count_change", 1) or 1)

    def ingest_stats(self) -> dict[str, int]:
        """Ingest counters: received, committed, rejected, dropped, failed, dds_lost, queued."""
        out = self._committer.stats() if self._committer is not None else {}
        out["dds_lost"] = self._dds_lost
        return out

    def _log_drops(self) -> None:
        stats = self.ingest_stats()
        grew = {k: stats[k] - self._reported.get(k, 0) for k in
                ("dropped", "failed", "rejected", "dds_lost") if stats.get(k, 0)
                > self._reported.get(k, 0)}
        if grew:
            self.get_logger().warning(
                "transitions NOT stored since the last report: " + ", ".join(
                    f"{v} {k}" for k, v in grew.items()) + f" (totals {stats})")
        self._reported = stats

    def _publish_stats(self) -> None:
        stats = self.ingest_stats()
        self._log_drops()
        if self._stats_pub is None:
            return
        lost = stats["dropped"] + stats["failed"] + stats["dds_lost"]
        msg = DiagnosticStatus(
            name=f"{self.get_fully_qualified_name()}: ingest",
            hardware_id=str(self.get_parameter("db_path").value),
            level=DiagnosticStatus.WARN if lost else DiagnosticStatus.OK,
            message=(f"{lost} transition(s) not stored" if lost else "no transition lost"),
            values=[KeyValue(key=k, value=str(v)) for k, v in sorted(stats.items())],
        )
        self._stats_pub.publish(msg)

    # callbacks -------------------------------------------------------------------------
    def _on_transition(self, msg: TransitionMsg) -> None:
        self._submit(msg)  # refused when the queue is full: counted, logged with the stats

    def _on_record(self, req: Any, resp: Any) -> Any:
        ticket = self._submit(req.transition)
        if ticket is None:
            resp.accepted, resp.id = False, 0
            resp.message = ("memory is not configured" if self._committer is None else
                            "memory is overloaded (write queue full); nothing stored, retry")
            return resp
        if not ticket.wait(float(self.get_parameter("ingest.reply_timeout").value)):
            # still queued: it will be stored, but this caller cannot be told its id
            resp.accepted, resp.id = False, 0
            resp.message = "commit still pending after the reply timeout; its id is unknown"
            return resp
        resp.accepted, resp.id, resp.message = ticket.accepted, ticket.id, ticket.message
        return resp

    def _on_query(self, req: Any, resp: Any) -> Any:
        reader = self._reader
        try:
            if reader is None:
                raise RuntimeError("memory is not configured")
            limit = int(req.max_results) or int(self.get_parameter("max_results").value)
            entries, total = reader.query(
                state_key=req.state_key or None, action=req.action or None,
                action_arg=req.action_arg or None, robot_id=req.robot_id or None,
                include_suppressed=bool(req.include_suppressed), limit=limit,
            )
            resp.entries = conv.entries_to_msgs(entries)
            resp.total_matching = min(int(total), 2**32 - 1)
        except Exception as exc:  # a damaged page or a closed store must not kill the node
            self.get_logger().error(f"query_memory failed: {exc}")
            resp.entries, resp.total_matching = [], 0
        return resp

    def _on_explain(self, req: Any, resp: Any) -> Any:
        reader = self._reader
        try:
            if reader is None:
                raise RuntimeError("memory is not configured")
            expl = reader.explain(int(req.id))
            if expl is None:
                resp.found = False
                resp.explanation = f"no memory entry with id {req.id}"
                return resp
            for key, value in conv.explanation_fields(expl).items():
                setattr(resp, key, value)
        except Exception as exc:
            self.get_logger().error(f"explain_entry {req.id} failed: {exc}")
            resp = type(resp)()
            resp.found = False
            resp.explanation = f"error: {exc}"
        return resp

    def _on_reverify(self, req: Any, resp: Any) -> Any:
        if self._verifier is None:
            resp.success, resp.message = False, "verifier disabled"
            return resp
        try:
            with self._write_lock:
                verifier = self._verifier
                if verifier is None:
                    resp.success, resp.message = False, "verifier disabled"
                    return resp
                result = verifier.recheck_negatives(stuck=True)
        except Exception as exc:
            self.get_logger().error(f"reverify_negatives failed: {exc}")
            resp.success, resp.message = False, f"error: {exc}"
            return resp
        for r in result.probe_requests:
            self._publish_probe(r)
        resp.success = True
        resp.message = (f"{len(result.pairs)} stale negative (state, action) pair(s) queued for "
                        f"re-verification, {len(result.suppressed_ids)} entries suppressed, "
                        f"{len(result.probe_requests)} probe request(s)")
        self.get_logger().info(f"reverify_negatives: {resp.message}")
        return resp


class Intake:
    """The ``transitions`` subscription on a helper node spun by its own thread.

    Taking a message through the node's MultiThreadedExecutor costs a wait-set rebuild over
    every service of a lifecycle node and a thread-pool hand-off, per message; a dedicated
    single-threaded executor over one subscription takes messages several times faster and
    never waits behind a service call. The helper subscribes to the already resolved
    (remapped, namespaced) topic name and ignores global arguments, so a ``__node`` remap
    cannot rename it.
    """

    def __init__(self, owner: Any, topic: str, qos: Any, callback: Any, lost: Any) -> None:
        self.node = rclpy.create_node(
            f"{owner.get_name()}_intake", namespace=owner.get_namespace(),
            context=owner.context, use_global_arguments=False,
            start_parameter_services=False)
        self._callback, self._lost = callback, lost
        self._last_seq: dict[bytes, int] = {}
        with_info = _HAS_MESSAGE_INFO
        self.sub = self.node.create_subscription(
            TransitionMsg, topic, self._take if with_info else callback, qos,
            **_lost_counter(lost))
        self.executor = SingleThreadedExecutor(context=owner.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, name="memory-intake", daemon=True)
        self.thread.start()

    def _take(self, msg: TransitionMsg, info: Any) -> None:
        """Count samples DDS never delivered: gaps in each publisher's sequence numbers."""
        seq = info.get("publication_sequence_number")
        gid = info.get("publisher_gid")
        if seq is not None and gid:
            key = bytes(gid.get("data", b"")) if isinstance(gid, dict) else bytes(gid)
            last = self._last_seq.get(key)
            if last is not None and seq > last + 1:
                self._lost(_Gap(seq - last - 1))
            if last is None or seq > last:
                self._last_seq[key] = seq
        self._callback(msg)

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # context shut down under us: the node is going away
            pass

    def close(self) -> None:
        """Stop taking messages and destroy the helper node."""
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(5.0)
        self.node.destroy_node()


class _Gap:
    """A sequence gap, shaped like a message-lost event for the lost counter."""

    def __init__(self, n: int) -> None:
        self.total_count_change = n


def _message_info_supported() -> bool:
    """rclpy hands (msg, MessageInfo) to two-argument callbacks from Iron on; not Humble."""
    try:
        from rclpy.subscription import MessageInfo  # noqa: F401
    except ImportError:
        return False
    return True


_HAS_MESSAGE_INFO = _message_info_supported()


def _lost_counter(callback: Any) -> dict[str, Any]:
    """``event_callbacks`` that count samples DDS reports lost (empty where unsupported)."""
    try:
        from rclpy.event_handler import SubscriptionEventCallbacks
    except ImportError:  # Humble
        try:
            from rclpy.qos_event import SubscriptionEventCallbacks  # type: ignore[no-redef]
        except ImportError:
            return {}
    return {"event_callbacks": SubscriptionEventCallbacks(message_lost=callback)}


def main(args: Sequence[str] | None = None) -> int:
    """Run the memory node."""
    return run(MemoryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
