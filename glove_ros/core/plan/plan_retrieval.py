"""Plan-memory retrieval and prompt assembly: what the planner reads, under a token budget.

:func:`rank_entries` orders entries for a query (lexical overlap, plus embedding cosine when
an embedder is given, negative lessons first on ties); :func:`assemble_prompt` renders the
ranked entries as the planner's text within a token budget (:class:`RenderedMemory`);
:func:`memory_text` is the whole memory as one canonical text (what the Janus trigger
embeds), one :func:`format_entry` line per entry.

Separate from the storage (:mod:`glove_ros.core.plan.plan_memory`): retrieval and prompt
assembly work on any sequence of entries (a stored version, a candidate, a preview), and each
is testable on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.plan_entries import PlanEntry

__all__ = [
    "RenderedMemory",
    "format_entry",
    "memory_text",
    "rank_entries",
    "assemble_prompt",
]


@dataclass(frozen=True)
class RenderedMemory:
    """The planner's view of memory under a token budget."""

    text: str
    tokens: int
    included: tuple[str, ...]
    dropped: tuple[str, ...]


def format_entry(entry: PlanEntry) -> str:
    """One line: ``- [kind] name: body``."""
    return f"- [{entry.kind}] {entry.name}: {entry.body}"


def memory_text(entries: Iterable[PlanEntry]) -> str:
    """The whole memory as one canonical text, one :func:`format_entry` line per entry in
    version order. This is phi's input in the Janus trigger; ``""`` for an empty memory."""
    return "\n".join(format_entry(e) for e in entries)


_KIND_BONUS = {"negative": 0.02, "procedure": 0.01, "semantic": 0.0}
_WORDS = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")


def _words(text: str) -> set[str]:
    out: set[str] = set()
    for w in _WORDS.findall(text.lower()):
        out.add(w)
        if "_" in w:
            out.update(p for p in w.split("_") if p)
    return out


def rank_entries(
    entries: Sequence[PlanEntry],
    query: str | None = None,
    *,
    embedder: Any = None,
) -> list[tuple[PlanEntry, float]]:
    """Entries with a relevance score, best first.

    Without a query every entry scores its kind bonus (negative lessons, then procedures,
    then facts; newest first within a kind). With a query the score is the share of query
    words found in the entry (names split on ``_``, so ``block_red`` matches "red"), plus,
    when ``embedder`` (a :class:`~glove_ros.core.llm.embedding.TextEmbedder`) is given, the
    cosine of the query and entry vectors, averaged with it; the kind bonus breaks ties.
    """
    entries = list(entries)
    if not entries:
        return []
    scores = np.array([_KIND_BONUS[e.kind] for e in entries], dtype=np.float64)
    if query:
        q = _words(query)
        if q:
            lex = np.array(
                [len(q & _words(f"{e.name} {e.body}")) / len(q) for e in entries],
                dtype=np.float64,
            )
        else:
            lex = np.zeros(len(entries))
        if embedder is not None:
            vecs = embedder.embed([query] + [f"{e.name}: {e.body}" for e in entries])
            cos = vecs[1:] @ vecs[0]
            lex = 0.5 * lex + 0.5 * np.clip(cos, 0.0, 1.0)
        scores = scores + lex
    order = sorted(
        range(len(entries)),
        key=lambda i: (-scores[i], -(entries[i].entry_id or 0), i),
    )
    return [(entries[i], float(scores[i])) for i in order]


def assemble_prompt(
    ranked: Sequence[PlanEntry] | Sequence[tuple[PlanEntry, float]],
    budget_tokens: int | None = None,
    *,
    count_tokens: Callable[[str], int] = approx_tokens,
    header: str = "Plan memory:",
) -> RenderedMemory:
    """The text the planner reads: ``header`` then one line per entry, in the given order,
    skipping entries that do not fit ``budget_tokens`` (``None`` = no budget).

    The whole text is re-counted at the end with ``count_tokens`` and trailing entries are
    dropped until it fits, so ``result.tokens <= budget_tokens`` always holds. An empty memory,
    or a budget too small for the header, gives ``text == ""``.
    """
    items = [x[0] if isinstance(x, tuple) else x for x in ranked]
    if budget_tokens is not None and (not isinstance(budget_tokens, int) or budget_tokens < 0):
        raise ValueError(f"budget_tokens must be an int >= 0 or None (got {budget_tokens!r})")
    if not items:
        return RenderedMemory("", 0, (), ())
    head_cost = count_tokens(header) + 1
    if budget_tokens is not None and head_cost > budget_tokens:
        return RenderedMemory("", 0, (), tuple(e.name for e in items))
    used = head_cost
    chosen: list[PlanEntry] = []
    dropped: list[str] = []
    for e in items:
        cost = count_tokens(format_entry(e)) + 1
        if budget_tokens is None or used + cost <= budget_tokens:
            chosen.append(e)
            used += cost
        else:
            dropped.append(e.name)

    def build(es: list[PlanEntry]) -> str:
        return "\n".join([header] + [format_entry(e) for e in es]) if es else ""

    text = build(chosen)
    n = count_tokens(text) if text else 0
    while budget_tokens is not None and chosen and n > budget_tokens:
        dropped.insert(0, chosen.pop().name)
        text = build(chosen)
        n = count_tokens(text) if text else 0
    return RenderedMemory(text, n, tuple(e.name for e in chosen), tuple(dropped))
