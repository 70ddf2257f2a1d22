"""JetRover block-search benchmark: the printed comparison table and the plot.

Reads only the JSON-ready document :func:`glove_ros.benchmarks.jetrover.run_benchmark`
returns, so it is separate from everything that produces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "format_table",
    "write_plot",
]


def format_table(doc: Mapping[str, Any]) -> str:
    """The comparison table printed by the CLI."""
    cfg = doc["config"]
    lines = [f"jetrover '{doc['world']['name']}': {cfg['episodes']} tasks, planner "
             f"{cfg['planner']}, seed {cfg['seed']}, step limit {cfg['max_steps']}, tasks start "
             f"at {cfg.get('task_start', 'random')}"]
    head = ["phase", "mode", "success", "steps/task", "probe steps", "alerts", "false alarms",
            "suppressed", "probes", "stale goals", "llm fallbacks"]
    rows = [head]
    for p in doc["phases"]:
        label = f"{p['name']} [{p['start']}-{p['end'] - 1}]"
        for mode, r in doc["modes"].items():
            a = next(x for x in r["phases"] if x["name"] == p["name"])
            rows.append([label, mode, f"{a['successes']}/{a['episodes']}",
                         f"{a['steps_per_task']:.2f}", str(a["probe_steps"]), str(a["alerts"]),
                         str(a["false_alarms"]), str(a["suppressed"]), str(a["probes"]),
                         str(a["stale_goals"]), str(a["llm_fallbacks"])])
            label = ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(wd) if i < 2 else c.rjust(wd)
                               for i, (c, wd) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * wd for wd in widths))
    ratios = doc.get("ratios", {})
    over = ", ".join(ratios.get("over_phases", []))
    parts = []
    for m in doc["modes"]:
        if f"{m}_success_rate" in ratios:
            parts.append(f"{m} {ratios[f'{m}_success_rate']:.0%} success, "
                         f"{ratios[f'{m}_steps_per_task']:.2f} steps/task, "
                         f"{ratios[f'{m}_stale_goals']} stale goals")
    if parts:
        where = f"after drift ({over})" if len(doc["phases"]) > 1 else "overall"
        lines.append(f"{where}: " + "; ".join(parts))
    for m in ("async", "sync"):
        v = ratios.get(f"steps_static_over_{m}")
        if v is not None:
            lines.append(f"static memory needs {v:.2f}x the steps per task of GLOVE-{m}")
    for kind, label in (("bare", "best_baseline"), ("retest", "best_retest")):
        b = doc.get("best_baseline", {}).get(kind)
        v = ratios.get(f"steps_{label}_over_async")
        if b is not None and v is not None:
            lines.append(f"the best {'baseline' if kind == 'bare' else 're-test arm'}, "
                         f"{_label(b)}, needs {v:.2f}x the steps per task of GLOVE-async")
    tuning = doc.get("baseline_tuning")
    if tuning:
        lines.append(f"baselines at settings frozen in {tuning.get('file', '?')}, tuned on seeds "
                     f"{tuning.get('tuned_on_seeds')}"
                     + (" (this seed is one of them: a development run)"
                        if tuning.get("seed_in_tuning_set") else ""))
    elif doc.get("baseline_sweep"):
        lines.append("baselines at their best swept setting on this run (chosen after the "
                     "fact on this seed)")
    lines += _drift_lines(doc)
    lines += _perception_lines(doc)
    lines.append("false alarms (one definition for every mode): observations after which "
                 "the belief at a place no drift event touched went from right to wrong; stale "
                 "goals: first goal believed to hold the target but did not")
    return "\n".join(lines)


def _label(b: Mapping[str, Any]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in b.get("params", {}).items())
    return f"{b['name']}({params})" if params else b["name"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                             for i, (c, wd) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            out.append("  ".join("-" * wd for wd in widths))
    return out


def _drift_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per method: detection delay, false alarms per 1,000 looks, stale goals and steps
    after the first drift (``modes.<m>.drift``)."""
    rows = [["method", "params", "success", "steps/task", "stale goals", "delay med/max",
             "undetected", "false alarms", "looks", "FA/1k looks", "FA/1k trans."]]
    for mode, r in doc["modes"].items():
        d = r.get("drift")
        if d is None:
            continue
        delay = "-" if d["delay_median"] is None else f"{d['delay_median']}/{d['delay_max']}"
        params = ",".join(f"{k}={v}" for k, v in r.get("params", {}).items()) or "-"
        rows.append([mode, params, f"{d['drift_successes']}/{d['drift_tasks']}",
                     f"{d['steps_per_task']:.2f}" if d["steps_per_task"] is not None else "-",
                     str(d["stale_goals"]), delay,
                     f"{d['undetected']}/{d['stale_changes']}", str(d["false_alarms"]),
                     str(d["looks"]), f"{d['false_alarms_per_1000_looks']:.2f}",
                     f"{d['false_alarms_per_1000']:.2f}"])
    if len(rows) == 1:
        return []
    return ["", "drift metrics from the first drift on (detection delay: visits to a changed "
            "place until the method's memory there matches; false alarms over the whole run):",
            *_table(rows)]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _perception_lines(doc: Mapping[str, Any]) -> list[str]:
    """The detector's cache use and measured rates on this run's frames and looks."""
    p = doc.get("perception")
    if not p:
        cfg = doc["config"]
        if cfg.get("perception") == "oracle":
            return ["perception: the simulator's ground truth (oracle perception, no detector)"]
        return []
    rule = p.get("look_rule", {})
    frames = max(1, p["frames"])
    lines = ["", f"perception: camera, {p['detector']} detector, a class is seen in "
             f"{rule.get('min_count')} of {rule.get('frames')} frames; {p['frames']} frames "
             f"judged, {p['detector_runs']} detector runs, {p['cache_hits']} cache hits "
             f"({p['cache_hits'] / frames:.0%}), {p['disk_hits']} from disk"]
    rates = p.get("rates", {})
    rows = [["class", "frames present", "hit rate", "count right", "frames absent",
             "false rate", "looks present", "look hit rate", "look false rate"]]
    pl = rates.get("per_look", {})
    for c, r in rates.get("per_frame", {}).items():
        lk = pl.get(c, {})
        rows.append([c, str(r["present"]), _pct(r["hit_rate"]), str(r["count_right"]),
                     str(r["absent"]), _pct(r["false_rate"]), str(lk.get("present", 0)),
                     _pct(lk.get("hit_rate")), _pct(lk.get("false_rate"))])
    if len(rows) > 1:
        lines.append(f"detector rates on this run's {rates.get('frames', 0)} distinct frames "
                     f"and {rates.get('looks', 0)} distinct looks (hit: detected where "
                     "painted / there; false: detected where absent):")
        lines += _table(rows)
    return lines


def write_plot(doc: Mapping[str, Any], path: Path, window: int = 5) -> None:
    """Per mode over episodes: rolling success rate, steps per task, and the cumulative
    count of stale goals (drives to where memory wrongly believed the block was); drift
    events marked. With baselines, the best bare rule and the best re-test arm are drawn
    and labelled, the other baselines as thin grey lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8.0, 8.0), sharex=True)
    ax1, ax2, ax3 = axes
    styles = {"async": ("-", 2.5), "sync": ("--", 1.8), "static": (":", 2.2)}
    best = {b["name"] for b in doc.get("best_baseline", {}).values()}
    for mode, r in doc["modes"].items():
        eps = r["episodes"]
        ls, lw = styles.get(mode, ("-", 1.5))
        extra: dict[str, Any] = {}
        if best and mode in doc.get("baseline_sweep", {}) and mode not in best:
            extra = {"color": "0.75", "zorder": 1}
            lw = 0.8
            mode = "_" + mode  # no legend entry
        x = np.array([e["episode"] for e in eps])
        ok = np.array([1.0 if e["success"] else 0.0 for e in eps])
        steps = np.array([e["steps"] for e in eps], dtype=float)
        stale = np.cumsum([1 if e["stale_goal"] else 0 for e in eps])
        k = max(1, min(window, len(ok)))
        roll = np.array([ok[max(0, i - k + 1): i + 1].mean() for i in range(len(ok))])
        ax1.plot(x, roll, ls, linewidth=lw, label=mode, drawstyle="steps-post", **extra)
        ax2.plot(x, steps, ls, linewidth=lw, label=mode, marker=".", **extra)
        ax3.plot(x, stale, ls, linewidth=lw, label=mode, drawstyle="steps-post", **extra)
    ax1.set_ylim(-0.05, 1.1)
    ax1.set_ylabel(f"success (rolling {window})")
    ax2.set_ylabel("steps per task")
    ax3.set_ylabel("stale goals (cumulative)")
    ax3.set_xlabel("episode (one task each)")
    for ax in axes:
        for e in doc["world"]["drift_events"]:
            if "episode" in e:
                ax.axvline(e["episode"], color="red", linestyle="--", linewidth=1)
                ax.text(e["episode"], ax.get_ylim()[1], f" {e['type']}", color="red",
                        fontsize=7, va="top")
    ax1.legend(fontsize=8, loc="lower left")
    cfg = doc["config"]
    ax1.set_title(f"JetRover '{doc['world']['name']}': {cfg['planner']} planner, tasks start "
                  f"at {cfg.get('task_start', 'random')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
