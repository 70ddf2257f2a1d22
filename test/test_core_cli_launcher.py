"""Launcher logic without ROS: restart back-off, run files and domain joining, db folders,
and the check of the files a launch names before any node starts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from glove_ros.cli import launcher
from glove_ros.cli import main as cli


def test_backoff_doubles_caps_and_gives_up_after_quick_failures():
    b = launcher.Backoff(max_restarts=6, first=1.0, cap=8.0, healthy_after=60.0)
    assert [b.failed(0.5) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert b.failed(0.5) is None


def test_backoff_resets_after_a_run_that_lasted():
    b = launcher.Backoff(max_restarts=2, healthy_after=60.0)
    assert b.failed(1) == 1.0 and b.failed(1) == 2.0
    assert b.failed(120) == 1.0  # it ran healthy for two minutes: a new streak
    assert b.failed(1) == 2.0
    assert b.failed(1) is None


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    d = launcher.run_dir()
    d.mkdir(parents=True)
    return d


def test_join_domain_reads_the_only_live_launch(run_dir):
    (run_dir / "launch-1.json").write_text(json.dumps(
        {"pid": os.getpid(), "domain": 42, "deployment": "sim", "started": 1}))
    # a run file whose launcher is gone is ignored
    (run_dir / "launch-2.json").write_text(json.dumps(
        {"pid": 2 ** 22 + 7, "domain": 9, "deployment": "sim", "started": 2}))
    note = launcher.join_domain()
    assert os.environ["ROS_DOMAIN_ID"] == "42" and "sim" in note
    assert launcher.choose_domain() != 42


def test_join_domain_refuses_to_guess_between_two_launches(run_dir):
    for i, dom in ((1, 42), (2, 43)):
        (run_dir / f"launch-{i}.json").write_text(json.dumps(
            {"pid": os.getpid(), "domain": dom, "deployment": "sim", "started": i}))
    with pytest.raises(ValueError, match="--domain"):
        launcher.join_domain()
    assert launcher.join_domain(7) and os.environ["ROS_DOMAIN_ID"] == "7"


def test_join_domain_keeps_an_explicit_environment(run_dir, monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "5")
    assert "ROS_DOMAIN_ID" in launcher.join_domain()
    assert os.environ["ROS_DOMAIN_ID"] == "5"


def test_make_db_dirs_creates_only_relative_parents(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        "memory:\n  ros__parameters:\n    db_path: build/x/memory.db\n"
        "planner:\n  ros__parameters:\n    plan_db_path: /nonexistent_abs/m.db\n"
        "    nested: {experience_db_path: ''}\n")
    said = []
    launcher.make_db_dirs(str(params), said.append)
    assert (tmp_path / "build" / "x").is_dir()
    assert not os.path.exists("/nonexistent_abs")
    assert len(said) == 1


# ---------------------------------------------------------------- files checked before start

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_start(tmp_path, monkeypatch):
    """launch() without ROS, where starting any process fails the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(launcher, "importlib", SimpleNamespace(import_module=lambda name: None))

    def start(*args, **kwargs):
        pytest.fail(f"a process was started: {args[0][:4]}")

    monkeypatch.setattr(launcher, "start_process", start)
    return tmp_path


def _sim_params(tmp_path: Path, **worlds: str) -> Path:
    doc = yaml.safe_load((ROOT / "config" / "sim.yaml").read_text())
    for node, world in worlds.items():
        doc[f"/**/{node}"]["ros__parameters"]["world"] = world
    out = tmp_path / "params.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.mark.parametrize("where", ["simulator -p", "simulator file", "planner file"])
def test_a_typo_in_a_world_file_fails_in_one_line_and_starts_nothing(no_start, capsys, where):
    world = no_start / "typo.yaml"
    world.write_text((ROOT / "worlds" / "small.yaml").read_text().replace(
        "waypoints:", "waypionts:", 1))
    node = where.split()[0]
    if where.endswith("-p"):
        argv = ["launch", "sim", "-p", f"simulator.world:={world}"]
    else:
        argv = ["launch", "sim", "--params-file", str(_sim_params(no_start, **{node: str(world)}))]
    t0 = time.monotonic()
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"glove-ros launch: {node}.world '{world}': world {world}: unknown "
                          "key(s) waypionts")
    assert err.endswith("; no node was started\n") and "Traceback" not in err
    assert out == "" and not (no_start / "run").exists()  # no run file, nothing printed
    assert not (no_start / "build").exists()  # no database folder made either
    assert time.monotonic() - t0 < 10


def test_a_missing_world_file_names_the_file_and_the_bundled_choices(no_start, capsys):
    code = cli.main(["launch", "sim", "-p", "simulator.world:=jetrover_maez"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("glove-ros launch: simulator.world 'jetrover_maez': world file "
                          "'jetrover_maez' not found (bundled worlds in ")
    assert "jetrover_maze" in err  # the bundled worlds are listed


@pytest.mark.parametrize("text,said", [
    (None, "No such file or directory"),
    ("/**/memory:\n  ros__parameters: {db_path: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "expected node sections"),
])
def test_a_bad_parameter_file_fails_in_one_line_and_starts_nothing(no_start, capsys, text,
                                                                      said):
    params = no_start / "params.yaml"
    if text is not None:
        params.write_text(text)
    code = cli.main(["launch", "sim", "--params-file", str(params)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"glove-ros launch: parameter file {params}: ") and said in err


def test_preflight_reads_what_each_node_would_get(tmp_path):
    good = str(ROOT / "worlds" / "small.yaml")
    doc = {"/**": {"ros__parameters": {"use_sim_time": True}},
           "/**/simulator": {"ros__parameters": {"world": good, "nested": {"a": 1}}},
           "/robot1/simulator": {"ros__parameters": {"world": "nope_world"}}}
    assert launcher.node_parameters(doc, "simulator") == {
        "use_sim_time": True, "world": good, "nested.a": 1}
    assert launcher.node_parameters(doc, "simulator", "robot1")["world"] == "nope_world"
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump(doc))
    cmd = ["python", "-m", "x", "--ros-args", "-p", "exit_on_failure:=true"]
    launcher.preflight(str(params), {"simulator": cmd})  # root namespace: the good world
    with pytest.raises(ValueError, match="simulator.world 'nope_world': world file 'nope_world' "
                       "not found"):
        launcher.preflight(str(params), {"simulator": cmd}, "/robot1")
    launcher.preflight(str(params), {"simulator": [*cmd, "-p", f"world:={good}"]}, "/robot1")


def test_the_memory_database_paths_are_printed_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = yaml.safe_load((ROOT / "config" / "sim.yaml").read_text())
    cmds = {n: ["x", "--ros-args"] for n in ("memory", "planner", "plan_gate", "simulator")}
    cmds["plan_gate"] += ["-p", "db_path:=/data/gate.db"]
    found = launcher.database_paths(doc, cmds)
    assert found == {tmp_path / "build" / "demo" / "memory.db": ["memory.db_path",
                                                                  "planner.plan_db_path"],
                     Path("/data/gate.db"): ["plan_gate.db_path"]}


def test_private_dirs_get_0700_on_every_folder_created(tmp_path):
    """Issue 31: `mkdir(mode=0o700, parents=True)` set the mode on the last folder only, so
    database folders were created 0755. Folders that exist keep their mode."""
    import os
    import stat

    from glove_ros.paths import make_private_dirs

    os.umask(0o022)
    (tmp_path / "kept").mkdir(mode=0o755)
    target = tmp_path / "kept" / "a" / "b" / "c"
    make_private_dirs(target)
    for d in (tmp_path / "kept" / "a", tmp_path / "kept" / "a" / "b", target):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE((tmp_path / "kept").stat().st_mode) == 0o755
    make_private_dirs(target)  # idempotent


def test_a_launched_simulator_keeps_its_world_across_restarts_by_default(tmp_path, monkeypatch):
    """Issue 31: the simulator died under load and its restart reset the world (robot back at
    the dock, sim time 3658 -> 30) because state_path was ''. A launch gives it a state file
    of its own unless the params file or -p sets one; other deployments get nothing."""
    from glove_ros import graph

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    params = tmp_path / "p.yaml"
    params.write_text("/**/simulator:\n  ros__parameters:\n    world: small\n")
    overrides: dict = {}
    path = launcher.keep_simulator_state(graph.deployment("sim"), str(params), overrides)
    assert path is not None and overrides["simulator"]["state_path"] == str(path)
    assert str(tmp_path) in str(path)
    params.write_text("/**/simulator:\n  ros__parameters:\n    state_path: /x/s.json\n")
    assert launcher.keep_simulator_state(graph.deployment("sim"), str(params), {}) is None
    assert launcher.keep_simulator_state(graph.deployment("sim"), str(params),
                                         {"simulator": {"state_path": "/y"}}) is None
    assert launcher.keep_simulator_state(graph.deployment("jetrover"), str(params), {}) is None
