"""glove_ros: memory that stays true to a changing world, for embodied LLM agents.

The ROS-free algorithms live in :mod:`glove_ros.core`; ROS nodes in :mod:`glove_ros.nodes`.
When the package is built with colcon, the generated interfaces (``glove_ros.msg``,
``glove_ros.srv``, ``glove_ros.action``) live in the installed copy of this package;
``extend_path`` lets a source checkout on ``sys.path`` find them there too.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
__version__ = "0.1.0"
