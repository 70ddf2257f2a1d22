"""What experience memory believes about the map, as drawable shapes (ROS-free).

:func:`memory_layers` turns the map (waypoints and corridors of a world file) and the
memory entries (``query_memory`` with suppressed history) into :class:`Shape` s that the
markers node converts to a ``visualization_msgs/MarkerArray`` for RViz or Foxglove:

* ``waypoints``: a disc per waypoint with its id (never coloured by memory);
* ``corridors``: a line per corridor, coloured by what memory holds for navigating it
  (either direction), and a cross on the corridors memory believes ``blocked``;
* ``blocks``: a cube per colour memory saw at a waypoint (``look`` outcomes), filled with
  the block's colour, and a status-coloured label.

Memory status of one (state, action, argument) group, most urgent first:

* ``pending``: it has suppressed entries not yet replaced (GLOVE raised dissonance; the
  pair waits for re-verification, nothing of it is retrieved);
* ``stale_negative``: its retrievable belief is negative (``blocked`` ...) and older than
  ``stale_after`` recorded transitions: the deadlock rule may re-test it;
* ``trusted``: retrievable and current;
* ``suppressed``: only history (replaced entries) remains.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from glove_ros.core.memory.looks import is_look_signature, look_counts

TRUSTED, SUPPRESSED, PENDING, STALE_NEGATIVE = "trusted", "suppressed", "pending", "stale_negative"
STATUSES = (TRUSTED, SUPPRESSED, PENDING, STALE_NEGATIVE)
# RGBA per memory status
STATUS_COLORS: dict[str, tuple[float, float, float, float]] = {
    TRUSTED: (0.10, 0.75, 0.20, 1.0),
    SUPPRESSED: (0.55, 0.55, 0.55, 0.6),
    PENDING: (1.00, 0.75, 0.00, 1.0),
    STALE_NEGATIVE: (0.60, 0.25, 0.85, 1.0),
}
UNKNOWN_COLOR = (0.35, 0.55, 1.0, 0.35)  # a corridor memory says nothing about
WAYPOINT_COLOR = (0.9, 0.9, 0.9, 0.8)
BLOCK_RGB = {"red": (0.9, 0.1, 0.1), "orange": (1.0, 0.5, 0.0), "yellow": (0.95, 0.9, 0.1),
             "green": (0.1, 0.7, 0.2), "blue": (0.1, 0.3, 0.95), "purple": (0.55, 0.2, 0.75)}
# entry status codes of glove_ros/MemoryEntry
ENTRY_TRUSTED, ENTRY_SUPPRESSED, ENTRY_REPLACED = 0, 1, 2


@dataclass(frozen=True)
class EntryView:
    """The fields of one memory entry this module needs."""

    id: int
    state_key: str
    action: str
    action_arg: str
    outcome: str
    status: int  # ENTRY_*


@dataclass(frozen=True)
class Belief:
    """Memory's status and retrievable outcomes for one (state, action, argument)."""

    status: str
    outcomes: tuple[str, ...]  # retrievable (trusted) outcomes, most frequent first


@dataclass
class Shape:
    """One drawable: kind is 'disc', 'text', 'line', 'cross' or 'cube'."""

    layer: str
    key: str  # unique within the layer (stable marker ids)
    kind: str
    points: list[tuple[float, float]]
    color: tuple[float, float, float, float]
    text: str = ""
    status: str = ""
    extra: dict[str, str] = field(default_factory=dict)


def beliefs(entries: Iterable[EntryView], negative_outcomes: Sequence[str],
            stale_after: int) -> dict[tuple[str, str, str], Belief]:
    """Group entries by (state_key, action, action_arg) and classify each group."""
    groups: dict[tuple[str, str, str], list[EntryView]] = {}
    newest = 0
    for e in entries:
        groups.setdefault((e.state_key, e.action, e.action_arg), []).append(e)
        newest = max(newest, e.id)
    negative = set(negative_outcomes)
    out: dict[tuple[str, str, str], Belief] = {}
    for key, group in groups.items():
        trusted = [e for e in group if e.status == ENTRY_TRUSTED]
        counts: dict[str, int] = {}
        for e in trusted:
            counts[e.outcome] = counts.get(e.outcome, 0) + 1
        outcomes = tuple(sorted(counts, key=lambda o: (-counts[o], o)))
        if any(e.status == ENTRY_SUPPRESSED for e in group):
            status = PENDING
        elif not trusted:
            status = SUPPRESSED
        elif (outcomes[0] in negative and stale_after > 0
              and newest - max(e.id for e in trusted) >= stale_after):
            status = STALE_NEGATIVE
        else:
            status = TRUSTED
        out[key] = Belief(status, outcomes)
    return out


def _colors(signature: str) -> list[str]:
    """What a look outcome saw, for the map: colours, or object classes with their count
    (``objects=cup,person*2`` -> cup, person*2); [] for anything else."""
    if not is_look_signature(signature):
        return []
    try:
        counts = look_counts(signature)
    except ValueError:
        return []
    return [c if n == 1 else f"{c}*{n}" for c, n in sorted(counts.items())]


def memory_layers(waypoints: dict[str, tuple[float, float]],
                  corridors: Iterable[tuple[str, str]], entries: Iterable[EntryView],
                  negative_outcomes: Sequence[str] = ("blocked",), stale_after: int = 50,
                  navigate: str = "navigate_to", look: str = "look") -> list[Shape]:
    """Shapes of the three layers (see the module docstring), in a stable order."""
    memory = beliefs(entries, negative_outcomes, stale_after)
    shapes: list[Shape] = []
    for wid, (x, y) in sorted(waypoints.items()):
        shapes.append(Shape("waypoints", wid, "disc", [(x, y)], WAYPOINT_COLOR))
        shapes.append(Shape("waypoints", f"{wid}/label", "text", [(x, y)], WAYPOINT_COLOR,
                            text=wid))
    rank = {PENDING: 0, STALE_NEGATIVE: 1, TRUSTED: 2, SUPPRESSED: 3}
    for a, b in sorted(tuple(sorted(c)) for c in corridors):
        if a not in waypoints or b not in waypoints:
            continue
        found = [memory[k] for k in ((a, navigate, b), (b, navigate, a)) if k in memory]
        belief = min(found, key=lambda m: rank[m.status]) if found else None
        status = belief.status if belief else ""
        color = STATUS_COLORS[status] if belief else UNKNOWN_COLOR
        blocked = bool(belief and belief.outcomes and belief.outcomes[0] in negative_outcomes)
        pts = [waypoints[a], waypoints[b]]
        shapes.append(Shape("corridors", f"{a}:{b}", "line", pts, color, status=status,
                            extra={"belief": belief.outcomes[0] if belief and belief.outcomes
                                   else ""}))
        if blocked:
            mid = ((pts[0][0] + pts[1][0]) / 2, (pts[0][1] + pts[1][1]) / 2)
            shapes.append(Shape("corridors", f"{a}:{b}/blocked", "cross", [mid], color,
                                text="blocked", status=status))
    for (state, action, _arg), belief in sorted(memory.items()):
        if action != look or state not in waypoints:
            continue
        x, y = waypoints[state]
        seen = _colors(belief.outcomes[0]) if belief.outcomes else []
        for i, c in enumerate(seen):
            r, g, bl = BLOCK_RGB.get(c, (0.8, 0.8, 0.8))
            alpha = 1.0 if belief.status == TRUSTED else 0.4
            shapes.append(Shape("blocks", f"{state}/{c}", "cube",
                                [(x + 0.25, y + 0.2 * (i - (len(seen) - 1) / 2))],
                                (r, g, bl, alpha), status=belief.status))
        shapes.append(Shape("blocks", f"{state}/label", "text", [(x, y - 0.3)],
                            STATUS_COLORS[belief.status], status=belief.status,
                            text=f"{','.join(seen) or 'nothing'} ({belief.status})"))
    return shapes


__all__ = ["BLOCK_RGB", "PENDING", "STALE_NEGATIVE", "STATUSES", "STATUS_COLORS", "SUPPRESSED",
           "TRUSTED", "Belief", "EntryView", "Shape", "beliefs", "memory_layers"]
