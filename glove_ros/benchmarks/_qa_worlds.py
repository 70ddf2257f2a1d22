"""``glove-ros bench qa``: drift worlds, the robot's experience of them, and questions with
the simulator's ground truth.

A world of :func:`~glove_ros.core.world.worldgen.generate_world` gets fresh place names and
object names (none of them in any prompt's examples). A patrol robot walks it: each episode
it starts at a random waypoint, looks, and drives ``steps`` corridors to random neighbours,
looking at each arrival; looks miss blocks at the world's nuisance rate and go blind in its
detection dropouts. Every transition goes through the GLOVE verifier (async, the robot
default) into one store; the other memories are views of the same entries (static: all
trusted; a recency rule: what it keeps). The patrol ignores memory, so every arm answers
from exactly the same experience.

Ground truth is the simulator's, restricted to what the robot experienced: a question is
asked only when memory *can* hold its answer (the robot observed the current state of every
place or corridor it is about at least twice since it last changed; a corridor that never
changed once). ``stale`` is true when the robot witnessed a change of what the question is
about (the object at two places or gone from where it was seen, the place's contents or the
corridor's state changing between observations).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from glove_ros.benchmarks._jetrover_config import verifier_settings
from glove_ros.core.llm.prompts import age_text
from glove_ros.core.memory.experience import MemoryEntry, Status, Transition
from glove_ros.core.memory.store import ExperienceStore
from glove_ros.core.plan.qa import Question, corridor_label
from glove_ros.core.verify.config import VerifierConfig
from glove_ros.core.verify.memory_views import RecencyWeightedView, make_view
from glove_ros.core.verify.verifier import GloveVerifier
from glove_ros.core.world.sim import Simulator, colors_signature
from glove_ros.core.world.worldgen import generate_world

#: place names of the generated worlds: none occurs in a prompt's examples
PLACES = ("boilerroom", "chapel", "cloakroom", "darkroom", "gallery", "greenhouse", "gym",
          "laundry", "loft", "mailroom", "mezzanine", "nursery", "observatory", "pantry",
          "parlour", "scullery", "solarium", "stairwell", "storeroom", "sunroom", "terrace",
          "vestibule", "vault", "washroom", "balcony", "bakery", "cafeteria", "dormitory",
          "infirmary", "lobby", "pergola", "boathouse", "chancel", "smithy", "granary")
#: object nouns (the colour comes from the world's block)
NOUNS = ("kettle", "drum", "satchel", "toolbox", "lantern", "crate", "vase", "bucket",
         "helmet", "parcel", "thermos", "cushion")
WORLD_KINDS = ("swap", "move", "close", "combo", "close_reopen")
QTYPES = ("spatial", "temporal", "descriptive", "staleness")


@dataclass(frozen=True)
class Case:
    """One question with its truth."""

    qtype: str
    question: Question
    value: str
    stale: bool
    world: str
    seed: int


@dataclass
class QaWorld:
    """A world after the patrol: memory entries (GLOVE statuses), truth, questions."""

    name: str
    seed: int
    kind: str
    labels: dict[str, str]
    entries: list[MemoryEntry]
    now: float
    drift_time: float
    looks: list[tuple[float, str, tuple[str, ...], tuple[str, ...]]] = field(
        default_factory=list)  # (time, place, true objects, detected)
    drives: list[tuple[float, str, bool]] = field(default_factory=list)  # (time, corridor, blocked)
    current: dict[str, tuple[str, ...]] = field(default_factory=dict)  # place -> objects now
    closed: set[str] = field(default_factory=set)  # corridors closed now
    cases: list[Case] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# the patrol


def build_world(seed: int, index: int, *, steps: int = 6, after: int = 7) -> QaWorld:
    """World ``index`` of ``seed``: generate, rename, patrol; questions not yet made."""
    rng = random.Random(seed * 7919 + index)
    kind = WORLD_KINDS[(seed + index) % len(WORLD_KINDS)]
    wseed = seed * 16 + index
    world = generate_world(wseed, kind=kind, n_waypoints=rng.randint(7, 10), first_drift=6,
                           phase_len=4, name=f"qa_{kind}_{wseed}")
    names = dict(zip(world.waypoint_ids, rng.sample(PLACES, len(world.waypoint_ids)),
                     strict=True))
    labels = {c: f"{c} {n}" for c, n in zip(world.colors, rng.sample(NOUNS, len(world.colors)),
                                             strict=True)}
    drift_eps = [e.episode for e in world.drift_events() if e.episode is not None]
    episodes = max(drift_eps, default=6) + after
    sim = Simulator(world, seed=wseed)
    tmp = tempfile.TemporaryDirectory(prefix="glove_bench_qa_")
    store = ExperienceStore(str(Path(tmp.name) / "memory.db"), synchronous="NORMAL",
                            clock=lambda: sim.time)
    settings = verifier_settings(world, {}, "async")
    verifier = GloveVerifier(store, VerifierConfig.from_dict(settings))
    qw = QaWorld(world.name, seed, kind, labels, [], 0.0, 0.0)

    def record(t: Transition) -> None:
        res = verifier.observe(t)
        for req in res.probe_requests:
            verifier.cancel_probe(req, "patrol: no probes")

    def look() -> None:
        wp = sim.at_waypoint or sim.last_waypoint
        true = sim.state.blocks_at(wp)
        seen = [p.color for p in true if rng.random() >= sim.state.miss_rate(p.block_id)]
        if sim.state.take_dropout_frame():
            seen = []
        sim.wait(2.0)
        qw.looks.append((sim.time, names[wp], tuple(sorted({p.color for p in true})),
                         tuple(sorted(set(seen)))))
        record(Transition(names[wp], "look", colors_signature(seen), stamp=sim.time))

    try:
        for ep in range(episodes):
            sim.begin_episode(ep)
            if ep in drift_eps and not qw.drift_time:
                qw.drift_time = sim.time
            sim.teleport(rng.choice(world.waypoint_ids), battery=1.0)
            look()
            for _ in range(steps):
                here = sim.at_waypoint or sim.last_waypoint
                to = rng.choice(world.neighbors(here))
                res = sim.navigate(to, dt=0.5)
                if res.outcome not in ("reached", "blocked"):
                    continue
                qw.drives.append((sim.time, corridor_label(names[here], names[to]),
                                  res.outcome == "blocked"))
                record(Transition(names[here], "navigate_to", res.outcome, action_arg=names[to],
                                  stamp=sim.time))
                if res.outcome == "reached":
                    look()
            sim.wait(60.0)
        qw.now = sim.time
        qw.entries = sorted(store.query(include_suppressed=True, limit=None)[0],
                            key=lambda e: e.id)
        qw.current = {names[w]: sim.state.colors_at(w) for w in world.waypoint_ids}
        qw.closed = {corridor_label(names[a], names[b]) for a, b in sim.state.blocked_edges}
    finally:
        store.close()
        tmp.cleanup()
    return qw


# --------------------------------------------------------------------------------------------
# memory views of the same entries


def static_view(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """Never verified: every entry trusted."""
    return [replace(e, status=Status.TRUSTED, valid_until=None, reason="", replaced_by=None)
            for e in entries]


def rule_view(entries: Sequence[MemoryEntry], rule: str, now: float
              ) -> tuple[list[MemoryEntry], dict[int, float] | None]:
    """What recency ``rule`` keeps, trusted; what it dropped, replaced (stale since the first
    later sample of the key with another outcome, else the next sample); weights for
    RecencyWeighted."""
    view = make_view(rule)
    plain = static_view(entries)
    for e in plain:
        view.record(e)
    weights = None
    if isinstance(view, RecencyWeightedView):
        weights = {int(e.id): w for e, w in view.weights()
                   if round(view.RESOLUTION * w) >= 1}
        kept = set(weights)
    else:
        kept = {int(e.id) for e in view.visible()}
    by_key: dict[Any, list[MemoryEntry]] = {}
    for e in plain:
        by_key.setdefault(e.transition.key, []).append(e)
    out = []
    for e in plain:
        if int(e.id) in kept:
            out.append(e)
            continue
        later = [x for x in by_key[e.transition.key] if x.id > e.id]
        diff = [x for x in later if x.transition.outcome != e.transition.outcome]
        until = (diff or later)[0].valid_from if (diff or later) else now
        out.append(replace(e, status=Status.REPLACED, valid_until=until,
                           reason=f"{rule} keeps only newer samples"))
    return out, weights


# --------------------------------------------------------------------------------------------
# questions and truth


def _place_looks(qw: QaWorld, place: str) -> list[tuple[float, tuple[str, ...], tuple[str, ...]]]:
    return [(t, true, seen) for t, p, true, seen in qw.looks if p == place]


def _answerable(qw: QaWorld, place: str) -> bool:
    looks = _place_looks(qw, place)
    return len(looks) >= 2 and all(true == qw.current[place] for _, true, _ in looks[-2:])


def _changed(qw: QaWorld, place: str) -> bool:
    return len({true for _, true, _ in _place_looks(qw, place)}) > 1


def _obj_cases(qw: QaWorld, obj: str) -> list[tuple[str, Question, str, bool]]:
    label = qw.labels[obj]
    sightings = [(t, p) for t, p, true, seen in qw.looks if obj in true and obj in seen]
    if not sightings:
        return []
    t, place = sightings[-1]
    now_at = next((p for p, objs in qw.current.items() if obj in objs), "")
    seen_places = {p for _, p in sightings}
    gone = any(obj not in true and any(s < tt for s, p2 in sightings if p2 == p)
               for tt, p, true, _ in qw.looks if p in seen_places)
    stale = len(seen_places) > 1 or gone
    if place == now_at:
        last = _place_looks(qw, place)[-1]
        ok = _answerable(qw, place)
        ok_when = ok and last[0] == t and last[1] == last[2]
    else:
        ok = ok_when = _answerable(qw, place)
    out = []
    if ok:
        text = random.Random(f"{qw.name}{obj}").choice(
            (f"where did you last see the {label}?", f"where was the {label} last seen?"))
        out.append(("where", Question("where", obj=obj, text=text), place, stale))
    if ok_when:
        out.append(("when", Question("when", obj=obj, text=f"when did you last see the {label}?"),
                    age_text(qw.now - t), stale))
    return out


def _place_cases(qw: QaWorld, place: str, objs: Sequence[str]
                 ) -> list[tuple[str, Question, str, bool]]:
    if not _answerable(qw, place):
        return []
    cur = qw.current[place]
    out = [("what_at", Question("what_at", place=place, text=f"what is at the {place}?"),
            ",".join(cur) or "nothing", _changed(qw, place))]
    looks = _place_looks(qw, place)
    for obj in objs:
        flips = len({obj in true for _, true, _ in looks}) > 1
        out.append(("still_at", Question("still_at", obj=obj, place=place,
                                         text=f"is the {qw.labels[obj]} still at the {place}?"),
                     "yes" if obj in cur else "no", flips))
    return out


def _corridor_case(qw: QaWorld) -> list[tuple[str, Question, str, bool]]:
    per: dict[str, list[bool]] = {}
    for _, c, blocked in qw.drives:
        per.setdefault(c, []).append(blocked)
    changed = False
    for c, states in per.items():
        now_closed = c in qw.closed
        need = 2 if len(set(states)) > 1 else 1
        if len(states) < need or any(s != now_closed for s in states[-need:]):
            return []
        changed |= len(set(states)) > 1
    if not per:
        return []
    value = ",".join(sorted(c for c in per if c in qw.closed)) or "nothing"
    return [("corridors", Question("corridors", text="which corridors are closed?"), value,
             changed)]


def _changes_case(qw: QaWorld, since: float) -> list[tuple[str, Question, str, bool]]:
    """What the robot saw change since ``since``: the states it observed from its last
    observation before then on differ (every such place or corridor answerable now)."""
    changed = []
    for place in qw.current:
        looks = _place_looks(qw, place)
        before = [true for t, true, _ in looks if t <= since][-1:]
        states = before + [true for t, true, _ in looks if t > since]
        if len(set(states)) > 1:
            if not _answerable(qw, place):
                return []
            changed.append(place)
    per: dict[str, list[tuple[float, bool]]] = {}
    for t, c, blocked in qw.drives:
        per.setdefault(c, []).append((t, blocked))
    for c, xs in per.items():
        before = [b for t, b in xs if t <= since][-1:]
        after = [b for t, b in xs if t > since]
        if len(set(before + after)) > 1:
            if len(after) < 2 or any(b != (c in qw.closed) for b in after[-2:]):
                return []
            changed.append(c)
    text = f"what changed in the last {age_text(qw.now - since).removesuffix(' ago')}?"
    value = ",".join(sorted(changed)) or "nothing"
    return [("changes", Question("changes", since=since, text=text), value, bool(changed))]


_QTYPE = {"where": "spatial", "still_at": "spatial", "when": "temporal", "changes": "temporal",
          "what_at": "descriptive", "corridors": "descriptive"}


def make_cases(qw: QaWorld, n: int) -> list[Case]:
    """Up to ``n`` answerable questions, staleness ones first (up to 40 %), the rest spread
    over the other types; deterministic per world."""
    rng = random.Random(f"cases:{qw.name}")
    objs = sorted(qw.labels)
    raw: list[tuple[str, Question, str, bool]] = []
    for obj in objs:
        raw += _obj_cases(qw, obj)
    for place in sorted(qw.current):
        seen_here = {o for _, p, true, _ in qw.looks if p == place for o in true}
        pick = sorted(seen_here) + rng.sample(objs, 1)
        raw += _place_cases(qw, place, sorted(set(pick)))
    raw += _corridor_case(qw)
    raw += _changes_case(qw, qw.drift_time - 1.0)
    if qw.looks:
        raw += _changes_case(qw, qw.now - 240.0)
    cases = [Case("staleness" if stale and k != "changes" else _QTYPE[k], q, v, stale, qw.name,
                  qw.seed) for k, q, v, stale in raw]
    rng.shuffle(cases)
    stale = [c for c in cases if c.qtype == "staleness"][:max(1, int(0.4 * n))]
    rest = [c for c in cases if c.qtype != "staleness"]
    by_type: dict[str, list[Case]] = {}
    for c in rest:
        by_type.setdefault(c.qtype, []).append(c)
    picked = list(stale)
    while len(picked) < n and any(by_type.values()):
        for t in ("spatial", "temporal", "descriptive"):
            if by_type.get(t) and len(picked) < n:
                picked.append(by_type[t].pop(0))
    return picked
