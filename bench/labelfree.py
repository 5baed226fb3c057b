"""Evolve without labels, measured against gold (issue 22): ``python bench/labelfree.py``.

On fresh SynthWorld worlds (:data:`WORLDS`, chosen before any result; 16 videos of 12 minutes by default,
:data:`SIZE`), each with its gold test split held out, three arms evolve the `uniform` seed harness with SimVLM, the
heuristic editor and the default gate (multi-fidelity validation), on the same train / selection videos:

- **gold**: the world's own train / selection questions and answers;
- **label-free**: ``tasks generate`` (needles + perceived) on the train / selection video files alone -- the
  generator is given a folder holding links to those videos and nothing else; its tasks file is asserted to hold no
  gold task, no gold question id and no test video;
- **teacher**: the world's train / selection questions with their answers (and evidence) removed, written as a
  questions file without an answer column, read back by ``read_questions`` and answered by ``scan_refine`` at full
  budget (no frame cap) through :func:`~videvolve.labelfree.teacher.teach`; it evolves under ``--cost-ceiling`` at
  half of what the teacher spent per question on those questions (a gain may cost up to that, instead of 1.1x the
  seed's: it is looking for a cheaper harness that agrees with the teacher, not a slightly dearer `uniform`).

Every arm's tasks file holds train / selection only, each video in the split the world gave it. Each arm's best
harness is then measured on the world's gold test split against the seed (paired bootstrap on the per-question
score, exact McNemar on mcq, per kind), and the teacher arm's best also against the teacher harness itself (score
difference with its paired bootstrap p, visual-token ratio). Targets: the label-free arm keeps at least half of the
gold arm's test gain with no significant loss on any kind; the teacher arm's best scores within 0.03 of the teacher
at no more than half its visual tokens per question.

Usage: ``python bench/labelfree.py [--worlds 8349 8413 8759] [--videos 16] [--minutes 12] [--questions 100]
[--iterations 6] [--fresh]``
(``--from-results FILE... [--markdown]``: print stored results). Worlds, generated tasks, teacher answers and every
evaluation are cached under ``bench/.cache/labelfree`` (a finished arm is reused unless ``--fresh``); results go to
``results-<tag>.json`` there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labelfree_table import ARMS, SEED_HARNESS, TEACHER_TOKENS, console, markdown, summary, table
from protocol import per_group

from videvolve.api import resolve_harness
from videvolve.config import RuntimeSettings
from videvolve.datasets.own import read_questions
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.experiment import compared_versions
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.folderlock import remove_tree
from videvolve.graph.driver import evolve
from videvolve.labelfree.generate import GenerateSettings, Perceiver, generate
from videvolve.labelfree.labels import label_mix
from videvolve.labelfree.teacher import teach, teacher_cost
from videvolve.loop.context import Context, GateSettings, StopSettings
from videvolve.metrics import paired_bootstrap
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.rundir import RunDir
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task, read_tasks, write_tasks
from videvolve.usage import CostMeasure

SIZE = {"videos": 16, "minutes": 12, "questions": 100}
"""Each world's size (every result of this benchmark so far; the efficacy protocol has since moved to 32 x 6)."""
WORLDS = (8349, 8413, 8759)
"""World seeds of this benchmark, fixed before any result and used nowhere else."""
TEACHER = "scan_refine"
MEASURE = CostMeasure(metric="visual_tokens")
CACHE = Path(__file__).resolve().parent / ".cache" / "labelfree"


@dataclass(frozen=True)
class Size:
    """How big each world is and how long each arm evolves."""

    videos: int
    minutes: float
    questions: int
    iterations: int

    @property
    def tag(self) -> str:
        """Folder-name tag: worlds of other sizes live side by side."""
        return f"v{self.videos}-m{self.minutes:g}-q{self.questions}"


def code_commit() -> str:
    """The commit this checkout's code is at (``-dirty`` with uncommitted changes to it), or "unknown" (no git)."""
    here = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "videvolve", "bench"], cwd=here,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def _runtime() -> RuntimeSettings:
    return RuntimeSettings(concurrency=2)


def world(seed: int, size: Size) -> Path:
    """The world's folder (generated once): ``videos/`` and ``tasks.jsonl`` with its gold splits."""
    root = CACHE / f"world{seed}-{size.tag}"
    if not (root / "tasks.jsonl").exists():
        generate_world(root, seed=seed, videos=size.videos, minutes=size.minutes, questions=size.questions)
    return root


def video_splits(gold: list[Task]) -> dict[str, str]:
    """Each video's split as the world assigned it (video-level; no question or answer)."""
    return {t.video_id: str(t.split) for t in gold}


def gold_arm(gold: list[Task], out: Path) -> Path:
    """The world's own train / selection tasks."""
    write_tasks([t for t in gold if t.split in ("train", "selection")], out)
    return out


def labelfree_arm(root: Path, splits: dict[str, str], questions: int, seed: int, cache: ResponseCache,
                  out: Path) -> Path:
    """Needles + perceived tasks generated from the train / selection video files alone."""
    folder = out.parent / "videos"
    remove_tree(folder)
    folder.mkdir(parents=True)
    for vid, split in sorted(splits.items()):
        if split in ("train", "selection"):
            (folder / f"{vid}.mp4").symlink_to((root / "videos" / f"{vid}.mp4").resolve())
    parts = out.parent / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    settings = GenerateSettings(sources=("needles", "perceived"), questions_per_video=max(1, questions // 2),
                                seed=seed)
    perceiver = Perceiver(SimVLM(), cost_model("qwen2.5-vl"), cache, parts)
    report = generate(folder, settings, parts, perceiver, workers=2)
    if report.errors:
        raise RuntimeError(f"tasks generate could not read {[o.path for o in report.errors]}")
    # the world's own video split, so every arm learns and selects on the same videos
    tasks = [t.model_copy(update={"split": splits[t.video_id]}) for t in report.tasks]
    write_tasks(tasks, out)
    return out


def check_label_free(tasks: list[Task], gold: list[Task]) -> int:
    """The label-free arm's tasks hold no gold task (label, id or test video); returns how many of its question
    texts a gold question of the same video also asks (perceived questions are written from the same templates;
    their answers are the model's own, so a shared wording is no leak, only worth knowing)."""
    test_videos = {t.video_id for t in gold if t.split == "test"}
    assert tasks, "the label-free arm has no tasks"
    assert all(t.label_source in ("needles", "perceived") for t in tasks), "a gold or teacher label in the arm"
    assert not {t.id for t in tasks} & {t.id for t in gold}, "a gold question id in the label-free arm"
    assert not {t.video_id for t in tasks} & test_videos, "a test video in the label-free arm"
    assert {t.split for t in tasks} <= {"train", "selection"}
    asked = {(t.video_id, t.question) for t in gold}
    return sum((t.video_id, t.question) in asked for t in tasks)


def teacher_arm(root: Path, gold: list[Task], cache: ResponseCache, out: Path) -> Path:
    """The world's train / selection questions without answers, answered by the teacher at full budget."""
    questions = out.parent / "questions.jsonl"
    rows = [{"id": t.id, "video": Path(t.video).name, "question": t.question, "options": t.options, "kind": t.kind}
            for t in gold if t.split in ("train", "selection")]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    table = read_questions(questions, root / "videos", source="synthworld")
    assert not table.tasks and len(table.unanswered) == len(rows), "the teacher's questions must have no answers"
    report = teach(table.unanswered, resolve_harness(TEACHER), TEACHER, out.parent / "teacher", SimVLM(),
                   cost_model("qwen2.5-vl"), _runtime(), cache)
    if report.failures:
        console.print(f"teacher left out {len(report.failures)} question(s): "
                      + "; ".join(f"{f.question_id}: {f.reason}" for f in report.failures[:3]))
    splits = video_splits(gold)
    tasks = [t.model_copy(update={"split": splits[t.video_id]}) for t in report.tasks]
    assert all(t.label_source == "teacher" for t in tasks)
    write_tasks(tasks, out)
    return out


def short_mix(tasks: list[Task]) -> str:
    """``38 q: needles 30, perceived 8`` -- the train / selection labels an arm decided on, in one line."""
    mixes = label_mix(tasks)
    counts: dict[str, int] = {}
    for m in mixes:
        for k, v in m.counts.items():
            counts[k] = counts.get(k, 0) + v
    return f"{sum(counts.values())} q: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def on_test(root: Path, harness_dir: Path, test: list[Task]) -> list[TaskResult]:
    """A harness on the gold test split (results stored per version, shared by the arms)."""
    harness = load_harness(harness_dir)
    return solve_tasks(harness, test, SimVLM(), cost_model("qwen2.5-vl"), _runtime(),
                       root / "test" / harness.version_id)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _tokens(rs: list[TaskResult]) -> float:
    return _mean([MEASURE.of(r) for r in rs])


def run_arm(seed: int, arm: str, root: Path, size: Size, fresh: bool) -> dict[str, Any]:
    """One arm on one world: its tasks, `evolve`, then seed and best on the gold test split."""
    started = time.time()
    home = root / arm
    done = home / "result.json"
    if done.exists() and not fresh:
        stored: dict[str, Any] = json.loads(done.read_text())
        if stored.get("iterations") == size.iterations and "cost_ceiling" in stored:  # (older rows evolved without)
            return stored
    gold = read_tasks(root / "tasks.jsonl")
    test = [t for t in gold if t.split == "test"]
    cache = ResponseCache(root / "cache.sqlite")
    home.mkdir(parents=True, exist_ok=True)
    tasks_path = home / "tasks.jsonl"
    if arm == "gold":
        gold_arm(gold, tasks_path)
    elif arm == "label-free":
        labelfree_arm(root, video_splits(gold), size.questions, seed, cache, tasks_path)
        shared = check_label_free(read_tasks(tasks_path), gold)
        console.print(f"world {seed}: label-free tasks hold no gold task ({shared} question text(s) also asked by "
                      "gold questions of the same video, answered from the model's own look)", highlight=False)
    else:
        teacher_arm(root, gold, cache, tasks_path)
    arm_tasks = read_tasks(tasks_path)
    for name in ("run", "memory"):
        remove_tree(home / name)
    # the teacher arm looks for a harness that agrees with the teacher at <= TEACHER_TOKENS x its cost: a gain may
    # spend up to that (what the teacher paid on these train / selection questions), not 1.1x the seed's
    spent = teacher_cost(arm_tasks) if arm == "teacher" else None
    ceiling = None if spent is None else TEACHER_TOKENS * spent
    ctx = Context(run_dir=str(home / "run"), run_id=f"labelfree{seed}-{arm}", tasks=str(tasks_path),
                  seed_harness=SEED_HARNESS, memory=str(home / "memory"),
                  stop=StopSettings(iterations=size.iterations), seed=seed, runtime=_runtime(),
                  cache=str(root / "cache.sqlite"),
                  gate=GateSettings(validation="multi-fidelity", cost_metric=MEASURE.metric, cost_ceiling=ceiling))
    history = evolve(ctx).get("history", [])
    run = RunDir(home / "run")
    seed_version, best_version = compared_versions(run)
    seed_res = on_test(root, run.harness(seed_version), test)
    best_res = on_test(root, run.harness(best_version), test)
    boot = paired_bootstrap([r.score for r in seed_res], [r.score for r in best_res])
    row: dict[str, Any] = {
        "world": seed, "arm": arm, "iterations": size.iterations, "seed_version": seed_version,
        "best_version": best_version, "labels": " · ".join(m.text() for m in label_mix(arm_tasks)),
        "labels_short": short_mix(arm_tasks),
        "test_questions": len(test), "score_seed": _mean([r.score for r in seed_res]),
        "score_best": _mean([r.score for r in best_res]), "score_diff": boot.diff, "score_p": boot.p_value,
        "groups": per_group(test, seed_res, best_res), "tokens_seed": _tokens(seed_res),
        "tokens_best": _tokens(best_res),
        "cost_ceiling": ceiling, "accepted": sum(1 for h in history if h["decision"] == "accepted"),
        "proposed": sum(1 for h in history if h["decision"] in ("accepted", "rejected", "dropped"))}
    if arm == "teacher":
        teacher_res = on_test(root, resolve_harness(TEACHER), test)
        vs = paired_bootstrap([r.score for r in teacher_res], [r.score for r in best_res])
        row |= {"score_teacher": _mean([r.score for r in teacher_res]), "tokens_teacher": _tokens(teacher_res),
                "vs_teacher_diff": vs.diff, "vs_teacher_p": vs.p_value,
                "teacher_groups": per_group(test, teacher_res, best_res)}
    row["minutes"] = (time.time() - started) / 60
    row["commit"] = code_commit()
    done.write_text(json.dumps(row, indent=1, default=float))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=list(WORLDS))
    parser.add_argument("--videos", type=int, default=SIZE["videos"])
    parser.add_argument("--minutes", type=float, default=SIZE["minutes"])
    parser.add_argument("--questions", type=int, default=SIZE["questions"], help="questions per video")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--fresh", action="store_true", help="evolve every arm again (worlds and answers are kept)")
    parser.add_argument("--from-results", type=Path, nargs="+", metavar="JSON",
                        help="print the tables and verdicts of stored results files (runs made side by side)")
    parser.add_argument("--markdown", action="store_true", help="--from-results: one Markdown table")
    args = parser.parse_args()
    if args.from_results:
        stored = {int(k): v for path in args.from_results for k, v in json.loads(path.read_text()).items()}
        if args.markdown:
            print(markdown(stored))
        else:
            for seed, rows in stored.items():
                console.print(table(seed, rows))
        return summary(stored)
    size = Size(args.videos, args.minutes, args.questions, args.iterations)
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"results-{size.tag}-i{size.iterations}-{'-'.join(map(str, args.worlds))}.json"
    by_world: dict[int, dict[str, dict[str, Any]]] = {}
    for seed in args.worlds:
        root = world(seed, size)
        by_world[seed] = {}
        for arm in args.arms:
            by_world[seed][arm] = run_arm(seed, arm, root, size, args.fresh)
            out.write_text(json.dumps(by_world, indent=1, default=float))
        console.print(table(seed, by_world[seed]))
    console.print(f"results: {out}", highlight=False)
    return summary(by_world)


if __name__ == "__main__":
    sys.exit(main())
