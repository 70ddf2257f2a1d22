"""Task parsing: what the planner accepts, and clear errors for what it does not."""

from __future__ import annotations

import pytest

from glove_ros.core.plan.tasks import is_dock_task, parse_task


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


# ------------------------------------------------------------------ free-text requests

from glove_ros.core.llm.runtime import ScriptedLlm  # noqa: E402
from glove_ros.core.plan.tasks import (  # noqa: E402
    TaskRequest,
    parse_request,
    request_schema,
    understand,
)

C = ("red", "blue", "green", "yellow")
W = ("hall", "kitchen", "lab", "office", "dock")


@pytest.mark.parametrize("text,intent,slots", [
    ("go to the kitchen", "go_to", ("", "kitchen", "")),
    ("please drive over to the office", "go_to", ("", "office", "")),
    ("bring me to where you last saw the blue block", "go_to_last_seen", ("blue", "", "")),
    ("is the corridor between hall and lab open?", "corridor_status", ("", "hall", "lab")),
    ("can you get from lab to kitchen?", "corridor_status", ("", "lab", "kitchen")),
    ("what changed since yesterday?", "changes", ("", "", "")),
    ("find the red block", "find", ("red", "", "")),
    ("return to the dock", "dock", ("", "", "")),
])
def test_grammar_reads_the_documented_requests(text, intent, slots):
    r = parse_request(text, C, W)
    assert r is not None and r.intent == intent and r.source == "rules"
    assert (r.colour, r.waypoint, r.waypoint2) == slots
    if intent == "changes":
        assert r.since_s == 86400.0


@pytest.mark.parametrize("text", ["hello", "", "go to the moon", "find the purple block",
                                  "go from hall to lab and then to office"])
def test_grammar_does_not_guess(text):
    assert parse_request(text, C, W) is None


def test_understand_asks_the_llm_only_for_unknown_phrasings():
    llm = ScriptedLlm([{"intent": "go_to_last_seen", "colour": "green", "waypoint": "",
                        "waypoint2": "", "since_hours": 0}])
    req, how = understand("go to the kitchen", C, W, llm)
    assert req.waypoint == "kitchen" and "grammar" in how and not llm.calls
    req, how = understand("show me the spot where the green cube turned up", C, W, llm)
    assert req == TaskRequest("go_to_last_seen", "green", text=req.text, source="llm")
    assert "LLM" in how and len(llm.calls) == 1
    schema = llm.calls[0][1]
    assert schema == request_schema(C, W)
    assert schema["properties"]["waypoint"]["enum"] == ["", *W]


def test_understand_refuses_with_the_accepted_phrasings():
    with pytest.raises(ValueError, match="go to the kitchen"):
        understand("sing a song", C, W)
    bad = ScriptedLlm([{"intent": "go_to", "colour": "", "waypoint": "", "waypoint2": "",
                        "since_hours": 0}, "not json"])
    with pytest.raises(ValueError, match="go_to needs 1 waypoint"):
        understand("sing a song", C, W, bad)
    with pytest.raises(ValueError, match="LLM: invalid JSON"):
        understand("sing a song", C, W, bad)


def test_an_unknown_place_is_refused_not_mapped_to_a_known_one():
    # the grammar forces the model onto the map's names: "garden" came back as "garage".
    # The robot must refuse, name the word it does not know and list what it does know.
    places = (*W, "garage")
    llm = ScriptedLlm([{"intent": "go_to", "colour": "", "waypoint": "garage", "waypoint2": "",
                        "since_hours": 0}])
    with pytest.raises(ValueError, match="'garage', which the request does not name") as err:
        understand("go to the garden", C, places, llm)
    assert "known places: hall, kitchen, lab, office, dock, garage" in str(err.value)
    assert len(llm.calls) == 1
    # an LLM reading that names what the request says is still taken
    ok = ScriptedLlm([{"intent": "go_to", "colour": "", "waypoint": "garage", "waypoint2": "",
                       "since_hours": 0}])
    req, _ = understand("I'd like you to wander over toward the garage", C, places, ok)
    assert req.waypoint == "garage"


@pytest.mark.parametrize("text,unknown", [
    ("go to the garden", ["garden"]),
    ("find the cup", ["cup"]),
    ("please drive over to the attic", ["attic"]),
])
def test_not_understood_names_the_unknown_word_and_the_known_ones(text, unknown):
    with pytest.raises(ValueError) as err:
        understand(text, C, W)
    msg = str(err.value)
    assert all(f"'{w}' is not a place or colour I know" in msg for w in unknown), msg
    assert "places: hall, kitchen, lab, office, dock" in msg and "colours: red, blue" in msg


@pytest.mark.parametrize("text", ["where did you last see the red block?",
                                  "Where was the red block seen last?",
                                  "where is the red block?",
                                  "in which room did you spot the red block"])
def test_where_questions_are_answered_not_driven(text):
    r = parse_request(text, C, W)
    assert r is not None and r.intent == "where_last_seen" and r.colour == "red", r
    # an errand with the same words still drives
    assert parse_request("bring me to where you last saw the red block", C, W).intent == \
        "go_to_last_seen"
