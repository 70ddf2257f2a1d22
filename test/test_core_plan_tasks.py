"""Task parsing: what the planner accepts, and clear errors for what it does not."""

from __future__ import annotations

import json

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
    assert req == TaskRequest("go_to_last_seen", "green", text=req.text, source="llm",
                              look_kind="colors")
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
                        "since_hours": 0}] * 2)
    # a phrasing whose place slot the robot can read: refused by name, the LLM is not asked
    with pytest.raises(ValueError, match="'garden' is not a place or colour I know") as err:
        understand("go to the garden", C, places, llm)
    assert "places: hall, kitchen, lab, office, dock, garage" in str(err.value)
    assert not llm.calls
    # one it cannot read goes to the LLM, whose reading names what the request does not say
    with pytest.raises(ValueError, match="'garage', which the request does not name") as err:
        understand("I'd like you to wander over toward the garden", C, places, llm)
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


# ------------------------------------------------------------------ objects (issue 27)

from glove_ros.core.plan.tasks import (  # noqa: E402
    INTENTS,
    object_vocabulary,
    request_from_llm,
    request_messages,
    unknown_names,
)

COCO = object_vocabulary(["coco"])  # what the planner knows with a trained detector


def test_object_vocabulary_is_the_world_plus_the_parameter_canonicalised():
    assert len(COCO) == 80 and "couch" in COCO and "sofa" not in COCO
    assert object_vocabulary([""]) == ()  # the world file's objects only: none here
    assert object_vocabulary([""], ("cup", "person")) == ("cup", "person")
    assert object_vocabulary(["Sofa", "tvmonitor", " "], ("cup",)) == ("couch", "cup", "tv")
    assert set(object_vocabulary(["coco", "widget"])) == set(COCO) | {"widget"}
    with pytest.raises(ValueError, match="'cup,person' may not contain"):
        object_vocabulary(["cup,person"])


@pytest.mark.parametrize("text,cls", [
    ("find the cup", "cup"), ("find a person", "person"), ("Find the CUPS.", "cup"),
    ("look for the sofa", "couch"), ("search for the tv monitor", "tv"),
    ("search for the tvmonitor", "tv"), ("could you find the dining table", "dining table"),
    ("locate a potted plant", "potted plant"), ("find my cell phone", "cell phone"),
    ("find the phone", "cell phone"), ("find the teddy bear", "teddy bear"),
    ("find the hot dog", "hot dog"), ("find the orange", "orange"),
])
def test_find_an_object_by_its_class_synonym_or_plural(text, cls):
    r = parse_request(text, C, W, COCO)
    assert r is not None and (r.intent, r.colour, r.look_kind) == ("find", cls, "objects"), r
    # the agent runs the same search with the class as its target
    assert understand(text, C, W, None, COCO)[0].colour == cls


@pytest.mark.parametrize("text,intent,target,place", [
    ("is there a person in the kitchen", "is_there", "person", "kitchen"),
    ("is the cup in the office", "is_there", "cup", "office"),
    ("Is the cup still in the office?", "is_there", "cup", "office"),
    ("are there people in the lab?", "is_there", "person", "lab"),
    ("is there a dining table in the hall", "is_there", "dining table", "hall"),
    ("is there a sofa in the hall right now?", "is_there", "couch", "hall"),
    ("where did you last see a suitcase", "where_last_seen", "suitcase", ""),
    ("where is the cup?", "where_last_seen", "cup", ""),
    ("where are the potted plants", "where_last_seen", "potted plant", ""),
    ("go to the cup", "go_to_last_seen", "cup", ""),
    ("take me to the cell phone", "go_to_last_seen", "cell phone", ""),
    ("go to where you last saw the cup", "go_to_last_seen", "cup", ""),
    ("bring me to where you last saw the tv monitor", "go_to_last_seen", "tv", ""),
])
def test_object_questions_and_errands(text, intent, target, place):
    r = parse_request(text, C, W, COCO)
    assert r is not None, text
    assert (r.intent, r.colour, r.waypoint, r.look_kind) == (intent, target, place, "objects")


def test_is_there_for_a_colour_block_and_the_word_both_a_colour_and_an_object():
    assert parse_request("is the red block in the kitchen?", C, W) == TaskRequest(
        "is_there", "red", "kitchen", text="is the red block in the kitchen?",
        look_kind="colors")
    orange = (*C, "orange")
    # "orange block" is the colour, "orange" alone the fruit when objects know it
    assert parse_request("find the orange block", orange, W, COCO).look_kind == "colors"
    assert parse_request("is the orange block in the lab", orange, W, COCO).look_kind == \
        "colors"
    assert parse_request("is there an orange in the lab", orange, W, COCO).look_kind == \
        "objects"
    assert parse_request("where is the orange?", orange, W, COCO).look_kind == "objects"
    assert parse_request("where is the orange?", orange, W).look_kind == "colors"


@pytest.mark.parametrize("text", [
    "find the red block", "Find a RED cube.", "bring me to where you last saw the blue block",
    "where did you last see the red block?", "is the corridor between hall and lab open?",
    "can you get from lab to kitchen?", "what changed since yesterday?",
    "go to the kitchen", "please drive over to the office", "return to the dock",
    "in which room did you spot the red block", "hello", "go to the moon",
    "find the purple block", "go from hall to lab and then to office",
])
def test_colour_phrasings_read_the_same_with_objects_known(text):
    without, with_ = parse_request(text, C, W), parse_request(text, C, W, COCO)
    assert without == with_


@pytest.mark.parametrize("text", [
    "find the red cup",  # a colour and an object: which one is the target?
    "find the cup in the kitchen",  # a search limited to a place: not a phrasing we run
    "go to the kitchen and find the cup",
    "is there a cup or a person in the kitchen",
    "is there a cup in the kitchen or the hall",
    "move the cup to the kitchen",  # must never drive to the kitchen
])
def test_object_phrasings_the_grammar_does_not_guess(text):
    assert parse_request(text, C, W, COCO) is None


@pytest.mark.parametrize("text,unknown,objects", [
    ("find the garden gnome", "garden gnome", COCO),
    ("is there a garden gnome in the kitchen?", "garden gnome", COCO),
    ("where did you last see the garden gnome", "garden gnome", COCO),
    ("is there a cup in the garden", "garden", COCO),
    ("is the cup in the garden shed?", "garden shed", COCO),
    ("find the dog", "dog", ("cup", "person")),  # a COCO class this robot does not know
    ("look for the sofa", "sofa", ("cup", "person")),  # couch: not known here either
])
def test_an_unknown_object_or_place_is_refused_by_name_without_asking_the_llm(
        text, unknown, objects):
    llm = ScriptedLlm([{"intent": "find", "colour": "", "object": objects[0], "waypoint": "",
                        "waypoint2": "", "since_hours": 0}])
    with pytest.raises(ValueError) as err:
        understand(text, C, W, llm, objects)
    msg = str(err.value)
    assert f"'{unknown}' is not a place, colour or object I know" in msg, msg
    assert "places: hall, kitchen, lab, office, dock" in msg and "colours: red, blue" in msg
    # what it knows, as a short list (80 classes are not all printed)
    shown = "cup, person" if len(objects) == 2 else "airplane, apple, backpack"
    assert f"objects: {shown}" in msg and ("and 68 more" in msg) == (len(objects) == 80)
    assert not llm.calls  # the model could only answer with a known name: a guess
    assert unknown_names(text, C, W, objects) == [unknown]


def test_known_objects_synonyms_and_plurals_are_not_unknown_names():
    for text in ("find the sofa", "go to the cups", "where is the tv monitor",
                 "is there a dining table in the kitchen", "find the big cup"):
        assert unknown_names(text, C, W, COCO) == [], text
    assert unknown_names("find the cup", C, W) == ["cup"]  # without objects it is unknown


def test_llm_schema_and_messages_name_objects_only_when_there_are_some():
    assert "is_there" in INTENTS
    plain = request_schema(C, W)
    assert "object" not in plain["properties"] and "object" not in plain["required"]
    assert not any("Objects" in m["content"] for m in request_messages("x", C, W))
    with_ = request_schema(C, W, ("cup", "person"))
    assert with_["properties"]["object"]["enum"] == ["", "cup", "person"]
    assert with_["required"] == ["intent", "colour", "object", "waypoint", "waypoint2",
                                 "since_hours"]
    msgs = request_messages("x", C, W, ("cup", "person"))
    assert msgs[-1]["content"].startswith("Colours: red, blue, green, yellow. Objects: cup, "
                                          "person. Places: hall")
    assert all(set(json.loads(m["content"])) == set(with_["required"])
               for m in msgs if m["role"] == "assistant")


def test_llm_object_readings_are_grounded_in_what_the_request_says():
    objs = ("couch", "cup", "person")
    reply = {"intent": "where_last_seen", "colour": "", "object": "couch", "waypoint": "",
             "waypoint2": "", "since_hours": 0}
    req, how = understand("any idea where that sofa went?", C, W, ScriptedLlm([reply]), objs)
    assert (req.colour, req.look_kind, req.source) == ("couch", "objects", "llm")  # sofa = couch
    with pytest.raises(ValueError, match="'couch', which the request does not name"):
        understand("any idea where that thing went?", C, W, ScriptedLlm([reply]), objs)
    both = {**reply, "colour": "red"}  # a colour and an object: which one would be a guess
    assert request_from_llm(both, "x") is None
    with pytest.raises(ValueError, match="not understood"):
        understand("any idea where that red sofa went?", C, W, ScriptedLlm([both]), objs)
    unknown = {**reply, "object": "cup"}  # outside the enum: the grammar refuses it
    with pytest.raises(ValueError, match="not understood .*'cup' is not one of"):
        understand("any idea where that cup went?", C, W, ScriptedLlm([unknown]), ("couch",))
    with pytest.raises(ValueError, match="unknown object 'cup'; known objects: couch"):
        TaskRequest("where_last_seen", "cup", look_kind="objects").validate(C, W, ("couch",))


def test_is_there_needs_a_known_place_and_target():
    with pytest.raises(ValueError, match="is_there needs 1 waypoint"):
        TaskRequest("is_there", "cup", look_kind="objects").validate(C, W, COCO)
    with pytest.raises(ValueError, match="unknown object 'gnome'"):
        TaskRequest("is_there", "gnome", "lab", look_kind="objects").validate(C, W, COCO)
    with pytest.raises(ValueError, match="look_kind must be one of colors, objects"):
        TaskRequest("find", "cup", look_kind="things").validate(C, W, COCO)


# ------------------------------------------------------------------ the planner's vocabulary


def test_the_launch_gives_the_planner_the_detectors_classes(tmp_path):
    from glove_ros import graph

    assert graph.linked_params({"perception": {"backend": "darknet"}}) == {
        "planner": {"objects": ["coco"]}}
    assert graph.linked_params({"perception": {"backend": "yolo", "classes": ["cup", ""]}}) == {
        "planner": {"objects": ["cup"]}}  # classes of interest: only those can be seen
    assert graph.linked_params({"perception": {"backend": "color"}}) == {}
    assert graph.linked_params({"perception": {"backend": "darknet"},
                                "planner": {"objects": [""]}}) == {}  # explicit wins
    params = tmp_path / "p.yaml"
    params.write_text("/**/perception:\n  ros__parameters:\n    backend: darknet\n")
    cmd = graph.process_command(graph.PLANNER, str(params))
    assert "objects:=['coco']" in cmd
    assert "objects:=['cup']" in graph.process_command(graph.PLANNER, str(params),
                                                       {"objects": ["cup"]})
    assert not any("objects" in a for a in graph.process_command(graph.MEMORY, str(params)))
    # the shipped configs run the colour detector: no objects unless the world has some
    assert not any("objects" in a for a in graph.process_command(graph.PLANNER,
                                                                 "config/sim.yaml"))
    assert "objects:=['coco']" in graph.process_command(
        graph.PLANNER, "config/sim.yaml", others={"perception": {"backend": "darknet"}})


@pytest.mark.parametrize("text", ["tell me where you last saw the cup",
                                  "could you tell me where you last saw the cup",
                                  "do you know where you last saw the cup"])
def test_asking_to_be_told_where_is_a_question_never_a_drive(text):
    # "tell me where you last saw X" once read as "drive to where X was seen": the robot moved
    # when it was asked to answer
    req = parse_request(text, ("red",), ("kitchen",), ("cup",))
    assert req is not None and req.intent == "where_last_seen", req
