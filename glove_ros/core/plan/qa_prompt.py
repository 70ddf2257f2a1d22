"""The frozen prompt of :mod:`glove_ros.core.plan.qa`: rules and worked examples.

Kept apart from the code so that a change to it is visible on its own: ``glove-ros bench qa``
records :data:`PROMPT_SHA256`, and the prompt is frozen before the report seeds run. The
rules and examples are the same for every question, so llama.cpp evaluates them once and
reuses their KV cache; only the question's facts are new each time. The examples use places
and objects (kitchen, office, hall, shed, garage, porch; white mug, grey chair, black box)
that no benchmark world uses, in the format of :func:`glove_ros.core.plan.qa.question_text`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["SYSTEM_PROMPT", "EXAMPLES", "PROMPT_SHA256"]

SYSTEM_PROMPT = (
    "You answer questions about what a robot remembers, from the numbered facts given with "
    "the question.\n"
    "NOW: what the robot believes now (n/m: looks that agree).\n"
    "ALSO: a few looks that disagree with NOW, often a missed detection; NOW wins.\n"
    "OLD: an old memory that later looks contradicted. It is no longer true.\n"
    "Reply with JSON. v: the answer, one of the choices, read from the NOW facts. c: the "
    "facts it rests on, the NOW fact first, then the OLD facts about the same thing.\n"
    "Is X still at Y: yes if the NOW fact of Y has X, else no.\n"
    "How sure: high if all looks agree (n/n, n at least 2) and no OLD fact; medium "
    "otherwise; low if X was seen only in OLD facts.")


def _example(facts: str, question: str, choices: str, v: Any, c: list[int]
             ) -> tuple[str, dict[str, Any]]:
    return f"{facts}\nQ: {question}\nChoices: {choices}", {"v": v, "c": c}


EXAMPLES = (
    _example("#1 NOW office: white mug (6 min ago; 3/3 looks)\n"
             "#2 NOW kitchen: grey chair, no white mug (2 min ago; 2/2 looks)\n"
             "#3 OLD kitchen had: white mug (40 min ago; no longer true since 2 min ago)",
             "where did you last see the white mug?", "office", "office", [1, 3]),
    _example("#1 NOW shed: black box (4 min ago; 3/3 looks)\n"
             "#2 OLD shed had: nothing (20 min ago; no longer true since 9 min ago)",
             "is the black box still in the shed?", "no, yes", "yes", [1, 2]),
    _example("#1 NOW hall: nothing, no black box (1 min ago; 2/2 looks)\n"
             "#2 OLD hall had: black box (30 min ago; no longer true since 1 min ago)",
             "is the black box still in the hall?", "no, yes", "no", [1, 2]),
    _example("#1 NOW garage: grey chair, white mug (3 min ago; 4/5 looks)\n"
             "#2 ALSO garage had: grey chair (9 min ago; only 1/5 looks)",
             "is the white mug still in the garage?", "no, yes", "yes", [1]),
    _example("#1 NOW office: white mug (6 min ago; 3/3 looks)\n"
             "#2 OLD kitchen had: white mug (40 min ago; no longer true since 2 min ago)",
             "when did you last see the white mug?", "6 min ago", "6 min ago", [1, 2]),
    _example("#1 NOW garage: grey chair, white mug (3 min ago; 4/5 looks)\n"
             "#2 ALSO garage had: grey chair (9 min ago; only 1/5 looks)",
             "what is in the garage?", "list of grey chair, white mug; [] = nothing",
             ["grey chair", "white mug"], [1]),
    _example("#1 NOW porch: nothing (2 min ago; 3/3 looks)\n"
             "#2 OLD porch had: white mug (20 min ago; no longer true since 8 min ago)",
             "what is on the porch?", "list of (none); [] = nothing", [], [1, 2]),
    _example("#1 OLD kitchen had: white mug (40 min ago; no longer true since 2 min ago)\n"
             "#2 OLD corridor hall-office was open (30 min ago; no longer true since 5 min ago)"
             "\n#3 NOW kitchen: grey chair (2 min ago; 2/2 looks)\n"
             "#4 NOW corridor hall-office is closed (3 min ago; 2/2 looks)",
             "what changed in the last hour?", "list of hall-office, kitchen; [] = nothing",
             ["hall-office", "kitchen"], [1, 2]),
    _example("#1 NOW corridor hall-office is closed (3 min ago; 2/2 looks)\n"
             "#2 OLD corridor hall-office was open (30 min ago; no longer true since 5 min ago)"
             "\n#3 OLD corridor hall-kitchen was closed (50 min ago; no longer true since 20 "
             "min ago)\n#4 NOW corridor hall-kitchen is open (4 min ago; 5/5 looks)",
             "which corridors are closed?", "list of hall-kitchen, hall-office; [] = nothing",
             ["hall-office"], [1, 2, 3]),
    _example("#1 NOW shed: black box (5 min ago; 2/3 looks)\n"
             "#2 ALSO shed had: nothing (8 min ago; only 1/3 looks)",
             "how sure are you where the black box is?", "high, low, medium", "medium", [1]),
)

#: fingerprint of the frozen prompt (system text and examples); benchmarks record it
PROMPT_SHA256 = hashlib.sha256(json.dumps([SYSTEM_PROMPT, EXAMPLES]).encode()).hexdigest()
