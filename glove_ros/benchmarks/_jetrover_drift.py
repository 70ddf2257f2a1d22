"""JetRover search benchmark: drift metrics of one run (detection delay, false alarms,
deadlocks), per place (a waypoint's look, a corridor), and the detector's measured rates.

:class:`DriftTracker` only watches a :class:`~glove_ros.benchmarks._jetrover_runner.ModeRunner`
(its memory and the simulator's truth); it is separate from the loop that drives the robot.
:class:`DetectorRates` tallies what the detector saw against what was there.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from glove_ros.benchmarks._suite_alarms import RIGHT, UNKNOWN, WRONG
from glove_ros.core.memory.experience import Transition
from glove_ros.core.memory.looks import look_names
from glove_ros.core.plan.agent_types import (
    ACTION_LOOK,
    ACTION_NAVIGATE,
    OUTCOME_BLOCKED,
    OUTCOME_REACHED,
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

    False alarms, one definition for every method (GLOVE, baselines, +retest arms, static,
    oracle; :mod:`glove_ros.benchmarks._suite_alarms`): a recorded transition, or a sync
    probe's samples, after which the belief the agent reads at a place no drift has touched
    goes from right to wrong (:meth:`belief`: believing nothing is neither); one per
    transition however many places flip. The reverse at such a place (a wrong belief, from
    a missed detection, made right) is a correction. Alerts are not counted as such: an
    alert that leaves the agent's belief right costs nothing the planner reads.

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
        self.observations = 0  # transitions and probe samples the memory learnt from
        self.stuck_calls = 0
        #: belief (RIGHT / WRONG / UNKNOWN) at every untouched place with memory, as of the
        #: latest check (hooks refresh it without counting)
        self._beliefs: dict[Place, str] = {}

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
            seen = [look_names(o) for o in outs]
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

    def belief(self, place: Place) -> str:
        """RIGHT, WRONG or UNKNOWN: what the memory the method reads believes at ``place``
        against the truth (the agent's thresholds, as :meth:`matches`), UNKNOWN where it
        believes nothing (no look of the waypoint; no attempt of the corridor either way)."""
        if self.r.mode == "oracle":
            return RIGHT
        mem = self.r.memory
        if place[0] == "look":
            known = bool(mem.trusted(state_key=place[1], action=ACTION_LOOK))
        else:
            a, b = place[1], place[2]
            known = any(e.transition.action_arg == dst and e.transition.outcome in
                        (OUTCOME_REACHED, OUTCOME_BLOCKED)
                        for src, dst in ((a, b), (b, a))
                        for e in mem.trusted(state_key=src, action=ACTION_NAVIGATE))
        if not known:
            return UNKNOWN
        return RIGHT if self.matches(place) else WRONG

    def _untouched(self, place: Place) -> bool:
        if place[0] == "look":
            return place[1] not in self.r.touched_looks
        return (place[1], place[2]) not in self.r.touched_edges

    def _sweep(self, extra: Iterable[Place] = ()) -> dict[Place, str]:
        """The belief now at every untouched place with memory (and at ``extra``)."""
        places = dict.fromkeys(p for p in (*self._beliefs, *extra) if self._untouched(p))
        return {p: self.belief(p) for p in places}

    def observed(self, places: Iterable[Place | None], n: int = 1,
                 everywhere: bool = True) -> None:
        """``n`` observations the memory learnt from (a transition, a probe's samples)
        about ``places``: count a false alarm if a right belief at an untouched place is
        wrong now (once), a correction for each wrong one made right there. Every
        untouched place with memory is re-read (a view's window, reset or object evidence
        acts on other places too), or with ``everywhere=False`` only ``places`` (GLOVE
        changes what it believes elsewhere only with an alert)."""
        self.observations += n
        own = [p for p in places if p is not None and self._untouched(p)]
        now = self._sweep(own) if everywhere else {p: self.belief(p) for p in own}
        before = self._beliefs
        fa = int(any(before.get(p) == RIGHT and s == WRONG for p, s in now.items()))
        fixed = sum(1 for p, s in now.items() if before.get(p) == WRONG and s == RIGHT)
        self.false_alarms += fa
        self.corrections += fixed
        ep = self.r._ep
        if ep is not None:
            ep.false_alarms += fa
            ep.corrections += fixed
        self._beliefs = {p: s for p, s in {**before, **now}.items() if self._untouched(p)}

    def _refresh(self) -> None:
        """Memory changed outside an observation (a hook): re-read, count nothing."""
        self._beliefs = self._sweep()

    # ------------------------------------------------------------------ events

    def on_change(self, looks: set[str], edges: set[tuple[str, str]]) -> None:
        """The truth changed at these places (just now)."""
        ep = self._episode()
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
        """Called before ``t`` is recorded (the beliefs are those of the latest check)."""
        return None

    def after_record(self, t: Transition, alert: Any) -> None:
        self.step += 1
        place = place_of(t.state_key, t.action, t.action_arg)
        self.visit(place)
        if alert is not None:
            ap = place_of(alert.state_key, alert.action, alert.action_arg)
            if ap in self.pending:
                self._detect(ap)
        self._check_pending()
        self.observed([place], everywhere=not self.glove or alert is not None)

    def check(self, probed: Place | None = None, samples: int = 0) -> None:
        """Memory may have changed outside a recorded transition: a sync probe's
        ``samples`` at ``probed`` (observations, counted as such), or the stuck hook
        (re-read, nothing counted). Detect what now matches."""
        self._check_pending()
        if samples:
            self.observed([probed], samples)
        else:
            self._refresh()

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
