"""Natural-language tasks the JetRover agent understands (ROS-free).

:func:`parse_task` reads "find the <colour> block" into a
:class:`~glove_ros.core.plan.agent_types.Task`.
:func:`understand` reads any request into a :class:`TaskRequest` (find, go to a place, go
to where a block was last seen, is a corridor open, what changed, dock): a fixed grammar
first (:func:`parse_request`), then, for phrasings it does not know, the local LLM with a
schema whose enums are the map's colours and waypoints (:func:`request_messages`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from glove_ros.core.plan.agent_types import Task

_FIND = re.compile(
    r"^\s*(?:please\s+)?(?:find|search(?:\s+for)?|locate|look\s+for)\s+(?:the\s+|a\s+)?"
    r"(?!(?:the|a|an)\s)(?P<color>[a-z]+)\s+(?:block|cube|box)\s*[.!]?\s*$",
    re.IGNORECASE,
)


_DOCK = re.compile(
    r"^\s*(?:please\s+)?(?:(?:go|return|drive)\s+(?:back\s+)?to\s+(?:the\s+)?(?:dock|charger)"
    r"|dock|charge|go\s+charge)\s*[.!]?\s*$",
    re.IGNORECASE,
)


def is_dock_task(text: str) -> bool:
    """True for "return to the dock", "go charge", "dock" and close variants."""
    return bool(_DOCK.match(text or ""))


def parse_task(text: str, task_id: str = "", colors: tuple[str, ...] | None = None) -> Task:
    """Parse "find the red block" (and close variants) into a :class:`Task`.

    ``colors`` restricts the accepted colour names. Raises ValueError with the accepted
    form when the text is not understood.
    """
    m = _FIND.match(text or "")
    if not m:
        raise ValueError(f"task {text!r} not understood; say e.g. 'find the red block'")
    color = m.group("color").lower()
    if colors is not None and color not in colors:
        raise ValueError(f"unknown colour {color!r} in task {text!r}; known: {', '.join(colors)}")
    return Task(color=color, id=task_id).validate()


# --------------------------------------------------------------------------------------------
# free-text requests: what the robot is asked, grounded in memory by the planner node

#: what a free-text request can ask for
INTENTS = ("find", "go_to", "go_to_last_seen", "where_last_seen", "corridor_status", "changes",
           "dock")


@dataclass(frozen=True)
class TaskRequest:
    """A request in structured form.

    ``intent``: one of :data:`INTENTS`; ``colour`` for find / go_to_last_seen / where_last_seen;
    ``waypoint`` for go_to; ``waypoint`` + ``waypoint2`` for corridor_status; ``since_s``
    for changes (how far back, seconds; 0 = since the start of memory). ``source`` says
    who parsed it: ``rules`` (the fixed grammar) or ``llm``.
    """

    intent: str
    colour: str = ""
    waypoint: str = ""
    waypoint2: str = ""
    since_s: float = 0.0
    text: str = ""
    source: str = "rules"

    def validate(self, colours: Sequence[str] | None = None,
                 waypoints: Sequence[str] | None = None) -> TaskRequest:
        """Raise ValueError when a field the intent needs is missing or unknown."""
        if self.intent not in INTENTS:
            raise ValueError(f"unknown intent {self.intent!r}; one of {', '.join(INTENTS)}")
        if self.intent in ("find", "go_to_last_seen", "where_last_seen"):
            if not self.colour:
                raise ValueError(f"{self.intent} needs a colour")
            if colours is not None and self.colour not in colours:
                raise ValueError(f"unknown colour {self.colour!r}; known: {', '.join(colours)}")
        need = {"go_to": 1, "corridor_status": 2}.get(self.intent, 0)
        wps = [self.waypoint, self.waypoint2][:need]
        for w in wps:
            if not w:
                raise ValueError(f"{self.intent} needs {need} waypoint(s)")
            if waypoints is not None and w not in waypoints:
                raise ValueError(f"unknown waypoint {w!r}; known: {', '.join(waypoints)}")
        if need == 2 and self.waypoint == self.waypoint2:
            raise ValueError("corridor_status needs two different waypoints")
        return self


_DAY = 86400.0
_SINCE = (
    (re.compile(r"\b(yesterday|last\s+day|24\s*h)", re.I), _DAY),
    (re.compile(r"\b(last|past)\s+hour\b|\ban?\s+hour\s+ago\b", re.I), 3600.0),
    (re.compile(r"\b(this\s+morning|today)\b", re.I), _DAY / 2),
    (re.compile(r"\b(last|past)\s+week\b|\ba\s+week\s+ago\b", re.I), 7 * _DAY),
)
_CHANGES = re.compile(r"\b(what|anything|something)\b.*\b(changed|change|new|different)\b",
                      re.I)
_LAST_SEEN = re.compile(r"\b(last\s+(saw|seen|spotted)|saw\s+last|last\s+place|was\s+last)\b",
                        re.I)
_CORRIDOR = re.compile(r"\b(corridor|passage|way|path|route|door|get)\b.*\bfrom\b|"
                       r"\b(corridor|passage|way|path|route|door)\b.*\bbetween\b|"
                       r"\b(open|blocked|closed|clear|passable)\b", re.I)
# a question, not an errand: "where did you last see the red block?" (answer, never drive)
_WHERE = re.compile(r"^\s*(?:and\s+|so\s+)?(?:where|in\s+which\s+(?:place|room))\b.*"
                    r"\b(?:is|are|see|saw|seen|spot|spotted|find|found|notice|noticed)\b", re.I)
_GOTO = re.compile(r"\b(go|drive|navigate|move|head|take\s+me|bring\s+me|lead\s+me)\b", re.I)


def _words_in(text: str, names: Sequence[str]) -> list[str]:
    """``names`` in the order they occur in ``text`` (whole words; ``_`` may be a space)."""
    low = text.lower()
    found = []
    for n in names:
        pat = re.escape(n.lower()).replace("_", "[_ ]")
        m = re.search(rf"(?<![a-z0-9_]){pat}(?![a-z0-9_])", low)
        if m:
            found.append((m.start(), n))
    return [n for _, n in sorted(found)]


def parse_request(text: str, colours: Sequence[str], waypoints: Sequence[str]
                  ) -> TaskRequest | None:
    """The fixed grammar: a :class:`TaskRequest` for the phrasings it knows, else ``None``
    (then the planner node asks the LLM, :func:`request_messages`). Never guesses: a text
    naming the wrong number of colours or waypoints for its intent gives ``None``."""
    if not isinstance(text, str) or not text.strip():
        return None
    t = text.strip()
    if is_dock_task(t):
        return TaskRequest("dock", text=t)
    m = _FIND.match(t)
    if m:
        c = m.group("color").lower()
        return TaskRequest("find", colour=c, text=t) if c in colours else None
    cols = _words_in(t, colours)
    wps = _words_in(t, waypoints)
    if _CHANGES.search(t) and not cols and not wps:
        since = next((s for rx, s in _SINCE if rx.search(t)), 0.0)
        return TaskRequest("changes", since_s=since, text=t)
    if _WHERE.search(t) and len(cols) == 1 and not wps and not _GOTO.search(t):
        return TaskRequest("where_last_seen", colour=cols[0], text=t)
    if _LAST_SEEN.search(t) and len(cols) == 1 and not wps:
        return TaskRequest("go_to_last_seen", colour=cols[0], text=t)
    if len(wps) == 2 and not cols and _CORRIDOR.search(t):
        return TaskRequest("corridor_status", waypoint=wps[0], waypoint2=wps[1], text=t)
    if len(wps) == 1 and not cols and _GOTO.search(t):
        return TaskRequest("go_to", waypoint=wps[0], text=t)
    return None


def request_schema(colours: Sequence[str], waypoints: Sequence[str]) -> dict:
    """JSON schema of an LLM-parsed request (enums keep colours and waypoints on the map)."""
    return {
        "type": "object",
        "properties": {
            "intent": {"type": "string", "enum": list(INTENTS)},
            "colour": {"type": "string", "enum": ["", *colours]},
            "waypoint": {"type": "string", "enum": ["", *waypoints]},
            "waypoint2": {"type": "string", "enum": ["", *waypoints]},
            "since_hours": {"type": "integer", "minimum": 0, "maximum": 1000},
        },
        "required": ["intent", "colour", "waypoint", "waypoint2", "since_hours"],
        "additionalProperties": False,
    }


REQUEST_SYSTEM = (
    "You turn a person's request to a mobile robot into JSON. Intents:\n"
    "- find: search for a coloured block (colour).\n"
    "- go_to: drive to a named place (waypoint).\n"
    "- go_to_last_seen: drive to where a coloured block was last seen (colour).\n"
    "- where_last_seen: only say where a coloured block was last seen, do not move (colour).\n"
    "- corridor_status: is the corridor between two places open (waypoint, waypoint2).\n"
    "- changes: what changed in memory (since_hours: how far back, 0 = all).\n"
    "- dock: return to the charger.\n"
    'Unused fields are "" or 0. Use only the colours and places listed.'
)

_REQ_EXAMPLES = (
    ("could you look for the yellow cube", {"intent": "find", "colour": "yellow"}),
    ("take me to where you saw the green block last time",
     {"intent": "go_to_last_seen", "colour": "green"}),
    ("can the robot get through from garage to hall?",
     {"intent": "corridor_status", "waypoint": "garage", "waypoint2": "hall"}),
    ("anything different in the last 2 hours?", {"intent": "changes", "since_hours": 2}),
    ("head over to the garage", {"intent": "go_to", "waypoint": "garage"}),
)


def request_messages(text: str, colours: Sequence[str], waypoints: Sequence[str]
                     ) -> list[dict[str, str]]:
    """Chat messages asking the LLM to parse ``text`` (static rules and examples first)."""
    ex_places = "garage, hall"
    msgs = [{"role": "system", "content": REQUEST_SYSTEM}]
    for q, a in _REQ_EXAMPLES:
        full = {"intent": a["intent"], "colour": a.get("colour", ""),
                "waypoint": a.get("waypoint", ""), "waypoint2": a.get("waypoint2", ""),
                "since_hours": a.get("since_hours", 0)}
        msgs.append({"role": "user", "content": f"Colours: green, yellow. Places: {ex_places}."
                                                f"\nRequest: {q}"})
        msgs.append({"role": "assistant", "content": json.dumps(full)})
    msgs.append({"role": "user", "content": f"Colours: {', '.join(colours)}. Places: "
                                            f"{', '.join(waypoints)}.\nRequest: {text.strip()}"})
    return msgs


def request_from_llm(data: Any, text: str = "") -> TaskRequest | None:
    """A :class:`TaskRequest` from a schema-valid LLM reply (``None`` if unusable)."""
    if not isinstance(data, dict) or data.get("intent") not in INTENTS:
        return None
    return TaskRequest(data["intent"], data.get("colour", ""), data.get("waypoint", ""),
                       data.get("waypoint2", ""), float(data.get("since_hours", 0)) * 3600.0,
                       text, "llm")


def understand(text: str, colours: Sequence[str], waypoints: Sequence[str],
               llm: Any = None) -> tuple[TaskRequest, str]:
    """Parse ``text``: the fixed grammar first, the LLM (if given) for anything else.

    Returns ``(request, note)``; ``note`` says how it was understood. Raises ValueError with
    the phrasings understood when neither works (or the LLM's reply does not validate).
    """
    req = parse_request(text, colours, waypoints)
    if req is not None:
        return req.validate(colours, waypoints), "understood by the task grammar"
    hint = ("say e.g. 'find the red block', 'go to the kitchen', 'bring me to where you last "
            "saw the blue block', 'is the corridor between hall and lab open?', 'what changed "
            "since yesterday?', 'go charge'")
    unknown = unknown_names(text, colours, waypoints)
    if unknown:  # say which word is not known and what is, instead of a bare "not understood"
        hint = (f"{' and '.join(map(repr, unknown))} is not a place or colour I know (places: "
                f"{', '.join(waypoints)}; colours: {', '.join(colours) or '(none yet)'}); {hint}")
    if llm is None:
        raise ValueError(f"task {text!r} not understood; {hint}")
    res = llm.complete_json(request_messages(text, colours, waypoints),
                            request_schema(colours, waypoints), max_tokens=64)
    req = request_from_llm(res.data, text.strip()) if getattr(res, "ok", False) else None
    if req is None:
        raise ValueError(f"task {text!r} not understood (LLM: {getattr(res, 'error', '?')}); "
                         f"{hint}")
    try:
        req = req.validate(colours, waypoints)
    except ValueError as exc:
        raise ValueError(f"task {text!r}: the LLM read it as {req.intent} but {exc}; "
                         f"{hint}") from None
    unsaid = ungrounded(req, text)
    if unsaid:
        # the grammar forces the model to pick a known name: "go to the garden" came back as
        # the garage. A robot never acts on a guess: a name the request does not say is refused
        raise ValueError(
            f"task {text!r}: the LLM read it as {req.intent} with {', '.join(map(repr, unsaid))}, "
            f"which the request does not name; known places: {', '.join(waypoints)}; known "
            f"colours: {', '.join(colours) or '(none yet)'}")
    return req, "understood by the LLM"


_NAMED = (  # where a request names its place or object: "go to the X", "find the X"
    re.compile(r"\b(?:go|drive|navigate|move|head|come|return)\s+(?:back\s+)?(?:to|into|over\s+to)"
               r"\s+(?:the\s+)?(?P<w>[a-z][a-z_-]*)", re.I),
    re.compile(r"\b(?:find|fetch|bring|get|look\s+for|search\s+for|seen?|saw)\s+(?:me\s+)?"
               r"(?:the|a|an)\s+(?P<w>[a-z][a-z_-]*)", re.I),
)
_NOT_NAMES = frozenset({"block", "blocks", "cube", "thing", "robot", "charger", "dock", "same",
                        "last", "next", "way", "corridor", "place", "room", "left", "right"})


def unknown_names(text: str, colours: Sequence[str], waypoints: Sequence[str]) -> list[str]:
    """Words in the place/object slot of ``text`` ("go to the X", "find the X block") that
    are neither a known waypoint nor a known colour, in order, for the "not understood"
    reply: the user learns which word the robot does not know."""
    known = {n.lower() for n in (*colours, *waypoints)}
    known |= {n.lower().replace("_", " ") for n in waypoints}
    out: list[str] = []
    for rx in _NAMED:
        for m in rx.finditer(text or ""):
            w = m.group("w").lower()
            if w not in known and w not in _NOT_NAMES and w not in out and not any(
                    k.startswith(w + " ") for k in known):
                out.append(w)
    return out


def ungrounded(req: TaskRequest, text: str) -> list[str]:
    """The colours and waypoints of ``req`` that ``text`` does not name (whole words, ``_``
    may be a space): an LLM under a grammar picks some known name even for an unknown one."""
    names = [n for n in (req.colour, req.waypoint, req.waypoint2) if n]
    return [n for n in names if not _words_in(text, [n])]
