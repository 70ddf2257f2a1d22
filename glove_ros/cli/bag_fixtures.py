"""``glove-ros bag make-fixtures``: the small simulator bags the tests use.

A scripted tour of the built-in simulator, written as the robot stack would publish it
(camera frames, detections, current waypoint, transitions, world events). ROS-free, like
everything it builds on (:mod:`glove_ros.core.bag`, :mod:`glove_ros.core.world.sim`);
separate from :mod:`glove_ros.cli.bags` because it is a generator with its own constants,
not a front-end. Tests import :func:`make_fixtures` through :mod:`glove_ros.cli.bags`.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from glove_ros.core.bag.bagfile import NS, BagWriter
from glove_ros.core.bag.messages import detections_obj, image_obj, string_obj, transition_obj
from glove_ros.core.bag.typestore import make_typestore
from glove_ros.core.world.observation import LookConfig, judge_frames, look_names

__all__ = ["FIXTURES", "make_fixtures"]

#: fixture bag names -> (world, episodes)
FIXTURES = {
    "small_source": ("small", (0, 1, 2)),
    "small_drifted": ("small", (3, 4, 5, 6)),
    "nuisance_only": ("nuisance_only", (0, 2, 4, 6, 8, 10)),
}
FIXTURE_EPOCH_S = 1_760_000_000  # bag time of simulated time 0 (2025-10-09)
FIXTURE_SIZE = (96, 72)
FIXTURE_FRAMES = 3
FIXTURE_FRAME_DT = 0.5
FIXTURE_SETTLE = 1.0  # seconds between arriving (current_waypoint) and the first frame
FIXTURE_ROBOT = "fixture_rover"

#: colour detector for the fixtures' small frames (min_area scaled down from 640x480)
FIXTURE_COLOR_CONFIG = {"min_area": 12, "blur_kernel": 3, "morph_kernel": 3}


def _tour_order(world: Any, start: str) -> list[str]:
    ids = list(world.waypoint_ids)
    i = ids.index(start)
    return ids[i + 1:] + ids[: i + 1]  # every waypoint once, ending where it started


def _tour(sim: Any, episodes: Sequence[int], writer: BagWriter, detector: Any,
          look: LookConfig, checks: Counter[str]) -> None:
    """Drive ``sim`` round every waypoint each episode, writing what the robot publishes."""
    from glove_ros.core.memory.experience import Transition

    ts = writer.typestore

    def now() -> int:
        return FIXTURE_EPOCH_S * NS + int(round(sim.time * 1e6)) * 1000

    def write_transition(t: Transition, t_ns: int) -> None:
        writer.write_msg("/transitions", t_ns, transition_obj(ts, t.with_(stamp=t_ns / NS)))

    for ep in episodes:
        for ev in sim.begin_episode(ep):
            kind = "DRIFT" if ev.is_drift else "nuisance"
            writer.write_msg("/world_events", now(), string_obj(ts, f"{kind}: {ev.describe()}"))
        for target in _tour_order(sim.world, sim.last_waypoint):
            writer.write_msg("/current_waypoint", now(), string_obj(ts, ""))
            nav = sim.start_navigation(target)
            prev = sim.last_waypoint
            while not nav.done:
                sim.advance(0.1)
                if sim.last_waypoint != prev and sim.at_waypoint is not None:
                    w = sim.world.waypoint(prev)
                    write_transition(Transition(
                        prev, "navigate_to", "reached", action_arg=sim.last_waypoint,
                        robot_id=FIXTURE_ROBOT, episode_id=f"ep{ep}", context="tour",
                        pose=(w.x, w.y, w.yaw)), now())
                    prev = sim.last_waypoint
            res = nav.result
            if res is not None and res.outcome == "blocked" and res.blocked_edge:
                a, b = res.blocked_edge
                w = sim.world.waypoint(a)
                write_transition(Transition(a, "navigate_to", "blocked", action_arg=b,
                                            robot_id=FIXTURE_ROBOT, episode_id=f"ep{ep}",
                                            context="tour", pose=(w.x, w.y, w.yaw)), now())
            here = sim.at_waypoint or sim.last_waypoint
            writer.write_msg("/current_waypoint", now(), string_obj(ts, here))
            sim.wait(FIXTURE_SETTLE)
            sets, stamps = [], []
            for _ in range(look.frames):
                frame = sim.render_camera(*FIXTURE_SIZE)
                t_ns = now()
                dets = detector.detect(frame)
                painted = set(sim.last_render.colors)
                colors = look_names(dets)
                checks["frames"] += 1
                if colors != painted:
                    checks["frames_detected_differently"] += 1
                if sim.last_render.missed or sim.last_render.dropout:
                    checks["frames_with_nuisance_misses"] += 1
                writer.write_msg("/camera/image_raw", t_ns, image_obj(ts, frame, t_ns))
                writer.write_msg("/detections", t_ns + 1000,
                                 detections_obj(ts, here, dets, t_ns))
                sets.append(colors)
                stamps.append(t_ns / NS)
                sim.wait(FIXTURE_FRAME_DT)
            lk = judge_frames(sets, look, here, stamps)
            p = sim.pose
            write_transition(lk.to_transition(FIXTURE_ROBOT, f"ep{ep}", context="tour",
                                              pose=(p.x, p.y, p.yaw)),
                             int(round(lk.stamp * NS)) + 2000)
            checks["looks"] += 1
            if lk.outcome != sim.state.expected_signature(here):
                checks["looks_differing_from_truth"] += 1
        writer.write_msg("/current_waypoint", now(), string_obj(ts, ""))


def make_fixtures(outdir: str | os.PathLike[str], *, force: bool = False,
                  storage: str = "mcap") -> dict[str, Any]:
    """Write the test bags: a scripted tour of the built-in simulator.

Each episode the robot visits every waypoint once; at each it stops, grabs 3 camera
frames (96x72, rendered by the simulator, detected with the colour detector of
perception_fixture.yaml) and records what the robot stack would publish:
camera/image_raw, detections (tagged with the waypoint), current_waypoint, transitions
(one look per stay by the look rule, one navigate_to per corridor) and world_events.

  small_source    worlds/small.yaml, episodes 0-2 (before the red/blue swap)
  small_drifted   the same run continued, episodes 3-6 (the swap fires at episode 3)
  nuisance_only   worlds/nuisance_only.yaml, episodes 0,2,..,10: every nuisance, no drift

Deterministic (seeded). Also writes perception_fixture.yaml, the detector thresholds for
these small frames (give it to drift-test --color-config or perception color_config_file).
"""
    import yaml

    from glove_ros.core.world.perception import ColorBlockDetector, ColorDetectorConfig
    from glove_ros.core.world.sim import Simulator
    from glove_ros.core.world.worldfile import load_world
    from glove_ros.paths import resolve_world

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    color_cfg = replace(ColorDetectorConfig(), **FIXTURE_COLOR_CONFIG).validate()
    detector = ColorBlockDetector(color_cfg)
    cfg_path = out / "perception_fixture.yaml"
    cfg_path.write_text(
        "# Colour detector thresholds for the fixture bags' 96x72 frames (written by\n"
        "# `glove-ros bag make-fixtures`): min_area and kernels scaled down from 640x480.\n"
        + yaml.safe_dump(color_cfg.to_dict(), sort_keys=False, default_flow_style=None))
    look = LookConfig(frames=FIXTURE_FRAMES)
    ts = make_typestore()
    summary: dict[str, Any] = {"perception_config": str(cfg_path)}
    sims: dict[str, Any] = {}
    for name, (world_name, episodes) in FIXTURES.items():
        path = out / name
        if path.exists():
            if not force:
                raise ValueError(f"{path} exists; pass --force to replace the fixtures")
            shutil.rmtree(path)
        if world_name not in sims:
            sims[world_name] = Simulator(load_world(resolve_world(world_name)))
        sim = sims[world_name]
        checks: Counter[str] = Counter()
        writer = BagWriter(path, storage=storage, typestore=ts)
        try:
            _tour(sim, episodes, writer, detector, look, checks)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        size = sum(f.stat().st_size for f in path.iterdir())
        summary[name] = {"path": str(path), "bytes": size, "episodes": list(episodes),
                         "messages": dict(sorted(writer.counts.items())), **checks}
    return summary
