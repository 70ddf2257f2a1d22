"""Long-stream mode of ``glove-ros bench consolidation``: what the planner reads, and how
well it decides, over 1,000+ episodes.

The short scenarios measure *active memory* (every entry, including every fast write since
the last dock). The planner never reads all of that: for each task it reads the entries
retrieval ranks for the task text, assembled under its token budget
(:func:`~glove_ros.core.plan.plan_retrieval.rank_entries` then
:func:`~glove_ros.core.plan.plan_retrieval.assemble_prompt`, the same two calls as
:meth:`~glove_ros.core.plan.plan_memory.PlanMemoryStore.render`). This mode measures that
text (:func:`planner_read`) on a long drifting stream, per arm, side by side:

- **planner-read tokens / entries**: the size of the rendered memory for "find the <colour>
  block", under ``planner_budget_tokens``, before every episode;
- **success**: the planner's first goal, decided from exactly that text
  (:func:`~glove_ros.core.consolidate.acceptance.rehearse_find` on the read entries), is
  where the block really is (simulator truth); corridor accuracy as in the short mode;
- **memory size**: active memory tokens and entries (after each dock and per episode);
- **consolidation cost**: wall seconds spent at the dock (pruning for the baseline,
  consolidation runs for rule / llm), runs committed / rejected / aborted, LLM tokens.

Every ``checkpoint_every`` episodes a checkpoint row summarises the window of episodes that
follows the previous checkpoint (``windows``); every dock a finer row (``docks``) gives the
curve over stream length. The same episodes (memory-independent explorer) feed every arm.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from glove_ros.benchmarks import consolidation as base
from glove_ros.benchmarks._janus_report import _grid  # one text-table layout for the benches
from glove_ros.core.consolidate.acceptance import memory_tokens, rehearse_corridor, rehearse_find
from glove_ros.core.llm.runtime import approx_tokens
from glove_ros.core.plan.plan_entries import PlanEntry, slugify
from glove_ros.core.plan.plan_retrieval import RenderedMemory, assemble_prompt, rank_entries
from glove_ros.core.world.sim import WorldState

__all__ = ["decision_tokens", "planner_read", "run_stream", "stream_table",
           "write_stream_plot", "wilson"]

#: a budget no rendered subset reaches: re-reading the read entries keeps all of them
_ALL = 1 << 30


def planner_read(entries: Sequence[PlanEntry], query: str, budget_tokens: int,
                 count_tokens: Any = approx_tokens) -> tuple[RenderedMemory, list[PlanEntry]]:
    """What the planner reads for ``query``: the rendered memory under ``budget_tokens``
    (retrieval then assembly, as ``PlanMemoryStore.render``) and the read entries in the
    order the planner sees them."""
    r = assemble_prompt(rank_entries(entries, query), budget_tokens, count_tokens=count_tokens)
    by_name = {e.name: e for e in entries}
    return r, [by_name[n] for n in r.included]


def decision_tokens(seen: Sequence[PlanEntry], colour: str, waypoints: Sequence[str],
                    count_tokens: Any = approx_tokens) -> tuple[str | None, int]:
    """The first goal decided from the read entries ``seen`` (in reading order) and the
    tokens of the shortest read prefix that gives the same decision: the smallest budget at
    which this planner, with this ranking, decides the same (the whole read when memory
    names no usable place)."""
    first = rehearse_find(seen, colour, waypoints, budget_tokens=_ALL, count_tokens=count_tokens)
    k = len(seen)
    if first is not None:
        k = next(i for i in range(1, len(seen) + 1)
                 if rehearse_find(seen[:i], colour, waypoints, budget_tokens=_ALL,
                                  count_tokens=count_tokens) is not None)
    return first, assemble_prompt(seen[:k], None, count_tokens=count_tokens).tokens


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson 95% interval of a proportion k / n (``None`` for n == 0)."""
    if n <= 0:
        return None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)


def _mean(xs: Sequence[float]) -> float:
    return round(float(np.mean(xs)), 4) if len(xs) else 0.0


def run_stream(sc: base.Scenario, arms: Sequence[str] = ("writer_only", "dedup_recency", "rule"),
               checkpoint_every: int = 100, model_path: str = "",
               log: Any = None) -> dict[str, Any]:
    """Run the arms side by side on the long stream; returns the JSON document (keys:
    docs/consolidation.md, "Long streams")."""
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) \
            or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be an int >= 1 (got {checkpoint_every!r})")
    world = sc.world
    wps = list(world.waypoint_ids)
    watched = base._watched_edges(world)
    budget = sc.planner_budget_tokens
    state_arms: list[base._Arm] = []
    backend = None
    per: dict[str, list[dict[str, Any]]] = {}
    docks: list[dict[str, Any]] = []
    dock_s: dict[str, float] = {}
    mem_at: dict[int, dict[str, int]] = {}
    # the planner's own counter, memoised: entry lines recur in every episode's ranking
    count = functools.lru_cache(maxsize=1 << 16)(approx_tokens)
    t_start = time.perf_counter()
    try:
        state_arms, backend = base._make_arms(sc, arms, model_path)
        per = {a.name: [] for a in state_arms}
        dock_s = {a.name: 0.0 for a in state_arms}
        state = WorldState(world)
        rng = np.random.default_rng([sc.seed, 29])  # the short mode's stream for a seed
        colours = list(world.colors)
        counter = [0]

        def next_id() -> int:
            counter[0] += 1
            return counter[0]

        for ep in range(sc.episodes):
            state.advance(episode=ep)
            colour = colours[int(rng.integers(len(colours)))]
            start = world.dock if sc.start == "dock" else wps[int(rng.integers(len(wps)))]
            truth = base._truth_location(state, colour)
            query = f"find the {slugify(colour)} block"
            for arm in state_arms:
                entries = arm.store.entries()
                read, seen = planner_read(entries, query, budget, count)
                # the decision from exactly the read text (the same as rehearse_find on the
                # whole memory under the budget: same ranking, same assembly)
                first, need = decision_tokens(seen, colour, wps, count)
                corr = [rehearse_corridor(entries, a, b, budget_tokens=budget,
                                          count_tokens=count)
                        == state.is_blocked(a, b) for a, b in watched]
                per[arm.name].append({
                    "success": first == truth, "read_tokens": read.tokens,
                    "read_entries": len(read.included), "decision_tokens": need,
                    "corridors_ok": int(sum(corr)), "corridors": len(corr),
                    "entries": len(entries)})
            outcome = base.explore(state, world, start, colour, f"ep{ep:04d}", rng,
                                   sc.max_drives, sc.miss_rate, next_id)
            for arm in state_arms:
                t0 = time.perf_counter()
                arm.writer.write(outcome)
                arm.write_s += time.perf_counter() - t0
            docked = (ep + 1) % sc.every_k == 0
            if docked:
                row: dict[str, Any] = {"episodes": ep + 1}
                for arm in state_arms:
                    before = arm.store.entries()
                    t0 = time.perf_counter()
                    base._dock(arm, sc, ep, None)
                    dt = time.perf_counter() - t0
                    dock_s[arm.name] += dt
                    entries = arm.store.entries()
                    since = per[arm.name][ep + 1 - sc.every_k: ep + 1]
                    row[arm.name] = {
                        "memory_tokens_before": memory_tokens(before),
                        "memory_tokens": memory_tokens(entries), "memory_entries": len(entries),
                        "read_tokens": _mean([e["read_tokens"] for e in since]),
                        "decision_tokens": _mean([e["decision_tokens"] for e in since]),
                        "success": _mean([float(e["success"]) for e in since]),
                        "dock_s": round(dt, 4)}
                docks.append(row)
            if (ep + 1) % checkpoint_every == 0 or ep + 1 == sc.episodes:
                mem_at[ep + 1] = {
                    a.name: (docks[-1][a.name]["memory_tokens"] if docked
                             else memory_tokens(a.store.entries())) for a in state_arms}
            if log is not None and (ep + 1) % checkpoint_every == 0:
                log(f"stream: {ep + 1}/{sc.episodes} episodes "
                    f"({time.perf_counter() - t_start:.0f} s)")
        wall = time.perf_counter() - t_start
        doc = _document(sc, state_arms, per, docks, mem_at, dock_s, checkpoint_every, watched,
                        wall, model_path if backend else None)
    finally:
        for arm in state_arms:
            arm.store.close()
        if backend is not None:
            backend.close()
    return doc


def _window(eps: Sequence[Mapping[str, Any]],
            docks: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """Means over a run of episodes (and the docks that close inside it) for one arm."""
    corr_n = sum(e["corridors"] for e in eps)
    k = sum(1 for e in eps if e["success"])
    after = [d[name]["memory_tokens"] for d in docks]
    before = [d[name]["memory_tokens_before"] for d in docks]
    return {
        "episodes": len(eps),
        "success": _mean([float(e["success"]) for e in eps]),
        "success_ci95": wilson(k, len(eps)),
        "read_tokens": _mean([e["read_tokens"] for e in eps]),
        "read_entries": _mean([e["read_entries"] for e in eps]),
        "decision_tokens": _mean([e["decision_tokens"] for e in eps]),
        "corridor_accuracy": round(sum(e["corridors_ok"] for e in eps) / corr_n, 4)
        if corr_n else None,
        "memory_entries": _mean([e["entries"] for e in eps]),
        "memory_tokens_after_dock": _mean(after) if after else None,
        "memory_tokens_before_dock": _mean(before) if before else None,
        "dock_s": round(sum(d[name]["dock_s"] for d in docks), 4),
    }


def _in(docks: Sequence[Mapping[str, Any]], lo: int, hi: int) -> list[Mapping[str, Any]]:
    """The docks after an episode of [lo, hi)."""
    return [d for d in docks if lo < d["episodes"] <= hi]


def _summary(arm: base._Arm, eps: Sequence[Mapping[str, Any]],
             docks: Sequence[Mapping[str, Any]], final_tokens: int,
             dock_total: float) -> dict[str, Any]:
    n = len(eps)
    runs = arm.runs
    st = {s: sum(1 for r in runs if r["status"] == s) for s in
          ("committed", "rejected", "aborted", "cancelled", "unchanged", "skipped")}
    return {
        "all": _window(eps, _in(docks, 0, n), arm.name),
        "later_half": _window(eps[n // 2:] or eps, _in(docks, n // 2, n), arm.name),
        "final_memory_tokens": final_tokens,
        "final_memory_entries": len(arm.store.entries()),
        "dock_s_total": round(dock_total, 3),
        "dock_ms_per_episode": round(1000 * dock_total / max(1, n), 3),
        "write_ms_per_episode": round(1000 * arm.write_s / max(1, n), 3),
        "runs": len(runs), **{f"runs_{k}": v for k, v in st.items()},
        "llm_tokens": int(sum(r["llm_tokens"] for r in runs)),
    }


def _paired(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Episodes one arm decides right and the other wrong (same tasks: a paired count)."""
    here = sum(1 for x, y in zip(a, b, strict=True) if x["success"] and not y["success"])
    there = sum(1 for x, y in zip(a, b, strict=True) if y["success"] and not x["success"])
    return {"right_only_here": here, "right_only_there": there}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _document(sc: base.Scenario, arms: Sequence[base._Arm],
              per: Mapping[str, Sequence[Mapping[str, Any]]], docks: list[dict[str, Any]],
              mem_at: Mapping[int, Mapping[str, int]], dock_s: Mapping[str, float],
              every: int, watched: Sequence[tuple[str, str]], wall: float,
              model: str | None) -> dict[str, Any]:
    n = sc.episodes
    windows = []
    for lo in range(0, n, every):
        hi = min(n, lo + every)
        row: dict[str, Any] = {"from_episode": lo, "to_episode": hi}
        for a in arms:
            row[a.name] = {
                **_window(per[a.name][lo:hi], _in(docks, lo, hi), a.name),
                "memory_tokens_at_end": mem_at[hi][a.name],
                "runs_committed": sum(1 for r in a.runs if r["status"] == "committed"
                                      and lo <= r["after_episode"] < hi),
                "runs_rejected": sum(1 for r in a.runs if r["status"] == "rejected"
                                     and lo <= r["after_episode"] < hi)}
        windows.append(row)
    summaries = {a.name: _summary(a, per[a.name], docks, mem_at[n][a.name], dock_s[a.name])
                 for a in arms}
    ratios: dict[str, Any] = {}
    half = n // 2
    for ref, tag in (("dedup_recency", "baseline"), ("writer_only", "writer_only")):
        if ref not in summaries:
            continue
        rs = summaries[ref]["later_half"]
        for a in arms:
            if a.name in (ref, "writer_only"):
                continue
            s = summaries[a.name]["later_half"]
            for key in ("read_tokens", "decision_tokens", "memory_tokens_after_dock",
                        "memory_tokens_before_dock"):
                ratios[f"{a.name}_{key}_vs_{tag}"] = _ratio(rs[key], s[key])
            ratios[f"{a.name}_later_success_minus_{tag}"] = round(
                s["success"] - rs["success"], 4)
            ratios[f"{a.name}_later_paired_vs_{tag}"] = _paired(per[a.name][half:],
                                                                per[ref][half:])
    w = sc.world
    return {
        "benchmark": "consolidation",
        "mode": "stream",
        "scenario": {
            "name": sc.name, "file": sc.file, "description": sc.description, "world": w.name,
            "episodes": n, "seed": sc.seed, "start": sc.start, "max_drives": sc.max_drives,
            "miss_rate": sc.miss_rate, "every_k": sc.every_k, "checkpoint_every": every,
            "planner_budget_tokens": sc.planner_budget_tokens,
            "baseline_budget_tokens": base._baseline_budget(sc),
            "drift_events": [{"type": e.type, "episode": e.episode} for e in w.drift_events()],
            "watched_corridors": [list(e) for e in watched],
        },
        "config": {
            "rule": dict(base._rule_config(sc).__dict__),
            "llm": ({**dict(sc.llm), "model": base._model_name(model)}
                    if model is not None else None),
        },
        "wall_s": round(wall, 2),
        "arms": {a.name: {"summary": summaries[a.name], "runs": a.runs} for a in arms},
        "ratios": ratios,
        "windows": windows,
        "docks": docks,
    }


# ------------------------------------------------------------------------------ output


def _ci(c: Sequence[float] | None) -> str:
    return "-" if not c else f"[{c[0]:.1%}, {c[1]:.1%}]"


def _f(x: float | None, fmt: str = ".0f") -> str:
    return "-" if x is None else format(x, fmt)


def stream_table(doc: Mapping[str, Any]) -> str:
    """The tables the CLI prints in stream mode: per arm, then the curve per checkpoint."""
    sc = doc["scenario"]
    lines = [f"consolidation stream '{sc['name']}' on world {sc['world']}: {sc['episodes']} "
             f"tasks (seed {sc['seed']}), {len(sc['drift_events'])} drift events, dock every "
             f"{sc['every_k']}, planner budget {sc['planner_budget_tokens']} tokens, "
             f"checkpoint every {sc['checkpoint_every']} ({doc['wall_s']:.0f} s)"]
    rows = [["arm", "success", "later half", "95% CI", "read tok", "decision tok",
             "read entries", "corridors", "memory after dock", "before dock", "final memory",
             "dock s", "runs c/r/a"]]
    for name, a in doc["arms"].items():
        s = a["summary"]
        al, lh = s["all"], s["later_half"]
        rows.append([
            name, f"{al['success']:.1%}", f"{lh['success']:.1%}", _ci(lh["success_ci95"]),
            _f(lh["read_tokens"]), _f(lh["decision_tokens"]), _f(lh["read_entries"], ".1f"),
            _f(lh["corridor_accuracy"], ".1%"), _f(lh["memory_tokens_after_dock"]),
            _f(lh["memory_tokens_before_dock"]), str(s["final_memory_tokens"]),
            f"{s['dock_s_total']:.1f}",
            f"{s['runs_committed']}/{s['runs_rejected']}/{s['runs_aborted']}"])
    lines += _grid(rows, left=1)
    lines.append("columns after 'success' are means over the later half of the stream")
    r = doc["ratios"]
    for name in doc["arms"]:
        p = r.get(f"{name}_later_paired_vs_baseline")
        if p is None:
            continue
        lines.append(
            f"{name} vs dedup_recency, later half: read tokens "
            f"{_f(r[f'{name}_read_tokens_vs_baseline'], '.2f')}x, decision tokens "
            f"{_f(r[f'{name}_decision_tokens_vs_baseline'], '.2f')}x, memory after dock "
            f"{_f(r[f'{name}_memory_tokens_after_dock_vs_baseline'], '.2f')}x smaller; success "
            f"{r[f'{name}_later_success_minus_baseline']:+.1%} (right only here "
            f"{p['right_only_here']}, only in the baseline {p['right_only_there']} episodes)")
    names = list(doc["arms"])
    rows = [["episodes"] + [f"{n} {k}" for n in names
                            for k in ("read", "decide", "success", "memory")]]
    for w in doc["windows"]:
        rows.append([f"{w['from_episode']}-{w['to_episode']}"] + [
            x for n in names for x in (
                _f(w[n]["read_tokens"]), _f(w[n]["decision_tokens"]),
                f"{w[n]['success']:.0%}", str(w[n]["memory_tokens_at_end"]))])
    lines.append("per checkpoint window: read = mean planner-read tokens, decide = mean tokens "
                 "of the read prefix that decides, success = first goal right, memory = "
                 "active tokens at the window's end")
    lines += _grid(rows, left=1)
    lines.append("read = the memory text the planner is given for 'find the <colour> block' "
                 "(ranked for the task, assembled under its budget); decision tok = the "
                 "smallest budget giving the same first goal; success = that goal is where the "
                 "block is; 95% CI = Wilson interval of the later-half success")
    return "\n".join(lines)


def write_stream_plot(doc: Mapping[str, Any], path: Path, smooth: int = 5) -> None:
    """Active memory (log), planner-read tokens and success over the stream, per arm
    (dock-level points; success averaged over ``smooth`` docks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(8.0, 8.5), sharex=True)
    styles = {"writer_only": ("-", "tab:gray"), "rule": ("-", "tab:blue"),
              "llm": ("--", "tab:orange"), "dedup_recency": (":", "tab:green")}
    docks = doc["docks"]
    x = np.array([d["episodes"] for d in docks])
    for name in doc["arms"]:
        ls, col = styles.get(name, ("-", None))
        ax1.plot(x, [max(1, d[name]["memory_tokens"]) for d in docks], ls, color=col,
                 label=name)
        ax2.plot(x, [d[name]["read_tokens"] for d in docks], ls, color=col, label=name)
        ax2.plot(x, [d[name]["decision_tokens"] for d in docks], ls, color=col, alpha=0.45,
                 linewidth=0.9)
        ok = np.array([d[name]["success"] for d in docks])
        roll = [ok[max(0, i - smooth + 1): i + 1].mean() for i in range(len(ok))]
        ax3.plot(x, roll, ls, color=col, label=name)
    sc = doc["scenario"]
    ax2.axhline(sc["planner_budget_tokens"], color="black", linewidth=0.8, linestyle="-.")
    ax1.set_yscale("log")
    ax1.set_ylabel("active memory tokens\n(after each dock)")
    ax2.set_ylabel("planner-read tokens\n(mean per task; faint:\nthe deciding prefix)")
    ax3.set_ylabel(f"success\n(mean, {smooth * sc['every_k']} episodes)")
    ax3.set_ylim(-0.05, 1.05)
    ax3.set_xlabel("episodes in the stream")
    for ax in (ax1, ax2, ax3):
        for e in sc["drift_events"]:
            if e["episode"] is not None:
                ax.axvline(e["episode"], color="red", linestyle="--", linewidth=0.6)
    ax1.legend(fontsize=8, loc="upper left")
    ax1.set_title(f"consolidation stream '{sc['name']}' ({sc['world']}, seed {sc['seed']}): "
                  f"dock every {sc['every_k']}, budget {sc['planner_budget_tokens']} tokens "
                  "(red: drift)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
