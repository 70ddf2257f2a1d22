"""Deciding what to do: the task agent, task parsing and open instructions (sequences,
constraints, conditionals checked against the map), answers from memory, plan memory and
its planner, plan-memory updaters and the Janus gate.

May import ``core.memory``, ``core.llm`` and ``core.world``.
"""
