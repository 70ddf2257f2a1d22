"""The shared LLM as a :class:`~glove_ros.core.llm.runtime.JsonLlm`: a client of the llm node.

:class:`ServiceLlm` has the two methods the planner, the Janus updater and the consolidation
policy call (``complete_json``, ``count_tokens``) and sends each completion to the llm
node's ``llm/complete`` service (``srv/LlmComplete.srv``, glove_ros/nodes/llm_node.py). It
never raises into its caller for anything the network or the other process does: a service
that is absent, does not answer within the call's ``timeout_s`` plus ``wait_s`` (room for
the lazy model load and for a request queued behind another node's), or answers garbage
gives a failed :class:`~glove_ros.core.llm.runtime.LlmResult`, and the caller falls back as
on any LLM failure (the planner to greedy). Bad *input* (malformed messages, an unsupported
schema) raises ``ValueError`` as the in-process backend does.

Calls block the calling thread, so they must come from a worker of a multi-threaded
executor (every glove_ros node runs one); the client's own callback group lets another
thread take the answer.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rclpy.callback_groups import ReentrantCallbackGroup
from std_srvs.srv import Trigger

from glove_ros.core.llm.runtime import LlmResult, Message, approx_tokens
from glove_ros.core.llm.shared import encode_request, result_from_fields
from glove_ros.nodes.common import wait_future
from glove_ros.srv import LlmComplete


def release_service_of(service: str) -> str:
    """The ``release`` service beside a ``complete`` service: ``llm/complete`` ->
    ``llm/release``; ``/robot1/llm/complete`` -> ``/robot1/llm/release``."""
    head, _, _tail = service.rpartition("/")
    return f"{head}/release" if head else "release"


class ServiceLlm:
    """:class:`~glove_ros.core.llm.runtime.JsonLlm` over the llm node's service.

    Args:
        node: the node whose executor spins the client.
        service: the ``LlmComplete`` service (relative names follow the namespace).
        purpose: sent with every request (the llm node counts and logs by it).
        max_tokens: reply bound when a call gives none.
        timeout_s: generation bound sent when a call gives none.
        wait_s: seconds waited beyond the call's ``timeout_s`` (a model load, a queue).
        discover_s: how long a call waits for the service to appear.
    """

    def __init__(self, node: Any, service: str = "llm/complete", *, purpose: str = "",
                 max_tokens: int = 256, timeout_s: float = 60.0, wait_s: float = 30.0,
                 discover_s: float = 2.0) -> None:
        if not str(service).strip():
            raise ValueError("ServiceLlm needs a service name (e.g. llm/complete)")
        if timeout_s <= 0 or wait_s < 0 or discover_s < 0:
            raise ValueError(f"timeout_s must be > 0 and wait_s, discover_s >= 0 (got "
                             f"{timeout_s}, {wait_s}, {discover_s})")
        self._node = node
        self.service = service
        self.purpose = purpose
        self.max_tokens = int(max_tokens)
        self.timeout_s = float(timeout_s)
        self.wait_s = float(wait_s)
        self.discover_s = float(discover_s)
        self._group = ReentrantCallbackGroup()
        self._client = node.create_client(LlmComplete, service, callback_group=self._group)
        self._release = node.create_client(Trigger, release_service_of(service),
                                           callback_group=self._group)
        self.calls = 0
        self.failures = 0

    def service_is_ready(self) -> bool:
        """Whether the llm node's service is discovered now."""
        return bool(self._client.service_is_ready())

    @property
    def loaded(self) -> bool:
        """Always False: the model lives in the llm node (loaded there on demand)."""
        return False

    def load(self) -> ServiceLlm:
        """Nothing to load here (the llm node loads on the first request). Returns self."""
        return self

    def count_tokens(self, text: str) -> int:
        """:func:`~glove_ros.core.llm.runtime.approx_tokens` (no round trip per count; it
        tends to over-estimate, and the llm node refuses a prompt that does not fit)."""
        if not isinstance(text, str):
            raise ValueError(f"count_tokens needs a string, got {type(text).__name__}")
        return approx_tokens(text)

    def with_purpose(self, purpose: str) -> ServiceLlm:
        """The same client, sending ``purpose`` (e.g. ``parse`` beside ``plan``)."""
        other = copy.copy(self)
        other.purpose = str(purpose)
        return other

    def _failed(self, error: str, t0: float) -> LlmResult:
        self.failures += 1
        return LlmResult(None, "", 0, error, elapsed_s=time.monotonic() - t0,
                         finish_reason="error")

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any],
                      max_tokens: int | None = None, *, timeout_s: float | None = None,
                      temperature: float | None = None) -> LlmResult:
        """Ask the llm node; a failed result (never an exception) when it cannot answer.

        ``temperature`` is ignored: the llm node samples with its own.

        Raises:
            ValueError: malformed ``messages`` or an unsupported ``schema``.
        """
        messages_json, schema_json = encode_request(messages, schema)
        bound = self.max_tokens if max_tokens is None else int(max_tokens)
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        self.calls += 1
        t0 = time.monotonic()
        req = LlmComplete.Request(messages_json=messages_json, schema_json=schema_json,
                                  max_tokens=bound, timeout_s=timeout, purpose=self.purpose)
        try:
            if not self._client.wait_for_service(timeout_sec=self.discover_s):
                return self._failed(f"llm service {self._client.srv_name} not available "
                                    "(is the llm node running and active?)", t0)
            future = self._client.call_async(req)
            resp = wait_future(future, timeout + self.wait_s)
        except Exception as exc:  # a destroyed client, a shut-down context
            return self._failed(f"llm service call failed: {exc!r}", t0)
        if resp is None:
            remove = getattr(self._client, "remove_pending_request", None)
            if callable(remove):
                try:
                    remove(future)
                except Exception:  # pragma: no cover - best effort
                    pass
            return self._failed(f"no answer from {self._client.srv_name} within "
                                f"{timeout + self.wait_s:g} s", t0)
        res = result_from_fields(resp, schema)
        if not res.ok:
            self.failures += 1
        # the caller's clock: the round trip, not only the node's generation time
        return LlmResult(res.data, res.raw_text, res.tokens, res.error, res.prompt_tokens,
                         max(res.elapsed_s, time.monotonic() - t0), res.finish_reason,
                         res.prompt_eval_tokens, res.prompt_eval_s, res.gen_s)

    def release(self, timeout: float = 30.0) -> tuple[bool, str]:
        """Ask the llm node to unload its model now: ``(success, message)``, never raises."""
        try:
            if not self._release.wait_for_service(timeout_sec=self.discover_s):
                return False, f"{self._release.srv_name} not available"
            resp = wait_future(self._release.call_async(Trigger.Request()), timeout)
        except Exception as exc:
            return False, f"{self._release.srv_name} failed: {exc!r}"
        if resp is None:
            return False, f"{self._release.srv_name}: no answer within {timeout:g} s"
        return bool(resp.success), str(resp.message)

    def close(self) -> None:
        """Nothing to release here: the model lives in the llm node (its ``llm/release``
        unloads it, :meth:`release`); the clients stay with the node for reuse
        (:func:`shared_llm`)."""


_SETTINGS = {"purpose": str, "max_tokens": int, "timeout_s": float, "wait_s": float,
             "discover_s": float}


def shared_llm(node: Any, previous: ServiceLlm | None, service: str, **settings: Any
               ) -> ServiceLlm:
    """A :class:`ServiceLlm` for ``service`` with ``settings``: ``previous`` updated when it
    calls the same service (a re-activation creates no second client), else a new one."""
    if previous is not None and previous.service == service:
        for key, value in settings.items():
            if key not in _SETTINGS:
                raise TypeError(f"ServiceLlm has no setting {key!r}")
            setattr(previous, key, _SETTINGS[key](value))
        return previous
    return ServiceLlm(node, service, **settings)


__all__ = ["ServiceLlm", "release_service_of", "shared_llm"]
