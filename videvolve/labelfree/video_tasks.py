"""One video's generated tasks: its needle questions and, when asked, the perceived pass's.

:func:`video_tasks` is the job :mod:`videvolve.labelfree.generate` runs per video (on threads or Ray).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from videvolve.config import ModelSettings
from videvolve.datasets.synthworld.questions import Draft
from videvolve.errors import MediaError, UsageError
from videvolve.labelfree.perceived import appearances, cached_look, perceived_drafts
from videvolve.media.decode import frames_at
from videvolve.media.fingerprint import fingerprint
from videvolve.media.info import probe
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.needles.frames import PLAN_KEY
from videvolve.needles.needles import NeedlePlan
from videvolve.needles.plan import glyph_drafts, plan_needles, text_drafts
from videvolve.needles.scan import scan_video
from videvolve.tasks import LETTERS, Interval, LabelSource, Task

SOURCES = ("needles", "perceived")
DEFAULT_FRACTIONS = {"train": 0.7, "selection": 0.3}


class GenerateSettings(BaseModel):
    """What ``tasks generate`` does."""

    sources: tuple[str, ...] = ("needles",)
    questions_per_video: int = Field(16, ge=1)
    fractions: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_FRACTIONS))
    seed: int = 0
    perceive_fps: float = Field(1.0, gt=0, description="perceived pass: frames per second shown to the model")



def letter_tasks(drafts: list[Draft], video_id: str, video: str, duration: float, rng: random.Random,
                 label_source: LabelSource, prefix: str, meta: dict[str, Any] | None = None) -> list[Task]:
    """Drafts (correct option first) to tasks; correct letters are dealt from shuffled blocks of A-D."""
    letters: list[str] = []
    tasks = []
    for j, d in enumerate(drafts):
        common: dict[str, Any] = {
            "id": f"{video_id}-{prefix}{j:03d}", "video_id": video_id, "video": video, "question": d.question,
            "duration": duration, "evidence": [Interval(start=a, end=b) for a, b in d.evidence],
            "source": "labelfree", "label_source": label_source,
            "meta": {"template": d.template, **{k: v for k, v in d.meta.items() if k != "sizes"}, **(meta or {})},
        }
        if d.kind == "grounding":
            tasks.append(Task(kind="grounding", answer=[Interval(start=a, end=b) for a, b in d.answer], **common))
            continue
        if not letters:
            letters = list(LETTERS[:4])
            rng.shuffle(letters)
        letter = letters.pop()
        others = d.options[1:]
        rng.shuffle(others)
        k = LETTERS.index(letter)
        tasks.append(Task(kind="mcq", options=[*others[:k], d.options[0], *others[k:]], answer=letter, **common))
    return tasks


def needle_tasks(path: Path, video_id: str, others: list[str], settings: GenerateSettings,
                 seen: Sequence[float] = ()) -> list[Task]:
    """Scan one video, plan its needles, write its needle questions (every task carries the plan).

    ``seen``: how long what the perceived pass saw stayed on screen; glyph needles last as long.
    """
    rng = random.Random(f"{settings.seed}:{video_id}")
    scan = scan_video(path, video_id)
    plan = usable_splices(plan_needles(scan, rng, others, seen), rng)
    drafts = glyph_drafts(scan, plan, rng, settings.questions_per_video)
    if not scan.synth:
        drafts += text_drafts(plan, rng)
    return letter_tasks(drafts, video_id, str(path.resolve()), scan.duration, rng, "needles", "n",
                        {PLAN_KEY: plan.model_dump(mode="json")})


def usable_splices(plan: NeedlePlan, rng: random.Random) -> NeedlePlan:
    """The plan with each splice at a random offset its source decodes at, or without it (a damaged source).

    Each splice keeps its source's content fingerprint: its tasks run only while that file is there unchanged.
    """
    kept = []
    for n in plan.needles:
        if n.kind == "splice" and n.source:
            length = n.end - n.start
            try:
                room = max(0.0, probe(n.source).duration - length)
                offset = rng.uniform(0.0, room)
                frames_at(n.source, [offset, offset + length / 2, offset + length], max_side=64, clamp=True,
                          cache=None)
                made_from = fingerprint(n.source)  # a task runs only while its source is this file (check_splices)
            except (MediaError, OSError):
                continue
            n = n.model_copy(update={"offset": offset, "fingerprint": made_from})
        kept.append(n)
    return plan.model_copy(update={"needles": tuple(kept)})


VideoJob = Callable[[Path, str, list[str]], list[Task]]


@dataclass
class Perceiver:
    """The model and its meter for the perceived pass (one cached pass per video).

    ``model``: the settings ``vlm`` was made from. With them a Ray worker gets its own client and its own connection
    to the response cache (neither pickles); without them the perceiver travels as it is.
    """

    vlm: VLM
    cost: CostModel
    cache: ResponseCache | None
    parts: Path
    model: ModelSettings | None = None
    on_frames: Callable[[int], None] | None = None
    """Told how many frames each request of the look dealt with (a progress bar; not taken to a Ray worker)."""
    image_format: str = "png"
    """How frames are sent (``--image-format``: a real server's default is jpeg, as every other request's)."""
    jpeg_quality: int = 90
    """``--jpeg-quality`` of jpeg frames."""

    def __reduce__(self) -> tuple[Any, ...]:
        if self.model is None:
            return (Perceiver, (self.vlm, self.cost, self.cache, self.parts, None, None, self.image_format,
                                self.jpeg_quality))
        cache = self.cache.path.resolve() if self.cache else None  # a worker's folder may not be this one's
        return (_perceiver_of, (self.model.model_dump_json(), self.cost, cache, self.parts.resolve(),
                                self.image_format, self.jpeg_quality))


def _perceiver_of(model_json: str, cost: CostModel, cache: Path | None, parts: Path,
                  image_format: str = "png", jpeg_quality: int = 90) -> Perceiver:
    """A perceiver made again from its settings, in another process."""
    from videvolve.models import make_vlm

    model = ModelSettings.model_validate_json(model_json)
    return Perceiver(make_vlm(model), cost, ResponseCache(cache) if cache else None, parts, model,
                     image_format=image_format, jpeg_quality=jpeg_quality)


def video_tasks(path: Path, video_id: str, others: list[str], settings: GenerateSettings,
                perceiver: Perceiver | None = None) -> list[Task]:
    """Every generated task of one video, by the sources asked for."""
    tasks: list[Task] = []
    timeline = None
    if "perceived" in settings.sources:
        if perceiver is None:
            raise UsageError("perceived tasks need a model: pass --backend (sim or openai)")
        timeline = cached_look(perceiver.parts, str(path), video_id, perceiver.vlm, perceiver.cost,
                               perceiver.cache, settings.perceive_fps, perceiver.on_frames, perceiver.image_format,
                               perceiver.jpeg_quality)
    if "needles" in settings.sources:
        seen = [e.end - e.start for e in appearances(timeline).events] if timeline is not None else []
        tasks += needle_tasks(path, video_id, others, settings, seen)
    if timeline is not None:
        rng = random.Random(f"{settings.seed}:{video_id}:perceived")
        drafts = perceived_drafts(timeline, rng, settings.questions_per_video)
        tasks += letter_tasks(drafts, video_id, str(path.resolve()), timeline.duration, rng, "perceived", "p",
                              {"perceived": {"frames": timeline.frames, "prompt_tokens": timeline.prompt_tokens}})
    return tasks
