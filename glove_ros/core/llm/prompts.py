"""The planner's prompt: memory as short facts with status and age, options with evidence.

What makes a 0.5-1.5B model choose well (measured with ``glove-ros bench llm``):

* **Facts, not logs.** Each option is one line: the waypoint, its distance, and what memory
  says about the target there, as a verdict ("verified: red block HERE", "verified: NOT
  here (saw blue)", "unexplored") with its age. Memories the verifier suppressed or replaced
  are shown *as such* with the reason ("suppressed: contradicted by newer looks"), so the
  model sees that a stale memory exists and that it must not rely on it (and the answer can
  cite it). Plan-memory notes (the Janus-gated text memory) follow as "notes": hints that a
  verified fact outranks.
* **Rules and examples in a static prefix.** The system message (rules) and three worked
  examples never change between decisions, so llama.cpp reuses their KV cache and only the
  short decision part is evaluated (``LlmResult.prompt_eval_tokens``).
* **A schema-constrained answer**: ``{"rule": ..., "waypoint": ...}``: the model first names
  the rule that applies (HERE / note / UNKNOWN / NOT HERE), and the grammar then writes
  the option that rule prescribes (:func:`decision_schema`). Measured on seeds 0-13 with
  Qwen2.5-Coder-1.5B: a bare waypoint choice 3/14, rule first 3/7, rule first with the
  rule-conditioned grammar 11/14; on seeds 5-6 (84 cases) the grammar offering every
  option of the rule 67%, only the rule's own option 92%, and with note-placed options
  marked NOTE 95% (small models classify the situation far better than they pick the
  matching line).

:func:`reference_choice` is the rule the examples teach (and the benchmark's ground truth):
1. a verified fact puts the target at an option -> the nearest such option;
2. else a note places it at an option no verified fact contradicts -> that option (the
   first such note);
3. else the nearest option without trusted memory (unexplored, or its memory suppressed);
4. else the nearest option.

ROS-free; :class:`~glove_ros.core.plan.agent_policy.LlmPlanner` builds its messages here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Fact",
    "OptionView",
    "Note",
    "DECISION_SYSTEM",
    "FEW_SHOT",
    "age_text",
    "option_line",
    "decision_messages",
    "decision_schema",
    "rule_groups",
    "RULES",
    "reference_choice",
    "placed_by_notes",
    "notes_from_entries",
    "mentions_waypoint",
]

#: statuses a fact can have in the prompt
VERIFIED, SUPPRESSED, REPLACED = "verified", "suppressed", "replaced"


@dataclass(frozen=True)
class Fact:
    """One remembered look at an option's waypoint, for the prompt.

    ``colours``: what the look(s) saw; ``status``: verified / suppressed / replaced;
    ``age_s``: seconds since the newest of them (None: unknown); ``n``: how many looks;
    ``why``: the verifier's reason (suppressed / replaced); ``ref``: entry ids for citing.
    """

    colours: tuple[str, ...]
    status: str = VERIFIED
    age_s: float | None = None
    n: int = 1
    why: str = ""
    ref: str = ""


@dataclass(frozen=True)
class OptionView:
    """One goal the planner may choose, with everything memory says about it."""

    waypoint: str
    distance: float
    facts: tuple[Fact, ...] = ()

    def verdict(self, colour: str) -> str:
        """``here`` / ``absent`` (verified facts say so) or ``unknown`` (no verified fact)."""
        ver = [f for f in self.facts if f.status == VERIFIED]
        if not ver:
            return "unknown"
        seen = sum(f.n for f in ver if colour in f.colours)
        return "here" if seen * 2 >= sum(f.n for f in ver) else "absent"


@dataclass(frozen=True)
class Note:
    """A plan-memory note (Janus-gated text) shown to the planner."""

    name: str
    body: str
    kind: str = "semantic"


def age_text(age_s: float | None) -> str:
    """``"12 s ago"``, ``"5 min ago"``, ``"3 h ago"``, ``"2 days ago"``; ``""`` if unknown."""
    if age_s is None:
        return ""
    a = max(0.0, float(age_s))
    if a < 90:
        return f"{a:.0f} s ago"
    if a < 90 * 60:
        return f"{a / 60:.0f} min ago"
    if a < 36 * 3600:
        return f"{a / 3600:.0f} h ago"
    return f"{a / 86400:.0f} days ago"


_WORD = r"(?<![a-z0-9_]){}(?![a-z0-9_])"
_NEG = re.compile(r"\b(not|no|never|isn't|wasn't|without|gone|moved|removed|avoid|failed)\b")


def mentions_waypoint(text: str, waypoint: str) -> bool:
    """True when ``waypoint`` occurs in ``text`` as a whole word (ids may contain ``_``)."""
    return re.search(_WORD.format(re.escape(waypoint.lower())), text.lower()) is not None


def _saw(colours: Sequence[str]) -> str:
    return ", ".join(colours) if colours else "nothing"


def _looks(f: Fact) -> str:
    when = age_text(f.age_s)
    n = f"{f.n} looks" if f.n != 1 else "1 look"
    return f"{n}, {when}" if when else n


def _note_for(o: OptionView, colour: str, notes: Sequence[Note]) -> list[Note]:
    return [n for n in notes if colour in n.body.lower() and mentions_waypoint(n.body, o.waypoint)]


def placed_by_notes(colour: str, options: Sequence[OptionView],
                    notes: Sequence[Note] = ()) -> list[str]:
    """Options a note places the block at, in the notes' order (rule 2): the note names the
    colour and exactly one of the options, with no negation word, and no verified look
    there says otherwise."""
    by_wp = {o.waypoint: o for o in options}
    out: list[str] = []
    for n in notes:
        body = n.body.lower()
        if colour not in body or _NEG.search(body):
            continue
        named = [w for w in by_wp if mentions_waypoint(body, w)]
        if len(named) == 1 and by_wp[named[0]].verdict(colour) == "unknown" \
                and named[0] not in out:
            out.append(named[0])
    return out


def option_line(o: OptionView, colour: str, notes: Sequence[Note] = (),
                placed: bool = False) -> str:
    """One option with its verdict and evidence, e.g.
    ``- kitchen (7.5 m): HERE, verified: saw red, green (3 looks, 2 min ago) [#12]``.

    Verdicts: ``HERE`` / ``NOT HERE`` (verified looks), ``NOTE`` (no verified look, but a
    note about the colour names the option: rule 2 applies), ``UNKNOWN`` (no verified look;
    a stale one is named as suppressed or replaced without repeating what it claimed, so it
    cannot pull the choice). Notes about the colour that name the option are attached."""
    ver = [f for f in o.facts if f.status == VERIFIED]
    stale = [f for f in o.facts if f.status != VERIFIED]
    v = o.verdict(colour)
    parts = []
    if v == "here":
        parts.append("HERE, verified: " + "; ".join(
            f"saw {_saw(f.colours)} ({_looks(f)}){' [' + f.ref + ']' if f.ref else ''}"
            for f in ver))
    elif v == "absent":
        parts.append("NOT HERE, verified: " + "; ".join(
            f"saw {_saw(f.colours)} ({_looks(f)}){' [' + f.ref + ']' if f.ref else ''}"
            for f in ver))
    elif placed:  # rule 2 applies here: say so in the verdict
        parts.append("NOTE (no verified look; a note places it here)")
    else:
        parts.append("UNKNOWN, never looked" if not stale else "UNKNOWN")
    for f in stale:
        why = f": {f.why}" if f.why else ""
        ref = f" [{f.ref}]" if f.ref else ""
        parts.append(f"an older memory here was {f.status} as stale{why}{ref}")
    for n in _note_for(o, colour, notes):
        parts.append(f'note: "{n.body}"')
    return f"- {o.waypoint} ({o.distance:.1f} m): " + "; ".join(parts)


DECISION_SYSTEM = (
    "You are the planner of a mobile robot searching a building for a coloured block. "
    "Each option shows what the robot's verified memory says about the block there: HERE, "
    "NOT HERE, NOTE (not verified, but a plan-memory note names it) or UNKNOWN. Older "
    "memories marked suppressed or replaced are stale and say nothing. Options are listed "
    "nearest first.\n"
    "Pick by the first rule that matches:\n"
    "1. HERE: the first option marked HERE, even if it is far;\n"
    "2. note: the first option marked NOTE;\n"
    "3. UNKNOWN: the first option marked UNKNOWN in the list;\n"
    "4. NOT HERE: the first option, only when nothing else is left.\n"
    'Answer with JSON: {"rule": "<the rule that matches>", "waypoint": "<option>"}.'
)

# worked examples; the right answer sits first, in the middle and last (a model must not
# learn a position)
_EX = [
    ("red", "hall", [
        OptionView("lab", 1.5, ()),
        OptionView("kitchen", 4.0, (Fact(("green", "red"), VERIFIED, 120, 3),)),
        OptionView("office", 6.0, (Fact(("blue",), VERIFIED, 300, 2),)),
    ], [], "kitchen"),
    ("blue", "dock", [
        OptionView("hall", 3.0, ()),
        OptionView("store", 4.5, (Fact(("blue",), SUPPRESSED, 4000, 2,
                                       "contradicted by newer looks"),)),
        OptionView("lab", 6.0, (Fact(("red",), VERIFIED, 60, 1),)),
    ], [], "hall"),
    ("yellow", "porch", [
        OptionView("lab", 1.0, (Fact(("red",), VERIFIED, 600, 2),)),
        OptionView("hall", 2.0, (Fact((), VERIFIED, 90, 1),)),
        OptionView("studio", 6.5, ()),
    ], [], "studio"),
    ("green", "lab", [
        OptionView("hall", 1.5, ()),
        OptionView("office", 3.0, ()),
        OptionView("garage", 4.0, (Fact(("yellow",), VERIFIED, 900, 1),)),
    ], [Note("green_block", "The green block was seen in the office twice."),
        Note("garage_lesson", "The green block is in the garage.")], "office"),
]


def _user(colour: str, current: str, options: Sequence[OptionView], notes: Sequence[Note],
          extra: Sequence[str] = ()) -> str:
    lines = [f"Task: find the {colour} block. Robot at {current}.", *extra,
             "Options (nearest first):"]
    ordered = sorted(options, key=lambda o: (o.distance, o.waypoint))
    placed = set(placed_by_notes(colour, options, notes))
    lines += [option_line(o, colour, notes, o.waypoint in placed) for o in ordered]
    attached = {n.name for o in options for n in _note_for(o, colour, notes)}
    rest = [n for n in notes if n.name not in attached]
    if rest:
        lines.append("Other notes:")
        lines += [f'- "{n.body}"' for n in rest]
    return "\n".join(lines)


#: the rule names the answer starts with (``decision_schema``)
RULES = ("1 HERE", "2 note", "3 UNKNOWN", "4 NOT HERE")


def rule_groups(colour: str, options: Sequence[OptionView], notes: Sequence[Note] = ()
                ) -> dict[str, list[str]]:
    """Rule -> the options it allows: HERE / NOT HERE by verified verdict and UNKNOWN for
    the rest, nearest first, and ``note`` for the UNKNOWN options a note places the block at
    (:func:`placed_by_notes`, in the notes' order)."""
    groups: dict[str, list[str]] = {}
    for o in sorted(options, key=lambda o: (o.distance, o.waypoint)):
        v = o.verdict(colour)
        groups.setdefault({"here": RULES[0], "absent": RULES[3]}.get(v, RULES[2]),
                          []).append(o.waypoint)
    placed = placed_by_notes(colour, options, notes)
    if placed:
        groups[RULES[1]] = placed
    return dict(sorted(groups.items()))


def decision_schema(colour: str, options: Sequence[OptionView], notes: Sequence[Note] = ()
                    ) -> dict[str, Any]:
    """``{"rule", "waypoint"}``: the model names the rule that applies, and the grammar
    then writes the option that rule prescribes, the first of its group (``anyOf`` of one
    branch per rule, :func:`rule_groups`; options nearest first). Which rule applies --
    trust a verified sighting, follow a note, explore, or fall back -- is the model's call;
    the order within a rule is the planner's policy. Measured with Qwen2.5-Coder-1.5B on
    development seeds 5-6 (84 cases): 20 of its 28 wrong answers had named the right rule
    and then picked a later option of that group."""
    return {"anyOf": [
        {"type": "object",
         "properties": {"rule": {"type": "string", "enum": [r]},
                        "waypoint": {"type": "string", "enum": wps[:1]}},
         "required": ["rule", "waypoint"], "additionalProperties": False}
        for r, wps in rule_groups(colour, options, notes).items()]}


def _rule_of(colour: str, options: Sequence[OptionView], notes: Sequence[Note],
             answer: str) -> str:
    groups = rule_groups(colour, options, notes)
    return next(r for r in RULES if answer in groups.get(r, ()))


def _few_shot() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for colour, cur, opts, notes, ans in _EX:
        out.append({"role": "user", "content": _user(colour, cur, opts, notes)})
        out.append({"role": "assistant", "content": json.dumps(
            {"rule": _rule_of(colour, opts, notes, ans), "waypoint": ans})})
    return out


#: the worked examples (user / assistant turns), part of the static prefix
FEW_SHOT: tuple[dict[str, str], ...] = tuple(_few_shot())


def decision_messages(colour: str, current: str, options: Sequence[OptionView],
                      notes: Sequence[Note] = (), extra: Sequence[str] = (),
                      few_shot: bool = True) -> list[dict[str, str]]:
    """Chat messages for one decision: the static prefix (system rules + worked examples),
    then the decision. ``extra``: more context lines after the task line (e.g. what was
    already looked at)."""
    msgs = [{"role": "system", "content": DECISION_SYSTEM}]
    if few_shot:
        msgs += [dict(m) for m in FEW_SHOT]
    msgs.append({"role": "user", "content": _user(colour, current, options, notes, extra)})
    return msgs


def reference_choice(colour: str, options: Sequence[OptionView],
                     notes: Sequence[Note] = ()) -> str | None:
    """The choice the rules in :data:`DECISION_SYSTEM` prescribe (module docstring).

    A note "places" the block at an option when it names the colour and exactly that option
    among the options and no negation word; notes naming two options are not used.
    """
    if not options:
        return None
    here = [o for o in options if o.verdict(colour) == "here"]
    if here:
        return min(here, key=lambda o: o.distance).waypoint
    placed = placed_by_notes(colour, options, notes)
    if placed:
        return placed[0]
    unknown = [o for o in options if o.verdict(colour) == "unknown"]
    pool = unknown or list(options)
    return min(pool, key=lambda o: o.distance).waypoint


def notes_from_entries(entries: Iterable[Any], colour: str, limit: int = 4) -> list[Note]:
    """Plan-memory entries (``PlanEntry``-like: name, body, kind) worth showing for a search
    of ``colour``: those mentioning it first, then procedures; at most ``limit``."""
    items = [e for e in entries if getattr(e, "body", "")]
    about = [e for e in items if colour in e.body.lower()]
    rest = [e for e in items if e not in about and getattr(e, "kind", "") == "procedure"]
    return [Note(e.name, e.body, getattr(e, "kind", "semantic")) for e in (about + rest)[:limit]]


@dataclass
class FactSource:
    """Turns memory entries into :class:`Fact` lines for a waypoint's looks.

    ``history(waypoint)`` returns look entries at that waypoint *including* suppressed and
    replaced ones (``MemoryEntry``-like: id, transition.outcome, status, valid_from,
    reason); ``now()`` the current time in the same clock as ``valid_from``.
    """

    history: Callable[[str], Sequence[Any]]
    now: Callable[[], float]
    max_refs: int = 3
    _cache: dict[str, tuple[Fact, ...]] = field(default_factory=dict)

    def facts(self, waypoint: str) -> tuple[Fact, ...]:
        """Facts about ``waypoint``: one per (status, outcome) group, newest first."""
        groups: dict[tuple[int, str], list[Any]] = {}
        for e in self.history(waypoint):
            out = getattr(e.transition, "outcome", "")
            if not isinstance(out, str) or not out.startswith("colors="):
                continue
            groups.setdefault((int(e.status), out), []).append(e)
        now = self.now()
        names = {0: VERIFIED, 1: SUPPRESSED, 2: REPLACED}
        facts = []
        for (status, out), es in sorted(groups.items()):
            newest = max(es, key=lambda e: e.valid_from)
            cols = tuple(c for c in out[len("colors="):].split(",") if c)
            ids = ",".join(f"#{e.id}" for e in sorted(es, key=lambda e: -e.id)[: self.max_refs])
            why = "" if status == 0 else (newest.reason or "contradicted by newer looks")
            facts.append(Fact(cols, names.get(status, SUPPRESSED), now - newest.valid_from,
                              len(es), why[:80], ids))
        return tuple(facts)
