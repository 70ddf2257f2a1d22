"""Operational helpers for nodes: rates and latencies reported on /diagnostics (``health``),
whether the robot is docked, from its waypoint and battery (``dock``), and when to re-send
an unanswered request (``resend``).

Imports nothing else from ``glove_ros.core``.
"""
