"""The local LLM: llama.cpp runtime (``runtime``), model registry (``models``), text
embeddings (``embedding``), the planner's prompt (``prompts``) and the one model the robot's
nodes share through the llm node (``shared``: context sizing, request checks, lazy load).

Imports nothing else from ``glove_ros.core``; the planner, Janus and consolidation use it.
"""
