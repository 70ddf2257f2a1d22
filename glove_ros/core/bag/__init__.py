"""rosbag2 files: reading, writing and drift-testing recordings (no ROS needed).

May import ``core.memory``, ``core.verify`` and ``core.world``.
"""
