"""The consolidator's tools: the tool-call types, the one JSON schema (the llama.cpp
grammar) a tool call must satisfy, and the :class:`Workspace` that executes calls over
read-only evidence and turns the synthesized set S into the region rewrite B <- (B \\ R) U S.

Separate from the policies that *choose* calls (:mod:`glove_ros.core.consolidate.policies`)
and from the loop that runs them under budgets
(:mod:`glove_ros.core.consolidate.consolidation`): everything here is about what a call may
say and what it does, including the provenance and grounding checks that make an invalid
call abort the run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from glove_ros.core.consolidate.region import ConsolidationConfig, Region
from glove_ros.core.consolidate.writer import SOURCE, TraceIndex, _tokens
from glove_ros.core.plan.plan_entries import (
    KINDS,
    MAX_BODY,
    MAX_NAME,
    Edit,
    PlanEntry,
    Provenance,
    apply_edits,
    slugify,
)
from glove_ros.core.plan.plan_retrieval import format_entry, rank_entries

__all__ = [
    "TOOLS",
    "ToolCall",
    "ToolResult",
    "ToolRecord",
    "tool_schema",
    "parse_tool_call",
    "Workspace",
]

#: The consolidator's tools, in the order the prompt lists them.
TOOLS = ("search_memory", "check_memory", "get_source_trace", "synthesize", "terminate")


# ============================================================================================
# 4. tools


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``tool`` (one of :data:`TOOLS`) and its ``args``.

    Args per tool: ``search_memory {query}``, ``check_memory {name}``,
    ``get_source_trace {episode}``, ``synthesize {kind, name, body, sources}`` (optional
    ``replaces``: region names merged into it, and ``meta``: a small dict, for the rule
    policy; the LLM schema offers neither), ``terminate {note?}``.
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def summary(self, width: int = 80) -> str:
        """One line for logs and feedback."""
        a = {k: v for k, v in self.args.items() if k not in ("meta", "replaces")}
        text = f"{self.tool}({json.dumps(a, sort_keys=True)})"
        return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned: ``text`` (shown to the LLM) and ``data`` (for the rule
    policy); ``error`` is set when the call was invalid (the run then aborts)."""

    ok: bool
    text: str
    data: Any = None
    error: str | None = None


@dataclass(frozen=True)
class ToolRecord:
    """One step of a run, for the report."""

    step: int
    tool: str
    call: str
    ok: bool
    error: str | None
    tokens: int


def _str_schema(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "string", "minLength": lo, "maxLength": hi}


def _call_schema(tool: str, args: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "const": tool},
            "args": {"type": "object", "properties": dict(args), "required": list(required),
                     "additionalProperties": False},
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    }


def tool_schema(
    region_names: Sequence[str],
    episodes: Sequence[str],
    *,
    name_max: int = 40,
    body_max: int = 160,
    query_max: int = 40,
    max_sources: int = 8,
) -> dict[str, Any]:
    """The one JSON schema of a consolidator tool call: ``{"tool": <name>, "args": {...}}``.

    It is the union (``anyOf``) of one object per tool whose ``tool`` is that name (together
    the enum :data:`TOOLS`) and whose ``args`` are that tool's arguments; entry names are
    restricted to the region's, episode ids to the region's sources, and ``synthesize``
    must cite 1..``max_sources`` of them. The llama.cpp grammar built from it cannot emit
    anything else.

    Raises ``ValueError`` for an empty region or no episodes.
    """
    names = list(dict.fromkeys(region_names))
    eps = list(dict.fromkeys(episodes))
    if not names or not eps:
        raise ValueError("tool_schema needs a non-empty region and at least one source episode")
    ep_enum = {"type": "string", "enum": eps}
    return {"anyOf": [
        _call_schema("search_memory", {"query": _str_schema(1, query_max)}, ["query"]),
        _call_schema("check_memory", {"name": {"type": "string", "enum": names}}, ["name"]),
        _call_schema("get_source_trace", {"episode": ep_enum}, ["episode"]),
        _call_schema("synthesize", {
            "kind": {"type": "string", "enum": list(KINDS)},
            "name": _str_schema(1, name_max),
            "body": _str_schema(8, body_max),
            "sources": {"type": "array", "items": ep_enum, "minItems": 1,
                        "maxItems": max(1, max_sources)},
        }, ["kind", "name", "body", "sources"]),
        _call_schema("terminate", {"note": _str_schema(0, 60)}, []),
    ]}


def parse_tool_call(data: Any) -> ToolCall:
    """A :class:`ToolCall` from a decoded JSON reply; ``ValueError`` if it is not one."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a tool call must be an object, got {type(data).__name__}")
    tool = data.get("tool")
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; tools: {', '.join(TOOLS)}")
    args = data.get("args", {})
    if not isinstance(args, Mapping):
        raise ValueError(f"{tool}: args must be an object")
    return ToolCall(str(tool), dict(args))


# the placeholders small models copy from instructions instead of writing content
_PLACEHOLDERS = frozenset({"name", "short_name", "body", "one line", "one_line", "note",
                           "string", "kind", "entry", "text", "the note itself", "tool"})


class Workspace:
    """Executes tool calls for one run over read-only evidence; collects S.

    The base memory and the traces are never modified; ``synthesize`` only adds to the
    pending set S. :meth:`rewrite` turns S into the edit set of B <- (B \\ R) U S.
    """

    def __init__(
        self,
        base: Sequence[PlanEntry],
        region: Region,
        index: TraceIndex,
        config: ConsolidationConfig,
        *,
        search_k: int = 5,
    ) -> None:
        self.base = list(base)
        self.region = region
        self.index = index
        self.config = config
        self.search_k = search_k
        self._by_name = {e.name: e for e in self.base}
        self._region_names = set(region.names)
        self._region_eps = set(region.episodes)
        self._vocab = index.vocabulary()
        self.synthesized: dict[str, PlanEntry] = {}
        self.replaces: dict[str, tuple[str, ...]] = {}
        self.entries_read: set[str] = set()
        self.traces_read: set[str] = set()
        self.renamed: dict[str, str] = {}

    # -- tools
    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; an invalid call gives ``ok=False`` with the reason."""
        fn = getattr(self, f"_t_{call.tool}", None)
        if call.tool not in TOOLS or fn is None:
            return ToolResult(False, "", error=f"unknown tool {call.tool!r}")
        try:
            return fn(call.args)
        except (ValueError, TypeError, KeyError) as exc:
            return ToolResult(False, "", error=f"{call.tool}: {exc}")

    def _t_search_memory(self, args: Mapping[str, Any]) -> ToolResult:
        q = args.get("query")
        if not isinstance(q, str) or not q.strip() or len(q) > 200:
            raise ValueError("query must be a non-empty string <= 200 chars")
        hits = [e for e, s in rank_entries(self.base, q) if s > 0.02][: self.search_k]
        lines = []
        for e in hits:
            where = "region" if e.name in self._region_names else "outside region, read-only"
            lines.append(f"{format_entry(e)} [{where}]")
            self.entries_read.add(e.name)
        return ToolResult(True, "\n".join(lines) or "no matching entry", [e.name for e in hits])

    def _t_check_memory(self, args: Mapping[str, Any]) -> ToolResult:
        name = args.get("name")
        if name not in self._region_names:
            raise ValueError(f"{name!r} is not an entry of the region")
        e = self._by_name[name]
        self.entries_read.add(e.name)
        srcs = {ep: self.index.get(ep).order for ep in e.provenance.episodes  # type: ignore
                if ep in self.index}
        text = f"{format_entry(e)} (sources: {', '.join(srcs) or 'none journaled'})"
        return ToolResult(True, text, {"entry": e, "sources": srcs})

    def _t_get_source_trace(self, args: Mapping[str, Any]) -> ToolResult:
        ep = args.get("episode")
        if ep not in self._region_eps:
            raise ValueError(f"{ep!r} is not a source episode of the region")
        t = self.index.get(ep)
        if t is None:  # pragma: no cover - region episodes are journaled by construction
            raise ValueError(f"no journaled trace for {ep!r}")
        self.traces_read.add(ep)
        return ToolResult(True, t.text(), t)

    def _t_synthesize(self, args: Mapping[str, Any]) -> ToolResult:
        cfg = self.config
        kind = args.get("kind")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        raw_name = args.get("name")
        if not isinstance(raw_name, str):
            raise ValueError("name must be a string")
        name = raw_name if raw_name in self._region_names else slugify(raw_name, 48)
        body = args.get("body")
        if not isinstance(body, str):
            raise ValueError("body must be a string")
        body = " ".join(body.split())
        if not name or name in _PLACEHOLDERS or name in KINDS:
            raise ValueError(f"name {raw_name!r} is empty or a placeholder")
        if (len(body) < 8 or body.lower().strip(". ") in _PLACEHOLDERS
                or len(re.findall(r"[A-Za-z]+", body)) < 3):
            raise ValueError(f"body {body!r} is empty, a placeholder or fewer than three words")
        if len(body) > MAX_BODY:
            raise ValueError(f"body longer than {MAX_BODY} chars")
        sources = args.get("sources")
        if not isinstance(sources, (list, tuple)) or not sources:
            raise ValueError("provenance required: cite at least one source episode")
        sources = list(dict.fromkeys(sources))
        if len(sources) > cfg.max_fan_in:
            raise ValueError(f"more than max_fan_in={cfg.max_fan_in} sources")
        traces = []
        for ep in sources:
            if ep not in self._region_eps or ep not in self.index:
                raise ValueError(f"provenance: {ep!r} is not a journaled source episode of the "
                                 "region")
            traces.append(self.index.get(ep))
        cited: set[str] = set()
        for t in traces:
            cited |= t.vocabulary()  # type: ignore[union-attr]
        verbatim = any(r.kind == kind and r.body == body
                       and set(sources) <= set(r.provenance.episodes)
                       for r in self.region.entries)  # keeping an entry is no new claim
        ungrounded = sorted({w for w in _tokens(body) if w in self._vocab} - cited)
        if ungrounded and not verbatim:
            raise ValueError(f"ungrounded: {', '.join(ungrounded)} not in the cited traces "
                             f"{', '.join(sources)}")
        if name in self.synthesized or name in self.renamed:
            raise ValueError(f"{name!r} was already synthesized in this run")
        if len(self.synthesized) >= cfg.max_synthesized:
            raise ValueError(f"more than max_synthesized={cfg.max_synthesized} entries")
        final = name
        if final in self._by_name and final not in self._region_names:
            k = 2
            while final in self._by_name or final in self.synthesized:
                final = f"{name[: MAX_NAME - 4]}-{k}"
                k += 1
            self.renamed[name] = final
        tids: list[int] = []
        for t in traces:
            tids.extend(t.transition_ids)  # type: ignore[union-attr]
        meta = args.get("meta")
        meta = dict(meta) if isinstance(meta, Mapping) else {"fact": "synthesized"}
        entry = PlanEntry(kind, final, body, Provenance(tuple(sources),
                                                        tuple(dict.fromkeys(tids))[:512]),
                          meta, SOURCE).validate()
        reps = args.get("replaces") or ()
        self.replaces[final] = tuple(r for r in reps if r in self._region_names)
        self.synthesized[final] = entry
        note = f" (renamed to {final}: {name} exists outside the region)" if final != name else ""
        return ToolResult(True, f"synthesized {final}{note}", entry)

    def _t_terminate(self, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult(True, f"terminated with {len(self.synthesized)} synthesized entries")

    # -- the rewrite
    def rewrite(self, why: str) -> tuple[list[Edit], list[PlanEntry]]:
        """The edit set of B <- (B \\ R) U S on the base and the resulting entries.

        A region entry re-synthesized with the same name, kind and body, citing only its
        own sources, is kept as it is (no edit). Returns ``([], base)`` when nothing
        changes.
        """
        edits: list[Edit] = []
        merged_into: dict[str, str] = {}
        for s, reps in self.replaces.items():
            for r in reps:
                merged_into.setdefault(r, s)
        for r in self.region.entries:
            s = self.synthesized.get(r.name)
            if s is None:
                into = merged_into.get(r.name)
                reason = (f"{why}: merged into {into}" if into
                          else f"{why}: not re-synthesized (superseded or redundant)")
                edits.append(Edit.remove(r.name, reason[:500]))
            elif (s.kind == r.kind and s.body == r.body
                  and set(s.provenance.episodes) <= set(r.provenance.episodes)):
                continue
            else:
                edits.append(Edit("edit", r.name, s.kind, s.body, s.provenance, dict(s.meta),
                                  f"{why}: rewritten"[:500]))
        for name, s in self.synthesized.items():
            if name not in self._region_names:
                edits.append(Edit.add(s.kind, name, s.body, s.provenance, dict(s.meta),
                                      f"{why}: synthesized from {len(s.provenance.episodes)} "
                                      "episode(s)"))
        if not edits:
            return [], list(self.base)
        # provisional ids above every stored one, as the store will give them: retrieval
        # breaks ties newest first, so the rehearsal must see the rewrite as the newest
        top = max((e.entry_id or 0 for e in self.base), default=0)
        new = apply_edits(self.base, edits, source=SOURCE)
        out = []
        for e in new:
            if e.entry_id is None:
                top += 1
                e = replace(e, entry_id=top)
            out.append(e)
        return edits, out
