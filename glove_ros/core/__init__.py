"""The ROS-free core: everything that decides, testable with plain pytest (no rclpy, no msgs).

One room per concern, on floors that only import downwards:

============  ==================================================  =========================
room          what lives there                                    may import
============  ==================================================  =========================
memory/       experience types, the SQLite store, store checks,  (nothing in core)
              state equivalence, group commit, status map, fleet
llm/          llama.cpp runtime, model registry, embeddings,     (nothing in core)
              the planner's prompt
ops/          node health (rates, latencies) for /diagnostics    (nothing in core)
verify/       the GLOVE verifier, the calibrated detector, the   memory
              memory rules it is compared with and their views
world/        world files, generators, the simulator core,       memory
              perception, look aggregation, SDF, markers,
              waypoint progress
plan/         the task agent, tasks, answers, plan memory, the   memory, llm, world
              plan planner, updaters, the Janus gate
consolidate/  dock-time consolidation (Auto-Dreamer)             memory, llm, plan
bag/          rosbag2 files and bag drift tests                  memory, verify, world
============  ==================================================  =========================
"""
