"""The experience a bag holds, as timed core transitions: the input of a drift test.

:func:`load_input` reads the recorded ``transitions`` topic, or rebuilds look outcomes from
``detections`` or from camera frames with the look rule of
:mod:`glove_ros.core.world.observation`; :func:`drift_from_events` finds the drift a
recording announces on ``world_events``. Separate from :mod:`glove_ros.core.bag.bagfile`
(storage) and :mod:`glove_ros.core.bag.drift` (scoring): this is where bag messages become
robot experience.

Times: every message has its *bag time* (when the recorder received it, ns); drift time,
delays and "before / after the drift" are measured on that one clock, because header
stamps may be simulated time while ``world_events`` only has a bag time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glove_ros.core.bag.bagfile import NS, BagError, BagReader
from glove_ros.core.bag.messages import GLOVE_TYPES, _ns_of, image_from_obj, transition_from_obj
from glove_ros.core.memory.experience import Transition
from glove_ros.core.world.observation import Frame, LookAggregator, LookConfig, kind_of_backend

__all__ = [
    "INPUT_KINDS",
    "BagInput",
    "Timed",
    "TopicNames",
    "drift_from_events",
    "load_input",
]

#: what a drift test can rebuild experience from
INPUT_KINDS = ("auto", "transitions", "detections", "camera")


@dataclass(frozen=True)
class TopicNames:
    """Topic names a drift test reads (absolute, or relative = any namespace)."""

    transitions: str = "/transitions"
    detections: str = "/detections"
    camera: str = "/camera/image_raw"
    waypoint: str = "/current_waypoint"
    world_events: str = "/world_events"


@dataclass(frozen=True)
class Timed:
    """A transition with the bag time it belongs to (ns)."""

    transition: Transition
    bag_ns: int


@dataclass
class BagInput:
    """The experience one bag holds, in bag-time order.

    ``kind`` is where looks came from (``transitions``, ``detections`` or ``camera``);
    ``world_events`` are ``(bag_ns, text)``; ``stamp_to_bag`` maps header stamps (ns) of
    the transitions and of the frames looks were built from to their bag time.
    """

    path: Path
    kind: str
    items: list[Timed]
    start_ns: int
    end_ns: int
    world_events: list[tuple[int, str]] = field(default_factory=list)
    stamp_to_bag: dict[int, int] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)  # role -> bag topic used

    @property
    def transitions(self) -> list[Transition]:
        """The transitions alone."""
        return [i.transition for i in self.items]


def _require_type(bag: BagReader, topic: str, msgtype: str, want: str) -> None:
    if msgtype != want:
        raise BagError(f"bag {bag.path}: topic {topic} has type {msgtype}, expected {want}")
    if not bag.known(msgtype):
        raise BagError(f"bag {bag.path}: topic {topic} has message type {msgtype}, which "
                       f"neither the bag nor this installation defines")


def load_input(
    path: str | os.PathLike[str],
    kind: str = "auto",
    *,
    topics: TopicNames | None = None,
    look: LookConfig | None = None,
    detector: Any = None,
    robot_id: str = "",
    episode_id: str = "",
    typestore: Any = None,
) -> BagInput:
    """Read the experience in a bag as timed transitions (see :class:`BagInput`).

    ``kind``: ``transitions`` (the recorded topic), ``detections`` (looks rebuilt from
    detection arrays), ``camera`` (looks rebuilt from images tagged by the latest
    ``current_waypoint``, detected with ``detector``, default the colour detector), or
    ``auto`` (the first of those the bag has). With ``detections`` or ``camera``, recorded
    transitions other than looks (navigation) are kept as they are.
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"input must be one of {', '.join(INPUT_KINDS)}, got {kind!r}")
    names = topics or TopicNames()
    cfg = (look or LookConfig()).validate()
    with BagReader(path, typestore) as bag:
        found = {role: bag.find_topic(getattr(names, role)) for role in
                 ("transitions", "detections", "camera", "waypoint", "world_events")}
        counts = {role: bag.topics[t][1] if t else 0 for role, t in found.items()}
        if kind == "auto":
            kind = next((k for k in ("transitions", "detections", "camera") if counts[k]), "")
            if not kind:
                raise BagError(
                    f"bag {bag.path}: no experience to test: none of {names.transitions}, "
                    f"{names.detections}, {names.camera} has messages (topics: "
                    f"{', '.join(sorted(bag.topics)) or 'none'})")
        if not found[kind]:
            want = {"transitions": names.transitions, "detections": names.detections,
                    "camera": names.camera}[kind]
            raise BagError(f"bag {bag.path}: no topic {want} for input '{kind}' (topics: "
                           f"{', '.join(sorted(bag.topics)) or 'none'})")
        wanted = {t: role for role, t in found.items() if t and (
            role in ("transitions", "world_events") or role == kind
            or (kind == "camera" and role == "waypoint"))}
        expect = {"transitions": GLOVE_TYPES["transition"], "detections":
                  GLOVE_TYPES["detections"], "camera": GLOVE_TYPES["image"],
                  "waypoint": GLOVE_TYPES["string"], "world_events": GLOVE_TYPES["string"]}
        for topic, role in wanted.items():
            _require_type(bag, topic, bag.topics[topic][0], expect[role])
        if kind == "camera" and detector is None:
            from glove_ros.core.world.perception import ColorBlockDetector

            detector = ColorBlockDetector()

        items: list[Timed] = []
        events: list[tuple[int, str]] = []
        stamp_map: dict[int, int] = {}
        agg = LookAggregator(cfg)
        waypoint = ""
        frame_ns: dict[float, int] = {}

        def add_looks(looks: Iterable[Any], now_ns: int) -> None:
            for lk in looks:
                t = lk.to_transition(robot_id, episode_id)
                items.append(Timed(t, frame_ns.get(lk.stamp, now_ns)))

        for topic, msgtype, t_ns, raw in bag.messages(wanted):
            role = wanted[topic]
            obj = bag.decode(msgtype, raw, topic)
            if role == "world_events":
                events.append((t_ns, str(obj.data)))
            elif role == "transitions":
                try:
                    t = transition_from_obj(obj)
                except ValueError as exc:
                    raise BagError(f"bag {bag.path}: bad transition on {topic} at "
                                   f"{(t_ns - bag.start_ns) / NS:.3f}s: {exc}") from None
                if kind == "transitions" or t.action != "look":
                    items.append(Timed(t, t_ns))
                    stamp_map[int(round(t.stamp * NS))] = t_ns
            elif role == "waypoint":
                waypoint = str(obj.data)  # tags the following frames, as perception does
            elif role == "detections":
                stamp = _ns_of(obj.header.stamp)
                try:  # a trained detector's frames give object looks, colour frames colours
                    frame = Frame.from_detections(
                        str(obj.waypoint), obj.detections, stamp / NS, cfg.min_confidence,
                        kind=kind_of_backend(str(getattr(obj, "backend", ""))))
                except ValueError as exc:
                    raise BagError(f"bag {bag.path}: bad detections on {topic} at "
                                   f"{(t_ns - bag.start_ns) / NS:.3f}s: {exc}") from None
                frame_ns[frame.stamp] = t_ns
                stamp_map[stamp] = t_ns
                add_looks(agg.add(frame), t_ns)
            elif role == "camera":
                stamp = _ns_of(obj.header.stamp)
                try:
                    image = image_from_obj(obj)
                except ValueError as exc:
                    raise BagError(f"bag {bag.path}: bad image on {topic}: {exc}") from None
                frame = Frame.from_detections(
                    waypoint, detector.detect(image), stamp / NS, cfg.min_confidence,
                    kind=kind_of_backend(getattr(detector, "backend", "")))
                frame_ns[frame.stamp] = t_ns
                stamp_map[stamp] = t_ns
                add_looks(agg.add(frame), t_ns)
        add_looks(agg.flush(), bag.end_ns)
        items.sort(key=lambda i: i.bag_ns)
        return BagInput(Path(path), kind, items, bag.start_ns, bag.end_ns, events, stamp_map,
                        {role: t for t, role in wanted.items()})


def drift_from_events(events: Sequence[tuple[int, str]]) -> tuple[int, str] | None:
    """The first world event announcing a drift (text starting with ``DRIFT``, as the
    simulator node publishes them): ``(bag_ns, text)``, or None."""
    for t_ns, text in events:
        if text.strip().upper().startswith("DRIFT"):
            return t_ns, text
    return None
