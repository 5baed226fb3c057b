"""The seeded script of one SynthWorld video: scenes (background colours) and events (a glyph that comes and goes).

At most one glyph is on screen at a time. Event times are multiples of the frame period, so a frame at time ``t``
shows an event exactly when ``start <= t < end``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, SHAPES

WIDTH, HEIGHT, FPS = 320, 180, 4
SIZES = (14, 18, 24, 32, 40)
"""Glyph sides in pixels at 320x180: small ones vanish in coarse contact sheets, large ones survive."""


@dataclass(frozen=True)
class Scene:
    """A stretch of solid background colour."""

    start: float
    end: float
    background: str


@dataclass(frozen=True)
class Event:
    """One appearance of a glyph: it enters at ``p0``, moves in a straight line to ``p1`` and leaves."""

    start: float
    end: float
    colour: str
    shape: str
    size: int
    p0: tuple[float, float]
    p1: tuple[float, float]

    @property
    def name(self) -> str:
        """'orange star'."""
        return f"{self.colour} {self.shape}"

    @property
    def kind(self) -> tuple[str, str]:
        """(colour, shape)."""
        return (self.colour, self.shape)

    def position(self, t: float) -> tuple[int, int]:
        """Top-left pixel of the glyph's box at time ``t``."""
        span = max(self.end - self.start, 1e-9)
        a = min(max((t - self.start) / span, 0.0), 1.0)
        return round(self.p0[0] + a * (self.p1[0] - self.p0[0])), round(self.p0[1] + a * (self.p1[1] - self.p0[1]))


@dataclass(frozen=True)
class VideoScript:
    """Everything that happens in one video."""

    video_id: str
    duration: float
    fps: int
    width: int
    height: int
    scenes: tuple[Scene, ...]
    events: tuple[Event, ...] = field(default=())

    def scene_at(self, t: float) -> Scene:
        """The scene on screen at ``t``."""
        for s in self.scenes:
            if s.start <= t < s.end:
                return s
        return self.scenes[-1]

    def event_at(self, t: float) -> Event | None:
        """The event on screen at ``t`` (None between events)."""
        for e in self.events:
            if e.start <= t < e.end:
                return e
        return None

    def occurrences(self, colour: str, shape: str) -> list[Event]:
        """Every event of one glyph kind, in time order."""
        return [e for e in self.events if e.colour == colour and e.shape == shape]

    def backgrounds_during(self, e: Event) -> set[str]:
        """Background colours on screen at any time during an event."""
        return {s.background for s in self.scenes if s.start < e.end and e.start < s.end}


def _snap(t: float, fps: int) -> float:
    return math.floor(t * fps + 1e-9) / fps


def _scenes(rng: random.Random, duration: float, fps: int) -> tuple[Scene, ...]:
    scenes: list[Scene] = []
    t = 0.0
    prev = None
    while t < duration:
        length = rng.uniform(20, 150)
        end = duration if duration - (t + length) < 20 else _snap(t + length, fps)
        bg = rng.choice([b for b in BACKGROUNDS if b != prev])
        scenes.append(Scene(t, end, bg))
        prev, t = bg, end
    return tuple(scenes)


def _kinds(rng: random.Random, n_events: int) -> list[tuple[str, str]]:
    """A multiset of glyph kinds: clusters sharing a colour or a shape, some kinds repeated 2-4 times."""
    colours, shapes = list(GLYPH_COLOURS), list(SHAPES)
    pool: list[tuple[str, str]] = []
    events: list[tuple[str, str]] = []
    while len(events) < n_events and len(pool) < len(colours) * len(shapes) - 3:
        anchor = (rng.choice(colours), rng.choice(shapes))
        cluster = [anchor]
        for _ in range(rng.randint(1, 2)):  # distractors sharing one attribute with the anchor
            if rng.random() < 0.5:
                cluster.append((anchor[0], rng.choice([s for s in shapes if s != anchor[1]])))
            else:
                cluster.append((rng.choice([c for c in colours if c != anchor[0]]), anchor[1]))
        for kind in cluster:
            if kind not in pool:
                pool.append(kind)
                events.extend([kind] * rng.choices([1, 2, 3, 4], weights=[0.62, 0.2, 0.11, 0.07])[0])
    rng.shuffle(events)
    return events[:n_events]


def _path(rng: random.Random, size: int, width: int, height: int) -> tuple[tuple[float, float], tuple[float, float]]:
    x0, y0 = rng.uniform(4, width - size - 4), rng.uniform(4, height - size - 4)
    dx, dy = rng.uniform(-60, 60), rng.uniform(-30, 30)
    x1 = min(max(x0 + dx, 4), width - size - 4)
    y1 = min(max(y0 + dy, 4), height - size - 4)
    return (x0, y0), (x1, y1)


def make_script(video_id: str, duration: float, seed: int, fps: int = FPS,
                width: int = WIDTH, height: int = HEIGHT) -> VideoScript:
    """Generate one video's script from a seed (same seed, same script)."""
    rng = random.Random(seed)
    duration = _snap(duration, fps)
    scenes = _scenes(rng, duration, fps)
    lengths: list[float] = []
    budget = duration * 0.42  # share of the video with a glyph on screen
    while sum(lengths) < budget:
        short = rng.random() < 0.8
        lengths.append(_snap(rng.uniform(1.0, 10.0) if short else rng.uniform(10.0, 35.0), fps) or 1.0)
    kinds = _kinds(rng, len(lengths))
    lengths = lengths[: len(kinds)]
    free = duration - sum(lengths) - 4.0
    weights = [rng.uniform(0.3, 1.7) for _ in range(len(lengths) + 1)]
    gaps = [max(1.0, free * w / sum(weights)) for w in weights]
    events = []
    t = 2.0
    for i, (kind, length) in enumerate(zip(kinds, lengths, strict=True)):
        t = _snap(t + gaps[i], fps)
        if t + length > duration - 1.0:
            break
        size = rng.choice(SIZES)
        p0, p1 = _path(rng, size, width, height)
        events.append(Event(t, t + length, kind[0], kind[1], size, p0, p1))
        t += length
    return VideoScript(video_id, duration, fps, width, height, scenes, tuple(events))
