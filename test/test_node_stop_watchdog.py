"""A node stops after SIGINT / SIGTERM even when something in it does not return
(glove_ros.nodes.common.run and its stop_watchdog).

What must hold: a node process whose callback never returns still exits, with code 0,
within the watchdog's grace after the signal (``ros2 launch`` would otherwise SIGKILL it
and nobody would learn why), and its output names what held it: every thread's stack,
the stuck callback among them. Before the signal the watchdog does nothing. SIGUSR1
writes the stacks and the node goes on. A process in which a C call holds the
interpreter (the GIL) for good, so that no Python thread runs, still exits after the
stop: faulthandler's C timer writes the stacks and exits with code 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import wait_for  # noqa: E402


def test_the_watchdog_waits_for_the_stop_then_dumps_every_stack_and_exits_0(capfd):
    from glove_ros.nodes.common import stop_watchdog

    stop, codes = threading.Event(), []
    t = threading.Thread(target=stop_watchdog, args=(stop, 0.2, codes.append), daemon=True)
    t.start()
    time.sleep(0.5)
    assert codes == [] and t.is_alive()  # no stop asked for: nothing happens
    stop.set()
    t.join(5)
    assert codes == [0]
    err = capfd.readouterr().err
    assert "still running 0 s after the stop signal" in err
    assert "stop_watchdog" in err  # the stacks of the threads, this one's included


_STUCK_NODE = textwrap.dedent("""
    import time
    from rclpy.node import Node
    from glove_ros.nodes.common import run

    class Stuck(Node):
        def __init__(self):
            super().__init__("stuck_node_test")
            self.create_timer(0.05, self.never_returns)
            self.started = False

        def never_returns(self):
            if not self.started:
                self.started = True
                print("callback running", flush=True)
                while True:
                    time.sleep(0.1)

    raise SystemExit(run(Stuck, lifecycle_autostart=False))
""")


def test_a_node_with_a_callback_that_never_returns_still_stops(tmp_path):
    def stacks_on_demand(proc, log) -> None:
        proc.send_signal(signal.SIGUSR1)  # stacks on demand; the node goes on
        _wait_for_text(log, "never_returns", proc)
        time.sleep(0.5)
        assert proc.poll() is None, log.read_text()

    code, took, text = _stop(tmp_path, _STUCK_NODE, "callback running", stacks_on_demand)
    assert code == 0, text
    assert 7 <= took < 20, (took, text)
    assert "still running 8 s after the stop signal" in text
    assert "never_returns" in text  # the stack of the callback that held the process


def _stop(tmp_path, source: str, ready: str, before_stop=None) -> tuple[int, float, str]:
    """Run ``source`` as a node process; once it printed ``ready`` (and ``before_stop``
    ran), SIGINT it. Returns its exit code, the seconds it took to exit, and its output."""
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", source], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
        try:
            _wait_for_text(log, ready, proc)
            if before_stop is not None:
                before_stop(proc, log)
            proc.send_signal(signal.SIGINT)
            start = time.monotonic()
            code = proc.wait(30)
            took = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return code, took, log.read_text()


def _wait_for_text(log, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the process printed ``text``; fails at once (with its output) when it exited."""
    def printed() -> bool:
        assert proc.poll() is None, log.read_text()
        return text in log.read_text()

    wait_for(printed, timeout, f"'{text}' in the node's output", log.read_text)


# destroy_node (the teardown after the stop) calls libc's sleep through ctypes.PyDLL, which
# keeps the GIL: from then on no Python thread runs, the stop watchdog's included.
_GIL_HELD_NODE = textwrap.dedent("""
    import ctypes
    from rclpy.node import Node
    from glove_ros.nodes.common import run

    class HoldsTheInterpreter(Node):
        def __init__(self):
            super().__init__("gil_held_node_test")
            print("node up", flush=True)

        def destroy_node(self):
            print("holding the GIL", flush=True)
            ctypes.PyDLL(None).sleep(3600)

    raise SystemExit(run(HoldsTheInterpreter, lifecycle_autostart=False))
""")


def test_a_node_whose_teardown_holds_the_interpreter_still_stops(tmp_path):
    from glove_ros.nodes.common import LAST_RESORT_HEADER

    code, took, text = _stop(tmp_path, _GIL_HELD_NODE, "node up")
    assert "holding the GIL" in text
    assert code == 1, text  # the last resort's exit; the watchdog's 0 needs Python
    assert 8.5 <= took < 10, (took, text)  # before ros2 launch's SIGKILL at 10 s
    assert LAST_RESORT_HEADER in text
    assert "still running" not in text  # the Python watchdog could not run
    assert "destroy_node" in text  # the stack of what held the process
