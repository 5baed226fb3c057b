"""Questions about a SynthWorld script, with gold answers and evidence: grounding and four mcq templates.

Nothing in an mcq question's text or its options predicts the answer (checked by ``tests/test_blind_baseline.py``).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from videvolve.datasets.synthworld.palette import GLYPH_COLOURS, SHAPES
from videvolve.datasets.synthworld.script import Event, VideoScript

ABSENT_SHARE = 0.15


@dataclass
class Draft:
    """A question before its options are lettered (the correct option is ``options[0]``)."""

    template: str
    kind: str
    question: str
    answer: Any
    evidence: list[tuple[float, float]]
    options: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def _span(e: Event) -> tuple[float, float]:
    return (e.start, e.end)


def _neighbours(kind: tuple[str, str]) -> list[tuple[str, str]]:
    """Glyph kinds sharing exactly one attribute with ``kind`` (the distractors a misreading produces)."""
    c, s = kind
    return [(c, x) for x in SHAPES if x != s] + [(x, s) for x in GLYPH_COLOURS if x != c]


def _name(kind: tuple[str, str]) -> str:
    return f"{kind[0]} {kind[1]}"


def grounding(script: VideoScript, rng: random.Random, n: int,
              absent: list[tuple[str, str]] | None = None) -> list[Draft]:
    """'When does the orange star appear?' -- every occurrence, or [] for a target that never appears.

    ``absent``: the near misses to ask about (default: :func:`_absent`; needles pass those the footage never shows).
    """
    present = list(dict.fromkeys(e.kind for e in script.events))
    short = [k for k in present if all(e.end - e.start <= 10 for e in script.occurrences(*k))]
    long_ = [k for k in present if k not in short]
    absent = _absent(script) if absent is None else absent
    n_absent = sum(1 for _ in range(n) if rng.random() < ABSENT_SHARE)
    picks: list[tuple[str, str]] = rng.sample(absent, min(n_absent, len(absent)))
    n_pos = n - len(picks)
    n_long = min(len(long_), round(n_pos * 0.2))
    picks += rng.sample(short, min(len(short), n_pos - n_long)) + rng.sample(long_, n_long)
    drafts = []
    for kind in picks:
        occ = script.occurrences(*kind)
        drafts.append(Draft(
            template="grounding", kind="grounding", question=f"When does the {_name(kind)} appear?",
            answer=[_span(e) for e in occ], evidence=[_span(e) for e in occ],
            meta={"target": _name(kind), "occurrences": len(occ), "sizes": [e.size for e in occ],
                  "max_length": max((e.end - e.start for e in occ), default=0.0)},
        ))
    return drafts


def _options(rng: random.Random, correct: str, seen: list[str], fallback: list[str]) -> list[str]:
    """The correct option and three distractors drawn the way the answer is drawn.

    ``seen`` holds one value per event of the video (a value shown twice is listed twice): the answer is a value an
    event shows, so distractors are successive picks of a random event's value, each new, as likely as the answer
    to be a frequent one. ``fallback`` values fill in, in random order, when the video shows too few.
    """
    pool = [v for v in seen if v != correct]
    rng.shuffle(pool)
    others = list(dict.fromkeys(pool))[:3]
    rest = [f for f in fallback if f != correct and f not in others]
    rng.shuffle(rest)
    return [correct, *(others + rest)[:3]]


def identity(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'What colour is the star that appears on the navy background?' (and the shape of a colour)."""
    bgs_of = {e: script.backgrounds_during(e) for e in script.events}
    on: dict[str, list[Event]] = {}
    for e, bgs in bgs_of.items():
        for bg in bgs:
            on.setdefault(bg, []).append(e)
    colours = [x.colour for x in script.events]
    shapes = [x.shape for x in script.events]
    out = []
    for e in script.events:
        if len(bgs_of[e]) != 1:
            continue
        bg = next(iter(bgs_of[e]))
        on_bg = on[bg]
        if rng.random() < 0.5 and sum(x.shape == e.shape for x in on_bg) == 1:
            out.append(Draft("identity_colour", "mcq",
                             f"What colour is the {e.shape} that appears on the {bg} background?",
                             e.colour, [_span(e)], _options(rng, e.colour, colours, list(GLYPH_COLOURS)),
                             {"target": e.name, "sizes": [e.size]}))
        elif sum(x.colour == e.colour for x in on_bg) == 1:
            out.append(Draft("identity_shape", "mcq",
                             f"What shape is the {e.colour} glyph that appears on the {bg} background?",
                             e.shape, [_span(e)], _options(rng, e.shape, shapes, list(SHAPES)),
                             {"target": e.name, "sizes": [e.size]}))
    return out


def order(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'Which of these appears first?' over four kinds that each appear once."""
    once = [k for k, c in Counter(e.kind for e in script.events).items() if c == 1]
    out = []
    for _ in range(len(once) // 4):
        kinds = rng.sample(once, 4)
        events = sorted((script.occurrences(*k)[0] for k in kinds), key=lambda e: e.start)
        first = _name(events[0].kind)
        options = [first, *[_name(e.kind) for e in events[1:]]]
        out.append(Draft("order", "mcq", "Which of these appears first?", first,
                         [_span(e) for e in events], options, {"target": first, "sizes": [e.size for e in events]}))
    return out


def _absent(script: VideoScript) -> list[tuple[str, str]]:
    """Near misses: kinds sharing one attribute with a present kind that never appear themselves."""
    present = {e.kind for e in script.events}
    return sorted({nb for k in present for nb in _neighbours(k)} - present)


def count(script: VideoScript, rng: random.Random, absent: list[tuple[str, str]] | None = None) -> list[Draft]:
    """'How many times does the red circle appear?' with four of the counts 0..top as options.

    The answer is uniform over 0..top (top: the largest count such that every count up to it occurs in the video;
    0 asks about a near miss that never appears) and the three distractors are uniform over the other counts, so
    given the options each of them is the answer equally often: their minimum, maximum and order say nothing.
    Drafts come in rounds, each a random permutation of 0..top, so any prefix keeps the answers uniform.
    """
    by_count: dict[int, list[tuple[str, str]]] = {0: list(_absent(script) if absent is None else absent)}
    for kind, n in sorted(Counter(e.kind for e in script.events).items()):
        by_count.setdefault(n, []).append(kind)
    for kinds in by_count.values():
        rng.shuffle(kinds)
    top = 0
    while by_count.get(top + 1):
        top += 1
    support = list(range(top + 1))
    out: list[Draft] = []
    while top >= 3 and all(by_count[n] for n in support):
        for n in rng.sample(support, len(support)):
            kind = by_count[n].pop()
            occ = script.occurrences(*kind)
            others = rng.sample([x for x in support if x != n], 3)
            out.append(Draft("count", "mcq", f"How many times does the {_name(kind)} appear?", str(n),
                             [_span(e) for e in occ], [str(x) for x in (n, *others)],
                             {"target": _name(kind), "occurrences": n, "sizes": [e.size for e in occ]}))
    return out


def successor(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'What appears right after the green square?' for a kind that appears once.

    The answer is the kind of the next event; distractors are kinds of other random events (never the asked kind),
    so a kind that appears often is as likely to be a distractor as to be the answer.
    """
    counts = Counter(e.kind for e in script.events)
    out = []
    for i, e in enumerate(script.events[:-1]):
        if counts[e.kind] != 1:
            continue
        nxt = script.events[i + 1]
        correct = _name(nxt.kind)
        seen = [x.name for x in script.events if x.kind != e.kind]
        fallback = [_name(k) for k in _neighbours(nxt.kind) if k != e.kind]
        out.append(Draft("successor", "mcq", f"What appears right after the {e.name}?", correct,
                         [_span(e), _span(nxt)], _options(rng, correct, seen, fallback),
                         {"target": e.name, "sizes": [e.size, nxt.size]}))
    return out


MCQ_TEMPLATES = (identity, order, count, successor)


def mcq(script: VideoScript, rng: random.Random, n: int) -> list[Draft]:
    """About ``n`` mcq drafts, spread over the four templates."""
    per = max(1, n // len(MCQ_TEMPLATES))
    out: list[Draft] = []
    spare: list[Draft] = []
    for template in MCQ_TEMPLATES:
        drafts = [d for d in template(script, rng) if len(set(d.options)) == 4]
        if template is not count:  # count keeps its rounds (each a permutation of 0..top)
            rng.shuffle(drafts)
        out += drafts[:per]
        spare += drafts[per:]
    rng.shuffle(spare)
    return out + spare[: max(0, n - len(out))]
