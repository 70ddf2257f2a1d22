"""Baseline settings tuned on development seeds, frozen for the report run (bench jetrover).

``--sweep`` picks each baseline's best setting on the very run it reports: the strongest
opponent GLOVE could face, but selected after the fact on the reported seeds (a bias in the
baselines' favour, and not the project's rule "tune on one seed range, report on another").
This module is the other half of that rule:

1. run ``bench jetrover --sweep`` on each development seed (every setting's score lands in
   the document's ``baseline_sweep``);
2. :func:`tune_from_docs` sums each setting's score over those documents (successes after the
   first drift, then steps after the first drift: the same order ``--sweep`` uses) and keeps
   the best setting per baseline and per ``+retest`` arm; ``bench jetrover --tune-from
   A.json B.json ... --write-baseline-params FILE`` writes it (:func:`write_params`);
3. the report run passes ``--baseline-params FILE``: each baseline runs once, at its frozen
   setting (:func:`load_params`), and the document records the file, the seeds it was tuned
   on and the settings (``baseline_tuning``).

The file (JSON, :data:`FORMAT`)::

    {"format": "glove_ros.jetrover.baseline_params/1", "world": "home_objects_hard",
     "tuned_on_seeds": [4, 5, 6], "selection": "...",
     "config": {"episodes": 44, "look_frames": 3, ...},
     "settings": {"RecentK": {"k": 3}, "RecentK+retest": {"k": 8}, "LatestOverwrite": {}},
     "scores": {"RecentK": [{"params": {"k": 3}, "successes_after_drift": 96,
                            "steps_after_drift": 301.0, "per_seed": {...}}, ...]}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glove_ros.core.verify.memory_rules import BASELINE_PARAMS
from glove_ros.core.verify.retest import split_retest

__all__ = ["FORMAT", "load_params", "tune_from_docs", "write_params"]

#: The file format's name and version.
FORMAT = "glove_ros.jetrover.baseline_params/1"

#: Config keys that must agree between the tuning runs and the report run (a setting tuned
#: under another look rule or perception is not the same opponent).
CONFIG_KEYS = ("episodes", "max_steps", "look_frames", "task_start", "perception", "detector",
               "frame_size", "believed_order", "look_rule")

_SELECTION = ("per baseline, the setting with the most successes after the first drift "
              "summed over the tuning seeds, then the fewest steps after the first drift "
              "(summed); the order --sweep uses on one run")


def _swept(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The swept parameter of ``params`` (``{}`` for a rule without one)."""
    param = BASELINE_PARAMS.get(split_retest(name)[0])
    return {param: params[param]} if param and param in params else {}


def tune_from_docs(docs: Sequence[Mapping[str, Any]],
                   sources: Sequence[str] = ()) -> dict[str, Any]:
    """The frozen-settings document from ``--sweep`` result documents of one world, one per
    development seed (see the module docstring). ValueError when a document has no sweep,
    the documents disagree on the world or the config, a seed repeats, or a setting was not
    run on every seed."""
    if not docs:
        raise ValueError("no result documents to tune from: pass the JSON of one --sweep run "
                         "per development seed")
    worlds = {d.get("world", {}).get("name") for d in docs}
    if len(worlds) != 1:
        raise ValueError("the result documents are of different worlds: "
                         f"{sorted(map(str, worlds))}")
    seeds = [d.get("config", {}).get("seed") for d in docs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a seed repeats among the result documents: {seeds}")
    configs = [{k: d.get("config", {}).get(k) for k in CONFIG_KEYS} for d in docs]
    if any(c != configs[0] for c in configs):
        raise ValueError(f"the result documents were run with different settings: {configs}")
    for d, src in zip(docs, [*sources, *[""] * len(docs)][:len(docs)], strict=True):
        if not d.get("baseline_sweep"):
            raise ValueError(f"result document {src or d.get('config', {}).get('seed')} has no "
                             "baseline_sweep: run bench jetrover with --baselines and --sweep")
    names = list(docs[0]["baseline_sweep"])
    for d in docs[1:]:
        if list(d["baseline_sweep"]) != names:
            raise ValueError("the result documents swept different baselines: "
                             f"{names} vs {list(d['baseline_sweep'])}")
    settings: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        table: dict[str, dict[str, Any]] = {}
        for d, seed in zip(docs, seeds, strict=True):
            for row in d["baseline_sweep"][name]:
                params = _swept(name, row["params"])
                key = json.dumps(params, sort_keys=True)
                tasks = int(row.get("tasks_after_drift") or _tasks_after(d))
                entry = table.setdefault(key, {"params": params, "successes_after_drift": 0,
                                               "steps_after_drift": 0.0, "per_seed": {}})
                steps = float(row["steps_per_task_after_drift"]) * tasks
                entry["successes_after_drift"] += int(row["successes_after_drift"])
                entry["steps_after_drift"] += steps
                entry["per_seed"][str(seed)] = {
                    "successes_after_drift": int(row["successes_after_drift"]),
                    "steps_per_task_after_drift": float(row["steps_per_task_after_drift"]),
                    **{k: row[k] for k in ("stale_goals_after_drift", "false_alarms", "looks")
                       if k in row}}
        missing = [e["params"] for e in table.values() if len(e["per_seed"]) != len(docs)]
        if missing:
            raise ValueError(f"{name}: settings {missing} were not run on every seed")
        rows = sorted(table.values(), key=lambda e: (-e["successes_after_drift"],
                                                     e["steps_after_drift"]))
        for e in rows:
            e["steps_after_drift"] = round(e["steps_after_drift"], 3)
        settings[name] = rows[0]["params"]
        scores[name] = rows
    return {"format": FORMAT, "world": worlds.pop(), "tuned_on_seeds": sorted(seeds),
            "selection": _SELECTION, "config": configs[0], "sources": list(sources),
            "settings": settings, "scores": scores}


def _tasks_after(doc: Mapping[str, Any]) -> int:
    phases = doc.get("phases", [])
    after = phases[1:] or phases[:1]
    return sum(p["end"] - p["start"] for p in after)


def write_params(paths: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Read the ``--sweep`` result JSONs at ``paths``, tune (:func:`tune_from_docs`), write
    the frozen settings to ``out``; returns the document."""
    docs = []
    for p in paths:
        try:
            docs.append(json.loads(Path(p).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read result document {p}: {exc}") from exc
    doc = tune_from_docs(docs, [str(p) for p in paths])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def load_params(path: str | Path, world: str, config: Mapping[str, Any],
                baselines: Sequence[str]) -> dict[str, Any]:
    """The frozen settings at ``path`` for a run of ``world`` with ``config`` (the result
    document's ``config`` keys) and ``baselines``: ``{"settings": {name: params}, ...}``
    plus what the report records (file, seeds tuned on, whether this run's seed is one of
    them). ValueError when the file is unreadable or of another format or world, was tuned
    under another config, or lacks a baseline the run names."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--baseline-params: cannot read {path}: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"--baseline-params: {path} is not a {FORMAT} file (write one with "
                         "--tune-from ... --write-baseline-params)")
    if doc.get("world") != world:
        raise ValueError(f"--baseline-params: {path} was tuned on world {doc.get('world')!r}, "
                         f"this run is on {world!r}")
    tuned_cfg = doc.get("config", {})
    differ = {k: (tuned_cfg.get(k), config.get(k)) for k in CONFIG_KEYS
              if k in tuned_cfg and tuned_cfg.get(k) != config.get(k)}
    if differ:
        raise ValueError(f"--baseline-params: {path} was tuned under other settings "
                         f"(tuned, this run): {differ}")
    settings = doc.get("settings", {})
    missing = [b for b in baselines if b not in settings]
    if missing:
        raise ValueError(f"--baseline-params: {path} has no setting for {', '.join(missing)}; "
                         f"it has {', '.join(settings) or 'none'}")
    for b in baselines:
        if not isinstance(settings[b], dict):
            raise ValueError(f"--baseline-params: the setting of {b} must be an object, got "
                             f"{settings[b]!r}")
    seeds = [int(s) for s in doc.get("tuned_on_seeds", [])]
    return {"file": str(path), "tuned_on_seeds": seeds,
            "seed_in_tuning_set": config.get("seed") in seeds,
            "selection": doc.get("selection", ""),
            "settings": {b: dict(settings[b]) for b in baselines}}
