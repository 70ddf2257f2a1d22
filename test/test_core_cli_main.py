"""The glove-ros command: help, doctor and error handling (no ROS needed)."""

from __future__ import annotations

import pytest

from glove_ros.cli import main as cli


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


def test_doctor_fails_when_a_required_part_is_missing(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rclpy", None)  # import rclpy now raises ImportError
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] ROS 2 + interfaces" in out and "source env.sh" in out
    assert cli.main(["doctor", "--no-ros"]) == 0  # a pip install without ROS is healthy


def test_doctor_names_the_extra_of_each_missing_backend(capsys, monkeypatch):
    from glove_ros import extras

    real = extras.available
    monkeypatch.setattr(extras, "available", lambda m: m not in ("gymnasium", "tqdm")
                        and real(m))
    assert cli.main(["doctor", "--no-ros"]) == 1  # tqdm is required
    out = capsys.readouterr().out
    assert "[warn] module gymnasium [bench]" in out and "glove_ros[bench]" in out
    assert "[FAIL] module tqdm" in out
    for backend in ("matplotlib", "rosbags", "cv2", "ultralytics", "llama_cpp",
                    "onnxruntime", "GGUF model", "MiniLM embedder"):
        assert backend in out


def test_missing_optional_module_is_one_line_naming_the_extra(capsys, monkeypatch):
    def boom(args):
        raise ModuleNotFoundError("No module named 'gymnasium'", name="gymnasium")

    monkeypatch.setattr(cli, "_sdf", boom)
    assert cli.main(["sdf", "small"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "glove_ros[bench]" in err and "Traceback" not in err


def test_unknown_subcommand_is_an_error():
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_help_lists_subcommands_in_the_order_a_user_needs_them_with_examples(capsys):
    import re

    out = _help(capsys)
    listed = re.findall(r"^    (\w+) ", out, flags=re.M)
    first = ["launch", "task", "watch", "demo"]
    assert listed[:4] == first, listed
    tools = [c for c in ("memory", "bag", "bench", "fleet", "node") if c in listed]
    assert [c for c in listed if c in tools] == tools  # after the first four, in this order
    assert listed.index("doctor") > listed.index(tools[-1])
    examples = out.split("examples:", 1)[1]
    commands = re.findall(r"^  glove-ros (\w+)", examples, flags=re.M)
    assert 3 <= len(commands) <= 4 and commands[:3] == ["launch", "task", "watch"]
    assert 'glove-ros task "find the red block"' in examples


def test_task_and_watch_each_have_their_own_plain_text_description(capsys):
    task, watch = _help(capsys, "task"), _help(capsys, "watch")

    def description(text: str) -> str:
        return text.split("\n\n", 2)[1]  # after the usage block

    assert description(task).startswith("Give the running robot a task")
    assert description(watch).startswith("Print what the running robot's memory does")
    for text in (task, watch):
        assert "``" not in text  # no reStructuredText markup in a terminal
    assert "glove-ros task \"find the red block\"" in task.split("examples:")[1]
    assert "glove-ros watch" in watch.split("examples:")[1]
