"""Questions about a SynthWorld script, with gold answers and evidence: grounding and four mcq templates."""

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


def grounding(script: VideoScript, rng: random.Random, n: int) -> list[Draft]:
    """'When does the orange star appear?' -- every occurrence, or [] for a target that never appears."""
    present = list(dict.fromkeys(e.kind for e in script.events))
    short = [k for k in present if all(e.end - e.start <= 10 for e in script.occurrences(*k))]
    long_ = [k for k in present if k not in short]
    absent = sorted({nb for k in present for nb in _neighbours(k)} - set(present))
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


def _options(rng: random.Random, correct: str, pool: list[str], fallback: list[str]) -> list[str]:
    others = [p for p in dict.fromkeys(pool) if p != correct]
    rng.shuffle(others)
    rest = [f for f in fallback if f != correct and f not in others]
    rng.shuffle(rest)
    return [correct, *(others + rest)[:3]]


def identity(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'What colour is the star that appears on the navy background?' (and the shape of a colour)."""
    out = []
    for e in script.events:
        bgs = script.backgrounds_during(e)
        if len(bgs) != 1:
            continue
        bg = next(iter(bgs))
        on_bg = [x for x in script.events if bg in script.backgrounds_during(x)]
        if rng.random() < 0.5 and sum(x.shape == e.shape for x in on_bg) == 1:
            pool = [x.colour for x in script.events if x.shape == e.shape or x.colour != e.colour]
            out.append(Draft("identity_colour", "mcq",
                             f"What colour is the {e.shape} that appears on the {bg} background?",
                             e.colour, [_span(e)], _options(rng, e.colour, pool, list(GLYPH_COLOURS)),
                             {"target": e.name, "sizes": [e.size]}))
        elif sum(x.colour == e.colour for x in on_bg) == 1:
            pool = [x.shape for x in script.events if x.colour == e.colour or x.shape != e.shape]
            out.append(Draft("identity_shape", "mcq",
                             f"What shape is the {e.colour} glyph that appears on the {bg} background?",
                             e.shape, [_span(e)], _options(rng, e.shape, pool, list(SHAPES)),
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


def count(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'How many times does the red circle appear?' with four consecutive counts as options.

    Kinds are taken round-robin over their true counts, so the answer's text is not guessable from priors.
    """
    by_count: dict[int, list[tuple[str, str]]] = {}
    for kind, n in Counter(e.kind for e in script.events).items():
        by_count.setdefault(n, []).append(kind)
    for kinds in by_count.values():
        rng.shuffle(kinds)
    ordered: list[tuple[str, str]] = []
    while any(by_count.values()):
        for n in sorted(by_count):
            if by_count[n]:
                ordered.append(by_count[n].pop())
    out = []
    for kind in ordered:
        occ = script.occurrences(*kind)
        n = len(occ)
        low = rng.randint(max(0, n - 3), n)
        numbers = [str(x) for x in range(low, low + 4)]
        out.append(Draft("count", "mcq", f"How many times does the {_name(kind)} appear?", str(n),
                         [_span(e) for e in occ], [str(n), *[x for x in numbers if x != str(n)]],
                         {"target": _name(kind), "occurrences": n, "sizes": [e.size for e in occ]}))
    return out


def successor(script: VideoScript, rng: random.Random) -> list[Draft]:
    """'What appears right after the green square?' for a kind that appears once."""
    counts = Counter(e.kind for e in script.events)
    out = []
    for i, e in enumerate(script.events[:-1]):
        if counts[e.kind] != 1:
            continue
        nxt = script.events[i + 1]
        correct = _name(nxt.kind)
        pool = [_name(k) for k in _neighbours(nxt.kind) if k in counts and k != e.kind]
        pool += [_name(x.kind) for x in script.events if x.kind not in (e.kind, nxt.kind)]
        fallback = [_name(k) for k in _neighbours(nxt.kind)]
        out.append(Draft("successor", "mcq", f"What appears right after the {e.name}?", correct,
                         [_span(e), _span(nxt)], _options(rng, correct, pool, fallback),
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
        if template is not count:  # count keeps its round-robin order over true counts
            rng.shuffle(drafts)
        out += drafts[:per]
        spare += drafts[per:]
    rng.shuffle(spare)
    return out + spare[: max(0, n - len(out))]
