"""Plan-memory updaters: propose M_hat after each task (DESIGN.md section 4).

An updater turns an episode outcome into an edit set on the active plan memory; the store
turns the edit set into a :class:`~glove_ros.core.plan.plan_memory.Candidate`, and the Janus gate
decides whether it is deployed. Two updaters:

- :class:`RuleUpdater` -- deterministic, from the episode outcome alone: "the red block was
  seen at wp_3" facts, negative lessons for blocked corridors and failed searches,
  successful routes as procedures, and removal of whatever the episode contradicts (a block
  seen elsewhere, a corridor traversed again, a route now blocked). A single empty look is a
  *miss*, not a contradiction: a fact is dropped on a miss only after ``miss_threshold``
  misses in a row (a detection missed once is nuisance, not drift).
- :class:`LlmUpdater` -- ExpeL / cheatsheet-style reflection by the local LLM with a
  JSON-schema-constrained edit list. Anything unusable (invalid JSON, no valid edit, an edit
  set the store refuses) gives no candidate and leaves memory unchanged.

The episode types here (:class:`EpisodeOutcome`, :class:`Observation`, :class:`Traversal`)
are small ROS-free records; ``conversions.py`` or the agent builds them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from glove_ros.core.llm.runtime import JsonLlm, LlmResult
from glove_ros.core.memory.experience import MAX_KEY_CHARS
from glove_ros.core.plan.plan_entries import (
    KINDS,
    MAX_BODY,
    MAX_NAME,
    Edit,
    PlanEntry,
    Provenance,
    apply_edits,
    slugify,
)
from glove_ros.core.plan.plan_memory import Candidate, PlanMemoryStore
from glove_ros.core.plan.plan_retrieval import assemble_prompt, rank_entries

__all__ = [
    "Observation",
    "Traversal",
    "EpisodeOutcome",
    "UpdateProposal",
    "Updater",
    "RuleUpdaterConfig",
    "RuleUpdater",
    "LlmUpdaterConfig",
    "LlmUpdater",
    "fact_name",
    "blocked_name",
    "failure_name",
    "route_name",
    "edit_list_schema",
    "summarize_episode",
]


# --------------------------------------------------------------------------------------------
# episode records


@dataclass(frozen=True)
class Observation:
    """One look at a waypoint: the colours of the blocks seen there (the outcome signature).
    An empty ``colours`` means the robot looked and saw no block."""

    waypoint: str
    colours: tuple[str, ...] = ()
    transition_id: int | None = None


@dataclass(frozen=True)
class Traversal:
    """One attempt to drive ``source -> target``: reached, or ``blocked``."""

    source: str
    target: str
    blocked: bool = False
    transition_id: int | None = None


#: longest accepted task instruction or failure reason of an episode (characters)
MAX_TASK_CHARS = 1024
#: most looks + drives one episode may carry into plan memory
MAX_EPISODE_STEPS = 10_000


@dataclass(frozen=True)
class EpisodeOutcome:
    """What happened in one task episode.

    Attributes:
        episode_id: unique id (goes into provenance).
        task: the instruction ("find the red block").
        goal: the colour looked for (``None`` for tasks without one).
        success: whether the task was verified done.
        reported_waypoint: where the agent reported the goal (``None`` if it did not).
        observations: looks, in order.
        traversals: drives, in order.
        failure_reason: short text when ``success`` is False ("budget exhausted").
    """

    episode_id: str
    task: str
    goal: str | None = None
    success: bool = False
    reported_waypoint: str | None = None
    observations: tuple[Observation, ...] = ()
    traversals: tuple[Traversal, ...] = ()
    failure_reason: str = ""

    def validate(self) -> EpisodeOutcome:
        """Raise ``ValueError`` on a malformed record."""
        if not isinstance(self.episode_id, str) or not self.episode_id:
            raise ValueError("episode_id must be a non-empty string")
        if not isinstance(self.task, str):
            raise ValueError("task must be a string")
        for name, value, limit in (
            ("episode_id", self.episode_id, MAX_KEY_CHARS),
            ("task", self.task, MAX_TASK_CHARS),
            ("goal", self.goal or "", MAX_KEY_CHARS),
            ("reported_waypoint", self.reported_waypoint or "", MAX_KEY_CHARS),
            ("failure_reason", self.failure_reason, MAX_TASK_CHARS),
        ):
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a string, got {type(value).__name__}")
            if len(value) > limit:
                raise ValueError(f"{name} is {len(value)} characters long; the limit is {limit}")
            if "\x00" in value:
                raise ValueError(f"{name} contains a NUL character")
        if len(self.observations) + len(self.traversals) > MAX_EPISODE_STEPS:
            raise ValueError(
                f"episode has {len(self.observations) + len(self.traversals)} looks and drives; "
                f"the limit is {MAX_EPISODE_STEPS}")
        if self.goal is not None and (not isinstance(self.goal, str) or not slugify(self.goal)):
            raise ValueError(f"goal must be a colour name or None (got {self.goal!r})")
        for o in self.observations:
            if not isinstance(o, Observation) or not isinstance(o.waypoint, str) or not o.waypoint:
                raise ValueError(f"bad observation {o!r}")
            if not isinstance(o.colours, tuple) or not all(
                isinstance(c, str) and slugify(c) for c in o.colours
            ):
                raise ValueError(f"observation colours must be a tuple of names: {o!r}")
        for tr in self.traversals:
            if not isinstance(tr, Traversal) or not tr.source or not tr.target:
                raise ValueError(f"bad traversal {tr!r}")
        return self

    @property
    def transition_ids(self) -> tuple[int, ...]:
        """All transition ids mentioned, in order."""
        ids = [o.transition_id for o in self.observations] + [
            t.transition_id for t in self.traversals
        ]
        return tuple(dict.fromkeys(i for i in ids if i is not None))


def fact_name(colour: str) -> str:
    """Name of the semantic fact about where ``colour``'s block is: ``block_<colour>``."""
    return f"block_{slugify(colour)}"[:MAX_NAME]


def blocked_name(a: str, b: str) -> str:
    """Name of the negative lesson about corridor a-b (undirected)."""
    x, y = sorted((slugify(a), slugify(b)))
    return f"blocked_{x}_{y}"[:MAX_NAME]


def failure_name(goal: str) -> str:
    """Name of the negative lesson about failing to find ``goal``."""
    return f"failed_{slugify(goal)}"[:MAX_NAME]


def route_name(start: str, end: str) -> str:
    """Name of the procedure for the route ``start -> end``."""
    return f"route_{slugify(start)}_{slugify(end)}"[:MAX_NAME]


def summarize_episode(o: EpisodeOutcome) -> str:
    """A short plain-text account of an episode (for prompts and logs)."""
    lines = [f"Episode {o.episode_id}: task '{o.task}'"]
    if o.goal:
        lines[0] += f" (goal: {o.goal} block)"
    for tr in o.traversals:
        lines.append(
            f"- drove {tr.source} -> {tr.target}: {'BLOCKED' if tr.blocked else 'reached'}"
        )
    for ob in o.observations:
        seen = ", ".join(ob.colours) + " block" if ob.colours else "no block"
        lines.append(f"- looked at {ob.waypoint}: saw {seen}")
    if o.success:
        lines.append(f"Result: success (reported {o.reported_waypoint or 'n/a'}).")
    else:
        why = f": {o.failure_reason}" if o.failure_reason else ""
        rep = f", reported {o.reported_waypoint}" if o.reported_waypoint else ""
        lines.append(f"Result: FAILED{rep}{why}.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# protocol


@dataclass(frozen=True)
class UpdateProposal:
    """An updater's output: the edit set (possibly empty) and what was dropped and why."""

    edits: tuple[Edit, ...]
    dropped: tuple[str, ...] = ()
    error: str | None = None
    llm: LlmResult | None = None


class Updater(Protocol):
    """What the plan-gate node needs from an updater."""

    def propose_edits(
        self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
    ) -> UpdateProposal:
        """The edit set for ``outcome`` on the memory ``entries`` (nothing is written)."""
        ...

    def propose(self, store: PlanMemoryStore, outcome: EpisodeOutcome) -> Candidate | None:
        """A stored candidate on the store's active version, or ``None`` (memory unchanged)."""
        ...


def _propose_on_store(
    updater: Updater, store: PlanMemoryStore, outcome: EpisodeOutcome, source: str
) -> tuple[Candidate | None, UpdateProposal]:
    outcome.validate()
    prop = updater.propose_edits(store.entries(), outcome)
    if not prop.edits:
        return None, prop
    try:
        cand = store.propose(list(prop.edits), source=source,
                             reason=f"episode {outcome.episode_id}")
    except ValueError as exc:  # the store refused the set: nothing written
        return None, UpdateProposal(prop.edits, prop.dropped, f"store refused: {exc}", prop.llm)
    return cand, prop


# --------------------------------------------------------------------------------------------
# rule updater


@dataclass(frozen=True)
class RuleUpdaterConfig:
    """Rule-updater options.

    Attributes:
        miss_threshold: consecutive empty looks at a waypoint before a fact placing a block
            there is dropped (seeing *another* block there drops it at once).
        unique_blocks: one block per colour (the reference maze): seeing the red block at
            wp_5 moves the fact from wp_3 to wp_5. False keeps a set of waypoints per colour.
        record_routes: store successful routes (>= 2 drives) as procedures.
        record_failures: store a negative lesson when a search fails.
    """

    miss_threshold: int = 2
    unique_blocks: bool = True
    record_routes: bool = True
    record_failures: bool = True

    def validate(self) -> RuleUpdaterConfig:
        """Raise ``ValueError`` on a bad value. Returns ``self``."""
        if isinstance(self.miss_threshold, bool) or not isinstance(self.miss_threshold, int) or (
            self.miss_threshold < 1
        ):
            raise ValueError(f"miss_threshold must be an int >= 1 (got {self.miss_threshold!r})")
        for k in ("unique_blocks", "record_routes", "record_failures"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"{k} must be a bool")
        return self


@dataclass
class _Draft:
    kind: str
    body: str
    meta: dict[str, Any]
    prov: Provenance
    reasons: list[str] = field(default_factory=list)


def _fact_body(colour: str, wps: Sequence[str]) -> str:
    if len(wps) == 1:
        return f"The {colour} block was seen at {wps[0]}."
    return f"The {colour} block was seen at {', '.join(wps[:-1])} and {wps[-1]}."


class RuleUpdater:
    """Deterministic updater from the episode outcome (see module docstring)."""

    def __init__(self, config: RuleUpdaterConfig | None = None) -> None:
        self.config = (config or RuleUpdaterConfig()).validate()
        self.last: UpdateProposal | None = None

    def propose(self, store: PlanMemoryStore, outcome: EpisodeOutcome) -> Candidate | None:
        """Store the edit set as a candidate; ``None`` when the episode changes nothing."""
        cand, self.last = _propose_on_store(self, store, outcome, "rule")
        return cand

    def propose_edits(
        self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
    ) -> UpdateProposal:
        """The edits ``outcome`` implies for ``entries`` (pure)."""
        o = outcome.validate()
        cfg = self.config
        base = {e.name: e for e in entries}
        draft: dict[str, _Draft | None] = {
            e.name: _Draft(e.kind, e.body, dict(e.meta), e.provenance) for e in entries
        }

        def prov(tid: int | None) -> Provenance:
            return Provenance((o.episode_id,), (tid,) if tid is not None else ())

        def note(name: str, why: str) -> None:
            d = draft.get(name)
            if d is not None and why not in d.reasons:
                d.reasons.append(why)

        removed: dict[str, str] = {}

        def drop(name: str, why: str) -> None:
            if draft.get(name) is not None:
                draft[name] = None
                removed[name] = why

        # 1. block facts
        fact_wps: dict[str, list[str]] = {}
        for name, d in draft.items():
            if d is not None and d.kind == "semantic" and name.startswith("block_"):
                wps = d.meta.get("waypoints")
                if isinstance(wps, list) and all(isinstance(w, str) for w in wps):
                    fact_wps[name] = list(wps)
        for ob in o.observations:
            seen = {slugify(c): c for c in ob.colours}
            # contradictions of remembered facts at this waypoint
            for name, wps in list(fact_wps.items()):
                d = draft[name]
                if d is None or ob.waypoint not in wps:
                    continue
                colour = d.meta.get("colour", name[len("block_"):])
                if slugify(colour) in seen:
                    continue
                misses = dict(d.meta.get("misses", {}))
                if seen:  # another block is there: strong evidence
                    why = (f"episode {o.episode_id}: {ob.waypoint} showed "
                           f"{', '.join(ob.colours)}, not {colour}")
                    count = cfg.miss_threshold
                else:
                    count = int(misses.get(ob.waypoint, 0)) + 1
                    why = (f"episode {o.episode_id}: no block seen at {ob.waypoint} "
                           f"({count} miss{'es' if count > 1 else ''})")
                if count >= cfg.miss_threshold:
                    wps.remove(ob.waypoint)
                    misses.pop(ob.waypoint, None)
                    if not wps:
                        drop(name, f"contradicted: {why}")
                        del fact_wps[name]
                        continue
                    d.body = _fact_body(colour, wps)
                else:
                    misses[ob.waypoint] = count
                d.meta = {**d.meta, "waypoints": list(wps), "misses": misses}
                d.prov = d.prov.merged(prov(ob.transition_id))
                note(name, why)
            # positive evidence
            for slug, colour in seen.items():
                name = fact_name(colour)
                d = draft.get(name)
                if d is None or name not in fact_wps:
                    if d is not None and name not in fact_wps:
                        # a fact of that name written by someone else: rewrite it
                        note(name, f"episode {o.episode_id}: rewritten from observation")
                    draft[name] = _Draft(
                        "semantic", _fact_body(colour, [ob.waypoint]),
                        {"colour": slug, "waypoints": [ob.waypoint], "misses": {}},
                        prov(ob.transition_id),
                        [f"episode {o.episode_id}: {colour} block seen at {ob.waypoint}"],
                    )
                    removed.pop(name, None)
                    fact_wps[name] = [ob.waypoint]
                    continue
                wps = fact_wps[name]
                misses = {k: v for k, v in dict(d.meta.get("misses", {})).items()
                          if k != ob.waypoint}
                if cfg.unique_blocks and wps != [ob.waypoint]:
                    note(name, f"episode {o.episode_id}: {colour} block now seen at "
                               f"{ob.waypoint} (was {', '.join(wps)})")
                    wps[:] = [ob.waypoint]
                    misses = {}
                    d.prov = prov(ob.transition_id)  # old support no longer holds
                elif ob.waypoint not in wps:
                    wps.append(ob.waypoint)
                    note(name, f"episode {o.episode_id}: {colour} block also at {ob.waypoint}")
                    d.prov = d.prov.merged(prov(ob.transition_id))
                elif ob.waypoint in dict(d.meta.get("misses", {})):
                    note(name, f"episode {o.episode_id}: {colour} block confirmed at "
                               f"{ob.waypoint}; earlier misses were nuisance")
                # else: plain confirmation, nothing to change (experience memory keeps it)
                d.body = _fact_body(colour, wps)
                d.meta = {**d.meta, "colour": slug, "waypoints": list(wps), "misses": misses}

        # 2. corridors
        for tr in o.traversals:
            name = blocked_name(tr.source, tr.target)
            if tr.blocked:
                if draft.get(name) is None:
                    draft[name] = _Draft(
                        "negative",
                        f"The corridor between {tr.source} and {tr.target} was blocked "
                        f"(episode {o.episode_id}); plan around it.",
                        {"edge": sorted((tr.source, tr.target))},
                        prov(tr.transition_id),
                        [f"episode {o.episode_id}: {tr.source} -> {tr.target} blocked"],
                    )
                    removed.pop(name, None)
                else:
                    draft[name].prov = draft[name].prov.merged(prov(tr.transition_id))
                # routes through a blocked corridor are contradicted
                for rname, d in list(draft.items()):
                    if d is None or d.kind != "procedure" or not rname.startswith("route_"):
                        continue
                    path = d.meta.get("path", [])
                    edges = {tuple(sorted(p)) for p in zip(path, path[1:], strict=False)}
                    if tuple(sorted((tr.source, tr.target))) in edges:
                        drop(rname, f"contradicted: episode {o.episode_id} found "
                                    f"{tr.source} -> {tr.target} blocked")
            elif draft.get(name) is not None and draft[name].kind == "negative":
                drop(name, f"re-opened: {tr.source} -> {tr.target} traversed in episode "
                           f"{o.episode_id}")

        # 3. routes
        if cfg.record_routes and o.success and o.traversals:
            path = [o.traversals[0].source]
            ok = True
            for tr in o.traversals:
                if tr.blocked or tr.source != path[-1]:
                    ok = False
                    break
                path.append(tr.target)
            if ok and len(path) >= 3:
                name = route_name(path[0], path[-1])
                body = f"Route {' -> '.join(path)} works (episode {o.episode_id})."
                tids = tuple(t.transition_id for t in o.traversals if t.transition_id is not None)
                draft[name] = _Draft("procedure", body, {"path": path},
                                     Provenance((o.episode_id,), tids),
                                     [f"episode {o.episode_id}: route succeeded"])
                removed.pop(name, None)

        # 4. failures
        if o.goal:
            fname = failure_name(o.goal)
            if o.success:
                if draft.get(fname) is not None:
                    drop(fname, f"resolved: the {o.goal} block was found in episode "
                                f"{o.episode_id}")
            elif cfg.record_failures:
                searched = [ob.waypoint for ob in o.observations
                            if slugify(o.goal) not in {slugify(c) for c in ob.colours}]
                searched = list(dict.fromkeys(searched))
                parts = [f"Searching for the {o.goal} block failed in episode {o.episode_id}"]
                if o.failure_reason:
                    parts[0] += f" ({o.failure_reason})"
                if o.reported_waypoint:
                    parts.append(f"wrongly reported at {o.reported_waypoint}")
                if searched:
                    parts.append(f"not found at {', '.join(searched)}")
                body = "; ".join(parts) + "."
                if len(body) > MAX_BODY:
                    body = body[: MAX_BODY - 3] + "..."
                draft[fname] = _Draft(
                    "negative", body, {"goal": slugify(o.goal), "searched": searched},
                    Provenance((o.episode_id,), o.transition_ids),
                    [f"episode {o.episode_id}: search failed"],
                )
                removed.pop(fname, None)

        # diff the draft against the base
        edits: list[Edit] = []
        for name, d in draft.items():
            old = base.get(name)
            if d is None:
                if old is not None:
                    edits.append(Edit.remove(name, removed.get(name, "contradicted")))
                continue
            reason = "; ".join(d.reasons)[:500]
            if old is None:
                edits.append(Edit.add(d.kind, name, d.body, d.prov, d.meta, reason))
            elif (old.kind, old.body, dict(old.meta), old.provenance) != (
                d.kind, d.body, d.meta, d.prov
            ):
                edits.append(Edit("edit", name, d.kind, d.body, d.prov, d.meta,
                                  reason or "updated"))
        return UpdateProposal(tuple(edits))


# --------------------------------------------------------------------------------------------
# LLM updater


@dataclass(frozen=True)
class LlmUpdaterConfig:
    """LLM-updater options.

    Attributes:
        max_edits: most edits the schema allows per reflection.
        max_tokens: generation bound of one reflection.
        memory_budget_tokens: budget of the memory shown in the prompt.
        name_max: longest entry name the schema allows.
        body_max: longest body the schema allows.
    """

    max_edits: int = 3
    max_tokens: int = 256
    memory_budget_tokens: int = 400
    name_max: int = 40
    body_max: int = 160

    def validate(self) -> LlmUpdaterConfig:
        """Raise ``ValueError`` on a bad value. Returns ``self``."""
        checks = {
            "max_edits": (1, 16),
            "max_tokens": (16, 4096),
            "memory_budget_tokens": (0, 100_000),
            "name_max": (4, MAX_NAME),
            "body_max": (16, MAX_BODY),
        }
        for k, (lo, hi) in checks.items():
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{k} must be an int in [{lo}, {hi}] (got {v!r})")
        return self


def edit_list_schema(max_edits: int = 3, name_max: int = 40, body_max: int = 160) -> dict:
    """JSON schema of the reflection reply: ``{"edits": [{op, kind, name, body}, ...]}``.

    For ``remove`` the body is the reason. Kept flat (no anyOf) so that a small model's
    grammar stays simple.
    """
    return {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "maxItems": max_edits,
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": ["add", "edit", "remove"]},
                        "kind": {"type": "string", "enum": list(KINDS)},
                        "name": {"type": "string", "minLength": 1, "maxLength": name_max},
                        "body": {"type": "string", "minLength": 1, "maxLength": body_max},
                    },
                    "required": ["op", "kind", "name", "body"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["edits"],
        "additionalProperties": False,
    }


_SYSTEM = (
    "You maintain the plan memory of a mobile robot that searches a maze of waypoints for "
    "coloured blocks. Memory entries are short one-line notes: semantic (a fact about the "
    "world), procedure (how to do something), negative (what to avoid). After each episode you "
    "propose a few edits: add a new note, edit a note whose facts changed, or remove a note "
    "the episode proved wrong (then body = the reason). Only write what the episode shows. "
    "Reply with JSON only."
)
# worked examples (places and colours the robot's worlds do not use): a moved block is an
# edit, a new sighting an add, a confirmation no edit -- small models otherwise answer
# "no edits" to everything
_EXAMPLES = (
    ("Plan memory:\n- [semantic] block_purple: The purple block is at atrium.\n\n"
     "Episode x1: task 'find the purple block' (goal: purple block)\n"
     "- looked at atrium: saw no block\n- looked at cellar: saw purple block\n"
     "Result: success (reported cellar).",
     '{"edits": [{"op": "edit", "kind": "semantic", "name": "block_purple", '
     '"body": "The purple block is at cellar; it is no longer at atrium."}]}'),
    ("Plan memory: (empty)\n\nEpisode x2: task 'find the orange block' (goal: orange "
     "block)\n- looked at foyer: saw no block\n- looked at attic: saw orange block\n"
     "Result: success (reported attic).",
     '{"edits": [{"op": "add", "kind": "semantic", "name": "block_orange", '
     '"body": "The orange block is at attic."}]}'),
    ("Plan memory:\n- [semantic] block_orange: The orange block is at attic.\n\n"
     "Episode x3: task 'find the orange block' (goal: orange block)\n"
     "- looked at attic: saw orange block\nResult: success (reported attic).",
     '{"edits": []}'),
)
_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().strip(".!;, ").lower()


# what small models copy from instructions instead of writing a note
_PLACEHOLDERS = frozenset({"short_name", "name", "one line", "one_line", "body", "note",
                           "the note itself", "string", "op", "kind"})


class LlmUpdater:
    """Reflection by the local LLM, constrained to an edit-list JSON schema.

    Every edit from the model is normalised (names slugified, whitespace collapsed) and
    checked against the memory: ``add`` of an existing name becomes ``edit``; ``edit`` or
    ``remove`` of a missing name, a second edit of one name, an ``add`` repeating an existing
    note's body, an edit that changes nothing and placeholders copied from the prompt are
    dropped (listed in ``UpdateProposal.dropped``). Invalid output -> no edits -> no
    candidate.
    The result of the last call is in ``last``.
    """

    def __init__(self, llm: JsonLlm, config: LlmUpdaterConfig | None = None) -> None:
        if not hasattr(llm, "complete_json"):
            raise ValueError("llm must implement JsonLlm.complete_json")
        self.llm = llm
        self.config = (config or LlmUpdaterConfig()).validate()
        self.schema = edit_list_schema(
            self.config.max_edits, self.config.name_max, self.config.body_max
        )
        self.last: UpdateProposal | None = None

    def messages(self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome) -> list[dict]:
        """The reflection prompt."""
        count = getattr(self.llm, "count_tokens", None)
        mem = assemble_prompt(
            rank_entries(entries, outcome.task),
            self.config.memory_budget_tokens,
            **({"count_tokens": count} if callable(count) else {}),
        )
        memory = mem.text or "Plan memory: (empty)"
        user = (
            f"{memory}\n\n{summarize_episode(outcome)}\n\n"
            f"Write at most {self.config.max_edits} edits about this episode. Each edit has "
            "op (add, edit or remove), kind (semantic, procedure or negative), name (a few "
            "words naming the note, e.g. the block colour or the corridor) and body (the note "
            "itself, one sentence with the waypoint names). Where the episode saw a block "
            "at a place no note gives it, add or edit that block's note; an empty edits list "
            "only when memory already says what the episode saw."
        )
        shots = [m for q, a in _EXAMPLES
                 for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
        return [{"role": "system", "content": _SYSTEM}, *shots,
                {"role": "user", "content": user}]

    def propose(self, store: PlanMemoryStore, outcome: EpisodeOutcome) -> Candidate | None:
        """Reflect and store the edit set as a candidate; ``None`` on garbage or no edits."""
        cand, self.last = _propose_on_store(self, store, outcome, "llm")
        return cand

    def propose_edits(
        self, entries: Sequence[PlanEntry], outcome: EpisodeOutcome
    ) -> UpdateProposal:
        """Ask the LLM and turn a valid reply into checked edits (no storage)."""
        o = outcome.validate()
        res = self.llm.complete_json(self.messages(entries, o), self.schema,
                                     self.config.max_tokens)
        if not res.ok or not isinstance(res.data, Mapping):
            return UpdateProposal((), (), f"LLM reply unusable: {res.error}", res)
        existing = {e.name: e for e in entries}
        prov = Provenance((o.episode_id,), o.transition_ids)
        edits: list[Edit] = []
        dropped: list[str] = []
        seen: set[str] = set()
        bodies = {_norm(e.body) for e in entries}
        for i, raw in enumerate(res.data.get("edits", [])):
            name = slugify(raw.get("name", ""), self.config.name_max)
            body = _WS.sub(" ", str(raw.get("body", ""))).strip()[: self.config.body_max]
            op, kind = raw.get("op"), raw.get("kind")
            if not name:
                dropped.append(f"#{i}: empty name")
                continue
            if name in _PLACEHOLDERS or body.lower().strip(". ") in _PLACEHOLDERS:
                dropped.append(f"#{i} {name}: placeholder copied from the prompt")
                continue
            if name in seen:
                dropped.append(f"#{i} {name}: duplicate")
                continue
            if op == "remove":
                if name not in existing:
                    dropped.append(f"#{i} {name}: remove of a missing entry")
                    continue
                edits.append(Edit.remove(name, f"llm reflection on episode {o.episode_id}: "
                                               f"{body or 'no reason given'}"[:500]))
            elif not body:
                dropped.append(f"#{i} {name}: empty body")
                continue
            elif name in existing:
                if existing[name].body == body and existing[name].kind == kind:
                    dropped.append(f"#{i} {name}: no change")
                    continue
                edits.append(Edit("edit", name, kind, body, prov, None,
                                  f"llm reflection on episode {o.episode_id}"))
            elif op == "edit":
                dropped.append(f"#{i} {name}: edit of a missing entry")
                continue
            elif _norm(body) in bodies:
                dropped.append(f"#{i} {name}: repeats an existing note")
                continue
            else:
                edits.append(Edit.add(kind, name, body, prov, None,
                                      f"llm reflection on episode {o.episode_id}"))
            seen.add(name)
            if op != "remove":
                bodies.add(_norm(body))
        if edits:
            try:  # the same check the store will make, so garbage never reaches it
                apply_edits(list(entries), edits, source="llm")
            except ValueError as exc:
                return UpdateProposal((), tuple(dropped), f"invalid edit set: {exc}", res)
        err = None if edits else "no usable edits"
        return UpdateProposal(tuple(edits), tuple(dropped), err, res)
