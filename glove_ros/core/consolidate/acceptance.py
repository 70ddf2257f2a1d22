"""The acceptance test of a region rewrite: rehearsal, utility, counterfactual utility and
the Janus-style comparison of the old and the rewritten memory (point 7 of
:mod:`glove_ros.core.consolidate.consolidation`).

The planner's first decision is rehearsed on the memory it would read
(:func:`rehearse_find`, :func:`rehearse_corridor`) and scored against the relative truth of
the journaled traces (:func:`evaluation_tasks`, :func:`heldout_tasks`);
:func:`evaluate_rewrite` turns that into an accept / reject verdict with reasons. Pure
functions of entries, tasks and traces: no store writes, no LLM, so it is tested (and can
be replaced through a custom scorer) independently of how the rewrite was produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from glove_ros.core.consolidate.region import ConsolidationConfig
from glove_ros.core.consolidate.writer import TraceIndex, _tokens
from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.janus import GateTask
from glove_ros.core.plan.plan_entries import PlanEntry, slugify
from glove_ros.core.plan.plan_retrieval import assemble_prompt, memory_text, rank_entries

__all__ = [
    "EntryScorer",
    "Evaluation",
    "evaluation_tasks",
    "heldout_tasks",
    "rehearse_find",
    "rehearse_corridor",
    "rehearsal_scorer",
    "utility",
    "evaluate_rewrite",
    "memory_tokens",
]


def memory_tokens(entries: Sequence[PlanEntry],
                  count_tokens: Callable[[str], int] = approx_tokens) -> int:
    """Active memory tokens: the whole memory as the canonical text
    (:func:`~glove_ros.core.plan.plan_retrieval.memory_text`), counted with ``count_tokens``."""
    text = memory_text(entries)
    return int(count_tokens(text)) if text else 0



# ============================================================================================
# 6. utility and acceptance

_NEGATION = frozenset({"no", "not", "never", "failed", "fail", "without", "absent", "missing",
                       "gone", "nothing", "none", "isn't", "wasn't"})
_FORMER = frozenset({"from", "was", "left", "earlier", "formerly", "previously", "former",
                     "old"})
_BLOCKED = frozenset({"blocked", "closed", "impassable", "obstructed", "unreachable"})
_OPEN = frozenset({"open", "opened", "reopened", "re-opened", "clear", "works", "worked",
                   "passable", "reaches", "reached"})


def _render(entries: Sequence[PlanEntry], query: str, budget: int,
            count_tokens: Callable[[str], int]) -> list[PlanEntry]:
    by_name = {e.name: e for e in entries}
    r = assemble_prompt(rank_entries(entries, query), budget, count_tokens=count_tokens)
    return [by_name[n] for n in r.included]


def rehearse_find(entries: Sequence[PlanEntry], colour: str, waypoints: Iterable[str], *,
                  budget_tokens: int = 400,
                  count_tokens: Callable[[str], int] = approx_tokens) -> str | None:
    """The first waypoint a planner reading ``entries`` would drive to for "find the
    <colour> block", or ``None`` when memory says nothing usable.

    Reads the entries the planner would see (ranked for the task text, under
    ``budget_tokens``) in order; the first non-negative entry whose body names the colour and
    a waypoint, without a negation word, decides: the first waypoint named after the colour
    (else the last one before it), skipping one right after "from" / "was" / "earlier"...
    ("moved from kitchen to office" -> office).
    """
    wps = {w.lower() for w in waypoints}
    colour = slugify(colour)
    for e in _render(entries, f"find the {colour} block", budget_tokens, count_tokens):
        if e.kind == "negative":
            continue
        toks = _tokens(e.body)
        if colour not in toks or _NEGATION & set(toks):
            continue
        ci = toks.index(colour)
        hits = [(i, t) for i, t in enumerate(toks) if t in wps
                and (i == 0 or toks[i - 1] not in _FORMER)]
        if not hits:
            continue
        after = [t for i, t in hits if i > ci]
        return after[0] if after else hits[-1][1]
    return None


def rehearse_corridor(entries: Sequence[PlanEntry], a: str, b: str, *,
                      budget_tokens: int = 400,
                      count_tokens: Callable[[str], int] = approx_tokens) -> bool:
    """Whether a planner reading ``entries`` believes the corridor a-b blocked.

    The first entry (in the planner's order for the question) whose body names both ends
    decides: blocked if it says blocked / closed (and not open / re-opened), open if it says
    open / worked or shows a route (``->``). No such entry: not blocked.
    """
    a, b = a.lower(), b.lower()
    for e in _render(entries, f"is the corridor between {a} and {b} blocked", budget_tokens,
                     count_tokens):
        toks = set(_tokens(e.body))
        if a not in toks or b not in toks:
            continue
        if toks & _BLOCKED and not toks & _OPEN:
            return True
        if toks & _OPEN or "->" in e.body:
            return False
    return False


#: ``scorer(entries, task) -> score in [0, 1] or None`` (None: cannot judge; left out).
EntryScorer = Callable[[Sequence[PlanEntry], GateTask], "float | None"]


def rehearsal_scorer(waypoints: Iterable[str], *, budget_tokens: int = 400,
                     count_tokens: Callable[[str], int] = approx_tokens) -> EntryScorer:
    """The default scorer: rehearse the decision of a ``find`` / ``corridor`` task and
    compare it with ``task.data["truth"]`` (1.0 right, 0.0 wrong)."""
    wps = tuple(waypoints)

    def score(entries: Sequence[PlanEntry], task: GateTask) -> float | None:
        d = task.data
        if d.get("type") == "find":
            got = rehearse_find(entries, d["colour"], wps, budget_tokens=budget_tokens,
                                count_tokens=count_tokens)
            return 1.0 if got == d["truth"] else 0.0
        if d.get("type") == "corridor":
            a, b = d["edge"]
            got = rehearse_corridor(entries, a, b, budget_tokens=budget_tokens,
                                    count_tokens=count_tokens)
            return 1.0 if got == bool(d["truth"]) else 0.0
        return None

    return score


def evaluation_tasks(index: TraceIndex, episodes: Iterable[str],
                     extra_colours: Iterable[str] = (),
                     extra_edges: Iterable[tuple[str, str]] = (), *,
                     miss_threshold: int = 2) -> list[GateTask]:
    """The evaluation set: ``find`` tasks for every colour the traces of ``episodes`` saw (and
    ``extra_colours``), ``corridor`` tasks for every corridor they found blocked (and
    ``extra_edges``). Truth = the latest evidence in *all* journaled traces: where the colour
    was last seen (unknown, and the task left out, after ``miss_threshold`` empty looks
    there since); whether the latest drive through the corridor was blocked."""
    colours: set[str] = {slugify(c) for c in extra_colours if slugify(c)}
    edges: set[tuple[str, str]] = {tuple(sorted(e)) for e in extra_edges}  # type: ignore[misc]
    for ep in episodes:
        t = index.get(ep)
        if t is None:
            continue
        for _, cs, _ in t.looks:
            colours.update(cs)
        for a, b, blocked, _ in t.drives:
            if blocked:
                edges.add(tuple(sorted((a, b))))  # type: ignore[arg-type]
        if t.goal:
            colours.add(t.goal)
    last_seen: dict[str, tuple[str, int]] = {}
    empties: dict[str, list[int]] = {}
    last_drive: dict[tuple[str, str], bool] = {}
    for t in index.traces():  # oldest first: later evidence overwrites
        for wp, cs, _ in t.looks:
            for c in cs:
                last_seen[c] = (wp, t.order)
            if not cs:
                empties.setdefault(wp, []).append(t.order)
        for a, b, blocked, _ in t.drives:
            last_drive[tuple(sorted((a, b)))] = bool(blocked)  # type: ignore[index]
    tasks = []
    for c in sorted(colours):
        if c in last_seen:
            wp, order = last_seen[c]
            if sum(1 for o in empties.get(wp, ()) if o > order) >= miss_threshold:
                continue
            tasks.append(GateTask(f"find:{c}", f"find the {c} block",
                                  {"type": "find", "colour": c, "truth": wp}))
    for a, b in sorted(edges):
        if (a, b) in last_drive:
            tasks.append(GateTask(f"corridor:{a}:{b}",
                                  f"is the corridor between {a} and {b} blocked",
                                  {"type": "corridor", "edge": [a, b],
                                   "truth": last_drive[(a, b)]}))
    return tasks


def heldout_tasks(index: TraceIndex, held: Iterable[str]) -> list[GateTask]:
    """The held-out evaluation set: tasks whose truth comes *only* from the held-out
    episodes ``held`` (traces the consolidator never read). ``find`` for every colour they
    saw (truth: where it was last seen in them), ``corridor`` for every corridor they drove
    through (truth: blocked or not on the latest drive). A memory that dropped a fact the
    held-out episodes needed, or kept one they contradict, scores lower on it."""
    traces = sorted((t for t in (index.get(e) for e in held) if t is not None),
                    key=lambda t: t.order)
    seen: dict[str, str] = {}
    drives: dict[tuple[str, str], bool] = {}
    for t in traces:
        for wp, cs, _ in t.looks:
            for c in cs:
                seen[c] = wp
        for a, b, blocked, _ in t.drives:
            drives[tuple(sorted((a, b)))] = bool(blocked)  # type: ignore[index]
    tasks = [GateTask(f"find:{c}", f"find the {c} block",
                      {"type": "find", "colour": c, "truth": wp})
             for c, wp in sorted(seen.items())]
    tasks += [GateTask(f"corridor:{a}:{b}", f"is the corridor between {a} and {b} blocked",
                       {"type": "corridor", "edge": [a, b], "truth": blocked})
              for (a, b), blocked in sorted(drives.items())]
    return tasks


def utility(entries: Sequence[PlanEntry], tasks: Sequence[GateTask], scorer: EntryScorer
            ) -> tuple[float, int]:
    """U(M): mean score of the judged tasks, and how many were judged (0 -> U = 0)."""
    scores = [s for s in (scorer(entries, t) for t in tasks) if s is not None]
    return (float(np.mean(scores)) if scores else 0.0), len(scores)


@dataclass(frozen=True)
class Evaluation:
    """The acceptance test of one rewrite (point 7 of
    :mod:`glove_ros.core.consolidate.consolidation`)."""

    tasks: int
    judged: int
    utility_old: float
    utility_new: float
    counterfactual: float
    masked_mean: float
    load_bearing: tuple[str, ...]
    harmful: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    accepted: bool
    reasons: tuple[str, ...]
    heldout_tasks: int = 0
    heldout_judged: int = 0
    heldout_old: float | None = None
    heldout_new: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("load_bearing", "harmful", "reasons"):
            d[k] = list(d[k])
        return d


def evaluate_rewrite(
    old: Sequence[PlanEntry],
    new: Sequence[PlanEntry],
    synthesized: Sequence[str],
    tasks: Sequence[GateTask],
    scorer: EntryScorer,
    config: ConsolidationConfig,
    *,
    count_tokens: Callable[[str], int] = approx_tokens,
    should_cancel: Callable[[], bool] | None = None,
    heldout: Sequence[GateTask] | None = None,
    heldout_episodes: Iterable[str] = (),
) -> Evaluation:
    """Compare the rewritten memory ``new`` with ``old`` on ``tasks`` and compute the
    counterfactual utility of the ``synthesized`` entries (names in ``new``).

    ``heldout`` (:func:`heldout_tasks`) are scored on both memories without the entries that
    cite a ``heldout_episodes`` episode (so the held-out episodes' own fast writes, present in
    both, cannot answer for the region): the rewrite must not be worse there, and with
    ``config.require_heldout`` at least one held-out task must be judged.

    Raises ``InterruptedError`` when ``should_cancel`` turns true.
    """
    def check() -> None:
        if should_cancel is not None and should_cancel():
            raise InterruptedError("cancelled during evaluation")

    u_old, n_old = utility(old, tasks, scorer)
    check()
    u_new, n_new = utility(new, tasks, scorer)
    s_names = [n for n in synthesized if any(e.name == n for e in new)]
    rng = np.random.default_rng(config.seed)
    masked: list[float] = []
    if s_names:
        k = max(1, int(round(config.rho * len(s_names))))
        for _ in range(config.n_masks):
            check()
            drop = set(rng.choice(s_names, size=min(k, len(s_names)), replace=False).tolist())
            masked.append(utility([e for e in new if e.name not in drop], tasks, scorer)[0])
    masked_mean = float(np.mean(masked)) if masked else u_new
    cf = u_new - masked_mean
    load, harm = [], []
    for n in s_names:
        check()
        u_wo = utility([e for e in new if e.name != n], tasks, scorer)[0]
        if u_wo < u_new - 1e-12:
            load.append(n)
        elif u_wo > u_new + 1e-12:
            harm.append(n)
    t_old, t_new = memory_tokens(old, count_tokens), memory_tokens(new, count_tokens)
    reasons = []
    judged = min(n_old, n_new)
    if not tasks or judged == 0:
        reasons.append("no evaluation task could be judged from the traces")
    if u_new < u_old - config.tolerance:
        reasons.append(f"worse than the old memory on the evaluation set ({u_new:.3f} < "
                       f"{u_old:.3f})")
    if cf < config.min_cf - 1e-12:
        reasons.append(f"counterfactual utility {cf:.3f} < min_cf {config.min_cf:.3f} (masking "
                       "part of S helps: misleading entries)")
    if harm and config.reject_harmful:
        reasons.append(f"harmful entries (removing one raises the utility): {', '.join(harm)}")
    if t_new > t_old * config.max_growth:
        reasons.append(f"memory grows from {t_old} to {t_new} tokens (max_growth "
                       f"{config.max_growth:g})")
    ho: dict[str, Any] = {}
    if heldout is not None:
        check()
        masked_eps = set(heldout_episodes)

        def visible(entries: Sequence[PlanEntry]) -> list[PlanEntry]:
            return [e for e in entries if not masked_eps & set(e.provenance.episodes)]

        h_old, hn_old = utility(visible(old), heldout, scorer)
        h_new, hn_new = utility(visible(new), heldout, scorer)
        hj = min(hn_old, hn_new)
        ho = {"heldout_tasks": len(heldout), "heldout_judged": hj,
              "heldout_old": h_old if hj else None, "heldout_new": h_new if hj else None}
        if hj == 0 and config.require_heldout:
            reasons.append("no held-out task could be judged (no evidence the rewrite "
                           "predicts unseen episodes)")
        if hj and h_new < h_old - config.tolerance:
            reasons.append(f"worse than the old memory on the held-out episodes ({h_new:.3f} "
                           f"< {h_old:.3f}): it drops or contradicts what they needed")
    return Evaluation(len(tasks), judged, u_old, u_new, cf, masked_mean, tuple(load),
                      tuple(harm), t_old, t_new, not reasons, tuple(reasons), **ho)
