"""The look rule: per-frame detections -> one look outcome per stay (no ROS)."""

from __future__ import annotations

import pytest

from glove_ros.core.memory.experience import Source
from glove_ros.core.plan.agent_types import ACTION_LOOK
from glove_ros.core.world.observation import (
    LOOK_ACTION,
    Frame,
    LookAggregator,
    LookConfig,
    judge_frames,
    look_names,
    signature,
)
from glove_ros.core.world.perception import Detection, outcome_signature


def _frames(wp, sets, t0=0.0, dt=0.5):
    return [Frame(wp, frozenset(s), t0 + i * dt) for i, s in enumerate(sets)]


def _feed(agg, frames):
    looks = []
    for f in frames:
        looks += agg.add(f)
    return looks


def test_vocabulary_matches_agent_and_perception():
    assert LOOK_ACTION == ACTION_LOOK
    dets = [Detection("block", "red", 0, 0, 5, 5, 0.9), Detection("block", "blue", 9, 0, 5, 5, 0.2)]
    assert signature(look_names(dets)) == outcome_signature(dets) == "colors=blue,red"
    assert signature(look_names(dets, min_confidence=0.5)) == "colors=red"
    assert signature([]) == "colors="


@pytest.mark.parametrize("missed", [0, 1, 2])
def test_single_missed_frame_does_not_change_the_look(missed):
    sets = [{"red"}, {"red"}, {"red"}]
    sets[missed] = set()
    looks = _feed(LookAggregator(), _frames("room_a", sets))
    assert [lk.outcome for lk in looks] == ["colors=red"]
    assert looks[0].judged == 3 and looks[0].threshold == 2 and not looks[0].partial


def test_single_spurious_frame_does_not_add_a_colour():
    looks = _feed(LookAggregator(), _frames("hall", [set(), {"green"}, set()]))
    assert [lk.outcome for lk in looks] == ["colors="]
    assert dict(looks[0].counts) == {"green": 1}


def test_two_missed_frames_do_change_it():
    looks = _feed(LookAggregator(), _frames("room_a", [{"red"}, set(), set()]))
    assert looks[0].outcome == "colors="


def test_one_look_per_stay_emitted_at_the_nth_frame():
    agg = LookAggregator()
    frames = _frames("room_a", [{"red"}] * 5)
    assert agg.add(frames[0]) == [] and agg.add(frames[1]) == []
    (look,) = agg.add(frames[2])
    assert (look.waypoint, look.outcome, look.stamp, look.first_stamp) == ("room_a", "colors=red",
                                                                          1.0, 0.0)
    assert agg.add(frames[3]) == [] and agg.add(frames[4]) == []  # same stay: ignored
    assert agg.flush() == []
    assert agg.stats() == {"frames": 5, "ignored": 2, "looks": 1, "short_stays": 0}


def test_stays_split_by_tag_change_between_waypoints_and_gaps():
    agg = LookAggregator(LookConfig(max_gap=2.0))
    frames = (_frames("room_a", [{"red"}] * 3, 0) + [Frame("", frozenset(), 2.0)]
              + _frames("room_b", [{"blue"}] * 3, 4) + _frames("room_b", [{"red"}] * 3, 20))
    looks = _feed(agg, frames)
    assert [(lk.waypoint, lk.outcome) for lk in looks] == [
        ("room_a", "colors=red"), ("room_b", "colors=blue"), ("room_b", "colors=red")]


def test_short_stay_scaled_threshold_and_too_short_stays():
    agg = LookAggregator()  # n=3, k=2, min_frames=2
    looks = _feed(agg, _frames("room_a", [{"red"}, {"red", "blue"}]))
    assert looks == []
    looks = _feed(agg, _frames("hall", [set()]))  # closes room_a with 2 frames
    assert [(lk.waypoint, lk.outcome, lk.partial, lk.threshold) for lk in looks] == [
        ("room_a", "colors=red", True, 2)]
    assert agg.flush() == []  # hall had one frame: below min_frames, no look
    assert agg.short_stays == 1
    assert LookConfig(frames=5, min_count=3).threshold(3) == 2


def test_skip_frames_drops_settling_frames():
    agg = LookAggregator(LookConfig(skip_frames=1))
    looks = _feed(agg, _frames("room_a", [{"blue"}, {"red"}, {"red"}, {"red"}]))
    assert [lk.outcome for lk in looks] == ["colors=red"]


def test_waypoint_changed_closes_and_ignores_late_frames():
    agg = LookAggregator()
    _feed(agg, _frames("room_a", [{"red"}, {"red"}]))
    (look,) = agg.waypoint_changed("")
    assert look.partial and look.outcome == "colors=red"
    assert agg.add(Frame("room_a", frozenset({"red"}), 1.0)) == []  # late frame, same stay
    assert agg.open_waypoint is None
    looks = _feed(agg, _frames("room_b", [{"blue"}] * 3, 5))
    assert [lk.outcome for lk in looks] == ["colors=blue"]
    agg.waypoint_changed("room_a")  # really back at room_a: frames count again
    assert [lk.waypoint for lk in _feed(agg, _frames("room_a", [{"red"}] * 3, 9))] == ["room_a"]


def test_look_to_transition_and_judge_frames():
    look = judge_frames([{"red"}, {"red"}, set()], waypoint="room_a", stamps=[1.0, 1.5, 2.0])
    t = look.to_transition("rover", "ep1")
    assert (t.state_key, t.action, t.outcome, t.stamp, t.source) == (
        "room_a", "look", "colors=red", 2.0, Source.OBSERVED)
    with pytest.raises(ValueError, match="at least one frame"):
        judge_frames([])


@pytest.mark.parametrize("bad, match", [
    ({"frames": 0}, "frames"), ({"min_count": 4}, "min_count"), ({"min_frames": 0}, "min_frames"),
    ({"skip_frames": -1}, "skip_frames"), ({"min_confidence": 2.0}, "min_confidence"),
    ({"max_gap": -1}, "max_gap"), ({"nope": 1}, "unknown look config"),
])
def test_config_validation_messages(bad, match):
    with pytest.raises(ValueError, match=match):
        LookConfig.from_dict(bad)


def test_config_round_trip():
    cfg = LookConfig.from_dict({"frames": 5, "min_count": 3, "max_gap": 2})
    assert LookConfig.from_dict(cfg.to_dict()) == cfg


def test_from_fraction_states_the_rule_as_a_fraction():
    assert LookConfig.from_fraction(3, 0.5).min_count == 2
    assert LookConfig.from_fraction(5, 0.6).min_count == 3
    assert LookConfig.from_fraction(1, 1.0).min_count == 1
    with pytest.raises(ValueError, match="min_fraction"):
        LookConfig.from_fraction(3, 0.0)


def test_fresh_frames_refuse_frames_captured_before_the_look_began():
    """A frame queued while the robot drove (stamped before arrival) is never judged at the
    new waypoint: it is counted stale; frames from the look on are used; of unstamped
    frames only the first is skipped."""
    from glove_ros.core.world.observation import FreshFrames

    gate = FreshFrames(start=100.0)
    assert [gate.admit(s) for s in (99.0, 99.95, 100.0, 100.1)] == [False, False, True, True]
    assert gate.stale == 2
    unstamped = FreshFrames(start=100.0)
    assert [unstamped.admit(0.0) for _ in range(3)] == [False, True, True]
    assert unstamped.stale == 0


# ---------------------------------------------------------------------- object looks (issue 27)
def _person(n, conf=0.9, label="person"):
    """n boxes of one class, as a trained detector gives them (no colour)."""
    return [Detection(label, "", 10 * i, 0, 5, 5, conf) for i in range(n)]


def _object_frames(wp, per_frame, t0=0.0, dt=0.5):
    """Frames of the darknet backend: one detection list per frame."""
    from glove_ros.core.world.observation import kind_of_backend

    return [Frame.from_detections(wp, dets, t0 + i * dt, kind=kind_of_backend("darknet"))
            for i, dets in enumerate(per_frame)]


def test_two_persons_in_two_of_three_frames_is_a_look_with_two_persons():
    looks = _feed(LookAggregator(), _object_frames("hall", [_person(2), [], _person(2)]))
    assert [lk.outcome for lk in looks] == ["objects=person*2"]
    look = looks[0]
    assert (look.kind, look.colors, dict(look.counts), dict(look.instances)) == (
        "objects", ("person",), {"person": 2}, {"person": 2})
    t = look.to_transition("rover", "ep1")
    assert (t.state_key, t.action, t.outcome) == ("hall", "look", "objects=person*2")


def test_a_person_in_one_frame_of_three_is_not_seen():
    looks = _feed(LookAggregator(), _object_frames("hall", [[], _person(1), []]))
    assert [lk.outcome for lk in looks] == ["objects="]  # an object look, not "colors="


@pytest.mark.parametrize("counts, want", [
    ([2, 1, 2], "objects=person*2"),   # the most common count
    ([1, 2, 0], "objects=person"),     # seen in 2 of 3 with 1 and 2: a tie goes to the smaller
    ([2, 1], "objects=person"),        # a short stay, the same tie
    ([3, 3, 1], "objects=person*3"),
])
def test_an_objects_count_is_the_most_common_count_where_it_was_seen(counts, want):
    look = judge_frames(_object_frames("hall", [_person(n) for n in counts]))
    assert look.outcome == want
    assert look.judged == len(counts) and look.kind == "objects"


def test_object_frames_use_canonical_class_names_and_min_confidence():
    dets = [*_person(1, label="sofa"), *_person(2, label="TV_Monitor"), *_person(1, conf=0.1)]
    frame = Frame.from_detections("den", dets, 1.0, min_confidence=0.5, kind="objects")
    assert (frame.kind, dict(frame.counts), frame.colors) == (
        "objects", {"couch": 1, "tv": 2}, frozenset({"couch", "tv"}))
    look = judge_frames([frame, frame, frame])
    assert look.outcome == "objects=couch,tv*2" and look.stamp == 1.0  # stamps of the frames


def test_an_empty_frame_of_a_trained_detector_is_an_object_frame():
    from glove_ros.core.world.observation import kind_of_backend

    for backend in ("darknet", "yolo"):
        frame = Frame.from_detections("hall", [], kind=kind_of_backend(backend))
        assert (frame.kind, dict(frame.counts), frame.colors) == ("objects", {}, frozenset())
    assert Frame.from_detections("hall", [], kind=kind_of_backend("color")).kind == "colors"
    # without a backend the kind is inferred: colourless boxes are objects, an empty frame
    # cannot tell (colors), a coloured box is a colour block
    assert Frame.from_detections("hall", _person(1)).kind == "objects"
    assert Frame.from_detections("hall", []).kind == "colors"
    assert Frame.from_detections("hall", [Detection("block", "red", 0, 0, 5, 5, 1.0)]).kind == (
        "colors")
    looks = _feed(LookAggregator(), _object_frames("hall", [[], [], []]))
    assert [lk.outcome for lk in looks] == ["objects="]


def test_backend_kinds_cover_every_perception_backend_and_refuse_others():
    from glove_ros.core.world.observation import BACKEND_KINDS, kind_of_backend
    from glove_ros.core.world.perception import BACKENDS

    assert set(BACKEND_KINDS) == set(BACKENDS)
    assert [kind_of_backend(b) for b in ("color", "darknet", "yolo", "")] == [
        "colors", "objects", "objects", None]
    with pytest.raises(ValueError, match="unknown perception backend 'hsv'.*color, darknet"):
        kind_of_backend("hsv")


def test_colour_looks_are_unchanged_by_counts():
    """Two red blocks in a frame are still 'colors=red'; a colour frame built from detections
    has exactly the colours look_names gives (a colourless label counts by its label)."""
    dets = [Detection("block", "red", 0, 0, 5, 5, 0.9), Detection("block", "red", 9, 0, 5, 5, 0.9),
            Detection("block", "blue", 20, 0, 5, 5, 0.2), Detection("cup", "", 30, 0, 5, 5, 0.9)]
    for conf in (0.0, 0.5):
        frame = Frame.from_detections("room_a", dets, min_confidence=conf, kind="colors")
        assert frame.colors == look_names(dets, conf) and frame.kind == "colors"
    frame = Frame.from_detections("room_a", dets[:2], 1.0)
    assert (frame.kind, dict(frame.counts)) == ("colors", {"red": 2})
    looks = _feed(LookAggregator(), [frame] * 3)
    assert [(lk.outcome, lk.kind) for lk in looks] == [("colors=red", "colors")]
    # a set-built frame and a detection-built one judge the same
    assert judge_frames([Frame("a", frozenset({"red"}))] * 3).outcome == judge_frames(
        [{"red"}] * 3).outcome == "colors=red"
    assert Frame("a", frozenset({"red"})) == Frame("a", frozenset({"red"}), 0.0, {"red": 1})
    assert hash(Frame("a", frozenset({"red"}))) == hash(Frame("a", frozenset({"red"})))


def test_a_stay_that_changes_kind_is_judged_by_the_last_kind(caplog):
    agg = LookAggregator()
    frames = _frames("hall", [{"red"}, {"red"}], 0) + _object_frames("hall", [_person(1)] * 3, 2)
    with caplog.at_level("WARNING"):
        looks = _feed(agg, frames)
    assert [lk.outcome for lk in looks] == ["objects=person"]
    assert agg.mixed_kinds == 1 and agg.stats()["ignored"] == 2
    assert "judging the stay by the objects frames only" in caplog.text
    with pytest.raises(ValueError, match="kind.*colors, objects.*judge each kind separately"):
        judge_frames(frames)
    with pytest.raises(ValueError, match="for a 'colors' look"):
        judge_frames(frames[2:], kind="colors")


@pytest.mark.parametrize("kwargs, match", [
    ({"counts": {"person": 0}, "kind": "objects"}, "integer >= 1"),
    ({"counts": {"a,b": 1}, "kind": "objects"}, "contain ',', '=' or '\\*'"),
    ({"kind": "shapes"}, "kind must be one of colors, objects"),
    ({"colors": frozenset({"red"}), "counts": {"blue": 1}}, "not the names of its counts"),
])
def test_frame_refuses_what_a_look_cannot_hold(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Frame("hall", **kwargs)
