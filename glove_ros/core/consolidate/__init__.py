"""Dock-time consolidation (Auto-Dreamer): the fast writer, region rewriting by a bounded
tool-using LLM loop, and the acceptance test that decides whether a rewrite is committed.

May import ``core.memory``, ``core.llm`` and ``core.plan``.
"""
