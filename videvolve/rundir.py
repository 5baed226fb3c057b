"""The run folder of ``evolve``: the one module that knows its layout, and its readers.

```
runs/<name>/
  settings.json  checkpoints.sqlite  events.jsonl  lineage.jsonl  inputs.json  mixture.json  STOP (optional)
  harnesses/<version>/                  every version, immutable (manifest.json: the harness format's)
  best/                                 the incumbent's files
  evals/<version>/<split>/              results/<task>.json + traces/<task>.jsonl (an EvalDir)
  test/<version>/  test/comparison.json the held-out comparison (``evaluation.experiment``)
  workspaces/<iteration>-<n>/           the editor's workspaces (their inside: ``editing.workspace``)
  investigations/<iteration>/<task>/    the agent investigator's conversations
  report/                               ``videvolve report``
```

The run's services (``loop.services.Run``) hold one :class:`RunDir`; commands that read a finished run (``report``,
``harness list``, the held-out comparison) open one on the folder they are given. Existing runs read as they are:
this module names the layout, it does not change it.
"""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videvolve.errors import StorageError, UsageError
from videvolve.memory.jsonl import append_lines
from videvolve.memory.lineage import LineageRecord, LineageStore


def task_stem(task_id: str) -> str:
    """A task id as a file name (characters other than letters, digits, ``-_.`` become ``_``)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)


@dataclass(frozen=True)
class EvalDir:
    """One harness on one set of tasks: ``results/<task>.json`` and ``traces/<task>.jsonl``.

    A run keeps one per (version, split); ``videvolve eval`` writes one where ``--out`` says (with the copy of the
    harness it ran under ``harnesses/``).
    """

    path: Path

    @staticmethod
    def default(harness_name: str, split: str) -> EvalDir:
        """Where ``videvolve eval`` writes when no ``--out`` is given: ``evals/<harness>-<split>`` here."""
        return EvalDir(Path("evals") / f"{harness_name}-{split}")

    @property
    def results(self) -> Path:
        """The folder of results."""
        return self.path / "results"

    @property
    def traces(self) -> Path:
        """The folder of traces."""
        return self.path / "traces"

    @property
    def harnesses(self) -> Path:
        """Where ``evaluate`` keeps the copy of the harness it ran."""
        return self.path / "harnesses"

    def result(self, task_id: str) -> Path:
        """One task's result."""
        return self.results / f"{task_stem(task_id)}.json"

    def trace(self, task_id: str) -> Path:
        """One task's trace (JSONL)."""
        return self.traces / f"{task_stem(task_id)}.jsonl"


@dataclass
class RunDir:
    """Every path of one run folder, and its readers (the lineage merged, a version's results, a task's trace)."""

    root: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    # ---- files of the run ----

    @property
    def settings(self) -> Path:
        """The run's settings (a ``Context`` as JSON; a valid ``--config``)."""
        return self.root / "settings.json"

    @property
    def checkpoints(self) -> Path:
        """LangGraph's SQLite checkpointer."""
        return self.root / "checkpoints.sqlite"

    @property
    def events(self) -> Path:
        """One JSON line per event of the loop."""
        return self.root / "events.jsonl"

    @property
    def lineage_file(self) -> Path:
        """One JSON line per change of a version's lineage entry (read it merged: :meth:`lineage`)."""
        return self.root / "lineage.jsonl"

    @property
    def inputs(self) -> Path:
        """What the run started on: its tasks' files by content fingerprint, its model's name and revision."""
        return self.root / "inputs.json"

    @property
    def mixture(self) -> Path:
        """With ``--budgets``: tier -> version, score, frames."""
        return self.root / "mixture.json"

    @property
    def stop_file(self) -> Path:
        """Created by a user: the run stops after the iteration under way."""
        return self.root / "STOP"

    # ---- folders of the run ----

    @property
    def harnesses(self) -> Path:
        """Every harness version of the run."""
        return self.root / "harnesses"

    @property
    def best(self) -> Path:
        """A copy of the incumbent."""
        return self.root / "best"

    @property
    def workspaces(self) -> Path:
        """The editor's workspaces, ``<iteration>-<n>`` (the iteration counted from 1)."""
        return self.root / "workspaces"

    @property
    def investigations(self) -> Path:
        """The agent investigator's conversations and probe images."""
        return self.root / "investigations"

    @property
    def report(self) -> Path:
        """The HTML report and its plots."""
        return self.root / "report"

    @property
    def test(self) -> Path:
        """The held-out comparison: the seed's and the best version's test results, and ``comparison.json``."""
        return self.root / "test"

    @property
    def comparison(self) -> Path:
        """The held-out comparison of the seed and the best version."""
        return self.test / "comparison.json"

    def harness(self, version: str) -> Path:
        """Where a harness version lives."""
        return self.harnesses / version

    def evals(self, version: str, split: str) -> EvalDir:
        """Results of one version on one split (``selection`` is read by the gate alone)."""
        return EvalDir(self.root / "evals" / version / split)

    def test_evals(self, version: str) -> EvalDir:
        """Results of one version on the test split (the held-out comparison)."""
        return EvalDir(self.test / version)

    def result_files(self, split: str = "*") -> list[Path]:
        """Every stored result of every version on ``split`` (a glob pattern: ``*`` for all)."""
        return list(self.root.glob(f"evals/*/{split}/results/*.json"))

    # ---- readers ----

    def is_run(self) -> bool:
        """Whether the folder holds an ``evolve`` run (settings and harness versions)."""
        return self.root.is_dir() and self.settings.exists() and self.harnesses.is_dir()

    def read_settings(self) -> dict[str, Any]:
        """The run's settings as stored (``loop.context.Context`` reads them typed)."""
        if not self.settings.is_file():
            raise UsageError(f"{self.root} is not a run directory (no {self.settings.name}): pass the folder "
                             "`videvolve evolve --run` wrote")
        try:
            data = json.loads(self.settings.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(f"cannot read {self.settings}: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"{self.settings} does not hold a settings object")
        return data

    def append_event(self, record: dict[str, Any]) -> None:
        """One line in the events file (``search.events``: its kinds, typed, and their reader)."""
        with self._lock:
            append_lines(self.events, [json.dumps(record, default=str)], "the run's events")

    def set_best(self, harness: Path) -> None:
        """Make ``best/`` a copy of ``harness``, copied beside it first and then put in its place.

        A copy stopped half-way (a full disk, a kill) never stands as the run's best; the run stops for ``--resume``.
        """
        fresh, former = self.root / ".best.tmp", self.root / ".best.old"
        try:
            for leftover in (fresh, former):
                shutil.rmtree(leftover, ignore_errors=True)
            shutil.copytree(harness, fresh)
            if self.best.exists():
                self.best.rename(former)
            fresh.rename(self.best)
        except OSError as exc:
            shutil.rmtree(fresh, ignore_errors=True)
            raise StorageError.writing("the best harness", self.best, exc) from exc
        shutil.rmtree(former, ignore_errors=True)

    def lineage(self) -> dict[str, LineageRecord]:
        """Every version with its parent, scores, decision and reason (the last line of a version wins)."""
        return LineageStore(self.lineage_file, self._lock).read()

    def record_lineage(self, version: str, **data: Any) -> None:
        """Add or update one version's lineage entry (idempotent)."""
        LineageStore(self.lineage_file, self._lock).record(version, **data)
