"""Memory status per (state, action, argument), rebuilt from the memory's event stream.

The demo (and anyone listening to ``memory_events``) folds each event into a
:class:`MemoryStatusMap`; :meth:`MemoryStatusMap.snapshot` says, for every place and
corridor the robot has memories of, whether retrieval trusts them, has suppressed them
(dissonance or a suspect negative), or they wait on the pending re-verification queue.
:func:`edge_status` merges the two directions of a corridor for a map. Pure Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: event kinds, as in ``glove_ros/msg/MemoryEvent.msg``
RECORDED, SUPPRESSED, REPLACED, RESTORED, QUEUED = range(5)

#: statuses a snapshot reports, from the least to the most in need of attention
STATUSES = ("trusted", "suppressed", "pending")

Key = tuple[str, str, str]  # (state_key, action, action_arg)


@dataclass
class MemoryStatusMap:
    """Entry statuses and the pending queue, as seen through memory events."""

    _key_of: dict[int, Key] = field(default_factory=dict)
    _trusted: dict[int, bool] = field(default_factory=dict)
    _pending: set[Key] = field(default_factory=set)

    def apply(self, kind: int, state_key: str, action: str, action_arg: str,
              entry_ids: Iterable[int], new_entry_ids: Iterable[int] = ()) -> None:
        """Fold one memory event in (unknown kinds are ignored)."""
        key = (state_key, action, action_arg)
        ids = [int(i) for i in entry_ids]
        if kind in (RECORDED, RESTORED):
            for i in ids:
                self._key_of[i] = key
                self._trusted[i] = True
        elif kind == SUPPRESSED:
            for i in ids:
                self._key_of.setdefault(i, key)
                self._trusted[i] = False
        elif kind == REPLACED:
            for i in ids:
                self._key_of.setdefault(i, key)
                self._trusted.pop(i, None)  # history, no longer part of memory
            for i in new_entry_ids:
                self._key_of[int(i)] = key
                self._trusted[int(i)] = True
            self._pending.discard(key)
        elif kind == QUEUED:
            self._pending.add(key)

    def snapshot(self) -> dict[Key, str]:
        """``{(state, action, arg): status}``: pending if queued for re-verification,
        suppressed if no trusted entry is left, else trusted."""
        has_trusted: dict[Key, bool] = {}
        for i, trusted in self._trusted.items():
            key = self._key_of[i]
            has_trusted[key] = has_trusted.get(key, False) or trusted
        out = {key: ("trusted" if t else "suppressed") for key, t in has_trusted.items()}
        for key in self._pending:
            out[key] = "pending"
        return out


def worst(statuses: Iterable[str]) -> str | None:
    """The status most in need of attention (see :data:`STATUSES`), or None if none."""
    ranked = [s for s in statuses if s in STATUSES]
    return max(ranked, key=STATUSES.index) if ranked else None


def place_status(snapshot: Mapping[Key, str], action: str = "look") -> dict[str, str]:
    """Status of ``action`` memories per state (e.g. what is seen at each waypoint)."""
    grouped: dict[str, list[str]] = {}
    for (state, act, _arg), status in snapshot.items():
        if act == action:
            grouped.setdefault(state, []).append(status)
    return {s: worst(v) or "trusted" for s, v in grouped.items()}


def edge_status(snapshot: Mapping[Key, str],
                action: str = "navigate_to") -> dict[frozenset[str], str]:
    """Status of corridor memories, both directions of a corridor merged."""
    grouped: dict[frozenset[str], list[str]] = {}
    for (state, act, arg), status in snapshot.items():
        if act == action and arg:
            grouped.setdefault(frozenset((state, arg)), []).append(status)
    return {e: worst(v) or "trusted" for e, v in grouped.items()}
