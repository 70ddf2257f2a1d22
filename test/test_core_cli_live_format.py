"""The readable lines of ``glove-ros watch`` (message doubles; the live path is tested in
test_system_task_watch.py)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from glove_ros.cli import live


def test_probe_counter_reports_only_changes():
    c = live.ProbeCounter()
    assert c.line(NS(probes_spent=0, budget=30, refused=0)) is None
    assert c.line(NS(probes_spent=0, budget=30, refused=0)) is None
    assert c.line(NS(probes_spent=3, budget=30, refused=1)) == (
        "PROBES spent: 3 (+3) of a budget of 30; 1 refused")
    late = live.ProbeCounter()  # joined after probes were spent
    assert "PROBES spent: 5 (+5)" in late.line(NS(probes_spent=5, budget=30, refused=0))


def test_alert_event_and_gate_lines_are_readable():
    alert = NS(state_key="kitchen", action="look", action_arg="", observed_outcome="colors=blue",
               expected_outcomes=["colors=red"], expected_probabilities=[1.0], history_size=3,
               consecutive_surprises=2, suppressed_ids=[4, 5, 6], mode="async",
               probes_requested=0)
    assert live.format_alert(alert) == (
        "DISSONANCE (kitchen, look): saw 'colors=blue', memory said [colors=red 100%] "
        "(n=3, 2 surprises in a row); 3 memories suppressed, async mode")
    event = NS(kind=2, state_key="hall", action="navigate_to", action_arg="lab",
               entry_ids=list(range(1, 9)), new_entry_ids=[20], evidence_count=1,
               reason="re-verified")
    assert live.format_event(event) == ("memory REPLACED (hall, navigate_to lab) "
                                        "#1, 2, 3, 4, 5, 6 (+2 more) -> #20 on 1 fresh "
                                        "samples: re-verified")
    gate = NS(update_index=7, verdict=2, score_old=0.9, score_new=0.5, active_version="v3")
    assert "REJECTED (score old 0.90, new 0.50)" in live.format_gate(gate)
    report = NS(status="rejected", reason="docked", policy="rule", entries_before=8,
                entries_after=8, tokens_before=120, tokens_after=120, consolidation_id="c3",
                message="rejected by acceptance; memory unchanged")
    assert live.format_consolidation(report) == (
        "CONSOLIDATION rejected (docked, rule): plan memory 8 -> 8 entries, 120 -> 120 "
        "tokens [c3]: rejected by acceptance; memory unchanged")
