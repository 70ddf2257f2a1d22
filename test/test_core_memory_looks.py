"""glove_ros.core.memory.looks: the look outcome format, colours and object classes alike."""

from __future__ import annotations

import pytest

from glove_ros.core.memory.looks import (
    is_look_signature,
    look_counts,
    look_kind,
    look_names,
    look_signature,
)
from glove_ros.core.verify.neighbourhood import _objects


def test_colour_looks_are_written_exactly_as_before():
    assert look_signature(["red", "blue", "red"]) == "colors=blue,red"
    assert look_signature({"red": 3}) == "colors=red"  # colours carry no counts
    assert look_signature([]) == "colors="


def test_object_looks_carry_counts_and_read_back_as_written():
    sig = look_signature({"person": 2, "cup": 1, "dining table": 1}, kind="objects")
    assert sig == "objects=cup,dining table,person*2"
    assert look_counts(sig) == {"cup": 1, "dining table": 1, "person": 2}
    assert look_names(sig) == {"cup", "dining table", "person"}
    assert look_signature({}, kind="objects") == "objects="
    assert look_names("objects=") == frozenset()
    assert look_signature({"cup": 0, "bowl": 1}, kind="objects") == "objects=bowl"


def test_every_reader_sees_the_names_of_both_kinds():
    for sig, names in (("colors=blue,red", {"blue", "red"}),
                       ("objects=cup,person*2", {"cup", "person"})):
        assert look_kind(sig) in ("colors", "objects") and is_look_signature(sig)
        assert look_names(sig) == names  # the planner's "was it there?"
        assert _objects(sig) == names  # the verifier's object-level evidence


@pytest.mark.parametrize("bad", ["reached", "", "objects=cup*0", "objects=person*x",
                                 "shapes=cube"])
def test_what_is_not_a_look_outcome_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="look outcome"):
        look_counts(bad)


def test_names_that_would_not_read_back_are_refused():
    for name in ("a,b", "x=y", "two*2"):
        with pytest.raises(ValueError, match="may not contain"):
            look_signature([name], kind="objects")
    with pytest.raises(ValueError, match="look kind"):
        look_signature(["cup"], kind="shapes")
    with pytest.raises(ValueError, match="integer"):
        look_signature({"cup": 1.5}, kind="objects")
