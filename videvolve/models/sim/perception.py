"""SimVLM's eyes: read one frame (or one contact-sheet cell) from its pixels alone.

Steps: the background is the palette colour most pixels are close to; the glyph is the largest connected blob far
from it; its colour is the palette colour nearest its core pixels; its coverage map (alpha) is matched against
every shape's anti-aliased template. A glyph whose box is smaller than the readable side (derived from the shapes'
geometry, see :func:`readable_side`) is reported ``unclear``: the pixels are too few to tell its shape.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Literal

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict
from scipy import ndimage

from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, SHAPES, glyph_alpha, readable_side

BG_TOLERANCE = 40.0
"""A pixel within this RGB distance of a background colour counts as that background."""
BG_MIN_SHARE = 0.5
"""Below this share of background-like pixels the picture is not a SynthWorld frame (real footage)."""
FG_THRESHOLD = 55.0
"""A pixel this far (RGB) from the measured background belongs to the foreground."""
SIDE_ALPHA = 0.25
"""The glyph's box spans the rows and columns where its coverage reaches this value."""
MIN_BLOB_MASS = 2.0
BG_SAMPLE = 4096
"""A blob with less coverage than this (in pixels) is noise, not a glyph."""

_BG_NAMES = list(BACKGROUNDS)
_BG_RGB = np.array([BACKGROUNDS[n] for n in _BG_NAMES], dtype=np.float32)
_GLYPH_NAMES = list(GLYPH_COLOURS)
_GLYPH_RGB = np.array([GLYPH_COLOURS[n] for n in _GLYPH_NAMES], dtype=np.float32)


class Percept(BaseModel):
    """What one picture shows (immutable: percepts are shared by the memo of :func:`perceive`)."""

    model_config = ConfigDict(frozen=True)

    background: str | None
    """Background colour name; None when the picture is not a solid SynthWorld background."""
    glyph: Literal["none", "clear", "unclear"]
    colour: str | None = None
    shape: str | None = None
    side: float = 0.0
    """Size of the glyph's box in the perceived picture, pixels."""
    bbox: tuple[int, int, int, int] | None = None

    @property
    def name(self) -> str | None:
        """'orange star' when the glyph is read clearly, else None."""
        return f"{self.colour} {self.shape}" if self.glyph == "clear" else None

    def describe(self) -> str:
        """One short sentence, as a VLM would say it."""
        if self.background is None:
            return "unclear: not a scene I can read"
        if self.glyph == "none":
            return f"{self.background} background, no glyph"
        if self.glyph == "unclear":
            return f"{self.background} background, a glyph too small to read (unclear)"
        article = "an" if str(self.colour)[0] in "aeiou" else "a"
        return f"{self.background} background, {article} {self.colour} {self.shape}"


def _background(pixels: np.ndarray) -> tuple[str | None, np.ndarray]:
    if len(pixels) > BG_SAMPLE:  # a regular subsample is plenty to find the dominant colour
        pixels = pixels[:: len(pixels) // BG_SAMPLE]
    diff = pixels[:, None, :] - _BG_RGB[None, :, :]
    dist2 = np.einsum("nkc,nkc->nk", diff, diff)
    nearest = dist2.argmin(axis=1)
    close = dist2[np.arange(len(pixels)), nearest] < BG_TOLERANCE**2
    if close.mean() < BG_MIN_SHARE:
        return None, np.median(pixels, axis=0)
    counts = np.bincount(nearest[close], minlength=len(_BG_NAMES))
    k = int(counts.argmax())
    return _BG_NAMES[k], np.median(pixels[close & (nearest == k)], axis=0)


def _match_shape(alpha: np.ndarray) -> str:
    """The shape whose template, fitted to the blob's extent, differs least from its coverage map."""
    width = float(alpha.max(axis=0).sum())
    height = float(alpha.max(axis=1).sum())
    ys, xs = np.nonzero(alpha > 0.02)
    cy = float((alpha[ys, xs] * ys).sum() / alpha[ys, xs].sum())
    cx = float((alpha[ys, xs] * xs).sum() / alpha[ys, xs].sum())
    best, best_err = "", np.inf
    for w in {max(2, round(width) + d) for d in (-1, 0, 1)}:
        for h in {max(2, round(height) + d) for d in (-1, 0, 1)}:
            for shape in SHAPES:
                tmpl = glyph_alpha(shape, w, h)
                ty, tx = np.nonzero(tmpl > 0.02)
                tcy = float((tmpl[ty, tx] * ty).sum() / tmpl[ty, tx].sum())
                tcx = float((tmpl[ty, tx] * tx).sum() / tmpl[ty, tx].sum())
                oy, ox = round(cy - tcy), round(cx - tcx)
                canvas = np.zeros_like(alpha)
                y0, x0 = max(oy, 0), max(ox, 0)
                y1, x1 = min(oy + h, alpha.shape[0]), min(ox + w, alpha.shape[1])
                if y1 <= y0 or x1 <= x0:
                    continue
                canvas[y0:y1, x0:x1] = tmpl[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
                err = float(np.abs(canvas - alpha).sum())
                if err < best_err:
                    best, best_err = shape, err
    return best


MEMO_SIZE = 200_000
"""Percepts remembered by picture content (a few hundred bytes each): a frame shown again is read again for free."""
_memo: OrderedDict[bytes, Percept] = OrderedDict()
_memo_lock = threading.Lock()


def perceive(image: Image.Image | np.ndarray) -> Percept:
    """Read one picture: background colour, and the glyph's colour and shape (or ``unclear``, or ``none``).

    Perception is a pure function of the pixels, so it is remembered by a digest of them: the candidates the gate
    compares show the same frames over and over, and only the first sighting of a picture costs CPU.
    """
    arr = np.ascontiguousarray(image.convert("RGB") if isinstance(image, Image.Image) else image)
    key = hashlib.blake2b(arr.tobytes(), digest_size=16, person=f"{arr.shape}{arr.dtype}".encode()[:16]).digest()
    with _memo_lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
            return hit
    percept = _perceive(np.asarray(arr, dtype=np.float32))
    with _memo_lock:
        _memo[key] = percept
        if len(_memo) > MEMO_SIZE:
            _memo.popitem(last=False)
    return percept


def _perceive(arr: np.ndarray) -> Percept:
    h, w = arr.shape[:2]
    pixels = arr.reshape(-1, 3)
    background, bg_rgb = _background(pixels)
    if background is None:
        return Percept(background=None, glyph="unclear")
    delta = arr - bg_rgb
    dist = np.sqrt(np.einsum("hwc,hwc->hw", delta, delta))
    labels, n = ndimage.label(dist > FG_THRESHOLD, structure=np.ones((3, 3)))
    if n == 0:
        return Percept(background=background, glyph="none")
    masses = ndimage.sum(dist, labels, index=np.arange(1, n + 1))
    blob = int(np.argmax(masses)) + 1
    sl = ndimage.find_objects(labels)[blob - 1]
    y0, y1 = max(sl[0].start - 2, 0), min(sl[0].stop + 2, h)
    x0, x1 = max(sl[1].start - 2, 0), min(sl[1].stop + 2, w)
    region = arr[y0:y1, x0:x1]
    rdist = dist[y0:y1, x0:x1]
    core = region[rdist >= 0.85 * rdist.max()]
    colour_k = int(np.linalg.norm(_GLYPH_RGB - np.median(core, axis=0), axis=1).argmin())
    direction = _GLYPH_RGB[colour_k] - bg_rgb
    alpha = np.clip(((region - bg_rgb) @ direction) / float(direction @ direction), 0.0, 1.0)
    alpha[rdist < 0.25 * FG_THRESHOLD] = 0.0
    if alpha.sum() < MIN_BLOB_MASS:
        return Percept(background=background, glyph="none")
    side = float(max((alpha.max(axis=0) >= SIDE_ALPHA).sum(), (alpha.max(axis=1) >= SIDE_ALPHA).sum()))
    bbox = (x0, y0, x1, y1)
    if side < readable_side():
        return Percept(background=background, glyph="unclear", side=side, bbox=bbox)
    return Percept(background=background, glyph="clear", colour=_GLYPH_NAMES[colour_k],
                   shape=_match_shape(alpha), side=side, bbox=bbox)
