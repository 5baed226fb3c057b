"""The edit node's helper: a workspace and its tools for each proposal, wired to the run's services.

Only this batch's training tasks reach the tools and the workspace; trials run through the run's solve engine into
``RUN/evals/<candidate>/train/`` (where validation's smoke run finds them again), probes through ``TaskServices``.
"""

from __future__ import annotations

import json
from pathlib import Path

from videvolve.editing import PastDiagnosis
from videvolve.editing.base import EditorInput
from videvolve.editing.safefs import PathRefused, read_bytes, remove_tree, write_bytes
from videvolve.editing.tools import EditorEnv, EditorTools, tools_doc
from videvolve.editing.workspace import EditorLimits, TraceItem, build_workspace
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.models.cache import ResponseCache
from videvolve.search.history import diagnosis_for_editor
from videvolve.skill_library.harness import MANIFEST, Harness, revision_diff
from videvolve.skill_library.steps import TraceStep
from videvolve.skill_library.trace import read_steps
from videvolve.tasks import Task
from videvolve.usage import Spend

REPAIRING = "repairing.json"
"""In a workspace a repair round reopened: the failed version it repairs (its ``submitted.json`` is removed then)."""


def _version_in(path: Path) -> str | None:
    """The ``version`` a workspace's marker names (None: no file, or one that is not such a record).

    Read as the editor's files are (:func:`~videvolve.editing.safefs.read_bytes`): a command editor may have left a
    link, a pipe or a huge file under that name.
    """
    try:
        got = json.loads(read_bytes(path.parent, path.name, limit=4096))
    except (PathRefused, OSError, ValueError):
        return None
    version = got.get("version") if isinstance(got, dict) else None
    return version if isinstance(version, str) else None


def reopen(workspace: Path) -> None:
    """Mark a workspace a repair round reopens, so that a run stopped during the round finds it again.

    The failed version it repairs goes from ``submitted.json`` (removed: the round's own submission is written
    there) to :data:`REPAIRING`.
    """
    sub = workspace / "submitted.json"
    if (version := _version_in(sub)) is not None:
        remove_tree(workspace / REPAIRING)  # whatever the editor left under that name (a link, a pipe)
        write_bytes(workspace, REPAIRING, (json.dumps({"version": version}) + "\n").encode())
    remove_tree(sub)


def limits_of(run: Run) -> EditorLimits:
    """The run's per-proposal editor budgets."""
    e = run.ctx.editor
    return EditorLimits(rounds=e.rounds, trial_tasks=e.trial_tasks, probes=e.probes, visual_tokens=e.visual_tokens,
                        timeout_s=e.timeout, images=e.workspace_images)


def _trace(run: Run, version: str, task_id: str) -> list[TraceStep]:
    return read_steps(run.dir.evals(version, "train").trace(task_id))


def editor_env(run: Run, parent: str, batch: list[Task], cache: ResponseCache | None = None) -> EditorEnv:
    """The tools' view of the run: this batch's training tasks, the parent's results on them, the services.

    ``cache``: the edit step's response cache for the probes (:mod:`~videvolve.models.step_cache`; the run's by
    default); trials store their results and read them back, so they pay the same on any attempt.
    """
    results = {t.id: r for t in batch if (r := run.stored(parent, t, "train")) is not None}

    def evaluate(harness: Harness, tasks: list[Task]) -> list[TaskResult]:
        return solve_tasks(harness, tasks, run.vlm, run.cost, run.ctx.runtime,
                           run.eval_dir(harness.version_id, "train"), run.cache, executor=run.ctx.executor,
                           model=run.ctx.model, ray_address=run.ctx.ray_address)

    def memory_search(query: str, k: int) -> list[PastDiagnosis]:
        return [PastDiagnosis(diagnosis=diagnosis_for_editor(d, len(run.selection)), similarity=s)
                for d, s in run.memory.search(query, k=k, exclude_videos=run.excluded_videos,
                                              exclude_fingerprints=run.excluded_fingerprints)]

    return EditorEnv(parent=parent, parent_dir=run.harness_dir(parent), tasks={t.id: t for t in batch},
                     parent_results=results, evaluate=evaluate, trace_of=lambda v, t: _trace(run, v, t),
                     probe_vlm=run.probe_vlm, cost=run.cost, cache=cache or run.cache,
                     image_format=run.ctx.runtime.image_format, memory_search=memory_search,
                     cost_measure=run.ctx.gate.cost_measure)


class Sessions:
    """Opens one workspace per proposal of an edit step (or reopens the one a repair round goes back to)."""

    def __init__(self, run: Run, state: State, cache: ResponseCache | None = None) -> None:
        self.run, self.state = run, state
        self.cache = cache
        self.iteration, self.parent = state["iteration"], state["parent"]
        self.folder = str(self.iteration + 1)  # workspaces/<iteration>-<n>/, the iteration numbered from 1
        by_id = {t.id: t for t in run.train}
        self.batch = [by_id[i] for i in state.get("batch", []) if i in by_id]
        self.limits = limits_of(run)
        self.opened: list[EditorTools] = []
        root = run.dir.workspaces
        self.repair = self._failed_workspace(root) if state.get("feedback") else None
        self.base = len(list(root.glob(f"{self.folder}-*"))) if state.get("feedback") else 0

    def _failed_workspace(self, root: Path) -> Path | None:
        """The workspace whose submission failed validation (its ``submitted.json`` names a failed candidate).

        A repair round that reopened it removed that file: a run stopped during the round finds it by its
        ``repairing.json``.
        """
        failed = set(self.state.get("candidates", []))
        for ws in sorted(root.glob(f"{self.folder}-*")):
            for name in ("submitted.json", REPAIRING):
                if _version_in(ws / name) in failed:
                    return ws
        return None

    def open(self, inp: EditorInput, resume: bool = False) -> EditorTools:
        """A workspace and its tools for the next proposal; ``resume``: the failed submission's, in a repair round."""
        env = editor_env(self.run, self.parent, self.batch, self.cache)
        if resume and self.repair is not None and not self.opened:
            tools = EditorTools(self.repair, env, self.limits, inp)
            tools.resumed = True
            reopen(self.repair)
        else:
            root = self.run.dir.workspaces / f"{self.folder}-{self.base + len(self.opened)}"
            items = [TraceItem(t, env.parent_results.get(t.id), _trace(self.run, self.parent, t.id))
                     for t in self.batch]
            build_workspace(root, env.parent_dir, inp, items, self.limits, tools_doc(), self._diffs(inp))
            tools = EditorTools(root, env, self.limits, inp)
        self.opened.append(tools)
        return tools

    def _diffs(self, inp: EditorInput) -> dict[str, str]:
        out: dict[str, str] = {}
        for h in inp.history:
            cand = h.get("candidate")
            if cand and (self.run.harness_dir(cand) / MANIFEST).exists():
                out[cand] = revision_diff(self.run.harness_dir(cand))
        return out

    def spent(self) -> Spend:
        """What the editor's trials and probes cost in this step (added to the run's totals)."""
        return Spend.total(Spend(model_calls=t.ledger.model_calls, visual_tokens=t.ledger.visual_tokens,
                                 editor_model_calls=t.ledger.model_calls, editor_visual_tokens=t.ledger.visual_tokens,
                                 editor_trial_tasks=t.ledger.trial_tasks, editor_probes=t.ledger.probes)
                           for t in self.opened)
