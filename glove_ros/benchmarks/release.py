"""The release evaluation: the drift suite once, on fresh seeds nobody tuned on.

``glove-ros bench release`` runs the generated drift suite (:mod:`glove_ros.benchmarks.suite`)
with every method of ``bench/scenarios/suite_release.yaml`` (GLOVE and its ablations, every
baseline and every baseline's ``<Rule>+retest`` fair arm, the bounds and references) on all
four families, on a report seed range that nobody has seen:

* the range is derived from the release's commit (``git rev-parse HEAD``): it starts at
  ``100000 + int(sha[:6], 16) % 800000``, above every development and earlier report range
  (0-99, 1000-1019, 2000-2059, 3000-5099, every range in ``bench/scenarios/*.yaml``), so it
  is fixed before anyone runs it and nobody chooses it; ``--seeds FIRST:END`` replaces it,
  recorded as drawn by hand;
* the code is frozen: a tree with uncommitted changes (tracked files anywhere, untracked
  files under ``glove_ros/`` or ``bench/scenarios/``) is refused unless ``--allow-dirty``,
  which the result records;
* it runs once: a result for the same commit is not overwritten unless ``--force`` (recorded),
  and a range that overlaps an earlier release's range in the output folder is refused.

The baselines' parameters are swept on the scenario's tune seeds (development seeds) as in
the suite, on a wider grid than the development suites (the release scenario states its
size). The JSON (``<out>/release-<sha12>.json``, with ``.txt`` (the table) and ``.png``) is
the suite's document plus a ``release`` record: commit, dirty tree, seed range and how it
was derived, date, wall time, CPU count, the scenario file's SHA-256, the development effort
on each side (worlds searched for GLOVE, settings x tune worlds for every baseline) and the
statement that every earlier report range is a development range now. Commit it as written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from glove_ros.benchmarks import suite

__all__ = [
    "DEVELOPMENT_RANGES",
    "GLOVE_DEVELOPMENT",
    "GitState",
    "add_arguments",
    "baseline_effort",
    "derive_seeds",
    "development_effort",
    "earlier_releases",
    "estimate",
    "git_state",
    "known_seed_ranges",
    "main",
    "parse_seeds",
    "release_config",
    "result_stem",
]

DEFAULT_SCENARIO = "suite_release"
DEFAULT_OUT = Path("bench/results/release")
#: the commit-derived range starts in [SEED_FLOOR, SEED_FLOOR + SEED_SPAN)
SEED_FLOOR = 100_000
SEED_SPAN = 800_000
#: every seed range used before the first release: the project's development ranges and the
#: report ranges that steered the work (issue 29), development ranges now
DEVELOPMENT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0, 100, "development (tune seeds, the detector's defaults; suite.yaml's header)"),
    (1000, 1020, "suite.yaml's report seeds: steered the work, development now (issue 29)"),
    (2000, 2060, "suite_confirm.yaml's report seeds: steered the work, development now"),
    (3000, 5100, "development (the detector's defaults, suite_fair.yaml; suite.yaml's header)"),
)
#: GLOVE's side of the development effort, as recorded in suite.yaml's header and issue 29
#: (the number of code versions run on these worlds was not recorded)
GLOVE_DEVELOPMENT: dict[str, Any] = {
    "development_seed_ranges": [[0, 100], [3000, 5100]],
    "steering_report_ranges": [
        {"scenario": "bench/scenarios/suite.yaml", "seeds": [1000, 1020], "families": 4,
         "regenerated": 15},
        {"scenario": "bench/scenarios/suite_confirm.yaml", "seeds": [2000, 2060],
         "families": 2, "regenerated": 8},
    ],
    "source": "suite.yaml's header (development seeds) and issue 29 (regenerations)",
}
STATEMENT = (
    "Every seed range used before this release is a development range now: 0-99 and "
    "3000-5099 (development), 1000-1019 (suite.yaml's report seeds) and 2000-2059 "
    "(suite_confirm.yaml's), which steered the work (issue 29), and the ranges of every "
    "earlier release. This release's report range was derived from the commit (or drawn by "
    "hand, as recorded) after the code was frozen; the result is committed as written.")
# tracked changes anywhere make a tree dirty; untracked files only where the run reads them
_READ_PREFIXES = ("glove_ros/", "bench/scenarios/")


# --------------------------------------------------------------------------- seeds


def derive_seeds(sha: str, width: int) -> tuple[int, int]:
    """The report range ``[first, first + width)`` a commit draws: ``first = 100000 +
    int(sha[:6], 16) % 800000``, above every development range."""
    s = str(sha).strip().lower()
    if len(s) < 6 or any(c not in "0123456789abcdef" for c in s):
        raise ValueError(f"a commit sha must be at least 6 hex digits, got {sha!r}")
    if width < 1:
        raise ValueError(f"the release needs at least one report world, got {width}")
    first = SEED_FLOOR + int(s[:6], 16) % SEED_SPAN
    return first, first + int(width)


def parse_seeds(text: str) -> tuple[int, int]:
    """``FIRST:END`` (end exclusive) -> ``(first, end)``."""
    parts = str(text).split(":")
    try:
        first, end = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"--seeds must be FIRST:END (integers, end exclusive), got {text!r}"
                         ) from None
    if not 0 <= first < end:
        raise ValueError(f"--seeds {text}: needs 0 <= FIRST < END")
    return first, end


def _ranges_of(data: Any) -> list[tuple[int, int]]:
    """Seed ranges a scenario mapping names: ``tune_seeds`` / ``report_seeds`` as
    ``[first, end)``, ``seeds: [..]`` and ``seed: n`` as single seeds (nested too)."""
    out: list[tuple[int, int]] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            if key in ("tune_seeds", "report_seeds") and isinstance(value, list) \
                    and len(value) == 2 and all(isinstance(v, int) for v in value):
                out.append((int(value[0]), int(value[1])))
            elif key == "seeds" and isinstance(value, list):
                out += [(int(v), int(v) + 1) for v in value if isinstance(v, int)]
            elif key == "seed" and isinstance(value, int):
                out.append((value, value + 1))
            else:
                out += _ranges_of(value)
    elif isinstance(data, list):
        for value in data:
            out += _ranges_of(value)
    return out


def known_seed_ranges(scenario_dir: Path | None = None) -> list[tuple[int, int, str]]:
    """Every range the release must avoid: :data:`DEVELOPMENT_RANGES` and every seed range
    named in ``bench/scenarios/*.yaml`` (each as ``(first, end, where)``)."""
    out = list(DEVELOPMENT_RANGES)
    if scenario_dir is None:
        from glove_ros.paths import share_dirs

        scenario_dir = next((d / "bench" / "scenarios" for d in share_dirs()
                             if (d / "bench" / "scenarios").is_dir()), None)
    if scenario_dir is not None:
        for path in sorted(Path(scenario_dir).glob("*.yaml")):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ValueError(f"{path}: cannot read its seed ranges ({exc})") from None
            out += [(a, b, f"{path.name}") for a, b in _ranges_of(data)]
    return out


def _overlaps(rng: tuple[int, int], ranges: Sequence[tuple[int, int, str]]
              ) -> list[tuple[int, int, str]]:
    return [r for r in ranges if r[0] < rng[1] and rng[0] < r[1]]


# --------------------------------------------------------------------------- git


@dataclass(frozen=True)
class GitState:
    """The commit the code runs from and what in the tree differs from it."""

    sha: str
    dirty_paths: tuple[str, ...] = ()

    @property
    def dirty(self) -> bool:
        return bool(self.dirty_paths)


def git_state(root: Path | None = None) -> GitState:
    """HEAD's sha and the dirty paths of the checkout glove_ros runs from (tracked changes
    anywhere; untracked files under ``glove_ros/`` and ``bench/scenarios/``)."""
    from glove_ros.paths import checkout_root

    root = root or checkout_root()
    if root is None:
        raise ValueError("bench release needs the git checkout glove_ros runs from (its commit "
                         "names the release and draws the seeds); this is a pip or ROS "
                         "install: run it from a clone")
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=all"], check=True, capture_output=True,
                                text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ValueError(f"bench release needs a git checkout with a commit; git failed in "
                         f"{root}: {exc}") from None
    dirty = []
    for line in status.splitlines():
        if not line.strip():
            continue
        code, path = line[:2], line[3:]
        if code != "??" or path.startswith(_READ_PREFIXES):
            dirty.append(path)
    return GitState(sha=sha, dirty_paths=tuple(dirty))


# --------------------------------------------------------------------------- the plan


def _report_width(config: suite.SuiteConfig) -> int:
    """Report worlds the range must hold: the scenario's range width, or more where a
    family asks for more (``report: N``)."""
    width = config.report_seeds[1] - config.report_seeds[0]
    for fam in config.families:
        n = (config.family.get(fam) or {}).get("report")
        if n is not None:
            width = max(width, int(n))
    return width


def release_config(config: suite.SuiteConfig, report: tuple[int, int]) -> suite.SuiteConfig:
    """The scenario with its report range replaced by the release's."""
    return replace(config, report_seeds=(int(report[0]), int(report[1]))).validate()


def _family_sweep(config: suite.SuiteConfig, fam: str) -> dict[str, tuple[Any, ...]]:
    opts = config.family.get(fam) or {}
    return {**config.sweep, **{k: tuple(v) for k, v in (opts.get("sweep") or {}).items()}}


def _family_ranges(config: suite.SuiteConfig, fam: str) -> tuple[int, int]:
    """(tune worlds, report worlds) of a family, exactly as the suite runs them."""
    t_end, r_end = suite._family_ranges(config, config.family.get(fam) or {}, None, None)
    return t_end - config.tune_seeds[0], r_end - config.report_seeds[0]


def baseline_effort(config: suite.SuiteConfig) -> dict[str, Any]:
    """The baselines' side: per family and baseline, settings x tune worlds."""
    from glove_ros.core.verify.memory_rules import BASELINE_PARAMS
    from glove_ros.core.verify.retest import split_retest

    fams: dict[str, Any] = {}
    total = 0
    for fam in config.families:
        tune, _ = _family_ranges(config, fam)
        sweep = _family_sweep(config, fam)
        per: dict[str, Any] = {}
        for name in config.baselines:
            base = split_retest(name)[0]
            settings = len(sweep.get(base, ())) if BASELINE_PARAMS.get(base) else 0
            settings = max(1, settings)
            per[name] = {"settings": settings, "tune_worlds": tune,
                         "world_runs": settings * tune}
            total += settings * tune
        fams[fam] = {"tune_worlds": tune, "baselines": per,
                     "world_runs": sum(p["world_runs"] for p in per.values())}
    swept = [p["world_runs"] for f in fams.values() for b, p in f["baselines"].items()
             if p["settings"] > 1]
    return {"families": fams, "world_runs": total,
            "per_swept_baseline_and_family": [min(swept), max(swept)] if swept else [0, 0]}


def development_effort(config: suite.SuiteConfig) -> dict[str, Any]:
    """Development effort on each side: worlds searched for GLOVE, sweep size for the
    baselines (``settings x tune worlds``), and the development suites' sweep for scale."""
    dev = [r[1] - r[0] for r in GLOVE_DEVELOPMENT["development_seed_ranges"]]
    steer = GLOVE_DEVELOPMENT["steering_report_ranges"]
    steer_seeds = sum(s["seeds"][1] - s["seeds"][0] for s in steer)
    steer_runs = sum((s["seeds"][1] - s["seeds"][0]) * s["families"] * s["regenerated"]
                     for s in steer)
    return {
        "glove": {
            **GLOVE_DEVELOPMENT,
            "development_seeds": sum(dev),
            "steering_report_seeds": steer_seeds,
            "distinct_seeds_searched": sum(dev) + steer_seeds,
            "report_world_runs_read": steer_runs,
            "note": ("distinct seeds is a lower bound on GLOVE's world runs: each development "
                     "seed ran under many code versions, not counted; report world runs "
                     "read = seeds x families x regenerations of the report suites"),
        },
        "baselines_release": baseline_effort(config),
        "baselines_development_suites": {
            "settings": 3, "tune_worlds": 10, "world_runs_per_baseline_and_family": 30,
            "source": "bench/scenarios/suite.yaml, suite_confirm.yaml (suite_fair.yaml: "
                      "the same grid)"},
    }


def plan(config: suite.SuiteConfig) -> dict[str, Any]:
    """World runs per family (tune sweep + report), as the suite will run them."""
    out: dict[str, Any] = {}
    eff = baseline_effort(config)
    for fam in config.families:
        _, report = _family_ranges(config, fam)
        methods = (len(suite.GLOVE_METHODS) + len(suite.ABLATIONS.get(fam, ()))
                   + len(config.baselines) + len(suite.BOUNDS)
                   + len(suite.REFERENCES.get(fam, ())))
        out[fam] = {"tune_runs": eff["families"][fam]["world_runs"], "methods": methods,
                    "report_worlds": report, "report_runs": methods * report}
    return out


def _makespan(costs: Sequence[float], jobs: int) -> float:
    """Wall time of tasks taken in order by ``jobs`` workers, each taking the next task
    when free (how :func:`suite.run_suite_parallel`'s process pool runs families)."""
    free = [0.0] * max(1, min(jobs, len(costs) or 1))
    for c in costs:
        i = free.index(min(free))
        free[i] += c
    return max(free)


def estimate(config: suite.SuiteConfig, seeds: int, jobs: int) -> dict[str, Any]:
    """Time the release's plan before running it: every family on its first ``seeds`` tune
    and report seeds of the scenario's own ranges (development seeds, never the release's),
    CPU seconds per world run, extrapolated to the plan's world runs; the wall time on
    ``jobs`` free cores takes families in order, one process each."""
    if seeds < 1:
        raise ValueError(f"--estimate needs at least 1 seed, got {seeds}")
    lo, hi = config.report_seeds
    if not any(a <= lo and hi <= b for a, b, _ in DEVELOPMENT_RANGES):
        raise ValueError(f"the scenario's report seeds {lo}-{hi - 1} are not development seeds "
                         "(" + ", ".join(f"{a}-{b - 1}" for a, b, _ in DEVELOPMENT_RANGES)
                         + "): --estimate runs them, so they must be")
    full = plan(config)
    small = plan(replace(config, tune_seeds=(config.tune_seeds[0],
                                             min(config.tune_seeds[1],
                                                 config.tune_seeds[0] + seeds)),
                         report_seeds=(lo, min(hi, lo + seeds))))
    fams: dict[str, Any] = {}
    for fam in config.families:
        t0 = time.process_time()
        doc = suite.run_suite(config, families=[fam], tune=seeds, report=seeds, quiet=True)
        cpu = time.process_time() - t0
        if fam not in doc["families"]:
            fams[fam] = {"skipped": True}
            continue
        runs = small[fam]["tune_runs"] + small[fam]["report_runs"]
        per = cpu / runs
        total = full[fam]["tune_runs"] + full[fam]["report_runs"]
        fams[fam] = {"timed_runs": runs, "cpu_s": cpu, "cpu_s_per_run": per,
                     "planned_runs": total, "planned_cpu_s": per * total}
    costs = [f["planned_cpu_s"] for f in fams.values() if "planned_cpu_s" in f]
    return {"seeds": seeds, "families": fams, "cpu_s": sum(costs), "jobs": jobs,
            "wall_s_on_free_cores": _makespan(costs, jobs)}


# --------------------------------------------------------------------------- earlier results


def result_stem(sha: str) -> str:
    """``release-<first 12 hex digits of the commit>``."""
    return f"release-{sha[:12]}"


def earlier_releases(out: Path) -> list[dict[str, Any]]:
    """Every release result in ``out``: its file, commit and report range."""
    found = []
    for path in sorted(Path(out).glob("release-*.json")):
        try:
            rel = json.loads(path.read_text(encoding="utf-8"))["release"]
            seeds = [int(x) for x in rel["seeds"]["report"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable release result ({exc!r}); move it out "
                             f"of {out} or repair it") from None
        found.append({"file": path.name, "commit": rel.get("commit"), "report_seeds": seeds,
                      "date": rel.get("date")})
    return found


# --------------------------------------------------------------------------- output


def format_release(doc: Mapping[str, Any]) -> str:
    """The release record's lines, then the suite's table."""
    rel = doc["release"]
    seeds = rel["seeds"]
    eff = rel["development_effort"]
    g, b = eff["glove"], eff["baselines_release"]
    lo, hi = b["per_swept_baseline_and_family"]
    lines = [
        f"Release evaluation of commit {rel['commit']}"
        + (" (DIRTY tree: " + ", ".join(rel["dirty_paths"][:5]) + ")" if rel["dirty"] else ""),
        f"report seeds {seeds['report'][0]}-{seeds['report'][1] - 1} ({seeds['derived']}: "
        f"{seeds['rule']}); baselines tuned on seeds {seeds['tune'][0]}-{seeds['tune'][1] - 1}",
        f"{rel['date']}, {rel['wall_s']:.0f} s on {rel['cpu_count']} CPUs, --jobs {rel['jobs']}"
        + (", --force (replaced an earlier result of this commit)" if rel["forced"] else ""),
        f"development effort: GLOVE {g['distinct_seeds_searched']} distinct seeds searched "
        f"(+ {g['report_world_runs_read']} report world runs read over "
        f"{sum(s['regenerated'] for s in g['steering_report_ranges'])} regenerations); "
        f"baselines {b['world_runs']} tune world runs in all, {lo}-{hi} per swept baseline "
        "and family (settings x tune worlds)",
        rel["statement"],
        "",
    ]
    return "\n".join(lines) + suite.format_table(doc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``glove-ros bench release``."""
    parser.add_argument("--scenario", default=DEFAULT_SCENARIO,
                        help="release scenario, a path or a bundled name (default: "
                        "%(default)s, bench/scenarios/suite_release.yaml); its report range "
                        "only gives the number of report worlds")
    parser.add_argument("--seeds", metavar="FIRST:END",
                        help="report seeds drawn by hand (end exclusive) instead of the "
                        "commit-derived range; recorded as drawn by hand")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="run although the tree has uncommitted changes (recorded)")
    parser.add_argument("--force", action="store_true",
                        help="replace an earlier release result of the same commit (recorded)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="families run in parallel processes (default: %(default)s; the "
                        "results do not depend on it)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output folder "
                        "(default: %(default)s)")
    parser.add_argument("--plan", action="store_true",
                        help="print the seed range, world runs and development effort; run "
                        "nothing, write nothing")
    parser.add_argument("--estimate", type=int, metavar="N",
                        help="with --plan: time every family on its first N tune and report "
                        "seeds of the scenario's own (development) ranges and extrapolate "
                        "the release's CPU and wall time")
    parser.add_argument("--json", action="store_true", help="print the JSON document")


def main(args: argparse.Namespace) -> int:
    """``glove-ros bench release``."""
    from glove_ros.paths import resolve_bundled

    jobs = int(getattr(args, "jobs", 2) or 0)
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    if getattr(args, "estimate", None) and not args.plan:
        raise ValueError("--estimate goes with --plan (it runs development seeds only)")
    scenario = resolve_bundled(str(args.scenario), "bench/scenarios")
    config = suite.load_suite(scenario)
    width = _report_width(config)
    state = git_state()
    if state.dirty and not args.allow_dirty and not args.plan:
        shown = ", ".join(state.dirty_paths[:8]) + (" ..." if len(state.dirty_paths) > 8 else "")
        raise ValueError(f"the tree differs from commit {state.sha[:12]} ({shown}): a release "
                         "runs on committed code; commit first, or pass --allow-dirty (recorded "
                         "in the result)")
    if args.seeds:
        report = parse_seeds(args.seeds)
        derived, rule = "drawn by hand", f"--seeds {args.seeds}"
    else:
        report = derive_seeds(state.sha, width)
        derived = "commit"
        rule = (f"first = {SEED_FLOOR} + int(sha[:6], 16) % {SEED_SPAN} = "
                f"{SEED_FLOOR} + {int(state.sha[:6], 16)} % {SEED_SPAN}; "
                f"width {width} (the scenario's report worlds)")
    out = Path(args.out)
    stem = result_stem(state.sha)
    earlier = earlier_releases(out)
    same = [e for e in earlier if e["commit"] == state.sha or e["file"] == f"{stem}.json"]
    if same and not args.force and not args.plan:
        raise ValueError(f"{out / same[0]['file']} already holds the release of commit "
                         f"{state.sha[:12]}: a release runs once; pass --force to replace it "
                         "(recorded)")
    avoid = known_seed_ranges(scenario.parent if scenario.parent.name == "scenarios" else None)
    avoid += [(e["report_seeds"][0], e["report_seeds"][1], f"earlier release {e['file']}")
              for e in earlier if e not in same]
    avoid += [(*config.tune_seeds, "the scenario's tune seeds")]
    clash = _overlaps(report, avoid)
    if clash:
        raise ValueError(f"report seeds {report[0]}-{report[1] - 1} overlap seeds used before: "
                         + "; ".join(f"{a}-{b - 1} ({w})" for a, b, w in clash[:5])
                         + f"; a release needs fresh seeds (commit-derived ones start at "
                         f"{SEED_FLOOR})")
    dev_config, config = config, release_config(config, report)
    effort = development_effort(config)
    if args.plan:
        doc = {"commit": state.sha, "dirty_paths": list(state.dirty_paths),
               "report_seeds": list(report), "derived": derived, "rule": rule,
               "tune_seeds": list(config.tune_seeds), "world_runs": plan(config),
               "development_effort": effort, "earlier_releases": earlier}
        if getattr(args, "estimate", None):
            doc["estimate"] = estimate(dev_config, int(args.estimate), jobs)
        print(json.dumps(doc, indent=1))
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.perf_counter()
    doc = suite.run_suite_parallel(config, quiet=args.json, jobs=jobs)
    wall = time.perf_counter() - t0
    doc["benchmark"] = "release"
    doc["scenario_file"] = str(args.scenario)
    doc["release"] = {
        "commit": state.sha,
        "dirty": state.dirty,
        "dirty_paths": list(state.dirty_paths),
        "allow_dirty": bool(args.allow_dirty),
        "forced": bool(same),
        "seeds": {"report": list(report), "tune": list(config.tune_seeds),
                  "derived": derived, "rule": rule},
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": wall,
        "cpu_count": os.cpu_count(),
        "jobs": jobs,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "command": " ".join(["glove-ros", *sys.argv[1:]]),
        "scenario_sha256": hashlib.sha256(scenario.read_bytes()).hexdigest(),
        "development_ranges": [[a, b, w] for a, b, w in DEVELOPMENT_RANGES],
        "earlier_releases": [e for e in earlier if e not in same],
        "world_runs": plan(config),
        "development_effort": effort,
        "statement": STATEMENT,
    }
    out.mkdir(parents=True, exist_ok=True)
    jpath, tpath, ppath = (out / f"{stem}{ext}" for ext in (".json", ".txt", ".png"))
    jpath.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    table = format_release(doc)
    tpath.write_text(table + "\n", encoding="utf-8")
    suite.write_plot(doc, ppath)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(table)
        print(f"wrote {jpath}, {tpath} and {ppath}")
    return 0
