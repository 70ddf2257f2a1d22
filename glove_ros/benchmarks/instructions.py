"""Open-instruction parsing on a held-out phrasing set: the grammar's share and the LLM's.

``glove-ros bench instructions [--grammar-only] [--model NAME|PATH] [--json]`` reads every
case of ``bench/scenarios/instructions_heldout.yaml`` (a map, colours, objects, and texts
with their expected typed plans, refusals or clarifying questions, written by hand after the
parser and its prompts were frozen; see the file's header) through
:func:`glove_ros.core.plan.instructions.understand_instruction` exactly as the planner node
does (robot at the map's ``at`` place), and scores the result:

* a plan is right when its steps (as :meth:`~glove_ros.core.plan.instructions.Step.describe`
  words them, conditionals as "if <condition>: <then>[, else <otherwise>]") are the expected
  ones in order and its avoided places and corridors are the expected sets;
* a refusal is right when the result is refused and names every expected word (an unknown
  name, the constraint that cuts a step off);
* a clarification is right when the result asks back and offers exactly the expected options.

Each case is routed as the robot routes it: the **grammar** (the request grammar or the
instruction grammar, no model call) or the **LLM** (the model was asked). Reported: accuracy
overall, per route (the grammar's share and accuracy, the LLM's share and accuracy), per
kind of case, refusals and clarifications right, wall latency p50/p95 per route, and for
the LLM the replies that ran out of time (``--timeout``: by default the planner's
``llm.timeout_s``, 20 s). ``--grammar-only`` runs no model: the cases the grammar hands on
are counted, not scored. The model is loaded as the planner loads it (``llm.n_ctx`` 2048,
``--threads`` 2 like the robot's budget). Writes ``bench/results/instructions_<model>.json``
(+ ``.png``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.benchmarks import write_results

DEFAULT_SET = "bench/scenarios/instructions_heldout.yaml"


class CountingLlm:
    """Stands in front of the parser's LLM: counts the calls and keeps the last result
    (``llm`` None: answers every call with a failure, as a robot without a model)."""

    def __init__(self, llm: Any = None) -> None:
        self.llm, self.calls, self.last = llm, 0, None

    def complete_json(self, messages: Sequence[Any], schema: Mapping[str, Any],
                      max_tokens: int | None = None, **kw: Any) -> Any:
        """Count the call and pass it on (or fail it without a model)."""
        self.calls += 1
        if self.llm is None:
            from glove_ros.core.llm.runtime import LlmResult

            self.last = LlmResult(None, "", 0, "no LLM (--grammar-only)", finish_reason="error")
        else:
            self.last = self.llm.complete_json(messages, schema, max_tokens, **kw)
        return self.last


def load_set(path: str | Path) -> dict[str, Any]:
    """The held-out set: ``map`` (dock, waypoints, corridors, at), colours, objects, cases.
    ValueError naming what is wrong with the file."""
    import yaml

    from glove_ros.core.plan.agent_types import WorldMap

    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not all(k in doc for k in ("map", "cases")):
        raise ValueError(f"{path}: expected keys 'map' and 'cases'")
    m = doc["map"]
    wps = list(m["waypoints"])
    world_map = WorldMap({w: (float(i), 0.0, 0.0) for i, w in enumerate(wps)},
                         {(a, b): 1.0 for a, b in m["corridors"]}, str(m["dock"]))
    for n, c in enumerate(doc["cases"], 1):
        kinds = [k for k in ("steps", "refuse", "clarify") if k in c]
        if "text" not in c or len(kinds) != 1:
            raise ValueError(f"{path}: case {n} needs 'text' and one of steps / refuse / "
                             f"clarify (got {sorted(c)})")
    return {"map": world_map, "at": str(m.get("at", "")),
            "colours": tuple(doc.get("colours", ())), "objects": tuple(doc.get("objects", ())),
            "cases": doc["cases"]}


def _item_line(it: Any) -> str:
    from glove_ros.core.plan.instructions import Step

    if isinstance(it, Step):
        return it.describe()
    other = f", else {it.otherwise.describe()}" if it.otherwise else ""
    return f"if {it.condition.describe()}: {it.then.describe()}{other}"


def judge(case: Mapping[str, Any], res: Any) -> tuple[bool, str, str]:
    """(right, what kind of case, what the parser gave, in words)."""
    from glove_ros.core.plan.instructions import Clarify, Plan, Refused

    if isinstance(res, Plan):
        inst = res.instruction
        got = {"steps": [_item_line(it) for it in inst.items],
               "avoid": sorted(inst.avoid_waypoints),
               "avoid_corridors": sorted(f"{a}-{b}" for a, b in inst.avoid_corridors)}
        said = "; ".join(got["steps"]) + (
            f" [avoid {', '.join(got['avoid'] + got['avoid_corridors'])}]"
            if got["avoid"] or got["avoid_corridors"] else "")
    elif isinstance(res, Clarify):
        said = f"asks: {res.question} {list(res.options)}"
    elif isinstance(res, Refused):
        said = f"refused: {res.reason}"
    else:  # pragma: no cover - understand_instruction returns one of the three
        said = repr(res)
    if "refuse" in case:
        ok = isinstance(res, Refused) and all(str(w).lower() in res.reason.lower()
                                              for w in case["refuse"])
        return ok, "refuse", said
    if "clarify" in case:
        ok = isinstance(res, Clarify) and sorted(res.options) == sorted(case["clarify"])
        return ok, "clarify", said
    ok = isinstance(res, Plan) and got == {
        "steps": list(case["steps"]), "avoid": sorted(case.get("avoid", [])),
        "avoid_corridors": sorted(case.get("avoid_corridors", []))}
    return ok, "plan", said


def _pct(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def _share(rows: list[dict[str, Any]], n_all: int, scored: bool = True) -> dict[str, Any]:
    right = sum(r["right"] for r in rows) if scored else None
    lat = [r["latency_s"] for r in rows]
    return {"cases": len(rows), "share": len(rows) / n_all if n_all else 0.0,
            "right": right, "accuracy": (right / len(rows) if rows and scored else None),
            "latency_p50_s": _pct(lat, 0.5), "latency_p95_s": _pct(lat, 0.95)}


def run(data: Mapping[str, Any], llm: Any = None, *, scored_llm: bool = True,
        progress: Any = None) -> dict[str, Any]:
    """Every case through the parser; the per-case rows and the summary."""
    from glove_ros.core.plan.instructions import understand_instruction

    rows = []
    for n, case in enumerate(data["cases"], 1):
        proxy = CountingLlm(llm)
        t0 = time.monotonic()
        res = understand_instruction(str(case["text"]), data["colours"], data["map"], proxy,
                                     data["objects"], data["at"])
        dt = time.monotonic() - t0
        right, kind, said = judge(case, res)
        route = "llm" if proxy.calls else "grammar"
        last = proxy.last
        rows.append({"text": case["text"], "kind": kind, "route": route, "right": right,
                     "got": said, "latency_s": dt, "llm_calls": proxy.calls,
                     "llm_error": getattr(last, "error", None) if last is not None else None,
                     "llm_finish": getattr(last, "finish_reason", "") if last is not None
                     else ""})
        if progress is not None:
            progress(f"{n}/{len(data['cases'])} [{route}] {'ok ' if right else 'BAD'} "
                     f"{case['text']!r} -> {said} ({dt:.1f}s)")
    n_all = len(rows)
    by_route = {r: [x for x in rows if x["route"] == r] for r in ("grammar", "llm")}
    llm_rows = by_route["llm"]
    scored = [x for x in rows if x["route"] == "grammar" or scored_llm]
    summary = {
        "cases": n_all,
        "accuracy": (sum(x["right"] for x in scored) / len(scored)) if scored else None,
        "accuracy_all_cases": sum(x["right"] for x in rows) / n_all if n_all else None,
        "grammar": _share(by_route["grammar"], n_all),
        "llm": {**_share(llm_rows, n_all, scored_llm),
                "timeouts": sum(1 for x in llm_rows if x["llm_finish"] == "timeout"),
                "llm_errors": sum(1 for x in llm_rows if x["llm_error"])},
        "by_kind": {k: {"cases": len(v), "right": sum(x["right"] for x in v)}
                    for k in ("plan", "refuse", "clarify")
                    for v in [[x for x in rows if x["kind"] == k]]},
        "latency_p50_s": _pct([x["latency_s"] for x in rows], 0.5),
        "latency_p95_s": _pct([x["latency_s"] for x in rows], 0.95),
    }
    if llm_rows:
        summary["llm"]["latency_mean_s"] = statistics.fmean(x["latency_s"] for x in llm_rows)
    return {"summary": summary, "cases": rows}


def warm_up(llm: Any, data: Mapping[str, Any]) -> float:
    """Two untimed calls before the cases, one per prompt (the instruction plan's and the
    single request's): their fixed prefixes enter llama.cpp's cache, as on a robot that has
    parsed before. Returns the seconds they took (the cold-prefix cost)."""
    from glove_ros.core.plan.instructions_llm import plan_messages, plan_schema
    from glove_ros.core.plan.tasks import request_messages, request_schema

    wm, c, o = data["map"], data["colours"], data["objects"]
    wps, edges = wm.waypoint_ids, tuple(wm.edges)
    t0 = time.monotonic()
    llm.complete_json(plan_messages("wait", c, wps, o, edges), plan_schema(c, wps, o, edges),
                      max_tokens=4, timeout_s=600.0)
    llm.complete_json(request_messages("wait", c, wps, o), request_schema(c, wps, o),
                      max_tokens=4, timeout_s=600.0)
    return round(time.monotonic() - t0, 2)


def _fmt(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.2f}"


def _table(doc: Mapping[str, Any]) -> str:
    s = doc["summary"]
    lines = [f"instructions: {s['cases']} held-out cases ({doc['set']}), model "
             f"{doc['model']} ({doc['threads']} threads, timeout {doc['timeout_s']:g} s, load "
             f"{doc['load_avg']})",
             f"{'route':<10}{'cases':>6}{'share':>8}{'right':>7}{'accuracy':>10}"
             f"{'p50 s':>8}{'p95 s':>8}"]
    for r in ("grammar", "llm"):
        x = s[r]
        lines.append(f"{r:<10}{x['cases']:>6}{_fmt(x['share'], True):>8}"
                     f"{'-' if x['right'] is None else x['right']:>7}"
                     f"{_fmt(x['accuracy'], True):>10}{_fmt(x['latency_p50_s']):>8}"
                     f"{_fmt(x['latency_p95_s']):>8}")
    lines.append(f"{'all':<10}{s['cases']:>6}{'100%':>8}{'':>7}"
                 f"{_fmt(s['accuracy'], True):>10}{_fmt(s['latency_p50_s']):>8}"
                 f"{_fmt(s['latency_p95_s']):>8}")
    lines.append("by kind: " + ", ".join(f"{k} {v['right']}/{v['cases']}"
                                         for k, v in s["by_kind"].items())
                 + f"; LLM timeouts {s['llm']['timeouts']}, LLM errors {s['llm']['llm_errors']}")
    if doc.get("grammar_only"):
        lines.append("grammar only: the LLM's cases were not run (counted in 'all' as wrong "
                     "in accuracy_all_cases only)")
    bad = [c for c in doc["cases"] if not c["right"]]
    for c in bad:
        lines.append(f"  wrong [{c['route']}] {c['text']!r} -> {c['got']}")
    return "\n".join(lines)


def _plot(doc: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["summary"]
    names = ["grammar", "llm"]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(names, [s[r]["accuracy"] or 0.0 for r in names], color=["#4c72b0", "#dd8452"])
    for i, r in enumerate(names):
        ax.text(i, 0.02, f"{s[r]['cases']} cases", ha="center")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(f"held-out instructions ({doc['model']})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``glove-ros bench instructions``."""
    parser.add_argument("--set", default=DEFAULT_SET, help=f"held-out set (default {DEFAULT_SET})")
    parser.add_argument("--grammar-only", action="store_true",
                        help="run no model: count the cases the grammar hands to the LLM")
    parser.add_argument("--model", default="", help="model name or GGUF path (default: the "
                        "registry's default, qwen2.5-coder-1.5b q4_k_m)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds one LLM parse may take (default 20: the planner's "
                             "llm.timeout_s)")
    parser.add_argument("--n-ctx", type=int, default=2048,
                        help="context window (default 2048: the planner's llm.n_ctx)")
    parser.add_argument("--prefix-cache-mb", type=int, default=128, metavar="MB",
                        help="RAM for saved prompt prefixes (default 128: config/jetrover.yaml's "
                             "llm.prefix_cache_mb), so the plan and request prompts' fixed "
                             "prefixes stay evaluated when they alternate")
    parser.add_argument("--out", default="bench/results", help="output folder")
    parser.add_argument("--json", action="store_true", help="print the JSON, not the table")


def main(args: argparse.Namespace) -> int:
    """Entry point of ``glove-ros bench instructions``."""
    try:
        data = load_set(args.set)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read {args.set}: {exc}")
        return 2
    llm, name, load_s, warm_s = None, "grammar", 0.0, None
    if not args.grammar_only:
        from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError

        t0 = time.monotonic()
        try:
            llm = LlamaBackend(LlmConfig(model_path=args.model, n_ctx=args.n_ctx,
                                         n_threads=args.threads, timeout_s=args.timeout,
                                         prefix_cache_mb=args.prefix_cache_mb))
            llm.load()
        except (LlmLoadError, ValueError) as exc:
            print(f"error: {exc}")
            return 2
        load_s, name = time.monotonic() - t0, Path(llm.model_path).name
        warm_s = warm_up(llm, data)
    t0 = time.monotonic()
    out = run(data, llm, scored_llm=llm is not None,
              progress=None if args.json else (lambda s: print(s, flush=True)))
    doc = {"benchmark": "instructions", "set": str(args.set), "model": name,
           "grammar_only": llm is None, "threads": args.threads, "timeout_s": args.timeout,
           "n_ctx": args.n_ctx, "load_avg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
           "cpus": os.cpu_count(), "load_s": load_s, "warmup_s": warm_s,
           "prefix_cache_mb": args.prefix_cache_mb if llm is not None else None,
           "wall_s": time.monotonic() - t0, **out}
    stem = "instructions_" + name.removesuffix(".gguf").lower().replace(".", "_") + (
        f"_t{args.timeout:g}" if llm is not None and args.timeout != 20.0 else "")
    return write_results(doc, args.out, stem, _plot, _table, args.json)
