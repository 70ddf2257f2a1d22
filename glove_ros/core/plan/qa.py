"""Questions answered from verified memory, citing the entries they rest on (ROS-free).

The robot does not move to answer these; it reads experience memory *with its history*
(entries trusted, suppressed or replaced, each with the verifier's reason and times):

* ``where`` / ``when`` -- where / when did you last see X;
* ``still_at`` -- is X still at Y (yes / no / unknown);
* ``what_at`` -- what is at Y;
* ``changes`` -- what changed since T, or at Y since the visit before the last;
* ``corridors`` -- which corridors are closed;
* ``how_sure`` -- how sure are you of where X is (high / medium / low / none).

Three separately testable pieces:

1. :func:`retrieve` turns entries into a compact list of :class:`Fact` s, *resolving
   staleness before anyone reads it*: per (place, action) the current belief (the most
   supported outcome among trusted entries, ties to the newest) is one NOW fact, other
   trusted outcomes are ALSO facts (a minority: often a missed detection), and entries the
   verifier stopped trusting whose outcome differs from the belief are OLD facts, with the
   time a later observation first contradicted them and the verifier's reason ("previously X,
   contradicted at T"). Only facts that bear on the question are kept, current ones first.
2. :class:`TemplateAnswerer` answers from the facts by rule (the baseline and the fallback).
3. :class:`LlmAnswerer` asks a :class:`~glove_ros.core.llm.runtime.JsonLlm` for
   ``{"v": value, "c": [item numbers]}`` under a JSON-schema grammar (short keys: the reply
   is about 11 tokens). The model reads the facts as :func:`items`: one numbered line per
   place or corridor, its current state first (``NOW``) and the contradicted history as a
   clause after it ("changed T ago; before that: X"), so an old state is never a line of
   its own that reads like a current one. The LLM decides the value and which items it
   rests on (mapped back to entry ids); the grammar offers only values that current facts
   hold (:func:`value_choices`: where a current fact answers, neither history nor
   ``unknown`` is a candidate). List answers are sets picked from enumerated items
   (:func:`item_choices`): "which corridors are closed" from the corridors with a current
   state, "what changed" from the things that changed. The rules decide the rest: the
   contradicted history is cited and the answer stated stale when verified memory holds OLD
   facts about the question (:func:`is_stale`), and the sentence is built from the value
   and citations (:func:`_say`). A reply that fails the schema, times out, or names a value
   or item not offered is rejected and the template answers instead (``error`` says why;
   the answer's ``source`` is then ``template``). The rules and examples,
   :mod:`glove_ros.core.plan.qa_prompt`, are the same for every question (a prefix
   llama.cpp evaluates once); the question's items come last (:func:`question_text`).

Both return a :class:`QaAnswer`: text, machine-readable value, cited ids, stale flag, source
(``llm`` / ``template``), latency and tokens. Objects are what looks record: colours in
``colors=a,b`` outcomes or object classes in ``objects=cup,person*2`` ones, counts dropped
(:mod:`glove_ros.core.memory.looks`); ``labels`` maps them to what a person calls them ("red
kettle").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from glove_ros.core.llm.prompts import age_text
from glove_ros.core.memory.looks import is_look_signature, look_names
from glove_ros.core.plan.qa_prompt import EXAMPLES, PROMPT_SHA256, SYSTEM_PROMPT

__all__ = ["KINDS", "Question", "Fact", "Retrieved", "QaAnswer", "Answerer", "retrieve",
           "TemplateAnswerer", "LlmAnswerer", "Item", "items", "item_choices",
           "answer_schema", "answer_messages", "value_choices", "question_text", "is_stale",
           "corridor_label", "answer", "PROMPT_SHA256", "SYSTEM_PROMPT"]

KINDS = ("where", "when", "still_at", "what_at", "changes", "corridors", "how_sure")
_OBJECT_KINDS = ("where", "when", "still_at", "how_sure")
_PLACE_KINDS = ("still_at", "what_at")
_LIST_KINDS = ("what_at", "changes", "corridors")
_LOOK, _NAV = "look", "navigate_to"
_TRUSTED = 0
NOTHING, UNKNOWN = "nothing", "unknown"


@dataclass(frozen=True)
class Question:
    """A question in structured form: ``kind`` (:data:`KINDS`), the object ``obj`` as memory
    records it, a ``place``, ``since`` (``changes``: seconds on the entries' clock; None with a
    place = since the visit before the last, None without = since the start) and the
    person's words ``text``."""

    kind: str
    obj: str = ""
    place: str = ""
    since: float | None = None
    text: str = ""

    def validate(self) -> Question:
        """Raise ValueError naming what the kind needs; return ``self``."""
        if self.kind not in KINDS:
            raise ValueError(f"unknown question kind {self.kind!r}; one of {', '.join(KINDS)}")
        if self.kind in _OBJECT_KINDS and not self.obj:
            raise ValueError(f"a {self.kind} question needs an object (obj)")
        if self.kind in _PLACE_KINDS and not self.place:
            raise ValueError(f"a {self.kind} question needs a place")
        return self


def corridor_label(a: str, b: str) -> str:
    """``"a-b"`` with the ends sorted (one label per corridor, both directions)."""
    return "-".join(sorted((a, b)))


@dataclass(frozen=True)
class Fact:
    """One line of retrieved memory: a group of entries with one key and one outcome.

    ``ref`` is the id a citation names (the group's newest entry); ``current`` marks the
    belief, else the group is contradicted history with ``stale_at`` (when the verifier
    stopped trusting it) and ``reason``. For looks ``objects`` is what was seen at ``place``;
    for corridors (``action`` navigate_to) ``place``-``other`` was ``open`` or ``closed``.
    ``support`` / ``of``: entries agreeing / trusted entries of the key (current facts).
    """

    ref: int
    ids: tuple[int, ...]
    action: str
    place: str
    objects: tuple[str, ...] = ()
    other: str = ""
    state: str = ""
    current: bool = True
    seen: float = 0.0
    stale_at: float | None = None
    reason: str = ""
    support: int = 1
    of: int = 1
    minority: bool = False

    @property
    def belief(self) -> bool:
        """The current belief of its key (not a minority of trusted entries, not history)."""
        return self.current and not self.minority

    @property
    def corridor(self) -> str:
        """The corridor label (navigate_to facts)."""
        return corridor_label(self.place, self.other)

    def line(self, now: float, label: Mapping[str, str], obj: str = "",
             num: int | None = None) -> str:
        """The fact as the model reads it, numbered ``num`` (default: its entry id);
        ``obj``: the object asked about (a current look that did not see it says so; history
        does not, so that "no X" is only ever said of the present)."""
        if self.action == _LOOK:
            what = ", ".join(label.get(o, o) for o in self.objects) or "nothing"
            if obj and obj not in self.objects and self.belief:
                what += f", no {label.get(obj, obj)}"
            head = f"{self.place}{':' if self.belief else ' had:'} {what}"
        else:
            head = f"corridor {self.corridor} {'is' if self.belief else 'was'} {self.state}"
        n = self.ref if num is None else num
        age = age_text(now - self.seen)
        if self.minority:
            return f"#{n} ALSO {head} ({age}; only {self.support}/{self.of} looks)"
        if self.current:
            return f"#{n} NOW {head} ({age}; {self.support}/{self.of} looks)"
        return (f"#{n} OLD {head} ({age}; no longer true since "
                f"{age_text(now - (self.stale_at or now))})")


@dataclass(frozen=True)
class Retrieved:
    """The facts for one question: current first (newest first), then history."""

    question: Question
    facts: tuple[Fact, ...]
    now: float
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def ids(self) -> tuple[int, ...]:
        """Ids a citation may name."""
        return tuple(f.ref for f in self.facts)

    def label(self, obj: str) -> str:
        """What a person calls ``obj``."""
        return self.labels.get(obj, obj)

    @property
    def stale_ids(self) -> frozenset[int]:
        """Ids of the contradicted (OLD) facts."""
        return frozenset(f.ref for f in self.facts if not f.current)

    def text(self, numbered: bool = False) -> str:
        """The fact list, one line each; ``numbered``: facts named 1..n (what the model
        cites) instead of by entry id."""
        return "\n".join(f.line(self.now, self.labels, self.question.obj,
                                i + 1 if numbered else None)
                         for i, f in enumerate(self.facts)) or "(no memory)"


@dataclass(frozen=True)
class QaAnswer:
    """What the robot says and what it rests on. ``value`` is machine-readable: a place,
    ``yes`` / ``no``, an age ("3 min ago"), a comma-joined sorted list, ``nothing`` or
    ``unknown``; ``error``: why an LLM reply was not used (the template answered)."""

    question: Question
    text: str
    value: str
    cited: tuple[int, ...]
    stale: bool
    source: str
    latency_s: float = 0.0
    tokens: int = 0
    prompt_tokens: int = 0
    error: str | None = None
    prompt_eval_tokens: int = 0
    prompt_eval_s: float = 0.0
    gen_s: float = 0.0


class Answerer(Protocol):
    """Turns retrieved facts into an answer."""

    def answer(self, retrieved: Retrieved) -> QaAnswer:
        """Answer ``retrieved.question`` from ``retrieved.facts``."""
        ...


# --------------------------------------------------------------------------------------------
# retrieval


def _objects(outcome: str) -> tuple[str, ...] | None:
    if not is_look_signature(outcome):
        return None
    try:
        return tuple(sorted(look_names(outcome)))
    except ValueError:  # a malformed count: not a look this can read
        return None


_NAV_STATE = {"reached": "open", "blocked": "closed"}


def _groups(entries: Iterable[Any], weights: Mapping[int, float] | None
            ) -> dict[tuple[str, str, str], list[tuple[Any, Any]]]:
    """(action, place, other) -> [(entry, parsed outcome)]; corridors keyed by both ends."""
    out: dict[tuple[str, str, str], list[tuple[Any, Any]]] = {}
    for e in entries:
        t = e.transition
        if weights is not None and int(e.status) == _TRUSTED and weights.get(int(e.id), 1) <= 0:
            continue
        if t.action == _LOOK:
            objs = _objects(t.outcome)
            if objs is not None:
                out.setdefault((_LOOK, t.state_key, ""), []).append((e, objs))
        elif t.action == _NAV and t.outcome in _NAV_STATE and t.action_arg:
            a, b = sorted((t.state_key, t.action_arg))
            out.setdefault((_NAV, a, b), []).append((e, _NAV_STATE[t.outcome]))
    return out


def _key_facts(key: tuple[str, str, str], items: list[tuple[Any, Any]],
               weights: Mapping[int, float] | None) -> list[Fact]:
    action, place, other = key
    trusted = [(e, o) for e, o in items if int(e.status) == _TRUSTED]
    score: dict[Any, tuple[float, float]] = {}
    for e, o in trusted:
        w = 1.0 if weights is None else float(weights.get(int(e.id), 1.0))
        s, newest = score.get(o, (0.0, 0.0))
        score[o] = (s + w, max(newest, e.valid_from))
    belief = max(score, key=lambda o: score[o]) if score else None

    def fact(group: list[Any], o: Any, current: bool, minority: bool = False) -> Fact:
        group = sorted(group, key=lambda e: (e.valid_from, e.id), reverse=True)
        top = group[0]
        kw: dict[str, Any] = ({"objects": o} if action == _LOOK else {"other": other, "state": o})
        if current:
            return Fact(int(top.id), tuple(int(e.id) for e in group), action, place,
                        seen=top.valid_from, support=len(group), of=len(trusted),
                        minority=minority, **kw)
        # contradicted at the first later observation of the key that saw something else
        later = [e.valid_from for e, x in items if x != o and e.valid_from > top.valid_from]
        until = min(later, default=None)
        if until is None:
            until = max((e.valid_until for e in group if e.valid_until is not None),
                        default=None)
        return Fact(int(top.id), tuple(int(e.id) for e in group), action, place, current=False,
                    seen=top.valid_from, stale_at=until, reason=str(top.reason or ""), **kw)

    facts = []
    if belief is not None:
        facts.append(fact([e for e, o in trusted if o == belief], belief, True))
        for o in sorted({o for _, o in trusted} - {belief}, key=str):
            facts.append(fact([e for e, x in trusted if x == o], o, True, minority=True))
    stale: dict[Any, list[Any]] = {}
    for e, o in items:
        if int(e.status) != _TRUSTED and o != belief:
            stale.setdefault(o, []).append(e)
    facts += [fact(g, o, False) for o, g in stale.items()]
    return facts


def _visit_before_last(items: list[tuple[Any, Any]]) -> float:
    times = sorted({e.valid_from for e, _ in items}, reverse=True)
    return times[1] if len(times) > 1 else 0.0


def retrieve(question: Question, entries: Iterable[Any], now: float, *,
             labels: Mapping[str, str] | None = None,
             weights: Mapping[int, float] | None = None, max_facts: int = 8) -> Retrieved:
    """The facts that bear on ``question`` (see the module docstring).

    ``entries``: :class:`~glove_ros.core.memory.experience.MemoryEntry` objects with history
    (``include_suppressed``); ``now`` on their clock; ``weights``: optional weight per
    trusted entry id (a recency-weighted rule; 0 hides it); at most ``max_facts`` facts.
    """
    q = question.validate()
    if max_facts < 1:
        raise ValueError(f"max_facts must be >= 1, got {max_facts}")
    groups = _groups(entries, weights)
    keyed = {k: _key_facts(k, v, weights) for k, v in groups.items()}
    picked: list[Fact] = []

    def flips(fs: list[Fact], seen: bool = False) -> list[Fact]:
        """The belief, and the other facts that disagree with it about the object (only
        those that saw it with ``seen``)."""
        has = next((q.obj in f.objects for f in fs if f.belief), None)
        return [f for f in fs if f.belief or ((q.obj in f.objects) != has
                                              and (q.obj in f.objects or not seen))]

    if q.kind in _OBJECT_KINDS and q.kind != "still_at":
        for (action, _p, _o), fs in keyed.items():
            if action == _LOOK and any(q.obj in f.objects for f in fs):
                picked += flips(fs, seen=True)
    elif q.kind == "still_at":  # the belief and its history; a minority (often a missed
        # detection) does not change the answer and misled the model into "no"
        picked = [f for f in flips(keyed.get((_LOOK, q.place, ""), [])) if not f.minority]
    elif q.kind == "what_at":
        picked = list(keyed.get((_LOOK, q.place, ""), []))
    elif q.kind == "corridors":
        navs = [g for (a, _p, _o), g in keyed.items() if a == _NAV]
        picked = [f for g in navs if any(not f.belief or f.state == "closed" for f in g)
                  for f in g]  # corridors closed now or ever changed, with their belief
        picked += sorted((f for g in navs for f in g if f not in picked),
                         key=lambda f: -f.seen)[:max(0, 2 - len(picked))]
    else:  # changes
        since = q.since
        if since is None and q.place:
            since = _visit_before_last(groups.get((_LOOK, q.place, ""), []))
        since = since or 0.0
        for (action, p, _o), fs in keyed.items():
            if q.place and (action != _LOOK or p != q.place):
                continue
            if any(not f.current and (f.stale_at or 0.0) >= since for f in fs):
                picked += [f for f in fs if f.belief or (f.stale_at or 0.0) >= since]
    cur = sorted((f for f in picked if f.current),
                 key=lambda f: (f.minority, bool(q.obj) and q.obj not in f.objects, -f.seen,
                                -f.ref))
    old = sorted((f for f in picked if not f.current),
                 key=lambda f: (-(f.stale_at or 0.0), -f.seen, -f.ref))
    if q.kind == "corridors":  # what the answer needs first: closed, then changed ones
        closed = [f for f in cur if f.belief and f.state == "closed"]
        order = closed + old + [f for f in cur if f not in closed]
    elif q.kind == "changes":
        order = old + cur
    else:
        order = cur + old
    return Retrieved(q, tuple(order[:max_facts]), float(now), dict(labels or {}))


# --------------------------------------------------------------------------------------------
# the template answerer


def _join(items: Iterable[str]) -> str:
    xs = sorted(set(items))
    return ",".join(xs) if xs else NOTHING


def _says(f: Fact, obj: str) -> bool:
    return obj in f.objects


class TemplateAnswerer:
    """Answers from the facts by rule: the baseline, and the fallback of the LLM."""

    def answer(self, r: Retrieved) -> QaAnswer:
        """See :class:`Answerer`."""
        t0 = time.perf_counter()
        value, stale, cited, text = getattr(self, "_" + r.question.kind)(r)
        return QaAnswer(r.question, text, value, tuple(dict.fromkeys(cited))[:4], stale,
                        "template", time.perf_counter() - t0)

    @staticmethod
    def _sighting(r: Retrieved) -> tuple[Fact | None, list[Fact]]:
        """The newest fact that saw the object (current preferred) and the contradicted
        sightings at places whose current belief lacks it."""
        obj = r.question.obj
        now_has = {f.place for f in r.facts if f.belief and _says(f, obj)}
        cur = [f for f in r.facts if f.belief and _says(f, obj)]
        refuted = [f for f in r.facts if not f.current and _says(f, obj)
                   and f.place not in now_has]
        best = max(cur, key=lambda f: f.seen) if cur else (
            max(refuted, key=lambda f: f.seen) if refuted else None)
        return best, refuted

    def _where(self, r: Retrieved, when: bool = False) -> tuple[str, bool, list[int], str]:
        best, refuted = self._sighting(r)
        name = r.label(r.question.obj)
        if best is None:
            return UNKNOWN, False, [], f"I have no memory of seeing the {name}."
        age = age_text(r.now - best.seen)
        value = age if when else best.place
        if best.belief:
            text = f"I last saw the {name} at {best.place} {age} (#{best.ref})."
            if refuted:
                old = refuted[0]
                text += (f" Previously it was at {old.place} (#{old.ref}), no longer "
                         "true there.")
            return value, bool(refuted), [best.ref] + [f.ref for f in refuted[:2]], text
        now_at = next((f for f in r.facts if f.belief and f.place == best.place), None)
        text = (f"I last saw the {name} at {best.place} {age} (#{best.ref}), but that memory "
                f"was contradicted {age_text(r.now - (best.stale_at or r.now))}: it is no "
                "longer there and I do not know where it is now.")
        return value, True, [best.ref] + ([now_at.ref] if now_at else []), text

    def _when(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        return self._where(r, when=True)

    def _still_at(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        q = r.question
        name = r.label(q.obj)
        cur = next((f for f in r.facts if f.belief), None)
        if cur is None:
            return UNKNOWN, False, [], f"I have no memory of looking at {q.place}."
        has = _says(cur, q.obj)
        flipped = [f for f in r.facts if not f.current and _says(f, q.obj) != has]
        age = age_text(r.now - cur.seen)
        text = (f"Yes, the {name} is at {q.place} (last seen {age}, #{cur.ref})." if has else
                f"No, the {name} is not at {q.place} (looked {age}, #{cur.ref}).")
        if flipped:
            text += (f" Earlier memory said it was{'' if not has else ' not'} there "
                     f"(#{flipped[0].ref}), contradicted since.")
        return ("yes" if has else "no"), bool(flipped), [cur.ref] + [f.ref for f in flipped[:2]], \
            text

    def _what_at(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        q = r.question
        cur = next((f for f in r.facts if f.belief), None)
        if cur is None:
            return UNKNOWN, False, [], f"I have no memory of looking at {q.place}."
        old = [f for f in r.facts if not f.current]
        what = ", ".join(r.label(o) for o in cur.objects) or "nothing"
        text = f"At {q.place} I saw {what} ({age_text(r.now - cur.seen)}, #{cur.ref})."
        if old:
            before = ", ".join(r.label(o) for o in old[0].objects) or "nothing"
            text += f" Previously I saw {before} there (#{old[0].ref}), no longer true."
        return _join(cur.objects), bool(old), [cur.ref] + [f.ref for f in old[:2]], text

    def _changes(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        old = [f for f in r.facts if not f.current]
        where = [f.place if f.action == _LOOK else f.corridor for f in old]
        if not old:
            return NOTHING, False, [f.ref for f in r.facts[:1]], \
                "Nothing I remember has been contradicted in that time."
        text = ("These changed: " + "; ".join(
            f"{w} (was {self._state(r, f)}, #{f.ref})" for w, f in zip(where, old, strict=True)
        ) + ".")
        return _join(where), True, [f.ref for f in old], text

    def _corridors(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        closed = [f for f in r.facts if f.belief and f.state == "closed"]
        changed = [f for f in r.facts if not f.current]
        if not any(f.belief for f in r.facts):
            return UNKNOWN, False, [], "I have no memory of any corridor."
        text = ("Closed: " + ", ".join(f"{f.corridor} (#{f.ref})" for f in closed) + "."
                if closed else "No corridor I know of is closed.")
        if changed:
            text += " Changed: " + ", ".join(f"{f.corridor} was {f.state}" for f in changed) + "."
        cited = [f.ref for f in closed] or [next(f.ref for f in r.facts if f.belief)]
        return _join(f.corridor for f in closed), bool(changed), cited + \
            [f.ref for f in changed[:1]], text

    def _how_sure(self, r: Retrieved) -> tuple[str, bool, list[int], str]:
        best, refuted = self._sighting(r)
        name = r.label(r.question.obj)
        if best is None:
            return "none", False, [], f"I have no memory of the {name}."
        if not best.belief:
            return "low", True, [best.ref], (f"Not sure: my only sighting of the {name} "
                                             f"(#{best.ref}) was contradicted since.")
        level = "high" if best.support >= 2 and best.support == best.of and not refuted \
            else "medium"
        return level, bool(refuted), [best.ref], (
            f"{level.capitalize()}: {best.support} of {best.of} looks at {best.place} agree "
            f"(#{best.ref}){', and it was elsewhere before' if refuted else ''}.")

    @staticmethod
    def _state(r: Retrieved, f: Fact) -> str:
        if f.action == _LOOK:
            return ", ".join(r.label(o) for o in f.objects) or "empty"
        return f.state


# --------------------------------------------------------------------------------------------
# the LLM answerer


def _sees(r: Retrieved) -> list[Fact]:
    """Facts that saw the asked-about object: current beliefs, else any."""
    obj = r.question.obj
    return [f for f in r.facts if f.belief and _says(f, obj)] or [
        f for f in r.facts if _says(f, obj)]


@dataclass(frozen=True)
class Item:
    """One thing as the model reads it: a place's looks or a corridor, its current belief
    ``now`` first, then the trusted looks that disagree (``also``) and the contradicted
    history (``old``, newest contradiction first). Retrieval has already decided which is
    which; one line per thing means a contradicted state is never a line of its own that
    reads like a current one ("previously X, contradicted at T" is a clause of the current
    line)."""

    now: Fact | None
    also: tuple[Fact, ...] = ()
    old: tuple[Fact, ...] = ()

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Its facts: the belief, the minority, the history."""
        return ((self.now,) if self.now is not None else ()) + self.also + self.old

    @property
    def name(self) -> str:
        """The place, or the corridor's label."""
        f = self.facts[0]
        return f.place if f.action == _LOOK else f.corridor

    @property
    def ref(self) -> int:
        """The entry id a citation of the item names: the belief's, else the newest history's."""
        return self.facts[0].ref

    def line(self, n: int, now: float, label: Mapping[str, str], obj: str = "",
             status: bool = False) -> str:
        """The item as the model reads it, numbered ``n``: ``#n NAME NOW: state (age; n/m
        looks)``, then ``; changed T ago; before that: X`` per contradicted state (a
        corridor's: ``; closed T ago`` / ``; re-opened T ago``).
        ``obj``: the object asked about; a current look without it says ``no X``, or with
        ``status`` (is X still at Y) the object's current presence is its own clause,
        ``X: there now`` / ``X: NOT there now``, ahead of the history."""
        def state(f: Fact) -> str:
            if f.action == _LOOK:
                return ", ".join(label.get(o, o) for o in f.objects) or "nothing"
            return f.state

        head = f"#{n} {'corridor ' if self.facts[0].action == _NAV else ''}{self.name} NOW: "
        if self.now is None:
            text = head + "not known"
        else:
            what = state(self.now)
            look = bool(obj) and self.now.action == _LOOK
            if look and not status and obj not in self.now.objects:
                what += f", no {label.get(obj, obj)}"
            text = head + (f"{what} ({age_text(now - self.now.seen)}; "
                           f"{self.now.support}/{self.now.of} looks)")
            if look and status:
                text += (f"; {label.get(obj, obj)}: "
                         f"{'there' if obj in self.now.objects else 'NOT there'} now")
        for f in self.also:
            text += f"; only {f.support}/{f.of} looks: {state(f)}"
        for f in self.old[:2]:
            ago = age_text(now - (f.stale_at or now))
            if f.action == _NAV and self.now is not None:  # the change as an event: a
                # re-opened corridor's line never says "closed"
                text += f"; {'re-opened' if f.state == 'closed' else 'closed'} {ago}"
            elif f.action == _NAV:
                text += f"; was {f.state} until {ago}"
            else:
                text += f"; changed {ago}; before that: {state(f)}"
        return text


def items(r: Retrieved) -> tuple[Item, ...]:
    """The retrieved facts as the model reads them: one :class:`Item` per place or corridor,
    in the order retrieval put their first fact (current first; changes first for
    ``changes``)."""
    keyed: dict[tuple[str, str, str], list[Fact]] = {}
    for f in r.facts:
        keyed.setdefault((f.action, f.place, f.other), []).append(f)
    out = []
    for fs in keyed.values():
        now = next((f for f in fs if f.belief), None)
        out.append(Item(now, tuple(f for f in fs if f.minority),
                        tuple(sorted((f for f in fs if not f.current),
                                     key=lambda f: (-(f.stale_at or 0.0), -f.seen)))))
    return tuple(out)


#: list questions answered by picking items (their numbers): which corridors are closed
#: (among the corridors with a current state), what changed (among the changed things)
_ITEM_KINDS = ("changes", "corridors")


def item_choices(r: Retrieved) -> dict[int, str]:
    """Item number -> name, for the kinds whose answer is a set of items: only corridors
    with a current state are candidates for "closed" (a re-opened corridor is one item,
    open NOW, with its closed past as a clause), and only things that changed for "what
    changed"."""
    its = items(r)
    if r.question.kind == "corridors":
        keep = [i for i, it in enumerate(its) if it.now is not None
                and it.now.action == _NAV]
    else:
        keep = [i for i, it in enumerate(its) if it.old]
    return {i + 1: its[i].name for i in keep}


def value_choices(r: Retrieved) -> dict[str, str]:
    """Allowed values shown to the model -> the canonical value they stand for. Where a
    current fact answers, neither contradicted history nor ``unknown`` (``none``) is a
    candidate for what is true now. For ``changes`` / ``corridors`` the model picks item
    numbers (:func:`item_choices`); this maps their names."""
    q = r.question
    has_belief = any(f.belief for f in r.facts)
    if q.kind in ("where", "when"):
        seen = _sees(r)
        out = {(f.place if q.kind == "where" else age_text(r.now - f.seen)): "" for f in seen}
        known = any(f.belief for f in seen)
    elif q.kind == "still_at":
        out, known = {"yes": "", "no": ""}, has_belief
    elif q.kind == "how_sure":
        known = bool(_sees(r))
        out = {v: "" for v in ("high", "medium", "low")} if known else {"none": ""}
    elif q.kind == "what_at":
        return {r.label(o): o for f in r.facts if f.current for o in f.objects}
    else:
        return {k: k for k in sorted(set(item_choices(r).values()))}
    if not known:
        out[UNKNOWN] = ""
    return {k: k for k in out}


def answer_schema(r: Retrieved) -> dict[str, Any]:
    """The reply's JSON schema, short keys to keep the reply short: ``v`` (the value, from
    :func:`value_choices`; a list for what_at; a list of item numbers from
    :func:`item_choices` for changes / corridors) and ``c`` (the numbers 1..n of the items
    the answer rests on, as :func:`question_text` numbers them)."""
    kind = r.question.kind
    if kind in _ITEM_KINDS:
        nums = sorted(item_choices(r))
        value: dict[str, Any] = {"type": "array", "items": {"enum": nums},
                                 "maxItems": len(nums)} if nums else \
            {"type": "array", "items": {"type": "integer"}, "maxItems": 0}
    else:
        choices = sorted(value_choices(r))
        value = {"enum": choices}
        if kind in _LIST_KINDS:
            value = ({"type": "array", "items": value, "maxItems": len(choices)} if choices
                     else {"type": "array", "items": {"type": "string"}, "maxItems": 0})
    n = len(items(r))
    return {"type": "object", "properties": {
        "v": value,
        "c": {"type": "array", "items": {"enum": list(range(1, n + 1))}, "minItems": 1,
              "maxItems": min(3, n)}},
        "required": ["v", "c"], "additionalProperties": False}


def question_text(r: Retrieved) -> str:
    """The per-question part of the prompt (after the fixed rules and examples): the items
    (one line per place or corridor, current state first), question, choices."""
    q = r.question
    words = q.text or f"{q.kind} {r.label(q.obj) if q.obj else ''} {q.place}".strip()
    lines = "\n".join(it.line(i + 1, r.now, r.labels, q.obj, q.kind == "still_at")
                      for i, it in enumerate(items(r))) or "(no memory)"
    if q.kind in _ITEM_KINDS:
        nums = ", ".join(map(str, sorted(item_choices(r))))
        # retrieval kept only what changed in the asked time: the items say so (their
        # minute-rounded ages can read as the window's edge)
        shown = f"list of items {nums or '(none)'}" + (
            " (all changed in that time)" if q.kind == "changes" and nums else "") + \
            "; [] = nothing"
    else:
        shown = ", ".join(sorted(value_choices(r)))
        if q.kind in _LIST_KINDS:
            shown = f"list of {shown or '(none)'}; [] = nothing"
    return f"{lines}\nQ: {words}\nChoices: {shown}"


def answer_messages(r: Retrieved) -> list[dict[str, str]]:
    """System rules and examples first, identical for every question (llama.cpp reuses
    their KV cache), then this question's items (:func:`question_text`)."""
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}]
    for user, reply in EXAMPLES:
        msgs += [{"role": "user", "content": user},
                 {"role": "assistant", "content": json.dumps(reply, separators=(",", ":"))}]
    msgs.append({"role": "user", "content": question_text(r)})
    return msgs


def is_stale(r: Retrieved) -> bool:
    """The rule that states staleness: verified memory holds contradicted history (OLD
    facts) about what the question asks, which retrieval kept only where it bears on the
    answer (the object seen elsewhere before, the place's or corridor's earlier state). The
    model does not decide this; over never-verified memory there is no history, so an answer
    is never stale there."""
    return bool(r.stale_ids)


def _cite(r: Retrieved, picked: Sequence[int]) -> tuple[int, ...]:
    """The model's citations, then the contradicted history the answer states (at most 4)."""
    out = list(dict.fromkeys(picked))
    out += [f.ref for f in r.facts if not f.current and f.ref not in out]
    return tuple(out[:max(4, len(picked))])


def _say(r: Retrieved, value: str, cited: Sequence[int], stale: bool) -> str:
    """The sentence for an LLM answer: its value and citations in words."""
    q = r.question
    name = r.label(q.obj)
    by = {f.ref: f for f in r.facts}
    facts = [by[i] for i in cited]
    cur = next((f for f in facts if f.current), None)
    old = next((f for f in facts if not f.current), None)
    tag = f" (#{cur.ref})" if cur else ""
    if value in (UNKNOWN, "none"):
        text = f"I do not know{f' where the {name} is' if q.obj else ''}."
    elif q.kind in ("where", "when"):
        at = [f for f in r.facts if _says(f, q.obj) and value == (
            f.place if q.kind == "where" else age_text(r.now - f.seen))]
        f = next((f for f in at if f.belief), None) or (at or _sees(r))[0]
        text = f"I last saw the {name} at {f.place} {age_text(r.now - f.seen)} (#{f.ref})."
    elif q.kind == "still_at":
        text = f"{value.capitalize()}, the {name} is{'' if value == 'yes' else ' not'} at " \
               f"{q.place}{tag}."
    elif q.kind == "how_sure":
        text = f"{value.capitalize()} confidence about the {name}{tag}."
    elif q.kind == "what_at":
        items = ", ".join(r.label(o) for o in value.split(",")) if value != NOTHING \
            else "nothing"
        text = f"At {q.place}: {items}{tag}."
    elif q.kind == "changes":
        text = "Nothing changed that I know of." if value == NOTHING else \
            f"Changed: {value.replace(',', ', ')}."
    else:
        text = "No corridor I know of is closed." if value == NOTHING else \
            f"Closed: {value.replace(',', ', ')}{tag}."
    if stale and old is not None and q.kind != "changes":
        where = old.place if old.action == _LOOK else f"corridor {old.corridor}"
        text += (f" Earlier memory of {where} (#{old.ref}) is no longer true "
                 f"(contradicted {age_text(r.now - (old.stale_at or r.now))}).")
    elif stale and q.kind != "changes":
        text += " Earlier memory about it was contradicted since."
    return text


class LlmAnswerer:
    """The LLM picks the value and the facts it rests on under the grammar of
    :func:`answer_schema`; the rules add the contradicted history to the citations
    (:func:`_cite`), state staleness (:func:`is_stale`) and word the answer (:func:`_say`).
    The template answers when there is nothing to cite or the reply is unusable."""

    def __init__(self, llm: Any, *, fallback: TemplateAnswerer | None = None,
                 max_tokens: int = 48) -> None:
        if max_tokens < 16:
            raise ValueError(f"max_tokens must be >= 16, got {max_tokens}")
        self.llm = llm
        self.fallback = fallback or TemplateAnswerer()
        self.max_tokens = max_tokens

    def answer(self, r: Retrieved) -> QaAnswer:
        """See :class:`Answerer`."""
        if not r.facts:
            return self._fall(r, "no facts to cite", None)
        res = self.llm.complete_json(answer_messages(r), answer_schema(r),
                                     max_tokens=self.max_tokens)
        if not res.ok or not isinstance(res.data, dict):
            return self._fall(r, res.error or "no reply", res)
        d = res.data
        its = items(r)
        nums = [i for i in d.get("c", []) if isinstance(i, int) and not isinstance(i, bool)]
        bad = [i for i in nums if not 1 <= i <= len(its)]
        if bad or not nums:
            return self._fall(r, f"cited items not retrieved: {bad or 'none'}", res)
        cited = _cite(r, [its[i - 1].ref for i in nums])
        raw = d.get("v")
        picked = raw if isinstance(raw, list) else [raw]
        if r.question.kind in _ITEM_KINDS:
            choices: Mapping[Any, str] = item_choices(r)
            ok = all(isinstance(v, int) and not isinstance(v, bool) for v in picked)
        else:
            choices = value_choices(r)
            ok = all(isinstance(v, str) for v in picked)
        if not ok or any(v not in choices for v in picked):
            return self._fall(r, f"value {raw!r} not among the allowed values", res)
        value = (_join(choices[v] for v in picked) if r.question.kind in _LIST_KINDS
                 else choices[picked[0]])
        stale = is_stale(r)
        return QaAnswer(r.question, _say(r, value, cited, stale), value, cited, stale, "llm",
                        res.elapsed_s, res.tokens, res.prompt_tokens, None,
                        *_evals(res))

    def _fall(self, r: Retrieved, why: str, res: Any) -> QaAnswer:
        a = self.fallback.answer(r)
        return QaAnswer(a.question, a.text, a.value, a.cited, a.stale, "template",
                        float(getattr(res, "elapsed_s", 0.0)) + a.latency_s,
                        int(getattr(res, "tokens", 0)), int(getattr(res, "prompt_tokens", 0)),
                        why, *_evals(res))


def _evals(res: Any) -> tuple[int, float, float]:
    """llama.cpp's own counters of a result: prompt tokens evaluated (the rest came from the
    reused prefix), their seconds, generation seconds."""
    return (int(getattr(res, "prompt_eval_tokens", 0) or 0),
            float(getattr(res, "prompt_eval_s", 0.0) or 0.0),
            float(getattr(res, "gen_s", 0.0) or 0.0))


def answer(question: Question, entries: Sequence[Any], now: float, answerer: Answerer, *,
           labels: Mapping[str, str] | None = None) -> QaAnswer:
    """Retrieve and answer in one call."""
    return answerer.answer(retrieve(question, entries, now, labels=labels))
