"""Which texts are instructions, and the split of core/plan/instructions (types and grammar;
the LLM's part; the running part). No ROS.

What must hold: a single request (go to, find, dock, a question, one with a trailing
"please") is not an instruction, so the planner node runs it on its single-request path
exactly as before; a sequence, a constraint or a conditional is one; every name the modules
define is still importable from ``glove_ros.core.plan.instructions``.
"""

from __future__ import annotations

import pytest

from glove_ros.core.plan import instructions, instructions_llm, instructions_run
from glove_ros.core.plan.instructions import is_instruction

C, W, OBJ = ("red", "blue"), ("dock", "hall", "kitchen", "office", "lab"), ("cup", "person")


@pytest.mark.parametrize("text", [
    "find the red block", "find the cup", "go to the kitchen", "return to the dock",
    "go charge", "where did you last see the red block?", "is there a person in the kitchen?",
    "is the corridor between hall and lab open?", "what changed since yesterday?",
    "where is the cup, please?", "go to the kitchen, please"])
def test_single_requests_are_not_instructions(text):
    assert not is_instruction(text, C, W, OBJ)


@pytest.mark.parametrize("text", [
    "go to the kitchen, then the office, then dock", "go to the office but avoid the lab",
    "if the cup is not in the kitchen, look in the office", "find the red block and then dock",
    "go to the kitchen or the office", "check the kitchen; check the office"])
def test_sequences_constraints_and_conditionals_are(text):
    assert is_instruction(text, C, W, OBJ)


def test_the_split_modules_names_are_importable_from_instructions():
    for name in instructions._LLM_NAMES:
        assert getattr(instructions, name) is getattr(instructions_llm, name)
    for name in instructions._RUN_NAMES:
        assert getattr(instructions, name) is getattr(instructions_run, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        instructions.nothing_here  # noqa: B018


def test_task_help_lists_instruction_forms_the_grammar_reads():
    """`glove-ros task --help` shows instructions; each example it gives is read by the
    instruction grammar (no LLM) on a map with those names: a plan, or the question it
    promises for the ambiguous one."""
    from glove_ros.cli.live import TASK_DESCRIPTION
    from glove_ros.core.plan.agent_types import WorldMap
    from glove_ros.core.plan.instructions import Clarify, Plan, understand_instruction

    wm = WorldMap({w: (float(i), 0.0, 0.0) for i, w in enumerate(
        ("dock", "hall", "kitchen", "pantry", "lab", "office"))},
        {("dock", "hall"): 1.0, ("hall", "kitchen"): 1.0, ("kitchen", "pantry"): 1.0,
         ("hall", "lab"): 1.0, ("hall", "office"): 1.0, ("lab", "office"): 1.0}, "dock")
    shown = {
        "go to the kitchen, then the office, then dock": Plan,
        "look for the cup in the pantry, then check the kitchen": Plan,
        "go to the office but avoid the lab": Plan,
        "go to the office, don't go through the lab": Plan,
        "go to the kitchen, do not use the hall-kitchen corridor": None,  # refused: cut off
        "if the cup is not in the kitchen, look in the pantry, else return to the dock": Plan,
        "if there is no person in the hall, check the office": Plan,
        "go to the kitchen or the office": Clarify}
    assert "Instructions:" in TASK_DESCRIPTION
    for form in ("then the office, then dock", "avoid the lab", "if the cup is not in the "
                 "kitchen, look in the pantry", "go to the kitchen or the office"):
        assert form in TASK_DESCRIPTION, form
    for text, kind in shown.items():
        res = understand_instruction(text, C, wm, None, OBJ, "dock")
        if kind is None:
            assert "hall-kitchen, which you asked me to avoid" in res.reason, res
        else:
            assert isinstance(res, kind), (text, res)
