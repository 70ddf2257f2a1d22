"""Experience memory: transitions, the SQLite store, its checks and fleet fold (ground floor).

Imports nothing else from ``glove_ros.core``; every other room builds on it.
"""
