"""The Python API: ``load_harness(name_or_dir).ask(video, question, ...)`` and ``evaluate(harness, tasks)``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.datasets.transcripts import load_transcript
from videvolve.errors import Cancelled
from videvolve.evaluation.evaluate import Evaluation, select
from videvolve.evaluation.evaluate import evaluate as run_evaluation
from videvolve.media import probe
from videvolve.models import make_vlm
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import cost_model
from videvolve.rundir import EvalDir, RunDir
from videvolve.search.mixture import resolve_run_harness
from videvolve.skill_library.harness import Harness, find_harness
from videvolve.skill_library.harness import load_harness as _load
from videvolve.skill_library.runner import run_task
from videvolve.skill_library.services import TaskServices, TraceWriter
from videvolve.skill_library.trace import StepListener
from videvolve.tasks import TaskView, read_tasks


@dataclass
class Answer:
    """What a harness answered about a video, its evidence and its cost."""

    outcome: str
    answer: Any = None
    evidence_times: list[float] = field(default_factory=list)
    observed_times: list[float] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    error_kind: str | None = None
    error: str | None = None
    raw: str = ""


def clean_option(text: str) -> str:
    """``"A) red"`` / ``"B. blue"`` / ``"red"`` -> the option text."""
    s = text.strip()
    if len(s) > 2 and s[0].isalpha() and s[0].isupper() and s[1] in ").:" and s[2] == " ":
        return s[3:].strip()
    return s


class LoadedHarness:
    """A harness ready to answer questions about videos."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    def ask(self, video: str | Path, question: str, options: list[str] | None = None, grounding: bool = False,
            model: ModelSettings | None = None, runtime: RuntimeSettings | None = None, vlm: VLM | None = None,
            cache: ResponseCache | None = None, trace: Path | None = None,
            cancel: threading.Event | None = None, on_step: StepListener | None = None) -> Answer:
        """Answer one question (mcq when ``options`` are given, else grounding) about one video.

        ``cancel``: set while the harness runs, its process is stopped and :class:`~videvolve.errors.Cancelled`
        raised (a server whose client went away). ``on_step``: told each step of the trace as it happens, as its
        typed model (``videvolve.skill_library.steps``: a model call with the moments it showed, an OCR read, ...).
        """
        if cancel is not None and cancel.is_set():
            raise Cancelled("the question was cancelled before it started: its client went away")
        info = probe(video)
        kind = "mcq" if options and not grounding else "grounding"
        view = TaskView(id="ask", kind=kind, question=question,
                        options=tuple(clean_option(o) for o in options) if kind == "mcq" and options else None,
                        duration=info.duration)
        model = model or ModelSettings()
        runtime = runtime or RuntimeSettings()
        services = TaskServices(view, str(video), vlm or make_vlm(model), cost_model(model.family, model.max_pixels),
                                runtime,
                                skill=self.harness.skill, cache=cache, trace=TraceWriter(trace, on_step),
                                transcript=load_transcript(video))
        run = run_task(self.harness, services, cancel=cancel)
        pred = run.prediction
        return Answer(
            outcome=run.outcome, error_kind=run.error_kind, error=run.error, usage=run.usage,
            observed_times=list(run.usage.get("observed_times", [])),
            answer=None if pred is None else (pred.answer if isinstance(pred.answer, str) else
                                              [i.pair() for i in pred.answer or []]),
            evidence_times=[] if pred is None else pred.evidence_times, raw="" if pred is None else pred.raw)


def evaluate(harness: str | Path, tasks: str | Path, split: str = "test", out: str | Path | None = None,
             model: ModelSettings | None = None, runtime: RuntimeSettings | None = None,
             cache: ResponseCache | None = None, limit: int | None = None) -> Evaluation:
    """Run a harness (seed name, folder, or run directory) on a split of a tasks file, as ``videvolve eval`` does.

    Results, traces, ``summary.json``, ``predictions.jsonl`` and submission files go to ``out`` (default
    ``evals/<harness>-<split>``); calling again with the same ``out`` reuses finished tasks.
    """
    model = model or ModelSettings()
    runtime = runtime or RuntimeSettings()
    chosen = select(read_tasks(tasks), split, limit, str(tasks))
    out_dir = Path(out) if out else EvalDir.default(Path(harness).name, split).path
    return run_evaluation(resolve_harness(harness, runtime.budget), chosen, out_dir, make_vlm(model),
                          cost_model(model.family, model.max_pixels), runtime, cache, model,
                          meta={"harness": Path(harness).name, "split": split, "backend": model.backend,
                                "model": model.model})


def resolve_harness(name_or_dir: str | Path, budget: int | None = None) -> Path:
    """A seed name, a harness directory, or a run directory (its mixture's tier for ``budget``, or its best)."""
    if RunDir(Path(name_or_dir)).is_run():
        return resolve_run_harness(Path(name_or_dir), budget)
    return find_harness(name_or_dir)


def load_harness(name_or_dir: str | Path, budget: int | None = None) -> LoadedHarness:
    """A seed by name, a harness directory, or a run directory (its mixture's tier for ``budget``, or its best)."""
    return LoadedHarness(_load(resolve_harness(name_or_dir, budget)))
