"""core/ops/resend.py: the waits between re-sends of an unanswered request."""

from __future__ import annotations

import pytest

from glove_ros.core.ops.resend import resend_waits


def test_waits_double_from_one_second_up_to_the_per_try_limit():
    assert resend_waits(5.0, 4) == [1.0, 2.0, 4.0, 5.0, 5.0, 3.0]


def test_total_patience_is_per_try_times_tries():
    for per_try, tries in [(5.0, 4), (0.3, 1), (10.0, 1), (2.5, 7), (60.0, 3)]:
        waits = resend_waits(per_try, tries)
        assert sum(waits) == pytest.approx(per_try * tries)
        assert all(0 < w <= per_try for w in waits)
        assert waits[0] == min(1.0, per_try)


def test_a_limit_below_the_first_wait_is_kept():
    assert resend_waits(0.5, 2) == [0.5, 0.5]


@pytest.mark.parametrize("per_try,tries", [(0.0, 3), (-1.0, 3), (5.0, 0), (float("nan"), 2)])
def test_bad_arguments_are_refused(per_try, tries):
    with pytest.raises(ValueError, match="per_try"):
        resend_waits(per_try, tries)
