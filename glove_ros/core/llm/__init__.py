"""The local LLM: llama.cpp runtime (``runtime``), model registry (``models``), text
embeddings (``embedding``) and the planner's prompt (``prompts``).

Imports nothing else from ``glove_ros.core``; the planner, Janus and consolidation use it.
"""
