"""FrozenLake drift benchmark: the printed table and the plot of a result document.

Reads only the JSON-ready document :func:`glove_ros.benchmarks.frozenlake.run_benchmark`
returns, so it is separate from everything that produces it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def format_table(report: dict[str, Any]) -> str:
    """A readable table: success per phase, drift totals, steps, alerts, deadlock."""
    sc = report["scenario"]
    phases = report["phases"]
    drift_names = phases[1:]
    kind = "slippery" if sc["is_slippery"] else "deterministic"
    lines = [
        f"FrozenLake drift benchmark '{sc['name']}' ({len(sc['map'])}x{len(sc['map'][0])}, "
        f"{kind}, policy {report['policy']}); drift budget {sc['budget']['total']} steps "
        f"(probe cap {sc['budget']['probe_cap']})",
    ]
    head = ["method", *phases, "drift", "task", "probe", "alerts", "out-of-budget", "deadlock"]
    rows = [head]
    for name, m in report["methods"].items():
        ph = m["phases"]
        drift = ph[1:]
        dead = [p["phase"] for p in drift if p["deadlock"]]
        checked = [p for p in drift if p["deadlock"] is not None]
        rows.append([
            name,
            *[f"{p['successes']}/{p['episodes']}" for p in ph],
            f"{m['drift_successes']}/{m['drift_episodes']}",
            str(sum(p["task_steps"] for p in drift)),
            str(sum(p["probe_steps"] for p in drift)),
            str(sum(p["alerts"] for p in drift)),
            str(sum(p["budget_exhausted_episodes"] for p in drift)),
            ("yes (" + ",".join(dead) + ")") if dead else ("no" if checked else "-"),
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("task/probe/alerts/out-of-budget: totals over the drift phases "
                 f"({', '.join(drift_names)}); deadlock: a re-opened tile's remembered-hole "
                 "entry never re-tried in the phase although, at an episode start, it made "
                 "the believed route longer than the same memory with it corrected")
    if report.get("paper"):
        lines.append("paper (Qwen3-30B agent, B=310): " + "; ".join(
            f"{m} " + " ".join(f"{p}={v}" for p, v in vals.items())
            for m, vals in report["paper"].items()))
    return "\n".join(lines)


def write_plot(report: dict[str, Any], path: Path) -> None:
    """Grouped bars: success rate per phase per method (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = report["phases"]
    methods = list(report["methods"])
    fig, ax = plt.subplots(figsize=(10.0, 4.5))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(phases))
    for k, name in enumerate(methods):
        ph = report["methods"][name]["phases"]
        xs = x + (k - (len(methods) - 1) / 2) * width
        ax.bar(xs, [p["success_rate"] for p in ph], width, label=name)
        for xi, p in zip(xs, ph, strict=True):
            if p["deadlock"]:
                ax.text(xi, 0.02, "deadlock", rotation=90, ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels(phases)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    sc = report["scenario"]
    kind = "slippery" if sc["is_slippery"] else "deterministic"
    ax.set_title(f"FrozenLake '{sc['name']}' ({kind}): success per phase, drift budget "
                 f"{sc['budget']['total']} steps incl. probes")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
