"""Janus benchmark: results per update-error kind.

For every injected error kind with a rate above zero, every arm of ``per_kind_arms`` runs
again on every (world, seed) with **only that kind** injected (the same coin flips as in
the mixed run: a kind's draws do not depend on the other kinds). Per kind and arm:
candidates carrying the kind proposed / deployed / blocked / compared, how many of them
experience memory held any evidence about (``experience_sees``) or the evidence check
spoke against (``evidence_against``), harmful deployed (= deployed of the kind), helpful
blocked (clean candidates rejected in the same runs), and the paired gains over ``never``
(task success in the later half, held-out questions: all, the types the gate rehearses,
the types it never rehearses, a new robot's find). ``harm`` is what the kind costs with no
gate: ``never`` minus the scenario's ``clean`` arm, paired per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from glove_ros.benchmarks._janus_arm import HELDOUT_AGGREGATES, KIND_COUNTERS
from glove_ros.benchmarks._janus_scenario import ERROR_KINDS, Arm, Scenario

__all__ = [
    "PER_KIND_METRICS",
    "interval",
    "per_kind_summary",
    "run_per_kind",
]

#: two-sided 95% Student t quantiles for 1..30 degrees of freedom (30+: the last)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval(xs: Sequence[float]) -> dict[str, Any]:
    """Mean and 95% t-interval of ``xs`` (paired per-run differences); the interval is
    ``None`` with fewer than two values."""
    x = np.asarray(list(xs), dtype=float)
    n = len(x)
    if n == 0:
        return {"mean": 0.0, "ci95": None, "n": 0}
    m = float(x.mean())
    if n < 2:
        return {"mean": round(m, 3), "ci95": None, "n": n}
    half = float(_T975[min(n - 1, len(_T975)) - 1] * x.std(ddof=1) / math.sqrt(n))
    return {"mean": round(m, 3), "ci95": [round(m - half, 3), round(m + half, 3)], "n": n}


#: figure name -> how it is read from a run's result (fractions; gains are in points)
PER_KIND_METRICS: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "later": lambda r: float(r["later"]["success_rate"]),
    "heldout": lambda r: float(r["heldout"]["all"]),
    "rehearsed": lambda r: float(r["heldout"]["rehearsed"]),
    "unrehearsed": lambda r: float(r["heldout"]["unrehearsed"]),
    "new_robot": lambda r: float(r["heldout"]["cold_find"]),
}


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def _paired(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], which: str
            ) -> dict[str, Any]:
    f = PER_KIND_METRICS[which]
    per = [round(100 * (f(x) - f(y)), 2) for x, y in zip(a, b, strict=True)]
    return {**interval(per), "per_run": per}


def per_kind_summary(kind: str, runs_by_arm: Mapping[str, Sequence[Mapping[str, Any]]],
                     arms: Sequence[Arm], clean_runs: Sequence[Mapping[str, Any]] | None = None
                     ) -> dict[str, Any]:
    """One kind's block of the document from the per-run results of every arm (each list in
    the same (world, seed) order)."""
    never = next(a.label for a in arms if a.trigger == "never")
    out_arms: dict[str, Any] = {}
    for arm in arms:
        runs = runs_by_arm[arm.label]
        counts = {c: round(_mean([r["by_kind"][kind][c] for r in runs]), 2)
                  for c in KIND_COUNTERS}
        row: dict[str, Any] = {
            "trigger": arm.trigger, "scorer": arm.scorer, **counts,
            "harmful_deployed": counts["deployed"],
            "helpful_blocked": round(_mean([r["by_kind"]["clean"]["blocked"] for r in runs]), 2),
            "clean_proposed": round(_mean([r["by_kind"]["clean"]["proposed"] for r in runs]), 2),
            "comparisons": round(_mean([r["gate"]["comparisons"] for r in runs]), 2),
            "later_success": round(_mean([r["later"]["success_rate"] for r in runs]), 4),
            "heldout": {k: round(_mean([r["heldout"][k] for r in runs]), 4)
                        for k in HELDOUT_AGGREGATES},
        }
        if arm.label != never:
            row["gain_vs_never"] = {w: _paired(runs, runs_by_arm[never], w)
                                    for w in PER_KIND_METRICS}
        out_arms[arm.label] = row
    doc: dict[str, Any] = {"arms": out_arms}
    if clean_runs is not None:
        doc["harm_vs_clean"] = {w: _paired(runs_by_arm[never], clean_runs, w)
                                for w in PER_KIND_METRICS}
    return doc


def run_per_kind(sc: Scenario, worlds: Sequence[Any], run_one: Callable[..., dict[str, Any]],
                 clean_runs: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Every kind with a rate above zero, every arm of ``sc.per_kind_arms``, every (world,
    seed), only that kind injected. ``run_one(world, arm, seed, only_kind)`` runs one arm
    (the benchmark's :class:`~glove_ros.benchmarks._janus_arm.ArmRunner`). Empty for the
    LLM updater (its errors are not injected, so they have no kind)."""
    if sc.updater != "rule" or not sc.per_kind_arms:
        return {}
    rates = sc.error_rates
    out: dict[str, Any] = {}
    for kind in ERROR_KINDS:
        if rates[kind] <= 0.0:
            continue
        runs_by_arm = {arm.label: [run_one(world, arm, seed, kind)
                                   for world in worlds for seed in sc.seeds]
                       for arm in sc.per_kind_arms}
        out[kind] = {"rate": rates[kind],
                     **per_kind_summary(kind, runs_by_arm, sc.per_kind_arms, clean_runs)}
    return out
