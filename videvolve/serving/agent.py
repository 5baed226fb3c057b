"""One question about one video, answered by a harness exactly as ``videvolve ask`` answers it.

``serve``, ``mcp`` and the lmms-eval model all call :meth:`VideoAgent.ask`, which calls
:meth:`videvolve.api.LoadedHarness.ask` (the code path of ``ask``) and turns its :class:`~videvolve.api.Answer`
into a typed reply: the answer as text, its evidence times and its cost.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from videvolve.api import Answer, LoadedHarness, load_harness, resolve_harness
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import HarnessError, UsageError
from videvolve.models import make_vlm
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.rundir import RunDir
from videvolve.skill_library.harness import MANIFEST
from videvolve.skill_library.services import TASK_VIDEO
from videvolve.skill_library.trace import StepListener

Kind = Literal["mcq", "grounding"]
log = logging.getLogger(__name__)
_OPTION = re.compile(r"^\s*\(?([A-Z])[).:]\s+(\S.*)$")


def question_kind(options: list[str] | None, grounding: bool = False) -> Kind:
    """The rule of ``videvolve ask``: mcq when options are given and grounding is not asked for, else grounding."""
    return "mcq" if options and not grounding else "grounding"


def split_question(text: str) -> tuple[str, list[str]]:
    """A prompt's question and its options: lines such as ``A) red`` / ``B. blue`` are options, the rest the question.

    Options must run A, B, C, ... in order; lines that do not are kept as part of the question.
    """
    question: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        m = _OPTION.match(line)
        if m and ord(m.group(1)) - ord("A") == len(options):
            options.append(f"{m.group(1)}) {m.group(2).strip()}")
        elif line.strip():
            question.append(line.strip())
    return " ".join(question), options


class Cost(BaseModel):
    """What one answer cost, as the SDK metered it (a cache hit costs the same as a call)."""

    frames: int = Field(0, description="distinct video frames shown to the model")
    visual_tokens: int = Field(0, description="image and video tokens")
    image_tokens: int = 0
    video_tokens: int = 0
    prompt_tokens: int = Field(0, description="prompt tokens over every model request (cumulative)")
    completion_tokens: int = Field(0, description="tokens the model wrote over every request, as the server said")
    calls: int = Field(0, description="model requests the harness made")
    model_calls: int = Field(0, description="of those, the ones not served by the response cache")

    @classmethod
    def of(cls, usage: dict[str, Any]) -> Cost:
        """From a task's usage (``Meter.to_dict``)."""
        image, video = int(usage.get("image_tokens", 0)), int(usage.get("video_tokens", 0))
        return cls(frames=int(usage.get("frames", 0)), visual_tokens=image + video, image_tokens=image,
                   video_tokens=video, prompt_tokens=int(usage.get("cumulative_tokens", 0)),
                   completion_tokens=int(usage.get("completion_tokens", 0)), calls=int(usage.get("requests", 0)),
                   model_calls=int(usage.get("model_calls", 0)))


class AgentAnswer(BaseModel):
    """A harness's answer to one question about one video."""

    harness: str = Field(description="the harness version that answered (name@version_id)")
    kind: Kind
    outcome: Literal["ok", "error"]
    answer: str | list[tuple[float, float]] | None = Field(
        None, description="mcq: the option letter; grounding: every [start, end] interval in seconds")
    text: str = Field(description="the answer as text: the letter, or the intervals as JSON")
    evidence_times: list[float] = Field(default_factory=list, description="the times (s) the answer rests on")
    observed_times: list[float] = Field(default_factory=list, description="every time (s) the harness looked at")
    cost: Cost
    error_kind: str | None = None
    error: str | None = None


def answer_text(answer: Any) -> str:
    """The letter of an mcq answer; the intervals of a grounding answer as JSON (``[]``: never); '' for none."""
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    return json.dumps([[round(float(a), 3), round(float(b), 3)] for a, b in answer])


def to_agent_answer(harness: LoadedHarness, kind: Kind, answer: Answer) -> AgentAnswer:
    """The library's :class:`~videvolve.api.Answer` as a typed reply."""
    value = answer.answer if isinstance(answer.answer, str) or answer.answer is None else \
        [(float(a), float(b)) for a, b in answer.answer]
    return AgentAnswer(harness=f"{harness.harness.name}@{harness.harness.version_id}", kind=kind,
                       outcome="ok" if answer.outcome == "ok" else "error", answer=value,
                       text=answer_text(value), evidence_times=list(answer.evidence_times),
                       observed_times=list(answer.observed_times), cost=Cost.of(answer.usage),
                       error_kind=answer.error_kind, error=answer.error)


def naming_the_video(answer: AgentAnswer, video: str) -> AgentAnswer:
    """``answer`` with its error naming the video as its caller sent it, where it says "the task's video".

    A data URL is named as one (its bytes would fill the message); a long reference is cut at 200 characters.
    """
    if not answer.error or TASK_VIDEO not in answer.error:
        return answer
    name = "the video sent as a data URL" if video[:5].lower() == "data:" else \
        f"the video {video if len(video) <= 200 else video[:200] + '...'}"
    return answer.model_copy(update={"error": answer.error.replace(TASK_VIDEO, name)})


class VideoAgent:
    """A harness with its model, runtime and cache: answers questions about videos, one call per question.

    Thread-safe: each question runs in its own sandboxed harness process (as ``eval`` runs tasks in threads).
    """

    def __init__(self, harness: LoadedHarness, model: ModelSettings, runtime: RuntimeSettings,
                 vlm: VLM | None = None, cache: ResponseCache | None = None) -> None:
        self.harness = harness
        self.model = model
        self.runtime = runtime
        self.vlm = vlm or make_vlm(model)
        self.cache = cache

    @property
    def version(self) -> str:
        """name@version_id."""
        return f"{self.harness.harness.name}@{self.harness.harness.version_id}"

    def ask(self, video: str | Path, question: str, options: list[str] | None = None,
            grounding: bool = False, cancel: threading.Event | None = None,
            on_step: StepListener | None = None) -> AgentAnswer:
        """Answer one question (mcq with options, else grounding), as ``videvolve ask`` would.

        Raises :class:`~videvolve.errors.MediaError` for a video that cannot be read and
        :class:`~videvolve.errors.InfraError` when the model endpoint is down; a harness's own failure is an
        answer with ``outcome == "error"`` and its cost. ``cancel``, ``on_step``: see
        :meth:`videvolve.api.LoadedHarness.ask`.
        """
        answer = self.harness.ask(video, question, options=options or None, grounding=grounding, model=self.model,
                                  runtime=self.runtime, vlm=self.vlm, cache=self.cache, cancel=cancel,
                                  on_step=on_step)
        return to_agent_answer(self.harness, question_kind(options, grounding), answer)


class HarnessCatalog:
    """The harness versions a server offers, by model id.

    A seed name or harness folder offers itself under its name and its version id; a run directory offers its
    mixture's tier for the budget (or its best harness) under the run's name, and every version it holds under
    the version's id. The run's name follows the run: a run still evolving promotes another best, and the next
    question asked under that name is answered by it (those under way finish with the one they started with).
    """

    def __init__(self, paths: dict[str, Path], default: str, run: RunDir | None = None,
                 budget: int | None = None) -> None:
        self.paths = paths
        self.default = default
        self.run = run
        self.budget = budget
        self._loaded: dict[Path, LoadedHarness] = {}

    @classmethod
    def open(cls, harness_or_run: str | Path, budget: int | None = None) -> HarnessCatalog:
        """The catalog of a seed name, a harness folder or a run directory."""
        path = Path(harness_or_run)
        if (run := RunDir(path)).is_run():
            chosen = resolve_harness(path, budget)
            paths = {path.resolve().name: chosen}
            for version in sorted(p for p in run.harnesses.iterdir() if (p / MANIFEST).is_file()):
                paths[version.name] = version
            return cls(paths, path.resolve().name, run, budget)
        loaded = load_harness(harness_or_run, budget)
        catalog = cls({loaded.harness.name: loaded.harness.path, loaded.harness.version_id: loaded.harness.path},
                      loaded.harness.name)
        catalog._loaded[loaded.harness.path] = loaded
        return catalog

    def ids(self) -> list[str]:
        """Model ids, the default first."""
        return [self.default, *(k for k in self.paths if k != self.default)]

    def load(self, model_id: str) -> LoadedHarness:
        """The harness behind a model id (KeyError when there is none); a run's name: its harness now."""
        if model_id == self.default and self.run is not None:
            try:
                now = resolve_harness(self.run.root, self.budget)
                if now not in self._loaded:
                    self._loaded[now] = load_harness(now)
                self.paths[model_id] = now
            except (OSError, HarnessError, UsageError) as exc:  # best/ being replaced this instant, a mixture.json
                if model_id not in self.paths:  # edited by hand: the best it had answers this one
                    raise
                log.warning("%s: answering with %s meanwhile", exc, self.paths[model_id])
        path = self.paths[model_id]
        if path not in self._loaded:
            self._loaded[path] = load_harness(path)
        return self._loaded[path]


class CatalogAgents:
    """One :class:`VideoAgent` per harness of a catalog, sharing the model client and the cache."""

    def __init__(self, catalog: HarnessCatalog, model: ModelSettings, runtime: RuntimeSettings,
                 vlm: VLM | None = None, cache: ResponseCache | None = None) -> None:
        self.catalog = catalog
        self.model = model
        self.runtime = runtime
        self.vlm = vlm or make_vlm(model)
        self.cache = cache
        self._agents: dict[Path, VideoAgent] = {}
        self._lock = threading.Lock()
        for i in catalog.ids():
            self.agent(i)

    def ids(self) -> list[str]:
        """Model ids, the default first."""
        return self.catalog.ids()

    def agent(self, model_id: str) -> VideoAgent:
        """The agent of a model id (KeyError when unknown); a run's name: its harness now."""
        with self._lock:
            loaded = self.catalog.load(model_id)
            if loaded.harness.path not in self._agents:
                self._agents[loaded.harness.path] = VideoAgent(loaded, self.model, self.runtime, self.vlm, self.cache)
            return self._agents[loaded.harness.path]

    def describe(self, model_id: str) -> str:
        """name@version_id of the harness behind a model id."""
        return self.agent(model_id).version
