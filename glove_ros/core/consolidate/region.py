"""What a consolidation run works on, and when: the run's configuration, the trigger policy
and the selection of the working region R.

:class:`ConsolidationConfig` is the one set of parameters every stage reads (region bounds,
loop budgets, acceptance thresholds); it lives here because the region is the first stage
that needs it. :func:`trigger_decision` says whether a docked robot should consolidate now;
:func:`select_region` picks the bounded set of entries (anchors, recent fast writes,
retrieved entries) that one run rewrites. Kept apart from the fast writer (which runs per
episode, with no configuration of a run) and from the tool loop (which only consumes R).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from glove_ros.core.consolidate.writer import _WRITER_SOURCE, SOURCE, TraceIndex, _int, _num
from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.plan_entries import PlanEntry
from glove_ros.core.plan.plan_retrieval import format_entry, rank_entries

__all__ = [
    "ConsolidationConfig",
    "trigger_decision",
    "Region",
    "select_region",
]


# ============================================================================================
# 2. configuration and trigger


@dataclass(frozen=True)
class ConsolidationConfig:
    """Consolidation parameters (validated by :meth:`validate`).

    Trigger:
        every_k_episodes: episodes since the last run before a docked robot consolidates.
        require_dock: only consolidate on the dock (else every k episodes, e.g. simulation).
    Region:
        max_region_entries: most entries in R.
        region_budget_tokens: most tokens of R (its entries as memory lines); keep it below
            the LLM context minus ``call_max_tokens`` and ~500 tokens of instructions.
        retrieve_k: entries taken per recent task text as "recently retrieved".
        recent_tasks: recent episodes whose task texts are the retrieval queries.
    Loop budgets:
        max_steps: tool calls per run (each call is one step).
        max_tokens: tokens the LLM may generate in one run (all calls together).
        call_max_tokens: tokens one LLM tool call may generate.
        max_seconds: wall-clock bound of one run.
        llm_timeout_s: wall-clock bound of one LLM call (also how fast a cancel is honoured).
        max_fan_in: most source episodes cited by one synthesized entry.
        max_synthesized: most entries in S.
    Acceptance:
        planner_budget_tokens: memory budget of the planner the rehearsal reads with.
        rho: fraction of S masked per counterfactual sample, in (0, 1].
        n_masks: counterfactual samples.
        min_cf: least counterfactual utility to commit.
        tolerance: U(B') may be this much below U(B) and still count as "not worse".
        max_growth: tokens after / tokens before may not exceed this.
        reject_harmful: reject when removing one entry of S would raise the utility.
        dry_run: evaluate but never write.
        seed: seed of the masks.
        miss_threshold: empty looks at a block's last waypoint (after its last sighting)
            that make its location unknown (rule policy and evaluation truth alike).
        holdout_episodes: the newest k journaled episodes are held out: the consolidator
            cannot read them, their fast writes stay outside the region, and the rewrite is
            accepted only if it predicts what they observed at least as well as the old
            region did (:func:`~glove_ros.core.consolidate.acceptance.heldout_tasks`). 0:
            in-sample acceptance only.
        require_heldout: with ``holdout_episodes`` > 0, reject a rewrite when no held-out
            task can be judged (no evidence that it generalises).
        refit_after_heldout: once a rewrite passed on the held-out episodes and was
            committed, run the same policy again with nothing held out (in-sample acceptance)
            so the newest episodes are folded in too -- the held-out test validated the
            procedure; the refit uses all the evidence (cross-validate, then refit). Meant
            for deterministic policies; an LLM refit is a new, un-held-out sample.
    """

    every_k_episodes: int = 10
    require_dock: bool = True
    max_region_entries: int = 32
    region_budget_tokens: int = 900
    retrieve_k: int = 6
    recent_tasks: int = 10
    max_steps: int = 64
    max_tokens: int = 2048
    call_max_tokens: int = 128
    max_seconds: float = 900.0
    llm_timeout_s: float = 30.0
    max_fan_in: int = 32
    max_synthesized: int = 32
    planner_budget_tokens: int = 400
    rho: float = 0.5
    n_masks: int = 8
    min_cf: float = 0.0
    tolerance: float = 0.0
    max_growth: float = 1.0
    reject_harmful: bool = True
    dry_run: bool = False
    seed: int = 0
    miss_threshold: int = 2
    holdout_episodes: int = 3
    require_heldout: bool = True
    refit_after_heldout: bool = True

    def validate(self) -> ConsolidationConfig:
        """Raise ``ValueError`` with an actionable message on a bad value. Returns ``self``."""
        ints = {
            "every_k_episodes": (1, 1_000_000), "max_region_entries": (1, 512),
            "region_budget_tokens": (32, 1_000_000), "retrieve_k": (0, 512),
            "recent_tasks": (0, 10_000), "max_steps": (1, 10_000),
            "max_tokens": (1, 10_000_000), "call_max_tokens": (16, 100_000),
            "max_fan_in": (1, 1024), "max_synthesized": (1, 512),
            "planner_budget_tokens": (16, 1_000_000), "n_masks": (1, 1000),
            "seed": (0, 2**31 - 1), "miss_threshold": (1, 1000),
            "holdout_episodes": (0, 1000),
        }
        for k, (lo, hi) in ints.items():
            v = getattr(self, k)
            if not _int(v) or not lo <= v <= hi:
                raise ValueError(f"{k} must be an int in [{lo}, {hi}] (got {v!r})")
        for k in ("max_seconds", "llm_timeout_s"):
            v = getattr(self, k)
            if not _num(v) or v <= 0:
                raise ValueError(f"{k} must be a finite number of seconds > 0 (got {v!r})")
        if not _num(self.rho) or not 0.0 < self.rho <= 1.0:
            raise ValueError(f"rho must be in (0, 1] (got {self.rho!r})")
        if not _num(self.min_cf) or not -1.0 <= self.min_cf <= 1.0:
            raise ValueError(f"min_cf must be in [-1, 1] (got {self.min_cf!r})")
        if not _num(self.tolerance) or not 0.0 <= self.tolerance <= 1.0:
            raise ValueError(f"tolerance must be in [0, 1] (got {self.tolerance!r})")
        if not _num(self.max_growth) or self.max_growth < 0.1:
            raise ValueError(f"max_growth must be a number >= 0.1 (got {self.max_growth!r})")
        for k in ("require_dock", "reject_harmful", "dry_run", "require_heldout",
                  "refit_after_heldout"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"{k} must be a bool")
        return self


def trigger_decision(
    config: ConsolidationConfig,
    *,
    docked: bool,
    episodes_since: int,
    requested: bool = False,
) -> tuple[bool, str]:
    """Whether to consolidate now, and why (``"request"``, ``"docked"``, ``"every_k"``) or
    why not.

    On request: always. Otherwise at least ``every_k_episodes`` new episodes are needed, and
    with ``require_dock`` the robot must be docked (charging).
    """
    if requested:
        return True, "request"
    k = config.every_k_episodes
    if episodes_since < k:
        return False, f"{episodes_since} of {k} episodes since the last consolidation"
    if config.require_dock:
        if not docked:
            return False, f"{episodes_since} episodes waiting; not docked"
        return True, "docked"
    return True, "docked" if docked else "every_k"


# ============================================================================================
# 3. region


@dataclass(frozen=True)
class Region:
    """The working region R: the entries to rewrite, and the evidence they cite.

    ``episodes``: journaled source episodes of R, newest first (what S may cite).
    ``anchors`` / ``recent`` / ``retrieved``: names by why they were chosen.
    ``left_out``: qualifying entries that did not fit the bounds (taken by a later run).
    """

    entries: tuple[PlanEntry, ...]
    episodes: tuple[str, ...]
    anchors: tuple[str, ...] = ()
    recent: tuple[str, ...] = ()
    retrieved: tuple[str, ...] = ()
    tokens: int = 0
    left_out: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        """Entry names in memory order."""
        return tuple(e.name for e in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def select_region(
    entries: Sequence[PlanEntry],
    index: TraceIndex,
    config: ConsolidationConfig,
    *,
    queries: Sequence[str] = (),
    count_tokens: Callable[[str], int] = approx_tokens,
    exclude: Iterable[str] = (),
) -> Region:
    """R = anchors (earlier consolidated entries) + recent fast writes (newest first) +
    entries retrieved for ``queries`` (top ``retrieve_k`` each), bounded by
    ``max_region_entries`` and ``region_budget_tokens``; only entries citing a journaled
    episode qualify, and none citing an ``exclude`` (held-out) episode. R keeps memory
    order."""
    held = set(exclude)

    def traceable(e: PlanEntry) -> bool:
        eps = e.provenance.episodes
        return any(ep in index for ep in eps) and not any(ep in held for ep in eps)

    pool = [e for e in entries if traceable(e)]
    anchors = [e for e in pool if e.source == SOURCE]
    recent = sorted((e for e in pool if e.source == _WRITER_SOURCE),
                    key=lambda e: -(e.entry_id or 0))
    retrieved: list[PlanEntry] = []
    for q in queries:
        if config.retrieve_k and q.strip():
            retrieved += [e for e, _ in rank_entries(pool, q)[: config.retrieve_k]]
    chosen: dict[str, str] = {}
    used = 0
    for why, group in (("anchor", anchors), ("recent", recent), ("retrieved", retrieved)):
        for e in group:
            if e.name in chosen:
                continue
            cost = count_tokens(format_entry(e)) + 1
            if len(chosen) >= config.max_region_entries or used + cost > \
                    config.region_budget_tokens:
                continue
            chosen[e.name] = why
            used += cost
    left = len({e.name for e in pool} - set(chosen))
    picked = tuple(e for e in entries if e.name in chosen)
    eps: dict[str, int] = {}
    for e in picked:
        for ep in e.provenance.episodes:
            t = index.get(ep)
            if t is not None:
                eps[ep] = t.order
    episodes = tuple(sorted(eps, key=lambda x: -eps[x]))
    return Region(
        picked, episodes,
        tuple(n for n, w in chosen.items() if w == "anchor"),
        tuple(n for n, w in chosen.items() if w == "recent"),
        tuple(n for n, w in chosen.items() if w == "retrieved"),
        used, left,
    )
