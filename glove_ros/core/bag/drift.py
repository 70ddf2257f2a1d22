"""Score a drift test: run the GLOVE verifier over bag experience and judge its alerts.

* :func:`verify_core`: the verifier (in-memory store) over a source and a drifted recording.
* :func:`analyse` / :func:`format_report`: alerts, false alarms, detection delay,
  suppressed and replaced memories, as a JSON-able report and as a few lines of text.
* :class:`Expectations`: what a user's expectation file says the report must show.

Separate from :mod:`glove_ros.core.bag.inputs` (which turns bags into timed transitions):
nothing here reads a bag; it scores :class:`~glove_ros.core.bag.inputs.Timed` items on the
bag-time clock they carry.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from glove_ros.core.bag.bagfile import NS, _one_line
from glove_ros.core.bag.inputs import BagInput, Timed
from glove_ros.core.memory.experience import Transition

__all__ = [
    "AlertRecord",
    "Expectations",
    "analyse",
    "format_report",
    "touched_pairs",
    "verify_core",
]

Pair = tuple[str, str, str]


@dataclass(frozen=True)
class AlertRecord:
    """One dissonance alert, placed on the drifted recording.

    ``index`` is the position in the drifted items of the transition that fired it (None
    if unknown), ``bag_ns`` its bag time; ``expected`` is Q_hist as (outcome, probability).
    """

    state_key: str
    action: str
    action_arg: str
    observed: str
    expected: tuple[tuple[str, float], ...] = ()
    index: int | None = None
    bag_ns: int | None = None
    suppressed: int = 0
    probes: int = 0

    @property
    def pair(self) -> Pair:
        """``(state_key, action, action_arg)``."""
        return (self.state_key, self.action, self.action_arg)


def _majority(outcomes: Sequence[str]) -> set[str]:
    c = Counter(outcomes)
    top = max(c.values())
    return {o for o, n in c.items() if n == top}


def touched_pairs(before: Iterable[Transition], after: Iterable[Transition]) -> set[Pair]:
    """(state, action) pairs a drift changed: their most frequent outcome after the drift
    is not among the most frequent before it. Nuisance (a miss now and then) leaves the
    majority alone; pairs seen on one side only are not touched."""
    b: dict[Pair, list[str]] = defaultdict(list)
    a: dict[Pair, list[str]] = defaultdict(list)
    for t in before:
        b[t.key].append(t.outcome)
    for t in after:
        a[t.key].append(t.outcome)
    return {k for k in a if k in b and not (_majority(a[k]) & _majority(b[k]))}


def verify_core(
    source: Sequence[Timed], drifted: Sequence[Timed], config: Any,
) -> tuple[list[AlertRecord], dict[str, Any]]:
    """Run the GLOVE verifier (in-memory store) over the source then the drifted items.

    In ``sync`` mode a bag cannot re-drive the robot: each probe request is answered with
    the outcome the robot observes at that moment (the firing observation, repeated alpha
    times; deterministic world), or cancelled when there is none. Returns the alerts and
    ``{"suppressed", "replaced", "still_suppressed", "pending", "probes", "verifier"}``:
    entries ever suppressed, entries replaced, entries suppressed at the end, pending
    (state, action) pairs, probe samples applied, the verifier's statistics.
    """
    from glove_ros.core.memory.store import ExperienceStore
    from glove_ros.core.verify.verifier import GloveVerifier

    store = ExperienceStore(":memory:", synchronous="NORMAL")
    try:
        verifier = GloveVerifier(store, config)
        verifier.phase = "source"
        last: dict[Pair, str] = {}
        alerts: list[AlertRecord] = []
        probes = 0

        def answer(requests: Sequence[Any]) -> int:
            n = 0
            for req in requests:
                outcome = last.get(req.pair)
                if outcome is None or outcome == "?":
                    verifier.cancel_probe(req)
                    continue
                verifier.apply_probes(req, [outcome] * req.alpha)
                n += req.alpha
            return n

        for item in source:
            res = verifier.observe(item.transition)
            last[item.transition.key] = item.transition.outcome
            probes += answer(res.probe_requests)
        verifier.phase = "drifted"
        for i, item in enumerate(drifted):
            t = item.transition
            res = verifier.observe(t)
            last[t.key] = t.outcome
            if res.alert is not None:
                a = res.alert
                alerts.append(AlertRecord(a.state_key, a.action, a.action_arg,
                                          a.observed_outcome, tuple(a.expected), i,
                                          item.bag_ns, len(a.suppressed_ids),
                                          int(a.probes_requested)))
            probes += answer(res.probe_requests)
        counts = store.counts()
        stats = verifier.stats()
        return alerts, {"suppressed": stats["suppressions"], "replaced": counts["replaced"],
                        "still_suppressed": counts["suppressed"], "pending": counts["pending"],
                        "probes": probes, "verifier": stats}
    finally:
        store.close()


def _pair_text(p: Pair) -> str:
    return f"{p[0]}/{p[1]}" + (f"({p[2]})" if p[2] else "")


def analyse(
    *,
    drifted: BagInput,
    alerts: Sequence[AlertRecord],
    drift: tuple[int, str] | None,
    source: BagInput | None = None,
    outcome: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score alerts against the drift: a JSON-able report (docs/bags.md lists the fields).

    ``drift`` is ``(bag_ns, why)`` or None (no drift known: every alert is a false alarm).
    An alert is a *true* alert when it fires at or after the drift on a pair the drift
    touched (:func:`touched_pairs`); every other alert is a false alarm. Detection delay of
    a pair: transitions (all pairs: ``messages``; this pair: ``visits``) and seconds from
    the drift up to and including the one that fired its first true alert.
    """
    t0 = drifted.start_ns
    drift_ns = drift[0] if drift else None
    items = drifted.items
    before = [i.transition for i in (source.items if source else [])]
    after: list[Transition] = []
    for i in items:
        (after if drift_ns is not None and i.bag_ns >= drift_ns else before).append(i.transition)
    touched = touched_pairs(before, after) if drift_ns is not None else set()

    def rel(ns: int | None) -> float | None:
        return None if ns is None else round((ns - t0) / NS, 3)

    rows = []
    first_true: dict[Pair, dict[str, Any]] = {}
    for a in alerts:
        bag_ns = a.bag_ns
        if bag_ns is None and a.index is not None:
            bag_ns = items[a.index].bag_ns
        row: dict[str, Any] = {
            "state_key": a.state_key, "action": a.action, "action_arg": a.action_arg,
            "observed": a.observed, "expected": {o: round(p, 4) for o, p in a.expected},
            "t": rel(bag_ns), "suppressed": a.suppressed, "probes_requested": a.probes,
        }
        after_drift = drift_ns is not None and bag_ns is not None and bag_ns >= drift_ns
        if drift_ns is None:
            why = "no drift in this recording"
        elif not after_drift:
            why = "before the drift"
        elif a.pair not in touched:
            why = "the drift did not change this (state, action)"
        else:
            why = ""
        row["false_alarm"] = bool(why)
        if why:
            row["why"] = why
        if not why and drift_ns is not None and bag_ns is not None:
            in_window = [i for i in items if drift_ns <= i.bag_ns <= bag_ns]
            row["delay_messages"] = len(in_window)
            row["delay_visits"] = sum(1 for i in in_window if i.transition.key == a.pair)
            row["delay_seconds"] = round((bag_ns - drift_ns) / NS, 3)
            if a.pair not in first_true:
                first_true[a.pair] = row
        rows.append(row)
    true_rows = sorted(first_true.values(), key=lambda r: r["delay_seconds"])
    first = true_rows[0] if true_rows else None
    report: dict[str, Any] = {
        "source": None if source is None else {
            "path": str(source.path), "input": source.kind, "transitions": len(source.items)},
        "drifted": {"path": str(drifted.path), "input": drifted.kind,
                    "transitions": len(items), "start": round(t0 / NS, 3),
                    "duration": round((drifted.end_ns - t0) / NS, 3)},
        "drift": None if drift is None else {"t": rel(drift_ns), "time": round(drift[0] / NS, 3),
                                             "from": drift[1]},
        "touched_pairs": [list(p) for p in sorted(touched)],
        "transitions_after_drift": len(after) if drift_ns is not None else 0,
        "alerts": rows,
        "alert_count": len(rows),
        "alerted_state_keys": sorted({r["state_key"] for r in rows}),
        "false_alarms": sum(1 for r in rows if r["false_alarm"]),
        "missed_pairs": [list(p) for p in sorted(touched - set(first_true))],
        "detection_delay": None if first is None else {
            k: first[k] for k in ("delay_messages", "delay_visits", "delay_seconds")},
        "pair_delays": [{"pair": list((r["state_key"], r["action"], r["action_arg"])),
                         "messages": r["delay_messages"], "visits": r["delay_visits"],
                         "seconds": r["delay_seconds"]} for r in true_rows],
    }
    report.update(outcome or {})
    report.update(extra or {})
    return report


def format_report(report: Mapping[str, Any]) -> str:
    """A few human-readable lines of a drift-test report."""
    lines = []
    d = report["drifted"]
    src = report.get("source")
    head = f"drift test: {d['transitions']} transitions from {d['path']} ({d['input']})"
    if src:
        head += f" after {src['transitions']} from {src['path']} ({src['input']})"
    head += f"; verifier {report.get('mode', '?')}"
    head += " through node processes" if report.get("through_nodes") else " (core)"
    lines.append(head)
    drift = report.get("drift")
    when = "none known" if not drift else f"{drift['t']}s ({drift['from']})"
    touched = ", ".join(_pair_text(tuple(p)) for p in report["touched_pairs"]) or "nothing"
    lines.append(f"drift: {when}; changed: {touched}")
    for r in report["alerts"]:
        pair = _pair_text((r["state_key"], r["action"], r["action_arg"]))
        if r["false_alarm"]:
            tag = f"FALSE ALARM ({r['why']})"
        else:
            tag = (f"after {r['delay_messages']} messages / {r['delay_visits']} visits / "
                   f"{r['delay_seconds']}s")
        lines.append(f"  alert t={r['t']}s {pair}: observed {r['observed']!r}, expected "
                     f"{r['expected']} -> {tag}")
    delay = report.get("detection_delay")
    delay_text = "-" if not delay else (
        f"{delay['delay_messages']} messages, {delay['delay_seconds']}s")
    tail = (f"alerts: {report['alert_count']}, false alarms: {report['false_alarms']}, "
            f"suppressed: {report.get('suppressed', '?')}, "
            f"replaced: {report.get('replaced', '?')}, detection delay: {delay_text}")
    if report["missed_pairs"]:
        tail += ", missed: " + ", ".join(_pair_text(tuple(p)) for p in report["missed_pairs"])
    lines.append(tail)
    return "\n".join(lines)


# --------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expectations:
    """What a drift test must show; load with :meth:`load` from YAML (all keys optional).

    ``min_alerts`` / ``max_alerts``: alert count bounds. ``max_false_alarms``.
    ``max_delay_messages`` / ``max_delay_seconds``: bound on every touched pair's detection
    delay. ``alerted_state_keys``: exactly these state keys alert (any action).
    ``min_suppressed`` / ``min_replaced``: memory entries. ``max_missed``: touched pairs that
    may go without an alert.
    """

    min_alerts: int | None = None
    max_alerts: int | None = None
    max_false_alarms: int | None = None
    max_delay_messages: int | None = None
    max_delay_seconds: float | None = None
    alerted_state_keys: tuple[str, ...] | None = None
    min_suppressed: int | None = None
    min_replaced: int | None = None
    max_missed: int | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str = "expectations") -> Expectations:
        """Build and validate; unknown keys and wrong types raise ValueError."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a mapping of checks, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: "
                             f"{', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for key, v in data.items():
            if key == "alerted_state_keys":
                if v is None:
                    continue
                if not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
                    raise ValueError(f"{where}: alerted_state_keys must be a list of strings")
                values[key] = tuple(sorted(set(v)))
            elif key == "max_delay_seconds":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise ValueError(f"{where}: {key} must be a number >= 0, got {v!r}")
                values[key] = float(v)
            else:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"{where}: {key} must be an integer >= 0, got {v!r}")
                values[key] = v
        return cls(**values)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Expectations:
        """Read an expectation YAML file (ValueError with the file name when bad)."""
        import yaml

        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text())
        except OSError as exc:
            raise ValueError(f"cannot read expectation file {p}: {_one_line(exc)}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"expectation file {p} is not valid YAML: {_one_line(exc)}") from None
        return cls.from_dict(data, where=f"expectation file {p}")

    def check(self, report: Mapping[str, Any]) -> list[str]:
        """The failed checks, one line each (empty: the report meets every expectation)."""
        fails: list[str] = []
        n = report["alert_count"]
        if self.min_alerts is not None and n < self.min_alerts:
            fails.append(f"alerts: {n} < min_alerts {self.min_alerts}")
        if self.max_alerts is not None and n > self.max_alerts:
            fails.append(f"alerts: {n} > max_alerts {self.max_alerts}")
        fa = report["false_alarms"]
        if self.max_false_alarms is not None and fa > self.max_false_alarms:
            fails.append(f"false alarms: {fa} > max_false_alarms {self.max_false_alarms}")
        delays = report.get("pair_delays", [])
        for key, field_name in (("max_delay_messages", "messages"),
                                ("max_delay_seconds", "seconds")):
            limit = getattr(self, key)
            if limit is None:
                continue
            if not delays:
                fails.append(f"{key}: no alert after the drift, so no detection delay")
            for d in delays:
                if d[field_name] > limit:
                    fails.append(f"detection delay of {_pair_text(tuple(d['pair']))}: "
                                 f"{d[field_name]} {field_name} > {key} {limit}")
        if self.alerted_state_keys is not None:
            got = tuple(sorted(set(report["alerted_state_keys"])))
            if got != self.alerted_state_keys:
                fails.append(f"alerted state keys: {list(got)} != expected "
                             f"{list(self.alerted_state_keys)}")
        for key, name in (("min_suppressed", "suppressed"), ("min_replaced", "replaced")):
            limit = getattr(self, key)
            value = report.get(name)
            if limit is not None and (value is None or value < limit):
                fails.append(f"{name}: {value} < {key} {limit}")
        missed = len(report.get("missed_pairs", []))
        if self.max_missed is not None and missed > self.max_missed:
            fails.append(f"touched pairs without an alert: {missed} > max_missed "
                         f"{self.max_missed}")
        return fails
