"""waypoint_nav over Nav2's NavigateToPose action, against a stand-in action server.

Nav2 is not installable here, so the test builds a test-only ``nav2_msgs`` package with the
same NavigateToPose fields (test/nav2_standin/, colcon, cached under build/nav2_standin/
per Python environment) and runs test/nav2_standin_server.py as the bt_navigator. Both the
waypoint_nav node and the stand-in run as processes with that package on their paths; this
process only speaks glove_ros's navigate_to_waypoint and plain topics. What must hold:
nav2.interface auto picks the action; the goal is the waypoint's pose in ``map``; Nav2's
feedback becomes ours; succeeded -> reached, aborted -> blocked, our cancel and our
timeout cancel the Nav2 goal for real; no server -> unreachable.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import Collector, NodeProcess, ros_client, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "test" / "nav2_standin" / "nav2_msgs"
# nav.timeout of the node under test, seconds: the cancel test must cancel before it runs
# out (with 3 s, CI once saw the node's own timeout come first, on a loaded machine)
TIMEOUT = 8.0


def _build_standin() -> Path:
    """colcon-build the stand-in nav2_msgs for this Python environment (cached)."""
    files = sorted(p for p in STANDIN.rglob("*") if p.is_file())
    digest = hashlib.sha256(sys.prefix.encode()
                            + b"".join(p.read_bytes() for p in files)).hexdigest()[:12]
    base = ROOT / "build" / "nav2_standin" / digest
    install = base / "install"
    if (install / "nav2_msgs" / "share" / "nav2_msgs" / "package.xml").is_file():
        return install
    env = dict(os.environ, CMAKE_PREFIX_PATH=sys.prefix,
               AMENT_PREFIX_PATH=os.pathsep.join([sys.prefix, os.environ.get(
                   "AMENT_PREFIX_PATH", "")]).rstrip(os.pathsep))
    colcon = Path(sys.prefix) / "bin" / "colcon"
    r = subprocess.run(
        [str(colcon), "--log-base", str(base / "log"), "build", "--base-paths", str(STANDIN),
         "--build-base", str(base / "build"), "--install-base", str(install),
         "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"building the nav2_msgs stand-in failed:\n{r.stdout[-4000:]}"
    return install


def _env_with(install: Path) -> dict[str, str]:
    prefix = install / "nav2_msgs"
    site = next((prefix / "lib").glob("python3*/site-packages"))
    env = dict(os.environ)
    for var, path in (("PYTHONPATH", site), ("LD_LIBRARY_PATH", prefix / "lib"),
                      ("AMENT_PREFIX_PATH", prefix)):
        env[var] = os.pathsep.join([str(path), *filter(None, [env.get(var)])])
    return env


@dataclass
class Nav2Rig:
    """What the ``nav2`` fixture hands each test (``mode`` and ``applied`` are replaced
    when the mode handshake has to start over, see :func:`_set_mode`)."""

    proc: Any  # the waypoint_nav node under test (NodeProcess)
    node: Any  # the test's rclpy node
    client: Any  # ActionClient for navigate_to_waypoint
    events: Any  # Collector of the stand-in's step events
    goals: Any  # Collector of the poses the stand-in was sent
    mode: Any  # latched publisher of the stand-in's mode
    logs: Callable[[], str]  # node and stand-in logs, for failure messages
    applied: Any  # Collector of the stand-in's echo of each mode it applied
    relayed: Any  # Collector of the feedback the node published on the action's topic


@pytest.fixture(scope="module")
def nav2(tmp_path_factory):
    """The waypoint_nav node driving the Nav2 stand-in, and the test's view of both."""
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    from glove_ros.action import NavigateToWaypoint
    from glove_ros.nodes.common import SpinSafeActionClient

    env = _env_with(_build_standin())
    log_dir = tmp_path_factory.mktemp("nav2_action")
    server = str(ROOT / "test" / "nav2_standin_server.py")
    standin = subprocess.Popen([sys.executable, "-u", server],
                               stdout=open(log_dir / "standin.log", "w"),  # noqa: SIM115
                               stderr=subprocess.STDOUT, env=env)
    proc = NodeProcess("glove_ros.nodes.waypoint_nav_node", log_dir, {
        "world": "small", "nav.timeout": TIMEOUT, "nav.stall_timeout": 1.0}, env=env)

    def logs() -> str:
        return proc.log() + "\n--- stand-in\n" + (log_dir / "standin.log").read_text()

    try:
        with ros_client("nav2_action_test") as node:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            mode = node.create_publisher(String, "standin/mode", latched)
            applied = Collector(node, String, "standin/mode_applied", latched)
            events = Collector(node, String, "standin/events")
            relayed = Collector(node, NavigateToWaypoint.Impl.FeedbackMessage,
                                "navigate_to_waypoint/_action/feedback")
            goals = Collector(node, PoseStamped, "standin/goals")
            client = SpinSafeActionClient(node, NavigateToWaypoint, "navigate_to_waypoint")
            wait_for(lambda: client.server_is_ready() or not proc.alive(), 30,
                     "navigate_to_waypoint server", logs)
            assert proc.alive(), logs()
            wait_for(lambda: node.count_subscribers("standin/mode") > 0, 20, "stand-in", logs)
            fixture = Nav2Rig(proc, node, client, events, goals, mode, logs, applied, relayed)
            _warm_up(fixture)
            yield fixture
    finally:
        proc.stop()
        standin.terminate()
        try:
            standin.wait(10)
        except subprocess.TimeoutExpired:  # Jazzy's rclpy can hang in shutdown on SIGTERM
            standin.kill()
            standin.wait(10)


def _warm_up(nav2, tries: int = 5) -> None:
    """Drive goals until one brings all three feedback messages through both hops.

    Feedback travels on topics (stand-in -> waypoint_nav -> us) whose readers discovery may
    not have matched yet when the first goal runs (seen on Jazzy under load); the tests
    then assert the exact feedback of a goal, so the paths are proven matched first.
    """
    for _ in range(tries):
        _set_mode(nav2, "succeed")
        feedback: list = []
        handle = _send(nav2, "room_a", feedback)
        _wait(handle.get_result_async(), 20, "warm-up result", nav2.logs)
        end = time.monotonic() + 2.0
        while len(_relayed(nav2, handle)) < 3 and time.monotonic() < end:
            time.sleep(0.05)
        if len(_relayed(nav2, handle)) >= 3 and feedback:
            return
    raise AssertionError(f"no goal brought its three feedback messages in {tries} tries\n"
                         + nav2.logs())


def _set_mode(nav2, mode: str, tries: int = 4, wait: float = 5.0) -> None:
    """Put the stand-in in ``mode`` and wait until its callback has run (its echo).

    Latched, but once in a CI run on 2 loaded cores neither a latched mode nor its echo
    arrived in 20 s for the whole module (matched per discovery, no data: Fast DDS's
    shared-memory transport after killed processes is known for that, eProsima/Fast-DDS
    #5053, #5469). So an unanswered try drops both ends of the handshake and makes new
    ones, as rosproc.answering_action_client does for action clients.
    """
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    for attempt in range(tries):
        if attempt:
            nav2.node.destroy_publisher(nav2.mode)
            nav2.node.destroy_subscription(nav2.applied.sub)
            nav2.mode = nav2.node.create_publisher(String, "standin/mode", latched)
            nav2.applied = Collector(nav2.node, String, "standin/mode_applied", latched)
        nav2.mode.publish(String(data=mode))
        applied = nav2.applied
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if len(applied) > 0 and applied.items[-1].data == mode:
                nav2.events.items.clear()
                return
            time.sleep(0.05)
    raise AssertionError(f"the stand-in never applied mode {mode} in {tries} tries of "
                         f"{wait:.0f} s each\n--- logs ---\n{nav2.logs()}")


def _wait(future, timeout: float, what: str, logs):
    end = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}\n--- logs ---\n{logs()}")
        time.sleep(0.01)
    return future.result()


def _send(nav2, waypoint: str, feedback: list):
    from glove_ros.action import NavigateToWaypoint

    handle = _wait(nav2.client.send_goal_async(
        NavigateToWaypoint.Goal(waypoint=waypoint),
        feedback_callback=lambda f: feedback.append(f.feedback)), 10, "goal response", nav2.logs)
    assert handle.accepted, nav2.logs()
    return handle


def _steps(nav2) -> list[str]:
    return [m.data for m in nav2.events.items]


def _relayed(nav2, handle) -> list[float]:
    """distance_remaining of the feedback the node published for ``handle``'s goal."""
    goal_id = bytes(handle.goal_id.uuid)
    return [round(m.feedback.distance_remaining, 3) for m in list(nav2.relayed.items)
            if bytes(m.goal_id.uuid) == goal_id]


def test_auto_picks_the_action_and_goal_is_the_waypoint_pose_in_map(nav2):
    from action_msgs.msg import GoalStatus

    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    logs = nav2.logs
    assert "Nav2 through its action" in nav2.proc.log()
    _set_mode(nav2, "succeed")
    handle = _send(nav2, "room_b", [])
    res = _wait(handle.get_result_async(), 20, "result", logs)
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED, logs()
    assert (r.reached, r.outcome, r.final_waypoint) == (True, "reached", "room_b")
    wp = load_world(resolve_world("small")).waypoint("room_b")
    goal = nav2.goals.items[-1]
    assert goal.header.frame_id == "map"
    assert (goal.pose.position.x, goal.pose.position.y) == pytest.approx((wp.x, wp.y))
    # feedback travels on a topic and the result on a service: the last feedback may land
    # just after the result (seen on Jazzy under load), and rclpy's action client drops the
    # feedback it takes after the result (about 1 run in 8 here), so the feedback checked is
    # what the node published on the action's feedback topic
    wait_for(lambda: len(_relayed(nav2, handle)) >= 3, 5, "the third feedback", logs)
    assert _relayed(nav2, handle) == [0.6, 0.4, 0.2]
    # the stand-in's events come on their own topic, not with the result: let them arrive
    wait_for(lambda: len(_steps(nav2)) >= 2, 10, "the stand-in's events", logs)
    assert _steps(nav2) == ["goal", "succeeded"]


def test_nav2_abort_is_blocked(nav2):
    from action_msgs.msg import GoalStatus

    _set_mode(nav2, "abort")
    handle = _send(nav2, "hall", [])
    res = _wait(handle.get_result_async(), 20, "result", nav2.logs)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert (res.result.reached, res.result.outcome) == (False, "blocked")
    wait_for(lambda: len(_steps(nav2)) >= 2, 10, "the stand-in's events", nav2.logs)
    assert _steps(nav2) == ["goal", "aborted"]


def test_cancel_reaches_nav2(nav2):
    from action_msgs.msg import GoalStatus

    _set_mode(nav2, "hang")
    feedback: list = []
    handle = _send(nav2, "room_a", feedback)
    wait_for(lambda: len(feedback) > 2, 10, "feedback while driving", nav2.logs)
    assert all(f.distance_remaining == pytest.approx(2.0) for f in feedback)
    _wait(handle.cancel_goal_async(), 10, "cancel response", nav2.logs)
    res = _wait(handle.get_result_async(), 20, "result", nav2.logs)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.outcome == "cancelled"
    wait_for(lambda: "canceled" in _steps(nav2), 10, "Nav2 goal cancelled", nav2.logs)
    assert _steps(nav2)[:2] == ["goal", "cancel_request"]


def test_own_timeout_cancels_the_nav2_goal(nav2):
    from action_msgs.msg import GoalStatus

    _set_mode(nav2, "hang")
    handle = _send(nav2, "hall", [])
    res = _wait(handle.get_result_async(), TIMEOUT + 20, "result", nav2.logs)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.outcome == "timeout"
    wait_for(lambda: "canceled" in _steps(nav2), 10, "Nav2 goal cancelled", nav2.logs)


def test_no_nav2_server_is_unreachable_not_blocked(nav2, tmp_path):
    from action_msgs.msg import GoalStatus

    from glove_ros.action import NavigateToWaypoint
    from glove_ros.nodes.common import SpinSafeActionClient

    node = nav2.node
    env = _env_with(_build_standin())
    lonely = NodeProcess("glove_ros.nodes.waypoint_nav_node", tmp_path, {
        "world": "small", "nav2.server_timeout": 1.0}, name="lonely",
        remaps={"__ns": "/lonely"}, env=env)  # /lonely/navigate_to_pose has no server
    try:
        client = SpinSafeActionClient(node, NavigateToWaypoint, "/lonely/navigate_to_waypoint")
        wait_for(client.server_is_ready, 30, "lonely server", lonely.log)
        handle = _wait(client.send_goal_async(NavigateToWaypoint.Goal(waypoint="hall")), 10,
                       "goal response", lonely.log)
        res = _wait(handle.get_result_async(), 20, "result", lonely.log)
        assert res.status == GoalStatus.STATUS_ABORTED
        assert res.result.outcome == "unreachable", lonely.log()
    finally:
        lonely.stop()


def test_action_interface_without_nav2_msgs_fails_configure_clearly():
    from glove_ros.nodes import waypoint_nav_node as w

    if w.nav2_action_type() is not None:
        pytest.skip("nav2_msgs importable in this process")
    assert w.choose_interface("auto") == "topic"
    with pytest.raises(ValueError, match="nav2_msgs is not importable"):
        w.choose_interface("action")
    with pytest.raises(ValueError, match="nav2.interface"):
        w.choose_interface("carrier_pigeon")
