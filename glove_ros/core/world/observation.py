"""From per-frame detections to one look outcome per stay at a waypoint (no ROS).

Perception publishes one detection result per camera frame, tagged with the waypoint the
robot stood at (``""`` while driving). The experience memory wants one transition per
*look*: ``(W, "look", outcome)`` with ``outcome`` a look signature
(:mod:`glove_ros.core.memory.looks`) of one of two kinds:

* ``colors=blue,red``: the colour blocks of the ``color`` backend (HSV thresholds), a set
  of colour names. Every earlier memory, fixture and result has this form, unchanged.
* ``objects=cup,person*2``: the object classes of a trained detector (``darknet``: the
  shipped YOLOv3-tiny, or ``yolo``: your ultralytics model), canonical COCO names
  (:func:`~glove_ros.core.world.labels.canonical_label`: ``sofa`` -> ``couch``), each with
  the number of instances seen when two or more (two people are not one).

A :class:`Frame` carries the kind and, per name, the instances seen in that frame.
:meth:`Frame.from_detections` builds it: a detection with a colour counts as its colour
(kind ``colors``); a detection without one is a trained detector's object and counts by its
canonical class (kind ``objects``). Which kind a frame is should come from the backend that
made it (:func:`kind_of_backend` of ``DetectionArray.backend``): a trained detector's frame
that saw nothing is still an ``objects`` frame. :class:`LookAggregator` makes the step from
frames to looks robust:

The look rule
-------------
A *stay* is a maximal run of frames tagged with the same non-empty waypoint. It ends when a
frame arrives with another tag (``""`` included), when the frames of the same waypoint are
more than ``max_gap`` seconds apart (the robot left and came back without the camera seeing
the way), when :meth:`LookAggregator.waypoint_changed` reports that the robot left, or at
:meth:`LookAggregator.flush`.

Of each stay, the first ``skip_frames`` frames are dropped (camera settling after the stop)
and the next ``frames`` (n) frames are judged: a colour (or an object class) is *seen* when
it is detected (at ``min_confidence`` or above) in at least ``min_count`` (k) of those n
frames. The look is emitted as soon as the n-th frame arrives; later frames of the same
stay are ignored (one stay, one look). A stay that ends with m < n judged frames is judged
on what it got with the threshold scaled to ``ceil(k * m / n)`` (the same fraction of
frames), provided m >= ``min_frames``; shorter stays give no look at all, because an
outcome built on one or two frames is not worth remembering.

Objects also have a count. A class that is seen (the same k-of-n rule) is recorded with the
number of instances most frames showed, counting only the frames where it was detected at
all (a frame that missed it says nothing about how many there are); when two counts are
equally common the smaller one wins (a spurious extra box is likelier than a missed one
being the truth twice). Two people in two of three frames give ``objects=person*2``; one
person in one frame of three gives ``objects=``; counts 2, 1, 2 give ``person*2``; counts
1, 2 give ``person``. A colour look ignores counts: its outcome is the set, as it always was.

A stay has one kind, the kind of its frames. If the kind changes within a stay (the
perception backend was switched while the robot stood still), the look is judged by the
last kind: the frames of the earlier kind are dropped (a colour and a class cannot be
compared), the stay needs n frames of the new kind, the change is logged as a warning and
counted in :attr:`LookAggregator.mixed_kinds` (the observer node logs it too).
:func:`judge_frames`, called with a list, refuses a mix (ValueError): a caller that mixes
has a bug.

With the defaults (n = 3, k = 2) one missed detection of a block, or one spurious blob in a
single frame, does not change the outcome: it would take two bad frames out of three. That
keeps the GLOVE verifier's input free of the commonest nuisance (DESIGN.md section 1: "a
detection missed once").

Used by the observer node (``glove_ros.nodes.observer_node``), by the planner when it
looks, and by ``glove-ros bag`` (fixtures and drift tests on camera or detection topics).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from glove_ros.core.memory.experience import Source, Transition
from glove_ros.core.memory.looks import LOOK_KINDS, look_signature
from glove_ros.core.world.labels import canonical_label

__all__ = [
    "BACKEND_KINDS",
    "LOOK_ACTION",
    "Frame",
    "FreshFrames",
    "Look",
    "LookAggregator",
    "LookConfig",
    "look_names",
    "counts_of",
    "judge_frames",
    "kind_of_backend",
    "signature",
]

_LOG = logging.getLogger(__name__)

#: the action name of a look in the memory's vocabulary
#: (``glove_ros.core.plan.agent_types.ACTION_LOOK``)
LOOK_ACTION = "look"

#: the look kind of each perception backend's frames (``DetectionArray.backend``)
BACKEND_KINDS: Mapping[str, str] = MappingProxyType(
    {"color": "colors", "darknet": "objects", "yolo": "objects"})


def kind_of_backend(backend: str) -> str | None:
    """The look kind of the frames a perception backend publishes: ``"colors"`` for
    ``color``, ``"objects"`` for ``darknet`` and ``yolo``; None for ``""`` (a message that
    does not say, e.g. from an old bag: the kind is then inferred from the detections).

    ValueError naming the accepted backends for any other name.
    """
    backend = str(backend).strip()
    if not backend:
        return None
    if backend not in BACKEND_KINDS:
        raise ValueError(f"unknown perception backend {backend!r}: expected one of "
                         f"{', '.join(BACKEND_KINDS)} (or empty to infer from the detections)")
    return BACKEND_KINDS[backend]


def signature(colors: Iterable[str]) -> str:
    """Outcome signature of a set of colours: ``"colors=blue,red"``, ``"colors="`` for none.

    Same format as :func:`glove_ros.core.world.perception.outcome_signature`.
    """
    return "colors=" + ",".join(sorted({c for c in colors if c}))


def look_names(detections: Iterable[Any], min_confidence: float = 0.0) -> frozenset[str]:
    """Distinct colours in one frame's detections (objects with ``color``, ``label`` and
    ``confidence``; a detection without a colour counts by its label, as in the outcome
    signature). Detections below ``min_confidence`` are ignored.

    The colour-look view; :func:`counts_of` also knows object frames."""
    out = set()
    for d in detections:
        if float(getattr(d, "confidence", 1.0)) < min_confidence:
            continue
        name = getattr(d, "color", "") or getattr(d, "label", "")
        if name:
            out.add(str(name))
    return frozenset(out)


def counts_of(detections: Iterable[Any], min_confidence: float = 0.0,
              kind: str | None = None) -> tuple[str, dict[str, int]]:
    """``(kind, name -> instances)`` of one frame's detections (objects with ``label``,
    ``color`` and ``confidence``: core ``Detection`` or ``glove_ros/Detection``).

    ``kind="colors"``: each detection counts as its colour, or its label when it has none
    (exactly the names of :func:`look_names`). ``kind="objects"``: each detection counts as
    its class, :func:`~glove_ros.core.world.labels.canonical_label` of its label (its colour,
    if any, is ignored). ``kind=None`` infers the kind: ``"colors"`` when a kept detection
    has a colour or nothing was kept (it cannot tell), else ``"objects"``. Detections below
    ``min_confidence`` are ignored. ValueError for another kind.
    """
    if kind is not None and kind not in LOOK_KINDS:
        raise ValueError(f"look kind must be one of {', '.join(LOOK_KINDS)} or None (infer), "
                         f"got {kind!r}")
    kept = [d for d in detections if float(getattr(d, "confidence", 1.0)) >= min_confidence]
    if kind is None:
        if any(getattr(d, "color", "") for d in kept) or not any(
                str(getattr(d, "label", "")).strip() for d in kept):
            kind = "colors"
        else:
            kind = "objects"
    counts: Counter[str] = Counter()
    for d in kept:
        if kind == "colors":
            name = str(getattr(d, "color", "") or getattr(d, "label", ""))
        else:
            label = str(getattr(d, "label", ""))
            name = canonical_label(label) if label.strip() else ""
        if name:
            counts[name] += 1
    return kind, dict(counts)


@dataclass(frozen=True)
class LookConfig:
    """The look rule's parameters (see the module docstring); ``validate()`` explains.

    ``frames``: n, frames judged per stay. ``min_count``: k, frames a colour must be seen in.
    ``min_frames``: a stay with fewer judged frames gives no look. ``skip_frames``: frames
    dropped at the start of each stay. ``min_confidence``: detections below are ignored.
    ``max_gap``: seconds between two frames of one waypoint beyond which they belong to two
    stays (0 disables; frames without stamps never split).
    """

    frames: int = 3
    min_count: int = 2
    min_frames: int = 2
    skip_frames: int = 0
    min_confidence: float = 0.0
    max_gap: float = 5.0

    def validate(self) -> LookConfig:
        """Raise ``ValueError`` with an actionable message; return ``self`` when valid."""

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if not is_int(self.frames) or not 1 <= self.frames <= 1000:
            raise ValueError(f"look frames (n) must be an integer in 1..1000, got {self.frames!r}")
        if not is_int(self.min_count) or not 1 <= self.min_count <= self.frames:
            raise ValueError(
                f"look min_count (k) must be an integer in 1..frames={self.frames}, "
                f"got {self.min_count!r}"
            )
        if not is_int(self.min_frames) or not 1 <= self.min_frames <= self.frames:
            raise ValueError(
                f"look min_frames must be an integer in 1..frames={self.frames}, "
                f"got {self.min_frames!r}"
            )
        if not is_int(self.skip_frames) or self.skip_frames < 0:
            raise ValueError(f"look skip_frames must be an integer >= 0, got {self.skip_frames!r}")
        if not is_num(self.min_confidence) or not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(
                f"look min_confidence must be within 0..1, got {self.min_confidence!r}"
            )
        if not is_num(self.max_gap) or self.max_gap < 0:
            raise ValueError(
                f"look max_gap must be seconds >= 0 (0 disables), got {self.max_gap!r}"
            )
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LookConfig:
        """Build from a mapping (YAML section, ROS parameters without the ``look.`` prefix);
        unknown keys raise ``ValueError`` listing the accepted ones. Validates."""
        if not isinstance(data, Mapping):
            raise ValueError(f"look config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown look config key(s): {', '.join(unknown)}; "
                f"accepted: {', '.join(sorted(known))}"
            )
        values = dict(data)
        for name in ("min_confidence", "max_gap"):
            v = values.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                values[name] = float(v)
        return cls(**values).validate()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, the inverse of :meth:`from_dict`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fraction(cls, frames: int, min_fraction: float, **kwargs: Any) -> LookConfig:
        """``min_count = ceil(min_fraction * frames)`` (at least 1): the rule stated as the
        fraction of frames a colour must be seen in (e.g. 3 frames, 0.5 -> 2 of 3)."""
        if isinstance(min_fraction, bool) or not isinstance(min_fraction, (int, float)) or (
            not 0.0 < min_fraction <= 1.0
        ):
            raise ValueError(f"look min_fraction must be in (0, 1], got {min_fraction!r}")
        if isinstance(frames, int) and not isinstance(frames, bool) and frames >= 1:
            k = max(1, math.ceil(min_fraction * frames - 1e-9))
            kwargs.setdefault("min_frames", min(2, frames))
        else:
            k = 1
        return cls(frames=frames, min_count=k, **kwargs).validate()

    def threshold(self, judged: int) -> int:
        """Frames a colour must be seen in when ``judged`` frames were judged:
        ``min_count`` for a full look, ``ceil(min_count * judged / frames)`` for a short one."""
        if judged >= self.frames:
            return self.min_count
        return max(1, math.ceil(self.min_count * judged / self.frames - 1e-9))


@dataclass(frozen=True)
class Frame:
    """What perception saw in one camera frame: the waypoint tag, the names, the stamp.

    ``waypoint`` is ``""`` between waypoints; ``stamp`` is seconds (0: unknown). ``kind`` is
    ``"colors"`` (colour blocks) or ``"objects"`` (a trained detector's classes);
    ``counts`` is name -> instances seen in this frame (read-only) and ``colors`` its names
    (the colours, or the classes of an object frame: the name is kept so that colour-era
    callers work). Give either: ``Frame(w, frozenset({"red"}))`` counts each colour once,
    ``Frame(w, counts={"person": 2}, kind="objects")`` fills ``colors`` in.

    ValueError for an unknown kind, a count that is not an integer >= 1, ``colors`` that are
    not the names of ``counts``, or an object name containing ``,``, ``=`` or ``*`` (it could
    not be written into a look signature).
    """

    waypoint: str
    colors: frozenset[str] = frozenset()
    stamp: float = 0.0
    counts: Mapping[str, int] = field(default_factory=dict, hash=False)
    kind: str = "colors"

    def __post_init__(self) -> None:
        if self.kind not in LOOK_KINDS:
            raise ValueError(f"frame kind must be one of {', '.join(LOOK_KINDS)}, "
                             f"got {self.kind!r}")
        if not isinstance(self.counts, Mapping):
            raise ValueError("frame counts must be a mapping name -> instances, got "
                             f"{type(self.counts).__name__}")
        counts: dict[str, int] = {}
        for name, n in self.counts.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"frame count of {name!r} must be an integer >= 1, got {n!r}")
            if str(name):
                counts[str(name)] = n
        names = frozenset(self.colors)
        if counts and names and {c for c in names if c} != set(counts):
            raise ValueError(f"frame colors {sorted(names)} are not the names of its counts "
                             f"{sorted(counts)} (give one of them)")
        if not counts:
            counts = {c: 1 for c in names if c}
        else:
            names = frozenset(counts)
        if self.kind == "objects":
            bad = sorted(c for c in counts if any(ch in c for ch in ",=*"))
            if bad:
                raise ValueError(f"object class name(s) {bad} contain ',', '=' or '*', which a "
                                 "look signature cannot hold (rename the class in the model)")
        object.__setattr__(self, "colors", names)
        object.__setattr__(self, "counts", MappingProxyType(counts))

    @classmethod
    def from_detections(
        cls, waypoint: str, detections: Iterable[Any], stamp: float = 0.0,
        min_confidence: float = 0.0, kind: str | None = None,
    ) -> Frame:
        """A frame from detection objects (core ``Detection`` or ``glove_ros/Detection``).

        ``kind``: ``"colors"``, ``"objects"``, or None to infer it from the detections
        (:func:`counts_of`: ``"colors"`` when it cannot tell, e.g. for an empty frame). Pass
        :func:`kind_of_backend` of the backend that made them, so that a trained detector's
        empty frame is an ``objects`` frame.
        """
        kind, counts = counts_of(detections, min_confidence, kind)
        return cls(str(waypoint), frozenset(counts), float(stamp), counts, kind)


@dataclass(frozen=True)
class Look:
    """One look outcome: what was seen at ``waypoint`` during one stay.

    ``outcome`` is the look signature (``colors=...`` or ``objects=...``, see ``kind``) and
    ``colors`` the names seen (colours, or classes of an object look). ``counts`` is (name,
    frames it was seen in) for every name seen at least once, ``judged`` the frames judged,
    ``threshold`` the count a name needed; ``partial`` is true when the stay ended before
    ``frames`` frames. ``stamp`` is the stamp of the last judged frame (when the outcome was
    decided), ``first_stamp`` of the first. ``instances`` is (name, instances) for every
    name seen: the most common count among the frames that showed it (ties: the smaller);
    an object look writes it into the outcome, a colour look ignores it.
    """

    waypoint: str
    outcome: str
    colors: tuple[str, ...]
    counts: tuple[tuple[str, int], ...]
    judged: int
    threshold: int
    first_stamp: float = 0.0
    stamp: float = 0.0
    partial: bool = False
    kind: str = "colors"
    instances: tuple[tuple[str, int], ...] = ()

    def to_transition(
        self,
        robot_id: str = "",
        episode_id: str = "",
        *,
        action: str = LOOK_ACTION,
        context: str = "",
        pose: tuple[float, float, float] | None = None,
        source: Source = Source.OBSERVED,
        reward: float = 0.0,
    ) -> Transition:
        """The experience ``(waypoint, look, outcome)`` for the memory (validated)."""
        return Transition(
            state_key=self.waypoint, action=action, outcome=self.outcome,
            robot_id=robot_id, episode_id=episode_id, pose=pose, context=context,
            reward=float(reward), source=source, stamp=max(0.0, float(self.stamp)),
        ).validate()


class FreshFrames:
    """Which camera frames a look started at ``start`` (seconds, the look's clock) may use.

    A frame can sit in a queue (camera driver, DDS, perception) while the robot drives and be
    tagged with the waypoint the robot has just reached: judged there it would record what
    the previous place looked like, a false memory. Frames stamped before the look began
    are refused (counted in ``stale``); an unstamped frame (stamp 0) cannot be dated, so the
    first one is skipped as possibly taken before the robot stopped.
    """

    def __init__(self, start: float) -> None:
        self.start = float(start)
        self.stale = 0
        self._skipped_unstamped = False

    def admit(self, stamp: float) -> bool:
        """True when a frame with this capture stamp shows the robot standing here."""
        if stamp > 0.0:
            if stamp < self.start:
                self.stale += 1
                return False
            return True
        if not self._skipped_unstamped:
            self._skipped_unstamped = True
            return False
        return True


def _frame_counts(item: Frame | Mapping[str, int] | Iterable[str]) -> dict[str, int]:
    """name -> instances of one judged frame, blanks dropped."""
    if isinstance(item, Frame):
        return dict(item.counts)
    if isinstance(item, Mapping):
        out: dict[str, int] = {}
        for name, n in item.items():
            if isinstance(n, bool) or not isinstance(n, int):
                raise ValueError(f"frame count of {name!r} must be an integer, got {n!r}")
            if name and n >= 1:
                out[str(name)] = n
        return out
    if isinstance(item, str):
        raise ValueError(f"a judged frame must be a Frame, a mapping name -> count or a set "
                         f"of names, got the string {item!r}")
    return {str(c): 1 for c in item if c}


def _most_common_count(counts: Iterable[int]) -> int:
    """The most common of ``counts``; on a tie the smaller."""
    freq = Counter(counts)
    return min(freq, key=lambda n: (-freq[n], n))


def judge_frames(
    color_sets: Sequence[Frame | Mapping[str, int] | Iterable[str]],
    config: LookConfig | None = None, waypoint: str = "",
    stamps: Sequence[float] | None = None, *, kind: str | None = None,
) -> Look:
    """Apply the look rule to one stay's frames (after ``skip_frames``).

    Each frame is a :class:`Frame`, a mapping name -> instances, or a set of names
    (instances 1 each). Only the first ``frames`` are judged. ``kind`` (``"colors"`` or
    ``"objects"``) is the outcome's kind; None takes the kind of the :class:`Frame` items,
    ``"colors"`` when there are none (sets and mappings do not say). ``stamps`` default to
    the stamps of :class:`Frame` items. ValueError for no frames, for frames of both kinds
    or of another kind than ``kind`` (one stay, one kind: see the module's look rule).

    For a planner that grabs its own frames::

        look = judge_frames([look_names(detector.detect(img)) for img in images])
        look.outcome   # "colors=red"
        look = judge_frames([Frame.from_detections(wp, darknet.detect(img), kind="objects")
                             for img in images])
        look.outcome   # "objects=cup,person*2"
    """
    cfg = (config or LookConfig()).validate()
    items = list(color_sets)
    if kind is not None and kind not in LOOK_KINDS:
        raise ValueError(f"look kind must be one of {', '.join(LOOK_KINDS)} or None, "
                         f"got {kind!r}")
    frame_kinds = sorted({i.kind for i in items if isinstance(i, Frame)})
    if len(frame_kinds) > 1 or (kind is not None and frame_kinds and frame_kinds != [kind]):
        raise ValueError(f"judge_frames got frames of kind(s) {', '.join(frame_kinds)}"
                         + (f" for a {kind!r} look" if kind is not None else "")
                         + ": one look judges frames of one kind (a colour and an object "
                         "class cannot be compared); judge each kind separately")
    kind = kind or (frame_kinds[0] if frame_kinds else "colors")
    judged = items[: cfg.frames]
    frames = [_frame_counts(i) for i in judged]
    if not frames:
        raise ValueError("judge_frames needs at least one frame")
    counts = Counter(c for f in frames for c in f)
    threshold = cfg.threshold(len(frames))
    seen = tuple(sorted(c for c, n in counts.items() if n >= threshold))
    instances = {c: _most_common_count(f[c] for f in frames if c in f) for c in seen}
    if stamps is None and judged and all(isinstance(i, Frame) for i in judged):
        stamps = [i.stamp for i in judged if isinstance(i, Frame)]
    st = list(stamps)[: len(frames)] if stamps is not None else []
    return Look(
        waypoint=waypoint,
        outcome=signature(seen) if kind == "colors" else look_signature(instances, kind),
        colors=seen,
        counts=tuple(sorted(counts.items())),
        judged=len(frames),
        threshold=threshold,
        first_stamp=float(st[0]) if st else 0.0,
        stamp=float(st[-1]) if st else 0.0,
        partial=len(frames) < cfg.frames,
        kind=kind,
        instances=tuple(sorted(instances.items())),
    )


@dataclass
class _Stay:
    waypoint: str
    seen: int = 0  # frames of this stay so far, skipped ones included
    kind: str = "colors"  # the kind of the judged frames (the last kind seen)
    sets: list[Mapping[str, int]] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    last_stamp: float = 0.0
    done: bool = False  # the look was emitted


class LookAggregator:
    """Turns a stream of :class:`Frame` into :class:`Look` outcomes (see the module rule).

    Feed frames in arrival order with :meth:`add`; tell it when the robot leaves with
    :meth:`waypoint_changed` if the camera does not run while driving; call :meth:`flush`
    at the end of the stream. Every method returns the looks it completed (0, 1 or 2: a
    frame can end one stay and complete the next one's look when ``frames`` is 1).
    Not thread-safe: one aggregator per stream, callers lock if needed.

    A stay whose frames change kind (``colors`` <-> ``objects``) is judged by the last kind:
    its earlier frames are dropped (counted as ignored), a warning is logged and
    :attr:`mixed_kinds` counts it.
    """

    def __init__(self, config: LookConfig | None = None) -> None:
        self.config = (config or LookConfig()).validate()
        self._stay: _Stay | None = None
        self._left: str | None = None  # waypoint the robot was reported to have left
        self.frames_seen = 0
        self.frames_ignored = 0
        self.looks = 0
        self.short_stays = 0
        self.mixed_kinds = 0  # kind changes within a stay (each restarts its judged frames)

    @property
    def open_waypoint(self) -> str | None:
        """The waypoint of the stay in progress (None between stays)."""
        return self._stay.waypoint if self._stay is not None else None

    def stats(self) -> dict[str, int]:
        """Counters: frames seen / ignored, looks emitted, stays too short for a look."""
        return {"frames": self.frames_seen, "ignored": self.frames_ignored,
                "looks": self.looks, "short_stays": self.short_stays}

    def add(self, frame: Frame) -> list[Look]:
        """One frame; returns the looks it completed."""
        self.frames_seen += 1
        out: list[Look] = []
        wp = frame.waypoint
        stay = self._stay
        if stay is not None and (wp != stay.waypoint or self._gap(stay, frame)):
            out += self._close()
            stay = None
        if not wp:
            self._left = None
            self.frames_ignored += 1
            return out
        if self._left is not None:
            if wp == self._left:  # a late frame from the stay already closed
                self.frames_ignored += 1
                return out
            self._left = None
        if stay is None:
            stay = self._stay = _Stay(wp)
        stay.seen += 1
        if frame.stamp:
            stay.last_stamp = frame.stamp
        if stay.done or stay.seen <= self.config.skip_frames:
            self.frames_ignored += 1
            return out
        if stay.sets and frame.kind != stay.kind:
            self.mixed_kinds += 1
            self.frames_ignored += len(stay.sets)
            _LOG.warning("look at %r: a %s frame after %d %s frame(s) in one stay (perception "
                         "backend switched?); judging the stay by the %s frames only",
                         wp, frame.kind, len(stay.sets), stay.kind, frame.kind)
            stay.sets.clear()
            stay.stamps.clear()
        stay.kind = frame.kind
        stay.sets.append(dict(frame.counts))
        stay.stamps.append(frame.stamp)
        if len(stay.sets) >= self.config.frames:
            stay.done = True
            out.append(self._emit(stay))
        return out

    def waypoint_changed(self, waypoint: str) -> list[Look]:
        """The robot now stands at ``waypoint`` (``""``: left / driving). Closes a stay at
        another waypoint; frames still tagged with the closed one are then ignored."""
        stay = self._stay
        if stay is None or waypoint == stay.waypoint:
            if waypoint and waypoint == self._left:
                self._left = None
            return []
        left = stay.waypoint
        out = self._close()
        self._left = left
        return out

    def flush(self) -> list[Look]:
        """End the stay in progress (end of the stream); returns its look if it had none."""
        out = self._close()
        self._left = None
        return out

    def reset(self) -> None:
        """Forget the stay in progress without emitting anything."""
        self._stay = None
        self._left = None

    # internals -----------------------------------------------------------------------
    def _gap(self, stay: _Stay, frame: Frame) -> bool:
        gap = self.config.max_gap
        if gap <= 0 or not frame.stamp or not stay.last_stamp:
            return False
        return abs(frame.stamp - stay.last_stamp) > gap

    def _close(self) -> list[Look]:
        stay, self._stay = self._stay, None
        if stay is None or stay.done:
            return []
        if len(stay.sets) < self.config.min_frames:
            if stay.sets or stay.seen:
                self.short_stays += 1
            return []
        return [self._emit(stay)]

    def _emit(self, stay: _Stay) -> Look:
        self.looks += 1
        return judge_frames(stay.sets, self.config, stay.waypoint, stay.stamps, kind=stay.kind)
