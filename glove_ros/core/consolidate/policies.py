"""Who chooses the consolidator's tool calls: the :class:`Policy` protocol, the
deterministic :class:`RulePolicy` (latest evidence wins) and the local LLM as
:class:`LlmPolicy` (one schema-constrained call per step, prompt trimmed to ``n_ctx``).

Both drive the same tools (:mod:`glove_ros.core.consolidate.tools`) and are run by the same
bounded loop (:class:`~glove_ros.core.consolidate.consolidation.Consolidator`); they are kept
apart from the tools so that the tool surface and its checks do not depend on how a call
was chosen, and a new policy is one more class here.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from glove_ros.core.consolidate.region import ConsolidationConfig, Region
from glove_ros.core.consolidate.tools import (
    ToolCall,
    ToolResult,
    Workspace,
    parse_tool_call,
    tool_schema,
)
from glove_ros.core.consolidate.writer import (
    _WRITER_SOURCE,
    SOURCE,
    EpisodeTrace,
    _clip_body,
    _int,
    _num,
    _simple_path,
)
from glove_ros.core.llm.runtime import LlmResult, approx_tokens
from glove_ros.core.plan.plan_entries import PlanEntry, slugify
from glove_ros.core.plan.plan_retrieval import format_entry
from glove_ros.core.plan.updater import (
    Traversal,
    blocked_name,
    fact_name,
    failure_name,
    route_name,
)

__all__ = [
    "PolicyStep",
    "Policy",
    "RulePolicy",
    "LlmPolicy",
]


# ============================================================================================
# 5. policies


@dataclass(frozen=True)
class PolicyStep:
    """A policy's next move: a call, or an error (the run aborts). Token counts are the
    LLM's (0 for the rule policy)."""

    call: ToolCall | None
    error: str | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    raw: str = ""


class Policy(Protocol):
    """Chooses tool calls. ``start`` is called once per run, then ``next_call`` per step with
    the workspace and the history ``[(call, result), ...]`` so far."""

    name: str

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Reset for a new run over ``region``."""
        ...

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """The next call (``step`` counts from 1)."""
        ...


# -- rule policy


class RulePolicy:
    """The deterministic consolidator, driving the same tools as the LLM.

    Plan: ``check_memory`` every region entry; ``get_source_trace`` every episode cited by a
    fast-write or foreign entry (consolidated anchors carry their state in ``meta``); then
    ``synthesize``, by latest evidence (journal order):

    - ``block_<colour>`` per colour: where it was last seen (dropped after
      ``miss_threshold`` empty looks there since), citing every sighting there;
    - ``empty_waypoints``: waypoints whose latest look saw nothing;
    - ``blocked_<a>_<b>`` per corridor whose latest drive was blocked, citing the blocked
      attempts (a corridor driven through since is re-opened: its lessons are dropped);
    - ``route_<start>_<waypoint>``: the latest loop-free successful route to each waypoint
      holding a block, if it uses no blocked corridor;
    - ``failed_<colour>``: failed searches for a colour with no known location;
    - any other entry is kept verbatim (same name, body, kind).

    Entries of the :class:`~glove_ros.core.plan.updater.RuleUpdater` (``block_*``, ``blocked_*``,
    ``failed_*``, ``route_*``) count through their traces and are replaced by the
    consolidated entry of the same name, whose ``meta`` keeps the updater's keys
    (``colour``, ``waypoints``, ``edge``, ``path``, ``goal``). Then ``terminate``.
    ``step_delay_s`` sleeps before each call (demos, tests).
    """

    name = "rule"

    def __init__(self, miss_threshold: int | None = None, step_delay_s: float = 0.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if miss_threshold is not None and (not _int(miss_threshold) or miss_threshold < 1):
            raise ValueError("miss_threshold must be an int >= 1 (None: the config's)")
        if not _num(step_delay_s) or step_delay_s < 0:
            raise ValueError("step_delay_s must be >= 0")
        self._miss_override = miss_threshold
        self.step_delay_s = float(step_delay_s)
        self._sleep = sleep
        self._queue: list[ToolCall] = []
        self._phase = "read"
        self._traces_queued = False
        self._cfg = ConsolidationConfig()

    @property
    def miss_threshold(self) -> int:
        """Empty looks at a block's waypoint (after its last sighting) that drop the fact."""
        return self._miss_override or self._cfg.miss_threshold

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Queue the reads."""
        self._cfg = config
        self._phase = "read"
        self._queue = [ToolCall("check_memory", {"name": n}) for n in region.names]
        self._traces_queued = False

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """Reads first, then the synthesized set, then terminate."""
        if self.step_delay_s:
            self._sleep(self.step_delay_s)
        if not self._queue and self._phase == "read" and not self._traces_queued:
            self._traces_queued = True
            need: dict[str, None] = {}
            for call, res in history:
                if call.tool == "check_memory" and res.ok:
                    e: PlanEntry = res.data["entry"]
                    if not _is_anchor(e):
                        for ep in e.provenance.episodes:
                            if ep in res.data["sources"]:
                                need[ep] = None
            self._queue = [ToolCall("get_source_trace", {"episode": ep}) for ep in need]
        if not self._queue and self._phase == "read":
            self._phase = "write"
            self._queue = self._plan(history) + [ToolCall("terminate", {"note": "rule"})]
        if not self._queue:
            return PolicyStep(None, "rule policy has nothing left to do")
        return PolicyStep(self._queue.pop(0))

    # -- the merge
    def _plan(self, history: Sequence[tuple[ToolCall, ToolResult]]) -> list[ToolCall]:
        entries: list[tuple[PlanEntry, dict[str, int]]] = []
        traces: dict[str, EpisodeTrace] = {}
        for call, res in history:
            if not res.ok:
                continue
            if call.tool == "check_memory":
                entries.append((res.data["entry"], dict(res.data["sources"])))
            elif call.tool == "get_source_trace":
                traces[res.data.episode_id] = res.data
        # evidence: {episode: order}, merged per key
        sight: dict[str, dict[str, dict[str, int]]] = {}  # colour -> waypoint -> eps
        empty: dict[str, tuple[int, str]] = {}  # waypoint -> latest (order, episode)
        drives: dict[tuple[str, str], tuple[int, bool, dict[str, int]]] = {}
        routes: dict[str, tuple[int, list[str], str]] = {}  # end -> (order, path, episode)
        fails: dict[str, dict[str, int]] = {}  # goal -> eps
        keep: list[tuple[PlanEntry, dict[str, int]]] = []

        def see(colour: str, wp: str, eps: Mapping[str, int]) -> None:
            sight.setdefault(colour, {}).setdefault(wp, {}).update(eps)

        def empty_look(wp: str, order: int, ep: str) -> None:
            if ep and (wp not in empty or order > empty[wp][0]):
                empty[wp] = (order, ep)

        def drive(a: str, b: str, blocked: bool, eps: Mapping[str, int]) -> None:
            if not eps:
                return
            k = (a, b) if a <= b else (b, a)
            order = max(eps.values())
            old = drives.get(k)
            if old is None or (order > old[0] and blocked != old[1]):
                drives[k] = (order, blocked, dict(eps))
            elif blocked == old[1]:
                drives[k] = (max(order, old[0]), blocked, {**old[2], **eps})

        def route(path: list[str], order: int, ep: str) -> None:
            old = routes.get(path[-1])
            if old is None or order > old[0]:
                routes[path[-1]] = (order, path, ep)

        for t in sorted(traces.values(), key=lambda t: t.order):
            one = {t.episode_id: t.order}
            for wp, cs, _ in t.looks:
                for c in cs:
                    see(c, wp, one)
                if not cs:
                    empty_look(wp, t.order, t.episode_id)
            for a, b, blocked, _ in t.drives:
                drive(a, b, blocked, one)
            if t.success and t.drives:
                p = _simple_path([Traversal(a, b, bl) for a, b, bl, _ in t.drives])
                if p is not None and len(p) >= 3:
                    route(p, t.order, t.episode_id)
            if not t.success and t.goal:
                fails.setdefault(t.goal, {}).update(one)
        for e, srcs in entries:
            m = dict(e.meta)
            eps = {ep: o for ep, o in srcs.items() if ep in e.provenance.episodes}
            fact = m.get("fact")
            if _is_anchor(e):
                if fact == "block" and m.get("colour") and m.get("waypoints"):
                    see(str(m["colour"]), str(m["waypoints"][0]), eps)
                elif fact == "empty" and isinstance(m.get("waypoints"), Mapping):
                    for wp, (o, ep) in m["waypoints"].items():
                        if ep in eps:
                            empty_look(str(wp), int(o), str(ep))
                elif fact == "blocked" and isinstance(m.get("edge"), list):
                    drive(str(m["edge"][0]), str(m["edge"][1]), True, eps)
                elif fact == "route" and isinstance(m.get("path"), list) and eps:
                    ep = max(eps, key=lambda x: eps[x])
                    route([str(w) for w in m["path"]], eps[ep], ep)
                elif fact == "failed" and m.get("goal"):
                    fails.setdefault(str(m["goal"]), {}).update(eps)
                else:
                    keep.append((e, srcs))
            elif e.source == _WRITER_SOURCE and fact in (
                    "seen", "empty", "closed", "path", "notfound"):
                continue  # their traces were read: the evidence is there
            elif e.name.split("-")[0].startswith(("block_", "blocked_", "failed_", "route_")) \
                    and any(k in m for k in ("colour", "edge", "goal", "path")):
                continue  # a RuleUpdater entry: its traces were read
            else:
                keep.append((e, srcs))

        fan = self._cfg.max_fan_in
        out: list[ToolCall] = []
        region_names = {e.name for e, _ in entries}

        def newest(eps: Mapping[str, int]) -> list[str]:
            return sorted(eps, key=lambda x: (-eps[x], x))[:fan]

        topics: dict[tuple[str, ...], list[str]] = {}
        for e, _ in entries:
            topics.setdefault(_topic(e), []).append(e.name)

        def synth(kind: str, name: str, body: str, sources: Sequence[str],
                  meta: dict[str, Any], topic: tuple[str, ...] = ()) -> None:
            srcs = [s for s in dict.fromkeys(sources) if s][:fan]
            if srcs:
                out.append(ToolCall("synthesize", {
                    "kind": kind, "name": name, "body": _clip_body(body), "sources": srcs,
                    "meta": meta, "replaces": [n for n in topics.get(topic, [])
                                               if n in region_names]}))

        located: dict[str, str] = {}
        for colour in sorted(sight):
            wps = sight[colour]
            wp, eps = max(wps.items(), key=lambda kv: (max(kv[1].values()), kv[0]))
            last = max(eps.values())
            if self._misses(traces, wp, last) >= self.miss_threshold:
                continue
            srcs = newest(eps)
            n = len(eps)
            synth("semantic", fact_name(colour),
                  f"The {colour} block is at {wp} (seen in {n} episode{'s' if n != 1 else ''}, "
                  f"last {srcs[0]}).", srcs,
                  {"fact": "block", "colour": colour, "waypoints": [wp], "misses": {},
                   "order": last}, ("colour", colour))
            located[colour] = wp
        last_sight = {wp: max(o for w in sight.values() for o in w.get(wp, {}).values())
                      for wp in {wp for w in sight.values() for wp in w}}
        empties = {wp: v for wp, v in empty.items()
                   if wp not in located.values() and last_sight.get(wp, -1) < v[0]}
        if empties:
            wps = sorted(empties, key=lambda w: (-empties[w][0], w))[:fan]
            synth("semantic", "empty_waypoints",
                  f"No block at {', '.join(wps)} (latest looks).",
                  [empties[w][1] for w in wps],
                  {"fact": "empty", "waypoints": {w: list(empties[w]) for w in wps}}, ("empty",))
        blocked = {k for k, v in drives.items() if v[1]}
        for a, b in sorted(blocked):
            order, _, eps = drives[(a, b)]
            srcs = newest(eps)
            synth("negative", blocked_name(a, b),
                  f"The corridor between {a} and {b} is blocked (last tried in {srcs[0]}); plan "
                  "around it.", srcs, {"fact": "blocked", "edge": [a, b], "order": order},
                  ("edge", a, b))
        for wp in sorted(set(located.values())):
            r = routes.get(wp)
            if r is None:
                continue
            order, path, ep = r
            edges = {(x, y) if x <= y else (y, x) for x, y in zip(path, path[1:], strict=False)}
            if edges & blocked:
                continue
            synth("procedure", route_name(path[0], wp),
                  f"Route {' -> '.join(path)} works ({ep}).", [ep],
                  {"fact": "route", "path": path, "order": order}, ("route",))
        for goal, eps in sorted(fails.items()):
            last_seen = max((o for w in sight.get(goal, {}).values() for o in w.values()),
                            default=-1)
            eps = {ep: o for ep, o in eps.items() if o > last_seen}
            if goal in located or not eps:
                continue
            srcs = newest(eps)
            n = len(eps)
            synth("negative", failure_name(goal),
                  f"Searches for the {goal} block failed {n} time{'s' if n != 1 else ''} "
                  f"(last {srcs[0]}); search unexplored waypoints.", srcs,
                  {"fact": "failed", "goal": goal, "order": eps[srcs[0]]}, ("failed", goal))
        taken = {c.args["name"] for c in out}
        for e, srcs in keep:
            if e.name not in taken:
                synth(e.kind, e.name, e.body, [ep for ep in e.provenance.episodes if ep in srcs],
                      dict(e.meta))
        return out

    @staticmethod
    def _misses(traces: Mapping[str, EpisodeTrace], wp: str, after: int) -> int:
        return sum(1 for t in traces.values() if t.order > after
                   for w, cs, _ in t.looks if w == wp and not cs)


def _topic(e: PlanEntry) -> tuple[str, ...]:
    """What a (fast-write, updater or consolidated) entry is about, for merge reasons."""
    m = e.meta
    fact = m.get("fact")
    edge = m.get("edge")
    if isinstance(edge, list) and len(edge) == 2:
        a, b = sorted(str(x) for x in edge)
        return ("edge", a, b)
    if fact in ("seen", "block") or (e.name.startswith("block_") and m.get("colour")):
        return ("colour", slugify(str(m.get("colour", ""))))
    if fact in ("notfound", "failed") or (e.name.startswith("failed_") and m.get("goal")):
        return ("failed", slugify(str(m.get("colour") or m.get("goal") or "")))
    if fact == "empty":
        return ("empty",)
    if fact in ("path", "route") or "path" in m:
        return ("route",)
    return ("other", e.name)


def _is_anchor(e: PlanEntry) -> bool:
    return e.source == SOURCE and isinstance(e.meta.get("fact"), str) and e.meta.get(
        "fact") != "synthesized"


# -- LLM policy

_SYSTEM = (
    "You consolidate the plan memory of a mobile robot that searches a maze of waypoints for "
    "coloured blocks. You rewrite a region of memory entries into fewer, better entries. "
    "Tools (reply with exactly one JSON tool call per turn):\n"
    "- search_memory {query}: find related entries.\n"
    "- check_memory {name}: read one region entry.\n"
    "- get_source_trace {episode}: read what really happened in an episode.\n"
    "- synthesize {kind, name, body, sources}: write one new entry; kind is semantic (a fact), "
    "procedure (how to) or negative (what to avoid); body is one sentence with waypoint "
    "names; sources are the episodes that support it.\n"
    "- terminate {}: finish. Then ALL region entries are replaced by what you synthesized; "
    "anything not synthesized is forgotten.\n"
    "Keep only the latest place of each block, merge duplicates, drop facts that later "
    "episodes contradict, keep blocked corridors that are still blocked."
)


class LlmPolicy:
    """The local LLM as the consolidator: one schema-constrained tool call per step.

    The prompt shows the region (name, kind, body, sources), what was synthesized so far
    and the last ``transcript`` tool results; it is trimmed (oldest results first) to fit
    ``n_ctx`` minus the call's token bound. Invalid JSON or a schema violation ends the run
    (the caller aborts cleanly).
    """

    name = "llm"

    def __init__(self, llm: Any, *, n_ctx: int = 2048, transcript: int = 4,
                 result_chars: int = 300) -> None:
        if not hasattr(llm, "complete_json"):
            raise ValueError("llm must implement complete_json (JsonLlm)")
        self.llm = llm
        self.n_ctx = int(n_ctx)
        self.transcript = int(transcript)
        self.result_chars = int(result_chars)
        self.schema: dict[str, Any] = {}
        self._cfg = ConsolidationConfig()
        try:
            params = inspect.signature(llm.complete_json).parameters
            self._timeout_kw = "timeout_s" in params or any(
                p.kind == p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):  # pragma: no cover - builtins
            self._timeout_kw = False

    def start(self, region: Region, config: ConsolidationConfig) -> None:
        """Build the run's schema (region names and episodes as enums)."""
        self._cfg = config
        self._region = region
        self.schema = tool_schema(region.names, region.episodes,
                                  max_sources=min(8, config.max_fan_in))

    def messages(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                 step: int, max_steps: int) -> list[dict[str, str]]:
        """The chat messages of one step."""
        count = getattr(self.llm, "count_tokens", approx_tokens)
        eps = set(ws.region.episodes)
        region = "\n".join(
            f"{format_entry(e)} (sources: "
            f"{', '.join(ep for ep in e.provenance.episodes if ep in eps) or '-'})"
            for e in ws.region.entries)
        done = "\n".join(format_entry(e) for e in ws.synthesized.values()) or "(nothing yet)"
        shown = list(history)[-self.transcript:] if self.transcript else []
        while True:
            results = "\n".join(
                f"{c.summary(100)} -> {(r.text or r.error or '')[: self.result_chars]}"
                for c, r in shown) or "(none)"
            user = (f"Region to rewrite ({len(ws.region)} entries):\n{region}\n\n"
                    f"Episodes you may cite: {', '.join(ws.region.episodes)}\n\n"
                    f"Synthesized so far:\n{done}\n\nLast tool results:\n{results}\n\n"
                    f"Step {step} of {max_steps}. Reply with the next tool call as JSON.")
            msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]
            n = sum(int(count(m["content"])) + 8 for m in msgs)
            if n + self._cfg.call_max_tokens <= self.n_ctx or not shown:
                return msgs
            shown = shown[1:]

    def next_call(self, ws: Workspace, history: Sequence[tuple[ToolCall, ToolResult]],
                  step: int, max_steps: int, tokens_left: int) -> PolicyStep:
        """Ask the model for one call."""
        bound = min(self._cfg.call_max_tokens, tokens_left)
        if bound < 16:
            return PolicyStep(None, f"token budget exhausted ({tokens_left} left)")
        msgs = self.messages(ws, history, step, max_steps)
        count = getattr(self.llm, "count_tokens", approx_tokens)
        need = sum(int(count(m["content"])) + 8 for m in msgs) + bound
        if need > self.n_ctx:
            return PolicyStep(None, f"prompt needs {need} tokens with the reply, more than "
                              f"n_ctx={self.n_ctx}: lower region_budget_tokens")
        kw = {"timeout_s": self._cfg.llm_timeout_s} if self._timeout_kw else {}
        res: LlmResult = self.llm.complete_json(msgs, self.schema, bound, **kw)
        if not res.ok:
            return PolicyStep(None, f"invalid tool call: {res.error}", res.tokens,
                              res.prompt_tokens, res.raw_text)
        try:
            call = parse_tool_call(res.data)
        except ValueError as exc:
            return PolicyStep(None, f"invalid tool call: {exc}", res.tokens, res.prompt_tokens,
                              res.raw_text)
        return PolicyStep(call, None, res.tokens, res.prompt_tokens, res.raw_text)
