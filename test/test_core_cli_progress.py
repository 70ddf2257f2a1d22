"""Progress output (glove_ros/progress.py): a bar only on a terminal or with --progress,
otherwise one summary line, so logs and CI output get no carriage-return redraws."""

from __future__ import annotations

import io

from glove_ros.cli import main as cli
from glove_ros.progress import Progress, say, wants_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_there_is_no_bar_and_one_summary_line():
    log = io.StringIO()
    with Progress(40, "tasks", "task", stream=log) as p:
        for _ in range(40):
            p.update()
        assert not p.bar
    text = log.getvalue()
    assert "\r" not in text and text.count("\n") == 1
    assert text.startswith("tasks: 40/40 tasks in ") and text.endswith(" s\n")


def test_on_a_terminal_a_bar_and_no_summary_line():
    tty = _Terminal()
    p = Progress(5, "cases", "case", stream=tty)
    assert p.bar
    for _ in range(5):
        p.update()
    p.close()
    p.close()  # a second close does nothing
    assert "cases" in tty.getvalue() and "cases: 5/5 cases in" not in tty.getvalue()


def test_the_flag_wins_over_the_terminal_test():
    assert wants_bar(True, io.StringIO()) and not wants_bar(False, _Terminal())
    assert wants_bar(None, _Terminal()) and not wants_bar(None, io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not wants_bar(None, closed)
    forced = io.StringIO()
    with Progress(2, "tasks", stream=forced, enabled=True) as p:
        assert p.bar


def test_lines_printed_meanwhile_reach_their_stream(capsys):
    with Progress(1, "tasks", stream=io.StringIO()) as p:
        p.write("episode 0 done")
    say("after")
    assert capsys.readouterr().out == "episode 0 done\nafter\n"


def test_commands_that_show_progress_take_the_flag():
    parser = cli.build_parser()
    assert parser.parse_args(["demo", "--progress"]).progress is True
    if "llm" in cli._available_benchmarks():
        assert parser.parse_args(["bench", "llm", "--no-progress"]).progress is False
        assert parser.parse_args(["bench", "llm"]).progress is None
