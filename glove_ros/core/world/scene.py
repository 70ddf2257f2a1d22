"""Harder camera scenes for object worlds: each frame varies the photos the simulator paints.

On clean, large crops the shipped YOLOv3-tiny finds every object in every frame
(:mod:`glove_ros.core.world.photos`), so a camera run equals the oracle's perception. A
world's optional ``scene:`` section makes frames look like a moving robot's: every painted
photo is drawn smaller and farther, off its place, sometimes cut by the frame's edge or
partly covered, and the whole frame is darker or brighter, lower in contrast, blurred and
noisier. The detector then misses, scores low and confuses classes: the noise GLOVE must
tell from drift. Nothing here decides what is *present*: a covered or cut object still
stands there (:attr:`~glove_ros.core.world.sim.RenderInfo.counts` counts it).

YAML (every key optional; a range is ``[low, high]``, drawn uniformly per object or frame)::

    scene:
      scale: [0.5, 0.9]        # photo height x this, per object
      distance: [0.0, 0.5]     # metres added to the object's distance, per object
      jitter: 0.1              # metres, sigma of a sideways offset, per object
      edge_cut: 0.1            # probability an object is moved so the frame edge cuts it ...
      in_frame: [0.25, 0.5]    # ... leaving this share of its width in the frame
      cover: 0.15              # probability a box covers part of an object ...
      covered: [0.2, 0.45]     # ... this share of its width or height, from one side
      brightness: [0.6, 1.15]  # frame gain, per frame
      contrast: [0.6, 1.0]     # frame contrast about its mean, per frame
      blur: [0.0, 1.5]         # Gaussian blur sigma in pixels of a 640-wide frame, per frame
      noise: 6.0               # extra Gaussian noise sigma, at most (drawn 0..noise), per frame

A world without ``scene:`` renders exactly as before: :func:`scene_frame` returns the plain
painter and draws nothing. The scene's randomness has its own stream, ``(seed, 7, frame)``
or ``(seed, 8, *noise_key)``, so the same seed and key give the same frame whatever was
rendered before, and the world's own draws (missed detections, lighting) are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from glove_ros.core.world.photos import paint_photo

__all__ = ["PlainFrame", "Scene", "SceneFrame", "parse_scene", "scene_frame"]

_RANGES = ("scale", "distance", "in_frame", "covered", "brightness", "contrast", "blur")
_PROBS = ("edge_cut", "cover")
_LIMITS: dict[str, tuple[float, float]] = {
    "scale": (0.05, 2.0), "distance": (0.0, 5.0), "in_frame": (0.1, 1.0), "covered": (0.0, 0.9),
    "brightness": (0.1, 2.0), "contrast": (0.1, 2.0), "blur": (0.0, 10.0),
}


@dataclass(frozen=True)
class Scene:
    """How a world's frames vary (see the module docstring); the defaults change nothing."""

    scale: tuple[float, float] = (1.0, 1.0)
    distance: tuple[float, float] = (0.0, 0.0)
    jitter: float = 0.0
    edge_cut: float = 0.0
    in_frame: tuple[float, float] = (0.25, 0.5)
    cover: float = 0.0
    covered: tuple[float, float] = (0.2, 0.45)
    brightness: tuple[float, float] = (1.0, 1.0)
    contrast: tuple[float, float] = (1.0, 1.0)
    blur: tuple[float, float] = (0.0, 0.0)
    noise: float = 0.0

    def validate(self) -> Scene:
        """Raise ValueError naming every setting out of its accepted range; return self."""
        problems = []
        for name in _RANGES:
            lo, hi = getattr(self, name)
            a, b = _LIMITS[name]
            if not (a <= lo <= hi <= b):
                problems.append(f"{name} must be [low, high] with {a} <= low <= high <= {b}, "
                                f"got [{lo}, {hi}]")
        for name in _PROBS:
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                problems.append(f"{name} is a probability in [0, 1], got {p}")
        if self.edge_cut + self.cover > 1.0:
            problems.append(f"edge_cut + cover must be <= 1 (one occlusion per object), got "
                            f"{self.edge_cut} + {self.cover}")
        if not 0.0 <= self.jitter <= 2.0:
            problems.append(f"jitter must be in [0, 2] metres, got {self.jitter}")
        if not 0.0 <= self.noise <= 60.0:
            problems.append(f"noise must be in [0, 60], got {self.noise}")
        if problems:
            raise ValueError("scene: " + "; ".join(problems))
        return self

    def to_dict(self) -> dict[str, Any]:
        """The YAML structure; ``parse_scene(s.to_dict()) == s``."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}


def parse_scene(raw: Any, where: str = "world") -> Scene | None:
    """A world's ``scene:`` section as a validated :class:`Scene` (None when absent).

    ValueError naming the key at fault: an unknown key, a range that is not two numbers, a
    value out of its accepted range.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: scene must be a mapping of settings "
                         f"({', '.join(f.name for f in fields(Scene))}), got {raw!r}")
    known = {f.name for f in fields(Scene)}
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise ValueError(f"{where}: scene: unknown key(s) {', '.join(unknown)} (accepted: "
                         f"{', '.join(sorted(known))})")
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name in _RANGES:
            if (not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2
                    or not all(_is_num(v) for v in value)):
                raise ValueError(f"{where}: scene: {name} must be [low, high] (two numbers), "
                                 f"got {value!r}")
            values[name] = (float(value[0]), float(value[1]))
        else:
            if not _is_num(value):
                raise ValueError(f"{where}: scene: {name} must be a number, got {value!r}")
            values[name] = float(value)
    try:
        return Scene(**values).validate()
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class PlainFrame:
    """A frame without scene variation: paints photos as :func:`paint_photo` does."""

    def paint(self, img: np.ndarray, photo: np.ndarray, X: float, Y: float, height: float,
              fx: float, cx: float, cy: float, cam_h: float
              ) -> tuple[int, int, int, int] | None:
        """Paint ``photo`` (see :func:`~glove_ros.core.world.photos.paint_photo`)."""
        return paint_photo(img, photo, X, Y, height, fx, cx, cy, cam_h)

    def finish(self, img: np.ndarray) -> None:
        """Frame-wide effects: none."""


_PLAIN = PlainFrame()


class SceneFrame(PlainFrame):
    """One frame's draws of a :class:`Scene`: per object in :meth:`paint` (called in
    painting order), per frame in :meth:`finish` (called once, after all objects)."""

    def __init__(self, scene: Scene, rng: np.random.Generator) -> None:
        self.scene = scene
        self.rng = rng

    def paint(self, img: np.ndarray, photo: np.ndarray, X: float, Y: float, height: float,
              fx: float, cx: float, cy: float, cam_h: float
              ) -> tuple[int, int, int, int] | None:
        """Paint ``photo`` smaller, farther, off its place, maybe cut or covered."""
        s, r = self.scene, self.rng
        # every draw is made for every object, so one object's effects never shift another's
        scale, extra = r.uniform(*s.scale), r.uniform(*s.distance)
        side, u_occ, share_in, share_cov = r.normal(), r.random(), r.uniform(*s.in_frame), \
            r.uniform(*s.covered)
        cover_side = int(r.integers(0, 3))
        shade = r.uniform(55.0, 120.0)
        X, Y, height = X + extra, Y + s.jitter * side, height * scale
        w_img = img.shape[1]
        if u_occ < s.edge_cut and X > 0.08:
            # slide the photo sideways until only ``share_in`` of its width is in the frame
            pw = fx * height / X * photo.shape[1] / photo.shape[0]
            right = side >= 0.0
            u = (w_img + pw * (0.5 - share_in)) if right else (-pw * (0.5 - share_in))
            Y = (cx - u) * X / fx
        box = paint_photo(img, photo, X, Y, height, fx, cx, cy, cam_h)
        if box is not None and s.edge_cut <= u_occ < s.edge_cut + s.cover:
            x, y, w, h = box
            colour = np.array((shade * 0.9, shade, shade * 1.1), np.float32)
            if cover_side == 0:  # from the left
                img[y:y + h, x:x + max(1, int(round(w * share_cov)))] = colour
            elif cover_side == 1:  # from the right
                img[y:y + h, x + w - max(1, int(round(w * share_cov))):x + w] = colour
            else:  # from below: something standing in front
                img[y + h - max(1, int(round(h * share_cov))):y + h, x:x + w] = colour
        return box

    def finish(self, img: np.ndarray) -> None:
        """Frame lighting, contrast, blur and noise, in place on the float32 frame."""
        import cv2

        s, r = self.scene, self.rng
        gain, contrast = r.uniform(*s.brightness), r.uniform(*s.contrast)
        sigma = r.uniform(*s.blur) * img.shape[1] / 640.0
        noise = r.uniform(0.0, s.noise)
        if contrast != 1.0:
            mean = img.mean(axis=(0, 1), keepdims=True)
            img -= mean
            img *= np.float32(contrast)
            img += mean
        if gain != 1.0:
            img *= np.float32(gain)
        if sigma >= 0.3:
            cv2.GaussianBlur(img, (0, 0), sigma, dst=img)
        if noise > 0.0:
            img += r.standard_normal(img.shape, dtype=np.float32) * np.float32(noise)


def scene_frame(scene: Scene | None, seed: int, index: int,
                noise_key: Sequence[int] | None = None) -> PlainFrame:
    """The painter of one frame: plain when ``scene`` is None (nothing drawn), else a
    :class:`SceneFrame` drawing from ``(seed, 7, index)``, or ``(seed, 8, *noise_key)``."""
    if scene is None:
        return _PLAIN
    key = [seed, 7, index] if noise_key is None else [seed, 8, *noise_key]
    return SceneFrame(scene, np.random.default_rng(key))
