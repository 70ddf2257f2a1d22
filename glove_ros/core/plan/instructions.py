"""Open instructions: sequences, constraints and conditionals, checked before anything runs.

:func:`understand_instruction` reads a task into a :class:`Plan` (a checked
:class:`Instruction`), a :class:`Clarify` (a question, with the options) or a
:class:`Refused` (the reason). A text without any of the words below is one request and goes
through :func:`glove_ros.core.plan.tasks.understand` exactly as before (the fast path).

The instruction language (a fixed grammar; every part is read by the request grammar, so
each name is grounded the same way and an unknown one is refused by name):

* sequences: parts joined by ``then``, ``and then``, ``after that``, ``finally``, ``,`` or
  ``;`` ("go to room_a, then room_b, then dock"); a part naming only a place repeats the
  previous part's verb ("check the kitchen, then the office").
* looks: "check the kitchen", "look in the pantry", "look for the cup in the pantry": drive
  there and look; what the look saw is the step's result (and it is remembered).
* constraints, for the whole instruction: "avoid the lab", "don't go through the hall",
  "do not use the hall-kitchen corridor", "don't use the corridor between hall and lab",
  "without passing the office", "... but avoid room_a". An avoided place is avoided as the
  corridors into it (the robot may leave the place it stands in). Constrained drives go
  corridor by corridor along the map's shortest route outside them.
* conditionals: "if the cup is (not) in the kitchen[,| then] <step>[, else <step>]", also
  "if there is no person in the hall ...", "if you do not see it there ..."; "it" and
  "there" refer to the condition's or the previous step's target and place. A condition is
  decided by this plan's own look at that place, then a find of this plan that found the
  target there, then verified memory (the last trusted look, cited); when memory does not
  know, the robot goes and looks. Each decision is logged and in the answer.
* order and constraints said as circumstances: "once you've checked the kitchen, dock" and
  "dock after checking the kitchen" (check, then dock), "check the kitchen before heading to
  the office"; "go to the lab while staying clear of the hall" (avoid); "the hall-lab
  corridor is closed", "the passage from hall to lab is off limits" (avoid); "go to the lab
  unless the cup is in the office" (if the cup is not in the office: go to the lab).
* nothing is dropped: a part the request grammar matches but does not read whole (a word
  left over, :func:`~glove_ros.core.plan.tasks.request_leftover`) is not that request; what
  neither grammar reads goes to the LLM or is refused naming the words not read.
* ambiguity asks: "go to the kitchen or the office" -> "Which one: kitchen or office?"; a
  negated request the grammar cannot read as a constraint is refused, never run.

Whatever the grammar cannot read goes to the local LLM (if any) under a JSON schema whose
enums are the map's places, colours and objects (:func:`plan_schema`, in
:mod:`~glove_ros.core.plan.instructions_llm` with the prompt); it only proposes:
every name it returns must be said in the text, and :func:`check_plan` re-checks every name,
that each avoided place and corridor exists, and that each step's place is reachable from
where the robot will be outside them (refused naming the constraint that cuts it off).
:func:`run_plan` (in :mod:`~glove_ros.core.plan.instructions_run`) runs a plan step by step
through the driver's ``run_step`` (the planner node: the single-request code paths); the first
step that fails stops it, with its reason. The names of both modules are importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from glove_ros.core.plan.agent_types import WorldMap
from glove_ros.core.plan.instructions_phrases import canonical
from glove_ros.core.plan.tasks import (
    TaskRequest,
    known_names,
    match_request,
    names_in,
    parse_request,
    request_leftover,
    target_of,
    understand,
    unknown_names,
    unread_words,
    waypoint_of,
)

MAX_STEPS = 8
_MOVES = ("go_to", "dock")


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _noun(target: str, kind: str) -> str:
    return f"the {target} block" if kind == "colors" else f"the {target}"


@dataclass(frozen=True)
class Step:
    """One step: an existing request; with ``look`` a go_to followed by a look there, for
    ``target`` (of look kind ``kind``; "" = report what it saw)."""

    request: TaskRequest
    look: bool = False
    target: str = ""
    kind: str = ""

    @property
    def place(self) -> str:
        """The waypoint a go_to / look drives to ("" for other steps)."""
        return self.request.waypoint if self.request.intent == "go_to" else ""

    def describe(self) -> str:
        """The step in words, imperative."""
        r = self.request
        if self.look:
            return f"look {'for ' + _noun(self.target, self.kind) + ' ' if self.target else ''}" \
                   f"in {r.waypoint}"
        noun = _noun(r.colour, r.look_kind or "colors") if r.colour else ""
        return {"find": f"find {noun}", "go_to": f"go to {r.waypoint}",
                "go_to_last_seen": f"go to where {noun} was last seen",
                "where_last_seen": f"say where {noun} was last seen",
                "is_there": f"say whether {noun} is in {r.waypoint}",
                "corridor_status": f"say whether the corridor {r.waypoint}-{r.waypoint2} is open",
                "changes": "say what changed", "dock": "return to the dock"}[r.intent]


@dataclass(frozen=True)
class Condition:
    """``target`` (look kind ``kind``) is at ``place`` (``present``) or is not."""

    target: str
    kind: str
    place: str
    present: bool = True

    def describe(self, at_place: bool | None = None) -> str:
        """"the cup is not in the kitchen" (the condition, or the fact ``at_place``)."""
        yes = self.present if at_place is None else at_place
        return f"{_noun(self.target, self.kind)} is {'' if yes else 'not '}in {self.place}"


@dataclass(frozen=True)
class Conditional:
    """Run ``then`` when ``condition`` holds, else ``otherwise`` (None: nothing)."""

    condition: Condition
    then: Step
    otherwise: Step | None = None


Item = Step | Conditional


@dataclass(frozen=True)
class Instruction:
    """The typed plan: ``items`` in order, constraints for all of them."""

    items: tuple[Item, ...]
    avoid_waypoints: tuple[str, ...] = ()
    avoid_corridors: tuple[tuple[str, str], ...] = ()
    text: str = ""
    source: str = "rules"

    def steps(self) -> list[Step]:
        """Every step, branches included, in order."""
        out: list[Step] = []
        for it in self.items:
            out += [it] if isinstance(it, Step) else [s for s in (it.then, it.otherwise) if s]
        return out

    def avoid_edges(self, world_map: WorldMap, at: str = "") -> tuple[tuple[str, str], ...]:
        """The corridors to route around from ``at``: the avoided ones and those into an
        avoided place (except out of ``at``, the place the robot already stands in)."""
        edges = {_key(a, b) for a, b in self.avoid_corridors}
        for w in self.avoid_waypoints:
            if w != at and world_map.has(w):
                edges |= {_key(w, n) for n in world_map.neighbors(w)}
        return tuple(sorted(edges))

    def validate(self, world_map: WorldMap, colours: Sequence[str] | None = None,
                 objects: Sequence[str] | None = None) -> Instruction:
        """ValueError naming what is wrong: no step, too many, an unknown name, a step the
        request grammar would refuse, an avoided place or corridor not on the map."""
        wps = world_map.waypoint_ids
        if not self.items:
            raise ValueError("the instruction has no step")
        if len(self.steps()) > MAX_STEPS:
            raise ValueError(f"at most {MAX_STEPS} steps, got {len(self.steps())}")
        conds = [it.condition for it in self.items if isinstance(it, Conditional)]
        for r in ([s.request for s in self.steps()]
                  + [TaskRequest("find", s.target, look_kind=s.kind) for s in self.steps()
                     if s.target]
                  + [TaskRequest("is_there", c.target, c.place, look_kind=c.kind) for c in conds]):
            r.validate(colours, wps, objects)
        if any(s.look and s.request.intent != "go_to" for s in self.steps()):
            raise ValueError("a look step drives first: its request must be a go_to")
        for w in self.avoid_waypoints:
            if not world_map.has(w):
                raise ValueError(f"cannot avoid {w!r}: not a place on the map; places: "
                                 f"{', '.join(wps)}")
        for a, b in self.avoid_corridors:
            if world_map.length(a, b) is None:
                raise ValueError(f"cannot avoid the corridor {a}-{b}: the map has none; "
                                 f"corridors: {', '.join(f'{x}-{y}' for x, y in world_map.edges)}")
        return self

    def describe(self) -> list[str]:
        """The plan in words, one line per item, then the constraints."""
        out = []
        for n, it in enumerate(self.items, 1):
            if isinstance(it, Step):
                out.append(f"{n}. {it.describe()}")
            else:
                other = f", else {it.otherwise.describe()}" if it.otherwise else ""
                out.append(f"{n}. if {it.condition.describe()}: {it.then.describe()}{other}")
        if self.avoid_waypoints or self.avoid_corridors:
            out.append("avoiding " + ", ".join([*self.avoid_waypoints, *(
                f"the corridor {a}-{b}" for a, b in self.avoid_corridors)]))
        return out


@dataclass(frozen=True)
class Plan:
    """An instruction that passed :func:`check_plan`; ``how`` it was understood,
    ``explain`` the plan as checked."""

    instruction: Instruction
    how: str = ""
    explain: tuple[str, ...] = ()

    @property
    def single(self) -> bool:
        """One plain request, no constraint: run exactly as a single request."""
        i = self.instruction
        return (len(i.items) == 1 and isinstance(i.items[0], Step) and not i.items[0].look
                and not i.avoid_waypoints and not i.avoid_corridors)

    @property
    def request(self) -> TaskRequest:
        """The first step's request (the whole plan when :attr:`single`)."""
        return self.instruction.steps()[0].request


@dataclass(frozen=True)
class Clarify:
    """A question instead of a guess, and the options it offers."""

    question: str
    options: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        """The run_task result's fields: the question, the options in ``explain``."""
        return {"success": False, "reason": "needs_clarification", "answer": self.question,
                "explain": [f"option: {o}" for o in self.options]}


@dataclass(frozen=True)
class Refused:
    """Not done, and why (names what is unknown or what conflicts)."""

    reason: str

    def fields(self) -> dict[str, Any]:
        """The run_task result's fields."""
        return {"success": False, "reason": "invalid_task", "answer": self.reason}


# ---------------------------------------------------------------------------------- grammar

_HINT = ("say e.g. 'go to the kitchen, then the office, then dock', 'go to the lab but avoid "
         "the hall', 'if the cup is not in the kitchen, look in the pantry'")
_CONTRACT = ((r"\b(is|are|do|did|does)n't\b", r"\1 not"), (r"\bcan't\b", "cannot"),
             (r"\bdont\b", "do not"), (r"\bwon't\b", "will not"))
_VERB = r"(?:go|drive|head|find|look|check|search|return|come|dock|inspect|visit|tell|say)"
_COMPOUND = re.compile(r"[;,]|\.\s+\S|\b(?:then|after\s+that|afterwards|finally|if|else|"
                       r"otherwise|avoid|avoiding|skipping|bypassing|without|do\s+not|never|or|but|"
                       rf"and\s+(?:{_VERB}|not)|"
                       r"while|once|after|before|unless|off[\s-]limits|(?:stay|staying|keep|"
                       r"keeping|steer|steering)\s+(?:clear|out|away|off))\b", re.I)
_FILLER = re.compile(r"(?:hey|hi|hello|ok|okay|please|robot|thanks|thank\s+you|and|then|but|"
                     r"also|next|finally|after\s+that|afterwards|so|um|uh|if\s+(?:anything|"
                     r"possible|you\s+can)|\s)+", re.I)
_NEG = r"(?:avoid|avoiding|do\s+not|never|without|stay|keep)"
_SEP = re.compile(
    r"\s*[;,]\s*(?:(?:and\s+)?then\s+|(?:and\s+)?after\s+that\s+|(?:and\s+)?finally\s+)?"
    r"|[.?!]\s+|\s+(?:and\s+then|and\s+after\s+that|after\s+that|afterwards|and\s+finally|"
    rf"finally|then|but|and(?=\s+(?:{_VERB}|{_NEG}|not)\b))\s+|\s+(?=(?:avoiding|avoid|skipping|"
    r"bypassing|without|"
    r"else|otherwise|while|unless)\b)"
    r"|(?<!\bwhile)\s+(?=(?:staying|keeping|steering)\s+(?:clear|out|away)\b)", re.I)
_LEAD = re.compile(r"^(?:(?:and|also|please|so|now|then|but|finally|lastly|first|firstly|next|"
                   r"after\s+that|"
                   r"afterwards)\s+)+", re.I)
_ELSE = re.compile(r"^(?:or\s+)?(?:else|otherwise|if\s+not)\b[\s,]*", re.I)
_AVOID = re.compile(
    r"^(?:while\s+(?:you\s+)?|and\s+)?(?:please\s+)?(?:(?:avoid|avoiding|skip|skipping|bypass|"
    r"bypassing|"
    r"(?:stay|staying|keep|keeping)\s+(?:out\s+of|away\s+from|(?:well\s+)?clear\s+of|off)|"
    r"steer(?:ing)?\s+clear\s+of)(?:\s+(?:going|driving|passing)(?:\s+(?:through|into|"
    r"via|by|past))?|\s+(?:using|entering|crossing))?|(?:do\s+not|never)\s+(?:(?:go|drive|pass|"
    r"travel|move|cut|come)\s+(?:anywhere\s+)?(?:through|via|into|by|past|across|in|to|near|along|"
    r"down)|use|take|"
    r"enter|"
    r"cross|visit|pass)|without\s+(?:(?:passing|going|driving|travelling|traveling|cutting|taking)"
    r"(?:\s+(?:through|via|by|past|into|across))?|using|entering|crossing|visiting))"
    r"\s+(?P<x>.+)$", re.I)
_BETWEEN = re.compile(r"^(?:the\s+)?(?:corridor|passage|link|connection|passageway|hallway)\s+(?:th"
                      r"at\s+(?:links|joins|connects|runs\s+between|goes\s+from)\s+|(?:be"
                      r"tween|from|linking|joining|"
                      r"connecting)\s+)(?P<a>.+?)\s+"
                      r"(?:and|to)\s+(?P<b>.+)$", re.I)
_PAIR = re.compile(r"^(?:the\s+)?(?P<a>.+?)(?:\s*-\s*to\s*-\s*|\s*[-/]\s*|\s+(?:to|and)\s+)(?P<b>.+"
                   r"?)\s+"
                   r"(?:corridor|passage)$", re.I)
_ONE = re.compile(r"^(?:the\s+)?(?P<a>.+?)\s+(?:corridor|passage)$", re.I)
_IF = re.compile(r"^(?:if|when|in\s+case)\s+(?P<b>.+)$", re.I)
_UNLESS = re.compile(r"^unless\s+(?P<b>.+)$", re.I)
# "the passage from atrium to veranda is off limits", "the lab is closed": a constraint
_BARRED = re.compile(r"^(?P<x>(?!(?:is|are|whether)\b).+?)\s+(?:is|are)\s+(?:now\s+)?"
                     r"(?:off[\s-]limits|out\s+of\s+bounds|"
                     r"(?:closed|shut|sealed|cordoned)(?:\s+off)?|"
                     r"being\s+[a-z]+ed|"
                     r"blocked|forbidden|"
                     r"not\s+allowed)(?:\s+(?:today|now|tonight|for\s+now|at\s+the\s+moment|right\s"
                     r"+now|for\s+(?:maintenance|repairs?|cleaning|works?|an\s+inspection|the\s+"
                     r"day)|until\s+further\s+notice))*$",
                     re.I)
# "once you've checked the greenhouse": what was done is a step of its own, done first
_DONE = re.compile(r"^(?:once|after)\s+(?:you\s+have\s+|you've\s+|you\s+|having\s+)?"
                   r"(?P<v>checked|visited|inspected|searched|looked|been|gone|driven|reached|found"
                   r"|"
                   r"checking|visiting|inspecting|searching|looking|going|driving|reaching)\s+"
                   r"(?P<x>.+)$", re.I)
_PAST = {"checked": "check", "checking": "check", "visited": "go to", "visiting": "go to",
         "inspected": "inspect", "inspecting": "inspect", "searched": "search",
         "searching": "search", "looked": "look", "looking": "look", "been": "go",
         "gone": "go", "going": "go", "driven": "drive", "driving": "drive",
         "reached": "go to", "reaching": "go to", "found": "find"}
# "go to the lab before heading back to charge": the later step, as an imperative
_BEFORE = re.compile(r"^(?P<a>.+?)\s+before\s+(?P<v>going|heading|driving|returning|coming|"
                     r"checking|visiting|looking|inspecting|searching|finding)\s+(?P<x>.+)$", re.I)
_ING = {"going": "go", "heading": "head", "driving": "drive", "returning": "return",
        "coming": "come", "checking": "check", "visiting": "go to", "looking": "look",
        "inspecting": "inspect", "searching": "search", "finding": "find"}
_WHERE = r"(?:(?:in|at|inside|on)\s+(?P<p>.+)|(?P<there>there\b.*))"
_CONDS = (
    re.compile(r"^there\s+(?:is|are)\s+(?P<neg>no\s+|not\s+(?:a|an|any)\s+)?(?P<t>.+?)\s+"
               + _WHERE + "$", re.I),
    re.compile(r"^(?P<t>.+?)\s+(?:is|are)\s+(?:still\s+)?(?P<neg>not\s+)?(?:still\s+)?"
               + _WHERE + "$", re.I),
    re.compile(r"^you\s+(?P<neg>do\s+not\s+|did\s+not\s+|cannot\s+)?(?:see|find|spot)\s+"
               r"(?P<t>.+?)\s+" + _WHERE + "$", re.I),
)
_LOOK_AT = re.compile(r"^(?:check|inspect|(?:have|take)\s+a\s+look\s+(?:in|at|into)|look\s+"
                      r"(?:in|at|into|inside|around))\s+(?!(?:whether|if|for|that|what|on)\b)"
                      r"(?P<p>.+)$", re.I)
_LOOK_FOR = re.compile(r"^(?:look|search|check)\s+for\s+(?P<t>.+?)\s+(?:in|at|inside)\s+"
                       r"(?P<p>.+)$|^(?:find|look\s+for|search\s+for)\s+(?P<t2>.+?)\s+"
                       r"(?:in|at|inside)\s+(?P<p2>.+)$", re.I)
# what this robot has no hands or tools for, said as a step: refused before the model reads it
# (a small model turns "pick up the donut" into a find and "open the vestry door" into a drive)
CANNOT = re.compile(
    r"(?:^|[,;.]\s*|\b(?:and|then|but|also|to|first|please)\s+)(?P<v>pick\s+(?:\w+\s+){0,3}?up|grab"
    r"|"
    r"fetch|bring|carry|deliver|hand\s+(?:me|over)|give\s+me(?!\s+(?:a|an|the|"
    r"some)\s+(?:\w+\s+)?(?:rundown|update|report|summary|list|overview|run-down))|open|close|"
    r"shut|lift|raise|lower|push|"
    r"pull|"
    r"throw|put|place|drop\s+off|clean|wash|wipe|tidy|cook|fill|refill|pour|empty|feed|water|"
    r"unlock|lock|turn\s+(?:on|off)|switch\s+"
    r"(?:on|off)|press|knock\s+on|move\s+(?:the|a|an|my|your|this|that|it|them))\b", re.I)
CAN_DO = "I drive, look, search, answer from memory and dock"
_BARE_AND = re.compile(r"^(?P<a>(?:the\s+)?\w+(?:\s+\w+)?)\s+and\s+(?P<b>(?:the\s+)?\w+(?:\s+\w+)?)"
                       r"$",
                       re.I)
_WHICH_BLOCK = re.compile(r"(?:find|look\s+for|search\s+for|locate|hunt\s+for|where\s+is|where\s+di"
                          r"d\s+you"
                          r"\s+(?:last\s+)?see|go\s+to\s+where\s+you\s+(?:last\s+)?saw)\s+(?:the|a|"
                          r"my)\s+block\s*\??",
                          re.I)
_PLACE_FOR = re.compile(r"^(?:in\s+|inside\s+)?(?P<p>.+?)\s+for\s+(?P<t>.+)$", re.I)
_THERE = re.compile(r"\b(go|drive|head|come|return|move)\s+(back\s+)?(?:over\s+|out\s+|down\s+|"
                    r"up\s+)?there\b", re.I)
_IT = re.compile(r"\b(it|them)\b", re.I)
_THAT_PLACE = re.compile(r"\b(?:that|this|the\s+same)\s+(?:room|place|area|spot|one)\b", re.I)
_AND_LIST = re.compile(r"^(?P<v>go\s+to|check|inspect|look\s+in|look\s+into|look\s+at)\s+"
                       r"(?P<a>.+?)\s+and\s+(?P<b>(?:the\s+)?.+)$", re.I)


class _Split(Exception):
    """The part is two steps with one verb (``args[0]``: the two parts, each with the verb)."""


class _NotRead(Exception):
    """The grammar cannot read a part (the LLM may)."""


@dataclass
class _Ctx:
    vocab: tuple[Sequence[str], WorldMap, Sequence[str]]
    place: str = ""
    target: tuple[str, str] | None = None
    verb: str = ""  # "go_to", "look" or "find": what a bare place (or target) repeats
    look_for: tuple[str, str] | None = None  # what the last "look for X in P" looked for
    seen: tuple[str, str] | None = None  # what the last "where did you last see X?" asked about

    def known(self) -> str:
        return known_names(self.vocab[0], self.vocab[1].waypoint_ids, self.vocab[2])


class _Stop(Exception):
    """The grammar's answer is a question or a refusal (``args[0]``)."""


def kind_options(phrase: str, waypoints: Sequence[str]) -> tuple[str, ...]:
    """The places ``phrase`` could mean when it names a kind of place, not one place: "the
    dome", "one of the domes" with a great dome and a small dome on the map -> both (a
    question to ask back); () when fewer than two places are of that kind."""
    m = re.fullmatch(r"(?:(?:one|either|any|each|both)\s+of\s+)?(?:the\s+|a\s+|an\s+|either\s+|"
                     r"both\s+)?(?:two\s+)?(?P<w>[a-z][\w-]*(?:[\s_]+[a-z][\w-]*)?)",
                     phrase.strip(), re.I)
    if not m:
        return ()
    *head, w = m["w"].lower().replace("_", " ").split()
    kinds = {(*head, v) for v in (w, w[:-1] if w.endswith("s") else w,
                                  w[:-2] if w.endswith("es") else w)}
    opts = tuple(p for p in waypoints for words in [tuple(p.lower().replace("_", " ").split())]
                 if any(len(words) > len(k) and words[-len(k):] == k for k in kinds))
    if len(opts) < 2 and head and w in ("room", "rooms", "area", "areas"):
        return kind_options(" ".join(head), waypoints)  # "the study room": the studies
    return opts if len(opts) > 1 else ()


def _no_corridor(wm: WorldMap, a: str, b: str, why: str = "") -> str:
    """Why a corridor a-b cannot be avoided or asked about: it is not on the map (the map's
    corridors listed)."""
    return (f"there is no corridor {a}-{b} (between {a} and {b}) {why}; corridors: "
            + ", ".join(f"{p}-{q}" for p, q in wm.edges))


def _unknown(ctx: _Ctx, phrase: str, what: str = "place") -> _Stop:
    opts = kind_options(phrase, ctx.vocab[1].waypoint_ids) if "place" in what else ()
    if opts:
        return _Stop(Clarify(f"Which one: {' or '.join(opts)}?", opts))
    return _Stop(Refused(f"'{phrase}' is not a {what} I know ({ctx.known()}); an unknown name "
                         "is never replaced by a known one"))


def _place(ctx: _Ctx, phrase: str) -> str:
    p = phrase.strip()
    wm = ctx.vocab[1]
    if wm.dock and waypoint_of(p, wm.waypoint_ids) is None and re.fullmatch(
            r"(?:the\s+)?(?:dock|charger|charging\s+station|docking\s+station)", p, re.I):
        return wm.dock  # "the corridor between the dock and the cage": the dock's place
    if re.fullmatch(r"it", p, re.I) and ctx.place:  # "the corridor between it and the lab"
        return ctx.place
    if re.fullmatch(r"there|here", p, re.I):
        if not ctx.place:
            raise _Stop(Clarify(f"Which place is '{p}'?", ctx.vocab[1].waypoint_ids))
        return ctx.place
    wp = waypoint_of(p, ctx.vocab[1].waypoint_ids)
    if wp is None:
        raise _unknown(ctx, re.sub(r"^the\s+", "", p, flags=re.I))
    return wp


def _target(ctx: _Ctx, phrase: str) -> tuple[str, str]:
    if _IT.fullmatch(phrase.strip()) or re.fullmatch(r"they", phrase.strip(), re.I):
        if ctx.target is None:
            raise _Stop(Clarify(f"What does '{phrase.strip()}' refer to: which colour or "
                                "object?", ()))
        return ctx.target
    got = target_of(phrase, ctx.vocab[0], ctx.vocab[2])
    if got is None:
        raise _unknown(ctx, re.sub(r"^(the|a|an|any|some)\s+", "", phrase.strip(), flags=re.I),
                       "colour or object")
    return got


def _constraint(ctx: _Ctx, x: str) -> tuple[list[str], list[tuple[str, str]]]:
    wm = ctx.vocab[1]
    x = x.strip()
    two = re.match(r"^(?:the\s+)?(?:corridor|passage|link|connection|passageway|hallway)\s+"
                   r"(?:between|linking|joining|connecting)\s+(?P<k>(?:the\s+)?(?:two|both)\s+.+)$",
                   x, re.I)
    pair = kind_options(two["k"], wm.waypoint_ids) if two else ()
    if len(pair) == 2:  # "the corridor between the two dressing rooms": exactly two of a kind
        x = "the corridor between {} and {}".format(*pair)
    m = _BETWEEN.match(x) or _PAIR.match(x)
    if m:
        a, b = _place(ctx, m["a"]), _place(ctx, m["b"])
        if wm.length(a, b) is None:
            raise _Stop(Refused(_no_corridor(wm, a, b, "to avoid")))
        return [], [_key(a, b)]
    m = _ONE.match(x)
    if m:
        a = _place(ctx, m["a"])
        opts = tuple(f"{a}-{n}" for n in wm.neighbors(a))
        if len(opts) != 1:
            raise _Stop(Clarify(f"Which corridor of {a}: {' or '.join(opts)}?", opts))
        return [], [_key(a, wm.neighbors(a)[0])]
    # "the oratory and the corridor between cloister and tannery": places and corridors
    lead = re.match(r"^(?P<w>.+?)(?:\s*,\s*|\s+(?:and|or|nor)\s+)(?:of\s+)?(?P<c>(?:the\s+)?(?:"
                    r"corridor|passage)\s+(?:between|from)\s.+|(?:the\s+)?\S+\s*[-/]\s*\S+\s+"
                    r"(?:corridor|passage))$", x, re.I)
    if lead:
        w, _ = _constraint(ctx, lead["w"])
        return w, _constraint(ctx, lead["c"])[1]
    parts = [p for p in re.split(r"\s*,\s*|\s+(?:and|or|nor)\s+", x) if p]
    return [_place(ctx, p) for p in parts], []


def _condition(ctx: _Ctx, body: str) -> tuple[Condition, str]:
    for rx in _CONDS:
        m = rx.match(body)
        if not m:
            continue
        target = _target(ctx, m["t"])
        if m["there"]:
            place, rest = _place(ctx, "there"), m["there"][5:].strip()
        else:
            place, rest = _split_place(ctx, m["p"])
        return Condition(target[0], target[1], place, not m["neg"]), rest
    raise _NotRead(f"the condition 'if {body}' is not understood")


def _split_place(ctx: _Ctx, phrase: str) -> tuple[str, str]:
    """"the kitchen look in the pantry" -> ("kitchen", "look in the pantry"): the longest
    start naming a waypoint, and the rest; an unknown start is refused by name."""
    words = phrase.split()
    k = next((k for k in range(len(words), 0, -1)
              if waypoint_of(" ".join(words[:k]), ctx.vocab[1].waypoint_ids)), 0)
    if not k:
        stop = next((i for i, w in enumerate(words) if re.fullmatch(_VERB, w, re.I)),
                    len(words))
        raise _unknown(ctx, re.sub(r"^the\s+", "", " ".join(words[:stop]), flags=re.I))
    return _place(ctx, " ".join(words[:k])), " ".join(words[k:])


def _step(ctx: _Ctx, text: str) -> Step:
    c, wm, o = ctx.vocab
    wps = wm.waypoint_ids
    if _THERE.search(text) and not ctx.place and ctx.seen:  # "where did you see it? go there"
        text = _THERE.sub(f"go to where {_noun(*ctx.seen)} was last seen", text)
    if _THERE.search(text):
        text = _THERE.sub(lambda m: f"go {m[2] or ''}to the {_place(ctx, 'there')}", text)
    if ctx.place and _THAT_PLACE.search(text):  # "if the cup is in the den, inspect that room"
        text = _THAT_PLACE.sub(f"the {ctx.place}", text)
    if _IT.search(text):
        if ctx.target is None and not re.match(rf"{_VERB}\b", text.strip(), re.I):
            raise _NotRead(f"{text!r} is not understood")  # "pick it up": no question to ask
        t = _target(ctx, _IT.search(text)[0])
        text = _IT.sub(_noun(*t), text)
    req = parse_request(text, c, wps, o)  # one reading, even with an "or" in it
    matched = match_request(text, c, wps, o)  # the pattern, unread words left aside
    if req is None and re.search(r"\bor\b", text, re.I):
        if unknown_names(text, c, wps, o):
            raise _unknown(ctx, unknown_names(text, c, wps, o)[0], "place, colour or object")
        cols, places, objs = names_in(text, c, wps, o)
        opts = tuple(places if len(places) > 1 else [*cols, *objs])
        if len(opts) > 1:
            raise _Stop(Clarify(f"Which one: {' or '.join(opts)}?", opts))
        raise _NotRead(f"{text!r} offers alternatives I cannot tell apart")
    two = _AND_LIST.match(text) if req is None else None
    if two and waypoint_of(two["a"], wps) is not None and waypoint_of(two["b"], wps) is not None:
        raise _Split((f"{two['v']} {two['a']}", f"{two['v']} {two['b']}"))  # one verb, 2 places
    two = _BARE_AND.match(text) if req is None and ctx.verb else None
    if two and waypoint_of(two["a"], wps) is not None and waypoint_of(two["b"], wps) is not None:
        raise _Split((two["a"], two["b"]))  # "visit A, B and C": B and C with A's verb
    if matched is not None and matched.intent in (*_MOVES, "find", "go_to_last_seen") and \
            re.search(r"\b(?:not|never|no|nor|without)\b", text, re.I):  # "do not go to the hall"
        raise _Stop(Refused(f"'{text}' is negated: I never act on a negated request I cannot "
                            "read; to keep away from a place say e.g. 'avoid the hall'"))
    if req is not None:
        ctx.verb = {"go_to": "go_to", "find": "find"}.get(req.intent, ctx.verb)
        return Step(req.validate(c, wps, o))
    m = _LOOK_FOR.match(text)
    if m:
        t, p = _target(ctx, m["t"] or m["t2"]), _place(ctx, m["p"] or m["p2"])
        ctx.verb, ctx.look_for = "look", t
        return Step(TaskRequest("go_to", waypoint=p, text=text), True, *t)
    m = _PLACE_FOR.match(text) if ctx.verb == "look" else None
    if m and waypoint_of(m["p"], wps) is not None:  # "search A for X, then B for Y"
        t, p = _target(ctx, m["t"]), _place(ctx, m["p"])
        ctx.look_for = t
        return Step(TaskRequest("go_to", waypoint=p, text=text), True, *t)
    m = _LOOK_AT.match(text)
    bare = "" if m else re.sub(r"^(?:in|at|to|into|inside)\s+", "", text.strip(), flags=re.I)
    if m or waypoint_of(bare, wps) is not None or re.fullmatch(r"there", bare, re.I):
        p = _place(ctx, m["p"] if m else bare)
        if not m and ctx.verb not in ("go_to", "look", ""):
            raise _Stop(Clarify(f"What should I do at {p}: go there or look there?",
                                (f"go to {p}", f"check {p}")))
        if m:  # "check the pantry": a look there, for nothing in particular
            ctx.verb, ctx.look_for = "look", None
            return Step(TaskRequest("go_to", waypoint=p, text=text), True)
        if ctx.verb == "look":  # "look for the cup in the hall, then (in) the lab": the same
            return Step(TaskRequest("go_to", waypoint=p, text=text), True,
                        *(ctx.look_for or ("", "")))
        ctx.verb = "go_to"  # a place named alone, first or after a drive: go there
        return Step(TaskRequest("go_to", waypoint=p, text=text))
    again = target_of(text, c, o) if ctx.verb == "find" else None
    if again is not None:  # "find the brown block, then the kite": find again
        return Step(TaskRequest("find", again[0], text=text, look_kind=again[1]))
    names = unknown_names(text, c, wps, o)
    if names:
        raise _unknown(ctx, names[0], "place, colour or object" if o else "place or colour")
    if ctx.verb and re.fullmatch(r"the\s+\w+(?:\s+\w+)?|\w+", text.strip(), re.I):
        raise _unknown(ctx, re.sub(r"^the\s+", "", text.strip(), flags=re.I))  # "then the X"
    raise _NotRead(f"{text!r} is not understood")


def _order(text: str) -> str:
    """Sequence words said as a condition of time, as plain order: "once you've checked X,
    Y" and "Y after checking X" -> "check X, then Y"; "X before heading to Y" -> "X, then
    head to Y"."""
    m = re.match(r"^(?P<a>.+?)\s+(?:after|once)\s+(?!that\b)(?P<b>(?:you|having|checking|visiting|"
                 r"inspecting|searching|looking|going|driving|reaching)\b.+)$", text, re.I)
    if m and "," not in m["b"] and not re.search(r"[;,]|\bthen\b", m["a"], re.I):
        text = f"after {m['b']}, {m['a']}"  # only a single step: "X, then Y after Z" is unclear
    m = _DONE.match(text)
    if m:
        rest = re.split(r"\s*,\s*", m["x"], maxsplit=1)
        verb = _PAST[m["v"].lower()]
        x = re.sub(r"^(?:to|at|in|into|by)\s+", "", rest[0], flags=re.I) if verb in (
            "go", "drive", "go to") else rest[0]
        verb = "go to" if verb in ("go", "drive") else verb
        text = f"{verb} {x}" + (f", then {rest[1]}" if len(rest) > 1 else "")
    m = _BEFORE.match(text)
    if m:
        text = f"{m['a']}, then {_ING[m['v'].lower()]} {m['x']}"
    m = re.match(r"^before\s+(?P<v>\w+)\s+(?P<x>[^,;]+)[,;]\s*(?P<a>.+)$", text, re.I)
    if m and m["v"].lower() in _ING:
        text = f"{m['a']}, then {_ING[m['v'].lower()]} {m['x']}"
    m = re.match(r"^before\s+(?:you\s+|we\s+)(?P<x>[^,;]+)[,;]\s*(?P<a>.+)$", text, re.I)
    if m:  # "before you dock, check the pavilion"
        text = f"{m['a']}, then {m['x']}"
    return text


def _grammar(text: str, ctx: _Ctx) -> Instruction:
    reordered = _order(text)
    if reordered != text:  # "search the kiln for X", moved first, is a phrasing to read again
        c, wm, o = ctx.vocab
        text = canonical(reordered, c, wm.waypoint_ids, o)
    clauses = [_LEAD.sub("", p.strip()) for p in _SEP.split(text) if p and p.strip()]
    items: list[Item] = []
    avoid_w: list[str] = []
    avoid_c: list[tuple[str, str]] = []
    cond: Condition | None = None  # an "if" waiting for its step
    want_else = False
    unread: _NotRead | None = None  # the first part not read; later ones may still refuse
    for clause in clauses:
        try:
            cond, want_else = _clause(ctx, clause, items, avoid_w, avoid_c, cond, want_else)
        except _NotRead as exc:
            unread = unread or exc
    if unread is not None:
        raise unread
    if cond is not None:
        raise _Stop(Clarify(f"If {cond.describe()}, what should I do?", ()))
    if not items:
        what = ", ".join([*avoid_w, *(f"{a}-{b}" for a, b in avoid_c)])
        raise _Stop(Refused(f"nothing to do: I was only told what to avoid ({what}); say what "
                            "to do as well, e.g. 'go to <place> but avoid <place>'"))
    return Instruction(tuple(items), tuple(avoid_w), tuple(avoid_c), text, "rules")


def _clause(ctx: _Ctx, clause: str, items: list[Item], avoid_w: list[str],
            avoid_c: list[tuple[str, str]], cond: Condition | None, want_else: bool
            ) -> tuple[Condition | None, bool]:
    """Read one part into ``items`` / the constraints; returns the pending if, else."""
    if _FILLER.fullmatch(clause):
        return cond, want_else
    m = _BARRED.match(clause)
    if m:
        w, cs = _constraint(ctx, m["x"])
        avoid_w += [x for x in w if x not in avoid_w]
        avoid_c += [x for x in cs if x not in avoid_c]
        return cond, want_else
    m = _UNLESS.match(clause)
    if m:  # "unless C": "if not C"; after a step it guards that step, first it guards the next
        unless, rest = _condition(ctx, m["b"])
        unless = replace(unless, present=not unless.present)
        if rest:
            raise _NotRead(f"'{clause}' is not understood")
        last = items[-1] if items else None
        if isinstance(last, Step) and cond is None:
            if len(items) > 1:  # "A, then B unless C": B alone, or both? not a guess to make
                raise _NotRead(f"'{clause}' may guard one step or all of them")
            items[-1] = Conditional(unless, last)
            return None, want_else
        ctx.target, ctx.place = (unless.target, unless.kind), unless.place
        return unless, want_else
    m = _AVOID.match(clause)
    if m:
        try:
            w, cs, rest = *_constraint(ctx, m["x"]), ""
        except _Stop as stop:  # "without passing the lab go to the office": place, step
            if any(rx.match(m["x"].strip()) for rx in (_BETWEEN, _PAIR, _ONE)):
                raise  # a corridor that is not on the map: its own refusal
            place, rest = _split_place(ctx, m["x"])
            if isinstance(stop.args[0], Clarify) or not rest:
                raise
            w, cs = [place], []
        avoid_w += [x for x in w if x not in avoid_w]
        avoid_c += [x for x in cs if x not in avoid_c]
        return _clause(ctx, rest, items, avoid_w, avoid_c, cond, want_else) if rest else (
            cond, want_else)
    e = _ELSE.match(clause)
    if e or want_else:
        last = items[-1] if items else None
        body = clause[e.end():] if e else clause
        if (e and body.strip() and isinstance(last, Step) and last.look and last.target
                and cond is None):  # "look for the cup in the den, otherwise find it"
            miss = Condition(last.target, last.kind, last.place, False)
            ctx.target, ctx.place = (miss.target, miss.kind), miss.place
            items.append(Conditional(miss, _step(ctx, body)))
            return None, False
        if not isinstance(last, Conditional) or last.otherwise is not None:
            raise _NotRead(f"'{clause}' has no 'if' before it")
        if not body.strip():
            return cond, True
        ctx.target, ctx.place = (last.condition.target, last.condition.kind), \
            last.condition.place
        items[-1] = replace(last, otherwise=_step(ctx, body))
        return cond, False
    m = _IF.match(clause)
    if m:
        cond, rest = _condition(ctx, m["b"])
        ctx.target, ctx.place = (cond.target, cond.kind), cond.place
        if not rest:
            return cond, want_else
        clause = rest
    try:
        step = _step(ctx, clause)
    except _Split as two:
        for part in two.args[0]:
            cond, want_else = _clause(ctx, part, items, avoid_w, avoid_c, cond, want_else)
        return cond, want_else
    if cond is not None:
        items.append(Conditional(cond, step))
        cond = None
    else:
        items.append(step)
        r = step.request
        ctx.place = step.place or ctx.place
        if r.intent == "where_last_seen":  # a "there" after it means where that was seen
            ctx.place, ctx.seen = "", (r.colour, r.look_kind)
        if r.colour:
            ctx.target = (r.colour, r.look_kind)
        elif step.target:
            ctx.target = (step.target, step.kind)
    return cond, want_else


# ----------------------------------------------------------------------------- understanding

def _normal(text: str) -> str:
    t = " ".join((text or "").replace("\u2019", "'").split()).rstrip(".! ")
    for rx, to in _CONTRACT:
        t = re.sub(rx, to, t, flags=re.I)
    return t


def is_instruction(text: str, colours: Sequence[str], waypoints: Sequence[str],
                   objects: Sequence[str] = ()) -> bool:
    """Whether ``text`` is more than one request: it has an instruction word (then, if,
    avoid, but, while, once, after, before, unless, ...), a comma around what the request
    grammar cannot read whole, or words a request phrasing it matches leaves unread
    (:func:`~glove_ros.core.plan.tasks.request_leftover`: "get to the veranda while staying
    clear of the greenhouse" is not a corridor question). False: one request, read by
    :func:`~glove_ros.core.plan.tasks.understand` as always ("where is the cup, please?" is
    one request)."""
    t = _normal(text)
    if not _COMPOUND.search(t):
        return bool(request_leftover(text, colours, waypoints, objects))
    return bool(_COMPOUND.search(t.replace(",", " "))) or parse_request(
        text, colours, waypoints, objects) is None


def understand_instruction(text: str, colours: Sequence[str], world_map: WorldMap,
                           llm: Any = None, objects: Sequence[str] = (), at: str = ""
                           ) -> Plan | Clarify | Refused:
    """Read ``text`` into a checked :class:`Plan`, a :class:`Clarify` or a :class:`Refused`.

    A text with no instruction word (or only a comma, around what the request grammar
    reads whole) is one request, read by
    :func:`~glove_ros.core.plan.tasks.understand` as before (its ValueError becomes the
    Refused reason). ``at``: where the robot stands ("" unknown), for the reachability check.
    """
    objects, wps = tuple(objects), world_map.waypoint_ids
    said = _normal(text)
    t = canonical(said, colours, wps, objects)
    if len(colours) > 1 and _WHICH_BLOCK.fullmatch(t):  # "find the block": which one?
        return Clarify(f"Which block: {' or '.join(colours)}?", tuple(colours))
    for name in [*unknown_names(t, colours, wps, objects), *(m.group() for m in re.finditer(
            r"\b(?:one|either|any)\s+of\s+(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?", t, re.I))]:
        opts = kind_options(name, wps)  # "head to the dome" with two domes: which one?
        if opts:
            return Clarify(f"Which one: {' or '.join(opts)}?", opts)
    cols, places, objs = names_in(t, colours, wps, objects)
    # one request holds at most one place (two for a corridor) and one target: more names go
    # through the instruction readers, never the single-request LLM, which would drop some
    one = not is_instruction(t, colours, wps, objects) and len(cols) + len(objs) <= 1 and (
        len(places) <= 1 or parse_request(t, colours, wps, objects) is not None)
    if one and parse_request(t, colours, wps, objects) is None:
        # one part the request grammar does not read ("check the pantry"): the instruction
        # grammar may; if it cannot either, the request path (and its LLM) has it as before
        try:
            inst = _grammar(t, _Ctx((tuple(colours), world_map, objects)))
            return check_plan(inst, world_map, colours, objects, at,
                              "understood by the instruction grammar")
        except (_Stop, _NotRead, ValueError):
            pass
    if one and (llm is None or parse_request(t, colours, wps, objects) is not None):
        if parse_request(said, colours, wps, objects) is not None:
            t = said  # read whole as the user said it: the request keeps the user's words
        try:  # what no grammar reads is refused as a single request always was
            req, how = understand(t, colours, wps, None, objects)
        except ValueError as exc:
            return Refused(str(exc))
        if req.intent == "corridor_status" and world_map.length(req.waypoint,
                                                                req.waypoint2) is None:
            return Refused(_no_corridor(world_map, req.waypoint, req.waypoint2, "on the map"))
        return Plan(Instruction((Step(req),), text=req.text, source=req.source), how)
    # what no grammar reads goes to the plan reader below, one-part texts too: its schema
    # holds every request and "cannot" (the single-request schema had no way to say that a
    # part was not understood, and dropped it: "go to the laundry and grab the backpack")
    ctx = _Ctx((tuple(colours), world_map, objects))
    try:
        inst, how = _grammar(t, ctx), "understood by the instruction grammar"
    except _Stop as stop:
        return stop.args[0]
    except (_NotRead, ValueError) as exc:
        unknown = unknown_names(t, colours, wps, objects)
        if unknown:  # never let the model drop or replace a name the robot does not know
            return Refused(f"{', '.join(map(repr, unknown))} is not a place, colour or object I "
                           f"know ({ctx.known()}); an unknown name is never replaced by a "
                           "known one")
        unread = _unread(t, colours, wps, objects)
        cannot = CANNOT.search(t)
        if cannot:  # never handed to the model, which would do something else instead
            return Refused(f"instruction {text!r} asks me to {cannot['v'].lower()}, which I "
                           f"cannot do ({CAN_DO}); nothing was done")
        if llm is None:
            return Refused(f"instruction {text!r} not understood: {exc}{unread}; {_HINT}")
        from glove_ros.core.plan.instructions_llm import plan_from_llm, plan_messages, plan_schema

        t = said  # the model reads the user's words, not the rewrite
        edges = tuple(world_map.edges)
        res = llm.complete_json(plan_messages(t, colours, wps, objects, edges),
                                plan_schema(colours, wps, objects, edges, t),
                                max_tokens=24 * MAX_STEPS)
        if not getattr(res, "ok", False):
            return Refused(f"instruction {text!r} not understood (LLM: "
                           f"{getattr(res, 'error', '?')}){unread}; {_HINT}")
        try:
            inst = plan_from_llm(res.data, t, objects, wps)
            how = "understood by the LLM (checked on the map)"
        except ValueError as err:
            return Refused(f"instruction {text!r}: {err}; known {ctx.known()}")
    return check_plan(inst, world_map, colours, objects, at, how)


def _cut(inst: Instruction, wm: WorldMap, src: str, dst: str) -> str:
    """Which of ``inst``'s constraints keep src -> dst apart: each one whose lifting alone
    opens a route; when only lifting several would, all of them ("avoid the footbridge and
    the subway" cuts the sidings off only together: both are named)."""
    places = [(w, f"{w}") for w in inst.avoid_waypoints]
    corridors = [(c, f"the corridor {c[0]}-{c[1]}") for c in inst.avoid_corridors]

    def opens(without: Any) -> bool:
        rest = replace(inst, avoid_waypoints=tuple(w for w in inst.avoid_waypoints
                                                   if w != without),
                       avoid_corridors=tuple(c for c in inst.avoid_corridors if c != without))
        return bool(wm.shortest_path(src, dst, rest.avoid_edges(wm, src)))

    hit = [name for c, name in [*places, *corridors] if opens(c)]
    if not hit:  # only several together cut it: name every constraint
        hit = [name for _, name in [*places, *corridors]]
    return " or ".join(hit) if len(hit) <= 2 else ", ".join(hit[:-1]) + " or " + hit[-1]


def _unread(text: str, colours: Sequence[str], waypoints: Sequence[str],
            objects: Sequence[str]) -> str:
    """"; words I could not read: 'x', 'y'" for a refusal: what neither grammar reads."""
    words = list(dict.fromkeys(request_leftover(text, colours, waypoints, objects) or [
        w for w in unread_words(text, colours, waypoints, objects) if w not in _INSTRUCTION_WORDS]))
    return f"; words I could not read: {', '.join(map(repr, words))}" if words else ""


#: the words the instruction grammar reads on top of the request grammar's
_INSTRUCTION_TEXT = """
    then after afterwards finally first firstly next lastly also so but not never no nor
    avoid avoiding without stay staying keep keeping out away clear well steer steering
    while once before unless else otherwise case off limits bounds forbidden allowed
    check checked checking inspect inspected visit visited been gone having heading going
    driving returning coming looking searching finding visiting inspecting
    through via past across use using enter entering cross crossing pass passing
    t ve
"""
_INSTRUCTION_WORDS = frozenset(_INSTRUCTION_TEXT.split())


def _merged(inst: Instruction) -> Instruction:
    """``inst`` without a drive to a place right before a look in that same place: the look
    drives there itself ("go to the cellar and have a look for the laptop" is one look)."""
    items = list(inst.items)
    keep = [not (isinstance(a, Step) and isinstance(b, Step) and not a.look and b.look
                 and a.request.intent == "go_to" and a.place == b.place)
            for a, b in zip(items, [*items[1:], None], strict=True)]
    if all(keep):
        return inst
    return replace(inst, items=tuple(it for it, k in zip(items, keep, strict=True) if k))


def check_plan(inst: Instruction, world_map: WorldMap, colours: Sequence[str] | None = None,
               objects: Sequence[str] | None = None, at: str = "", how: str = ""
               ) -> Plan | Refused:
    """Check ``inst`` against the map before anything runs: every name
    (:meth:`Instruction.validate`), and that each step's place can be reached from where the
    robot will be (``at`` for the first; "" unknown: from some place not avoided) outside
    the avoided places and corridors. Refused names the step and the constraint."""
    try:
        inst.validate(world_map, colours, objects)
    except ValueError as exc:
        return Refused(str(exc))
    inst = _merged(inst)
    pos = at if world_map.has(at) else ""
    for n, it in enumerate(inst.items, 1):
        ends: set[str] = set() if isinstance(it, Step) or it.otherwise else {pos}
        for step in ([it] if isinstance(it, Step) else [s for s in (it.then, it.otherwise) if s]):
            r = step.request
            dst = step.place or (world_map.dock if r.intent == "dock" else "")
            why = f"step {n} ({step.describe()})"
            if r.intent == "corridor_status" and world_map.length(r.waypoint, r.waypoint2) is None:
                gone = _no_corridor(world_map, r.waypoint, r.waypoint2, "on the map")
                return Refused(f"{why}: {gone}")
            if not dst:
                ends.add("" if r.intent in ("find", "go_to_last_seen") else pos)
                continue
            if dst in inst.avoid_waypoints and dst != pos:
                return Refused(f"{why} goes to {dst}, which you asked me to avoid")
            starts = [pos] if pos else [w for w in world_map.waypoint_ids
                                        if w != dst and w not in inst.avoid_waypoints]
            if dst != pos and not any(world_map.shortest_path(
                    s, dst, inst.avoid_edges(world_map, s)) for s in starts):
                src = pos or world_map.dock or (starts or [dst])[0]
                return Refused(f"{why}: every route{' from ' + pos if pos else ''} to {dst} "
                               f"passes {_cut(inst, world_map, src, dst)}, which you asked me "
                               "to avoid")
            ends.add(dst)
        pos = ends.pop() if len(ends) == 1 else ""
    lines = [how or "understood", *inst.describe(),
             "checked: every name is on the map; each step's place is reachable"
             + (" outside the avoided places and corridors"
                if inst.avoid_waypoints or inst.avoid_corridors else "")]
    return Plan(inst, how, tuple(lines))


# ------------------------------------------------------------------------------ the other parts
# The LLM's part and the running part live in their own modules; their names are still
# importable from here (``from glove_ros.core.plan.instructions import run_plan``).
_LLM_NAMES = ("PLAN_SYSTEM", "plan_schema", "plan_messages", "plan_from_llm")
_RUN_NAMES = ("recall", "drive_route", "dock_result", "forbidden", "arrival",
              "driven_transitions", "StepOutcome", "look_transition", "PlanReport",
              "StepHandle", "run_plan")


def __getattr__(name: str) -> Any:
    """The names of :mod:`~glove_ros.core.plan.instructions_llm` and
    :mod:`~glove_ros.core.plan.instructions_run`, imported when first asked for (they import
    this module's types, so they cannot be imported at its top)."""
    if name in _LLM_NAMES:
        from glove_ros.core.plan import instructions_llm
        return getattr(instructions_llm, name)
    if name in _RUN_NAMES:
        from glove_ros.core.plan import instructions_run
        return getattr(instructions_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

