"""SynthWorld's vocabulary: background colours, glyph colours, glyph shapes, and their rasterisation.

Glyph colours are bright and saturated, backgrounds dark and muted, so a glyph stands out from any background and
no name is shared between the two palettes. Shapes are axis-aligned polygons in a unit box, rasterised with
area coverage (anti-aliased), the same way for the generator and for SimVLM's templates.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

RGB = tuple[int, int, int]

GLYPH_COLOURS: dict[str, RGB] = {
    "red": (235, 35, 35),
    "orange": (255, 145, 0),
    "yellow": (245, 230, 30),
    "green": (40, 210, 70),
    "blue": (40, 110, 255),
    "purple": (180, 70, 240),
}
BACKGROUNDS: dict[str, RGB] = {
    "navy": (20, 28, 78),
    "maroon": (92, 22, 30),
    "forest": (22, 72, 38),
    "slate": (70, 78, 90),
    "brown": (96, 64, 30),
    "charcoal": (30, 30, 30),
    "teal": (16, 86, 92),
    "plum": (78, 36, 88),
}

NAMES = ("Bruno", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Ingrid", "Jonas", "Kira", "Lukas", "Mira",
         "Nico", "Olga", "Pablo", "Quentin", "Rosa", "Soren", "Tilda", "Umar", "Vera", "Walter", "Yuri", "Zora")
"""Names a speaking world's narrator gives glyphs: words of their own (never a colour, shape or room), never drawn."""

def _star(points: int = 5, inner: float = 0.42) -> list[tuple[float, float]]:
    pts = []
    for k in range(2 * points):
        r = 1.0 if k % 2 == 0 else inner
        a = -math.pi / 2 + k * math.pi / points
        pts.append((r * math.cos(a), r * math.sin(a)))
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    return [((x - x0) / (x1 - x0), (y - y0) / (y1 - y0)) for x, y in pts]


_T = 1 / 3
SHAPES: dict[str, list[tuple[float, float]] | None] = {
    "circle": None,  # an ellipse inscribed in the box
    "square": [(0, 0), (1, 0), (1, 1), (0, 1)],
    "triangle": [(0.5, 0), (1, 1), (0, 1)],
    "diamond": [(0.5, 0), (1, 0.5), (0.5, 1), (0, 0.5)],
    "star": _star(),
    "cross": [(_T, 0), (2 * _T, 0), (2 * _T, _T), (1, _T), (1, 2 * _T), (2 * _T, 2 * _T), (2 * _T, 1),
              (_T, 1), (_T, 2 * _T), (0, 2 * _T), (0, _T), (_T, _T)],
}
SUPERSAMPLE = 8


@functools.lru_cache(maxsize=4096)
def glyph_alpha(shape: str, width: int, height: int) -> np.ndarray:
    """Coverage in [0, 1] of ``shape`` drawn to fill a ``width`` x ``height`` box (float32, anti-aliased)."""
    if shape not in SHAPES:
        raise KeyError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    s = SUPERSAMPLE
    big = Image.new("L", (width * s, height * s), 0)
    draw = ImageDraw.Draw(big)
    poly = SHAPES[shape]
    if poly is None:
        draw.ellipse((0, 0, width * s - 1, height * s - 1), fill=255)
    else:
        draw.polygon([(x * (width * s - 1), y * (height * s - 1)) for x, y in poly], fill=255)
    small = big.resize((width, height), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


MIN_FEATURE_PX = 1.5
"""A detail that tells two shapes apart must span this many pixels to be read: one pixel of blur (anti-aliasing,
chroma subsampling, resampling) plus half a pixel of sampling phase."""


@functools.lru_cache(maxsize=1)
def shape_separation() -> tuple[float, str, str]:
    """The smallest Hausdorff distance between two shapes' outlines, as a fraction of the box side, and the pair.

    This is the size of the finest detail that distinguishes any two shapes (diamond vs cross: about 0.12).
    """
    n = 240
    masks = {name: glyph_alpha(name, n, n) >= 0.5 for name in SHAPES}
    to_mask = {name: ndimage.distance_transform_edt(~m) for name, m in masks.items()}
    best = (1.0, "", "")
    names = list(SHAPES)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d = max(float(to_mask[b][masks[a]].max()), float(to_mask[a][masks[b]].max())) / n
            best = min(best, (d, a, b))
    return best


@functools.lru_cache(maxsize=1)
def readable_side() -> int:
    """Smallest glyph side, in pixels of the perceived picture, at which every pair of shapes can be told apart.

    Derived from the geometry: the finest distinguishing detail (:func:`shape_separation`) must span
    ``MIN_FEATURE_PX`` pixels, so ``side >= MIN_FEATURE_PX / separation`` (13 px for these shapes).
    """
    return math.ceil(MIN_FEATURE_PX / shape_separation()[0])
