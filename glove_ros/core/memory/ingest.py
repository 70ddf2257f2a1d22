"""Group commit for a memory write path: many writes, one fsync, acknowledged only after it.

:class:`GroupCommitter` owns one writer thread. Producers :meth:`~GroupCommitter.submit`
items (a message off a topic, a service request); the thread takes every item waiting (up to
``max_batch``, waiting at most ``max_delay`` seconds for company after the first), applies
each inside its own savepoint of one store transaction and commits once. Only then are the
items' :class:`Ticket`\\ s completed, so an acknowledgement always means "durable".

Bad input (``apply`` raises ``ValueError``) rejects that item alone. Any other error rolls
the whole batch back and fails every ticket in it: nothing in a failed batch was stored, and
every caller is told. A full queue refuses new items (counted as ``dropped``); nothing is lost
without being counted. :meth:`~GroupCommitter.stats` returns the counters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GroupCommitter", "IngestConfig", "Ticket"]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestConfig:
    """Limits of the group commit: batch size, wait for company, queue length."""

    max_batch: int = 256
    max_delay: float = 0.002
    queue_size: int = 20000

    def validate(self) -> IngestConfig:
        """Raise ``ValueError`` with an actionable message for unusable limits."""
        if isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int) or not (
            1 <= self.max_batch <= 100_000
        ):
            raise ValueError(f"ingest max_batch must be an integer 1..100000, got "
                             f"{self.max_batch!r}")
        if not isinstance(self.max_delay, (int, float)) or not 0 <= self.max_delay <= 1.0:
            raise ValueError(f"ingest max_delay must be 0..1 seconds, got {self.max_delay!r}")
        if isinstance(self.queue_size, bool) or not isinstance(self.queue_size, int) or (
            self.queue_size < 1
        ):
            raise ValueError(f"ingest queue_size must be an integer >= 1, got "
                             f"{self.queue_size!r}")
        return self


class Ticket:
    """The fate of one submitted item: set once its batch committed or failed."""

    __slots__ = ("item", "accepted", "id", "message", "result", "_done")

    def __init__(self, item: Any) -> None:
        self.item = item
        self.accepted = False
        self.id = 0
        self.message = "not processed"
        self.result: Any = None
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the item's batch committed or failed; False on timeout."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        """True once the outcome is final."""
        return self._done.is_set()

    def _finish(self, accepted: bool, eid: int, message: str, result: Any = None) -> None:
        self.accepted, self.id, self.message, self.result = accepted, eid, message, result
        self._done.set()


_COUNTERS = ("received", "committed", "rejected", "dropped", "failed", "batches")


class GroupCommitter:
    """One writer thread committing submitted items in groups (see the module docstring).

    ``transaction()`` opens the outer transaction (e.g. ``store.transaction``), ``savepoint()``
    a nested one per item. ``apply(item) -> (id, message, result)`` stores one item (raises
    ``ValueError`` to reject it). ``committed(tickets)`` runs after each successful commit
    (e.g. to publish alerts), ``failed(exc, tickets)`` after a batch was rolled back.
    """

    def __init__(
        self,
        transaction: Callable[[], Any],
        apply: Callable[[Any], tuple[int, str, Any]],
        *,
        savepoint: Callable[[], Any] | None = None,
        committed: Callable[[Sequence[Ticket]], None] | None = None,
        failed: Callable[[BaseException, Sequence[Ticket]], None] | None = None,
        lock: Any = None,
        config: IngestConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = (config or IngestConfig()).validate()
        self._transaction = transaction
        self._savepoint = savepoint or transaction
        self._apply = apply
        self._committed = committed
        self._failed = failed
        self._lock = lock if lock is not None else threading.Lock()
        self._clock = clock
        self._queue: deque[Ticket] = deque()
        self._cond = threading.Condition()
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._largest = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    # producers ----------------------------------------------------------------------
    def submit(self, item: Any) -> Ticket | None:
        """Queue ``item``; its :class:`Ticket`, or None when the queue is full (counted)."""
        with self._cond:
            if self._stop or len(self._queue) >= self.config.queue_size:
                self._counts["dropped"] += 1
                return None
            ticket = Ticket(item)
            self._queue.append(ticket)
            self._counts["received"] += 1
            self._cond.notify()
        return ticket

    def stats(self) -> dict[str, int]:
        """Counters: received, committed, rejected, dropped, failed, batches, queued, largest."""
        with self._cond:
            out = dict(self._counts)
            out["queued"] = len(self._queue)
            out["largest_batch"] = self._largest
        return out

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued, then stop the thread (later submits are dropped)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # writer thread --------------------------------------------------------------------
    def _take(self) -> list[Ticket] | None:
        cfg = self.config
        with self._cond:
            while not self._queue:
                if self._stop:
                    return None
                self._cond.wait(0.5)
            if cfg.max_delay > 0 and len(self._queue) < cfg.max_batch and not self._stop:
                end = self._clock() + cfg.max_delay
                while len(self._queue) < cfg.max_batch and not self._stop:
                    left = end - self._clock()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            n = min(cfg.max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._commit(batch)

    def _commit(self, batch: list[Ticket]) -> None:
        outcomes: list[tuple[Ticket, bool, int, str, Any]] = []
        try:
            with self._lock, self._transaction():
                for ticket in batch:
                    try:
                        with self._savepoint():
                            eid, message, result = self._apply(ticket.item)
                    except ValueError as exc:
                        outcomes.append((ticket, False, 0, str(exc), None))
                        continue
                    outcomes.append((ticket, True, int(eid), message, result))
        except Exception as exc:  # the batch rolled back: nothing in it is stored
            with self._cond:
                self._counts["failed"] += len(batch)
                self._counts["batches"] += 1
            for ticket in batch:
                ticket._finish(False, 0, f"storage error, nothing stored: {exc}")
            if self._failed is not None:
                try:
                    self._failed(exc, batch)
                except Exception:
                    _LOG.exception("batch-failure callback failed")
            return
        accepted = sum(1 for o in outcomes if o[1])
        with self._cond:
            self._counts["committed"] += accepted
            self._counts["rejected"] += len(outcomes) - accepted
            self._counts["batches"] += 1
            self._largest = max(self._largest, len(batch))
        for ticket, ok, eid, message, result in outcomes:
            ticket.accepted, ticket.id, ticket.message, ticket.result = ok, eid, message, result
        if self._committed is not None:
            try:
                self._committed(batch)
            except Exception:  # publishing must not lose the acknowledgements
                _LOG.exception("after-commit callback failed")
        for ticket in batch:
            ticket._done.set()
