"""Plan-memory entries: their types, validation and the pure application of an edit set.

A plan-memory entry (:class:`PlanEntry`) is one short typed line of text the LLM planner
reads, with its :class:`Provenance`; an :class:`Edit` adds, changes or removes one by name,
and :func:`apply_edits` computes the entries after an edit set without touching storage.
:func:`slugify` turns free text into a valid entry name.

Separate from the storage (:mod:`glove_ros.core.plan.plan_memory`) and from retrieval and
prompt assembly (:mod:`glove_ros.core.plan.plan_retrieval`) so that updaters and the
consolidator can build, validate and preview edits as plain values, testable without a
database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KINDS",
    "OPS",
    "Provenance",
    "PlanEntry",
    "Edit",
    "apply_edits",
    "slugify",
]

#: Entry kinds: facts about the world, how-to procedures, negative lessons (what to avoid).
KINDS = ("semantic", "procedure", "negative")
#: Edit operations.
OPS = ("add", "edit", "remove")
MAX_NAME = 64
MAX_BODY = 600
MAX_META_BYTES = 4096
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")


# --------------------------------------------------------------------------------------------
# value types


@dataclass(frozen=True)
class Provenance:
    """What supports an entry: episode ids and experience-memory transition ids."""

    episodes: tuple[str, ...] = ()
    transitions: tuple[int, ...] = ()

    def validate(self) -> Provenance:
        """Raise ``ValueError`` unless episodes are non-empty strings and transitions ints >= 0."""
        if not isinstance(self.episodes, tuple) or not isinstance(self.transitions, tuple):
            raise ValueError("Provenance.episodes and .transitions must be tuples")
        for e in self.episodes:
            if not isinstance(e, str) or not e or len(e) > 128:
                raise ValueError(f"episode id must be a non-empty string <= 128 chars: {e!r}")
        for t in self.transitions:
            if isinstance(t, bool) or not isinstance(t, int) or t < 0:
                raise ValueError(f"transition id must be an int >= 0: {t!r}")
        return self

    def merged(self, other: Provenance) -> Provenance:
        """Union, keeping first-seen order."""
        return Provenance(
            tuple(dict.fromkeys(self.episodes + other.episodes)),
            tuple(dict.fromkeys(self.transitions + other.transitions)),
        )

    @property
    def empty(self) -> bool:
        """True when nothing is linked."""
        return not self.episodes and not self.transitions


@dataclass(frozen=True)
class PlanEntry:
    """One plan-memory entry.

    Attributes:
        kind: ``"semantic"`` (a fact), ``"procedure"`` (how to do something) or
            ``"negative"`` (a lesson: what to avoid).
        name: short unique key within a version (``[A-Za-z0-9][A-Za-z0-9_.:-]*``, <= 64).
        body: one line of text the planner reads (<= 600 chars, no newline).
        provenance: episodes and transitions that support it.
        meta: small JSON-able dict for machine use (e.g. the rule updater's waypoint sets);
            not rendered for the planner.
        source: who wrote it ("rule", "llm", "fast_writer", "consolidator", "manual", ...).
        entry_id: database row id (``None`` before it is stored). Rows are immutable: an edit
            makes a new row.
        created_at: UNIX time the row was written.
    """

    kind: str
    name: str
    body: str
    provenance: Provenance = field(default_factory=Provenance)
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False)
    source: str = "manual"
    entry_id: int | None = None
    created_at: float = 0.0

    def validate(self) -> PlanEntry:
        """Raise ``ValueError`` with the reason if a field is invalid. Returns ``self``."""
        _check_kind(self.kind)
        _check_name(self.name)
        _check_body(self.body)
        if not isinstance(self.provenance, Provenance):
            raise ValueError("provenance must be a Provenance")
        self.provenance.validate()
        _check_meta(self.meta)
        if not isinstance(self.source, str) or not self.source or len(self.source) > 64:
            raise ValueError(f"source must be a non-empty string <= 64 chars: {self.source!r}")
        return self

    def same_content(self, other: PlanEntry) -> bool:
        """True when kind, name, body, provenance and meta are equal (ids ignored)."""
        return (
            self.kind == other.kind
            and self.name == other.name
            and self.body == other.body
            and self.provenance == other.provenance
            and dict(self.meta) == dict(other.meta)
        )


@dataclass(frozen=True)
class Edit:
    """One operation of an edit set.

    - ``add``: new entry ``name`` (must not exist); ``kind`` and ``body`` required.
    - ``edit``: replace entry ``name`` (must exist); ``kind`` / ``body`` / ``meta`` left
      ``None`` keep the old value; a non-empty ``provenance`` replaces the old one (the old
      row and its provenance stay in history), an empty one keeps it.
    - ``remove``: drop ``name`` from the new version (must exist); ``reason`` required --
      nothing is removed silently, and the row stays in older versions.
    """

    op: str
    name: str
    kind: str | None = None
    body: str | None = None
    provenance: Provenance = field(default_factory=Provenance)
    meta: Mapping[str, Any] | None = field(default=None, hash=False)
    reason: str = ""

    @classmethod
    def add(
        cls,
        kind: str,
        name: str,
        body: str,
        provenance: Provenance | None = None,
        meta: Mapping[str, Any] | None = None,
        reason: str = "",
    ) -> Edit:
        """An ``add`` edit."""
        return cls("add", name, kind, body, provenance or Provenance(), meta, reason)

    @classmethod
    def change(
        cls,
        name: str,
        body: str | None = None,
        kind: str | None = None,
        provenance: Provenance | None = None,
        meta: Mapping[str, Any] | None = None,
        reason: str = "",
    ) -> Edit:
        """An ``edit`` edit (named ``change`` to avoid clashing with the op string)."""
        return cls("edit", name, kind, body, provenance or Provenance(), meta, reason)

    @classmethod
    def remove(cls, name: str, reason: str) -> Edit:
        """A ``remove`` edit."""
        return cls("remove", name, reason=reason)

    def validate(self) -> Edit:
        """Check the edit on its own (existence of ``name`` is checked by :func:`apply_edits`)."""
        if self.op not in OPS:
            raise ValueError(f"edit op must be one of {OPS}, got {self.op!r}")
        _check_name(self.name)
        if not isinstance(self.reason, str) or len(self.reason) > 500:
            raise ValueError("edit reason must be a string <= 500 chars")
        if not isinstance(self.provenance, Provenance):
            raise ValueError("edit provenance must be a Provenance")
        self.provenance.validate()
        if self.meta is not None:
            _check_meta(self.meta)
        if self.op == "add" and (self.kind is None or self.body is None):
            raise ValueError(f"add {self.name!r}: kind and body are required")
        if self.op in ("add", "edit"):
            if self.kind is not None:
                _check_kind(self.kind)
            if self.body is not None:
                _check_body(self.body)
        if self.op == "remove":
            if self.kind is not None or self.body is not None:
                raise ValueError(f"remove {self.name!r}: give no kind or body")
            if not self.reason.strip():
                raise ValueError(f"remove {self.name!r}: a reason is required (never silently)")
        return self


# --------------------------------------------------------------------------------------------
# validation helpers


def _check_kind(kind: object) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > MAX_NAME:
        raise ValueError(
            f"name must match [A-Za-z0-9][A-Za-z0-9_.:-]* and be <= {MAX_NAME} chars: {name!r} "
            "(use slugify())"
        )


def _check_body(body: object) -> None:
    if not isinstance(body, str) or not body.strip():
        raise ValueError("body must be a non-empty string")
    if len(body) > MAX_BODY:
        raise ValueError(f"body is {len(body)} chars, more than {MAX_BODY}")
    if "\n" in body or "\r" in body:
        raise ValueError("body must be one line (no newline): the planner reads one per entry")


def _check_meta(meta: object) -> None:
    if not isinstance(meta, Mapping):
        raise ValueError("meta must be a dict")
    try:
        blob = json.dumps(dict(meta), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta must be JSON-serialisable: {exc}") from exc
    if len(blob) > MAX_META_BYTES:
        raise ValueError(f"meta is {len(blob)} bytes as JSON, more than {MAX_META_BYTES}")


def slugify(text: str, max_len: int = MAX_NAME) -> str:
    """Turn free text into a valid entry name: lower-case, ``[a-z0-9_.:-]``, <= ``max_len``.

    Returns ``""`` when nothing usable is left.
    """
    s = re.sub(r"[^a-z0-9_.:\-]+", "_", str(text).strip().lower())
    s = re.sub(r"_+", "_", s).strip("_.:-")
    return s[:max_len].rstrip("_.:-")


# --------------------------------------------------------------------------------------------
# pure edit application


def apply_edits(
    entries: Sequence[PlanEntry], edits: Sequence[Edit], *, source: str = "manual"
) -> list[PlanEntry]:
    """The entries after ``edits`` (pure; ``entries`` is not modified).

    Edited entries keep their position, added ones are appended, removed ones dropped. New
    and replaced entries get ``entry_id=None`` (not stored yet) and ``source``.

    Raises:
        ValueError: an invalid edit, several edits of one name, ``add`` of an existing name,
            ``edit`` / ``remove`` of a missing one, or an empty edit set.
    """
    edits = list(edits)
    if not edits:
        raise ValueError("an edit set needs at least one edit")
    seen: set[str] = set()
    for e in edits:
        if not isinstance(e, Edit):
            raise ValueError(f"edits must be Edit objects, got {type(e).__name__}")
        e.validate()
        if e.name in seen:
            raise ValueError(f"several edits of {e.name!r} in one edit set")
        seen.add(e.name)
    index = {x.name: i for i, x in enumerate(entries)}
    out: list[PlanEntry | None] = list(entries)
    for e in edits:
        if e.op == "add":
            if e.name in index:
                raise ValueError(f"add {e.name!r}: an entry of that name exists (use edit)")
            assert e.kind is not None and e.body is not None
            new = PlanEntry(e.kind, e.name, e.body, e.provenance, dict(e.meta or {}), source)
            out.append(new.validate())
            continue
        if e.name not in index:
            raise ValueError(f"{e.op} {e.name!r}: no entry of that name in the base version")
        i = index[e.name]
        old = entries[i]
        if e.op == "remove":
            out[i] = None
        else:
            new = PlanEntry(
                e.kind if e.kind is not None else old.kind,
                old.name,
                e.body if e.body is not None else old.body,
                old.provenance if e.provenance.empty else e.provenance,
                dict(old.meta) if e.meta is None else dict(e.meta),
                source,
            ).validate()
            out[i] = new
    return [x for x in out if x is not None]
