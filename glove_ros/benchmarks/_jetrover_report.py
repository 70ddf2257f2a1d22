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
    lines.append("false alarms: alerts on a (state, action) no drift event touched where "
                 "memory agreed with the world; stale goals: first goal believed to hold the "
                 "colour but did not")
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path, window: int = 5) -> None:
    """Per mode over episodes: rolling success rate, steps per task, and the cumulative
    count of stale goals (drives to where memory wrongly believed the block was); drift
    events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8.0, 8.0), sharex=True)
    ax1, ax2, ax3 = axes
    styles = {"async": ("-", 2.5), "sync": ("--", 1.8), "static": (":", 2.2)}
    for mode, r in doc["modes"].items():
        eps = r["episodes"]
        ls, lw = styles.get(mode, ("-", 1.5))
        x = np.array([e["episode"] for e in eps])
        ok = np.array([1.0 if e["success"] else 0.0 for e in eps])
        steps = np.array([e["steps"] for e in eps], dtype=float)
        stale = np.cumsum([1 if e["stale_goal"] else 0 for e in eps])
        k = max(1, min(window, len(ok)))
        roll = np.array([ok[max(0, i - k + 1): i + 1].mean() for i in range(len(ok))])
        ax1.plot(x, roll, ls, linewidth=lw, label=mode, drawstyle="steps-post")
        ax2.plot(x, steps, ls, linewidth=lw, label=mode, marker=".")
        ax3.plot(x, stale, ls, linewidth=lw, label=mode, drawstyle="steps-post")
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
