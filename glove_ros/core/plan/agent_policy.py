"""The task agent's choice policy: which goal waypoint to drive to next.

:func:`rank_options` turns beliefs into ranked :class:`PlanOption` s (the greedy rule, see
:mod:`glove_ros.core.plan.agent`); a :class:`Planner` picks one and answers a
:class:`PlanDecision`. :class:`GreedyPlanner` takes the best-ranked option;
:class:`LlmPlanner` asks a local LLM to choose among the same options and falls back to the
greedy choice on unusable output.

Separate from :mod:`glove_ros.core.plan.agent` because the policy is swappable (the
plan-aware planner in :mod:`glove_ros.core.plan.plan_planner` wraps it) and is tested on
its own, given a :class:`PlanContext`, without running the agent loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from glove_ros.core.memory.experience import MemoryEntry
from glove_ros.core.plan.agent_memory import Beliefs
from glove_ros.core.plan.agent_types import Task, WorldMap, look_names

__all__ = [
    "GreedyPlanner",
    "LlmPlanner",
    "LlmPlannerConfig",
    "PlanContext",
    "PlanDecision",
    "PlanOption",
    "Planner",
    "build_planner_messages",
    "rank_options",
]


@dataclass(frozen=True)
class PlanOption:
    """One goal the planner may choose: a reachable waypoint not yet looked at this task.

    ``kind`` is ``believed`` (memory says the target is there), ``unexplored`` or ``stale``
    (memory says something else; re-checked least recently seen first); ``share`` the
    fraction of trusted looks there that saw the target; ``distance`` metres by the route
    memory allows.
    """

    waypoint: str
    kind: str
    distance: float
    share: float = 0.0
    last_id: int = 0
    memory: str = ""  # majority outcome, "" when unexplored


_KIND_ORDER = {"believed": 0, "unexplored": 1, "stale": 2}


@dataclass(frozen=True)
class PlanContext:
    """Everything a planner sees for one decision."""

    task: Task
    current: str
    world_map: WorldMap
    beliefs: Beliefs
    options: tuple[PlanOption, ...]  # ranked by the greedy rule, best first
    checked: frozenset[str]
    avoid: frozenset[tuple[str, str]]
    step: int


@dataclass(frozen=True)
class PlanDecision:
    """A planner's answer: the chosen ``goal`` (None: no option) and why.

    ``source`` is ``greedy``, ``llm`` or ``fallback`` (the LLM's output was unusable and the
    greedy choice was taken; ``fallback_reason`` says why).
    """

    goal: str | None
    reason: str
    source: str = "greedy"
    fallback_reason: str = ""
    elapsed_s: float = 0.0


#: how believed locations are ordered: ``nearest`` first, or the ``latest`` look first
BELIEVED_ORDERS = ("nearest", "latest")


def check_believed_order(value: Any) -> str:
    """``value`` if it is one of :data:`BELIEVED_ORDERS`, else ValueError naming them (the one
    check behind the agent's, the benchmark's and the planner node's setting)."""
    if value not in BELIEVED_ORDERS:
        raise ValueError(f"believed_order must be one of {', '.join(BELIEVED_ORDERS)}, got "
                         f"{value!r}")
    return value


def rank_options(world_map: WorldMap, beliefs: Beliefs, current: str, color: str,
                 checked: Iterable[str], avoid: Iterable[tuple[str, str]],
                 belief_threshold: float = 0.5, believed_order: str = "nearest"
                 ) -> tuple[PlanOption, ...]:
    """Reachable waypoints not looked at this task, best first (the greedy rule).

    Believed target locations (share >= ``belief_threshold``) nearest first (``believed_order``
    ``latest``: the place whose last trusted look is the most recent first, ties nearest: of
    two places memory believes hold a person, the one they were seen at last), then
    unexplored waypoints nearest first, then the rest: those where the colour was seen at all
    first (larger share first), then least recently seen first (ties: nearest).
    """
    check_believed_order(believed_order)
    dist, _ = world_map.distances(current, avoid)
    done = set(checked)
    out = []
    for w, d in dist.items():
        if w == current or w in done:
            continue
        lb = beliefs.looks.get(w)
        if lb is None or lb.n == 0:
            out.append(PlanOption(w, "unexplored", d))
            continue
        share = lb.share(color)
        kind = "believed" if share >= belief_threshold else "stale"
        out.append(PlanOption(w, kind, d, share, lb.last_id, lb.majority))

    def key(o: PlanOption) -> tuple[Any, ...]:
        if o.kind == "believed":
            if believed_order == "latest":
                return (0, -o.last_id, o.distance, o.waypoint)
            return (0, o.distance, -o.share, o.waypoint)
        if o.kind == "unexplored":
            return (1, o.distance, 0, o.waypoint)
        return (2, -o.share, o.last_id, o.distance, o.waypoint)

    return tuple(sorted(out, key=key))


class Planner(Protocol):
    """Chooses the next goal waypoint among ``ctx.options``."""

    name: str

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """Pick a goal (or None when there is no option)."""
        ...


def _describe(o: PlanOption, color: str) -> str:
    if o.kind == "believed":
        return f"{o.waypoint}: memory says the {color} block is there ({o.share:.0%} of looks)"
    if o.kind == "unexplored":
        return f"{o.waypoint}: unexplored"
    seen = ", ".join(sorted(look_names(o.memory))) if o.memory else ""
    if o.share > 0:
        return (f"{o.waypoint}: the {color} block was seen there in {o.share:.0%} of looks, "
                f"mostly {seen or 'nothing'}")
    return f"{o.waypoint}: memory says {seen or 'nothing'} there"


class GreedyPlanner:
    """Deterministic planner: the first option of :func:`rank_options`."""

    name = "greedy"

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """The best-ranked option."""
        if not ctx.options:
            return PlanDecision(None, "no reachable waypoint left to look at")
        best = ctx.options[0]
        return PlanDecision(best.waypoint, _describe(best, ctx.task.color))


@dataclass(frozen=True)
class LlmPlannerConfig:
    """Bounds of one LLM planning call.

    ``max_prompt_tokens`` budgets the user prompt (memory lines are dropped, least relevant
    first, to fit); ``max_tokens`` bounds the reply; a call slower than ``timeout_s`` is
    treated as unusable; ``max_options`` caps the options offered (best-ranked kept).
    """

    max_prompt_tokens: int = 400
    max_tokens: int = 32
    timeout_s: float = 20.0
    max_options: int = 12

    def validate(self) -> LlmPlannerConfig:
        """Raise ValueError naming the bad field."""
        if not isinstance(self.max_prompt_tokens, int) or self.max_prompt_tokens < 64:
            raise ValueError(f"max_prompt_tokens must be an int >= 64, got "
                             f"{self.max_prompt_tokens!r}")
        if not isinstance(self.max_tokens, int) or not 8 <= self.max_tokens <= 512:
            raise ValueError(f"max_tokens must be an int in 8..512 (a waypoint choice is "
                             f"~10 tokens), got {self.max_tokens!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if not isinstance(self.max_options, int) or self.max_options < 1:
            raise ValueError(f"max_options must be an int >= 1, got {self.max_options!r}")
        return self


_SYSTEM_PROMPT = (
    "You are the planner of a small indoor robot that searches for coloured blocks. "
    "Choose the next waypoint to drive to. Prefer a waypoint where memory says the block "
    "is; otherwise an unexplored one; prefer near ones. Answer with JSON only: "
    '{"waypoint": "<one of the options>"}.'
)


def build_planner_messages(ctx: PlanContext, options: Sequence[PlanOption],
                           budget_tokens: int, count: Callable[[str], int]
                           ) -> list[dict[str, str]]:
    """Chat messages for one decision, the user prompt within ``budget_tokens``.

    The prompt holds the task, the current waypoint, the options (one line each, with what
    memory says and the distance) and then a compact memory summary (other waypoints'
    looks, corridors remembered blocked), most relevant first, cut to the budget. The
    options are always kept (at least the first one).
    """
    color = ctx.task.color
    head = [f"Task: find the {color} block.", f"Robot is at: {ctx.current}."]
    if ctx.checked:
        head.append("Already looked at in this task: " + ", ".join(sorted(ctx.checked)) + ".")
    head.append("Options:")
    lines = list(head)
    opt_lines = [f"- {_describe(o, color)}, {o.distance:.1f} m" for o in options]
    memory_lines = []
    offered = {o.waypoint for o in options}
    for w, lb in sorted(ctx.beliefs.looks.items(),
                        key=lambda kv: (-kv[1].share(color), kv[0])):
        if w in offered:
            continue
        memory_lines.append(f"- {w}: saw {lb.majority.split('=', 1)[-1] or 'nothing'}"
                            f" ({lb.n} looks)")
    for k in sorted(ctx.beliefs.blocked_edges):
        memory_lines.append(f"- corridor {k[0]}-{k[1]}: remembered blocked")

    def size(ls: Sequence[str]) -> int:
        return count("\n".join(ls))

    lines.append(opt_lines[0])
    for ol in opt_lines[1:]:
        if size([*lines, ol]) > budget_tokens:
            break
        lines.append(ol)
    if memory_lines and size([*lines, "Memory of other places:"]) <= budget_tokens:
        lines.append("Memory of other places:")
        for ml in memory_lines:
            if size([*lines, ml]) > budget_tokens:
                break
            lines.append(ml)
    return [{"role": "system", "content": _SYSTEM_PROMPT},
            {"role": "user", "content": "\n".join(lines)}]


class LlmPlanner:
    """Planner that asks a local LLM (:class:`~glove_ros.core.llm.runtime.JsonLlm`) for the goal.

    The prompt (:mod:`glove_ros.core.llm.prompts`) is a static prefix (rules and worked
    examples, reused from llama.cpp's KV cache) and the decision: the options, each with
    what memory says about the target there as short facts with status and age, and the
    plan-memory notes (:attr:`notes`, set by
    :class:`~glove_ros.core.plan.plan_planner.PlanAwarePlanner`). With ``history`` (a callable
    waypoint -> look entries *including* suppressed and replaced ones, and ``now`` its clock)
    the facts show stale memories as such, with the verifier's reason; without it they come
    from the trusted beliefs of the context. Options beyond the prompt budget
    (``max_prompt_tokens``) are dropped, worst-ranked first.

    The reply is constrained by :func:`~glove_ros.core.llm.prompts.decision_schema`
    (``{"rule", "waypoint"}``, the waypoint one the named rule allows). An error (invalid
    JSON, schema violation, token bound, llama.cpp error), a waypoint that is not an option
    or a reply slower than ``config.timeout_s`` falls back to :class:`GreedyPlanner`; the
    decision says so (``source="fallback"``, ``fallback_reason`` "<kind>: <detail>") and
    :attr:`fallbacks` counts it by kind: ``llm output unusable``, ``llm too slow``,
    ``llm choice not an option``, ``llm raised <Exception>``.
    With a single option the LLM is not asked.
    """

    name = "llm"

    def __init__(self, llm: Any, config: LlmPlannerConfig | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 history: Callable[[str], Sequence[MemoryEntry]] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.llm = llm
        self.config = (config or LlmPlannerConfig()).validate()
        self.greedy = GreedyPlanner()
        self.clock = clock
        self.calls = 0
        self.fallbacks: dict[str, int] = {}
        self.last_messages: list[dict[str, str]] = []
        self.notes: list[Any] = []
        self.history = history
        self.now = now
        self._schema: dict[str, Any] = {}

    @property
    def fallback_count(self) -> int:
        """Total decisions that fell back to greedy."""
        return sum(self.fallbacks.values())

    def set_notes(self, entries: Iterable[Any]) -> None:
        """Plan-memory entries (``PlanEntry``-like) the prompt shows as notes."""
        self.notes = list(entries)

    def _count(self, text: str) -> int:
        counter = getattr(self.llm, "count_tokens", None)
        if counter is not None:
            return int(counter(text))
        from glove_ros.core.llm.runtime import approx_tokens

        return approx_tokens(text)

    def messages(self, ctx: PlanContext, options: Sequence[PlanOption]
                 ) -> list[dict[str, str]]:
        """The chat messages of one decision (static prefix + this decision)."""
        from glove_ros.core.llm.prompts import (
            VERIFIED,
            Fact,
            FactSource,
            OptionView,
            decision_messages,
            decision_schema,
            notes_from_entries,
        )

        color = ctx.task.color
        source = FactSource(self.history, self.now) if self.history is not None else None
        views = []
        for o in options:
            if source is not None:
                facts = source.facts(o.waypoint)
            else:
                lb = ctx.beliefs.looks.get(o.waypoint)
                facts = tuple(Fact(tuple(sorted(look_names(out))), VERIFIED, None, n)
                              for out, n in sorted((lb.counts if lb else {}).items()))
            views.append(OptionView(o.waypoint, o.distance, facts))
        notes = notes_from_entries(self.notes, color)
        extra = []
        if ctx.checked:
            extra.append("Already looked at: " + ", ".join(sorted(ctx.checked)) + ".")
        msgs = decision_messages(color, ctx.current, views, notes, extra)
        while len(views) > 1 and self._count(msgs[-1]["content"]) > self.config.max_prompt_tokens:
            views.pop()
            msgs = decision_messages(color, ctx.current, views, notes, extra)
        self._schema = decision_schema(color, views, notes)
        return msgs

    def choose(self, ctx: PlanContext) -> PlanDecision:
        """Ask the LLM; fall back to the greedy choice on unusable output."""
        options = ctx.options[: self.config.max_options]
        if len(options) <= 1:
            return self.greedy.choose(ctx)
        messages, schema = self.messages(ctx, options), self._schema
        self.last_messages = messages
        self.calls += 1
        t0 = self.clock()
        try:
            result = self.llm.complete_json(messages, schema, max_tokens=self.config.max_tokens)
        except Exception as exc:  # a backend must not stop the robot
            return self._fallback(ctx, f"llm raised {type(exc).__name__}", str(exc),
                                  self.clock() - t0)
        elapsed = max(self.clock() - t0, float(getattr(result, "elapsed_s", 0.0) or 0.0))
        err = getattr(result, "error", "unknown error")
        data = getattr(result, "data", None)
        if err is not None or data is None:
            return self._fallback(ctx, "llm output unusable", str(err), elapsed)
        if elapsed > self.config.timeout_s:
            return self._fallback(ctx, "llm too slow",
                                  f"{elapsed:.1f} s > {self.config.timeout_s:g} s", elapsed)
        choice = data.get("waypoint") if isinstance(data, dict) else None
        valid = {o.waypoint: o for o in options}
        if choice not in valid:
            return self._fallback(ctx, "llm choice not an option", f"chose {choice!r}",
                                  elapsed)
        return PlanDecision(choice, "llm: " + _describe(valid[choice], ctx.task.color),
                            source="llm", elapsed_s=elapsed)

    def _fallback(self, ctx: PlanContext, kind: str, detail: str, elapsed: float
                  ) -> PlanDecision:
        """The greedy decision, marked as a fallback; counted under ``kind``."""
        self.fallbacks[kind] = self.fallbacks.get(kind, 0) + 1
        g = self.greedy.choose(ctx)
        return PlanDecision(g.goal, g.reason, source="fallback",
                            fallback_reason=f"{kind}: {detail}", elapsed_s=elapsed)
