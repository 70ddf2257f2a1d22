"""Several ``bench jetrover`` runs of one world, summed: ``python -m
glove_ros.benchmarks.jetrover_summary RUN.json... [--out FILE.json]``.

Every mode of the runs (GLOVE async and sync, static, the oracle, each baseline and its
``+retest`` arm at the frozen settings the runs record) is reported after the first drift,
summed over the runs: successes, steps per task, stale goals, false alarms and looks (with
the exact Poisson 95 % interval of false alarms per 1,000 looks), steps relative to GLOVE
async, and per run the steps of GLOVE async, static and the best baseline (the fewest steps
among the baselines with the most successes, as ``bench jetrover`` picks it). Refuses runs
of different worlds or settings, and a seed twice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from glove_ros.benchmarks._suite_alarms import poisson_interval

_SAME = ("world", "config")  # what every summed run must share (the seed aside)


def _key(doc: dict[str, Any]) -> str:
    cfg = {k: v for k, v in doc.get("config", {}).items() if k != "seed"}
    return json.dumps([doc.get("world"), cfg, doc.get("baseline_tuning", {}).get("settings")],
                      sort_keys=True)


def summarize(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summed table (see the module doc); ValueError for mixed runs or a repeated seed."""
    if not docs:
        raise ValueError("no runs to summarize")
    if len({_key(d) for d in docs}) != 1:
        raise ValueError("the runs differ in world or settings; summarize one world's runs")
    seeds = [d["config"]["seed"] for d in docs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a seed appears twice: {seeds}")
    modes: dict[str, dict[str, float]] = {}
    targets: dict[str, dict[str, dict[str, int]]] = {}
    per_seed = []
    for d in docs:
        row: dict[str, Any] = {"seed": d["config"]["seed"]}
        phases = d.get("phases") or []
        first = phases[1]["start"] if len(phases) > 1 else None
        for name, m in d["modes"].items():
            dr = m["drift"]
            for ep in m.get("episodes", ()) if first is not None else ():
                if ep["episode"] >= first:  # where the steps after the first drift go
                    t = targets.setdefault(name, {}).setdefault(
                        ep.get("color", "?"), {"tasks": 0, "steps": 0, "stale_goals": 0})
                    t["tasks"] += 1
                    t["steps"] += ep["steps"]
                    t["stale_goals"] += bool(ep.get("stale_goal"))
            acc = modes.setdefault(name, {"tasks": 0, "successes": 0, "steps": 0.0,
                                          "stale_goals": 0, "false_alarms": 0, "looks": 0})
            acc["tasks"] += dr["drift_tasks"]
            acc["successes"] += dr["drift_successes"]
            acc["steps"] += dr["steps_per_task"] * dr["drift_tasks"]
            acc["stale_goals"] += dr["stale_goals"]
            acc["false_alarms"] += dr["false_alarms"]
            acc["looks"] += dr.get("looks", 0) or 0
            row[name] = dr["steps_per_task"]
        best = d.get("best_baseline", {}).get("bare", {}).get("name")
        row["best_baseline"] = best
        per_seed.append(row)
    glove = modes["async"]["steps"] / modes["async"]["tasks"]
    table = {}
    for name, a in modes.items():
        lo, hi = poisson_interval(int(a["false_alarms"]))
        k = a["looks"] / 1000.0 if a["looks"] else None
        table[name] = {
            "tasks": a["tasks"], "successes": a["successes"],
            "steps_per_task": round(a["steps"] / a["tasks"], 3),
            "steps_vs_glove_async": round(a["steps"] / a["tasks"] / glove, 3),
            "stale_goals": a["stale_goals"], "false_alarms": a["false_alarms"],
            "looks": a["looks"],
            "false_alarms_per_1000_looks": round(a["false_alarms"] / k, 2) if k else None,
            "ci95_per_1000_looks": [round(lo / k, 2), round(hi / k, 2)] if k else None}
        if name in targets:
            table[name]["by_target"] = dict(sorted(targets[name].items()))
    baselines = [n for n in table if n not in ("async", "sync", "static", "oracle")]
    bare = [n for n in baselines if not n.endswith("+retest")]
    best = min(bare, key=lambda n: (-table[n]["successes"], table[n]["steps_per_task"]),
               default=None)
    retest = [n for n in baselines if n.endswith("+retest")]
    best_retest = min(retest, key=lambda n: (-table[n]["successes"],
                                             table[n]["steps_per_task"]), default=None)
    return {"benchmark": "jetrover_summary", "world": docs[0]["world"], "seeds": seeds,
            "config": {k: v for k, v in docs[0]["config"].items() if k != "seed"},
            "baseline_tuning": docs[0].get("baseline_tuning"), "modes": table,
            "best_baseline_summed": best, "best_retest_summed": best_retest,
            "per_seed": per_seed}


def format_table(doc: dict[str, Any]) -> str:
    """The summary as text, one line per mode."""
    seeds = doc["seeds"]
    world = doc["world"].get("name", "?") if isinstance(doc["world"], dict) else doc["world"]
    out = [f"{world}: seeds {min(seeds)}-{max(seeds)} ({len(seeds)} runs), after the "
           "first drift, summed",
           f"{'mode':<26} {'success':>9} {'steps/task':>10} {'vs async':>8} {'stale':>5} "
           f"{'FA':>3} {'looks':>5} {'FA/1k looks [95%]':>20}"]
    for name, m in doc["modes"].items():
        ci = m["ci95_per_1000_looks"]
        fa = f"{m['false_alarms_per_1000_looks']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "-"
        out.append(f"{name:<26} {m['successes']:>4}/{m['tasks']:<4} {m['steps_per_task']:>10.3f} "
                   f"{m['steps_vs_glove_async']:>7.3f}x {m['stale_goals']:>5} "
                   f"{m['false_alarms']:>3} {m['looks']:>5} {fa:>20}")
    out.append(f"best baseline over the runs (most successes, then fewest steps): "
               f"{doc['best_baseline_summed'] or 'none run'}")
    cols = [n for n in ("async", "static", doc["best_baseline_summed"]) if n in doc["modes"]]
    out.append("per seed, steps per task after drift: " + "; ".join(
        f"{r['seed']}: " + ", ".join(f"{n} {r[n]:.2f}" for n in cols if n in r)
        for r in doc["per_seed"]))
    shown = [n for n in ("async", "static", doc["best_baseline_summed"],
                         doc.get("best_retest_summed"))
             if "by_target" in doc["modes"].get(n or "", {})]
    if shown:
        out.append("after the first drift, by target (tasks, steps, stale goals): " + "; ".join(
            f"{n}: " + ", ".join(f"{t} {v['tasks']}/{v['steps']}/{v['stale_goals']}"
                                 for t, v in doc["modes"][n]["by_target"].items())
            for n in shown))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module doc)."""
    ap = argparse.ArgumentParser(prog="python -m glove_ros.benchmarks.jetrover_summary",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="bench jetrover JSON documents of one world")
    ap.add_argument("--out", default="", help="write the summary JSON here")
    args = ap.parse_args(argv)
    try:
        doc = summarize([json.loads(Path(p).read_text(encoding="utf-8")) for p in args.runs])
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(doc))
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
