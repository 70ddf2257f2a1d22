"""Natural-language tasks the JetRover agent understands (ROS-free).

:func:`parse_task` reads "find the <colour> block" into a
:class:`~glove_ros.core.plan.agent_types.Task`.
:func:`understand` reads any request into a :class:`TaskRequest` (find a block or an object,
go to a place, go to where a block or an object was last seen, is it at a place, is a
corridor open, what changed, dock): a fixed grammar first (:func:`parse_request`), then, for
phrasings it does not know, the local LLM with a schema whose enums are the map's colours,
objects and waypoints (:func:`request_messages`).

Objects are class names of a trained detector, spelt as :mod:`glove_ros.core.world.labels`
spells them (COCO 2017: "couch", "tv", "dining table"). A request may name one by a synonym
("sofa", "tv monitor") or in the plural ("cups", "people"); :func:`object_vocabulary` builds
the set from the planner's ``objects`` parameter and the world file. A name the robot does
not know, in the place or object slot of a request, is refused by name with what it does
know (:func:`unknown_names`), before any LLM is asked: it is never replaced by the nearest
known one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from glove_ros.core.plan.agent_types import Task
from glove_ros.core.world.labels import COCO_CLASSES, SYNONYMS, canonical_label

_FIND = re.compile(
    r"^\s*(?:please\s+)?(?:find|search(?:\s+for)?|locate|look\s+for)\s+(?:the\s+|a\s+)?"
    r"(?!(?:the|a|an)\s)(?P<color>[a-z]+)\s+(?:block|cube|box)\s*[.!]?\s*$",
    re.IGNORECASE,
)


_DOCK = re.compile(
    r"^\s*(?:please\s+)?(?:(?:go|return|drive|head|come)\s+(?:back\s+)?to\s+(?:the\s+)?"
    r"(?:dock|charger)|(?:go|head|come)\s+(?:back\s+)?(?:to\s+)?charge|dock|charge)\s*[.!]?\s*$",
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
# the object vocabulary

#: the ``objects`` entry that stands for the 80 COCO classes (what a trained detector reports)
COCO = "coco"


def object_vocabulary(spec: Iterable[str], world_objects: Iterable[str] = ()
                      ) -> tuple[str, ...]:
    """The object classes a request may name, sorted: ``world_objects`` (the world file's)
    plus ``spec`` (the planner's ``objects`` parameter). In ``spec`` blanks are ignored
    (``[""]``: the world file's objects only), ``"coco"`` stands for the 80 COCO classes and
    any other entry is a class name, canonicalised (``"sofa"`` -> ``"couch"``).

    ValueError, naming the entry, for one that is not a string or holds ``,``, ``=`` or
    ``*`` (look outcomes could not record it).
    """
    out: set[str] = set()
    for raw in (*world_objects, *spec):
        if not isinstance(raw, str):
            raise ValueError(f"an object class must be a string, got {raw!r}")
        if not raw.strip():
            continue
        if raw.strip().lower() == COCO:
            out.update(COCO_CLASSES)
            continue
        if any(c in raw for c in ",=*"):
            raise ValueError(f"object class {raw!r} may not contain ',', '=' or '*'; give one "
                             f"class per entry, or '{COCO}' for the 80 COCO classes")
        out.add(canonical_label(raw))
    return tuple(sorted(out))


def _short(names: Sequence[str], k: int = 12) -> str:
    """At most ``k`` names, then how many more."""
    if len(names) <= k:
        return ", ".join(names) or "(none yet)"
    return f"{', '.join(names[:k])} and {len(names) - k} more"


_WORD = re.compile(r"[a-z0-9]+")
_JOIN = re.compile(r"[\s_-]+")
_BLOCK_WORD = re.compile(r"\s+(?:block|cube|box)\b")


def _as_object(words: Sequence[str], vocab: frozenset[str]) -> str | None:
    """The class ``words`` name (synonyms, ``_``/``-`` and a plural ``-s`` / ``-es`` of the
    last word read as :func:`~glove_ros.core.world.labels.canonical_label` reads them)."""
    last = words[-1]
    forms = [last]
    if len(last) > 3 and last.endswith("s"):
        forms += [last[:-1]] + ([last[:-2]] if last.endswith("es") else [])
    for form in forms:
        name = canonical_label(" ".join([*words[:-1], form]))
        if name in vocab:
            return name
    return None


@dataclass(frozen=True)
class _Said:
    """Where a text names an object: characters ``start``..``end``, the class ``name``."""

    start: int
    end: int
    name: str


def _object_mentions(text: str, objects: Sequence[str],
                     taken: Sequence[tuple[int, int]] = ()) -> list[_Said]:
    """The objects ``text`` names, in order, longest phrase first ("teddy bear", not
    "bear"); words inside a ``taken`` span (a waypoint's name) are not objects."""
    if not objects:
        return []
    vocab = frozenset(objects)
    longest = max(2, *(len(o.split()) for o in objects),
                  *(len(k.split()) for k, v in SYNONYMS.items() if v in vocab))
    low = text.lower()
    words = [m for m in _WORD.finditer(low)
             if not any(a <= m.start() < b for a, b in taken)]
    out: list[_Said] = []
    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            span = words[i:i + n]
            if any(not _JOIN.fullmatch(low, span[j].end(), span[j + 1].start())
                   for j in range(n - 1)):
                continue  # a phrase is words next to each other, not across a comma
            name = _as_object([m.group() for m in span], vocab)
            if name is not None:
                out.append(_Said(span[0].start(), span[-1].end(), name))
                i += n
                break
        else:
            i += 1
    return out


def _name_rx(name: str) -> re.Pattern[str]:
    pat = re.escape(name.lower()).replace("_", "[_ ]")
    return re.compile(rf"(?<![a-z0-9_]){pat}(?![a-z0-9_])")


def _names_in(text: str, colours: Sequence[str], waypoints: Sequence[str],
              objects: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """The colours, waypoints and objects ``text`` names, each in order of occurrence.

    A word that is both a colour and an object ("orange") is the colour before "block",
    "cube" or "box" and the object otherwise; a waypoint's words are never an object."""
    cols, wps = _words_in(text, colours), _words_in(text, waypoints)
    if not objects:
        return cols, wps, []
    low = text.lower()
    taken = [m.span() for w in waypoints for m in _name_rx(w).finditer(low)]
    said = [s for s in _object_mentions(low, objects, taken)
            if not (low[s.start:s.end] in {c.lower() for c in colours}
                    and _BLOCK_WORD.match(low, s.end))]
    cols = [c for c in cols if any(not any(s.start <= m.start() < s.end for s in said)
                                   for m in _name_rx(c).finditer(low))]
    return cols, wps, list(dict.fromkeys(s.name for s in said))


def _the_object(phrase: str, objects: Sequence[str]) -> str | None:
    """The object ``phrase`` is, when it names exactly one and nothing else."""
    said = _object_mentions(phrase, objects)
    body = phrase.strip().lower()
    if len(said) == 1 and said[0].start == 0 and said[0].end == len(body):
        return said[0].name
    return None


def _the_colour(phrase: str, colours: Sequence[str]) -> str | None:
    """The colour of ``phrase`` = "<colour>" or "<colour> block|cube|box", else None."""
    m = re.fullmatch(r"([a-z]+)(?:\s+(?:block|cube|box))?", phrase.strip().lower())
    return next((c for c in colours if m and c.lower() == m.group(1)), None)


# --------------------------------------------------------------------------------------------
# free-text requests: what the robot is asked, grounded in memory by the planner node

#: what a free-text request can ask for
INTENTS = ("find", "go_to", "go_to_last_seen", "where_last_seen", "corridor_status", "changes",
           "dock", "is_there")
_TARGET_INTENTS = ("find", "go_to_last_seen", "where_last_seen", "is_there")
#: what ``TaskRequest.look_kind`` may be: the look outcome kinds (glove_ros.core.memory.looks)
TARGET_KINDS = ("colors", "objects")


@dataclass(frozen=True)
class TaskRequest:
    """A request in structured form.

    ``intent``: one of :data:`INTENTS`; ``colour``, the target, for find / go_to_last_seen /
    where_last_seen / is_there: a colour name or an object class (canonical spelling), as
    ``look_kind`` says (``"colors"`` or ``"objects"``; ``""`` when there is no target or the
    caller did not say); ``waypoint`` for go_to and is_there; ``waypoint`` + ``waypoint2`` for
    corridor_status; ``since_s`` for changes (how far back, seconds; 0 = since the start of
    memory). ``source`` says who parsed it: ``rules`` (the fixed grammar) or ``llm``.
    """

    intent: str
    colour: str = ""
    waypoint: str = ""
    waypoint2: str = ""
    since_s: float = 0.0
    text: str = ""
    source: str = "rules"
    look_kind: str = ""

    def validate(self, colours: Sequence[str] | None = None,
                 waypoints: Sequence[str] | None = None,
                 objects: Sequence[str] | None = None) -> TaskRequest:
        """Raise ValueError when a field the intent needs is missing or unknown (a target
        is checked against ``colours`` or ``objects`` by its ``look_kind``)."""
        if self.intent not in INTENTS:
            raise ValueError(f"unknown intent {self.intent!r}; one of {', '.join(INTENTS)}")
        if self.look_kind not in ("", *TARGET_KINDS):
            raise ValueError(f"look_kind must be one of {', '.join(TARGET_KINDS)} or '', got "
                             f"{self.look_kind!r}")
        if self.intent in _TARGET_INTENTS:
            if not self.colour:
                raise ValueError(f"{self.intent} needs a colour" + (
                    " or an object" if objects else ""))
            self._check_target(colours, objects)
        need = {"go_to": 1, "corridor_status": 2, "is_there": 1}.get(self.intent, 0)
        wps = [self.waypoint, self.waypoint2][:need]
        for w in wps:
            if not w:
                raise ValueError(f"{self.intent} needs {need} waypoint(s)")
            if waypoints is not None and w not in waypoints:
                raise ValueError(f"unknown waypoint {w!r}; known: {', '.join(waypoints)}")
        if need == 2 and self.waypoint == self.waypoint2:
            raise ValueError("corridor_status needs two different waypoints")
        return self

    def _check_target(self, colours: Sequence[str] | None,
                      objects: Sequence[str] | None) -> None:
        c = self.colour
        if self.look_kind == "objects" or (self.look_kind == "" and objects
                                           and c not in (colours or ())):
            if objects is not None and c not in objects:
                raise ValueError(f"unknown object {c!r}; known objects: "
                                 f"{_short(list(objects))}")
        elif colours is not None and c not in colours:
            raise ValueError(f"unknown colour {c!r}; known: {', '.join(colours)}")


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
_WHERE = re.compile(r"^\s*(?:and\s+|so\s+)?(?:(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?"
                    r"(?:tell\s+me|say|let\s+me\s+know|remind\s+me|do\s+you\s+(?:know|remember))\s+)?"
                    r"(?:where|"
                    r"in\s+which\s+(?:place|room))\b.*"
                    r"\b(?:is|are|see|saw|seen|spot|spotted|find|found|notice|noticed)\b", re.I)
_GOTO = re.compile(r"\b(go|drive|navigate|move|head|take\s+me|bring\s+me|lead\s+me|get\s+to)\b",
                   re.I)
_PHRASE = r"(?P<what>[a-z0-9][a-z0-9 _-]*?)"
# "find the cup", "look for a person", "search for the tv monitor" (an object, no "block")
_FIND_OBJECT = re.compile(
    r"^\s*(?:please\s+)?(?:(?:can|could|would)\s+you\s+)?(?:please\s+)?"
    r"(?:find|search(?:\s+for)?|locate|look\s+for)\s+(?:me\s+)?(?:(?:the|a|an|some|my)\s+)?"
    + _PHRASE + r"\s*(?:please\s*)?[.!?]?\s*$", re.I)
# "is there a person in the kitchen", "is the cup still in the office?" (answer, never drive)
_IS_THERE = re.compile(
    r"^\s*(?:and\s+|so\s+)?(?:is|are)\s+(?:there\s+)?(?:(?:the|a|an|any|some)\s+)?" + _PHRASE
    + r"\s+(?:still\s+|now\s+)?(?:in|at|inside)\s+(?:the\s+)?(?P<where>[a-z0-9][a-z0-9 _-]*?)"
    r"(?:\s+(?:now|still|right\s+now|at\s+the\s+moment))?\s*[?.!]?\s*$", re.I)
# "go to the cup", "take me to the person": where it was last seen
_GOTO_OBJECT = re.compile(
    r"^\s*(?:please\s+)?(?:go|drive|navigate|move|head|take\s+me|bring\s+me|lead\s+me)\s+"
    r"(?:back\s+|over\s+)?to\s+(?:(?:the|a|an|my)\s+)?" + _PHRASE + r"\s*[.!]?\s*$", re.I)


def _words_in(text: str, names: Sequence[str]) -> list[str]:
    """``names`` in the order they occur in ``text`` (whole words; ``_`` may be a space)."""
    low = text.lower()
    found = []
    for n in names:
        m = _name_rx(n).search(low)
        if m:
            found.append((m.start(), n))
    return [n for _, n in sorted(found)]


def _the_waypoint(phrase: str, waypoints: Sequence[str]) -> str | None:
    body = " ".join(phrase.lower().replace("_", " ").split())
    return next((w for w in waypoints if w.lower().replace("_", " ") == body), None)


def _is_there(t: str, colours: Sequence[str], waypoints: Sequence[str],
              objects: Sequence[str]) -> TaskRequest | None:
    """Read "is there a <target> in the <place>": exactly one known target and place."""
    m = _IS_THERE.match(t)
    if not m:
        return None
    wp = _the_waypoint(m.group("where"), waypoints)
    if wp is None:
        return None
    # "orange" alone is the object when objects know it; "orange block" is the colour
    obj = _the_object(m.group("what"), objects)
    col = None if obj is not None else _the_colour(m.group("what"), colours)
    if obj is not None:
        return TaskRequest("is_there", colour=obj, waypoint=wp, text=t, look_kind="objects")
    if col is not None:
        return TaskRequest("is_there", colour=col, waypoint=wp, text=t, look_kind="colors")
    return None


def parse_request(text: str, colours: Sequence[str], waypoints: Sequence[str],
                  objects: Sequence[str] = ()) -> TaskRequest | None:
    """The fixed grammar: a :class:`TaskRequest` for the phrasings it knows, else ``None``
    (then the planner node asks the LLM, :func:`request_messages`). Never guesses: a text
    naming the wrong number of colours, objects or waypoints for its intent gives ``None``,
    and so does a text with a word the grammar does not read (:func:`unread_words`: "go to
    the veranda while staying clear of the greenhouse" is not "go to the veranda").
    ``objects``: the object classes the robot knows (:func:`object_vocabulary`); without
    them the grammar reads colours only, exactly as before objects existed."""
    req = match_request(text, colours, waypoints, objects)
    if req is None or unread_words(text, colours, waypoints, objects, req.intent):
        return None
    return req


def request_leftover(text: str, colours: Sequence[str], waypoints: Sequence[str],
                     objects: Sequence[str] = ()) -> list[str]:
    """The words a request phrasing matched by the grammar leaves unread ([] when the
    grammar reads it whole, or matches no phrasing): why :func:`parse_request` said no."""
    req = match_request(text, colours, waypoints, objects)
    return [] if req is None else unread_words(text, colours, waypoints, objects, req.intent)


# Every word the request grammar reads besides names, per intent: its verbs, question words,
# prepositions, articles and a few fillers (common to all). A word outside its intent's list
# (and outside the names) is not read, so a text holding one is not the request its pattern
# matched: "once you've checked the greenhouse, go charge" is not "go to the greenhouse", "get
# to the veranda while staying clear of the greenhouse" is not a corridor question (issue 28).
_COMMON = """please now just right again kindly hey hi ok okay robot thanks thank you the a an
    some any my me i we us your it this that there here can could would will do does did you
    tell say let know remind remember recall"""
_TARGET = "block blocks cube cubes box boxes"
_MOVE = "go drive navigate move head take bring lead get back over to into toward towards"
_SEEN = """where which place room last most recently recent time was were is are see saw seen
    spot spotted notice noticed find found in at"""
_READ_BY_INTENT = {intent: frozenset(f"{_COMMON} {words}".split()) for intent, words in {
    "find": f"find search for locate look {_TARGET}",
    "dock": "go drive return head come back to dock charger charge",
    "go_to": _MOVE,
    "go_to_last_seen": f"{_MOVE} {_SEEN} {_TARGET} where",
    "where_last_seen": f"{_SEEN} {_TARGET}",
    "is_there": f"is are there in at inside still now right moment {_TARGET}",
    "corridor_status": """corridor corridors passage way path route door open blocked closed
        clear passable between from to and or get through is are still currently at the""",
    "changes": """what anything something changed change changes new different since ago today
        yesterday morning last day hour week past in the a an has have is are been there 24 h""",
}.items()}
_READ = frozenset().union(*_READ_BY_INTENT.values())
_READ_SHORT = frozenset({"s", "ve", "d", "ll", "re", "m"})  # you've, where's, I'd


def unread_words(text: str, colours: Sequence[str], waypoints: Sequence[str],
                 objects: Sequence[str] = (), intent: str = "") -> list[str]:
    """The words of ``text`` that are neither a name it says (a colour, a waypoint, an object
    by any synonym or plural) nor a word the request grammar reads for ``intent`` (any
    intent when ""), in order."""
    read = _READ_BY_INTENT.get(intent, _READ)
    low = (text or "").lower().replace("\u2019", "'")
    taken = [m.span() for n in (*colours, *waypoints) for m in _name_rx(n).finditer(low)]
    taken += [(s.start, s.end) for s in _object_mentions(low, objects, taken)]
    out = []
    for m in _WORD.finditer(low):
        w = m.group()
        if any(a <= m.start() < b for a, b in taken) or w in read:
            continue
        if w in _READ_SHORT and m.start() > 0 and low[m.start() - 1] == "'":
            continue
        out.append(w)
    return out


def match_request(text: str, colours: Sequence[str], waypoints: Sequence[str],
                  objects: Sequence[str] = ()) -> TaskRequest | None:
    """The request phrasing ``text`` matches, NOT checked for words it leaves unread: never
    run it (:func:`parse_request` is the reading); it tells why a text is not a request
    ("do not go to the lab" matches a drive to the lab, and is refused as negated)."""
    if not isinstance(text, str) or not text.strip():
        return None
    t = text.strip()
    if is_dock_task(t):
        return TaskRequest("dock", text=t)
    m = _FIND.match(t)
    if m:
        c = m.group("color").lower()
        return TaskRequest("find", colour=c, text=t, look_kind="colors") if c in colours \
            else None
    m = _FIND_OBJECT.match(t)
    obj = _the_object(m.group("what"), objects) if m and objects else None
    if obj is not None:
        return TaskRequest("find", colour=obj, text=t, look_kind="objects")
    cols, wps, objs = _names_in(t, colours, waypoints, objects)
    targets = [(c, "colors") for c in cols] + [(o, "objects") for o in objs]
    if _CHANGES.search(t) and not targets and not wps:
        since = next((s for rx, s in _SINCE if rx.search(t)), 0.0)
        return TaskRequest("changes", since_s=since, text=t)
    there = _is_there(t, colours, waypoints, objects)
    if there is not None:
        return there
    if _WHERE.search(t) and len(targets) == 1 and not wps and not _GOTO.search(t):
        return TaskRequest("where_last_seen", colour=targets[0][0], text=t,
                           look_kind=targets[0][1])
    if _LAST_SEEN.search(t) and len(targets) == 1 and not wps:
        return TaskRequest("go_to_last_seen", colour=targets[0][0], text=t,
                           look_kind=targets[0][1])
    if len(wps) == 2 and not targets and _CORRIDOR.search(t):
        return TaskRequest("corridor_status", waypoint=wps[0], waypoint2=wps[1], text=t)
    if len(wps) == 1 and not targets and _GOTO.search(t):
        return TaskRequest("go_to", waypoint=wps[0], text=t)
    m = _GOTO_OBJECT.match(t)
    if m and objects and not wps:
        obj = _the_object(m.group("what"), objects)
        if obj is not None:
            return TaskRequest("go_to_last_seen", colour=obj, text=t, look_kind="objects")
    return None


def request_schema(colours: Sequence[str], waypoints: Sequence[str],
                   objects: Sequence[str] = ()) -> dict:
    """JSON schema of an LLM-parsed request (enums keep colours, objects and waypoints on
    the map; the ``object`` field only when there are ``objects``)."""
    props: dict[str, Any] = {
        "intent": {"type": "string", "enum": list(INTENTS)},
        "colour": {"type": "string", "enum": ["", *colours]},
    }
    if objects:
        props["object"] = {"type": "string", "enum": ["", *objects]}
    props.update({
        "waypoint": {"type": "string", "enum": ["", *waypoints]},
        "waypoint2": {"type": "string", "enum": ["", *waypoints]},
        "since_hours": {"type": "integer", "minimum": 0, "maximum": 1000},
    })
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


REQUEST_SYSTEM = (
    "You turn a person's request to a mobile robot into JSON. Intents:\n"
    "- find: search for a coloured block (colour).\n"
    "- go_to: drive to a named place (waypoint).\n"
    "- go_to_last_seen: drive to where a coloured block was last seen (colour).\n"
    "- where_last_seen: only say where a coloured block was last seen, do not move (colour).\n"
    "- is_there: only say whether a coloured block is at a place, do not move (colour, "
    "waypoint).\n"
    "- corridor_status: is the corridor between two places open (waypoint, waypoint2).\n"
    "- changes: what changed in memory (since_hours: how far back, 0 = all).\n"
    "- dock: return to the charger.\n"
    'Unused fields are "" or 0. Use only the colours and places listed.'
)
# with objects: the same intents may name an object instead of a colour
REQUEST_OBJECTS = (
    "\nfind, go_to_last_seen, where_last_seen and is_there may name an object (object) "
    'instead of a coloured block; then colour is "". Use only the objects listed.'
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
_OBJ_EXAMPLES = (
    ("could you check whether a chair is in the hall right now",
     {"intent": "is_there", "object": "chair", "waypoint": "hall"}),
    ("where have you most recently noticed a bottle?",
     {"intent": "where_last_seen", "object": "bottle"}),
)


def request_messages(text: str, colours: Sequence[str], waypoints: Sequence[str],
                     objects: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages asking the LLM to parse ``text`` (static rules and examples first).
    Without ``objects`` they are what they were before objects existed."""
    ex_places = "garage, hall"
    ex_objects = "Objects: bottle, chair. " if objects else ""
    msgs = [{"role": "system", "content": REQUEST_SYSTEM + (REQUEST_OBJECTS if objects else "")}]
    for q, a in (*_REQ_EXAMPLES, *(_OBJ_EXAMPLES if objects else ())):
        full = {"intent": a["intent"], "colour": a.get("colour", "")}
        if objects:
            full["object"] = a.get("object", "")
        full.update({"waypoint": a.get("waypoint", ""), "waypoint2": a.get("waypoint2", ""),
                     "since_hours": a.get("since_hours", 0)})
        msgs.append({"role": "user", "content": f"Colours: green, yellow. {ex_objects}"
                                                f"Places: {ex_places}.\nRequest: {q}"})
        msgs.append({"role": "assistant", "content": json.dumps(full)})
    said = f"Objects: {', '.join(objects)}. " if objects else ""
    msgs.append({"role": "user", "content": f"Colours: {', '.join(colours)}. {said}Places: "
                                            f"{', '.join(waypoints)}.\nRequest: {text.strip()}"})
    return msgs


def request_from_llm(data: Any, text: str = "") -> TaskRequest | None:
    """A :class:`TaskRequest` from a schema-valid LLM reply (``None`` if unusable, and for
    a reply naming both a colour and an object: which one is meant would be a guess)."""
    if not isinstance(data, dict) or data.get("intent") not in INTENTS:
        return None
    colour, obj = str(data.get("colour", "") or ""), str(data.get("object", "") or "")
    if colour and obj:
        return None
    return TaskRequest(data["intent"], colour or obj, data.get("waypoint", ""),
                       data.get("waypoint2", ""), float(data.get("since_hours", 0)) * 3600.0,
                       text, "llm", "objects" if obj else ("colors" if colour else ""))


def _hint(objects: Sequence[str]) -> str:
    more = ("'find the cup', 'is there a person in the kitchen?', 'where did you last see "
            "the cup?', " if objects else "")
    return (f"say e.g. 'find the red block', {more}'go to the kitchen', 'bring me to where you "
            "last saw the blue block', 'is the corridor between hall and lab open?', 'what "
            "changed since yesterday?', 'go charge'")


def _known(colours: Sequence[str], waypoints: Sequence[str], objects: Sequence[str]) -> str:
    if not objects:
        return (f"places: {', '.join(waypoints)}; colours: {', '.join(colours) or '(none yet)'}")
    return (f"places: {', '.join(waypoints)}; colours: {', '.join(colours) or '(none yet)'}; "
            f"objects: {_short(list(objects))}")


def understand(text: str, colours: Sequence[str], waypoints: Sequence[str],
               llm: Any = None, objects: Sequence[str] = ()) -> tuple[TaskRequest, str]:
    """Parse ``text``: the fixed grammar first, the LLM (if given) for anything else.

    ``objects``: the object classes the robot knows (:func:`object_vocabulary`). Returns
    ``(request, note)``; ``note`` says how it was understood. Raises ValueError with the
    phrasings understood when neither works (or the LLM's reply does not validate). A text
    whose place or object slot names something the robot does not know (:func:`unknown_names`)
    is refused naming it and what the robot knows, without asking the LLM: under its
    grammar the model can only answer with a known name, which would be a guess.
    """
    objects = tuple(objects)
    req = parse_request(text, colours, waypoints, objects)
    if req is not None:
        return req.validate(colours, waypoints, objects), "understood by the task grammar"
    hint = _hint(objects)
    unknown = unknown_names(text, colours, waypoints, objects)
    if unknown:  # say which word is not known and what is, instead of a bare "not understood"
        what = "place, colour or object" if objects else "place or colour"
        raise ValueError(f"task {text!r} not understood; {' and '.join(map(repr, unknown))} is "
                         f"not a {what} I know ({_known(colours, waypoints, objects)}); {hint}")
    left = request_leftover(text, colours, waypoints, objects)
    if llm is None:
        unread = f" (words I could not read: {', '.join(map(repr, left))})" if left else ""
        raise ValueError(f"task {text!r} not understood{unread}; {hint}")
    res = llm.complete_json(request_messages(text, colours, waypoints, objects),
                            request_schema(colours, waypoints, objects), max_tokens=64)
    req = request_from_llm(res.data, text.strip()) if getattr(res, "ok", False) else None
    if req is None:
        raise ValueError(f"task {text!r} not understood (LLM: {getattr(res, 'error', '?')}); "
                         f"{hint}")
    try:
        req = req.validate(colours, waypoints, objects)
    except ValueError as exc:
        raise ValueError(f"task {text!r}: the LLM read it as {req.intent} but {exc}; "
                         f"{hint}") from None
    unsaid = ungrounded(req, text)
    if unsaid:
        # the grammar forces the model to pick a known name: "go to the garden" came back as
        # the garage. A robot never acts on a guess: a name the request does not say is refused
        raise ValueError(
            f"task {text!r}: the LLM read it as {req.intent} with {', '.join(map(repr, unsaid))}, "
            f"which the request does not name; known {_known(colours, waypoints, objects)}")
    return req, "understood by the LLM"


_SLOT = r"(?P<w>[a-z][a-z_-]*(?:\s+[a-z][a-z_-]*){0,2})"
_NAMED = (  # where a request names its place or object: "go to the X", "find the X"
    re.compile(r"\b(?:go|drive|navigate|move|head|come|return)\s+(?:back\s+)?(?:to|into|over\s+to)"
               r"\s+(?:the\s+)?" + _SLOT, re.I),
    re.compile(r"\b(?:find|fetch|bring|get|locate|look\s+for|search\s+for|seen?|saw)\s+"
               r"(?:me\s+)?(?:the|a|an)\s+" + _SLOT, re.I),
    re.compile(r"\bwhere\s+(?:is|are)\s+(?:the|a|an|my)\s+" + _SLOT, re.I),
    re.compile(r"^\s*(?:look|search|check)\s+for\s+(?:the|a|an|my)\s+[\w ]+?\s+(?:in|inside|at)\s+"
               r"(?:the\s+)?" + _SLOT, re.I),  # "look for the cup in the X"
    # "is there a X in the Y": the object, then the place
    re.compile(r"^\s*(?:is|are)\s+(?:there\s+)?(?:the|a|an|any|some)\s+" + _SLOT
               + r"\s+(?:still\s+|now\s+)?(?:in|at|inside)\s", re.I),
    re.compile(r"^\s*(?:is|are)\s+(?:there\s+)?.*?\s(?:in|at|inside)\s+(?:the\s+)?" + _SLOT
               + r"\s*(?:now|still)?\s*[?.!]?\s*$", re.I),
)
_NOT_NAMES = frozenset({"block", "blocks", "cube", "thing", "robot", "charger", "charge", "dock",
                        "same", "last", "next", "way", "corridor", "place", "room", "left",
                        "right"})
# a slot's phrase ends before these ("find the garden gnome in the kitchen" -> garden gnome)
_SLOT_END = frozenset({"please", "for", "me", "in", "at", "on", "near", "by", "from", "to",
                       "with", "and", "or", "then", "that", "which", "last", "you", "i", "now",
                       "again", "still", "is", "are", "was", "where", "if", "so", "it", "there",
                       "this", "between", "since", "into", "of", "block", "blocks", "cube",
                       "cubes", "box", "right", "today", "yesterday"})


def unknown_names(text: str, colours: Sequence[str], waypoints: Sequence[str],
                  objects: Sequence[str] = ()) -> list[str]:
    """Phrases in the place/object slot of ``text`` ("go to the X", "find the X block",
    "is there a X in the Y", "where is the X") that are neither a known waypoint, colour nor
    object (synonyms and plurals of a known object are known), in order, for the "not
    understood" reply: the user learns which word the robot does not know. A phrase that
    names something known among other words ("the big kitchen") is not reported."""
    out: list[str] = []
    for rx in _NAMED:
        for m in rx.finditer(text or ""):
            words = m.group("w").lower().split()
            cut = next((i for i, w in enumerate(words) if w in _SLOT_END), len(words))
            phrase = " ".join(words[:cut])
            if not phrase or words[0] in _NOT_NAMES or phrase in out:
                continue
            if (_words_in(phrase, colours) or _words_in(phrase, waypoints) or any(
                    w.lower().replace("_", " ").startswith(phrase + " ") for w in waypoints)
                    or _object_mentions(phrase, objects)):
                continue
            out.append(phrase)
    return out


def ungrounded(req: TaskRequest, text: str) -> list[str]:
    """The colours, objects and waypoints of ``req`` that ``text`` does not name (whole
    words, ``_`` may be a space; an object by any of its synonyms or its plural): an LLM
    under a grammar picks some known name even for an unknown one."""
    out = []
    for n, kind in ((req.colour, req.look_kind), (req.waypoint, ""), (req.waypoint2, "")):
        if not n:
            continue
        said = _object_mentions(text, (n,)) if kind == "objects" else _words_in(text, [n])
        if not said:
            out.append(n)
    return out


# --------------------------------------------------------------------------------------------
# hooks for open instructions (glove_ros.core.plan.instructions): the grammar's own readers

_ARTICLE = re.compile(r"^\s*(?:the|a|an|any|some|my)\s+", re.I)


def target_of(phrase: str, colours: Sequence[str], objects: Sequence[str] = ()
              ) -> tuple[str, str] | None:
    """``(name, look kind)`` of the one target ``phrase`` names and nothing else ("the cup",
    "a red block", "red"), read as the request grammar reads it; ``None`` otherwise."""
    body = _ARTICLE.sub("", phrase or "").strip()
    obj = _the_object(body, objects) if objects else None
    if obj is not None:
        return obj, "objects"
    col = _the_colour(body, colours)
    return (col, "colors") if col is not None else None


def waypoint_of(phrase: str, waypoints: Sequence[str]) -> str | None:
    """The waypoint ``phrase`` names and nothing else ("the kitchen", "room a"), else None."""
    return _the_waypoint(_ARTICLE.sub("", phrase or ""), waypoints)


def known_names(colours: Sequence[str], waypoints: Sequence[str],
                objects: Sequence[str] = ()) -> str:
    """What the robot knows, as a refusal lists it: places, colours, a short list of objects."""
    return _known(colours, waypoints, objects)


def names_in(text: str, colours: Sequence[str], waypoints: Sequence[str],
             objects: Sequence[str] = ()) -> tuple[list[str], list[str], list[str]]:
    """The colours, waypoints and objects ``text`` names, each in order of occurrence."""
    return _names_in(text, colours, waypoints, objects)
