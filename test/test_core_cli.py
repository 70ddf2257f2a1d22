"""The glove-ros command: help, doctor and error handling (no ROS needed)."""

from __future__ import annotations

import pytest

from glove_ros import cli


def test_help_lists_real_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "doctor" in out
    assert "not implemented" not in out.lower()


def test_no_subcommand_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "usage: glove-ros" in capsys.readouterr().out


def test_doctor_reports_each_check(capsys):
    code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert "[ok  ] python" in out
    assert "module numpy" in out
    assert code in (0, 1)


def test_unknown_subcommand_is_an_error():
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
