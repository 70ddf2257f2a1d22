"""Harder camera scenes (core/world/scene.py) and the world's ``scene:`` section.

What must hold: a world without ``scene:`` renders exactly as before (home_objects.yaml's
frames are unchanged, and a scene that varies nothing renders the same bytes); a scene's
frames are the same for the same seed and frame key whatever was rendered before, and
differ between keys; what is *present* (RenderInfo.counts) never depends on the scene;
objects are painted smaller; bad settings are refused with the key at fault.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from glove_ros.core.world.photos import available_objects
from glove_ros.core.world.scene import PlainFrame, Scene, SceneFrame, parse_scene, scene_frame
from glove_ros.core.world.sim import Simulator
from glove_ros.core.world.worldfile import World, load_world


def _need_photos(*names: str) -> None:
    missing = sorted(set(names) - set(available_objects()))
    if missing:
        pytest.skip(f"photos of {missing} not installed (requirements/photos.txt)")


def _digest(frame: np.ndarray) -> str:
    return hashlib.sha256(frame.tobytes()).hexdigest()


def _frames(world: World, waypoint: str, keys, size=(320, 240)) -> list[np.ndarray]:
    sim = Simulator(world)
    sim.teleport(waypoint)
    return [sim.render_camera(*size, noise_key=list(k)) for k in keys]


# --------------------------------------------------------------------------- parsing


def test_parse_scene_reads_ranges_and_numbers_and_round_trips():
    s = parse_scene({"scale": [0.7, 1], "jitter": 0.1, "cover": 0.2, "noise": 4})
    assert s == Scene(scale=(0.7, 1.0), jitter=0.1, cover=0.2, noise=4.0)
    assert parse_scene(s.to_dict()) == s
    assert parse_scene(None) is None


@pytest.mark.parametrize("raw, message", [
    ({"zoom": [1, 2]}, r"unknown key\(s\) zoom \(accepted: blur, brightness"),
    ({"scale": 0.5}, r"scale must be \[low, high\] \(two numbers\)"),
    ({"scale": [0.9, 0.5]}, r"scale must be \[low, high\] with 0.05 <= low <= high <= 2.0"),
    ({"cover": 1.5}, r"cover is a probability in \[0, 1\]"),
    ({"edge_cut": 0.6, "cover": 0.6}, r"edge_cut \+ cover must be <= 1"),
    ({"jitter": "a lot"}, r"jitter must be a number"),
    ([0.5, 0.9], r"scene must be a mapping"),
])
def test_bad_scene_settings_are_refused_naming_the_key(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_scene(raw, "world x.yaml")


def test_the_world_file_carries_its_scene_and_round_trips():
    hard = load_world("home_objects_hard")
    assert hard.scene is not None and hard.scene.scale[1] <= 1.0
    assert World.from_dict(hard.to_dict()) == hard
    plain = load_world("home_objects")
    assert plain.scene is None and "scene" not in plain.to_dict()
    # the hard world is home_objects with a scene: same rooms, objects and events
    assert dataclasses.replace(hard, name=plain.name, description=plain.description,
                               scene=None) == plain
    with pytest.raises(ValueError, match="scene: unknown key"):
        World.from_dict({**plain.to_dict(), "scene": {"fog": 1}})


# --------------------------------------------------------------------------- rendering


def test_no_scene_draws_nothing_and_paints_like_before():
    assert isinstance(scene_frame(None, 1, 0), PlainFrame)
    assert not isinstance(scene_frame(None, 1, 0), SceneFrame)
    assert isinstance(scene_frame(Scene(), 1, 0, [3, 4]), SceneFrame)


def test_home_objects_frames_are_unchanged_by_a_scene_that_varies_nothing():
    """home_objects.yaml has no scene; a scene whose every setting is neutral renders the
    very same bytes, so the hook leaves a world without ``scene:`` as it was."""
    _need_photos("cup", "person", "cat")
    plain = load_world("home_objects")
    neutral = dataclasses.replace(plain, scene=Scene())
    keys = [(0, 2, 0), (0, 2, 1), (5, 1, 0)]
    for wp in ("kitchen", "office"):
        a = [_digest(f) for f in _frames(plain, wp, keys)]
        b = [_digest(f) for f in _frames(neutral, wp, keys)]
        assert a == b, wp


def test_scene_frames_are_deterministic_per_seed_and_frame_key():
    _need_photos("cup", "person", "cat")
    hard = load_world("home_objects_hard")
    keys = [(0, 1, 0), (0, 1, 1), (7, 3, 2)]
    first = [_digest(f) for f in _frames(hard, "kitchen", keys)]
    # the same keys after other frames were rendered, in another order: the same pixels
    sim = Simulator(hard)
    sim.teleport("kitchen")
    for k in range(3):
        sim.render_camera(320, 240, noise_key=[9, 9, k])
    again = [_digest(sim.render_camera(320, 240, noise_key=list(k))) for k in reversed(keys)]
    assert again[::-1] == first
    assert len(set(first)) == 3  # every key its own frame
    # without a key the running frame counter decides: two simulators agree frame by frame
    a, b = Simulator(hard), Simulator(hard)
    a.teleport("office")
    b.teleport("office")
    assert [_digest(a.render_camera(160, 120)) for _ in range(2)] == \
        [_digest(b.render_camera(160, 120)) for _ in range(2)]
    # another seed, other draws
    other = Simulator(hard, seed=hard.seed + 1)
    other.teleport("kitchen")
    assert _digest(other.render_camera(320, 240, noise_key=list(keys[0]))) != first[0]


def test_scene_varies_pixels_and_sizes_but_never_what_is_present():
    _need_photos("cup", "person", "cat")
    plain, hard = load_world("home_objects"), load_world("home_objects_hard")
    heights = {"plain": [], "hard": []}
    for name, world in (("plain", plain), ("hard", hard)):
        sim = Simulator(world)
        sim.teleport("kitchen")
        for k in range(12):
            frame = sim.render_camera(320, 240, noise_key=[1, 0, k])
            assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
            info = sim.last_render
            assert info.counts == {"cup": 1}, (name, k, info.counts)  # present either way
            heights[name] += [o.height for o in info.objects if o.object == "cup"]
    # scale [0.7, 1.0] and up to 0.3 m farther: the hard world's cups are smaller
    assert np.mean(heights["hard"]) < 0.95 * np.mean(heights["plain"]), heights
    assert max(heights["hard"]) <= max(heights["plain"]) + 1
    assert min(heights["hard"]) < min(heights["plain"])


def test_occlusion_covers_part_of_the_photo_and_finish_changes_the_frame():
    photo = np.full((100, 50, 3), 200, np.uint8)
    img = np.zeros((240, 320, 3), np.float32)
    covered = SceneFrame(Scene(cover=1.0, covered=(0.4, 0.4)), np.random.default_rng(1))
    box = covered.paint(img, photo, 1.0, 0.0, 0.5, 100.0, 160.0, 120.0, 0.25)
    x, y, w, h = box
    patch = img[y:y + h, x:x + w]
    share = float((patch == 200).all(axis=2).mean())
    assert 0.5 < share < 0.7, share  # 40% of the photo is hidden behind the cover
    for seed in range(4):  # both edges: a quarter of the 25 px wide photo stays in
        cut = SceneFrame(Scene(edge_cut=1.0, in_frame=(0.25, 0.25)), np.random.default_rng(seed))
        img2 = np.zeros((240, 320, 3), np.float32)
        x2, _, w2, _ = cut.paint(img2, photo, 1.0, 0.0, 0.5, 100.0, 160.0, 120.0, 0.25)
        assert (x2 == 0 or x2 + w2 == 320) and 5 <= w2 <= 8, (seed, x2, w2)
    flat = np.full((24, 32, 3), 100.0, np.float32)
    SceneFrame(Scene(brightness=(0.5, 0.5)), np.random.default_rng(3)).finish(flat)
    assert np.allclose(flat, 50.0)
