"""Answers to questions about memory, citing the entries they rest on (ROS-free).

The planner node answers the free-text requests of :mod:`glove_ros.core.plan.tasks` that are
questions, or that need memory to pick a goal, from experience memory *with its history*
(``query_memory`` with ``include_suppressed``): trusted entries are the evidence; suppressed
and replaced ones are named as such, with the verifier's reason (the explain trail), so a
person sees both what the robot believes and what it stopped believing and why.

* :func:`last_seen` -- where a colour or an object was last seen by a trusted look ("bring
  me to where you last saw the blue block", "where did you last see a suitcase?").
* :func:`is_there` -- yes / no / unknown for "is there a person in the kitchen?", from the
  last trusted look there (never a guess: no look there, no answer).
* :func:`corridor_status` -- open / blocked / unknown for the corridor between two
  waypoints, from trusted ``navigate_to`` entries in both directions.
* :func:`changes_since` -- what memory learned or stopped believing since a time.

Each returns an :class:`Answer`: one paragraph of text, the cited entry ids and the explain
trail (one line per suppressed or replaced entry that bears on the question).

A target is a colour (looks ``colors=blue,red``: "the red block") or an object class (looks
``objects=cup,person*2``: "the cup"), as ``kind`` says (:mod:`glove_ros.core.memory.looks`);
only looks of that kind speak about it, so a colour look never answers for a cup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from glove_ros.core.llm.prompts import age_text
from glove_ros.core.memory.looks import LOOK_KINDS, look_counts, look_kind

__all__ = ["Answer", "last_seen", "is_there", "corridor_status", "changes_since",
           "STATUS_NAMES"]

STATUS_NAMES = {0: "trusted", 1: "suppressed", 2: "replaced"}
_LOOK, _NAV = "look", "navigate_to"


@dataclass(frozen=True)
class Answer:
    """What the robot says, and what it rests on.

    ``value``: the machine-readable answer (a waypoint, "open" / "blocked" / "unknown", or
    a count); ``cited``: ids of the trusted entries behind it; ``explain``: one line per
    stale entry that bears on the question (suppressed / replaced, with the reason).
    """

    text: str
    value: str
    cited: tuple[int, ...] = ()
    explain: tuple[str, ...] = ()


def _counts(outcome: str, kind: str) -> dict[str, int]:
    """Name -> count of a look outcome of ``kind``; {} for another kind or a bad outcome."""
    if look_kind(outcome) != kind:
        return {}
    try:
        return look_counts(outcome)
    except ValueError:
        return {}


def _noun(target: str, kind: str) -> str:
    if kind not in LOOK_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LOOK_KINDS)}, got {kind!r}")
    return f"{target} block" if kind == "colors" else target


def _trail(e: Any, now: float) -> str:
    t = e.transition
    what = (f"look at {t.state_key} saw {t.outcome.split('=', 1)[-1] or 'nothing'}"
            if t.action == _LOOK else f"{t.state_key} -> {t.action_arg}: {t.outcome}")
    when = age_text(now - (e.valid_until or e.valid_from))
    by = f", replaced by #{e.replaced_by}" if getattr(e, "replaced_by", None) else ""
    return (f"#{e.id} ({what}) {STATUS_NAMES.get(int(e.status), '?')} {when}: "
            f"{e.reason or 'no reason recorded'}{by}")


def _ids(es: Iterable[Any], k: int = 5) -> tuple[int, ...]:
    return tuple(sorted((int(e.id) for e in es), reverse=True)[:k])


def _cite(ids: Sequence[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


def last_seen(colour: str, entries: Iterable[Any], now: float, *, kind: str = "colors"
              ) -> Answer:
    """Where ``colour`` (a colour, or with ``kind="objects"`` an object class) was last seen
    by a trusted look (newest wins); stale looks that saw it elsewhere go to the explain
    trail and are never cited."""
    noun = _noun(colour, kind)
    looks = [e for e in entries if e.transition.action == _LOOK
             and colour in _counts(e.transition.outcome, kind)]
    trusted = [e for e in looks if int(e.status) == 0]
    stale = [e for e in looks if int(e.status) != 0]
    trail = tuple(_trail(e, now) for e in sorted(stale, key=lambda e: -e.id)[:5])
    if not trusted:
        extra = (" Memories that saw it were suppressed as stale (see the explain trail)."
                 if stale else "")
        return Answer(f"I have no trusted memory of the {noun}.{extra}", "", (), trail)
    newest = max(trusted, key=lambda e: (e.valid_from, e.id))
    wp = newest.transition.state_key
    same = [e for e in trusted if e.transition.state_key == wp]
    text = (f"I last saw the {noun} at {wp} {age_text(now - newest.valid_from)} "
            f"({len(same)} trusted look{'s' if len(same) != 1 else ''}: {_cite(_ids(same))}).")
    if stale:
        text += f" {len(stale)} older look(s) of it are no longer trusted (explain trail)."
    return Answer(text, wp, _ids(same), trail)


def is_there(target: str, place: str, entries: Iterable[Any], now: float, *,
             kind: str = "colors") -> Answer:
    """Is ``target`` at ``place``? From the newest trusted look there of ``kind``:

    * ``yes``: that look saw it (with when, and how many when it saw several);
    * ``no``: that look did not show it (an earlier trusted sighting there is mentioned);
    * ``unknown``: no trusted look of that kind there: never looked, the looks there were
      suppressed as stale (explain trail), or they saw only the other kind.

    The answer cites the one look it rests on; suppressed and replaced looks are never cited.
    """
    noun = _noun(target, kind)
    here = [e for e in entries if e.transition.action == _LOOK
            and e.transition.state_key == place]
    looks = [e for e in here if look_kind(e.transition.outcome) == kind]
    trusted = [e for e in looks if int(e.status) == 0]
    stale = [e for e in looks if int(e.status) != 0]
    trail = tuple(_trail(e, now) for e in sorted(stale, key=lambda e: -e.id)[:5])
    if not trusted:
        if stale:
            text = (f"I do not know whether the {noun} is at {place}: my {len(stale)} look(s) "
                    "there are no longer trusted (explain trail).")
        elif here:
            text = (f"I do not know whether the {noun} is at {place}: my looks there recorded "
                    f"{'objects' if kind == 'colors' else 'colour blocks'} only.")
        else:
            text = f"I do not know: I have not looked at {place}."
        return Answer(text, "unknown", (), trail)
    newest = max(trusted, key=lambda e: (e.valid_from, e.id))
    age = age_text(now - newest.valid_from)
    n = _counts(newest.transition.outcome, kind).get(target, 0)
    if n:
        text = (f"Yes: my last look at {place}, {age} (#{newest.id}), saw the {noun}"
                f"{f' ({n} of them)' if n > 1 else ''}.")
    else:
        text = f"No: my last look at {place}, {age} (#{newest.id}), did not show the {noun}."
        before = [e for e in trusted if target in _counts(e.transition.outcome, kind)]
        if before:
            last = max(before, key=lambda e: (e.valid_from, e.id))
            text += f" I saw it there before, {age_text(now - last.valid_from)} (#{last.id})."
    if stale:
        text += f" {len(stale)} older look(s) there are no longer trusted (explain trail)."
    return Answer(text, "yes" if n else "no", (int(newest.id),), trail)


def corridor_status(a: str, b: str, entries: Iterable[Any], now: float) -> Answer:
    """Open / blocked / unknown for the corridor a-b from trusted navigations both ways.

    Blocked when every trusted navigation of it is ``blocked``, open when the newest
    trusted one reached the other end, unknown when there is none."""
    navs = [e for e in entries if e.transition.action == _NAV
            and {e.transition.state_key, e.transition.action_arg} == {a, b}
            and e.transition.outcome in ("reached", "blocked")]
    trusted = [e for e in navs if int(e.status) == 0]
    stale = [e for e in navs if int(e.status) != 0]
    trail = tuple(_trail(e, now) for e in sorted(stale, key=lambda e: -e.id)[:5])
    if not trusted:
        text = f"I do not know whether the corridor between {a} and {b} is open: no trusted memory."
        if stale:
            text += " Older memories of it are no longer trusted (explain trail)."
        return Answer(text, "unknown", (), trail)
    newest = max(trusted, key=lambda e: (e.valid_from, e.id))
    blocked = [e for e in trusted if e.transition.outcome == "blocked"]
    value = "blocked" if len(blocked) == len(trusted) else (
        "open" if newest.transition.outcome == "reached" else "blocked")
    text = (f"The corridor between {a} and {b} is {value}: {len(trusted)} trusted "
            f"navigation(s), {len(blocked)} blocked, newest {age_text(now - newest.valid_from)}"
            f" ({_cite(_ids(trusted))}).")
    if stale:
        text += f" {len(stale)} older memory(ies) of it were set aside (explain trail)."
    return Answer(text, value, _ids(trusted), trail)


def changes_since(since: float, entries: Iterable[Any], now: float, *,
                  asked_s: float | None = None) -> Answer:
    """What memory recorded, suppressed or replaced after ``since`` (same clock as the
    entries' ``valid_from``); suppressed / replaced entries are listed in the explain trail.
    ``asked_s``: the span the person asked for, in wall-clock seconds, named in the answer
    (the node's clock may run faster than the wall, so ``now - since`` is not what they
    said)."""
    items = list(entries)
    new = [e for e in items if e.valid_from >= since]
    gone = [e for e in items if int(e.status) != 0 and e.valid_until is not None
            and e.valid_until >= since]
    looks = sorted({e.transition.state_key for e in new if e.transition.action == _LOOK})
    if asked_s is not None and asked_s > 0:
        span = age_text(asked_s).removesuffix(" ago")
    else:
        span = age_text(now - since).removesuffix(" ago") if since > 0 else "the start"
    ago = since > 0 or (asked_s is not None and asked_s > 0)
    text = (f"Since {span}{' ago' if ago else ''}: {len(new)} new memories"
            f"{' (looks at ' + ', '.join(looks) + ')' if looks else ''}; "
            f"{len(gone)} memories stopped being trusted.")
    if gone:
        places = sorted({e.transition.state_key for e in gone})
        text += " Changes at: " + ", ".join(places) + " (explain trail)."
    trail = tuple(_trail(e, now) for e in sorted(gone, key=lambda e: -e.id)[:8])
    return Answer(text, str(len(gone)), _ids(new, 8), trail)
