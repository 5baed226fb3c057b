"""Questions of a speaking SynthWorld, by the evidence their answer needs: the pictures, the words, or both.

- pictures: the silent world's templates (glyph colours, shapes, kinds, counts and times are never said);
- words: ``Which name does the narrator say right after Bruno?`` and ``When is Bruno mentioned?`` (names are never
  drawn);
- both: ``What is the name of the red circle?`` and ``When is Bruno on screen?`` (the name is heard while the glyph is
  seen; the words never say what it looks like).

The mix of the three is fixed by the generator (:data:`DEFAULT_MIX`) and every draft records its type in
``meta["evidence"]``. Names in the options are drawn like the answer (names said in the same video), so no option
text tells the answer.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from videvolve.datasets.synthworld.narration import Line, Narration
from videvolve.datasets.synthworld.palette import NAMES
from videvolve.datasets.synthworld.questions import ABSENT_SHARE, Draft, grounding, mcq
from videvolve.datasets.synthworld.script import VideoScript
from videvolve.errors import UsageError

EVIDENCE_TYPES = ("pictures", "words", "both")
DEFAULT_MIX: dict[str, float] = {"pictures": 0.4, "words": 0.3, "both": 0.3}


def _span(line: Line) -> tuple[float, float]:
    return (line.start, line.end)


def _name_options(rng: random.Random, correct: str, said: list[str], avoid: str = "") -> list[str] | None:
    others = [n for n in said if n not in (correct, avoid)]
    if len(others) < 3:
        return None
    return [correct, *rng.sample(others, 3)]


def said_next(narration: Narration, rng: random.Random) -> list[Draft]:
    """'Which name does the narrator say right after / before Bruno?' over consecutive introductions."""
    intros = narration.intros
    said = [ln.name for ln in intros]
    out = []
    for i in range(len(intros) - 1):
        after = rng.random() < 0.5
        asked, right = (intros[i], intros[i + 1]) if after else (intros[i + 1], intros[i])
        options = _name_options(rng, right.name, said, asked.name)
        if options is None:
            continue
        word = "after" if after else "before"
        out.append(Draft(f"said_{word}", "mcq", f"Which name does the narrator say right {word} {asked.name}?",
                         right.name, sorted([_span(asked), _span(right)]), options,
                         {"target": asked.name, "evidence": "words"}))
    return out


def mentioned(narration: Narration, rng: random.Random) -> list[Draft]:
    """'When is Bruno mentioned?' -- the time the name is said, or [] for a name this narrator never says."""
    said = {ln.name: ln for ln in narration.intros}
    unsaid = [n for n in NAMES if n not in said]
    out = []
    for line in narration.intros:
        name = line.name
        if rng.random() < ABSENT_SHARE and unsaid:
            name = unsaid.pop(rng.randrange(len(unsaid)))
        spans = [_span(said[name])] if name in said else []
        out.append(Draft("mentioned", "grounding", f"When is {name} mentioned?", spans, spans,
                         meta={"target": name, "occurrences": len(spans), "evidence": "words"}))
    return out


def name_of(narration: Narration, rng: random.Random) -> list[Draft]:
    """'What is the name of the red circle?' -- heard while that glyph (it appears once) is on screen."""
    said = [ln.name for ln in narration.intros]
    out = []
    for line in narration.intros:
        assert line.event is not None
        options = _name_options(rng, line.name, said)
        if options is None:
            continue
        e = line.event
        out.append(Draft("name_of", "mcq", f"What is the name of the {e.name}?", line.name, [(e.start, e.end)],
                         options, {"target": e.name, "sizes": [e.size], "evidence": "both"}))
    return out


def on_screen(narration: Narration, rng: random.Random) -> list[Draft]:
    """'When is Bruno on screen?' -- the whole appearance of the glyph introduced as Bruno."""
    out = []
    for line in narration.intros:
        assert line.event is not None
        e = line.event
        out.append(Draft("on_screen", "grounding", f"When is {line.name} on screen?", [(e.start, e.end)],
                         [(e.start, e.end)], meta={"target": line.name, "occurrences": 1, "sizes": [e.size],
                                                   "max_length": e.end - e.start, "evidence": "both"}))
    return out


def parse_mix(text: str) -> dict[str, float]:
    """``pictures=0.4,words=0.3,both=0.3`` (shares need not sum to one; missing types get none)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if name.strip() not in EVIDENCE_TYPES or share < 0:
            raise UsageError(f"cannot read the mix part {part!r}: use pictures=0.4,words=0.3,both=0.3 "
                             f"(types: {', '.join(EVIDENCE_TYPES)}; shares >= 0)")
        out[name.strip()] = share
    if sum(out.values()) <= 0:
        raise UsageError(f"the mix {text!r} gives no question a share")
    return out


def split_counts(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """``n`` questions shared out by ``mix`` (largest remainders; ties in the order of EVIDENCE_TYPES)."""
    total = sum(mix.get(k, 0.0) for k in EVIDENCE_TYPES)
    exact = {k: n * mix.get(k, 0.0) / total for k in EVIDENCE_TYPES}
    counts = {k: int(v) for k, v in exact.items()}
    for k in sorted(EVIDENCE_TYPES, key=lambda k: -(exact[k] - counts[k]))[: n - sum(counts.values())]:
        counts[k] += 1
    return counts


def spoken_drafts(script: VideoScript, narration: Narration, rng: random.Random, n: int,
                  mix: Mapping[str, float]) -> list[Draft]:
    """Up to ``n`` grounding and ``n`` mcq drafts of one video, each kind shared out by ``mix``.

    When the video has too few of one type (few names said), the kind gets fewer questions, so the mix holds.
    """
    out: list[Draft] = []
    for kind, words, both in (("grounding", mentioned, on_screen), ("mcq", said_next, name_of)):
        want = split_counts(n, mix)["pictures"]
        pictures = grounding(script, rng, want) if kind == "grounding" else mcq(script, rng, want)[:want]
        for d in pictures:
            d.meta["evidence"] = "pictures"
        pools = {"pictures": pictures, "words": words(narration, rng), "both": both(narration, rng)}
        for pool in pools.values():
            rng.shuffle(pool)
        m = next(m for m in range(n, -1, -1) if all(c <= len(pools[k]) for k, c in split_counts(m, mix).items()))
        out += [d for k, c in split_counts(m, mix).items() for d in pools[k][:c]]
    return out
