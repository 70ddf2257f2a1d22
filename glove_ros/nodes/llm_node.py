"""LLM node: the robot's one copy of the local LLM, shared by the planner, plan gate and
consolidation node.

On an 8 GB Jetson Orin CPU and GPU share one memory: three nodes each loading the 1.1 GB
model (about 2 GB resident with its context) would not fit beside Nav2 and the camera. This
node holds the model once and answers JSON-schema constrained completions
(:mod:`glove_ros.core.llm.shared`, :class:`~glove_ros.core.llm.runtime.LlamaBackend`). The
users set ``llm.service: llm/complete`` and call it through
:class:`glove_ros.nodes.llm_client.ServiceLlm`; a missing or slow node gives them a failed
result, and they fall back as they do on any LLM failure (the planner to greedy).

The model is loaded on the first request, not at start: a robot on ``planner: greedy``
never loads it. The consolidation node releases it after its dock-time run
(``llm/release``); ``idle_release_s`` releases it after that many seconds without a
request. ``n_ctx: 0`` sizes the context to the prompts (:func:`~glove_ros.core.llm.shared.
context_size` of ``max_prompt_tokens`` and ``max_tokens``); a request that does not fit is
refused with the numbers, never truncated. Requests are served one at a time.

A missing model file does not fail configure (a greedy robot needs none): the node starts,
reports it on /diagnostics, and every request answers ``ok: false`` with the install
command until the model is there.

Interfaces (relative names):
  srv  llm/complete   glove_ros/LlmComplete  one completion (loads the model if needed)
  srv  llm/release    std_srvs/Trigger       unload the model now (after a running request)
  pub  /diagnostics   diagnostic_msgs/DiagnosticArray: model, loaded, n_ctx, RSS, requests
                      per purpose, failures, load time, latency
"""

from __future__ import annotations

import ctypes
import gc
import time
from collections.abc import Sequence
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_srvs.srv import Trigger

from glove_ros.core.llm.runtime import LlmConfig
from glove_ros.core.llm.shared import SharedModel, context_size, rss_mb
from glove_ros.core.ops.health import OK, WARN, LatencyStat
from glove_ros.nodes.common import (
    AUTOSTART_PARAMS,
    Param,
    declare_params,
    destroy_handles,
    param_values,
    run,
    validating_callback,
)
from glove_ros.nodes.diagnostics import NodeDiagnostics
from glove_ros.srv import LlmComplete

PARAMS = (
    *AUTOSTART_PARAMS,
    Param("model_path", "", "model name (glove_ros.core.llm.models) or GGUF path; '' = the "
          "default model ($GLOVE_LLM_MODEL or qwen2.5-coder-1.5b)", read_only=True),
    Param("n_ctx", 0, "context window, tokens; 0 = sized to the prompts: max_prompt_tokens + "
          "max_tokens + 64, rounded up to 256 (at least 512)", read_only=True),
    Param("max_prompt_tokens", 1920, "the longest prompt a user sends (sizes n_ctx when it "
          "is 0); a request whose prompt + max_tokens + 64 exceed n_ctx is refused",
          read_only=True),
    Param("max_tokens", 256, "the largest reply bound a request may ask for; a request's 0 "
          "means this", read_only=True),
    Param("n_threads", 0, "llama.cpp CPU threads (0 = automatic)", read_only=True),
    Param("n_gpu_layers", 0, "layers offloaded to the GPU (Jetson CUDA build); -1 = all",
          read_only=True),
    Param("temperature", 0.0, "sampling temperature (0 = greedy)", read_only=True),
    Param("seed", 0, "sampling seed", read_only=True),
    Param("timeout_s", 60.0, "wall-clock bound on one generation when a request gives none",
          read_only=True),
    Param("prefix_cache_mb", 0, "RAM for saved prompt prefixes (0 = only the live context's; "
          "each MB is taken from the robot's shared memory)", read_only=True),
    Param("idle_release_s", 0.0, "unload the model after this many seconds without a request "
          "(0 = keep it until llm/release or deactivate)"),
)


def n_ctx_of(values: dict[str, Any]) -> int:
    """The context window: ``n_ctx``, or sized to the prompts when it is 0."""
    n = int(values["n_ctx"])
    if n:
        return n
    return context_size(int(values["max_prompt_tokens"]), int(values["max_tokens"]))


def llm_config(values: dict[str, Any]) -> LlmConfig:
    """The validated model configuration from the parameters."""
    return LlmConfig(
        model_path=str(values["model_path"]), n_ctx=n_ctx_of(values),
        n_threads=int(values["n_threads"]), n_gpu_layers=int(values["n_gpu_layers"]),
        max_tokens=int(values["max_tokens"]), temperature=float(values["temperature"]),
        seed=int(values["seed"]), timeout_s=float(values["timeout_s"]),
        prefix_cache_mb=int(values["prefix_cache_mb"]),
    ).validate()


def validate(values: dict[str, Any]) -> None:
    """Raise ValueError when the parameters cannot work (same check live and at configure)."""
    if int(values["n_ctx"]) < 0:
        raise ValueError(f"n_ctx must be >= 0 (0 = sized to the prompts), got {values['n_ctx']}")
    if int(values["max_prompt_tokens"]) < 1:
        raise ValueError("max_prompt_tokens must be >= 1")
    cfg = llm_config(values)
    if int(values["max_prompt_tokens"]) + cfg.max_tokens > cfg.n_ctx:
        raise ValueError(f"max_prompt_tokens {values['max_prompt_tokens']} + max_tokens "
                         f"{cfg.max_tokens} exceed n_ctx {cfg.n_ctx}: raise n_ctx or set it 0")
    if float(values["idle_release_s"]) < 0:
        raise ValueError("idle_release_s must be >= 0 (0 = never)")


def _trim_heap() -> None:
    """Hand freed heap back to the OS (glibc keeps it otherwise); best effort."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class LlmNode(LifecycleNode):
    """Serves ``llm/complete`` from one lazily loaded model (decisions in core/llm/shared)."""

    def __init__(self) -> None:
        super().__init__("llm")
        declare_params(self, PARAMS)
        self.add_on_set_parameters_callback(validating_callback(self, PARAMS, validate))
        self._model: SharedModel | None = None
        self._handles: list[Any] = []
        self._timer: Any = None
        self._serve_group = MutuallyExclusiveCallbackGroup()  # one completion at a time
        self._admin_group = MutuallyExclusiveCallbackGroup()  # release, idle timer
        self._latency = LatencyStat()
        self._rss_loaded = 0.0
        self._diagnostics = NodeDiagnostics(self, self._diagnose)

    # lifecycle -------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = param_values(self, PARAMS)
        try:
            validate(values)
            cfg = llm_config(values)
            self._model = SharedModel(cfg, int(values["max_tokens"]))
        except ValueError as exc:
            self.get_logger().error(f"cannot configure the llm node: {exc}")
            return TransitionCallbackReturn.FAILURE
        if self._model.model_error:
            self._warn(f"no model yet ({self._model.model_error}); requests fail until it "
                       "is installed")
        else:
            self.get_logger().info(
                f"model {self._model.model_path}, n_ctx {cfg.n_ctx}"
                f"{' (sized to the prompts)' if not int(values['n_ctx']) else ''}, max_tokens "
                f"{cfg.max_tokens}; loaded on the first request (RSS now {self._rss():.0f} MB)")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._handles = [
            self.create_service(LlmComplete, "llm/complete", self._on_complete,
                                callback_group=self._serve_group),
            self.create_service(Trigger, "llm/release", self._on_release,
                                callback_group=self._admin_group),
        ]
        self._timer = self.create_timer(1.0, self._on_idle_check,
                                        callback_group=self._admin_group)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        destroy_handles(self, self._handles)
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        self._release("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("cleanup")
        self._model = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    # services --------------------------------------------------------------------------
    def _on_complete(self, req: Any, resp: Any) -> Any:
        model = self._model
        if model is None:
            resp.ok, resp.error, resp.finish_reason = False, "llm node not configured", "error"
            return resp
        before = self._rss() if not model.loaded else 0.0
        t0 = time.monotonic()
        fields = model.serve(req.messages_json, req.schema_json, int(req.max_tokens),
                             float(req.timeout_s), req.purpose)
        self._latency.add(time.monotonic() - t0)
        if fields["load_s"]:
            self._rss_loaded = self._rss()
            self.get_logger().info(
                f"model loaded in {fields['load_s']:.1f} s for a '{req.purpose}' request; RSS "
                f"{before:.0f} MB before it, {self._rss_loaded:.0f} MB after it was answered "
                f"({time.monotonic() - t0:.1f} s, n_ctx {model.config.n_ctx})")
        for key, value in fields.items():
            setattr(resp, key, value)
        if not resp.ok:
            self._warn(f"'{req.purpose}' request failed: {resp.error}")
        return resp

    def _on_release(self, _req: Any, resp: Any) -> Any:
        resp.success = True
        resp.message = self._release("llm/release")
        return resp

    def _on_idle_check(self) -> None:
        model = self._model
        idle = float(self.get_parameter("idle_release_s").value)
        if model is not None and model.idle_expired(idle):
            self._release(f"idle for {idle:g} s")

    def _release(self, why: str) -> str:
        model = self._model
        if model is None or not model.loaded:
            return "the model was not loaded"
        before = self._rss()
        model.release()
        _trim_heap()
        text = f"model released ({why}): RSS {before:.0f} -> {self._rss():.0f} MB"
        self.get_logger().info(text)
        return text

    # helpers ---------------------------------------------------------------------------
    @staticmethod
    def _rss() -> float:
        try:
            return rss_mb()
        except (OSError, ValueError):  # no /proc (not Linux)
            return 0.0

    def _warn(self, text: str) -> None:
        logger = self.get_logger()  # `warning` on Iron and later, `warn` on Humble
        getattr(logger, "warning", logger.warn)(text)

    def _diagnose(self) -> tuple[int, str, dict]:
        """/diagnostics: model, loaded, n_ctx, RSS, requests, failures, latency."""
        model = self._model
        if model is None:
            return WARN, "not configured", {}
        mean, worst = self._latency.summary()
        values = {"model": model.model_path or "-", "loaded": model.loaded,
                  "n_ctx": model.config.n_ctx, "rss_mb": self._rss(),
                  "requests": sum(model.requests.values()), "failures": model.failures,
                  "loads": model.loads, "releases": model.releases,
                  "last_load_s": model.last_load_s, "latency_mean_s": mean,
                  "latency_max_s": worst}
        values.update({f"requests_{k}": v for k, v in sorted(model.requests.items())})
        if model.model_error:
            return WARN, f"no model: {model.model_error}", values
        state = "loaded" if model.loaded else "not loaded (loads on the first request)"
        return OK, f"{state}, {values['requests']} requests", values


def main(args: Sequence[str] | None = None) -> int:
    """Run the llm node."""
    return run(LlmNode, args)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["LlmNode", "PARAMS", "llm_config", "main", "n_ctx_of", "validate"]
