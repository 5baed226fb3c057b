"""What the search needs of a run and of the gate's rule, as protocols.

The real run (``loop.services.Run``) and the test fake (``videvolve.testing.FakeRun``) both satisfy them, and mypy
checks that they do. Properties (read-only, so covariant) rather than attributes; their names say what they are.
:class:`AcceptanceRule` is one rule of the gate (``--gate``), judging a :class:`Look` (a candidate against its parent
on one rung); ``search/rules.py`` holds one class per rule.
"""

# ruff: noqa: D102

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

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

if TYPE_CHECKING:  # the verdicts import the cost bounds, which read GateRules from here
    from videvolve.search.gate import Decision


class GateRules(Protocol):
    """The gate's settings the screening and the mixture read (``loop.context.GateSettings``)."""

    @property
    def rule(self) -> str: ...
    @property
    def acceptance(self) -> AcceptanceRule: ...
    def eps_for(self, n_selection: int) -> float: ...
    def power(self, n_selection: int, videos: int | None = None) -> tuple[str, bool]: ...
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


@dataclass(frozen=True)
class Look:
    """One candidate against its parent on one rung of the selection set: what an acceptance rule judges.

    ``tasks``: the rung's questions, the results in their order; ``a``, ``c``: the parent's mean score and cost on
    them, ``a2``, ``c2``: the candidate's; ``selection``: the whole selection set (full validation's questions);
    ``seed``: the seed harness's results where the rule bounds a gain's cost by the seed's too, ``c_seed`` their
    mean cost; ``level``: the decision's level where the rule spends the run's alpha-wealth (None where it does
    not); ``by_video``: whether a gain must hold over the selection videos too; ``run_seed``: the run's seed.
    """

    tasks: list[Task]
    parent: list[TaskResult]
    candidate: list[TaskResult]
    selection: list[Task]
    gate: GateRules
    a: float
    c: float
    a2: float
    c2: float
    seed: list[TaskResult] | None = None
    c_seed: float | None = None
    level: float | None = None
    by_video: bool = False
    run_seed: int = 0


class Announcement(NamedTuple):
    """One line of evolve's account of its gate (after ``gate: ``), and a warning that ends it, if any."""

    text: str
    warning: str | None = None


class AcceptanceRule(Protocol):
    """One rule of the gate (``--gate``): how it decides a candidate on given results, and how it is told.

    One implementation per rule, registered by its name in ``search/rules.py:RULES``; ``GateSettings.acceptance``
    looks up the run's once, and the screening, the editor's input and evolve's first lines ask it, never its name.
    """

    @property
    def name(self) -> str:
        """Its value of ``GateSettings.rule`` (the ``--gate`` flag)."""
        ...

    @property
    def spends_wealth(self) -> bool:
        """Whether each decision is a test at a level, alpha-invested over the run's decisions (``Look.level``)."""
        ...

    @property
    def seed_bound(self) -> bool:
        """Whether a gain's cost is bounded by the seed harness's too, not only by its parent's (``Look.seed``)."""
        ...

    @property
    def sequential(self) -> bool:
        """Whether a partial rung can settle a verdict (multi-fidelity screening).

        Where it can, a candidate is judged on each rung: accepted early (:meth:`accept_early`), stopped
        (:meth:`stop_early`) or when it cannot be expected to beat one already accepted. Where it cannot, only the
        full rung decides, and a partial rung only screens out (:meth:`stop_early`).
        """
        ...

    def decide(self, look: Look) -> tuple[Decision, dict[str, float | None]]:
        """The verdict on ``look``'s results, and the figures it adds to the history entry (``GateEntry``).

        At the full rung it is the gate's; on a partial rung of a sequential rule it is the rung's, which stands only
        if :meth:`accept_early` says full validation would reach it too.
        """
        ...

    def accept_early(self, look: Look) -> str | None:
        """Why accepting on a partial rung is safe (full validation would all but surely accept), or None."""
        ...

    def stop_early(self, look: Look) -> tuple[str, bool] | None:
        """Why the candidate stops on a partial rung, and whether on its cost alone (no level spent), or None."""
        ...

    def tolerance(self, gate: GateRules, n_selection: int) -> float:
        """The score a cost cut may lose on ``n_selection`` questions (``editing.base.GateTerms.tolerance``)."""
        ...

    def text(self, gate: GateRules, n_selection: int) -> str:
        """The rule in words with the run's numbers: what an editor is told (``EditorInput.gate_rule``)."""
        ...

    def announce(self, gate: GateRules, n_selection: int, videos: int | None) -> list[Announcement]:
        """Evolve's first lines on the gate, for a selection set of ``n_selection`` questions from ``videos``."""
        ...


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
