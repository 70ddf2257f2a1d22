"""Task parsing: what the planner accepts, and clear errors for what it does not."""

from __future__ import annotations

import pytest

from glove_ros.core.tasks import is_dock_task, parse_task


@pytest.mark.parametrize("text", ["find the red block", "Find a RED cube.", "search for red block",
                                  "please locate the red box", "look for red block"])
def test_find_variants(text):
    task = parse_task(text, "t1")
    assert (task.color, task.id) == ("red", "t1")


def test_unknown_colour_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: blue, red"):
        parse_task("find the pink block", colors=("blue", "red"))


@pytest.mark.parametrize("text", ["", "dance the tango", "find the block", "red block"])
def test_not_understood(text):
    with pytest.raises(ValueError, match="not understood"):
        parse_task(text)


@pytest.mark.parametrize("text,expected", [("return to the dock", True), ("go charge", True),
                                           ("Dock.", True), ("go back to the charger", True),
                                           ("find the red block", False), ("docking bay", False)])
def test_dock_tasks(text, expected):
    assert is_dock_task(text) is expected
