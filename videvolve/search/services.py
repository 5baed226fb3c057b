"""What the search needs of a run, as protocols.

The real run (``loop.services.Run``) and the test fake (``videvolve.testing.FakeRun``) both satisfy them, and mypy
checks that they do. Properties (read-only, so covariant) rather than attributes; their names say what they are.
"""

# ruff: noqa: D102

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from videvolve.config import RuntimeSettings
from videvolve.evaluation.results import TaskResult
from videvolve.memory.lineage import LineageRecord
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.rundir import RunDir
from videvolve.search.events import KnownEvent
from videvolve.skill_library.harness import Harness
from videvolve.tasks import Task
from videvolve.usage import CostMeasure


class GateRules(Protocol):
    """The gate's settings the screening and the mixture read (``loop.context.GateSettings``)."""

    @property
    def rule(self) -> str: ...
    @property
    def paired(self) -> bool: ...
    def eps_for(self, n_selection: int) -> float: ...
    @property
    def level(self) -> float: ...
    @property
    def margin(self) -> float: ...
    @property
    def spending(self) -> str: ...
    @property
    def min_videos(self) -> int: ...
    @property
    def alpha(self) -> float: ...
    @property
    def beta(self) -> float: ...
    @property
    def eps(self) -> float | None: ...
    @property
    def cost_ceiling(self) -> float | None: ...
    @property
    def cost_measure(self) -> CostMeasure: ...
    @property
    def validation(self) -> str: ...
    @property
    def rungs(self) -> list[float]: ...
    @property
    def penalty(self) -> float: ...
    @property
    def curtail(self) -> float: ...
    @property
    def futility(self) -> float: ...


class SearchSettings(Protocol):
    """The run settings the gate, the screening and the mixture read."""

    @property
    def gate(self) -> GateRules: ...
    @property
    def seed(self) -> int: ...
    @property
    def runtime(self) -> RuntimeSettings: ...


class Evaluator(Protocol):
    """Evaluates harness versions of a run on its selection set (results reused from disk)."""

    @property
    def ctx(self) -> SearchSettings: ...
    @property
    def selection(self) -> list[Task]: ...

    def evaluate(self, version: str, tasks: list[Task], split: str) -> list[TaskResult]:
        """Results of a version on tasks."""
        ...


class StoredResults(Evaluator, Protocol):
    """An evaluator whose stored results can be read without running anything."""

    def stored(self, version: str, task: Task, split: str) -> TaskResult | None:
        """A stored result, or None where the version has not answered the task."""
        ...


class RunServices(StoredResults, Protocol):
    """Everything of a run the mixture needs besides evaluation."""

    @property
    def root(self) -> Path: ...
    @property
    def dir(self) -> RunDir: ...
    @property
    def vlm(self) -> VLM: ...
    @property
    def cost(self) -> CostModel: ...
    @property
    def cache(self) -> ResponseCache | None: ...

    def harness(self, version: str) -> Harness:
        """A version of the run."""
        ...

    def eval_dir(self, version: str, split: str) -> Path:
        """Where a version's results on a split live."""
        ...

    def lineage(self) -> dict[str, LineageRecord]:
        """Every version with its parent, scores and decision."""
        ...

    def event(self, event: KnownEvent) -> None:
        """One line of the run's events."""
        ...
