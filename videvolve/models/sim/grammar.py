"""SimVLM's language: the SynthWorld question grammar and the request types of the SDK's prompts.

SimVLM reads questions the way a model reads text, from the request only; it never looks at annotations. Transcript
lines in the request (``[12.0-14.0 s] Meet Bruno.``) are words heard at a time, read like a picture's caption.
Prompts are written by harnesses, so every pattern runs in linear time (no lazy tails, possessive runs, numbers
only where no digit precedes them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, NAMES, SHAPES
from videvolve.media.captions import parse_said

_C = "|".join(GLYPH_COLOURS)
_S = "|".join(SHAPES)
_B = "|".join(BACKGROUNDS)
_N = "|".join(NAMES)

PATTERNS = {
    "grounding": re.compile(rf"when does the ({_C}) ({_S}) appear", re.I),
    "identity_colour": re.compile(rf"what colou?r is the ({_S}) that appears on the ({_B}) background", re.I),
    "identity_shape": re.compile(rf"what shape is the ({_C}) glyph that appears on the ({_B}) background", re.I),
    "order": re.compile(r"which of these appears first", re.I),
    "count": re.compile(rf"how many times does the ({_C}) ({_S}) appear", re.I),
    "successor": re.compile(rf"what appears right after the ({_C}) ({_S})", re.I),
    "said_after": re.compile(rf"which name does the narrator say right after ({_N})\b", re.I),
    "said_before": re.compile(rf"which name does the narrator say right before ({_N})\b", re.I),
    "name_of": re.compile(rf"what is the name of the ({_C}) ({_S})", re.I),
    "mentioned": re.compile(rf"when is ({_N}) mentioned", re.I),
    "on_screen": re.compile(rf"when is ({_N}) on screen", re.I),
}
GROUNDING_TEMPLATES = ("grounding", "mentioned", "on_screen")
_INTRO = re.compile(rf"\bmeet ({_N})\b", re.I)
_OPTION = re.compile(r"^[^\S\n]*+\(?([A-Z])[.):][^\S\n]*+(\S(?:.*\S)?)", re.M)  # linear: no lazy tail
_TARGET = re.compile(rf"\b({_C})\s++({_S})\b|\b({_C})\s++glyph\b|\b({_S})\b", re.I)
_DURATION = re.compile(r"(?<![\d.])(\d++(?:\.\d++)?+)[- ]second", re.I)


@dataclass
class Question:
    """A parsed question: its template, its slots, and the lettered options."""

    template: str
    slots: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)


def parse_question(text: str) -> Question | None:
    """The last SynthWorld question in ``text`` (with the options listed after it), or None."""
    best: tuple[int, str, re.Match[str]] | None = None
    for name, pattern in PATTERNS.items():
        for m in pattern.finditer(text):
            if best is None or m.start() >= best[0]:
                best = (m.start(), name, m)
    if best is None:
        return None
    start, name, m = best
    slots = tuple(g.lower() for g in m.groups() if g)
    options = {k: v.lower().rstrip(".") for k, v in _OPTION.findall(text[start:])}
    return Question(name, slots, options)


@dataclass(frozen=True)
class Heard:
    """A name said from ``start`` to ``end`` (an introduction heard in a transcript line)."""

    start: float
    end: float
    name: str


def parse_heard(text: str) -> list[Heard]:
    """The introductions in the transcript lines of ``text``, in time order (names lower-cased)."""
    out = [Heard(a, b, m.group(1).lower()) for a, b, said in parse_said(text) for m in _INTRO.finditer(said)]
    return sorted(set(out), key=lambda h: (h.start, h.name))


def parse_target(text: str) -> tuple[str | None, str | None] | None:
    """What a match request looks for: ``(colour, shape)`` with either part possibly None."""
    m = _TARGET.search(text)
    if not m:
        return None
    if m.group(1):
        return m.group(1).lower(), m.group(2).lower()
    if m.group(3):
        return m.group(3).lower(), None
    return None, m.group(4).lower()


def parse_duration(text: str) -> float | None:
    """'The video is 1500 seconds long' / 'a 1500-second video'."""
    m = _DURATION.search(text)
    return float(m.group(1)) if m else None


def request_type(text: str) -> str:
    """``match`` ('Which of the images ... show ...?'), ``describe``, or ``answer``."""
    low = text.lower()
    if re.search(r"which of the (images|frames|cells|pictures)", low):
        return "match"
    if re.search(r"\bdescribe\b", low):
        return "describe"
    return "answer"
