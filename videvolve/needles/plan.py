"""Where needles go and what is asked about them: the SynthWorld question templates over a needle script.

Needle glyph kinds come in clusters sharing a colour or a shape (distractors: similar, shown, not asked for), with
counts 1 to 3 so that count questions have the world's uniform answers. Questions are drawn by the world's own
templates (``datasets/synthworld/questions.py``) over a :class:`VideoScript` whose events are the needles, so option
sets are drawn as the world's are; a question a native glyph could make wrong is dropped.
"""

from __future__ import annotations

import math
import random
import secrets
from collections import Counter
from collections.abc import Sequence

from videvolve.datasets.synthworld import questions as q
from videvolve.datasets.synthworld.palette import GLYPH_COLOURS, SHAPES
from videvolve.datasets.synthworld.script import SIZES, Event, Scene, VideoScript
from videvolve.needles.needles import Needle, NeedlePlan, text_box
from videvolve.needles.scan import VideoScan, with_splices

COUNTS = (3, 2, 1, 1, 1, 1)
"""Occurrences per needle kind: one kind of each count 1..3 at least, so count questions span 0..3."""
MARGIN = 0.5
"""Seconds kept clear of native glyphs and other needles on each side of a needle."""
WORDS = ("HARBOR", "LANTERN", "MEADOW", "COPPER", "VELVET", "ORBIT", "TIMBER", "SIGNAL", "MARBLE", "FALCON",
         "GARNET", "PEPPER", "CANYON", "BISCUIT", "RIBBON", "SUMMIT")
BLIND_FAILED = ("identity_shape",)
"""Templates not asked about needles: over a needle set's few shapes, 'longest option' is right 20 % of the time
(500 planned videos, tests/test_labelfree.py), outside the blind baselines' 5-point band."""
SPLICE_QUESTION = "When does footage from another video appear?"
MIN_WORD_PX = 8
"""The smallest text height a word needle is drawn at (the smallest the font is drawn at)."""


def _snap(t: float, step: float) -> float:
    return math.floor(t / step + 1e-6) * step


def needle_kinds(rng: random.Random, native: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """A multiset of glyph kinds the video never shows: clusters sharing one attribute, counts :data:`COUNTS`."""
    allowed = [(c, s) for c in GLYPH_COLOURS for s in SHAPES if (c, s) not in native]
    kinds: list[tuple[str, str]] = []
    while len(kinds) < len(COUNTS) and len(kinds) < len(allowed):
        anchor = rng.choice([k for k in allowed if k not in kinds])
        cluster = [anchor] + [k for k in q._neighbours(anchor) if k in allowed and k not in kinds]
        rng.shuffle(cluster[1:])
        kinds += [anchor, *cluster[1 : 1 + rng.randint(1, 2)]]
    kinds = kinds[: len(COUNTS)]
    counts = list(COUNTS[: len(kinds)])
    rng.shuffle(counts)
    out = [k for k, n in zip(kinds, counts, strict=True) for _ in range(n)]
    rng.shuffle(out)
    return out


def own_gaps(scan: VideoScan) -> list[float]:
    """How far apart the footage's own glyphs are: its free stretches with a glyph on both sides (seconds)."""
    return [b - a for a, b in scan.free if a > 0 and b < scan.duration - scan.step]


def place(rng: random.Random, free: list[tuple[float, float]], lengths: list[float], step: float,
          gaps: Sequence[float] = (), least: float = MARGIN) -> list[tuple[float, float]]:
    """Non-overlapping [start, end) slots in time order, inside free stretches, as clear as the footage's glyphs.

    Each slot keeps a clearance drawn from ``gaps`` (the footage's own, :func:`own_gaps`) on both sides, or the
    largest smaller one of them that fits, else ``least`` (the one lengths were capped with), else :data:`MARGIN`:
    a needle pressed against the video's own glyphs (or another needle) where they never come that close to each
    other would be told apart by its timing.
    """
    taken: list[tuple[float, float]] = []
    own = sorted({g for g in gaps if g > MARGIN})
    for length in lengths:
        drawn = rng.choice(own) if own else MARGIN
        for clear in dict.fromkeys([drawn, *(g for g in reversed(own) if g < drawn), min(least, drawn), MARGIN]):
            if _put(rng, free, length, step, clear, taken):
                break
    return sorted(taken)


def _put(rng: random.Random, free: list[tuple[float, float]], length: float, step: float, clear: float,
         taken: list[tuple[float, float]]) -> bool:
    """One slot of ``length`` with ``clear`` seconds around it appended to ``taken`` (50 random tries); False: none."""
    fits = [(a + clear, b - clear - length) for a, b in free if b - a >= length + 2 * clear]
    for _ in range(50):
        if not fits:
            return False
        lo, hi = rng.choice(fits)
        start = _snap(rng.uniform(lo, hi), step)
        if start < lo - 1e-9:
            start += step
        end = start + length
        if start > hi + 1e-9 or any(start < e + clear and s < end + clear for s, e in taken):
            continue
        taken.append((start, end))
        return True
    return False


def _clearance(scan: VideoScan, needles: int, gaps: Sequence[float]) -> tuple[float, float]:
    """The longest needle as many free stretches as there are needles each hold, and the clearance it leaves.

    The clearance (both sides) is the footage's smallest gap between its own glyphs (``gaps``), but no more
    than a quarter of those stretches (half of each stays the needle's) and no less than :data:`MARGIN`.
    """
    stretches = sorted((b - a for a, b in scan.free), reverse=True)
    if not stretches:
        return scan.step, MARGIN
    kth = stretches[min(needles, len(stretches)) - 1]
    clear = max(MARGIN, min(min(gaps, default=MARGIN), kth / 4))
    return max(scan.step, kth - 2 * clear - scan.step), clear  # a frame's slack: starts fall on frames


def plan_needles(scan: VideoScan, rng: random.Random, others: list[str], seen: Sequence[float] = ()) -> NeedlePlan:
    """The needle plan of one video: glyphs (always), words and a splice (real footage).

    ``seen``: how long the things the perceived pass saw in this video stayed on screen (seconds). Glyph needles
    last as long as those (each a draw from them), so that a harness that looks too sparsely to catch the video's
    own events misses needles too; without them, 1 to 2.5 s.
    """
    kinds = needle_kinds(rng, scan.native)
    n_extra = 0 if scan.synth else 6 + bool(others)  # words and a splice, below
    gaps = own_gaps(scan)
    room, clear = _clearance(scan, len(kinds) + n_extra, gaps)
    drawn = [min(rng.choice(seen), room) if seen else rng.uniform(1.0, 2.5) for _ in kinds]
    glyph_lengths = [max(scan.step, _snap(x, scan.step)) for x in drawn]
    extra: list[tuple[str, float]] = []
    if not scan.synth:
        extra += [("text", max(scan.step, _snap(rng.uniform(1.5, 3.0), scan.step))) for _ in range(6)]
        if others:
            extra.append(("splice", max(scan.step, _snap(rng.uniform(2.0, 4.0), scan.step))))
    order = list(range(len(kinds) + len(extra)))
    rng.shuffle(order)
    lengths = [glyph_lengths[i] if i < len(kinds) else extra[i - len(kinds)][1] for i in order]
    slots = place(rng, scan.free, lengths, scan.step, gaps, clear)
    scale = scan.height / 180
    needles: list[Needle] = []
    words = rng.sample(WORDS, 3)
    word_seq = [words[0]] * 3 + [words[1]] * 2 + [words[2]]  # counts 3, 2, 1: count answers span 0..3
    rng.shuffle(word_seq)
    word_size = _word_size(words, scan.width, scan.height)
    for i, (start, end) in zip(order, slots, strict=False):
        if i < len(kinds):
            colour, shape = kinds[i]
            size = round(rng.choice(SIZES) * scale) if scan.synth else round(scan.height * rng.uniform(0.14, 0.2))
            pad = 4 * scale + (0 if scan.synth else 4)
            p0 = (rng.uniform(pad, scan.width - size - pad), rng.uniform(pad, scan.height - size - pad))
            p1 = (min(max(p0[0] + rng.uniform(-60, 60) * scale, pad), scan.width - size - pad),
                  min(max(p0[1] + rng.uniform(-30, 30) * scale, pad), scan.height - size - pad))
            needles.append(Needle(start=start, end=end, kind="glyph", colour=colour, shape=shape, size=size,
                                  p0=p0, p1=p1))
        elif extra[i - len(kinds)][0] == "text":
            word = word_seq.pop() if word_seq else words[0]
            if word_size is None:  # no size of the font makes the words fit this frame: no words
                continue
            x, y = _word_place(rng, word, word_size, scan.width, scan.height)
            needles.append(Needle(start=start, end=end, kind="text", text=word, size=word_size, p0=(x, y), p1=(x, y)))
        else:
            source = rng.choice(others)
            needles.append(Needle(start=start, end=end, kind="splice", source=source, offset=0.0))
    return NeedlePlan(id=secrets.token_hex(12), video_id=scan.video_id, style="synth" if scan.synth else "footage",
                      width=scan.width, height=scan.height, needles=tuple(needles))


def _word_margin(width: int) -> int:
    """Pixels kept between a word's box and the frame's edge."""
    return max(2, round(0.02 * width))


def _word_size(words: Sequence[str], width: int, height: int) -> int | None:
    """The text height of the plan's words: 8 % of the frame's height, less where the longest would not fit.

    Measured as painted (:func:`~videvolve.needles.needles.text_box`): on a narrow (portrait) frame a word placed
    without measuring ran off the edge ("MARBL") while its questions counted it as shown. None: none fits at all.
    """
    margin = _word_margin(width)
    for px in range(max(MIN_WORD_PX, round(height * 0.08)), MIN_WORD_PX - 1, -1):
        boxes = [text_box(w, px) for w in words]
        if all(r - left + 2 * margin <= width and b - t + 2 * margin <= height for left, t, r, b in boxes):
            return px
    return None


def _word_place(rng: random.Random, word: str, px: int, width: int, height: int) -> tuple[float, float]:
    """Where a word is drawn: its whole box (margin included) inside the frame, in the upper-left part if it fits."""
    left, top, right, bottom = text_box(word, px)
    margin = _word_margin(width)
    return (_draw(rng, margin - left, width - margin - right, 0.05 * width, 0.55 * width),
            _draw(rng, margin - top, height - margin - bottom, 0.05 * height, 0.8 * height))


def _draw(rng: random.Random, lo: float, hi: float, prefer_lo: float, prefer_hi: float) -> float:
    """Uniform in [lo, hi] (where the box fits), within [prefer_lo, prefer_hi] where that leaves room."""
    a, b = max(lo, prefer_lo), min(hi, prefer_hi)
    return rng.uniform(a, b) if a <= b else rng.uniform(lo, max(lo, hi))


def needle_script(scan: VideoScan, plan: NeedlePlan) -> VideoScript:
    """The plan's glyphs as a SynthWorld script (backgrounds: as scanned), for the world's question templates."""
    events = tuple(Event(n.start, n.end, str(n.colour), str(n.shape), n.size, n.p0, n.p1)
                   for n in plan.needles if n.kind == "glyph")
    scenes = tuple(Scene(a, b, bg) for a, b, bg in scan.backgrounds)
    return VideoScript(scan.video_id, scan.duration, round(1 / scan.step), scan.width, scan.height, scenes, events)


def _native_safe(d: q.Draft, scan: VideoScan) -> bool:
    """False when a native glyph (the video's own, or one a splice shows) could change the draft's answer."""
    target = str(d.meta.get("target", ""))
    kind = tuple(target.split(" ", 1)) if " " in target else None
    if d.template in ("grounding", "count"):  # a needle's kind is native only where a splice shows it too
        return kind not in scan.native
    if d.template == "identity_colour":
        bg, shape = d.question.rsplit(" background", 1)[0].rsplit("on the ", 1)[1], target.split(" ")[1]
        return not any(b == bg and s == shape for b, _, s in scan.native_on)
    if d.template == "identity_shape":
        bg, colour = d.question.rsplit(" background", 1)[0].rsplit("on the ", 1)[1], target.split(" ")[0]
        return not any(b == bg and c == colour for b, c, _ in scan.native_on)
    return d.template == "order" and not any(tuple(o.split(" ", 1)) in scan.native for o in d.options)


def glyph_drafts(scan: VideoScan, plan: NeedlePlan, rng: random.Random, n: int) -> list[q.Draft]:
    """About ``n`` questions about the plan's glyphs: grounding, count, identity and order, as the world draws them.

    What the plan's splices show counts as the video's own (:func:`~videvolve.needles.scan.with_splices`): a
    stretch of a SynthWorld spliced in shows its glyphs, and no question about those kinds is asked.
    """
    script = needle_script(scan, plan)
    if not script.events:
        return []
    scan = with_splices(scan, plan)
    absent = [k for k in q._absent(script) if k not in scan.native]
    ground = [d for d in q.grounding(script, rng, max(1, n // 2), absent) if _native_safe(d, scan)]
    counts = [d for d in q.count(script, rng, absent) if len(set(d.options)) == 4 and _native_safe(d, scan)]
    others = [d for t in (q.identity, q.order) for d in t(script, rng)  # identity_shape: see BLIND_FAILED
              if len(set(d.options)) == 4 and _native_safe(d, scan) and d.template not in BLIND_FAILED]
    rng.shuffle(others)
    want = max(1, n - len(ground))
    return ground + counts[: max(4, want // 2)] + others[: max(0, want - min(len(counts), max(4, want // 2)))]


def text_drafts(plan: NeedlePlan, rng: random.Random) -> list[q.Draft]:
    """Grounding and count questions about the words (one asked, the others near misses) and the splice."""
    out: list[q.Draft] = []
    words = Counter(n.text for n in plan.needles if n.kind == "text" and n.text)
    if words:
        absent = [w for w in WORDS if w not in words]
        by_count = {0: absent, **{c: [w for w, k in words.items() if k == c] for c in set(words.values())}}
        for word in (rng.choice(list(words)), rng.choice(absent)):
            occ = [(n.start, n.end) for n in plan.needles if n.kind == "text" and n.text == word]
            out.append(q.Draft("text_grounding", "grounding", f'When is the word "{word}" shown on screen?', occ,
                               occ, meta={"target": word, "occurrences": len(occ)}))
        n = rng.choice([c for c in range(4) if by_count.get(c)])
        word = rng.choice(by_count[n])
        occ = [(x.start, x.end) for x in plan.needles if x.kind == "text" and x.text == word]
        options = [str(n), *rng.sample([str(x) for x in range(4) if x != n], 3)]
        out.append(q.Draft("text_count", "mcq", f'How many times is the word "{word}" shown on screen?', str(n),
                           occ, options, {"target": word, "occurrences": n}))
    splices = [(n.start, n.end) for n in plan.needles if n.kind == "splice"]
    if splices:
        out.append(q.Draft("splice_grounding", "grounding", SPLICE_QUESTION, splices, splices,
                           meta={"target": "another video", "occurrences": len(splices)}))
    return out
