"""Natural-language tasks the JetRover agent understands (ROS-free)."""

from __future__ import annotations

import re

from glove_ros.core.agent import Task

_FIND = re.compile(
    r"^\s*(?:please\s+)?(?:find|search(?:\s+for)?|locate|look\s+for)\s+(?:the\s+|a\s+)?"
    r"(?!(?:the|a|an)\s)(?P<color>[a-z]+)\s+(?:block|cube|box)\s*[.!]?\s*$",
    re.IGNORECASE,
)


_DOCK = re.compile(
    r"^\s*(?:please\s+)?(?:(?:go|return|drive)\s+(?:back\s+)?to\s+(?:the\s+)?(?:dock|charger)"
    r"|dock|charge|go\s+charge)\s*[.!]?\s*$",
    re.IGNORECASE,
)


def is_dock_task(text: str) -> bool:
    """True for "return to the dock", "go charge", "dock" and close variants."""
    return bool(_DOCK.match(text or ""))


def parse_task(text: str, task_id: str = "", colors: tuple[str, ...] | None = None) -> Task:
    """Parse "find the red block" (and close variants) into a :class:`Task`.

    ``colors`` restricts the accepted colour names. Raises ValueError with the accepted
    form when the text is not understood.
    """
    m = _FIND.match(text or "")
    if not m:
        raise ValueError(f"task {text!r} not understood; say e.g. 'find the red block'")
    color = m.group("color").lower()
    if colors is not None and color not in colors:
        raise ValueError(f"unknown colour {color!r} in task {text!r}; known: {', '.join(colors)}")
    return Task(color=color, id=task_id).validate()
