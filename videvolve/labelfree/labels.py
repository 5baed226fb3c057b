"""Which labels a decision rests on: the label-source mix of a split, as the log, the report and diagnoses show it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from videvolve.tasks import LabelSource, Task

DECIDING_SPLITS = ("train", "selection")
"""The splits whose labels steer a run: the editor learns from train, the gate decides on selection."""


class LabelMix(BaseModel):
    """How many questions of a split have each label source."""

    split: str
    counts: dict[LabelSource, int] = Field(default_factory=dict)

    @property
    def questions(self) -> int:
        """Questions in the split."""
        return sum(self.counts.values())

    @property
    def all_gold(self) -> bool:
        """Whether every label of the split is a person's."""
        return set(self.counts) <= {"gold"}

    def sources(self) -> str:
        """``teacher 110, gold 10`` (most first), or ``none``."""
        return ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"

    def text(self) -> str:
        """``selection: 120 questions, labels: teacher 120``."""
        return f"{self.split}: {self.questions} questions, labels: {self.sources()}"


def label_mix(tasks: Sequence[Task], splits: Sequence[str] = DECIDING_SPLITS) -> list[LabelMix]:
    """The label-source mix of each of ``splits``."""
    return [LabelMix(split=s, counts=dict(Counter(t.label_source for t in tasks if t.split == s))) for s in splits]


def labels_line(mixes: Sequence[LabelMix]) -> str:
    """``train: 60 questions, labels: teacher 60 · selection: ...``; empty when every label is gold."""
    if all(m.all_gold for m in mixes):
        return ""
    return " · ".join(m.text() for m in mixes)


def too_few_videos(tasks: Sequence[Task]) -> str | None:
    """Why no video-disjoint train and selection split can be made of ``tasks`` (under two videos), or None."""
    ids = sorted({t.video_id for t in tasks})
    return None if len(ids) >= 2 else (
        f"the splits are video-disjoint and {len(ids)} video{' (' + ids[0] + ')' if ids else 's'} has questions: train "
        "and selection need one each; add videos (for generated tasks: to the folder, then run `tasks generate` again)")
