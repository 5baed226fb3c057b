"""Held-out comparison: the seed and the evolved harness on the test split, which evolution never saw."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from videvolve.config import RuntimeSettings
from videvolve.errors import UsageError
from videvolve.evaluation.results import TaskResult, video_fingerprint
from videvolve.evaluation.solve import solve_tasks
from videvolve.evaluation.summary import summarize
from videvolve.metrics import cluster_sign_flip, mcnemar, paired_bootstrap
from videvolve.models.base import VLM
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel
from videvolve.rundir import RunDir
from videvolve.skill_library.harness import check_version, load_harness, read_manifest
from videvolve.tasks import Task, read_tasks


@dataclass
class Comparison:
    """Test-split summaries of two harnesses and paired tests on the same questions."""

    seed: dict[str, Any]
    best: dict[str, Any]
    grounding_p: float | None
    mcq_p: float | None
    score_p: float
    score_diff: float
    videos: int = 0
    """Test videos (the units of :attr:`video_p`)."""
    videos_gaining: int = 0
    """Test videos on which the best harness's mean score is above the seed's."""
    video_p: float = 1.0
    """Two-sided sign-flip p of the score difference with videos as the units (questions about one video are not
    independent; with few test videos this is what the split can establish)."""
    questions: str = "the test split of the run's tasks file"
    """Which questions were compared (the run's test split, or a file of the user's own)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"seed": self.seed, "best": self.best, "grounding_p": self.grounding_p, "mcq_p": self.mcq_p,
                "score_p": self.score_p, "score_diff": self.score_diff, "videos": self.videos,
                "videos_gaining": self.videos_gaining, "video_p": self.video_p, "questions": self.questions}


def compared_versions(run: RunDir) -> tuple[str, str]:
    """The run's seed version (from its lineage, merged) and its best version (the incumbent's copy)."""
    seed = next((v for v, rec in run.lineage().items() if rec.decision == "seed"), None)
    if seed is None:
        raise UsageError(f"{run.lineage_file} names no seed version: is {run.root} a run `videvolve evolve` started?")
    best = read_manifest(run.best).get("version_id")
    if not best:
        raise UsageError(f"{run.best} has no manifest with a version id: resume the run (`videvolve evolve --run "
                         f"{run.root} --resume`) to write its best harness")
    return seed, str(best)


def held_out(run_tasks: list[Task], tasks: list[Task], what: str) -> None:
    """Refuse questions about a video the run evolved or selected on (its ``run_tasks`` not in the test split).

    By path, and by content: a copy of one under another name is not held out either.
    """
    if not tasks:
        raise UsageError(f"{what} holds no question to compare on (generated labels never make a test split: give "
                         "--tasks FILE with questions about other videos, e.g. from `videvolve tasks from-csv`)")
    seen = {Path(t.video).resolve() for t in run_tasks if t.split != "test"}
    contents = {fp for fp in map(video_fingerprint, seen) if fp}  # a copy elsewhere is the same video
    shared = sorted({t.video for t in tasks if Path(t.video).resolve() in seen
                     or video_fingerprint(t.video) in contents})
    if shared:
        more = f" and {len(shared) - 3} more" if len(shared) > 3 else ""
        raise UsageError(f"{what} asks about video(s) the run evolved or selected on ({', '.join(shared[:3])}{more}): "
                         "a comparison there is not held out; leave those questions out")


def compare_on_test(run_dir: Path, vlm: VLM, cost: CostModel, runtime: RuntimeSettings,
                    tasks: list[Task] | None = None, questions: str | None = None,
                    cache: ResponseCache | None = None, on_result: Callable[[TaskResult], None] | None = None
                    ) -> Comparison:
    """Evaluate the run's seed and best harness on held-out questions: its test split, or ``tasks`` of one's own.

    ``tasks`` must ask about none of the run's train or selection videos (:func:`held_out`); ``questions`` names
    them. The comparison is also written to ``RUN/test/comparison.json``, where the run's report finds it.
    """
    run = RunDir(run_dir)
    run_tasks = read_tasks(run.read_settings()["tasks"])
    own = tasks is not None
    if tasks is None:
        tasks = [t for t in run_tasks if t.split == "test"]
    questions = questions or "the test split of the run's tasks file"
    held_out(run_tasks, tasks, questions)
    seed_version, best_version = compared_versions(run)
    results: dict[str, list[TaskResult]] = {}
    for name, version in (("seed", seed_version), ("best", best_version)):
        harness = load_harness(check_version(run.harness(version)))
        out = run.test_evals(version).path if not own else run.test / "own" / _digest(tasks) / version
        results[name] = solve_tasks(harness, tasks, vlm, cost, runtime, out, cache, on_result)
    s, b = results["seed"], results["best"]
    g = [(x.score, y.score) for x, y in zip(s, b, strict=True) if x.kind == "grounding"]
    m = [(x.score == 1, y.score == 1) for x, y in zip(s, b, strict=True) if x.kind == "mcq"]
    overall = paired_bootstrap([x.score for x in s], [y.score for y in b])
    by_video = cluster_sign_flip([x.score for x in s], [y.score for y in b], [t.video_id for t in tasks])
    seed_summary = {**summarize(tasks, s), "version": seed_version}
    best_summary = {**summarize(tasks, b), "version": best_version}
    comparison = Comparison(
        seed=seed_summary, best=best_summary,
        grounding_p=paired_bootstrap([x for x, _ in g], [y for _, y in g]).p_value if g else None,
        mcq_p=mcnemar([x for x, _ in m], [y for _, y in m]).p_value if m else None,
        score_p=overall.p_value, score_diff=overall.diff, videos=by_video.clusters,
        videos_gaining=by_video.gaining, video_p=by_video.p_value, questions=questions)
    run.test.mkdir(exist_ok=True)
    run.comparison.write_text(json.dumps(comparison.to_dict(), indent=1, default=float))
    return comparison


def _digest(tasks: list[Task]) -> str:
    """A folder name for one set of questions of one's own (their ids apart from the run's test split's)."""
    return hashlib.sha256(json.dumps(sorted(t.id for t in tasks)).encode()).hexdigest()[:12]
