"""The local LLM layer shared by the planner, the Janus updater and the dock-time consolidator.

Everything the robot asks its LLM goes through one call, :meth:`JsonLlm.complete_json`:
chat messages in, a JSON value constrained by a JSON schema out. The small local models the
robot runs (SmolLM2-135M here, 1-3B Q4 on a Jetson) are weak at following format
instructions, so the *grammar* does the work: the schema is compiled to a GBNF grammar and
llama.cpp can only sample tokens the grammar allows. The result is then parsed and checked
against the schema again (a truncated reply, a token bound or a timeout can still leave
invalid text). Nothing in this module raises on bad model output: it comes back as
``LlmResult(data=None, error=...)`` and the caller keeps its state unchanged.

Pieces:

- :class:`LlmConfig` -- frozen configuration with :meth:`LlmConfig.validate`.
- :func:`default_model_path` -- the configured default GGUF (``$GLOVE_LLM_MODEL`` or
  :data:`~glove_ros.core.llm.models.DEFAULT_MODEL`, see :mod:`glove_ros.core.llm.models`);
  ``LlmConfig.model_path`` takes a model name or a ``.gguf`` path.
- :class:`LlamaBackend` -- llama-cpp-python (imported lazily) behind :class:`JsonLlm`.
- :class:`ScriptedLlm` -- a test double returning canned replies, validated like the real one.
- :func:`choice_schema` -- a schema forcing one of a list of strings (planner waypoint choice).
- :func:`count_tokens` / :func:`approx_tokens` -- token counting for prompt budgets.
- :func:`validate_json` / :func:`check_schema` -- the JSON-schema subset used everywhere.

What works with llama-cpp-python 0.3.36 (measured on the bundled SmolLM2 GGUF): both
``response_format={"type": "json_object", "schema": ...}`` and
``grammar=LlamaGrammar.from_json_schema(...)`` constrain the output; this module uses the
explicit grammar (built once per schema and cached) with ``stream=True`` so that a wall-clock
timeout can stop generation between tokens.

Prefix reuse: prompts are built static part first (system rules, few-shot examples), so
consecutive calls share a token prefix; llama.cpp keeps the KV cache of the longest common
prefix and evaluates only the rest. With ``LlmConfig.prefix_cache_mb > 0`` the backend also
keeps llama.cpp states in RAM (``LlamaRAMCache``), so interleaved prompts with different
static parts (planner, updater, consolidator on one model) each resume from their own
prefix. Every result reports how many prompt tokens were actually evaluated and how long
prompt evaluation and generation took (llama.cpp's own perf counters), from which the
benchmark derives prompt and generation tokens per second.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from glove_ros.core.llm.models import MODELS, ModelFileError, resolve_model, verify

__all__ = [
    "LlmConfig",
    "LlmResult",
    "LlmLoadError",
    "JsonLlm",
    "LlamaBackend",
    "ScriptedLlm",
    "Message",
    "default_model_path",
    "check_model_file",
    "choice_schema",
    "count_tokens",
    "approx_tokens",
    "validate_json",
    "check_schema",
    "check_messages",
    "parse_json_reply",
    "SUPPORTED_SCHEMA_KEYWORDS",
    "MAX_SCHEMA_REPEAT",
]

#: A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]

_GGUF_MAGIC = b"GGUF"
_ROLES = ("system", "user", "assistant")


class LlmLoadError(RuntimeError):
    """The model cannot be loaded: file missing, not a GGUF, or llama_cpp not installed."""


# --------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class LlmConfig:
    """Configuration of the local LLM.

    Attributes:
        model_path: a model name of :data:`glove_ros.core.llm.models.MODELS`
            (``"qwen2.5-coder-1.5b"``, ``"smollm2-135m"``, ...) or a path to a GGUF file;
            ``""`` = the default model (``$GLOVE_LLM_MODEL``, else
            :data:`~glove_ros.core.llm.models.DEFAULT_MODEL`; see :func:`default_model_path`).
        n_ctx: context window in tokens (prompt + reply).
        n_threads: CPU threads for llama.cpp; 0 = llama-cpp-python's default (half the
            cores). Keep it below the number of *idle* cores: llama.cpp's threads spin-wait,
            and on a 2-core machine shared with busy processes 2 threads fell to ~3 tok/s
            where 1 thread kept ~58 tok/s (SmolLM2-135M Q4_1).
        n_gpu_layers: layers offloaded to the GPU (Jetson CUDA build of llama-cpp-python);
            0 = CPU only, -1 = all layers.
        max_tokens: default bound on generated tokens per call.
        temperature: sampling temperature; 0 = greedy (reproducible).
        seed: sampling seed.
        timeout_s: wall-clock bound on one generation; checked between tokens (prompt
            evaluation itself cannot be interrupted).
        prefix_cache_mb: RAM for saved llama.cpp states keyed by prompt prefix (0 = only
            the live context's prefix reuse).
    """

    model_path: str = ""
    n_ctx: int = 2048
    n_threads: int = 0
    n_gpu_layers: int = 0
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    timeout_s: float = 60.0
    prefix_cache_mb: int = 0

    def validate(self) -> LlmConfig:
        """Raise ``ValueError`` with an actionable message if a field is out of range.

        Returns ``self`` so that ``LlmConfig(...).validate()`` can be chained.
        """
        if not isinstance(self.model_path, str):
            raise ValueError("model_path must be a string path to a .gguf file ('' = bundled)")
        if not isinstance(self.n_ctx, int) or self.n_ctx < 64:
            raise ValueError(f"n_ctx must be an int >= 64 (got {self.n_ctx!r})")
        if not isinstance(self.n_threads, int) or self.n_threads < 0:
            raise ValueError(f"n_threads must be an int >= 0, 0 = auto (got {self.n_threads!r})")
        if not isinstance(self.n_gpu_layers, int) or self.n_gpu_layers < -1:
            raise ValueError(
                "n_gpu_layers must be -1 (all), 0 (CPU) or a positive int "
                f"(got {self.n_gpu_layers!r})"
            )
        if not isinstance(self.max_tokens, int) or not 1 <= self.max_tokens < self.n_ctx:
            raise ValueError(
                f"max_tokens must be an int in [1, n_ctx={self.n_ctx}) (got {self.max_tokens!r})"
            )
        if not _is_number(self.temperature) or not 0.0 <= self.temperature <= 5.0:
            raise ValueError(f"temperature must be in [0, 5] (got {self.temperature!r})")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0 (got {self.seed!r})")
        if not _is_number(self.timeout_s) or not self.timeout_s > 0 or math.isinf(self.timeout_s):
            raise ValueError(f"timeout_s must be a finite number > 0 (got {self.timeout_s!r})")
        if (isinstance(self.prefix_cache_mb, bool) or not isinstance(self.prefix_cache_mb, int)
                or not 0 <= self.prefix_cache_mb <= 65536):
            raise ValueError(f"prefix_cache_mb must be an int in [0, 65536] "
                             f"(got {self.prefix_cache_mb!r})")
        return self

    def resolved_model_path(self) -> Path:
        """The GGUF file this configuration names (a model name, a path, or the default).

        Raises:
            LlmLoadError: an unknown name, a model that is not installed, a missing file.
        """
        try:
            return resolve_model(self.model_path)
        except ModelFileError as exc:
            raise LlmLoadError(str(exc)) from exc


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def default_model_path() -> Path:
    """Path of the default GGUF: ``$GLOVE_LLM_MODEL`` (a model name or a path) if set, else
    :data:`glove_ros.core.llm.models.DEFAULT_MODEL` as installed by ``scripts/setup.sh``.

    Raises:
        LlmLoadError: the model is not installed (the message says how to install it).
    """
    return LlmConfig().resolved_model_path()


_VERIFIED: dict[tuple[str, int, int], bool] = {}


def check_model_file(path: Path, *, full: bool = True) -> None:
    """Raise :class:`LlmLoadError` when ``path`` carries the file name of a known model
    (:data:`~glove_ros.core.llm.models.MODELS`) but not its content: a wrong size (truncated)
    always, a wrong sha256 when ``full`` (hashed once per process and file version).
    The one-line message names the expected hash. Unknown files pass."""
    spec = next((m for m in MODELS.values() if m.file == path.name and m.sha256), None)
    if spec is None:
        return
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return
    try:
        if not full:
            if st.st_size != spec.size:
                verify(path, spec)  # raises with the size and the expected hash
            return
        verify(path, spec)
    except ModelFileError as exc:
        raise LlmLoadError(str(exc)) from exc
    _VERIFIED[key] = True


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        raise LlmLoadError(f"LLM model file not found: {path} (LlmConfig.model_path)")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise LlmLoadError(f"cannot read LLM model file {path}: {exc}") from exc
    if magic != _GGUF_MAGIC:
        raise LlmLoadError(
            f"{path} is not a GGUF file (magic {magic!r}, expected {_GGUF_MAGIC!r}); "
            "llama.cpp needs a .gguf model"
        )


# --------------------------------------------------------------------------------------------
# results and protocol


@dataclass(frozen=True)
class LlmResult:
    """The outcome of one :meth:`JsonLlm.complete_json` call.

    Attributes:
        data: the parsed JSON value, valid against the schema; ``None`` on any failure.
        raw_text: the text the model generated (possibly truncated or invalid).
        tokens: tokens generated (the reply only, not the prompt).
        error: ``None`` on success, else a one-line reason ("invalid JSON: ...",
            "schema violation at $.waypoint: ...", "timeout after 3.0 s", "token bound ...").
        prompt_tokens: tokens in the formatted prompt (0 when unknown).
        elapsed_s: wall-clock seconds spent in the call.
        finish_reason: "stop", "length", "timeout", "error" or "scripted".
        prompt_eval_tokens: prompt tokens llama.cpp actually evaluated (the rest came from
            the reused prefix); 0 when unknown.
        prompt_eval_s: seconds llama.cpp spent evaluating them.
        gen_s: seconds llama.cpp spent generating the reply tokens.
    """

    data: Any
    raw_text: str
    tokens: int
    error: str | None = None
    prompt_tokens: int = 0
    elapsed_s: float = 0.0
    finish_reason: str = "stop"
    prompt_eval_tokens: int = 0
    prompt_eval_s: float = 0.0
    gen_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when ``data`` holds a schema-valid value."""
        return self.error is None


@runtime_checkable
class JsonLlm(Protocol):
    """What the planner, updater and consolidator need from an LLM.

    Implementations: :class:`LlamaBackend` (real), :class:`ScriptedLlm` (tests). Both must
    never raise on bad model output; they raise ``ValueError`` only for bad *input*
    (malformed messages, an unsupported schema).
    """

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: Mapping[str, Any],
        max_tokens: int | None = None,
    ) -> LlmResult:
        """Generate a JSON value valid against ``schema`` as the reply to ``messages``."""
        ...

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this model's prompt."""
        ...


# --------------------------------------------------------------------------------------------
# schemas


#: JSON-schema keywords understood by :func:`validate_json` and llama.cpp's grammar converter.
SUPPORTED_SCHEMA_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "minItems",
        "maxItems", "enum", "const", "minLength", "maxLength", "minimum", "maximum",
        "anyOf", "oneOf", "description", "title", "default", "$schema",
    }
)
_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
#: Largest minLength / maxLength / minItems / maxItems accepted. llama.cpp's grammar parser
#: refuses repetitions of roughly 1500+ (and llama-cpp-python then crashes while sampling).
MAX_SCHEMA_REPEAT = 1000


def choice_schema(options: Sequence[str], key: str = "choice") -> dict[str, Any]:
    """A schema for ``{key: one of options}``, e.g. to force a valid waypoint.

    >>> choice_schema(["wp_1", "wp_2"], key="waypoint")["properties"]["waypoint"]["enum"]
    ['wp_1', 'wp_2']

    Raises:
        ValueError: ``options`` is empty, holds a non-string or a duplicate, or ``key`` is empty.
    """
    opts = list(options)
    if not opts:
        raise ValueError("choice_schema needs at least one option")
    if not all(isinstance(o, str) for o in opts):
        raise ValueError(f"choice_schema options must be strings (got {opts!r})")
    if len(set(opts)) != len(opts):
        raise ValueError(f"choice_schema options must be distinct (got {opts!r})")
    if not isinstance(key, str) or not key:
        raise ValueError("choice_schema key must be a non-empty string")
    return {
        "type": "object",
        "properties": {key: {"type": "string", "enum": opts}},
        "required": [key],
        "additionalProperties": False,
    }


def check_schema(schema: Mapping[str, Any], path: str = "$") -> None:
    """Raise ``ValueError`` if ``schema`` uses anything outside the supported subset.

    The subset (:data:`SUPPORTED_SCHEMA_KEYWORDS`) is what both the grammar converter and
    :func:`validate_json` implement, so a checked schema means the same thing in both.
    Objects must list ``properties``; ``additionalProperties`` must be ``false`` (or absent)
    so that the grammar and the validator agree.
    """
    if not isinstance(schema, Mapping):
        raise ValueError(f"schema at {path} must be a JSON object (dict), got {type(schema)}")
    unknown = set(schema) - SUPPORTED_SCHEMA_KEYWORDS
    if unknown:
        raise ValueError(
            f"schema at {path} uses unsupported keywords {sorted(unknown)}; "
            f"supported: {sorted(SUPPORTED_SCHEMA_KEYWORDS)}"
        )
    for alt in ("anyOf", "oneOf"):
        if alt in schema:
            subs = schema[alt]
            if not isinstance(subs, list) or not subs:
                raise ValueError(f"schema at {path}.{alt} must be a non-empty list")
            for i, sub in enumerate(subs):
                check_schema(sub, f"{path}.{alt}[{i}]")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ValueError(f"schema at {path}.enum must be a non-empty list")
    t = schema.get("type")
    if t is None:
        if not ({"enum", "const", "anyOf", "oneOf"} & set(schema)):
            raise ValueError(f"schema at {path} needs a 'type' (or enum / const / anyOf)")
        return
    if t not in _TYPES:
        raise ValueError(f"schema at {path}: type must be one of {sorted(_TYPES)}, got {t!r}")
    if t == "object":
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            raise ValueError(f"object schema at {path} must list its 'properties'")
        if schema.get("additionalProperties", False) is not False:
            raise ValueError(f"object schema at {path}: additionalProperties must be false")
        req = schema.get("required", [])
        if not isinstance(req, list) or any(r not in props for r in req):
            raise ValueError(f"object schema at {path}: 'required' must name listed properties")
        for k, sub in props.items():
            check_schema(sub, f"{path}.{k}")
    elif t == "array":
        if "items" not in schema:
            raise ValueError(f"array schema at {path} must give 'items'")
        check_schema(schema["items"], f"{path}[]")
        if not _valid_bounds(schema.get("minItems", 0), schema.get("maxItems")):
            raise ValueError(f"array schema at {path}: need 0 <= minItems <= maxItems <= "
                             f"{MAX_SCHEMA_REPEAT}")
    elif t == "string":
        if not _valid_bounds(schema.get("minLength", 0), schema.get("maxLength")):
            raise ValueError(f"string schema at {path}: need 0 <= minLength <= maxLength <= "
                             f"{MAX_SCHEMA_REPEAT}")


def _valid_bounds(lo: Any, hi: Any) -> bool:
    if not isinstance(lo, int) or not 0 <= lo <= MAX_SCHEMA_REPEAT:
        return False
    return hi is None or (isinstance(hi, int) and lo <= hi <= MAX_SCHEMA_REPEAT)


def validate_json(value: Any, schema: Mapping[str, Any], path: str = "$") -> str | None:
    """Check ``value`` against ``schema`` (the supported subset).

    Returns ``None`` if valid, else a one-line description of the first violation.
    """
    if "const" in schema and value != schema["const"]:
        return f"{path}: expected {schema['const']!r}, got {value!r}"
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        return f"{path}: {value!r} is not one of {schema['enum']!r}"
    for alt in ("anyOf", "oneOf"):
        if alt in schema:
            errs = [validate_json(value, s, path) for s in schema[alt]]
            ok = sum(e is None for e in errs)
            if ok == 0 or (alt == "oneOf" and ok > 1):
                return f"{path}: does not match {alt} ({errs[0] if ok == 0 else 'several match'})"
    t = schema.get("type")
    if t is None:
        return None
    if t == "object":
        if not isinstance(value, dict):
            return f"{path}: expected an object, got {_jtype(value)}"
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                return f"{path}: missing required property {k!r}"
        for k, v in value.items():
            if k not in props:
                if schema.get("additionalProperties", False) is False:
                    return f"{path}: unexpected property {k!r}"
                continue
            err = validate_json(v, props[k], f"{path}.{k}")
            if err:
                return err
        return None
    if t == "array":
        if not isinstance(value, list):
            return f"{path}: expected an array, got {_jtype(value)}"
        if len(value) < schema.get("minItems", 0):
            return f"{path}: {len(value)} items < minItems {schema['minItems']}"
        if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
            return f"{path}: {len(value)} items > maxItems {schema['maxItems']}"
        for i, v in enumerate(value):
            err = validate_json(v, schema["items"], f"{path}[{i}]")
            if err:
                return err
        return None
    if t == "string":
        if not isinstance(value, str):
            return f"{path}: expected a string, got {_jtype(value)}"
        if len(value) < schema.get("minLength", 0):
            return f"{path}: string shorter than minLength {schema['minLength']}"
        if schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
            return f"{path}: string longer than maxLength {schema['maxLength']}"
        return None
    if t in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{path}: expected a {t}, got {_jtype(value)}"
        if t == "integer" and not float(value).is_integer():
            return f"{path}: expected an integer, got {value!r}"
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: {value} < minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: {value} > maximum {schema['maximum']}"
        return None
    if t == "boolean":
        return None if isinstance(value, bool) else f"{path}: expected a boolean"
    if t == "null":
        return None if value is None else f"{path}: expected null"
    return f"{path}: unknown type {t!r}"


def _json_equal(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number"}.get(
        type(v), type(v).__name__
    )


def parse_json_reply(raw: str, schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """Parse ``raw`` as JSON and check it against ``schema``.

    Returns ``(data, None)`` on success, ``(None, error)`` otherwise. Never raises.
    """
    text = raw.strip()
    if not text:
        return None, "empty reply"
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"invalid JSON: {exc}"
    err = validate_json(data, schema)
    if err:
        return None, f"schema violation at {err}"
    return data, None


def check_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Validate chat messages and return plain-dict copies.

    Raises:
        ValueError: not a non-empty list of ``{"role", "content"}`` with a known role.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES:
            raise ValueError(f"messages[{i}].role must be one of {_ROLES} (got {role!r})")
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content must be a string")
        out.append({"role": role, "content": content})
    return out


# --------------------------------------------------------------------------------------------
# token counting

_APPROX_RE = re.compile(r"[A-Za-z]+|[0-9]|[^\x00-\x7f]|[^\sA-Za-z0-9]")


def approx_tokens(text: str) -> int:
    """Approximate token count without a tokenizer.

    Rule (calibrated on SmolLM2's BPE, GPT-2 style): each run of ASCII letters costs one token
    per 6 letters (rounded up), each digit one token (BPE vocabularies of small models split
    numbers, so ``wp_12`` is 4-5 tokens), each non-ASCII character one token (two if it takes
    3+ UTF-8 bytes, e.g. CJK), every other non-space symbol one token; whitespace is free.
    The total is multiplied by 1.1 and rounded up, so that it tends to *over*-estimate: on
    English prose and memory entries it is within about -10 % / +25 % of the real count.
    Use it for budgets only, never for exact context arithmetic.
    """
    if not text:
        return 0
    n = 0
    for piece in _APPROX_RE.findall(text):
        c = piece[0]
        if c.isascii() and c.isalpha():
            n += -(-len(piece) // 6)
        elif not c.isascii():
            n += 1 if len(c.encode("utf-8")) < 3 else 2
        else:
            n += 1
    return math.ceil(n * 1.1)


def count_tokens(text: str, llm: object | None = None) -> int:
    """Tokens ``text`` takes: exact with a loaded model's tokenizer, else :func:`approx_tokens`.

    ``llm`` may be anything with a ``count_tokens(text)`` method (a :class:`LlamaBackend`, a
    :class:`ScriptedLlm`); ``None`` gives the approximation.
    """
    if not isinstance(text, str):
        raise ValueError(f"count_tokens needs a string, got {type(text).__name__}")
    if llm is not None and hasattr(llm, "count_tokens"):
        return int(llm.count_tokens(text))
    return approx_tokens(text)


# --------------------------------------------------------------------------------------------
# llama.cpp backend


class LlamaBackend:
    """:class:`JsonLlm` on llama-cpp-python.

    The constructor validates the configuration and checks that the model file exists and is
    a GGUF (cheap; errors surface at configure time). The model itself loads lazily on the
    first call, or explicitly with :meth:`load` (a lifecycle node calls it in on_activate and
    :meth:`close` in on_deactivate). Calls are serialised with a lock: one ``Llama`` context
    is not thread-safe.

    Raises:
        ValueError: invalid configuration.
        LlmLoadError: model file missing / not a GGUF (constructor); llama_cpp missing or
            the model fails to load (:meth:`load`).
    """

    def __init__(self, config: LlmConfig | None = None) -> None:
        self.config = (config or LlmConfig()).validate()
        self.model_path = self.config.resolved_model_path()
        _check_gguf(self.model_path)
        check_model_file(self.model_path, full=False)  # a truncated known model: fail now
        self._llama: Any = None
        self._lock = threading.RLock()
        self._grammars: dict[str, Any] = {}

    # -- lifecycle
    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._llama is not None

    def load(self) -> LlamaBackend:
        """Load the model now (idempotent). Returns ``self``."""
        with self._lock:
            if self._llama is not None:
                return self
            try:
                import llama_cpp  # noqa: PLC0415  (lazy: optional dependency)
            except ImportError as exc:
                raise LlmLoadError(
                    "llama-cpp-python is not installed: pip install 'glove_ros[llm]' "
                    "(on x86 build it with CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON "
                    "-DGGML_FMA=ON -DGGML_F16C=ON'; on Jetson with -DGGML_CUDA=on)"
                ) from exc
            check_model_file(self.model_path)  # sha256 of a known model, once per process
            c = self.config
            kwargs: dict[str, Any] = {
                "model_path": str(self.model_path),
                "n_ctx": c.n_ctx,
                "n_gpu_layers": c.n_gpu_layers,
                "seed": c.seed,
                "verbose": False,
            }
            if c.n_threads:
                kwargs["n_threads"] = c.n_threads
                kwargs["n_threads_batch"] = c.n_threads
            try:
                self._llama = llama_cpp.Llama(**kwargs)
            except Exception as exc:  # llama_cpp raises ValueError / RuntimeError variously
                raise LlmLoadError(f"llama.cpp failed to load {self.model_path}: {exc}") from exc
            if c.prefix_cache_mb:
                self._llama.set_cache(llama_cpp.LlamaRAMCache(c.prefix_cache_mb << 20))
            return self

    def reset_cache(self) -> None:
        """Forget every reused prefix (the live KV cache and saved states): the next call
        evaluates its whole prompt. For measuring what prefix reuse saves."""
        with self._lock:
            llama = self._llama
            if llama is None:
                return
            llama.reset()
            cache = getattr(llama, "cache", None)
            if cache is not None and hasattr(cache, "cache_state"):
                cache.cache_state.clear()

    def close(self) -> None:
        """Release the model (idempotent); a later call loads it again."""
        with self._lock:
            llama, self._llama = self._llama, None
            self._grammars.clear()
            if llama is not None and hasattr(llama, "close"):
                try:
                    llama.close()
                except Exception:  # pragma: no cover - best effort on shutdown
                    pass

    def __enter__(self) -> LlamaBackend:
        return self.load()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tokens
    def count_tokens(self, text: str) -> int:
        """Exact token count with the model's tokenizer if loaded, else :func:`approx_tokens`."""
        if not isinstance(text, str):
            raise ValueError(f"count_tokens needs a string, got {type(text).__name__}")
        llama = self._llama
        if llama is None:
            return approx_tokens(text)
        if not text:
            return 0
        with self._lock:
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- generation
    def _grammar(self, schema: Mapping[str, Any]) -> Any:
        """The GBNF grammar for ``schema``, checked by llama.cpp's own parser and cached.

        llama-cpp-python 0.3.36 does not check the result of ``llama_sampler_init_grammar``:
        a grammar llama.cpp rejects (e.g. a huge repetition count) would crash the process
        during sampling. So the grammar is parsed once here and refused with ``ValueError``.
        """
        key = json.dumps(schema, sort_keys=True)
        g = self._grammars.get(key)
        if g is not None:
            return g
        import llama_cpp  # noqa: PLC0415
        from llama_cpp import LlamaGrammar  # noqa: PLC0415

        try:
            g = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as exc:
            raise ValueError(f"schema cannot be converted to a llama.cpp grammar: {exc}") from exc
        vocab = getattr(getattr(self._llama, "_model", None), "vocab", None)
        init = getattr(llama_cpp, "llama_sampler_init_grammar", None)
        if vocab is not None and init is not None:
            sampler = init(vocab, g._grammar.encode("utf-8"), g._root.encode("utf-8"))
            if not sampler:
                raise ValueError(
                    "llama.cpp rejected the grammar of this schema (too many repetitions?): "
                    "lower maxLength / maxItems / minLength"
                )
            llama_cpp.llama_sampler_free(sampler)
        if len(self._grammars) > 64:
            self._grammars.clear()
        self._grammars[key] = g
        return g

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: Mapping[str, Any],
        max_tokens: int | None = None,
        *,
        timeout_s: float | None = None,
        temperature: float | None = None,
    ) -> LlmResult:
        """Reply to chat ``messages`` with a JSON value constrained by ``schema``.

        The schema (subset: :data:`SUPPORTED_SCHEMA_KEYWORDS`) becomes a GBNF grammar, so the
        model can only emit text the grammar allows; the reply is then parsed and validated.
        Generation stops at ``max_tokens`` (default ``config.max_tokens``) or after
        ``timeout_s`` (default ``config.timeout_s``); either leaves truncated JSON, reported as
        an error. Model failures never raise.

        Raises:
            ValueError: malformed ``messages``, an unsupported ``schema``, bad bounds.
            LlmLoadError: the model cannot be loaded.
        """
        msgs = check_messages(messages)
        check_schema(schema)
        c = self.config
        max_tokens = c.max_tokens if max_tokens is None else max_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int (got {max_tokens!r})")
        timeout = c.timeout_s if timeout_s is None else timeout_s
        if not _is_number(timeout) or timeout <= 0:
            raise ValueError(f"timeout_s must be > 0 (got {timeout!r})")
        temp = c.temperature if temperature is None else temperature
        text_parts: list[str] = []
        n_tokens = 0
        finish = "stop"
        with self._lock:
            self.load()  # inside the lock: a concurrent close() cannot pull the model away
            llama = self._llama
            t0 = time.monotonic()  # the bound covers generation, not loading or waiting
            deadline = t0 + timeout
            grammar = self._grammar(schema)
            perf0 = _perf(llama)
            try:
                stream = llama.create_chat_completion(
                    messages=msgs,
                    grammar=grammar,
                    max_tokens=max_tokens,
                    temperature=temp,
                    seed=c.seed,
                    stream=True,
                )
                for chunk in stream:
                    choice = chunk["choices"][0]
                    piece = choice.get("delta", {}).get("content")
                    if piece:
                        text_parts.append(piece)
                        n_tokens += 1
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    if time.monotonic() > deadline:
                        finish = "timeout"
                        close = getattr(stream, "close", None)
                        if close:
                            close()
                        break
            except Exception as exc:  # context overflow, decode failure, grammar failure...
                return LlmResult(
                    None,
                    "".join(text_parts),
                    n_tokens,
                    f"llama.cpp error: {exc}",
                    elapsed_s=time.monotonic() - t0,
                    finish_reason="error",
                )
            raw = "".join(text_parts)
            if raw:  # chunks can merge tokens (UTF-8, stop-string hold-back): take the larger
                n_tokens = max(
                    n_tokens,
                    len(llama.tokenize(raw.encode("utf-8"), add_bos=False, special=False)),
                )
            prompt_tokens = self._prompt_tokens(llama, msgs)
            perf1 = _perf(llama)
        elapsed = time.monotonic() - t0
        data, err = parse_json_reply(raw, schema)
        if err is not None and finish == "timeout":
            err = f"timeout after {timeout:g} s ({err})"
        elif err is not None and finish == "length":
            err = f"token bound max_tokens={max_tokens} reached ({err})"
        p_n = max(0, perf1[0] - perf0[0])
        p_s = max(0.0, perf1[1] - perf0[1])
        g_s = max(0.0, perf1[3] - perf0[3])
        return LlmResult(data, raw, n_tokens, err, prompt_tokens, elapsed, finish,
                         p_n, p_s, g_s)

    @staticmethod
    def _prompt_tokens(llama: Any, msgs: list[dict[str, str]]) -> int:
        # cheap approximation of the formatted prompt: the contents plus ~4 tokens per turn
        return sum(
            len(llama.tokenize(m["content"].encode("utf-8"), add_bos=False, special=False)) + 4
            for m in msgs
        )


def _perf(llama: Any) -> tuple[int, float, int, float]:
    """llama.cpp's cumulative counters: (prompt tokens evaluated, prompt eval s, tokens
    generated, generation s); zeros when unavailable."""
    try:
        import llama_cpp  # noqa: PLC0415

        d = llama_cpp.llama_perf_context(llama._ctx.ctx)
        return int(d.n_p_eval), d.t_p_eval_ms / 1000.0, int(d.n_eval), d.t_eval_ms / 1000.0
    except Exception:  # pragma: no cover - older bindings
        return 0, 0.0, 0, 0.0


# --------------------------------------------------------------------------------------------
# test double

Reply = Any  # dict / list / str / LlmResult / callable(messages, schema) -> any of these


@dataclass
class ScriptedLlm:
    """A :class:`JsonLlm` test double that returns canned replies in order.

    Each reply may be:

    - a JSON-able value (dict, list, ...): serialised, then validated against the schema of
      the call exactly like the real backend (so a scripted reply that violates the schema
      yields ``data=None`` and an error);
    - a ``str``: the raw model text (use it for garbage such as ``"not json {"``);
    - an :class:`LlmResult`: returned as is;
    - a callable ``(messages, schema) -> reply``: called, its return value handled as above.

    When the script runs out, ``default`` is used if given, else the call returns an error
    result ``"scripted replies exhausted"``. Every call is recorded in ``calls`` as
    ``(messages, schema, max_tokens)``. Token counts use :func:`approx_tokens`.
    """

    replies: list[Reply] = field(default_factory=list)
    default: Reply | None = None
    calls: list[tuple[list[dict[str, str]], dict[str, Any], int | None]] = field(
        default_factory=list
    )

    def __post_init__(self) -> None:
        self._queue = list(self.replies)

    def push(self, *replies: Reply) -> None:
        """Append replies to the script."""
        self._queue.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not yet consumed."""
        return len(self._queue)

    def count_tokens(self, text: str) -> int:
        """Approximate count (:func:`approx_tokens`)."""
        return approx_tokens(text)

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: Mapping[str, Any],
        max_tokens: int | None = None,
        **_: Any,
    ) -> LlmResult:
        """Return the next scripted reply, validated against ``schema``."""
        msgs = check_messages(messages)
        check_schema(schema)
        self.calls.append((msgs, dict(schema), max_tokens))
        if self._queue:
            reply = self._queue.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            return LlmResult(None, "", 0, "scripted replies exhausted", finish_reason="scripted")
        if callable(reply) and not isinstance(reply, LlmResult):
            reply = reply(msgs, schema)
        if isinstance(reply, LlmResult):
            return reply
        raw = reply if isinstance(reply, str) else json.dumps(reply)
        n = approx_tokens(raw)
        if max_tokens is not None and n > max_tokens:
            return LlmResult(
                None, raw, n, f"token bound max_tokens={max_tokens} reached",
                finish_reason="length",
            )
        data, err = parse_json_reply(raw, schema)
        prompt = sum(approx_tokens(m["content"]) + 4 for m in msgs)
        return LlmResult(data, raw, n, err, prompt, 0.0, "scripted")

