"""Open instructions, the LLM's part: the prompt, the JSON schema and the reader of its reply.

Used by :func:`glove_ros.core.plan.instructions.understand_instruction` for what the
instruction grammar cannot read. The model only proposes: :func:`plan_schema` limits it to
the map's places, corridors, colours and objects, :func:`plan_from_llm` refuses any name the
text does not say, and :func:`~glove_ros.core.plan.instructions.check_plan` checks the rest on
the map.

The reply is compact, because on the robot's 2 cores every generated token costs about 75 ms
(the first schema, every field of every step spelled out, needed about 250 tokens for a
three-step plan and ran out of its 20 s): a step is one small object named by its verb,
``{"go": "lab"}``, ``{"look": "lab", "for": "cup"}``, ``{"find": "red block"}``,
``{"seen": "cup"}`` (drive to where it was last seen), ``{"where": "cup"}``,
``{"is": "cup", "at": "lab"}``, ``{"do": "dock"}`` or ``{"do": "changes"}``; a conditional is
``{"if": "cup", "at": "lab", "present": false, "then": <step>, "else": <step or {"do":
"nothing"}>}``. A three-step plan is about 30 tokens. The prompt (:data:`PLAN_SYSTEM`, the
worked examples on names that are not the map's) is frozen before a held-out set is run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from glove_ros.core.plan.instructions import (
    CAN_DO,
    MAX_STEPS,
    Condition,
    Conditional,
    Instruction,
    Item,
    Step,
    _key,
)
from glove_ros.core.plan.tasks import TaskRequest, ungrounded

PLAN_SYSTEM = (
    "You turn a person's instruction to a mobile robot into a JSON plan: the steps in the "
    "order they must run, and the places and corridors the route must avoid. Steps:\n"
    '{"go": place}: drive there. {"look": place, "for": thing or ""}: drive there and look '
    '(for a thing, if one is said). {"find": thing}: search for it. {"seen": thing}: drive to '
    'where it was last seen. {"where": thing}: say where it was last seen. {"is": thing, '
    '"at": place}: say whether it is there. {"corridor": corridor}: say whether it is open. '
    '{"do": "dock"}: return to the charger. '
    '{"do": "changes"}: say what changed. {"do": "cannot"}: a part the robot cannot do '
    "(it only drives, looks, searches, answers from memory and docks).\n"
    '{"if": thing, "at": place, "present": true or false, "then": step, "else": step or '
    '{"do": "nothing"}}: run "then" only when the thing is (present true) or is not (false) '
    'at that place, else "else".\n'
    "A thing is an object listed, or a colour listed followed by \"block\". Use only names "
    "listed that the instruction says; never add a step the instruction does not ask for."
)

_EXAMPLES = (
    ("swing by the garage and after you are done there head for the porch, keeping out of "
     "the hall", {"steps": [{"go": "garage"}, {"go": "porch"}], "avoid": ["hall"],
                  "avoid_corridors": []}),
    ("should the green cube be missing from the porch, have a look around the garage for it, "
     "otherwise head back to charge",
     {"steps": [{"if": "green block", "at": "porch", "present": False,
                 "then": {"look": "garage", "for": "green block"}, "else": {"do": "dock"}}],
      "avoid": [], "avoid_corridors": []}),
    ("peek at the porch, then tell me where the bottle was last spotted, and skip the "
     "garage-hall passage", {"steps": [{"look": "porch", "for": ""}, {"where": "bottle"}],
                             "avoid": [], "avoid_corridors": ["garage-hall"]}),
    ("roll over to the porch and fetch me the chair",
     {"steps": [{"go": "porch"}, {"do": "cannot"}], "avoid": [], "avoid_corridors": []}),
)
_EX_NAMES = "Colours: green, yellow. Objects: bottle, chair. Places: garage, hall, porch. " \
            "Corridors: garage-hall, hall-porch."


def things(colours: Sequence[str], objects: Sequence[str] = ()) -> list[str]:
    """What a step may name: every object, and every colour as "<colour> block"."""
    return [*objects, *(f"{c} block" for c in colours)]


def _obj(**props: Any) -> dict:
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def _step_schema(ts: Sequence[str], waypoints: Sequence[str], pairs: Sequence[str],
                 dos: Sequence[str]) -> dict:
    """The step shapes whose names exist (``ts``: things; no place, no "go" step)."""
    place = {"type": "string", "enum": list(waypoints)}
    thing = {"type": "string", "enum": list(ts)}
    shapes = []
    if waypoints:
        shapes += [_obj(go=place), _obj(look=place, **{"for": {"type": "string",
                                                               "enum": ["", *ts]}})]
    if ts:
        shapes += [_obj(find=thing), _obj(seen=thing), _obj(where=thing)]
    if ts and waypoints:
        shapes.append(_obj(**{"is": thing, "at": place}))
    if pairs:
        shapes.append(_obj(corridor={"type": "string", "enum": list(pairs)}))
    return {"anyOf": [*shapes, _obj(do={"type": "string", "enum": list(dos)})]}


def said_names(text: str, colours: Sequence[str], waypoints: Sequence[str],
               objects: Sequence[str] = ()) -> tuple[list[str], list[str], list[str]]:
    """The colours, places and objects ``text`` says, as :func:`plan_from_llm` checks them
    (:func:`~glove_ros.core.plan.tasks.ungrounded`: whole words, an object by a synonym)."""
    return ([c for c in colours if not ungrounded(TaskRequest("find", c, look_kind="colors"),
                                                  text)],
            [w for w in waypoints if not ungrounded(TaskRequest("go_to", waypoint=w), text)],
            [o for o in objects if not ungrounded(TaskRequest("find", o, look_kind="objects"),
                                                  text)])


def plan_schema(colours: Sequence[str], waypoints: Sequence[str],
                objects: Sequence[str] = (), corridors: Sequence[tuple[str, str]] = (),
                text: str | None = None) -> dict:
    """JSON schema of an LLM-parsed instruction (the compact steps of this module's doc);
    ``corridors``: the map's corridors, offered as "a-b" (none: every pair of places).

    With ``text``, the grammar offers only what :func:`plan_from_llm` would accept for it:
    the places, colours and objects the text says, corridors whose two ends it says, and a
    dock, a "what changed" or a condition only where the text has a word for one. A 1.5B
    model asked "check on the henhouse" otherwise filled the free "for" with every object,
    and a reply naming what was not said can only be refused afterwards."""
    pairs = [f"{a}-{b}" for a, b in (corridors or [(a, b) for i, a in enumerate(waypoints)
                                                   for b in waypoints[i + 1:]])]
    dos = ["dock", "changes", "cannot"]
    conditional = True
    if text is not None:
        colours, places, objects = said_names(text, colours, waypoints, objects)
        ends = {p: _pair(p, waypoints) for p in pairs}
        pairs = [p for p in pairs if not ungrounded(
            TaskRequest("corridor_status", waypoint=ends[p][0], waypoint2=ends[p][1]), text)]
        waypoints = places
        dos = [d for d in dos if d not in _SAID or re.search(_SAID[d], text, re.I)]
        conditional = bool(re.search(_SAID["if"], text, re.I))
    ts = things(colours, objects)
    step = _step_schema(ts, waypoints, pairs, dos)
    shapes = list(step["anyOf"])
    if conditional and ts and waypoints:
        shapes.append({"type": "object", "properties": {
            "if": {"type": "string", "enum": list(ts)},
            "at": {"type": "string", "enum": list(waypoints)},
            "present": {"type": "boolean"},
            "then": step,
            "else": _step_schema(ts, waypoints, pairs, [*dos, "nothing"])},
            "required": ["if", "at", "present", "then", "else"], "additionalProperties": False})
    none = {"type": "array", "items": {"type": "string", "enum": ["-"]}, "maxItems": 0}
    return {"type": "object", "properties": {
        "steps": {"type": "array", "items": {"anyOf": shapes}, "minItems": 1,
                  "maxItems": MAX_STEPS},
        "avoid": {"type": "array", "items": {"type": "string", "enum": list(waypoints)},
                  "maxItems": 4} if waypoints else none,
        "avoid_corridors": {"type": "array", "items": {"type": "string", "enum": pairs},
                            "maxItems": 4} if pairs else none},
        "required": ["steps", "avoid", "avoid_corridors"], "additionalProperties": False}


def plan_messages(text: str, colours: Sequence[str], waypoints: Sequence[str],
                  objects: Sequence[str] = (), corridors: Sequence[tuple[str, str]] = ()
                  ) -> list[dict[str, str]]:
    """Chat messages asking the LLM for an instruction's plan (rules and examples first, on
    names that are not the map's: that prefix is the same for every call, so llama.cpp
    evaluates it once and reuses it)."""
    msgs = [{"role": "system", "content": PLAN_SYSTEM}]
    for q, a in _EXAMPLES:
        msgs += [{"role": "user", "content": f"{_EX_NAMES}\nInstruction: {q}"},
                 {"role": "assistant", "content": json.dumps(a)}]
    said = f"Objects: {', '.join(objects)}. " if objects else ""
    cs = f" Corridors: {', '.join(f'{a}-{b}' for a, b in corridors)}." if corridors else ""
    msgs.append({"role": "user", "content": f"Colours: {', '.join(colours)}. {said}Places: "
                                            f"{', '.join(waypoints)}.{cs}\nInstruction: {text}"})
    return msgs


def _target(thing: str, objects: Sequence[str]) -> tuple[str, str]:
    """(name, look kind) of a schema thing: an object, or "<colour> block"."""
    if thing in objects or not thing.endswith(" block"):
        return thing, "objects"
    return thing[:-len(" block")], "colors"


def _step(s: Any, text: str, objects: Sequence[str], n: int, waypoints: Sequence[str] = ()
          ) -> tuple[Step | None, list[str]]:
    """One compact step as a :class:`Step` (None for {"do": "nothing"}), and the names it
    uses that ``text`` does not say."""
    if not isinstance(s, dict) or not s:
        raise ValueError(f"the LLM's step {n} is not a step")
    verb = next(iter(s))
    if verb == "go":
        req = TaskRequest("go_to", waypoint=s["go"], text=text, source="llm")
    elif verb == "look":
        name, kind = _target(s.get("for", ""), objects) if s.get("for") else ("", "")
        req = TaskRequest("go_to", waypoint=s["look"], text=text, source="llm")
        return Step(req, True, name, kind), ungrounded(req, text) + (ungrounded(TaskRequest(
            "find", name, look_kind=kind), text) if name else [])
    elif verb in ("find", "seen", "where"):
        name, kind = _target(s[verb], objects)
        intent = {"find": "find", "seen": "go_to_last_seen", "where": "where_last_seen"}[verb]
        req = TaskRequest(intent, name, text=text, source="llm", look_kind=kind)
    elif verb == "is":
        name, kind = _target(s["is"], objects)
        req = TaskRequest("is_there", name, s["at"], text=text, source="llm", look_kind=kind)
    elif verb == "corridor":
        a, b = _pair(s["corridor"], waypoints)
        req = TaskRequest("corridor_status", waypoint=a, waypoint2=b, text=text, source="llm")
    elif verb == "do" and s["do"] in ("dock", "changes"):
        req = TaskRequest(s["do"], text=text, source="llm")
    elif verb == "do" and s["do"] == "nothing":
        return None, []
    elif verb == "do" and s["do"] == "cannot":
        raise ValueError(f"it asks for something I cannot do ({CAN_DO})")
    else:
        raise ValueError(f"the LLM's step {n} is not a step: {json.dumps(s)}")
    return Step(req), ungrounded(req, text)


def _pair(label: str, waypoints: Sequence[str]) -> tuple[str, str]:
    """("a", "b") of the corridor label "a-b" (a place's own "-" kept)."""
    for a in waypoints:
        if label.startswith(f"{a}-") and label[len(a) + 1:] in waypoints:
            return _key(a, label[len(a) + 1:])
    a, _, b = label.partition("-")
    return _key(a, b)


#: the words that must be in the text for the model's step of that kind: a step is grounded in
#: what was said, like a name (the model added "return to the dock" and "what changed" steps
#: nobody asked for on the third held-out set)
_SAID = {"dock": r"\b(?:dock|docking|charge|charger|charging|recharge|home|base|back)\b",
         "changes": r"\b(?:chang\w*|new|different|moved|happened)\b",
         "if": r"\b(?:if|unless|in\s+case|should|whether|otherwise|else|when|only)\b"}


def _unsaid_kinds(data: Any, text: str) -> list[str]:
    """The step kinds of the reply that ``text`` gives no word for (:data:`_SAID`)."""
    kinds: list[str] = []

    def walk(s: Any) -> None:
        if not isinstance(s, dict):
            return
        if "if" in s:
            kinds.append("if")
            walk(s.get("then"))
            walk(s.get("else"))
        elif s.get("do") in ("dock", "changes"):
            kinds.append(s["do"])

    for s in data.get("steps", []) if isinstance(data, dict) else []:
        walk(s)
    return [k for k in dict.fromkeys(kinds) if not re.search(_SAID[k], text, re.I)]


def plan_from_llm(data: Any, text: str, objects: Sequence[str] = (),
                  waypoints: Sequence[str] = ()) -> Instruction:
    """An :class:`Instruction` from a schema-valid LLM reply; ValueError when it is unusable
    or names anything ``text`` does not say (a grammar forces the model onto known names).
    ``objects`` tell an object from a colour block; ``waypoints`` read corridor labels."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ValueError("the LLM's reply is not a plan")
    extra = _unsaid_kinds(data, text)
    if extra:
        what = {"dock": "a return to the dock", "changes": "a report of what changed",
                "if": "a condition"}
        raise ValueError(f"the LLM added {', '.join(what[k] for k in extra)}, which the "
                         "instruction does not ask for")
    items: list[Item] = []
    unsaid: list[str] = []
    for n, s in enumerate(data["steps"], 1):
        if isinstance(s, dict) and "if" in s:
            then, miss = _step(s.get("then"), text, objects, n, waypoints)
            other, miss2 = _step(s.get("else"), text, objects, n, waypoints)
            if then is None:
                raise ValueError(f"the LLM's step {n} does nothing when its condition holds")
            name, kind = _target(s["if"], objects)
            cond = Condition(name, kind, s["at"], bool(s["present"]))
            unsaid += miss + miss2 + ungrounded(TaskRequest("is_there", name, cond.place,
                                                            look_kind=kind), text)
            items.append(Conditional(cond, then, other))
            continue
        step, miss = _step(s, text, objects, n, waypoints)
        if step is None:
            raise ValueError(f"the LLM's step {n} does nothing")
        unsaid += miss
        items.append(step)
    corridors = tuple(_pair(c, waypoints) for c in data.get("avoid_corridors", []))
    places = tuple(dict.fromkeys(data.get("avoid", [])))
    for a, b in corridors:
        unsaid += ungrounded(TaskRequest("corridor_status", waypoint=a, waypoint2=b), text)
    for p in places:
        unsaid += ungrounded(TaskRequest("go_to", waypoint=p), text)
    if unsaid:
        raise ValueError(f"the LLM named {', '.join(map(repr, dict.fromkeys(unsaid)))}, which the "
                         "instruction does not say")
    return Instruction(tuple(items), places, corridors, text, "llm")
