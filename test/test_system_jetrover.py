"""The whole JetRover graph over DDS on the small world: five node processes.

simulator -> camera -> perception -> detections -> planner -> record_transition -> memory
(+ GLOVE) and the verifier node. What must hold: the task succeeds, the block swap is
detected as dissonance, the stale look memory is no longer retrieved, the task succeeds
again afterwards; an unknown task is rejected cleanly; the demo command prints its table.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import (  # noqa: E402
    NodeProcess,
    answering_action_client,
    call,
    ros_client,
    wait_for,
    warm_record,
)


def _run_task(client, text: str, task_id: str, timeout: float = 120.0):
    from glove_ros.action import RunTask

    done = threading.Event()
    holder: dict = {}

    def on_result(fut):
        holder["result"] = fut.result().result
        done.set()

    def on_goal(fut):
        handle = fut.result()
        if not handle.accepted:
            done.set()
            return
        handle.get_result_async().add_done_callback(on_result)

    client.send_goal_async(RunTask.Goal(task=text, task_id=task_id)).add_done_callback(on_goal)
    assert done.wait(timeout), f"task {text!r} did not finish in {timeout}s"
    return holder["result"]


@pytest.fixture
def graph(tmp_path):
    common = {"use_sim_time": True}
    procs = [
        NodeProcess("glove_ros.nodes.simulator_node", tmp_path,
                    {"world": "small", "time_scale": 20.0, "camera_rate": 10.0}),
        NodeProcess("glove_ros.nodes.perception_node", tmp_path, {**common}),
        NodeProcess("glove_ros.nodes.memory_node", tmp_path, {
            **common, "db_path": str(tmp_path / "m.db"), "verifier.p_th": 2}),
        NodeProcess("glove_ros.nodes.verifier_node", tmp_path, {**common}),
        NodeProcess("glove_ros.nodes.planner_node", tmp_path, {
            **common, "world": "small", "robot_id": "rover"}),
    ]
    yield procs
    for p in procs:
        p.stop()


def test_task_swap_detected_suppressed_and_task_succeeds_again(graph):
    from std_msgs.msg import UInt32

    from glove_ros.action import RunTask
    from glove_ros.msg import DetectionArray, DissonanceAlert, TaskOutcome
    from glove_ros.nodes.common import SpinSafeActionClient
    from glove_ros.srv import QueryMemory

    def logs():
        return "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in graph)

    with ros_client() as node:
        alerts, outcomes, frames = [], [], []
        node.create_subscription(DissonanceAlert, "dissonance", alerts.append, 10)
        node.create_subscription(TaskOutcome, "task_outcomes", outcomes.append, 10)
        node.create_subscription(DetectionArray, "detections", frames.append, 10)
        episode = node.create_publisher(UInt32, "episode_start", 10)
        client = SpinSafeActionClient(node, RunTask, "run_task")
        query = node.create_client(QueryMemory, "query_memory")
        assert client.wait_for_server(timeout_sec=60), logs()
        # episode_start is published once below: wait until this publisher itself has matched
        # the simulator's reader (the graph can list the reader before the writer matches it)
        wait_for(lambda: len(frames) > 0 and episode.get_subscription_count() > 0,
                 60, "perception output", logs)

        # source world: red is in room_a; find it twice (learn, then recall)
        for i in range(2):
            r = _run_task(client, "find the red block", f"t{i}")
            assert r.success and r.found_at == "room_a", (r.reason, logs())
        remembered = call(node, query, QueryMemory.Request(state_key="room_a", action="look"))
        assert {e.transition.outcome for e in remembered.entries} == {"colors=red"}

        # the blocks swap (episode 3 of worlds/small.yaml): blue is now in room_a
        episode.publish(UInt32(data=3))
        # the tasks below must start in the swapped world: wait for the simulator to apply
        # it (a fixed pause can be too short for its callback on a loaded machine)
        wait_for(lambda: "episode 3: swap_blocks" in graph[0].log(), 30, "the swap applied",
                 logs)
        # each look at room_a after the swap surprises; the second surprise (p_th = 2) is
        # dissonance: alternate the colours so room_a is looked at again
        colours = ["red", "blue", "red", "blue", "red"]
        results = [_run_task(client, f"find the {c} block", f"t{2 + i}")
                   for i, c in enumerate(colours)]
        wait_for(lambda: len(alerts) >= 1, 20, "dissonance alert", logs)
        # room_a had the red memory; room_b had none before the swap (nothing to contradict)
        assert {a.state_key for a in alerts} == {"room_a"}
        assert all(r.success for r in results), [(r.reason, r.found_at) for r in results]
        assert [r.found_at for r in results[-2:]] == ["room_a", "room_b"]

        # the stale memory (red in room_a) is no longer retrieved; history keeps it
        trusted = call(node, query, QueryMemory.Request(state_key="room_a", action="look"))
        assert "colors=red" not in {e.transition.outcome for e in trusted.entries}
        everything = call(node, query, QueryMemory.Request(state_key="room_a", action="look",
                                                           include_suppressed=True))
        assert "colors=red" in {e.transition.outcome for e in everything.entries}

        wait_for(lambda: len(outcomes) >= 7, 10, "task outcomes")
        assert outcomes[0].transitions and len(outcomes[0].transitions) == len(
            outcomes[0].transition_ids)
        assert all(i > 0 for o in outcomes for i in o.transition_ids)
        # REP-105: poses on transitions are map poses (the simulator's pose topic), and say so
        assert all(t.header.frame_id == "map" and t.has_pose for t in outcomes[0].transitions)

        # requests in words, answered from memory with its history: the answer cites the
        # trusted looks, the explain trail names the suppressed one and why
        # a question is answered from memory without driving, and names what went stale
        where = _run_task(client, "where did you last see the red block?", "q0")
        assert where.intent == "where_last_seen" and where.success, (where.reason, where.answer)
        assert where.reason == "answered" and where.steps == 0 and not where.found_at
        assert "room_b" in where.answer and where.cited_entries, where.answer
        assert any("room_a" in x for x in where.explain), where.explain
        unknown = _run_task(client, "go to the garden", "q_unknown")
        assert not unknown.success and unknown.reason == "invalid_task"
        assert "'garden' is not a place or colour I know" in unknown.answer, unknown.answer
        seen = _run_task(client, "bring me to where you last saw the red block", "q1")
        assert seen.intent == "go_to_last_seen" and seen.understood_by == "rules"
        assert seen.success and seen.found_at == "room_b", (seen.reason, seen.answer)
        assert seen.cited_entries and all(f"#{i}" in seen.answer for i in seen.cited_entries)
        assert any("room_a" in x and ("suppressed" in x or "replaced" in x)
                   for x in seen.explain), seen.explain
        changed = _run_task(client, "what changed since yesterday?", "q2")
        assert changed.intent == "changes" and changed.success and changed.steps == 0
        assert "room_a" in changed.answer and changed.explain, changed.answer
        bad = _run_task(client, "dance the tango", "bad")
        assert not bad.success and bad.reason == "invalid_task"
        ok = _run_task(client, "find the blue block", "after_bad")
        assert ok.success  # a rejected task leaves the planner working
    for p in graph:
        assert p.alive(), f"{p.name} died:\n{p.log()}"


def test_instructions_run_in_order_and_never_drive_what_they_avoid(graph):
    """Over DDS on the small world (room_a - hall - room_b, hall - dock: room_a and room_b are
    reached only through the hall). What must hold: "go to room_a, then room_b, then dock"
    drives the three steps in that order, one answer line each; "go to room_b but avoid
    room_a" arrives without the robot ever entering room_a; "find the red block, avoid
    room_a" (red is in room_a) searches everywhere else and fails rather than enter it; "go
    to room_a, don't use the corridor between hall and room_a" (its only corridor) is refused
    before anything moves, naming the corridor."""
    from geometry_msgs.msg import PoseStamped

    from glove_ros.action import RunTask
    from glove_ros.nodes.common import SpinSafeActionClient

    def logs():
        return "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in graph)

    places = {"dock": (0.0, 0.0), "hall": (0.0, 1.0), "room_a": (-1.0, 1.0),
              "room_b": (1.0, 1.0)}
    poses: list[tuple[float, float]] = []

    def visited(since: int) -> list[str]:  # waypoints the ground-truth pose passed, in order
        seq: list[str] = []
        for x, y in poses[since:]:
            at = [w for w, (wx, wy) in places.items() if (wx - x) ** 2 + (wy - y) ** 2 < 0.09]
            if at and (not seq or seq[-1] != at[0]):
                seq.append(at[0])
        return seq

    def closest(since: int, w: str) -> float:
        wx, wy = places[w]
        return min(((wx - x) ** 2 + (wy - y) ** 2) ** 0.5 for x, y in poses[since:])

    with ros_client("instructions") as node:
        node.create_subscription(PoseStamped, "pose", lambda m: poses.append(
            (m.pose.position.x, m.pose.position.y)), 100)
        client = SpinSafeActionClient(node, RunTask, "run_task")
        assert client.wait_for_server(timeout_sec=60), logs()
        wait_for(lambda: len(poses) > 0, 60, "the simulator's pose", logs)

        mark = len(poses)
        seq = _run_task(client, "go to room_a, then room_b, then dock", "i_seq")
        assert (seq.success, seq.intent, seq.understood_by) == (True, "instruction", "rules"), (
            seq.reason, seq.answer, logs())
        lines = seq.answer.split("; ")
        assert [x.split(":")[0] for x in lines] == [
            "1. go to room_a", "2. go to room_b", "3. return to the dock"], seq.answer
        assert lines[0].endswith(": reached") and lines[1].endswith(": reached"), seq.answer
        wait_for(lambda: visited(mark)[-1:] == ["dock"], 10, "the poses of the drive", logs)
        assert [w for w in visited(mark) if w != "hall"][-3:] == ["room_a", "room_b", "dock"]
        assert seq.found_at == "dock" and any(x.startswith("1. go to room_a")
                                              for x in seq.explain), seq.explain

        mark = len(poses)
        around = _run_task(client, "go to room_b but avoid room_a", "i_avoid")
        assert around.success and around.answer == "1. go to room_b: reached", (
            around.reason, around.answer, logs())
        assert "avoiding room_a" in around.explain, around.explain
        wait_for(lambda: visited(mark)[-1:] == ["room_b"], 10, "the poses of the drive", logs)
        assert closest(mark, "room_a") > 0.9, visited(mark)

        mark = len(poses)
        search = _run_task(client, "find the red block, avoid room_a", "i_find")
        assert not search.success and search.reason.startswith("step 1 (find the red block) "
                                                               "failed"), search.reason
        assert closest(mark, "room_a") > 0.9, visited(mark)  # red is there: never entered

        mark = len(poses)
        cut = _run_task(client, "go to room_a, don't use the corridor between hall and room_a",
                        "i_cut")
        assert not cut.success and cut.reason == "invalid_task", (cut.reason, cut.answer)
        assert "passes the corridor hall-room_a, which you asked me to avoid" in cut.answer, \
            cut.answer
        assert set(visited(mark)) <= {visited(0)[-1]}  # nothing moved
    for p in graph:
        assert p.alive(), f"{p.name} died:\n{p.log()}"


@pytest.fixture
def answering_graph(tmp_path):
    """Memory and planner only: no simulator, nothing that drives. The planner knows the 80
    COCO classes, as the launch gives it with a trained detector."""
    procs = [
        NodeProcess("glove_ros.nodes.memory_node", tmp_path, {"db_path": str(tmp_path / "m.db")}),
        NodeProcess("glove_ros.nodes.planner_node", tmp_path, {
            "world": "jetrover_maze", "robot_id": "rover", "objects": ["coco"]}),
    ]
    yield procs
    for p in procs:
        p.stop()


def test_object_questions_are_answered_from_memory_and_unknown_objects_refused(answering_graph):
    """Over DDS: "is there a cup in the kitchen?" is answered from the looks in memory, citing
    the look it rests on, and nothing is driven (a navigate_to_waypoint server here records
    any goal); "find the garden gnome" is refused naming it, not mapped to a class."""
    from rclpy.action import ActionServer

    from glove_ros.action import NavigateToWaypoint, RunTask
    from glove_ros.msg import Transition
    from glove_ros.srv import RecordTransition

    def logs():
        return "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in answering_graph)

    with ros_client("object_questions") as node:
        drives: list[str] = []

        def drive(handle):  # the robot must not move to answer: record, refuse
            drives.append(handle.request.waypoint)
            handle.abort()
            return NavigateToWaypoint.Result()

        ActionServer(node, NavigateToWaypoint, "navigate_to_waypoint", drive)
        record = node.create_client(RecordTransition, "record_transition")
        warm_record(node, record, timeout=60)
        ids = {}
        for place, outcome in (("kitchen", "objects=cup,person*2"), ("office", "objects=chair")):
            resp = call(node, record, RecordTransition.Request(transition=Transition(
                state_key=place, action="look", outcome=outcome, robot_id="rover")), 30)
            assert resp.accepted, resp.message
            ids[place] = int(resp.id)
        client, probe = answering_action_client(
            node, RunTask, "run_task", lambda a: RunTask.Goal(task="", task_id=f"w{a}"), logs)
        assert probe.reason == "invalid_task"

        cup = _run_task(client, "is there a cup in the kitchen?", "q_cup")
        assert (cup.success, cup.intent, cup.reason, cup.understood_by) == (
            True, "is_there", "answered", "rules"), (cup.reason, cup.answer, logs())
        assert cup.steps == 0 and not cup.found_at
        assert cup.answer.startswith("Yes: my last look at kitchen"), cup.answer
        assert list(cup.cited_entries) == [ids["kitchen"]] and f"#{ids['kitchen']}" in cup.answer
        people = _run_task(client, "are there people in the kitchen", "q_people")
        assert people.success and "(2 of them)" in people.answer, people.answer
        office = _run_task(client, "is the cup in the office?", "q_office")
        assert office.success and office.answer.startswith("No:"), office.answer
        assert list(office.cited_entries) == [ids["office"]]
        lab = _run_task(client, "is there a sofa in the lab", "q_lab")
        assert lab.success and lab.answer == "I do not know: I have not looked at lab."
        assert not lab.cited_entries
        where = _run_task(client, "where did you last see a cup?", "q_where")
        assert where.intent == "where_last_seen" and "at kitchen" in where.answer, where.answer

        gnome = _run_task(client, "find the garden gnome", "q_gnome")
        assert not gnome.success and gnome.reason == "invalid_task"
        assert "'garden gnome' is not a place, colour or object I know" in gnome.answer, \
            gnome.answer
        assert "objects: airplane, apple" in gnome.answer  # what it knows, a short list
        assert drives == [], drives
    for p in answering_graph:
        assert p.alive(), f"{p.name} died:\n{p.log()}"
