"""An action client created or destroyed while an executor spins its node (the demo's
run_task client, ``glove-ros task``, the lifecycle nodes' clients).

What must hold: the client has its lock before rclpy registers it with the node (rclpy
registers first and sets the lock after, so a spinning executor could meet a client
without one and its spin thread died: the demo then saw no message at all); a destroyed
client is never added to a wait set; and the spinner keeps handing out work after many
clients were created, or created and destroyed, while it spins.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros


def test_a_client_created_while_spinning_has_its_lock_when_registered():
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    from glove_ros.action import RunTask
    from glove_ros.nodes.common import BackgroundSpinner, SpinSafeActionClient

    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("spin_safe_client_test", context=ctx)
    executor = MultiThreadedExecutor(2, context=ctx)
    executor.add_node(node)
    spinner = BackgroundSpinner(executor, period=0.001)
    clients = []
    try:
        seen: list[bool] = []
        add = node.add_waitable

        def recording_add(waitable):
            seen.append(hasattr(waitable, "_lock"))
            return add(waitable)

        node.add_waitable = recording_add
        clients += [SpinSafeActionClient(node, RunTask, f"run_task_{i}") for i in range(50)]
        node.add_waitable = add
        assert seen == [True] * 50
        fired = threading.Event()
        timer = node.create_timer(0.01, fired.set)
        assert fired.wait(5.0), "the spinner stopped handing out work"
        assert spinner._thread.is_alive()
        node.destroy_timer(timer)
    finally:
        # stop spinning before the clients go: destroying them while the executor spins
        # is the next test's subject
        spinner.stop()
        for c in clients:
            c.destroy()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


@pytest.mark.parametrize("threads", [1, 2])
def test_clients_destroyed_while_spinning_leave_the_spinner_running(threads):
    """A lifecycle node's deactivate / cleanup destroys its clients while its executor
    spins. What must hold: the spin thread meets no destroyed client (rclpy adds a client
    that was destroyed after it listed the node's waitables to the wait set all the same:
    "action client pointer is invalid", and the spin thread dies), and it keeps handing out
    work after 200 clients came and went."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from glove_ros.action import RunTask
    from glove_ros.nodes.common import BackgroundSpinner, SpinSafeActionClient

    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("spin_safe_destroy_test", context=ctx)
    executor = (SingleThreadedExecutor(context=ctx) if threads == 1
                else MultiThreadedExecutor(threads, context=ctx))
    executor.add_node(node)
    errors: list[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    before = len(list(node.waitables))
    spinner = BackgroundSpinner(executor, period=0.0005)
    try:
        for i in range(200):
            SpinSafeActionClient(node, RunTask, f"run_task_{i}").destroy()
        fired = threading.Event()
        timer = node.create_timer(0.01, fired.set)
        assert fired.wait(5.0), f"the spinner stopped handing out work: {errors}"
        assert spinner._thread.is_alive()
        assert errors == []
        assert len(list(node.waitables)) == before  # every destroyed client left the node
        node.destroy_timer(timer)
    finally:
        spinner.stop()
        threading.excepthook = hook
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
