"""Blind baselines: nothing in SynthWorld's question and option texts may predict the answer.

Questions come from world scripts without rendering any video (:func:`plan_world`), at least 2,000 per mcq
template, so chance (25 %) is measured to about +-2 points; every text-only reader must stay within 5 points of it.
"""

from __future__ import annotations

import base64
import functools
import io
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import TypedDict

import numpy as np
import pytest
from PIL import Image

from videvolve.datasets.synthworld import plan_world
from videvolve.datasets.synthworld.palette import BACKGROUNDS
from videvolve.media.captions import frame_caption
from videvolve.models.base import SIM_ONLY_NOTICE
from videvolve.models.parsing import parse_letter
from videvolve.models.sim import SimVLM
from videvolve.skill_library import prompts
from videvolve.tasks import Task

pytestmark = pytest.mark.slow  # module fixtures that render worlds (seconds each): make test, not test-fast

MIN_PER_TEMPLATE = 2000
TOLERANCE = 0.05
CHANCE = 0.25


class WorldSize(TypedDict):
    """``plan_world``'s size arguments."""

    videos: int
    minutes: float
    questions: int


WORLD: WorldSize = {"videos": 440, "minutes": 30, "questions": 400}
"""Long videos and many questions per video: every mcq template yields at least 2,000 questions."""

Rule = Callable[[Task], list[float]]
"""A text-only reader: one score per option; the highest wins, ties broken at random."""


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _numbers(t: Task) -> list[float] | None:
    opts = t.options or []
    return [float(o) for o in opts] if all(re.fullmatch(r"\d+", o) for o in opts) else None


def _shared_with_options(t: Task) -> list[float]:
    opts = [set(words(o)) for o in t.options or []]
    return [float(sum(len(o & p) for j, p in enumerate(opts) if j != i)) for i, o in enumerate(opts)]


def _shared_with_question(t: Task) -> list[float]:
    q = set(words(t.question))
    return [float(len(set(words(o)) & q)) for o in t.options or []]


def _smallest_nonzero(t: Task) -> list[float]:
    nums = _numbers(t) or []
    return [-n if n > 0 else -math.inf for n in nums]


RULES: dict[str, Rule] = {
    "smallest number": lambda t: [-n for n in _numbers(t) or []],
    "smallest non-zero number": _smallest_nonzero,
    "largest number": lambda t: _numbers(t) or [],
    "first option": lambda t: [-float(i) for i in range(len(t.options or []))],
    "last option": lambda t: [float(i) for i in range(len(t.options or []))],
    "most words shared with the other options": _shared_with_options,
    "fewest words shared with the other options": lambda t: [-x for x in _shared_with_options(t)],
    "most words shared with the question": _shared_with_question,
    "fewest words shared with the question": lambda t: [-x for x in _shared_with_question(t)],
    "longest option": lambda t: [float(len(o)) for o in t.options or []],
    "shortest option": lambda t: [-float(len(o)) for o in t.options or []],
}


def pick(scores: list[float], rng: random.Random) -> int:
    best = max(scores)
    return rng.choice([i for i, s in enumerate(scores) if s == best])


def correct_index(t: Task) -> int:
    return "ABCDEFGH".index(str(t.answer))


def by_template(tasks: list[Task]) -> dict[str, list[Task]]:
    out: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        if t.kind == "mcq":
            out[str(t.meta["template"])].append(t)
    return dict(out)


def rule_accuracy(rule: Rule, tasks: list[Task], seed: int = 0) -> float | None:
    """Accuracy of ``rule`` on ``tasks``; None where it reads nothing (numbers among words)."""
    rng = random.Random(seed)
    hits = []
    for t in tasks:
        scores = rule(t)
        if len(scores) != len(t.options or []):
            return None
        hits.append(pick(scores, rng) == correct_index(t))
    return float(np.mean(hits))


# ---- a text-only classifier: naive Bayes over question and option words ----


def option_features(t: Task) -> list[list[str]]:
    """What a text-only learner may read about each option: its words, their pairing with the question's words,
    its position, and its rank among the options by number, length and shared words."""
    opts = t.options or []
    q_words = words(t.question)
    ranked = [(name, values) for name, values in (
        ("num", _numbers(t)), ("len", [float(len(o)) for o in opts]), ("shared_o", _shared_with_options(t)),
        ("shared_q", _shared_with_question(t))) if values is not None]
    out = []
    for i, o in enumerate(opts):
        o_words = words(o)
        feats = [f"o:{w}" for w in o_words] + [f"qo:{q}|{w}" for q in q_words for w in o_words]
        feats += [f"pos:{i}", f"text:{o}"]
        for name, values in ranked:
            feats += [f"{name}_rank:{sorted(values).index(values[i])}", f"{name}_is_max:{values[i] == max(values)}"]
        out.append(feats)
    return out


class NaiveBayes:
    """Log-odds that an option is correct given its features: multinomial naive Bayes, Laplace smoothing."""

    def __init__(self, tasks: list[Task]) -> None:
        self.counts: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
        for t in tasks:
            k = correct_index(t)
            for i, feats in enumerate(option_features(t)):
                self.counts[i == k].update(feats)
        totals = {c: sum(v.values()) + len(set(self.counts[True]) | set(self.counts[False])) + 1
                  for c, v in self.counts.items()}
        self.unseen = math.log(totals[False] / totals[True])
        self.weights = {f: math.log((self.counts[True][f] + 1) / totals[True] /
                                    ((self.counts[False][f] + 1) / totals[False]))
                        for f in set(self.counts[True]) | set(self.counts[False])}

    def log_odds(self, feats: list[str]) -> float:
        return sum(self.weights.get(f, self.unseen) for f in feats)

    def accuracy(self, tasks: list[Task], seed: int = 0) -> float:
        rng = random.Random(seed)
        hits = [pick([round(self.log_odds(f), 9) for f in option_features(t)], rng) == correct_index(t)
                for t in tasks]
        return float(np.mean(hits))


@pytest.fixture(scope="module")
def world_a() -> list[Task]:
    return plan_world(seed=101, **WORLD)[1]


@pytest.fixture(scope="module")
def world_b() -> list[Task]:
    return plan_world(seed=202, **WORLD)[1]


def test_every_template_is_measured_to_two_points(world_a, world_b):
    for tasks in (world_a, world_b):
        sizes = {k: len(v) for k, v in by_template(tasks).items()}
        assert set(sizes) == {"identity_colour", "identity_shape", "order", "count", "successor"}
        assert min(sizes.values()) >= MIN_PER_TEMPLATE, sizes


def test_text_rules_stay_at_chance(world_b):
    failures, read = [], set()
    for template, tasks in by_template(world_b).items():
        for name, rule in RULES.items():
            acc = rule_accuracy(rule, tasks)
            if acc is not None:
                read.add((name, template))
                if abs(acc - CHANCE) > TOLERANCE:
                    failures.append(f"{name} on {template}: {acc:.3f}")
    assert not failures, failures
    assert {(r, "count") for r in RULES} <= read  # the numeric rules did read the count questions


@pytest.mark.slow
def test_a_classifier_learned_on_one_world_is_at_chance_on_another(world_a, world_b):
    train, test = by_template(world_a), by_template(world_b)
    accs = {k: NaiveBayes(train[k]).accuracy(test[k]) for k in test}
    assert all(abs(a - CHANCE) <= TOLERANCE for a in accs.values()), accs


def test_the_classifier_would_catch_a_prior(world_a, world_b):
    """Sanity check of the learner: give the correct option a tell (a trailing word) and it finds it."""

    def tell(tasks: list[Task]) -> list[Task]:
        out = []
        for j, t in enumerate(tasks):
            opts = list(t.options or [])
            k = correct_index(t)
            if j % 3:  # two times in three
                opts[k] += " glyph"
            out.append(t.model_copy(update={"options": opts}))
        return out

    model = NaiveBayes(tell(by_template(world_a)["order"]))
    assert model.accuracy(tell(by_template(world_b)["order"])) > CHANCE + 0.3


def _absent_by_word(tasks: list[Task]) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = defaultdict(list)
    for t in tasks:
        if t.kind == "grounding":
            for w in words(t.question):
                out[w].append(not t.answer)
    return out


def test_absent_grounding_targets_are_not_told_by_the_wording(world_a, world_b):
    """The share of absent targets is the same whatever the query names, and a model of it learned on one world
    ranks another world's absent targets no better than chance (AUC 0.5)."""
    ground_b = [t for t in world_b if t.kind == "grounding"]
    overall = float(np.mean([not t.answer for t in ground_b]))
    for w, absent in _absent_by_word(ground_b).items():
        assert len(absent) >= 500 and abs(np.mean(absent) - overall) <= TOLERANCE, (w, np.mean(absent), overall)
    learned = {w: math.log((sum(a) + 1) / (len(a) - sum(a) + 1)) for w, a in _absent_by_word(world_a).items()}
    scores = np.array([sum(learned.get(w, 0.0) for w in words(t.question)) for t in ground_b])
    is_absent = np.array([not t.answer for t in ground_b])
    ranks = np.argsort(np.argsort(scores + 1e-9 * np.random.default_rng(0).random(len(scores)))) + 1
    auc = ((ranks[is_absent].sum() - is_absent.sum() * (is_absent.sum() + 1) / 2)
           / (is_absent.sum() * (~is_absent).sum()))
    assert abs(auc - 0.5) <= TOLERANCE, auc


# ---- SimVLM when it cannot see ----


def _picture(rgb: tuple[int, int, int], t: float) -> list[dict[str, object]]:
    buf = io.BytesIO()
    Image.new("RGB", (32, 18), rgb).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return [{"type": "text", "text": frame_caption(t)}, {"type": "image_url", "image_url": {"url": url}}]


def sim_reply(sim: SimVLM, t: Task, pictures: list[dict[str, object]]) -> str:
    prompt = prompts.render("answer_mcq", question=t.question, options=prompts.options_block(t.options or []))
    return sim.complete([{"role": "user", "content": [*pictures, {"type": "text", "text": prompt}]}]).text


BLANK = [_picture(bg, 12.0) for bg in BACKGROUNDS.values()]
"""A frame of a SynthWorld background with no glyph: SimVLM sees a scene but nothing to answer from."""


@pytest.mark.parametrize("blank", [False, True], ids=["no pictures", "a blank frame"])
def test_simvlm_guesses_without_a_prior(world_b, blank):
    sim = SimVLM()
    accs = {}
    for template, tasks in by_template(world_b).items():
        tasks = tasks[:MIN_PER_TEMPLATE]
        letters = [parse_letter(sim_reply(sim, t, BLANK[i % len(BLANK)] if blank else []), 4)
                   for i, t in enumerate(tasks)]
        assert None not in letters
        accs[template] = float(np.mean([a == t.answer for a, t in zip(letters, tasks, strict=True)]))
    assert all(abs(a - CHANCE) <= TOLERANCE for a in accs.values()), accs


def test_simvlm_says_what_it_is_on_pictures_it_cannot_read(world_b):
    sim = SimVLM()
    black = _picture((0, 0, 0), 1.0) + _picture((255, 255, 255), 2.0)
    for tasks in by_template(world_b).values():
        for t in tasks[:50]:
            reply = sim_reply(sim, t, black)
            assert reply.startswith(SIM_ONLY_NOTICE) and parse_letter(reply, 4) is None


# ---- a speaking world: reading the transcript must not answer a picture question ----

SPEAKING: WorldSize = {"videos": 200, "minutes": 30, "questions": 100}
"""Planned only (no rendering): about 3,000 mcq questions of each evidence type."""
SPEAKING_SEED = 303


@pytest.fixture(scope="module")
def speaking() -> tuple[list[Task], dict[str, tuple[str, ...]], dict[str, str]]:
    """A speaking world's tasks and, per video, its transcript's lines and the transcript as prompt text."""
    from videvolve.datasets.synthworld.narration import narrate
    from videvolve.datasets.transcripts import render

    scripts, tasks = plan_world(seed=SPEAKING_SEED, narration=True, **SPEAKING)
    segments = {s.video_id: narrate(s, SPEAKING_SEED).segments() for s in scripts}
    return tasks, {v: tuple(s.text for s in segs) for v, segs in segments.items()}, \
        {v: "Transcript:\n" + render(segs) for v, segs in segments.items()}


@functools.lru_cache(maxsize=100_000)
def _occurrences(option: str, lines: tuple[str, ...]) -> list[int]:
    """Indices of the transcript lines that say ``option`` (as whole words)."""
    pat = re.compile(rf"\b{re.escape(option.lower())}\b")
    return [i for i, line in enumerate(lines) if pat.search(line.lower())]


@functools.lru_cache(maxsize=4096)
def _line_words(lines: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(words(line)) for line in lines)


def _near_question(t: Task, lines: tuple[str, ...]) -> list[float]:
    """Per option: transcript lines that say one of its words next to a word of the question."""
    q = set(words(t.question))
    near = [w for w in _line_words(lines) if w & q]
    return [float(sum(1 for w in near if w & set(words(o)))) for o in t.options or []]


def _said_right_after(t: Task, lines: tuple[str, ...]) -> list[float]:
    """Per option: how soon it is said after a line saying a name from the question (lower gap, higher score)."""
    names = [w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", t.question)[1:]]  # proper nouns after the first word
    marks = [i for n in names for i in _occurrences(n, lines)]
    return [-float(min((i - j for i in _occurrences(o, lines) for j in marks if i > j), default=10**6))
            for o in t.options or []]


TRANSCRIPT_RULES: dict[str, Callable[[Task, tuple[str, ...]], list[float]]] = {
    "option said": lambda t, lines: [float(bool(_occurrences(o, lines))) for o in t.options or []],
    "option not said": lambda t, lines: [-float(bool(_occurrences(o, lines))) for o in t.options or []],
    "option said most": lambda t, lines: [float(len(_occurrences(o, lines))) for o in t.options or []],
    "option said first": lambda t, lines: [-float(min(_occurrences(o, lines), default=10**6))
                                           for o in t.options or []],
    "option said last": lambda t, lines: [float(max(_occurrences(o, lines), default=-1)) for o in t.options or []],
    "option words said next to the question's words": _near_question,
    "option said right after a name in the question": _said_right_after,
    "most option words said": lambda t, lines: [float(len(set(words(o)) & frozenset().union(*_line_words(lines))))
                                                for o in t.options or []],
}


def _by_evidence(tasks: list[Task]) -> dict[str, list[Task]]:
    out: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        if t.kind == "mcq":
            out[str(t.meta["evidence"])].append(t)
    return dict(out)


def transcript_rule_accuracy(rule: Callable[[Task, tuple[str, ...]], list[float]], tasks: list[Task],
                             said: dict[str, tuple[str, ...]]) -> float:
    rng = random.Random(0)
    return float(np.mean([pick(rule(t, said[t.video_id]), rng) == correct_index(t) for t in tasks]))


def test_reading_the_transcript_does_not_answer_a_picture_question(speaking):
    tasks, said, _ = speaking
    groups = _by_evidence(tasks)
    assert min(len(v) for v in groups.values()) >= MIN_PER_TEMPLATE, {k: len(v) for k, v in groups.items()}
    pictures = groups["pictures"]
    failures = [f"{name}: {acc:.3f}" for name, rule in TRANSCRIPT_RULES.items()
                if abs((acc := transcript_rule_accuracy(rule, pictures, said)) - CHANCE) > TOLERANCE]
    for template, ts in by_template(pictures).items():  # and on each picture template with enough questions
        if len(ts) >= 1000:
            failures += [f"{name} on {template}: {acc:.3f}" for name, rule in TRANSCRIPT_RULES.items()
                         if abs((acc := transcript_rule_accuracy(rule, ts, said)) - CHANCE) > 2 * TOLERANCE]
    assert not failures, failures
    # the rules can read: on questions whose answer is said, reading the transcript does answer them
    after = [t for t in groups["words"] if t.meta["template"] == "said_after"]
    assert transcript_rule_accuracy(_said_right_after, after, said) > 0.9


def test_question_text_alone_answers_no_type_of_a_speaking_world(speaking):
    tasks, _, _ = speaking
    failures = []
    for evidence, group in _by_evidence(tasks).items():
        for template, ts in by_template(group).items():
            for name, rule in RULES.items():
                acc = rule_accuracy(rule, ts)
                if acc is not None and abs(acc - CHANCE) > TOLERANCE * (1 if len(ts) >= 1500 else 2):
                    failures.append(f"{name} on {evidence}/{template} ({len(ts)}): {acc:.3f}")
    assert not failures, failures


def test_simvlm_reading_a_transcript_guesses_picture_questions_at_chance(speaking):
    """SimVLM given the whole transcript (and no picture) answers no picture question better than chance."""
    tasks, _, transcripts = speaking
    sim = SimVLM()
    pictures = _by_evidence(tasks)["pictures"][:MIN_PER_TEMPLATE]
    letters = [parse_letter(sim_reply(sim, t, [{"type": "text", "text": transcripts[t.video_id]}]), 4)
               for t in pictures]
    assert None not in letters
    assert abs(float(np.mean([a == t.answer for a, t in zip(letters, pictures, strict=True)])) - CHANCE) <= TOLERANCE
