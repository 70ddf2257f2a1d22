"""The robot's world: world files and generators, the simulator core, perception (colour
blocks, YOLO), look aggregation, SDF export, RViz marker shapes and waypoint progress.

May import ``core.memory`` (experience types).
"""
