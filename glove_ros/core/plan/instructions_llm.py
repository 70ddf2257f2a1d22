"""Open instructions, the LLM's part: the prompt, the JSON schema and the reader of its reply.

Used by :func:`glove_ros.core.plan.instructions.understand_instruction` for what the
instruction grammar cannot read. The model only proposes: :func:`plan_schema` limits it to
the map's places, colours and objects, :func:`plan_from_llm` refuses any name the text does
not say, and :func:`~glove_ros.core.plan.instructions.check_plan` checks the rest on the map.
The prompt (:data:`PLAN_SYSTEM`, the worked examples on names that are not the map's) is
frozen: the held-out set ``bench/scenarios/instructions_heldout.yaml`` was written after it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from glove_ros.core.plan.instructions import (
    MAX_STEPS,
    Condition,
    Conditional,
    Instruction,
    Item,
    Step,
    _key,
)
from glove_ros.core.plan.tasks import (
    REQUEST_SYSTEM,
    TaskRequest,
    request_from_llm,
    request_schema,
    ungrounded,
)

PLAN_SYSTEM = REQUEST_SYSTEM + (
    "\nAn instruction may hold several steps, in order; give each as one request. "
    '"look": true with go_to means drive there and look (colour or object: what to look '
    'for, if said). "when": "always"; "if" runs the step only when if_colour / if_object is '
    '(if_present true) or is not (false) at if_place; "else" runs the step when the '
    'previous "if" step did not run. avoid_places / avoid_corridors: what the route must '
    "not use. Use only names listed and said in the instruction.")


def plan_schema(colours: Sequence[str], waypoints: Sequence[str],
                objects: Sequence[str] = ()) -> dict:
    """JSON schema of an LLM-parsed instruction: steps whose fields are
    :func:`~glove_ros.core.plan.tasks.request_schema`'s plus look and a guard."""
    props = dict(request_schema(colours, waypoints, objects)["properties"])
    wp = {"type": "string", "enum": list(waypoints)}
    props.update({"look": {"type": "boolean"},
                  "when": {"type": "string", "enum": ["always", "if", "else"]},
                  "if_colour": {"type": "string", "enum": ["", *colours]},
                  **({"if_object": {"type": "string", "enum": ["", *objects]}} if objects else {}),
                  "if_place": {"type": "string", "enum": ["", *waypoints]},
                  "if_present": {"type": "boolean"}})
    step = {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}
    pair = {"type": "object", "properties": {"a": wp, "b": wp}, "required": ["a", "b"],
            "additionalProperties": False}
    return {"type": "object", "properties": {
        "steps": {"type": "array", "items": step, "minItems": 1, "maxItems": MAX_STEPS},
        "avoid_places": {"type": "array", "items": wp, "maxItems": 4},
        "avoid_corridors": {"type": "array", "items": pair, "maxItems": 4}},
        "required": ["steps", "avoid_places", "avoid_corridors"], "additionalProperties": False}


_PLAN_EXAMPLES = (
    ("swing by the garage and after you are done there head for the porch, keeping out of "
     "the hall", {"steps": [{"intent": "go_to", "waypoint": "garage"},
                            {"intent": "go_to", "waypoint": "porch"}],
                  "avoid_places": ["hall"]}),
    ("should the green cube be missing from the porch, have a look around the garage",
     {"steps": [{"intent": "go_to", "waypoint": "garage", "look": True, "colour": "green",
                 "when": "if", "if_colour": "green", "if_place": "porch",
                 "if_present": False}]}),
)


_UNSET = {"since_hours": 0, "look": False, "when": "always", "if_present": True}


def _full(step: dict, objects: bool) -> dict:
    """An example step with every field of the schema, in its order."""
    keys = plan_schema(("x",), ("y",), ("z",) if objects else ())["properties"]["steps"]
    return {k: step.get(k, _UNSET.get(k, "")) for k in keys["items"]["properties"]}


def plan_messages(text: str, colours: Sequence[str], waypoints: Sequence[str],
                  objects: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages asking the LLM for an instruction's plan (rules and examples first,
    on names that are not the map's)."""
    msgs = [{"role": "system", "content": PLAN_SYSTEM}]
    for q, a in _PLAN_EXAMPLES:
        full = {"steps": [_full(s, bool(objects)) for s in a["steps"]],
                "avoid_places": a.get("avoid_places", []), "avoid_corridors": []}
        msgs += [{"role": "user", "content": "Colours: green, yellow. Places: garage, hall, "
                                             f"porch.\nInstruction: {q}"},
                 {"role": "assistant", "content": json.dumps(full)}]
    said = f"Objects: {', '.join(objects)}. " if objects else ""
    msgs.append({"role": "user", "content": f"Colours: {', '.join(colours)}. {said}Places: "
                                            f"{', '.join(waypoints)}.\nInstruction: {text}"})
    return msgs


def plan_from_llm(data: Any, text: str) -> Instruction:
    """An :class:`Instruction` from a schema-valid LLM reply; ValueError when it is unusable
    or names anything ``text`` does not say (a grammar forces the model onto known names)."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ValueError("the LLM's reply is not a plan")
    items: list[Item] = []
    unsaid: list[str] = []
    for n, s in enumerate(data["steps"], 1):
        req = request_from_llm(s, text)
        if req is None:
            raise ValueError(f"the LLM's step {n} is not a request")
        unsaid += ungrounded(req, text)
        step = Step(req)
        if s.get("look") and req.intent == "go_to":
            step = Step(replace(req, colour="", look_kind=""), True, req.colour, req.look_kind)
        if s.get("when") == "if":
            target = s.get("if_object") or s.get("if_colour", "")
            kind = "objects" if s.get("if_object") else "colors"
            cond = Condition(target, kind, s.get("if_place", ""), bool(s.get("if_present")))
            unsaid += ungrounded(TaskRequest("is_there", target, cond.place, look_kind=kind), text)
            items.append(Conditional(cond, step))
        elif s.get("when") == "else":
            if not items or not isinstance(items[-1], Conditional) or items[-1].otherwise:
                raise ValueError(f"the LLM's step {n} is an 'else' without an 'if'")
            items[-1] = replace(items[-1], otherwise=step)
        else:
            items.append(step)
    corridors = tuple(_key(c["a"], c["b"]) for c in data.get("avoid_corridors", []))
    places = tuple(dict.fromkeys(data.get("avoid_places", [])))
    for a, b in corridors:
        unsaid += ungrounded(TaskRequest("corridor_status", waypoint=a, waypoint2=b), text)
    for p in places:
        unsaid += ungrounded(TaskRequest("go_to", waypoint=p), text)
    if unsaid:
        raise ValueError(f"the LLM named {', '.join(map(repr, dict.fromkeys(unsaid)))}, which the "
                         "instruction does not say")
    return Instruction(tuple(items), places, corridors, text, "llm")
