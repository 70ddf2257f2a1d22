"""JetRover search benchmark: drift metrics of one run (detection delay, false alarms,
deadlocks), per place (a waypoint's look, a corridor), and the detector's measured rates.

:class:`DriftTracker` only watches a :class:`~glove_ros.benchmarks._jetrover_runner.ModeRunner`
(its memory and the simulator's truth); it is separate from the loop that drives the robot.
:class:`DetectorRates` tallies what the detector saw against what was there.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import look_names
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
    colors_of,
)
from glove_ros.core.world.worldfile import edge_key

if TYPE_CHECKING:
    from glove_ros.benchmarks._jetrover_runner import ModeRunner


__all__ = [
    "DetectorRates",
    "DriftTracker",
    "Place",
    "place_of",
]


Place = tuple[str, ...]  # ("look", waypoint) or ("edge", a, b) with a <= b


def place_of(state_key: str, action: str, action_arg: str) -> Place | None:
    """The place a transition (or alert) is about: the waypoint of a look, the corridor of a
    navigation (either direction); None for anything else."""
    if action == ACTION_LOOK:
        return ("look", state_key)
    if action == ACTION_NAVIGATE and action_arg:
        return ("edge", *edge_key(state_key, action_arg))
    return None


def _place_name(place: Place) -> str:
    return place[1] if place[0] == "look" else f"{place[1]}-{place[2]}"


class DriftTracker:
    """Drift metrics of one run (fed by :class:`ModeRunner`).

    A *change* is a place whose truth changed (a waypoint whose blocks changed, a corridor
    that closed or opened). It is *stale* for the method when, at that moment, the method's
    memory at the place contradicts the new truth (a look memory believing other colours;
    a corridor believed blocked / open); empty memory is not stale. *Visits* to the place
    after the change: looks at the waypoint / traversal attempts of the corridor in either
    direction, the agent's and probes'. The *detection delay* of a stale change is the
    number of visits up to the method's detection (0: before any visit): for GLOVE the
    first alert about the place or the first moment its trusted memory there matches the
    truth (a suppression or re-test without an alert); for the other methods the first
    moment the memory it reads there matches the truth. None: never.

    False alarms of the non-GLOVE methods: a recorded transition at a place no drift ever
    touched after which the memory there stops matching the truth (a nuisance flipped the
    belief), plus PageHinkley alarms with no drift since the previous alarm; the reverse (a
    wrong belief there made right) is a correction. (GLOVE's false alarms are its alerts
    about untouched places where its memory agreed with the world, counted by the runner.)

    Deadlock: a stale re-opened corridor (memory believes it blocked) that is neither
    re-tried nor seen as open by the memory before the phase ends.
    """

    def __init__(self, runner: ModeRunner) -> None:
        self.r = runner
        self.step = 0
        self.changes: list[dict[str, Any]] = []
        self.pending: dict[Place, dict[str, Any]] = {}
        self.watch: dict[Place, dict[str, Any]] = {}  # latest change record per place
        self.false_alarms = 0
        self.corrections = 0  # wrong memory at an untouched place made right
        self.stuck_calls = 0
        self._before: tuple[Place, bool] | None = None
        self._drift_steps: list[int] = []
        self._ph_alarms = 0
        self._last_alarm_step = 0

    @property
    def glove(self) -> bool:
        return self.r.verifier is not None

    def _episode(self) -> int:
        return self.r._ep.episode if self.r._ep is not None else self.r.sim.episode

    def matches(self, place: Place) -> bool:
        """Whether the memory the method reads agrees with the truth at ``place`` (empty
        memory agrees: it does not mislead the planner)."""
        if self.r.mode == "oracle":
            return True  # the truth by construction
        mem, state, cfg = self.r.memory, self.r.sim.state, self.r.agent_config
        if place[0] == "look":
            outs = [e.transition.outcome for e in mem.trusted(state_key=place[1],
                                                               action=ACTION_LOOK)]
            if not outs:
                return True
            seen = [colors_of(o) for o in outs]
            believed = {c for c in set().union(*seen)
                        if sum(c in x for x in seen) / len(seen) >= cfg.belief_threshold}
            return believed == set(look_names(state.expected_signature(place[1])))
        a, b = place[1], place[2]
        believed_blocked = False
        for src, dst in ((a, b), (b, a)):
            outs = [e.transition.outcome for e in mem.trusted(state_key=src,
                                                               action=ACTION_NAVIGATE)
                    if e.transition.action_arg == dst
                    and e.transition.outcome in (OUTCOME_REACHED, OUTCOME_BLOCKED)]
            if outs and outs.count(OUTCOME_BLOCKED) / len(outs) >= cfg.blocked_threshold:
                believed_blocked = True
        return believed_blocked == state.is_blocked(a, b)

    # ------------------------------------------------------------------ events

    def on_change(self, looks: set[str], edges: set[tuple[str, str]]) -> None:
        """The truth changed at these places (just now)."""
        ep = self._episode()
        self._drift_steps.append(self.step)
        places: list[Place] = [("look", w) for w in sorted(looks)]
        places += [("edge", *e) for e in sorted(edges)]
        for place in places:
            old = self.pending.pop(place, None)
            if old is not None:
                old["superseded"] = True
            stale = not self.matches(place)
            rec: dict[str, Any] = {
                "place": _place_name(place), "kind": place[0], "episode": ep,
                "stale": stale, "visits": 0, "delay": None, "detected_episode": None,
                "visit_episodes": [],
            }
            if place[0] == "edge":
                rec["now"] = "blocked" if self.r.sim.state.is_blocked(*place[1:]) else "open"
            self.changes.append(rec)
            self.watch[place] = rec
            if stale:
                self.pending[place] = rec

    def visit(self, place: Place | None) -> None:
        """A look at / traversal attempt of ``place``."""
        rec = self.watch.get(place) if place is not None else None
        if rec is not None:
            rec["visits"] += 1
            rec["visit_episodes"].append(self._episode())

    def before_record(self, t: Transition) -> None:
        place = place_of(t.state_key, t.action, t.action_arg)
        self._before = None
        if self.glove or place is None:
            return
        untouched = (t.action == ACTION_LOOK and t.state_key not in self.r.touched_looks) or \
            (t.action == ACTION_NAVIGATE
             and edge_key(t.state_key, t.action_arg) not in self.r.touched_edges)
        if untouched:
            self._before = (place, self.matches(place))

    def after_record(self, t: Transition, alert: Any) -> None:
        self.step += 1
        self.visit(place_of(t.state_key, t.action, t.action_arg))
        if alert is not None:
            ap = place_of(alert.state_key, alert.action, alert.action_arg)
            if ap in self.pending:
                self._detect(ap)
        self._check_pending()
        if self._before is not None:
            bp, was = self._before
            if was and not self.matches(bp):
                self.false_alarms += 1
            elif not was and self.matches(bp):
                self.corrections += 1
        view = self.r.view
        if view is not None and view.alerts > self._ph_alarms:
            self._ph_alarms = view.alerts
            if not any(self._last_alarm_step < d <= self.step for d in self._drift_steps):
                self.false_alarms += 1
            self._last_alarm_step = self.step

    def check(self) -> None:
        """Memory may have changed outside a recorded transition (a probe's result, the
        stuck hook): detect what now matches."""
        self._check_pending()

    def _check_pending(self) -> None:
        for place in list(self.pending):
            if self.matches(place):
                self._detect(place)

    def _detect(self, place: Place) -> None:
        rec = self.pending.pop(place)
        rec["delay"] = rec["visits"]
        rec["detected_episode"] = self._episode()

    # ------------------------------------------------------------------ results

    def deadlocks(self, episodes: int) -> list[str]:
        """Stale re-opened corridors neither re-tried nor seen open within their phase."""
        drift_eps = sorted({c["episode"] for c in self.changes})
        out = []
        for c in self.changes:
            if c["kind"] != "edge" or c.get("now") != "open" or not c["stale"]:
                continue
            end = min((e for e in drift_eps if e > c["episode"]), default=episodes)
            tried = any(e < end for e in c["visit_episodes"])
            seen = c["detected_episode"] is not None and c["detected_episode"] < end
            if not tried and not seen:
                out.append(c["place"])
        return out


class DetectorRates:
    """The detector's measured rates on the frames and looks a benchmark run judged.

    Per class: *hit rate where present* (frames in which it was painted and detected, of the
    frames in which it was painted), *false detections where absent* (frames in which it
    was detected although not painted, of the frames without it), and how often a hit had
    the right count; the same per look (the k-of-n outcome against the waypoint's truth,
    which includes objects a nuisance hid from the camera). Frames are counted once each (by
    pixel digest) and looks once per set of frames, however many methods met them: the
    rates describe the scenes, not how often a method looked.
    """

    def __init__(self) -> None:
        self._frames: dict[Hashable, tuple[dict[str, int], dict[str, int]]] = {}
        self._looks: dict[Hashable, tuple[dict[str, int], dict[str, int]]] = {}

    def frame(self, key: Hashable, present: Mapping[str, int],
              detected: Mapping[str, int]) -> None:
        """One judged frame: class -> instances painted and detected."""
        self._frames.setdefault(key, (dict(present), dict(detected)))

    def look(self, key: Hashable, truth: Mapping[str, int], seen: Mapping[str, int]) -> None:
        """One look (``key``: its frames' digests): class -> instances there and judged."""
        self._looks.setdefault(key, (dict(truth), dict(seen)))

    @staticmethod
    def _rates(items: Iterable[tuple[dict[str, int], dict[str, int]]]) -> dict[str, Any]:
        rows = list(items)
        classes = sorted({c for p, d in rows for c in (*p, *d)})
        out: dict[str, Any] = {}
        for c in classes:
            present = [(p, d) for p, d in rows if c in p]
            absent = [d for p, d in rows if c not in p]
            hits = [(p, d) for p, d in present if c in d]
            false = [d for d in absent if c in d]
            out[c] = {
                "present": len(present), "hits": len(hits),
                "hit_rate": round(len(hits) / len(present), 4) if present else None,
                "count_right": sum(d[c] == p[c] for p, d in hits),
                "absent": len(absent), "false": len(false),
                "false_rate": round(len(false) / len(absent), 4) if absent else None,
            }
        return out

    def summary(self) -> dict[str, Any]:
        """``{frames, looks, per_frame: {class: rates}, per_look: {class: rates}}``."""
        return {"frames": len(self._frames), "looks": len(self._looks),
                "per_frame": self._rates(self._frames.values()),
                "per_look": self._rates(self._looks.values())}
