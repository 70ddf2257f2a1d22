"""Operational helpers for nodes: rates and latencies reported on /diagnostics.

Imports nothing else from ``glove_ros.core``.
"""
