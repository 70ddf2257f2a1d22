"""The planner node's parameters refuse values the agent cannot use (glove_ros.nodes.planner_node).

What must hold: the default believed_order is the agent's default ('nearest'), 'latest' is
accepted, anything else is refused naming the choices (a node never starts on a typo)."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from glove_ros.core.plan.agent import AgentConfig  # noqa: E402
from glove_ros.nodes import planner_node  # noqa: E402


def _defaults() -> dict:
    return {p.name: p.default for p in planner_node.PARAMS}


def test_believed_order_defaults_to_the_agents_and_refuses_unknown_orders():
    values = _defaults()
    assert values["believed_order"] == AgentConfig().believed_order == "nearest"
    planner_node.validate(values)
    planner_node.validate({**values, "believed_order": "latest"})
    with pytest.raises(ValueError, match="believed_order must be one of nearest, latest"):
        planner_node.validate({**values, "believed_order": "closest"})
