"""What things cost, typed: one task's usage (:class:`TaskUsage`) and a run's running totals (:class:`Spend`).

One definition of cost for every reader: the gate's :class:`CostMeasure`, the budgets (``--max-calls``,
``--max-visual-tokens``), the status line, the editor's trial reports and the report all read these fields.
Visual tokens are the image, video and OCR-read image tokens a task paid for (OCR reads images: their tokens are
visual cost); transcript tokens are text read, counted apart and added only by the ``visual_tokens+text`` metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CostMetric = Literal["visual_tokens", "frames", "visual_tokens+text"]
"""What the gate's cost C counts (``GateSettings.cost_metric``, the ``--cost-metric`` choices); priced by
:meth:`CostMeasure.of`."""
COST_METRICS: tuple[str, ...] = get_args(CostMetric)


class TaskUsage(BaseModel):
    """What one harness run on one task cost (the sandbox meter's figures, stored with its result)."""

    model_config = ConfigDict(extra="ignore")

    frames: int = Field(0, description="distinct video frames shown to the model or read by OCR")
    image_tokens: int = 0
    video_tokens: int = 0
    ocr_tokens: int = Field(0, description="visual tokens of the images OCR read")
    transcript_tokens: int = Field(0, description="text tokens of the distinct transcript segments read")
    cumulative_tokens: int = Field(0, description="prompt tokens over every request (our formula)")
    reported_prompt_tokens: int = Field(0, description="prompt tokens as the server reported them")
    completion_tokens: int = Field(0, description="tokens the model wrote, as the server reported them")
    largest_request_tokens: int = Field(0, description="the largest request's prompt tokens as the context guard "
                                        "counted them (0: no guard): a rerun reuses the result only where the "
                                        "endpoint still takes it")
    requests: int = Field(0, description="model requests, cache hits included")
    model_calls: int = Field(0, description="requests paid for (requests - cache hits)")
    cache_hits: int = 0
    tool_calls: int = 0
    ocr_calls: int = 0
    observed_times: list[float] = Field(default_factory=list)
    client_s: dict[str, float] = Field(default_factory=dict, description="where the client time went")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Results written before ``requests`` existed counted every request, cache hits included, as model calls."""
        if isinstance(data, Mapping) and "requests" not in data and "model_calls" in data:
            calls, hits = int(data.get("model_calls") or 0), int(data.get("cache_hits") or 0)
            data = {**data, "requests": calls, "model_calls": max(calls - hits, 0)}
        return data

    @property
    def visual_tokens(self) -> int:
        """Image, video and OCR-read image tokens: the visual cost everywhere."""
        return self.image_tokens + self.video_tokens + self.ocr_tokens

    def spend(self) -> Spend:
        """What this task adds to a run's totals."""
        return Spend(model_calls=self.model_calls, visual_tokens=self.visual_tokens,
                     transcript_tokens=self.transcript_tokens)

    def __add__(self, other: TaskUsage) -> TaskUsage:
        """Counts add, the largest request is the larger; observed times and client seconds merge.

        Frames add: they are distinct within each task only.
        """
        counts = {k: getattr(self, k) + getattr(other, k) for k, f in TaskUsage.model_fields.items()
                  if f.annotation in (int, "int")}
        counts["largest_request_tokens"] = max(self.largest_request_tokens, other.largest_request_tokens)
        seconds = {k: self.client_s.get(k, 0.0) + other.client_s.get(k, 0.0) for k in {*self.client_s,
                                                                                       *other.client_s}}
        return TaskUsage(**counts, observed_times=sorted({*self.observed_times, *other.observed_times}),
                         client_s=seconds)


class Metered(Protocol):
    """Anything that carries a task's usage (a ``TaskResult``)."""

    @property
    def usage(self) -> TaskUsage:
        """What the task cost."""
        ...


class CostMeasure(BaseModel):
    """What the gate's cost C counts, in one value: the metric and the weight of a transcript token.

    ``GateSettings.cost_measure`` makes it from ``--cost-metric`` and ``--text-token-weight``; the gate, the
    screening, the editor's trials and the seed's baseline all price a task with :meth:`of`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: CostMetric = "visual_tokens"
    text_weight: float = Field(1.0, ge=0, description="a transcript token's weight against a visual token (counted "
                               "by visual_tokens+text only)")

    @field_validator("metric", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        """An unknown metric is refused with the choices."""
        if value not in COST_METRICS:
            raise ValueError(f"unknown cost metric {value!r}; use one of {', '.join(COST_METRICS)}")
        return value

    def of(self, item: TaskUsage | Metered) -> float:
        """One task's cost, from its usage or a result carrying it.

        Distinct frames, visual tokens (images, video, the images OCR read), or visual tokens plus ``text_weight`` x
        the text tokens of the transcript read.
        """
        usage = item if isinstance(item, TaskUsage) else item.usage
        if self.metric == "frames":
            return float(usage.frames)
        if self.metric == "visual_tokens":
            return float(usage.visual_tokens)
        return usage.visual_tokens + self.text_weight * usage.transcript_tokens

    @property
    def label(self) -> str:
        """In words: ``visual tokens``, ``frames`` or ``visual tokens + 0.5 x text tokens``."""
        if self.metric == "visual_tokens+text":
            return f"visual tokens + {self.text_weight} x text tokens"
        return self.metric.replace("_", " ")

    def __str__(self) -> str:
        return self.label


VISUAL_TOKENS = CostMeasure()
"""The default measure: visual tokens."""


class Spend(BaseModel):
    """A run's running totals, added up over nodes (the loop state's ``spent`` reducer is ``+``).

    ``model_calls`` and ``visual_tokens`` are what ``--max-calls`` and ``--max-visual-tokens`` measure: the solver's,
    the gate's, the investigator's and the editor's together. The ``editor_*`` and ``investigator_*`` fields are those
    parts' own shares (already inside the totals).
    """

    model_config = ConfigDict(extra="ignore")

    model_calls: int = Field(0, description="model requests paid for (cache hits cost nothing)")
    visual_tokens: int = Field(0, description="image, video and OCR-read image tokens")
    transcript_tokens: int = Field(0, description="transcript text tokens read")
    probe_frames: int = Field(0, description="frames the investigator's probes showed")
    investigator_calls: int = Field(0, description="the agent investigator's own requests, cache hits included")
    investigator_cache_hits: int = 0
    editor_calls: int = Field(0, description="the editor model's own requests, cache hits included")
    editor_cache_hits: int = 0
    editor_model_calls: int = Field(0, description="model calls of the editor's trials and probes")
    editor_visual_tokens: int = Field(0, description="visual tokens of the editor's trials and probes")
    editor_trial_tasks: int = 0
    editor_probes: int = 0

    def __add__(self, other: Spend) -> Spend:
        """Field-wise sum."""
        return Spend(**{k: getattr(self, k) + getattr(other, k) for k in Spend.model_fields})

    @classmethod
    def total(cls, parts: Iterable[Spend]) -> Spend:
        """The sum of several spends (zero for none)."""
        out = cls()
        for part in parts:
            out = out + part
        return out

    @classmethod
    def of(cls, usages: Iterable[TaskUsage]) -> Spend:
        """What tasks' runs added to the totals."""
        return cls.total(u.spend() for u in usages)

    @classmethod
    def of_model(cls, who: Literal["editor", "investigator"], ledger: Mapping[str, float]) -> Spend:
        """A metered model's own ledger (``calls``, ``cache_hits``) as ``who``'s share: only paid calls count."""
        calls, hits = int(ledger.get("calls", 0)), int(ledger.get("cache_hits", 0))
        return cls.model_validate({"model_calls": calls - hits, f"{who}_calls": calls, f"{who}_cache_hits": hits})

    @classmethod
    def from_state(cls, value: Spend | Mapping[str, float] | None) -> Spend:
        """Read the loop state's plain-JSON form (also a checkpoint written before this model existed)."""
        if isinstance(value, Spend):
            return value
        return cls.model_validate(dict(value or {}))

    def to_state(self) -> dict[str, float]:
        """Plain JSON for the loop state and its checkpoints (zero fields left out)."""
        return {k: v for k, v in self.model_dump().items() if v}

    def line(self) -> str:
        """The status line's words: calls paid for, with the editor's and investigator's shares, and tokens."""
        shares = [f"{who} {calls} call(s), {getattr(self, f'{who}_cache_hits')} from the cache"
                  for who in ("editor", "investigator") if (calls := getattr(self, f"{who}_calls"))]
        own = f" ({'; '.join(shares)})" if shares else ""
        text = f", {self.transcript_tokens:,} transcript tokens" if self.transcript_tokens else ""
        return (f"{self.model_calls:,} model calls paid for{own}, {self.visual_tokens:,} visual tokens{text} "
                "(metered: answers from the response cache count too)")


def add_spend(old: Spend | Mapping[str, float] | None, new: Spend | Mapping[str, float] | None) -> dict[str, float]:
    """Reducer of the loop state's ``spent`` channel: the totals add (stored as plain JSON)."""
    return (Spend.from_state(old) + Spend.from_state(new)).to_state()
