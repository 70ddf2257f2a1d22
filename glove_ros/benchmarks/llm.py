"""Decision quality of a local GGUF model on every job the LLM does in glove_ros.

``glove-ros bench llm --model PATH|NAME [--json]`` generates seeded cases for each job,
asks the model through the real llama.cpp runtime with the prompts and schemas the robot
uses, and scores the answers automatically:

* ``waypoint`` -- the planner's next goal (:mod:`glove_ros.core.llm.prompts`): options with
  verified memory, memory the verifier *suppressed* or *replaced* (stale: must not be
  trusted), fresh looks contradicting old ones, plan-memory notes (a hint that verified
  memory outranks), near unexplored vs far believed. Truth:
  :func:`~glove_ros.core.llm.prompts.reference_choice`.
* ``parse`` -- a free-text request into a structured task (:mod:`glove_ros.core.plan.tasks`),
  phrasings the fixed grammar does *not* know included. Truth: the generator's intent and
  slots.
* ``reflect`` -- a Janus reflection: the LLM updater (:class:`~glove_ros.core.plan.updater.
  LlmUpdater`) proposes plan-memory edits from an episode; judged by what the edited memory
  then tells the planner (:func:`~glove_ros.core.plan.plan_planner.plan_prior`): the block's new
  place must be preferred and its old, refuted place not.
* ``consolidate`` -- a short dock-time consolidation tool loop (:class:`~glove_ros.core.
  consolidate.policies.LlmPolicy`, read calls executed, up to 9 calls) over a journaled region
  where one fact is still to be written: the first ``synthesize`` must be the right fact
  (colour + latest waypoint) with provenance (the episode that saw it, only region
  episodes); latency is per call.

Per job: accuracy, valid-output rate (schema-valid reply), fallback rate (the robot would
have used the deterministic path: invalid, too slow or unusable reply), p50/p95 latency,
prompt and generation tokens/s (llama.cpp's counters; prompt tok/s counts only tokens
actually evaluated), and peak RSS of the process. Prefix reuse: a subset of the waypoint
cases is run again with the KV cache reset before each call; the ratio of the p50
latencies is the speed-up of the cached static prefix.

Seeds: the generator is seeded (``--seed``, default 1000: the report range; prompts were
tuned on seeds 0-99). Latency depends on the load of the machine: give ``--threads`` and
report the load. Writes ``bench/results/llm_<model>.json`` (+ ``.png``).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glove_ros.benchmarks import write_results
from glove_ros.core.llm.prompts import (
    REPLACED,
    SUPPRESSED,
    VERIFIED,
    Fact,
    Note,
    OptionView,
    decision_messages,
    decision_schema,
    reference_choice,
)
from glove_ros.progress import Progress, add_progress_argument

JOBS = ("waypoint", "parse", "reflect", "consolidate")
COLOURS = ("red", "blue", "green", "yellow")
PLACES = ("hall", "kitchen", "office", "lab", "garage", "store", "lounge", "workshop",
          "library", "corridor", "porch", "studio")
WAYPOINT_KINDS = ("verified_far", "two_verified", "suppressed", "contradicted", "note",
                  "note_vs_verified", "unexplored")


# --------------------------------------------------------------------------------------------
# case generators


@dataclass(frozen=True)
class WaypointCase:
    """One planner decision with its correct answer."""

    kind: str
    colour: str
    current: str
    options: tuple[OptionView, ...]
    notes: tuple[Note, ...]
    answer: str


def _other(rng: random.Random, colour: str) -> tuple[str, ...]:
    pool = [c for c in COLOURS if c != colour]
    return tuple(sorted(rng.sample(pool, rng.choice((1, 1, 2)))))


def waypoint_case(rng: random.Random, kind: str) -> WaypointCase:
    """A generated decision of ``kind`` (see :data:`WAYPOINT_KINDS`)."""
    colour = rng.choice(COLOURS)
    places = rng.sample(PLACES, 6)
    current, wps = places[0], places[1:1 + rng.choice((3, 4, 5))]
    dists = sorted(rng.sample([x / 2 for x in range(2, 20)], len(wps)))
    rng.shuffle(dists)
    opts = {w: OptionView(w, d) for w, d in zip(wps, dists, strict=True)}
    by_dist = sorted(wps, key=lambda w: opts[w].distance)
    notes: list[Note] = []

    def age() -> float:
        return rng.choice((30.0, 300.0, 1800.0, 7200.0, 90000.0))

    def put(w: str, *facts: Fact) -> None:
        opts[w] = OptionView(w, opts[w].distance, opts[w].facts + facts)

    def absent(w: str) -> None:
        put(w, Fact(_other(rng, colour), VERIFIED, age(), rng.randint(1, 4)))

    if kind == "verified_far":
        target = by_dist[-1] if rng.random() < 0.7 else by_dist[-2]
        put(target, Fact(tuple(sorted({colour, *_other(rng, colour)[:rng.randint(0, 1)]})),
                         VERIFIED, age(), rng.randint(1, 4)))
        for w in by_dist[:2]:
            if w != target and rng.random() < 0.5:
                absent(w)
    elif kind == "two_verified":
        a, b = rng.sample(wps, 2)
        for w in (a, b):
            put(w, Fact((colour,), VERIFIED, age(), rng.randint(1, 3)))
        for w in wps:
            if w not in (a, b) and rng.random() < 0.5:
                absent(w)
    elif kind == "suppressed":
        # the stale memory says the block is at a far option; a nearer option is unexplored
        far = by_dist[-1]
        put(far, Fact((colour,), rng.choice((SUPPRESSED, REPLACED)), age(), rng.randint(2, 5),
                      "contradicted by newer looks"))
        if rng.random() < 0.5:
            absent(far)  # the fresh look that contradicted it
        for w in by_dist[1:-1]:
            if rng.random() < 0.5:
                absent(w)
    elif kind == "contradicted":
        # an old look saw the block at A (replaced), a fresh one did not; B has it now
        a, b = rng.sample(wps, 2)
        put(a, Fact((colour,), REPLACED, 90000.0, 3, "replaced by newer verified looks"))
        absent(a)
        if rng.random() < 0.7:
            put(b, Fact((colour,), VERIFIED, 60.0, 1))
    elif kind == "note":
        target = rng.choice(by_dist[1:])
        notes.append(Note(f"block_{colour}", rng.choice((
            f"The {colour} block was seen at {target}.",
            f"The {colour} block is usually in the {target}.",
            f"Last time the {colour} block turned up at {target}.",
        ))))
        for w in wps:
            if w != target and rng.random() < 0.4:
                absent(w)
    elif kind == "note_vs_verified":
        stale = rng.choice(wps)
        notes.append(Note(f"block_{colour}", f"The {colour} block is at {stale}."))
        absent(stale)
        if rng.random() < 0.5:
            put(rng.choice([w for w in wps if w != stale]),
                Fact((colour,), VERIFIED, age(), 2))
    else:  # unexplored: only other colours remembered
        for w in wps:
            if rng.random() < 0.5:
                absent(w)
    if rng.random() < 0.3:  # a distracting note about another colour
        oc = rng.choice([c for c in COLOURS if c != colour])
        notes.append(Note(f"block_{oc}", f"The {oc} block was seen at {rng.choice(wps)}."))
        rng.shuffle(notes)
    options = tuple(opts[w] for w in wps)
    answer = reference_choice(colour, options, notes)
    assert answer is not None
    return WaypointCase(kind, colour, current, options, tuple(notes), answer)


_PARSE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "find": ("find the {c} block", "search for the {c} cube", "could you locate a {c} box",
             "I lost the {c} block, please find it", "hunt down the {c} block for me"),
    "go_to": ("go to the {w}", "drive to {w}", "take me to the {w}",
              "head over to the {w} please", "I need you in the {w} now"),
    "go_to_last_seen": ("bring me to where you last saw the {c} block",
                        "take me to the place you last saw the {c} cube",
                        "go where the {c} block was last seen",
                        "show me the spot where the {c} block turned up most recently"),
    "corridor_status": ("is the corridor between {w} and {w2} open?",
                        "can you get from {w} to {w2}?",
                        "is the passage from {w} to {w2} blocked?",
                        "can I walk straight from the {w} into the {w2}?"),
    "changes": ("what changed since yesterday?", "anything new in the last hour?",
                "what is different compared to last week?", "did anything move around today?"),
    "dock": ("go charge", "return to the dock", "battery is low, back to your charger",
             "time to recharge, go home"),
}
_SINCE_H = {"yesterday": 24, "last hour": 1, "last week": 168, "today": 12}


@dataclass(frozen=True)
class ParseCase:
    """A request and its structured meaning."""

    text: str
    places: tuple[str, ...]
    intent: str
    colour: str = ""
    waypoint: str = ""
    waypoint2: str = ""


def parse_case(rng: random.Random, intent: str) -> ParseCase:
    """A generated request of ``intent``."""
    places = tuple(rng.sample(PLACES, 6))
    c, (w, w2) = rng.choice(COLOURS), rng.sample(places, 2)
    text = rng.choice(_PARSE_TEMPLATES[intent]).format(c=c, w=w, w2=w2)
    return ParseCase(text, places, intent,
                     c if intent in ("find", "go_to_last_seen") else "",
                     w if intent in ("go_to", "corridor_status") else "",
                     w2 if intent == "corridor_status" else "")


# --------------------------------------------------------------------------------------------
# runners


@dataclass
class JobStats:
    """Per-job tallies."""

    job: str
    n: int = 0
    correct: int = 0
    valid: int = 0
    fallback: int = 0
    latencies: list[float] = field(default_factory=list)
    p_tokens: int = 0
    p_s: float = 0.0
    g_tokens: int = 0
    g_s: float = 0.0
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, res: Any, ok_valid: bool, correct: bool, fallback: bool, kind: str = "") -> None:
        """Record one call."""
        if _BAR is not None:
            _BAR.update(1)
        self.n += 1
        self.valid += int(ok_valid)
        self.correct += int(correct)
        self.fallback += int(fallback)
        self.latencies.append(float(getattr(res, "elapsed_s", 0.0)))
        self.p_tokens += int(getattr(res, "prompt_eval_tokens", 0))
        self.p_s += float(getattr(res, "prompt_eval_s", 0.0))
        self.g_tokens += int(getattr(res, "tokens", 0))
        self.g_s += float(getattr(res, "gen_s", 0.0))
        k = self.by_kind.setdefault(kind or self.job, [0, 0])
        k[0] += int(correct)
        k[1] += 1
        err = getattr(res, "error", None)
        if err and len(self.errors) < 5:
            self.errors.append(str(err)[:160])

    def summary(self) -> dict[str, Any]:
        """The job's figures."""
        lat = sorted(self.latencies)
        return {
            "cases": self.n,
            "accuracy": self.correct / self.n if self.n else 0.0,
            "valid_rate": self.valid / self.n if self.n else 0.0,
            "fallback_rate": self.fallback / self.n if self.n else 0.0,
            "p50_s": _pct(lat, 50), "p95_s": _pct(lat, 95),
            "prompt_tok_s": self.p_tokens / self.p_s if self.p_s > 0 else 0.0,
            "gen_tok_s": self.g_tokens / self.g_s if self.g_s > 0 else 0.0,
            "prompt_tokens_evaluated_mean": self.p_tokens / self.n if self.n else 0.0,
            "by_kind": {k: {"correct": c, "cases": t}
                        for k, (c, t) in sorted(self.by_kind.items())},
            "errors": self.errors,
        }


def _pct(xs: Sequence[float], p: float) -> float:
    if not xs:
        return 0.0
    i = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return float(sorted(xs)[i])


def _waypoint_schema(case: WaypointCase) -> dict[str, Any]:
    return decision_schema(case.colour, case.options, case.notes)


def run_waypoint(llm: Any, cases: Sequence[WaypointCase], timeout_s: float) -> JobStats:
    """Ask the planner prompt for each case."""
    st = JobStats("waypoint")
    for c in cases:
        res = llm.complete_json(decision_messages(c.colour, c.current, c.options, c.notes),
                                _waypoint_schema(c), max_tokens=40)
        choice = res.data.get("waypoint") if res.ok and isinstance(res.data, dict) else None
        slow = res.elapsed_s > timeout_s
        st.add(res, res.ok, choice == c.answer and not slow, not res.ok or slow, c.kind)
    return st


def run_parse(llm: Any, cases: Sequence[ParseCase], timeout_s: float) -> JobStats:
    """Ask the request parser for each case."""
    from glove_ros.core.plan.tasks import request_from_llm, request_messages, request_schema

    st = JobStats("parse")
    for c in cases:
        res = llm.complete_json(request_messages(c.text, COLOURS, c.places),
                                request_schema(COLOURS, c.places), max_tokens=64)
        req = request_from_llm(res.data, c.text) if res.ok else None
        ok = (req is not None and req.intent == c.intent
              and (req.colour, req.waypoint, req.waypoint2) == (c.colour, c.waypoint,
                                                                 c.waypoint2)
              and res.elapsed_s <= timeout_s)
        st.add(res, res.ok, ok, req is None or res.elapsed_s > timeout_s, c.intent)
    return st


def _reflect_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """(entries, outcome, colour, new waypoint, old waypoint or None, kind)."""
    from glove_ros.core.plan.plan_entries import PlanEntry, Provenance
    from glove_ros.core.plan.updater import EpisodeOutcome, Observation

    out = []
    for i in range(n):
        colour = rng.choice(COLOURS)
        places = rng.sample(PLACES, 4)
        new, old = places[0], places[1]
        moved = i % 2 == 1
        entries = []
        if moved:
            entries.append(PlanEntry(kind="semantic", name=f"block_{colour}",
                                     body=f"The {colour} block is at {old}.",
                                     provenance=Provenance((f"ep{i}_old",), ())).validate())
        oc = rng.choice([c for c in COLOURS if c != colour])
        entries.append(PlanEntry(kind="semantic", name=f"block_{oc}",
                                 body=f"The {oc} block is at {places[2]}.",
                                 provenance=Provenance((f"ep{i}_x",), ())).validate())
        obs = []
        if moved:
            obs.append(Observation(old, tuple(sorted(_other(rng, colour)))))
        obs.append(Observation(places[3], ()))
        obs.append(Observation(new, (colour,)))
        outcome = EpisodeOutcome(f"ep{i}", f"find the {colour} block", colour, True, new,
                                 tuple(obs), ()).validate()
        out.append((entries, outcome, colour, new, old if moved else None,
                    "moved" if moved else "new_fact"))
    return out


def run_reflect(llm: Any, cases: Sequence[tuple[Any, ...]], timeout_s: float) -> JobStats:
    """LLM updater reflections, judged by the plan prior of the edited memory."""
    from glove_ros.core.plan.plan_entries import apply_edits
    from glove_ros.core.plan.plan_planner import plan_prior
    from glove_ros.core.plan.updater import LlmUpdater

    up = LlmUpdater(llm)
    st = JobStats("reflect")
    for entries, outcome, colour, new, old, kind in cases:
        prop = up.propose_edits(entries, outcome)
        res = prop.llm
        ok_valid = bool(getattr(res, "ok", False))
        good = False
        if prop.edits:
            try:
                after = apply_edits(list(entries), list(prop.edits), source="llm")
            except ValueError:
                after = None
            if after is not None:
                wps = list(PLACES)
                pri = plan_prior(after, colour, wps)
                pref = pri.preferred()
                good = bool(pref) and pref[0] == new and (old is None or old not in pref)
        slow = float(getattr(res, "elapsed_s", 0.0)) > timeout_s
        st.add(res, ok_valid, good and not slow, not prop.edits or slow, kind)
    return st


def _consolidate_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """(store, region, workspace, colour, waypoint, episode) with one fact left to write.

    Each case journals four episodes through the fast writer, as on the robot: the colour
    seen at one place, then (drift) at another, and a second colour seen twice at a third.
    The second colour's fact is already synthesized; the right next call synthesizes the
    first colour at its new place, citing the episode that saw it there."""
    import tempfile

    from glove_ros.core.consolidate.consolidation import Consolidator
    from glove_ros.core.consolidate.region import ConsolidationConfig
    from glove_ros.core.consolidate.tools import ToolCall, Workspace
    from glove_ros.core.consolidate.writer import FastWriter
    from glove_ros.core.plan.plan_memory import PlanMemoryStore
    from glove_ros.core.plan.updater import EpisodeOutcome, Observation

    out = []
    tmp = Path(tempfile.mkdtemp(prefix="glove_bench_llm_"))
    for i in range(n):
        colour, oc = rng.sample(COLOURS, 2)
        p = rng.sample(PLACES, 3)
        store = PlanMemoryStore(str(tmp / f"plan{i}.db"))
        writer = FastWriter(store)
        tid = iter(range(1, 100))
        for ep, goal, where in ((f"e{i}a", colour, p[0]), (f"e{i}b", colour, p[1]),
                                (f"e{i}c", oc, p[2]), (f"e{i}d", oc, p[2])):
            writer.write(EpisodeOutcome(
                ep, f"find the {goal} block", goal, True, reported_waypoint=where,
                observations=(Observation(where, (goal,), next(tid)),)))
        cons = Consolidator(store, ConsolidationConfig(holdout_episodes=0))
        region = cons.select_region()
        if not region.entries or not region.episodes:
            raise RuntimeError("bench llm: the consolidation case has an empty region")
        ws = Workspace(store.entries(), region, cons.index, cons.config)
        ws.execute(ToolCall("synthesize", {"kind": "semantic", "name": f"{oc}_block",
                                           "body": f"The {oc} block is at {p[2]}.",
                                           "sources": [f"e{i}c", f"e{i}d"]}))
        out.append((store, region, ws, colour, p[1], f"e{i}b"))
    return out


def run_consolidate(llm: Any, cases: Sequence[tuple[Any, ...]], timeout_s: float,
                    max_calls: int = 9) -> JobStats:
    """A short tool loop per case, as in a dock-time run: read calls are executed on the
    workspace and their results shown to the model; the first ``synthesize`` must write the
    block at its new place citing the episode that saw it there (right tool, valid ids,
    provenance). ``terminate``, an invalid call or ``max_calls`` reads without a synthesize
    is wrong; an invalid call is a fallback (the run would abort, memory unchanged).
    Latency and tokens are per call."""
    from glove_ros.core.consolidate.policies import LlmPolicy

    st = JobStats("consolidate")
    for _store, region, ws, colour, wp, ep in cases:
        pol = LlmPolicy(llm)
        pol.start(region, ws.config)
        history: list[tuple[Any, Any]] = []
        good, valid, kind, err = False, True, "reads only", None
        spent, tokens = 0.0, 0
        for i in range(max_calls):
            t0 = time.perf_counter()
            step = pol.next_call(ws, history, i + 1, 10, 4096)  # the shipped max_steps
            spent += time.perf_counter() - t0
            tokens += int(step.tokens)
            call = step.call
            if call is None:
                valid, kind, err = False, "invalid", step.error
                break
            if call.tool == "synthesize":
                body = str(call.args.get("body", "")).lower()
                srcs = [str(x) for x in call.args.get("sources", [])]
                good = (colour in body and wp in body and ep in srcs
                        and all(x in region.episodes for x in srcs))
                kind = "synthesize"
                break
            if call.tool == "terminate":
                kind = "terminate"
                break
            history.append((call, ws.execute(call)))
        calls = len(history) + (0 if kind == "reads only" else 1)
        res = _StepResult(spent / max(1, calls), tokens, err)
        st.add(res, valid, good and res.elapsed_s <= timeout_s, not valid, kind)
    return st


@dataclass
class _StepResult:
    """What :meth:`JobStats.add` reads, for a tool loop (mean seconds per call)."""

    elapsed_s: float
    tokens: int
    error: str | None = None


def prefix_speedup(llm: Any, cases: Sequence[WaypointCase], warm: Sequence[float]
                   ) -> dict[str, Any]:
    """Run ``cases`` again with the KV cache reset before each call; compare with ``warm``
    (their latencies when run in sequence with the prefix reused)."""
    cold = []
    evaluated = []
    for c in cases:
        llm.reset_cache()
        res = llm.complete_json(decision_messages(c.colour, c.current, c.options, c.notes),
                                _waypoint_schema(c), max_tokens=40)
        cold.append(res.elapsed_s)
        evaluated.append(res.prompt_eval_tokens)
    cw, cc = statistics.median(warm), statistics.median(cold)
    return {"cases": len(cases), "p50_cold_s": cc, "p50_warm_s": cw,
            "speedup": cc / cw if cw > 0 else 0.0,
            "prompt_tokens_evaluated_cold_mean": statistics.mean(evaluated) if evaluated else 0}


# --------------------------------------------------------------------------------------------
# command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench llm``."""
    parser.add_argument("--model", default="",
                        help="a .gguf path or a model name (glove_ros.core.llm.models; "
                             "default: the configured default model)")
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help="comma-separated jobs (default: %(default)s)")
    parser.add_argument("--cases", type=int, default=42,
                        help="waypoint cases (6 per kind x 7 kinds by default); parse cases "
                             "are 4 per intent, reflect and consolidate cases --small-cases")
    parser.add_argument("--small-cases", type=int, default=8,
                        help="cases of the reflect and consolidate jobs (default: 8)")
    parser.add_argument("--seed", type=int, default=1000,
                        help="generator seed (default 1000, the report range; tuned on 0-99)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="a reply slower than this counts as a fallback (default 20 s)")
    parser.add_argument("--speedup-cases", type=int, default=5,
                        help="waypoint cases re-run cold for the prefix speed-up (default 5)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    add_progress_argument(parser)


_BAR: Any = None  # the progress bar of a `glove-ros bench llm` run (one tick per case)


def run(llm: Any, jobs: Sequence[str], *, cases: int = 42, small_cases: int = 8,
        seed: int = 1000, timeout_s: float = 20.0, speedup_cases: int = 5,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the chosen jobs on ``llm`` (a loaded :class:`~glove_ros.core.llm.runtime.LlamaBackend`,
    or any JsonLlm: then speed-up needs ``reset_cache``). Returns the report's ``jobs``."""
    bad = [j for j in jobs if j not in JOBS]
    if bad:
        raise ValueError(f"unknown job(s) {bad}; choose from {', '.join(JOBS)}")
    out: dict[str, Any] = {}
    say = progress or (lambda s: None)
    if "waypoint" in jobs:
        rng = random.Random(seed)
        wc = [waypoint_case(rng, WAYPOINT_KINDS[i % len(WAYPOINT_KINDS)]) for i in range(cases)]
        t = time.monotonic()
        st = run_waypoint(llm, wc, timeout_s)
        out["waypoint"] = st.summary()
        say(f"waypoint: {st.correct}/{st.n} in {time.monotonic() - t:.0f} s")
        if speedup_cases and hasattr(llm, "reset_cache"):
            k = min(speedup_cases, len(wc))
            out["waypoint"]["prefix_cache"] = prefix_speedup(llm, wc[1:k + 1],
                                                             st.latencies[1:k + 1])
    if "parse" in jobs:
        rng = random.Random(seed + 1)
        from glove_ros.core.plan.tasks import INTENTS

        # intents with phrasing templates (questions answered from memory have their own
        # benchmark, bench qa)
        intents = [i for i in INTENTS if i in _PARSE_TEMPLATES]
        pc = [parse_case(rng, intents[i % len(intents)]) for i in range(len(intents) * 4)]
        st = run_parse(llm, pc, timeout_s)
        out["parse"] = st.summary()
        say(f"parse: {st.correct}/{st.n}")
    if "reflect" in jobs:
        st = run_reflect(llm, _reflect_cases(random.Random(seed + 2), small_cases), timeout_s)
        out["reflect"] = st.summary()
        say(f"reflect: {st.correct}/{st.n}")
    if "consolidate" in jobs:
        cc = _consolidate_cases(random.Random(seed + 3), small_cases)
        try:
            st = run_consolidate(llm, cc, timeout_s)
        finally:
            for store, *_ in cc:
                store.close()
        out["consolidate"] = st.summary()
        say(f"consolidate: {st.correct}/{st.n}")
    return out


def _table(doc: dict[str, Any]) -> str:
    head = (f"{'job':12s} {'cases':>5s} {'acc':>6s} {'valid':>6s} {'fallbk':>6s} "
            f"{'p50 s':>6s} {'p95 s':>6s} {'pr t/s':>7s} {'gen t/s':>7s}")
    lines = [f"model {doc['model']} ({doc['threads']} threads, load {doc['load_avg']})",
             head, "-" * len(head)]
    for job, s in doc["jobs"].items():
        if "error" in s:
            lines.append(f"{job:12s} {s['error']}")
            continue
        lines.append(f"{job:12s} {s['cases']:5d} {s['accuracy']:6.0%} {s['valid_rate']:6.0%} "
                     f"{s['fallback_rate']:6.0%} {s['p50_s']:6.2f} {s['p95_s']:6.2f} "
                     f"{s['prompt_tok_s']:7.1f} {s['gen_tok_s']:7.1f}")
    pc = doc["jobs"].get("waypoint", {}).get("prefix_cache")
    if pc:
        lines.append(f"prefix cache: p50 {pc['p50_cold_s']:.2f} s cold vs {pc['p50_warm_s']:.2f}"
                     f" s warm = {pc['speedup']:.1f}x faster")
    wk = doc["jobs"].get("waypoint", {}).get("by_kind", {})
    if wk:
        lines.append("waypoint by kind: " + ", ".join(
            f"{k} {v['correct']}/{v['cases']}" for k, v in wk.items()))
    lines.append(f"peak RSS {doc['peak_rss_mb']:.0f} MB, load {doc['load_s']:.1f} s, "
                 f"wall {doc['wall_s']:.0f} s")
    return "\n".join(lines)


def _plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [j for j, s in doc["jobs"].items() if "accuracy" in s]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(jobs, [doc["jobs"][j]["accuracy"] for j in jobs], color="#4a7")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(f"glove-ros bench llm: {doc['model']}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``glove-ros bench llm``."""
    import os

    from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig, LlmLoadError

    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    t0 = time.monotonic()
    try:
        llm = LlamaBackend(LlmConfig(model_path=args.model, n_ctx=4096, n_threads=args.threads,
                                     max_tokens=256, timeout_s=max(args.timeout * 3, 30.0)))
        llm.load()
    except (LlmLoadError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    load_s = time.monotonic() - t0
    from glove_ros.core.plan.tasks import INTENTS

    per_job = {"waypoint": args.cases, "parse": len(INTENTS) * 4,
               "reflect": args.small_cases, "consolidate": args.small_cases}
    global _BAR
    _BAR = Progress(sum(per_job.get(j, 0) for j in jobs), "cases", "case",
                    enabled=getattr(args, "progress", None))
    try:
        jobs_out = run(llm, jobs, cases=args.cases, small_cases=args.small_cases,
                       seed=args.seed, timeout_s=args.timeout,
                       speedup_cases=args.speedup_cases,
                       progress=lambda s: _BAR.write(s) if not args.json else None)
    finally:
        _BAR.close()
        _BAR = None
    name = Path(llm.model_path).name
    doc = {
        "benchmark": "llm", "model": name, "model_path": str(llm.model_path),
        "seed": args.seed, "threads": args.threads, "timeout_s": args.timeout,
        "load_avg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "cpus": os.cpu_count(), "load_s": load_s, "wall_s": time.monotonic() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "jobs": jobs_out,
    }
    stem = "llm_" + name.removesuffix(".gguf").lower().replace(".", "_")
    return write_results(doc, args.out, stem, _plot, _table, args.json)
