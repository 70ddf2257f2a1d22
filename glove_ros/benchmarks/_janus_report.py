"""Janus benchmark: the printed comparison table and the Pareto plot.

Reads only the JSON-ready document :func:`glove_ros.benchmarks.janus.run_benchmark`
returns, so it is separate from everything that produces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "format_per_kind",
    "format_table",
    "write_plot",
]


def _ci(row: Mapping[str, Any], which: str) -> str:
    g = row.get(f"{which}_points_vs_no_gate")
    if not g:
        return "-"
    ci = g["ci95"]
    return f"{g['mean']:+.1f}" + (f" [{ci[0]:+.1f},{ci[1]:+.1f}]" if ci else "")


def format_table(doc: Mapping[str, Any]) -> str:
    """The comparison table printed by the CLI."""
    sc = doc["scenario"]
    upd = sc["updater"]
    noise = (", ".join(f"{k[:-5]} {v:g}" for k, v in upd.items() if k.endswith("_rate"))
             if upd["kind"] == "rule" else "LLM reflections, no injected noise")
    runs = len(sc["worlds"]) * len(sc["seeds"])
    lines = [f"janus '{sc['name']}' on {', '.join(w['name'] for w in doc['worlds'])}: "
             f"{sc['episodes']} tasks x {len(sc['seeds'])} seed(s) per world ({runs} runs), "
             f"planner reads both memories, updater {upd['kind']} ({noise}), step limit "
             f"{sc['max_steps']}, tau {sc['janus']['tau']:g}"]
    injected = upd["kind"] == "rule"
    head = ["arm", "trigger", "later", "held-out", "find", "fetch", "goto", "corr",
            "new robot", "new goto", "new corr", "cmp", "x always", "harm in", "clean rej",
            "prior/task", "gain later [95%]", "gain held-out [95%]",
            "gain unrehearsed [95%]", "gain new robot [95%]", "kept"]
    rows = [head]
    comp = doc.get("comparison", {})
    for label, a in doc["arms"].items():
        g, h, c = a["gate"], a["heldout"], comp.get(label, {})
        rows.append([
            label, a["resolved_trigger"], f"{a['later']['success_rate']:.1%}",
            f"{h['all']:.1%}", f"{h['find']:.1%}", f"{h['fetch']:.1%}", f"{h['goto']:.1%}",
            f"{h['corridor']:.1%}", f"{h['cold_find']:.1%}", f"{h['cold_goto']:.1%}",
            f"{h['cold_corridor']:.1%}", f"{g['comparisons']:g}",
            f"{c['comparisons_vs_always']:.2f}" if "comparisons_vs_always" in c else "-",
            f"{g['harmful_deployed']:g}/{g['harmful_proposed']:g}" if injected else "n/a",
            f"{g['clean_rejected']:g}" if injected else "n/a",
            f"{a['prior_used_per_task']:.2f}", _ci(c, "later"), _ci(c, "heldout"),
            _ci(c, "unrehearsed"), _ci(c, "new_robot"),
            (f"{c['new_robot_share_of_always_gain']:.0%}"
             if "new_robot_share_of_always_gain" in c else "-"),
        ])
    lines += _grid(rows, 2)
    p = doc["paper"]
    lines.append(f"paper: +{p['accuracy_gain_points'][0]} to +{p['accuracy_gain_points'][1]} "
                 "points average accuracy with Janus; momentum trigger: fewer comparisons than "
                 "always-compare at similar or better accuracy")
    lines.append("later: task success in the second half of each run; held-out: questions "
                 "from start waypoints tasks never start from (find, fetch, go-to, corridor, "
                 "find by a new robot with empty experience memory), "
                 "simulator truth; cmp: comparisons per run; harm in: injected harmful "
                 "candidates deployed / proposed; prior/task: first options plan memory "
                 "changed per task; gain: paired points vs never over runs, 95% t-interval; "
                 "kept: share of always-compare's new-robot gain; new goto / new corr: a new "
                 "robot's routes and corridor answers from plan memory alone; unrehearsed: "
                 "question types the gate's rehearsal never asks (fetch, go-to, corridor, "
                 "new goto, new corr)")
    if doc.get("per_kind"):
        lines.append("")
        lines.append(format_per_kind(doc))
    return "\n".join(lines)


def _grid(rows: list[list[str]], left: int) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(x.ljust(w) if i < left else x.rjust(w)
                             for i, (x, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _gain(g: Mapping[str, Any] | None) -> str:
    if not g:
        return "-"
    ci = g.get("ci95")
    return f"{g['mean']:+.1f}" + (f" [{ci[0]:+.1f},{ci[1]:+.1f}]" if ci else "")


def format_per_kind(doc: Mapping[str, Any]) -> str:
    """The per-error-kind table: each kind injected alone, every per-kind arm."""
    pk = doc["per_kind"]
    head = ["kind", "arm", "proposed", "exp sees", "sees error", "ev against", "compared",
            "blocked", "harm deployed", "helpful blocked", "gain later", "gain held-out",
            "gain unrehearsed", "gain new robot"]
    rows = [head]
    for kind, block in pk.items():
        harm = block.get("harm_vs_clean")
        if harm:
            rows.append([kind, "(no gate vs clean)", "", "", "", "", "", "", "", "",
                         _gain(harm["later"]), _gain(harm["heldout"]),
                         _gain(harm["unrehearsed"]), _gain(harm["new_robot"])])
        for label, a in block["arms"].items():
            g = a.get("gain_vs_never", {})
            rows.append([kind, label, f"{a['proposed']:g}", f"{a['experience_sees']:g}",
                         f"{a['experience_sees_error']:g}",
                         f"{a['evidence_against']:g}", f"{a['compared']:g}",
                         f"{a['blocked']:g}", f"{a['harmful_deployed']:g}",
                         f"{a['helpful_blocked']:g}", _gain(g.get("later")),
                         _gain(g.get("heldout")), _gain(g.get("unrehearsed")),
                         _gain(g.get("new_robot"))])
    lines = ["per error kind (each kind injected alone, the same coin flips; means per run):"]
    lines += _grid(rows, 2)
    lines.append(" ".join((
        "proposed: candidates carrying the kind; exp sees: of them, experience memory held",
        "trusted evidence about what they change; sees error: ... about what the injected",
        "error changes beyond the rule updater's own edits; ev against: the evidence check",
        "spoke against them; blocked: rejected by the gate; harm deployed: deployed with the",
        "error; helpful blocked: clean candidates rejected in the same runs; gains: paired",
        "points vs never [95%]; (no gate vs clean): what the kind costs with no gate")))
    return "\n".join(lines)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """The Pareto view: gain over no gate (later-half success; held-out accuracy; new-robot
    find) against comparisons per run, every trigger, 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    comp = doc.get("comparison", {})
    for ax, which, title in ((axes[0], "later", "task success, later half"),
                             (axes[1], "heldout", "held-out questions, all kinds"),
                             (axes[2], "new_robot", "held-out find, new robot")):
        for label, a in doc["arms"].items():
            g = comp.get(label, {}).get(f"{which}_points_vs_no_gate")
            if a["trigger"] == "never":
                ax.plot(0, 0, "ks")
                ax.annotate("never", (0, 0), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
                continue
            if not g:
                continue
            x = a["gate"]["comparisons"]
            ci = g["ci95"] or [g["mean"], g["mean"]]
            ax.errorbar(x, g["mean"], yerr=[[g["mean"] - ci[0]], [ci[1] - g["mean"]]],
                        fmt="D" if a["trigger"] == "clean" else "o", capsize=3)
            ax.annotate(label, (x, g["mean"]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("comparisons per run")
        ax.set_ylabel("points vs no gate (95% CI)")
        ax.set_title(title, fontsize=10)
    sc = doc["scenario"]
    fig.suptitle(f"Janus '{sc['name']}' on the real wiring ({len(sc['worlds'])} worlds x "
                 f"{len(sc['seeds'])} seeds): gain vs comparisons", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
