"""Operational helpers for nodes: rates and latencies reported on /diagnostics (``health``),
and whether the robot is docked, from its waypoint and battery (``dock``).

Imports nothing else from ``glove_ros.core``.
"""
