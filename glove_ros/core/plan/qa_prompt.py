"""The frozen prompt of :mod:`glove_ros.core.plan.qa`: rules and worked examples.

Kept apart from the code so that a change to it is visible on its own: ``glove-ros bench qa``
records :data:`PROMPT_SHA256`, and the prompt is frozen before the report seeds run. The
rules and examples are the same for every question, so llama.cpp evaluates them once and
reuses their KV cache; only the question's items are new each time. The examples use places
and objects (kitchen, office, hall, shed, garage, porch; white mug, grey chair, black box)
that no benchmark world uses, in the format of :func:`glove_ros.core.plan.qa.question_text`:
one line per place or corridor, its current state first and its contradicted history as a
clause; list answers ("which corridors are closed", "what changed") as item numbers.
Docstring edits do not change :data:`PROMPT_SHA256` (it hashes the rules and examples).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["SYSTEM_PROMPT", "EXAMPLES", "PROMPT_SHA256"]

SYSTEM_PROMPT = (
    "You answer questions about what a robot remembers, from the numbered items given with "
    "the question. One item is one place or corridor.\n"
    "NOW: what the robot believes now (n/m: looks that agree). Only NOW is true now.\n"
    "'only n/m looks: X': a few looks that disagree, often a missed detection; NOW wins.\n"
    "'changed T ago; before that: X': old memory, contradicted T ago. It is no longer true."
    "\n'closed T ago', 're-opened T ago': when a corridor changed.\n"
    "Reply with JSON. v: the answer, one of the choices, read from NOW. c: the items it "
    "rests on.\n"
    "Is X still at Y: yes if 'X: there now', no if 'X: NOT there now'.\n"
    "Which corridors are closed: v lists every item whose NOW is closed, none whose NOW is "
    "open.\n"
    "What changed: v lists every item that changed.\n"
    "How sure: high if all looks agree (n/n, n at least 2) and nothing changed; medium "
    "otherwise; low if X was seen only before a change.")


def _example(facts: str, question: str, choices: str, v: Any, c: list[int]
             ) -> tuple[str, dict[str, Any]]:
    return f"{facts}\nQ: {question}\nChoices: {choices}", {"v": v, "c": c}


EXAMPLES = (
    _example("#1 office NOW: white mug (6 min ago; 3/3 looks)\n"
             "#2 kitchen NOW: grey chair, no white mug (2 min ago; 2/2 looks); changed 2 min "
             "ago; before that: white mug",
             "where did you last see the white mug?", "office", "office", [1, 2]),
    _example("#1 shed NOW: black box (4 min ago; 3/3 looks); black box: there now; changed 9 "
             "min ago; before that: nothing",
             "is the black box still in the shed?", "no, yes", "yes", [1]),
    _example("#1 hall NOW: nothing (1 min ago; 2/2 looks); black box: NOT there now; changed 1 "
             "min ago; before that: black box",
             "is the black box still in the hall?", "no, yes", "no", [1]),
    _example("#1 garage NOW: grey chair, white mug (3 min ago; 4/5 looks); white mug: there "
             "now; only 1/5 looks: grey chair",
             "is the white mug still in the garage?", "no, yes", "yes", [1]),
    _example("#1 office NOW: white mug (6 min ago; 3/3 looks)\n"
             "#2 kitchen NOW: nothing, no white mug (2 min ago; 2/2 looks); changed 2 min ago; "
             "before that: white mug",
             "when did you last see the white mug?", "6 min ago", "6 min ago", [1, 2]),
    _example("#1 garage NOW: grey chair, white mug (3 min ago; 4/5 looks); only 1/5 looks: "
             "grey chair",
             "what is in the garage?", "list of grey chair, white mug; [] = nothing",
             ["grey chair", "white mug"], [1]),
    _example("#1 porch NOW: nothing (2 min ago; 3/3 looks); changed 8 min ago; before that: "
             "white mug",
             "what is on the porch?", "list of (none); [] = nothing", [], [1]),
    _example("#1 corridor hall-office NOW: closed (3 min ago; 2/2 looks); closed 5 min ago\n"
             "#2 kitchen NOW: grey chair (2 min ago; 2/2 looks); changed 2 min ago; before "
             "that: white mug",
             "what changed in the last hour?",
             "list of items 1, 2 (all changed in that time); [] = nothing",
             [1, 2], [1, 2]),
    _example("#1 corridor hall-office NOW: closed (3 min ago; 2/2 looks); closed 5 min ago\n"
             "#2 corridor hall-kitchen NOW: open (4 min ago; 5/5 looks); re-opened 20 min ago",
             "which corridors are closed?", "list of items 1, 2; [] = nothing",
             [1], [1, 2]),
    _example("#1 shed NOW: black box (5 min ago; 2/3 looks); only 1/3 looks: nothing",
             "how sure are you where the black box is?", "high, low, medium", "medium", [1]),
)

#: fingerprint of the frozen prompt (system text and examples); benchmarks record it
PROMPT_SHA256 = hashlib.sha256(json.dumps([SYSTEM_PROMPT, EXAMPLES]).encode()).hexdigest()
