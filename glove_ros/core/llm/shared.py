"""One local LLM shared by several processes: context sizing and the request codec (ROS-free).

On the robot (an 8 GB Jetson Orin, CPU and GPU sharing that memory) the planner, the plan
gate and the consolidation node must not each hold a copy of the model. The llm node
(``glove_ros/nodes/llm_node.py``) holds the one copy and answers ``srv/LlmComplete.srv``;
the users call it through :class:`glove_ros.nodes.llm_client.ServiceLlm`. What both sides
need without ROS lives here:

- :func:`context_size` -- ``n_ctx`` sized to the prompt instead of a fixed 4096: the KV cache
  grows with ``n_ctx`` (Qwen2.5-1.5B: 28 KiB per token in f16).
- :func:`check_fits` -- the refusal of a request whose prompt and reply bound exceed it.
- :func:`encode_request` / :func:`decode_request` -- chat messages and a schema as JSON
  text, checked on arrival with a one-line error a user can act on.
- :func:`result_fields` / :func:`result_from_fields` -- :class:`LlmResult` to the response's
  fields and back.
- :func:`rss_mb` -- a process's resident memory (``VmRSS`` of ``/proc/<pid>/status``).
- :class:`SharedModel` -- the llm node's decisions: lazy load, the checks above, release.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.core.llm.runtime import (
    LlamaBackend,
    LlmConfig,
    LlmResult,
    Message,
    check_messages,
    check_schema,
    parse_json_reply,
)

__all__ = [
    "CONTEXT_STEP",
    "CONTEXT_FLOOR",
    "CONTEXT_MARGIN",
    "context_size",
    "check_fits",
    "encode_request",
    "decode_request",
    "prompt_tokens_of",
    "result_fields",
    "result_from_fields",
    "rss_mb",
    "SharedModel",
]

#: ``n_ctx`` is a multiple of this.
CONTEXT_STEP = 256
#: Smallest ``n_ctx`` :func:`context_size` returns.
CONTEXT_FLOOR = 512
#: Tokens added for the chat template's turn markers around the counted contents.
CONTEXT_MARGIN = 64
#: Tokens the template adds per message on top of its content (runtime's estimate).
PER_MESSAGE_TOKENS = 4


def context_size(max_prompt_tokens: int, max_tokens: int, *, margin: int = CONTEXT_MARGIN,
                 step: int = CONTEXT_STEP, floor: int = CONTEXT_FLOOR) -> int:
    """The context window for prompts of up to ``max_prompt_tokens`` and replies of up to
    ``max_tokens``: their sum plus ``margin``, rounded up to a multiple of ``step``, at least
    ``floor``.

    >>> context_size(1920, 256)
    2304
    >>> context_size(100, 40)
    512

    Raises:
        ValueError: a negative or non-integer size, ``step`` < 1.
    """
    for name, v in (("max_prompt_tokens", max_prompt_tokens), ("max_tokens", max_tokens),
                    ("margin", margin), ("floor", floor)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an int >= 0 (got {v!r})")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be an int >= 1 (got {step!r})")
    need = max_prompt_tokens + max_tokens + margin
    return max(floor, int(math.ceil(need / step)) * step)


def check_fits(prompt_tokens: int, max_tokens: int, n_ctx: int) -> str | None:
    """``None`` when a prompt of ``prompt_tokens`` plus a reply of ``max_tokens`` fits in
    ``n_ctx`` with the template margin; else the one-line refusal."""
    need = prompt_tokens + max_tokens + CONTEXT_MARGIN
    if need <= n_ctx:
        return None
    return (f"prompt of {prompt_tokens} tokens + max_tokens {max_tokens} + {CONTEXT_MARGIN} "
            f"template margin = {need} > n_ctx {n_ctx}: shorten the prompt (the caller's "
            "budget) or raise the llm node's max_prompt_tokens / n_ctx")


def encode_request(messages: Sequence[Message], schema: Mapping[str, Any]) -> tuple[str, str]:
    """``(messages_json, schema_json)`` of a request; the same checks as the backend.

    Raises:
        ValueError: malformed messages or an unsupported schema (the caller's bug: it would
            fail the same way in-process).
    """
    msgs = check_messages(messages)
    check_schema(schema)
    return json.dumps(msgs, ensure_ascii=False), json.dumps(schema, ensure_ascii=False)


def decode_request(messages_json: str, schema_json: str
                   ) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Parse and check a request's messages and schema.

    Raises:
        ValueError: one line naming the field and what is wrong with it.
    """
    try:
        raw_msgs = json.loads(messages_json)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"messages_json is not JSON: {exc}") from None
    try:
        schema = json.loads(schema_json)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"schema_json is not JSON: {exc}") from None
    if not isinstance(raw_msgs, list):
        raise ValueError("messages_json must be a JSON list of {role, content} objects "
                         f"(got {type(raw_msgs).__name__})")
    try:
        msgs = check_messages(raw_msgs)
    except ValueError as exc:
        raise ValueError(f"messages_json: {exc}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"schema_json must be a JSON object (got {type(schema).__name__})")
    try:
        check_schema(schema)
    except ValueError as exc:
        raise ValueError(f"schema_json: {exc}") from None
    return msgs, schema


def prompt_tokens_of(messages: Sequence[Mapping[str, str]], count: Any) -> int:
    """Tokens of the formatted prompt as the runtime counts them: each content with
    ``count`` plus :data:`PER_MESSAGE_TOKENS` per message."""
    return sum(int(count(m["content"])) + PER_MESSAGE_TOKENS for m in messages)


def result_fields(res: LlmResult, *, load_s: float = 0.0, n_ctx: int = 0) -> dict[str, Any]:
    """The ``LlmComplete`` response fields of a result (``value_json`` "" when not ok)."""
    return {
        "ok": bool(res.ok),
        "value_json": json.dumps(res.data, ensure_ascii=False) if res.ok else "",
        "raw_text": str(res.raw_text or ""),
        "error": "" if res.error is None else str(res.error),
        "finish_reason": str(res.finish_reason or ""),
        "prompt_tokens": _i32(res.prompt_tokens),
        "completion_tokens": _i32(res.tokens),
        "prompt_eval_tokens": _i32(res.prompt_eval_tokens),
        "prompt_eval_s": float(res.prompt_eval_s),
        "gen_s": float(res.gen_s),
        "seconds": float(res.elapsed_s),
        "load_s": float(load_s),
        "n_ctx": _i32(n_ctx),
    }


def result_from_fields(f: Mapping[str, Any], schema: Mapping[str, Any] | None = None
                       ) -> LlmResult:
    """An :class:`LlmResult` from response fields (a mapping or the response's attributes).

    ``ok`` with a ``value_json`` that does not parse (or, given ``schema``, does not
    validate) is turned into a failed result: the caller never sees unchecked data.
    """
    def get(k: str, default: Any) -> Any:
        return f.get(k, default) if isinstance(f, Mapping) else getattr(f, k, default)

    ok = bool(get("ok", False))
    error = str(get("error", "") or "") or None
    data = None
    if ok:
        text = str(get("value_json", ""))
        if schema is not None:
            data, err = parse_json_reply(text, schema)
        else:
            try:
                data, err = json.loads(text), None
            except ValueError as exc:
                data, err = None, f"invalid JSON from the llm node: {exc}"
        if err is not None:
            data, error = None, f"llm node reply unusable: {err}"
    elif error is None:
        error = "the llm node answered ok=false without a reason"
    return LlmResult(
        data, str(get("raw_text", "")), int(get("completion_tokens", 0)), error,
        int(get("prompt_tokens", 0)), float(get("seconds", 0.0)) + float(get("load_s", 0.0)),
        str(get("finish_reason", "")) or ("stop" if ok else "error"),
        int(get("prompt_eval_tokens", 0)), float(get("prompt_eval_s", 0.0)),
        float(get("gen_s", 0.0)))


def _i32(x: Any) -> int:
    return max(-(2**31), min(int(x), 2**31 - 1))


def rss_mb(pid: int | str = "self", proc: str | Path = "/proc", field: str = "VmRSS") -> float:
    """Resident set size of process ``pid`` in MiB (``VmRSS`` of ``/proc/<pid>/status``;
    ``field="VmHWM"``: its peak so far).

    Raises:
        OSError: no such process, or no ``/proc`` (not Linux).
        ValueError: the status file has no such line (a zombie).
    """
    text = (Path(proc) / str(pid) / "status").read_text()
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            parts = line.split()
            unit = parts[2].lower() if len(parts) > 2 else "kb"
            scale = {"kb": 1 / 1024, "mb": 1.0, "gb": 1024.0}.get(unit, 1 / 1024)
            return int(parts[1]) * scale
    raise ValueError(f"no {field} in {Path(proc) / str(pid) / 'status'} (process exiting?)")


# --------------------------------------------------------------------------------------------
# the server side: one model, loaded on first use


class SharedModel:
    """The llm node's core: one backend, loaded on the first request, released on demand.

    :meth:`serve` turns one ``LlmComplete`` request into its response fields and never
    raises: a malformed request, a prompt that does not fit ``n_ctx``, a model that cannot
    be loaded and a failed generation all come back as ``ok: False`` with a one-line
    ``error``. Calls are serialised (one llama.cpp context is not re-entrant).

    Args:
        config: the model's configuration; its ``n_ctx`` is the window requests must fit.
        max_tokens_limit: the largest reply bound a request may ask for (0 in a request
            means ``config.max_tokens``).
        backend_factory: builds the backend from ``config`` (default :class:`LlamaBackend`,
            which checks the model file); called again after a failure, so a model
            installed later is found without a restart.
        clock: monotonic seconds (tests).
    """

    def __init__(self, config: LlmConfig, max_tokens_limit: int, backend_factory: Any = None,
                 clock: Any = None) -> None:
        self.config = config.validate()
        if isinstance(max_tokens_limit, bool) or not isinstance(max_tokens_limit, int) \
                or not 1 <= max_tokens_limit < config.n_ctx:
            raise ValueError(f"max_tokens must be an int in [1, n_ctx={config.n_ctx}) "
                             f"(got {max_tokens_limit!r})")
        self.max_tokens_limit = max_tokens_limit
        self._factory = backend_factory or LlamaBackend
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._backend: Any = None
        self.model_error: str | None = None
        self.loads = 0
        self.releases = 0
        self.requests: dict[str, int] = {}
        self.failures = 0
        self.last_load_s = 0.0
        self.last_used = self._clock()
        self.busy = False
        self.model_path = ""
        self.check_model()

    def check_model(self) -> bool:
        """Build the backend (cheap: the file is checked, not loaded); False and
        :attr:`model_error` set when the model is missing or invalid."""
        if self._backend is not None:
            return True
        try:
            self._backend = self._factory(self.config)
        except Exception as exc:  # LlmLoadError, a bad config: reported, never raised
            self.model_error = str(exc)
            return False
        self.model_error = None
        self.model_path = str(getattr(self._backend, "model_path", ""))
        return True

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory now."""
        b = self._backend
        return bool(b is not None and getattr(b, "loaded", False))

    def serve(self, messages_json: str, schema_json: str, max_tokens: int = 0,
              timeout_s: float = 0.0, purpose: str = "") -> dict[str, Any]:
        """Answer one request (response fields of ``LlmComplete``); never raises."""
        purpose = str(purpose or "unnamed")[:32]
        with self._lock:
            self.busy = True
            try:
                return self._serve(messages_json, schema_json, max_tokens, timeout_s, purpose)
            finally:
                self.busy = False
                self.last_used = self._clock()

    def _refuse(self, error: str, finish: str = "refused") -> dict[str, Any]:
        self.failures += 1
        return result_fields(LlmResult(None, "", 0, error, finish_reason=finish),
                             n_ctx=self.config.n_ctx)

    def _serve(self, messages_json: str, schema_json: str, max_tokens: int,
               timeout_s: float, purpose: str) -> dict[str, Any]:
        self.requests[purpose] = self.requests.get(purpose, 0) + 1
        try:
            msgs, schema = decode_request(messages_json, schema_json)
        except ValueError as exc:
            return self._refuse(f"bad request: {exc}")
        bound = self.config.max_tokens if not max_tokens else int(max_tokens)
        if not 1 <= bound <= self.max_tokens_limit:
            return self._refuse(f"bad request: max_tokens must be in 1..{self.max_tokens_limit}"
                                f" (the llm node's max_tokens), got {max_tokens}")
        timeout = float(timeout_s) if timeout_s else self.config.timeout_s
        if not math.isfinite(timeout) or timeout <= 0:
            return self._refuse(f"bad request: timeout_s must be > 0 (got {timeout_s})")
        if not self.check_model():
            return self._refuse(f"no model: {self.model_error}", "error")
        load_s = 0.0
        if not self.loaded:
            t0 = self._clock()
            try:
                self._backend.load()
            except Exception as exc:  # LlmLoadError, out of memory in llama.cpp
                return self._refuse(f"model failed to load: {exc}", "error")
            load_s = self.last_load_s = self._clock() - t0
            self.loads += 1
        prompt = prompt_tokens_of(msgs, self._backend.count_tokens)
        too_long = check_fits(prompt, bound, self.config.n_ctx)
        if too_long is not None:
            out = self._refuse(too_long)
            out["load_s"], out["prompt_tokens"] = load_s, prompt
            return out
        try:
            res = self._backend.complete_json(msgs, schema, bound, timeout_s=timeout)
        except ValueError as exc:  # a schema llama.cpp's grammar parser refuses
            out = self._refuse(f"bad request: {exc}")
            out["load_s"] = load_s
            return out
        except Exception as exc:  # never into the caller: it falls back
            out = self._refuse(f"llama.cpp error: {exc}", "error")
            out["load_s"] = load_s
            return out
        if not res.ok:
            self.failures += 1
        return result_fields(res, load_s=load_s, n_ctx=self.config.n_ctx)

    def release(self) -> bool:
        """Unload the model (waits for a running request); True when one was loaded."""
        with self._lock:
            was = self.loaded
            if self._backend is not None:
                self._backend.close()
            if was:
                self.releases += 1
            self.last_used = self._clock()
            return was

    def idle_expired(self, idle_release_s: float) -> bool:
        """True when the model is loaded, no request runs and none came for
        ``idle_release_s`` seconds (0 = never)."""
        return (idle_release_s > 0 and self.loaded and not self.busy
                and self._clock() - self.last_used >= idle_release_s)
