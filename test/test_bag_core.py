"""Bags without ROS: fixtures, the drift test on the verifier core, --expect, bad bags.

Everything here runs from ``pip install glove_ros[bags,vision]``: rosbags reads and writes
the bags, the verifier core scores them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rosbags")

from glove_ros.cli.bags import cli_main, make_fixtures  # noqa: E402
from glove_ros.core.bag.bagfile import NS, BagError, BagReader, BagWriter  # noqa: E402
from glove_ros.core.bag.drift import (  # noqa: E402
    AlertRecord,
    Expectations,
    analyse,
    touched_pairs,
)
from glove_ros.core.bag.inputs import BagInput, Timed, load_input  # noqa: E402
from glove_ros.core.bag.typestore import make_typestore  # noqa: E402
from glove_ros.core.memory.experience import Transition  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "bags"
SOURCE, DRIFTED, NUISANCE = FIX / "small_source", FIX / "small_drifted", FIX / "nuisance_only"
COLORS = FIX / "perception_fixture.yaml"


def _run(capsys, *argv):
    code = cli_main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _report(capsys, *argv):
    code, out, err = _run(capsys, "drift-test", *argv, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


# ------------------------------------------------------------------------- fixtures


def test_fixtures_are_small_complete_and_regenerable(tmp_path):
    for bag in (SOURCE, DRIFTED, NUISANCE):
        size = sum(f.stat().st_size for f in bag.iterdir())
        assert size < 2_000_000, f"{bag.name} is {size} bytes"
        meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        assert meta["version"] == 8 and meta["storage_identifier"] == "mcap"
        ts = make_typestore()
        for t in meta["topics_with_message_count"]:
            tm = t["topic_metadata"]
            assert tm["type_description_hash"] == ts.hash_rihs01(tm["type"])
            assert isinstance(tm["offered_qos_profiles"], str)  # the form Humble parses
        with BagReader(bag) as r:
            assert {"/camera/image_raw", "/detections", "/transitions", "/current_waypoint"
                    } <= set(r.topics)
            assert ("/world_events" in r.topics) == (bag != SOURCE)  # no event before ep 3
    pytest.importorskip("cv2")  # the simulator renders frames with OpenCV
    summary = make_fixtures(tmp_path)
    for name in ("small_source", "small_drifted", "nuisance_only"):
        assert summary[name].get("looks_differing_from_truth", 0) == 0
        fresh = load_input(tmp_path / name, "transitions").transitions
        assert fresh == load_input(FIX / name, "transitions").transitions  # deterministic


@pytest.mark.parametrize("kind", ["transitions", "detections", "camera"])
def test_every_input_kind_reads_the_same_experience(kind):
    pytest.importorskip("cv2")
    from glove_ros.core.world.perception import ColorBlockDetector, ColorDetectorConfig

    det = ColorBlockDetector(ColorDetectorConfig.from_dict(yaml.safe_load(COLORS.read_text())))
    got = load_input(DRIFTED, kind, detector=det)
    ref = load_input(DRIFTED, "transitions")
    assert got.kind == kind
    assert [(t.state_key, t.action, t.action_arg, t.outcome) for t in got.transitions] == [
        (t.state_key, t.action, t.action_arg, t.outcome) for t in ref.transitions]


# ------------------------------------------------------------------------- drift test (core)


def test_swap_alerts_on_the_swapped_waypoints_only(capsys):
    code, rep = _report(capsys, "--source", SOURCE, "--drifted", DRIFTED)
    assert code == 0
    assert rep["alerted_state_keys"] == ["room_a", "room_b"]
    assert rep["alert_count"] == 2 and rep["false_alarms"] == 0
    assert rep["touched_pairs"] == [["room_a", "look", ""], ["room_b", "look", ""]]
    assert rep["drift"]["from"].startswith("world_events: DRIFT")
    # the calibrated detector: the source bag's looks never disagreed, so the first
    # contradiction of each place is proof
    assert rep["detection_delay"]["delay_visits"] == 1
    assert 0 < rep["detection_delay"]["delay_messages"] <= 30
    assert rep["suppressed"] == 6 and rep["replaced"] == 6 and rep["missed_pairs"] == []


def test_nuisance_only_raises_no_alarm(capsys):
    code, rep = _report(capsys, "--drifted", NUISANCE)
    assert code == 0
    assert rep["alert_count"] == 0 and rep["drift"] is None
    assert rep["drifted"]["transitions"] == 78


def test_camera_input_and_sync_mode(capsys):
    pytest.importorskip("cv2")
    code, rep = _report(capsys, "--source", SOURCE, "--drifted", DRIFTED, "--input", "camera",
                        "--color-config", COLORS, "--mode", "sync")
    assert code == 0 and rep["drifted"]["input"] == "camera"
    assert rep["alerted_state_keys"] == ["room_a", "room_b"] and rep["false_alarms"] == 0
    assert rep["probes"] == 2 and all(a["probes_requested"] == 1 for a in rep["alerts"])


def test_verifier_settings_change_the_delay(capsys):
    _, rep = _report(capsys, "--source", SOURCE, "--drifted", DRIFTED, "--set",
                     "detector=p_th", "p_th=2")
    assert rep["detection_delay"]["delay_visits"] == 2  # the paper's rule, p_th = 2
    code, _, err = _run(capsys, "drift-test", "--drifted", DRIFTED, "--set", "p_th=0")
    assert code == 2 and "p_th" in err


def test_drift_at_marks_earlier_alerts_false(capsys):
    # drift declared after the swap was detected: the alerts came "before" it
    _, rep = _report(capsys, "--source", SOURCE, "--drifted", DRIFTED, "--drift-at", "70")
    assert rep["false_alarms"] == 2
    assert {a["why"] for a in rep["alerts"]} == {"before the drift"}


# ------------------------------------------------------------------------- --expect


def test_expect_pass_mismatch_and_bad_file(capsys, tmp_path):
    args = ["drift-test", "--source", SOURCE, "--drifted", DRIFTED]
    code, out, _ = _run(capsys, *args, "--expect", FIX / "swap_expect.yaml")
    assert code == 0 and "expectations: met" in out
    code, _, _ = _run(capsys, "drift-test", "--drifted", NUISANCE,
                      "--expect", FIX / "nuisance_expect.yaml")
    assert code == 0
    # the swap bag against the nuisance expectations: a mismatch, exit 1, reasons printed
    code, out, _ = _run(capsys, *args, "--expect", FIX / "nuisance_expect.yaml")
    assert code == 1 and "alerts: 2 > max_alerts 0" in out
    strict = tmp_path / "strict.yaml"
    strict.write_text("max_delay_messages: 5\nalerted_state_keys: [room_a]\n")
    code, rep = _report(capsys, *args[1:], "--expect", strict)
    assert code == 1 and not rep["expectations"]["passed"]
    assert len(rep["expectations"]["failures"]) == 3  # two delays and the key set
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_alarms: 0\n")
    code, _, err = _run(capsys, *args, "--expect", bad)
    assert code == 2 and "unknown key(s) max_alarms" in err
    assert len(err.strip().splitlines()) == 1


def test_expectations_unit():
    rep = {"alert_count": 1, "false_alarms": 1, "alerted_state_keys": ["x"], "suppressed": 0,
           "replaced": 0, "missed_pairs": [], "pair_delays": []}
    assert Expectations().check(rep) == []
    fails = Expectations(max_false_alarms=0, max_delay_seconds=1.0, min_replaced=1).check(rep)
    assert len(fails) == 3
    with pytest.raises(ValueError, match="integer >= 0"):
        Expectations.from_dict({"max_alerts": -1})
    with pytest.raises(ValueError, match="list of strings"):
        Expectations.from_dict({"alerted_state_keys": "room_a"})


# ------------------------------------------------------------------------- scoring


def _timed(items, t0=100):
    return [Timed(Transition(s, "look", o, stamp=float(t0 + i)), (t0 + i) * NS)
            for i, (s, o) in enumerate(items)]


def test_touched_pairs_ignore_nuisance_majority():
    before = [Transition("a", "look", "colors=red")] * 3 + [Transition("a", "look", "colors=")]
    after = [Transition("a", "look", "colors=red"), Transition("a", "look", "colors=")]
    after += [Transition("a", "look", "colors=red"), Transition("b", "look", "colors=")]
    assert touched_pairs(before, after) == set()
    assert touched_pairs(before, [Transition("a", "look", "colors=blue")] * 2) == {
        ("a", "look", "")}


def test_analyse_classifies_alerts():
    items = _timed([("a", "colors=red")] * 3 + [("a", "colors=blue")] * 3 + [("b", "x")] * 3)
    bag = BagInput(Path("mem"), "transitions", items, items[0].bag_ns, items[-1].bag_ns + NS)
    alerts = [AlertRecord("a", "look", "", "colors=blue", index=5),
              AlertRecord("b", "look", "", "y", index=8),
              AlertRecord("a", "look", "", "colors=blue", index=1)]
    rep = analyse(drifted=bag, alerts=alerts, drift=(items[3].bag_ns, "test"))
    rows = rep["alerts"]
    assert [r["false_alarm"] for r in rows] == [False, True, True]
    assert rows[0]["delay_messages"] == 3 and rows[0]["delay_visits"] == 3
    assert rows[0]["delay_seconds"] == 2.0
    assert "did not change" in rows[1]["why"] and rows[2]["why"] == "before the drift"
    assert rep["false_alarms"] == 2 and rep["detection_delay"]["delay_messages"] == 3
    none = analyse(drifted=bag, alerts=alerts[:1], drift=None)
    assert none["false_alarms"] == 1 and none["alerts"][0]["why"] == "no drift in this recording"


# ------------------------------------------------------------------------- bad bags


def _bad_bags(tmp: Path) -> dict[str, Path]:
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import get_types_from_msg

    out = {}
    trunc = tmp / "truncated"
    shutil.copytree(DRIFTED, trunc)
    f = trunc / "small_drifted.mcap"
    os.truncate(f, f.stat().st_size // 2)
    out["truncated"] = trunc
    nometa = tmp / "nometa"
    shutil.copytree(DRIFTED, nometa)
    (nometa / "metadata.yaml").unlink()
    out["no metadata"] = nometa
    ts = make_typestore()
    ts.register(get_types_from_msg("int32 x", "acme_msgs/msg/Widget"))
    foreign = tmp / "foreign"
    with BagWriter(foreign, typestore=ts) as w:
        w.write_msg("/transitions", 10 * NS, ts.types["acme_msgs/msg/Widget"](x=1))
    out["unknown type"] = foreign
    wrong = tmp / "wrong_hash"
    writer = Writer(wrong, version=8)
    writer.open()
    conn = writer.add_connection("/transitions", "acme_msgs/msg/Gadget", msgdef="int32 x",
                                 rihs01="RIHS01_" + "ab" * 32)
    writer.write(conn, 10 * NS, b"\x00\x01\x00\x00\x01\x00\x00\x00")
    writer.close()
    out["hash mismatch"] = wrong
    out["missing"] = tmp / "nothing_here"
    return out


@pytest.mark.parametrize("case, words", [
    ("truncated", "truncated"), ("no metadata", "metadata.yaml is missing"),
    ("unknown type", "acme_msgs/msg/Widget"), ("hash mismatch", "hash mismatch"),
    ("missing", "no such file"),
])
def test_bad_bags_give_one_line_and_exit_2(tmp_path, capsys, case, words):
    bag = _bad_bags(tmp_path)[case]
    uses = [["drift-test", "--drifted", bag], ["drift-test", "--source", bag, "--drifted", DRIFTED]]
    if case != "unknown type":  # info lists a foreign type (defined in the bag) without failing
        uses.append(["info", bag])
    for argv in uses:
        code, out, err = _run(capsys, *argv)
        assert code == 2, (case, argv, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("glove-ros bag: error:"), err
        assert words in lines[0], lines[0]
    with pytest.raises(BagError):
        load_input(bag)


def test_bad_bag_from_the_command_line_has_no_traceback(tmp_path):
    bag = _bad_bags(tmp_path)["truncated"]
    proc = subprocess.run([sys.executable, "-m", "glove_ros.cli.bags", "drift-test", "--drifted",
                           str(bag)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bare_storage_file_is_readable_and_foreign_types_show_in_info(tmp_path, capsys):
    code, rep = _report(capsys, "--drifted", DRIFTED / "small_drifted.mcap")
    assert code == 0 and rep["alert_count"] == 0  # no source: memory builds as it goes
    code, out, _ = _run(capsys, "info", _bad_bags(tmp_path)["unknown type"])
    assert code == 0 and "acme_msgs/msg/Widget" in out


def test_writer_refuses_existing_directories_and_unknown_types(tmp_path):
    with pytest.raises(BagError, match="exists already"):
        BagWriter(tmp_path)
    with BagWriter(tmp_path / "b") as w, pytest.raises(BagError, match="unknown here"):
        w.add_topic("/x", "nope_msgs/msg/Nothing")


def test_detections_of_a_trained_detector_replay_as_object_looks(tmp_path):
    """A bag of darknet DetectionArrays (labels are COCO classes, no colour) is rebuilt into
    object looks with counts, and a bag with an unknown backend fails with the topic named
    (nothing is guessed from a detector the reader does not know)."""
    from glove_ros.core.bag.messages import GLOVE_TYPES, detections_obj
    from glove_ros.core.world.perception import Detection

    ts = make_typestore()
    person = Detection("person", "", 10, 10, 40, 80, 0.9)
    frames = [[person, person, Detection("cup", "", 60, 60, 20, 20, 0.8)],
              [person, person], [person, person, Detection("cup", "", 60, 60, 20, 20, 0.7)]]

    def write(name: str, backend: str) -> Path:
        path = tmp_path / name
        with BagWriter(path) as w:
            w.add_topic("/detections", GLOVE_TYPES["detections"])
            for i, dets in enumerate(frames):
                ns = (i + 1) * NS
                w.write_msg("/detections", ns, detections_obj(ts, "kitchen", dets, ns,
                                                              backend=backend))
        return path

    looks = [x.transition for x in load_input(write("darknet", "darknet"), "detections").items]
    assert [(t.state_key, t.action, t.outcome) for t in looks] == [
        ("kitchen", "look", "objects=cup,person*2")]
    colours = [x.transition for x in load_input(write("colour", "color"), "detections").items]
    assert [t.outcome for t in colours] == ["colors=cup,person"]  # labels, as colour bags
    with pytest.raises(BagError, match="bad detections on /detections"):
        load_input(write("odd", "lidar"), "detections")
