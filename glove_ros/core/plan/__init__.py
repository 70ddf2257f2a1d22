"""Deciding what to do: the task agent, task parsing, open instructions (sequences,
constraints, conditionals checked against the map; not yet wired into the planner node),
answers from memory, plan memory and its planner, plan-memory updaters and the Janus gate.

May import ``core.memory``, ``core.llm`` and ``core.world``.
"""
