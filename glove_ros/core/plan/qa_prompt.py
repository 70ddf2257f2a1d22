"""The frozen prompt of :mod:`glove_ros.core.plan.qa`: rules and worked examples.

Kept apart from the code so that a change to it is visible on its own: ``glove-ros bench qa``
records :data:`PROMPT_SHA256`, and the prompt was frozen before the report seeds ran. The
examples use places and objects (kitchen, office, hall, shed, garage, porch; white mug, grey
chair, black box) that no benchmark world uses.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["SYSTEM_PROMPT", "EXAMPLES", "PROMPT_SHA256"]

SYSTEM_PROMPT = (
    "You answer questions about what a robot remembers, using only the FACTS given with the "
    "question. Each fact has an id (#N):\n"
    "NOW: what the robot believes now.\n"
    "ALSO: a few observations that disagree with NOW (often a missed detection).\n"
    "OLD: an old memory that newer observations contradicted. It is no longer true.\n"
    "Reply with JSON:\n"
    "value: one of the allowed values, from the NOW facts; unknown only if no fact answers.\n"
    "cited: the ids the answer rests on: the NOW fact first, then the OLD facts listed.\n"
    "stale: true if OLD facts are listed, else false.\n"
    "answer: one short sentence; say what is no longer true.")


def _example(facts: str, kind: str, words: str, allowed: str, old: str,
             reply: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return (f"FACTS:\n{facts}\nQUESTION ({kind}): {words}\nAllowed values: {allowed}\n"
            f"OLD facts: {old}", reply)


_MUG_OLD = "#12 OLD kitchen had: white mug [40 min ago; contradicted 2 min ago: dissonance]"
EXAMPLES = (
    _example("#30 NOW office has: white mug [6 min ago; 3/3]\n"
             "#41 NOW kitchen has: grey chair (no white mug) [2 min ago; 2/2]\n" + _MUG_OLD,
             "where", "where did you last see the white mug?", "office, unknown", "#12",
             {"value": "office", "cited": [30, 12], "stale": True,
              "answer": "In the office 6 min ago; it is no longer in the kitchen."}),
    _example("#30 NOW office has: white mug [6 min ago; 3/3]\n" + _MUG_OLD, "when",
             "when did you last see the white mug?", "6 min ago, unknown", "#12",
             {"value": "6 min ago", "cited": [30, 12], "stale": True,
              "answer": "6 min ago, in the office; it left the kitchen."}),
    _example("#52 NOW hall has: nothing (no black box) [1 min ago; 2/2]\n"
             "#20 OLD hall had: black box [30 min ago; contradicted 1 min ago: dissonance]",
             "still_at", "is the black box still in the hall?", "no, unknown, yes", "#20",
             {"value": "no", "cited": [52, 20], "stale": True,
              "answer": "No, the black box is no longer in the hall."}),
    _example("#57 NOW shed has: black box [4 min ago; 2/2]", "still_at",
             "is the black box still in the shed?", "no, unknown, yes", "none",
             {"value": "yes", "cited": [57], "stale": False,
              "answer": "Yes, I saw it in the shed 4 min ago."}),
    _example("#66 NOW garage has: grey chair, white mug [3 min ago; 4/5]\n"
             "#61 ALSO garage had: grey chair [9 min ago; only 1/5]", "what_at",
             "what is in the garage?", "a list of: grey chair, white mug (empty list = nothing)",
             "none", {"value": ["grey chair", "white mug"], "cited": [66], "stale": False,
                      "answer": "A grey chair and a white mug."}),
    _example("#88 NOW porch has: nothing [2 min ago; 3/3]\n"
             "#70 OLD porch had: white mug [20 min ago; contradicted 8 min ago: dissonance]",
             "what_at", "what is on the porch?", "a list of: (none) (empty list = nothing)",
             "#70", {"value": [], "cited": [88, 70], "stale": True,
                     "answer": "Nothing now; the white mug is no longer there."}),
    _example(_MUG_OLD + "\n#61 OLD corridor hall-office was open [30 min ago; contradicted 5 "
             "min ago: dissonance]\n#41 NOW kitchen has: grey chair [2 min ago; 2/2]\n"
             "#95 NOW corridor hall-office is closed [3 min ago; 2/2]", "changes",
             "what changed in the last hour?", "a list of: hall-office, kitchen (empty list = "
             "nothing)", "#12, #61",
             {"value": ["hall-office", "kitchen"], "cited": [12, 61], "stale": True,
              "answer": "The white mug left the kitchen and the hall-office corridor closed."}),
    _example("#95 NOW corridor hall-office is closed [3 min ago; 2/2]\n"
             "#61 OLD corridor hall-office was open [30 min ago; contradicted 5 min ago: "
             "dissonance]\n#77 OLD corridor hall-kitchen was closed [50 min ago; contradicted "
             "20 min ago: dissonance]\n#90 NOW corridor hall-kitchen is open [4 min ago; 5/5]",
             "corridors", "which corridors are closed?", "a list of: hall-kitchen, hall-office "
             "(empty list = nothing)", "#61, #77",
             {"value": ["hall-office"], "cited": [95, 61, 77], "stale": True,
              "answer": "Only hall-office; hall-kitchen is open again."}),
)

#: fingerprint of the frozen prompt (system text and examples); benchmarks record it
PROMPT_SHA256 = hashlib.sha256(json.dumps([SYSTEM_PROMPT, EXAMPLES]).encode()).hexdigest()
