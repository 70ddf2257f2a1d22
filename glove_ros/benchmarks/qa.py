"""Questions answered from memory after drift: LLM vs templates, verified vs unverified memory.

``glove-ros bench qa [--model NAME|PATH] [--threads 2] [--quick] [--no-llm]`` asks
NaVQA-style questions (:mod:`glove_ros.core.plan.qa`) about drift worlds, with the
simulator's ground truth (:mod:`glove_ros.benchmarks._qa_worlds`: generated worlds with fresh
place and object names, a patrol robot, memory through the GLOVE verifier):

* types: ``spatial`` (where did you last see X, is X still at Y), ``temporal`` (when did you
  last see X, what changed in the last T), ``descriptive`` (what is at Y, which corridors are
  closed) and ``staleness`` (any of those where the robot witnessed the change: unverified
  memory still answers the old state). Only questions memory can answer are asked.
* arms, keyed by name: ``llm+glove``, ``template+glove``, ``llm+static`` (never verified:
  every memory trusted), ``llm+<rule>`` (the best recency rule, chosen with templates on the
  development seeds), and the template arms of static and the rule (free to run).

Per arm: accuracy per type with 95 % Wilson intervals pooled over the report seeds, and per
seed; a value must match and, except for ``changes``, so must the stale flag. Also citation
validity (share of cited ids that name retrieved entries), the stale-catch rate (staleness
questions the static arm of the same answerer gets wrong, answered right), fallbacks,
latency p50 / p95 and tokens per answer, with llama.cpp's own counters (prompt tokens it
evaluated past the reused prefix, ms per prompt and per output token), which do not depend
on what else runs on the cores as wall time does. Development seeds (rule choice, prompt
work: 0-2, and 1000-1005, the earlier report seeds) and report seeds (1006-1008) are
disjoint and both named in the JSON, with the fingerprint of the frozen prompt. Writes
``bench/results/qa.json`` (+ ``.png``).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.benchmarks import write_results
from glove_ros.benchmarks._qa_worlds import (
    QTYPES,
    QaWorld,
    build_world,
    make_cases,
    rule_view,
    static_view,
)
from glove_ros.core.plan.qa import (
    PROMPT_SHA256,
    LlmAnswerer,
    TemplateAnswerer,
    answer_messages,
    answer_schema,
    retrieve,
)
from glove_ros.progress import Progress, add_progress_argument

#: recency rules the ``llm+<rule>`` arm is chosen from (templates, development seeds)
RECENCY_RULES = ("LatestOverwrite", "RecentK", "SlidingWindow", "RecencyWeighted")
#: development seeds (the recency rule is chosen on them, by template accuracy): 0-2, and
#: 1000-1002 and 1003-1005, report seeds each run once and then used to rework the prompt
#: and grammar (so development now)
DEV_SEEDS = (0, 1, 2, 1000, 1001, 1002, 1003, 1004, 1005)
#: report seeds: fresh, run once on the frozen prompt
REPORT_SEEDS = (1006, 1007, 1008)
#: the reply bound of an answer (a reply is about 10-25 tokens; the grammar ends it)
ANSWER_MAX_TOKENS = 48


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench qa``."""
    parser.add_argument("--model", default="",
                        help="a .gguf path or model name (default: the configured default)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    parser.add_argument("--seeds", default=",".join(map(str, REPORT_SEEDS)),
                        help="report seeds (default %(default)s)")
    parser.add_argument("--dev-seeds", default=",".join(map(str, DEV_SEEDS)),
                        help="development seeds: the recency rule is chosen on them, and they "
                             "must not overlap the report seeds (default %(default)s)")
    parser.add_argument("--worlds", type=int, default=2, help="worlds per seed (default 2)")
    parser.add_argument("--questions", type=int, default=15,
                        help="questions per world (default 15)")
    parser.add_argument("--no-llm", action="store_true", help="template arms only")
    parser.add_argument("--quick", action="store_true",
                        help="one report seed, one world, 8 questions (a smoke run)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="an LLM reply slower than this is cut off (template answers)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    add_progress_argument(parser)


# --------------------------------------------------------------------------------------------
# statistics


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of k successes in n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def _share(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"correct": k, "n": n, "rate": round(k / n, 4) if n else None,
            "ci95": [round(lo, 4), round(hi, 4)]}


def _pct(xs: Sequence[float], p: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return float(s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))])


# --------------------------------------------------------------------------------------------
# arms


def _views(qw: QaWorld, rule: str) -> dict[str, tuple[list[Any], Any]]:
    return {"glove": (qw.entries, None), "static": (static_view(qw.entries), None),
            rule: rule_view(qw.entries, rule, qw.now)}


def _ask(arm: str, answerer: Any, worlds: Sequence[QaWorld], memory: str, rule: str,
         tick: Callable[[], Any]) -> list[dict[str, Any]]:
    rows = []
    for qw in worlds:
        entries, weights = _views(qw, rule)[memory]
        for c in qw.cases:
            r = retrieve(c.question, entries, qw.now, labels=qw.labels, weights=weights)
            a = answerer.answer(r)
            ok = a.value == c.value and (c.question.kind == "changes" or a.stale == c.stale)
            rows.append({"arm": arm, "seed": c.seed, "world": c.world, "qtype": c.qtype,
                         "kind": c.question.kind, "question": c.question.text,
                         "truth": c.value, "truth_stale": c.stale, "value": a.value,
                         "stale": a.stale, "correct": ok, "cited": list(a.cited),
                         "retrieved": list(r.ids), "source": a.source, "error": a.error,
                         "latency_s": round(a.latency_s, 3), "tokens": a.tokens,
                         "prompt_tokens": a.prompt_tokens,
                         "prompt_eval_tokens": a.prompt_eval_tokens,
                         "prompt_eval_s": round(a.prompt_eval_s, 3), "gen_s": round(a.gen_s, 3),
                         "answer": a.text})
            tick()
    return rows


def _summary(rows: Sequence[Mapping[str, Any]], llm: bool) -> dict[str, Any]:
    acc = {t: _share(sum(r["correct"] for r in rows if r["qtype"] == t),
                     sum(r["qtype"] == t for r in rows)) for t in QTYPES}
    acc["all"] = _share(sum(r["correct"] for r in rows), len(rows))
    seeds = sorted({r["seed"] for r in rows})
    cited = [(i, r) for r in rows for i in r["cited"]]
    out: dict[str, Any] = {
        "accuracy": acc,
        "per_seed": {str(s): round(sum(r["correct"] for r in rows if r["seed"] == s)
                                   / max(1, sum(r["seed"] == s for r in rows)), 4)
                     for s in seeds},
        "by_kind": {k: _share(sum(r["correct"] for r in rows if r["kind"] == k),
                              sum(r["kind"] == k for r in rows))
                    for k in sorted({r["kind"] for r in rows})},
        "citations": len(cited),
        "citation_validity": round(sum(i in r["retrieved"] for i, r in cited) / len(cited), 4)
        if cited else None,
        "stale_flagged": _share(sum(r["stale"] for r in rows if r["qtype"] == "staleness"),
                                sum(r["qtype"] == "staleness" for r in rows)),
    }
    if llm:
        lat = [r["latency_s"] for r in rows if r["tokens"]]
        out |= {"answers_by_llm": sum(r["source"] == "llm" for r in rows),
                "fallbacks": sum(r["source"] != "llm" for r in rows),
                "fallback_reasons": dict(Counter(str(r["error"])[:60] for r in rows
                                                 if r["source"] != "llm")),
                "latency_p50_s": round(_pct(lat, 50), 3),
                "latency_p95_s": round(_pct(lat, 95), 3),
                "latency_max_s": round(max(lat, default=0.0), 3),
                "tokens_per_answer": round(sum(r["tokens"] for r in rows) / max(1, len(lat)), 1),
                "prompt_tokens_per_answer": round(sum(r["prompt_tokens"] for r in rows)
                                                  / max(1, len(lat)), 1),
                # what llama.cpp evaluated (the rest of the prompt came from the reused
                # prefix) and its own timings: comparable across loads, unlike wall time
                "prompt_eval_tokens_per_answer": round(
                    sum(r["prompt_eval_tokens"] for r in rows) / max(1, len(lat)), 1),
                "ms_per_prompt_token": _ms_per(rows, "prompt_eval_s", "prompt_eval_tokens"),
                "ms_per_output_token": _ms_per(rows, "gen_s", "tokens"),
                "llama_s_p50": round(_pct([r["prompt_eval_s"] + r["gen_s"] for r in rows
                                           if r["tokens"]], 50), 3)}
    return out


def _ms_per(rows: Sequence[Mapping[str, Any]], secs: str, tokens: str) -> float | None:
    n = sum(r[tokens] for r in rows if r[secs])
    return round(1000 * sum(r[secs] for r in rows) / n, 1) if n else None


def _stale_catch(rows: Sequence[Mapping[str, Any]], static_rows: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:
    """Staleness questions the static arm got wrong: how many this arm answered right."""
    wrong = {(r["world"], r["question"]) for r in static_rows
             if r["qtype"] == "staleness" and not r["correct"]}
    hit = [r for r in rows if (r["world"], r["question"]) in wrong]
    return _share(sum(r["correct"] for r in hit), len(hit))


def choose_rule(worlds: Sequence[QaWorld], rules: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The recency rule whose template arm is most accurate on ``worlds`` (first on ties)."""
    table = {}
    for rule in rules:
        rows = _ask(rule, TemplateAnswerer(), worlds, rule, rule, lambda: None)
        table[rule] = round(sum(r["correct"] for r in rows) / max(1, len(rows)), 4)
    return max(rules, key=lambda r: table[r]), table


def make_worlds(seeds: Sequence[int], worlds: int, questions: int) -> list[QaWorld]:
    """``worlds`` patrolled worlds per seed, each with up to ``questions`` cases."""
    out = []
    for s in seeds:
        for i in range(worlds):
            qw = build_world(s, i)
            qw.cases = make_cases(qw, questions)
            out.append(qw)
    return out


def _warm_up(llm: Any, worlds: Sequence[QaWorld]) -> float | None:
    """One untimed call: the rules and examples (the static prefix) enter the KV cache, as
    on a robot that has answered before. Returns its seconds (the cold-prefix cost); None
    for a test double (nothing to warm)."""
    if not hasattr(llm, "reset_cache"):
        return None
    for qw in worlds:
        for c in qw.cases:
            r = retrieve(c.question, qw.entries, qw.now, labels=qw.labels)
            if r.facts:
                t0 = time.monotonic()
                llm.complete_json(answer_messages(r), answer_schema(r), max_tokens=8,
                                  timeout_s=600.0)
                return round(time.monotonic() - t0, 2)
    return None


def run(llm: Any | None, *, seeds: Sequence[int] = REPORT_SEEDS,
        dev_seeds: Sequence[int] = DEV_SEEDS, worlds: int = 2, questions: int = 15,
        rules: Sequence[str] = RECENCY_RULES, progress: Progress | None = None,
        max_tokens: int = ANSWER_MAX_TOKENS) -> dict[str, Any]:
    """Run every arm (the LLM arms only with ``llm``, any JsonLlm); the JSON document."""
    overlap = sorted(set(seeds) & set(dev_seeds))
    if overlap:
        raise ValueError(f"report and development seeds overlap: {overlap}")
    if not seeds or worlds < 1 or questions < 1:
        raise ValueError("need at least one report seed, world and question")
    t0 = time.monotonic()
    rule, table = choose_rule(make_worlds(dev_seeds, worlds, questions), rules)
    report = make_worlds(seeds, worlds, questions)
    n = sum(len(w.cases) for w in report)
    tick = progress.update if progress is not None else (lambda: None)
    tmpl = TemplateAnswerer()
    arms = {"template+glove": (tmpl, "glove"), "template+static": (tmpl, "static"),
            f"template+{rule}": (tmpl, rule)}
    warm = None
    if llm is not None:
        ans = LlmAnswerer(llm, max_tokens=max_tokens)
        warm = _warm_up(llm, report)
        arms |= {"llm+glove": (ans, "glove"), "llm+static": (ans, "static"),
                 f"llm+{rule}": (ans, rule)}
    rows = {name: _ask(name, a, report, mem, rule, tick) for name, (a, mem) in arms.items()}
    out_arms = {}
    for name, rs in rows.items():
        s = _summary(rs, name.startswith("llm"))
        family = name.split("+")[0]
        s["stale_catch_vs_static"] = _stale_catch(rs, rows[f"{family}+static"])
        out_arms[name] = s
    types = Counter(c.qtype for w in report for c in w.cases)
    doc: dict[str, Any] = {
        "benchmark": "qa", "dev_seeds": list(dev_seeds), "report_seeds": list(seeds),
        "worlds_per_seed": worlds, "questions_per_world": questions, "questions": n,
        "question_types": dict(types), "worlds": [
            {"name": w.name, "seed": w.seed, "kind": w.kind, "entries": len(w.entries),
             "stale_entries": sum(int(e.status) != 0 for e in w.entries),
             "questions": len(w.cases)} for w in report],
        "recency_rule": rule, "recency_rule_dev_accuracy": table,
        "prompt_sha256": PROMPT_SHA256, "llm_warmup_s": warm, "arms": out_arms,
        "rows": [r for rs in rows.values() for r in rs],
        "wall_s": round(time.monotonic() - t0, 1),
    }
    g = out_arms.get("llm+glove")
    if g is not None:
        doc["targets"] = {
            "accuracy_answerable": {"target": 0.9, "value": g["accuracy"]["all"]["rate"]},
            "stale_caught_where_static_wrong": {
                "target": 0.9, "value": _stale_catch(rows["llm+glove"],
                                                     rows["llm+static"])["rate"]},
            "citations_real": {"target": 1.0, "value": g["citation_validity"]},
            "latency_p50_s": {"target": 2.5, "value": g["latency_p50_s"]},
        }
        for k, t in doc["targets"].items():
            v = t["value"]
            t["met"] = v is not None and (v <= t["target"] if k == "latency_p50_s"
                                          else v >= t["target"])
    return doc


# --------------------------------------------------------------------------------------------
# report


def _table(doc: Mapping[str, Any]) -> str:
    head = f"{'arm':28s} " + " ".join(f"{t:>17s}" for t in (*QTYPES, "all")) + \
        f" {'cite':>5s} {'p50 s':>6s}"
    lines = [f"bench qa: {doc['questions']} questions, report seeds {doc['report_seeds']}, "
             f"dev seeds {doc['dev_seeds']}, recency rule {doc['recency_rule']}", head,
             "-" * len(head)]
    for name, a in doc["arms"].items():
        cells = []
        for t in (*QTYPES, "all"):
            s = a["accuracy"][t]
            cells.append(f"{s['correct']:3d}/{s['n']:<3d} [{s['ci95'][0]:.2f},{s['ci95'][1]:.2f}]"
                         if s["n"] else f"{'-':>17s}")
        cv = a["citation_validity"]
        lines.append(f"{name:28s} " + " ".join(f"{c:>17s}" for c in cells)
                     + f" {cv if cv is None else round(cv, 2)!s:>5s} "
                     + f"{a.get('latency_p50_s', 0.0):6.2f}")
    for name, a in doc["arms"].items():
        if "ms_per_output_token" in a:
            lines.append(f"{name}: per answer {a['prompt_eval_tokens_per_answer']} prompt tokens "
                         f"evaluated (of {a['prompt_tokens_per_answer']}), "
                         f"{a['tokens_per_answer']} output; ms/token prompt "
                         f"{a['ms_per_prompt_token']}, output {a['ms_per_output_token']}; "
                         f"llama.cpp p50 {a['llama_s_p50']} s, wall p50 {a['latency_p50_s']} s")
    for k, t in doc.get("targets", {}).items():
        lines.append(f"target {k}: {t['value']} (want {t['target']}) "
                     f"{'met' if t['met'] else 'NOT met'}")
    return "\n".join(lines)


def _plot(doc: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(doc["arms"])
    fig, ax = plt.subplots(figsize=(9.5, 3.2))
    w = 0.8 / max(1, len(arms))
    for i, name in enumerate(arms):
        acc = doc["arms"][name]["accuracy"]
        xs = [j + i * w for j in range(len(QTYPES))]
        ys = [acc[t]["rate"] or 0.0 for t in QTYPES]
        err = [[y - acc[t]["ci95"][0] for y, t in zip(ys, QTYPES, strict=True)],
               [acc[t]["ci95"][1] - y for y, t in zip(ys, QTYPES, strict=True)]]
        ax.bar(xs, ys, w, yerr=err, capsize=2, label=name)
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(QTYPES))], QTYPES)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_title(f"glove-ros bench qa: {doc['questions']} questions, seeds "
                 f"{doc['report_seeds']}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ValueError(f"seeds must be comma-separated integers, got {text!r}") from exc


def main(args: argparse.Namespace) -> int:
    """Entry point of ``glove-ros bench qa``."""
    seeds, dev = _ints(args.seeds), _ints(args.dev_seeds)
    worlds, questions = args.worlds, args.questions
    if args.quick:
        seeds, dev, worlds, questions = seeds[:1], dev[:1], 1, 8
    llm = None
    settings: dict[str, Any] = {}
    if not args.no_llm:
        from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError

        cfg = LlmConfig(model_path=args.model, n_ctx=2048, n_threads=args.threads,
                        max_tokens=ANSWER_MAX_TOKENS, timeout_s=args.timeout)
        try:
            llm = LlamaBackend(cfg).load()
        except (LlmLoadError, ValueError) as exc:
            print(f"error: {exc} (--no-llm runs the template arms only)")
            return 2
        settings = {"model": Path(llm.model_path).name, "n_ctx": cfg.n_ctx,
                    "n_threads": cfg.n_threads, "max_tokens": cfg.max_tokens,
                    "temperature": cfg.temperature, "seed": cfg.seed,
                    "timeout_s": cfg.timeout_s}
    arms = 6 if llm is not None else 3
    bar = Progress(arms * worlds * len(seeds) * questions, "qa", "answer",
                   enabled=getattr(args, "progress", None))
    try:
        doc = run(llm, seeds=seeds, dev_seeds=dev, worlds=worlds, questions=questions,
                  progress=bar)
    finally:
        bar.close()
        if llm is not None:
            llm.close()
    doc["llm_settings"] = settings
    doc["load_avg"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    doc["cpus"] = os.cpu_count()
    return write_results(doc, args.out, "qa", _plot, _table, args.json)
