"""``videvolve tasks from-csv``: your questions about a folder of videos, answered by you or by a teacher harness."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from videvolve.cli.common import add_model_args, model_settings, open_cache, runtime_settings, stdout_console

if TYPE_CHECKING:
    from videvolve.datasets.own import QuestionTable
    from videvolve.labelfree.teacher import TeachReport

out = stdout_console()
err = Console(stderr=True, soft_wrap=True)


def register(tsub: argparse._SubParsersAction) -> None:
    """Add ``tasks from-csv`` under ``tasks``."""
    fc = tsub.add_parser("from-csv", help="your questions (CSV or JSONL) about a folder of videos -> tasks.jsonl; "
                         "questions without answers are answered by a --teacher harness")
    fc.add_argument("file", type=Path, help="columns: video, question[, answer, options, kind, evidence, id]")
    fc.add_argument("--videos", type=Path, required=True, help="the folder the 'video' column refers to")
    fc.add_argument("--out", type=Path, required=True, help="where to write the tasks file (JSONL)")
    fc.add_argument("--source", default="custom", help="a name for this dataset")
    t = fc.add_argument_group("teacher labels (for rows without an answer)")
    t.add_argument("--teacher", default=None, metavar="HARNESS", help="a seed name (e.g. scan_refine), a harness "
                   "folder or a run directory (its best) that answers the questions without answers, once; its "
                   "answers are their labels (label_source 'teacher')")
    t.add_argument("--teacher-budget", type=int, default=None, metavar="N", help="the teacher's per-question cap "
                   "on distinct frames (ctx.budget; default: none)")
    t.add_argument("--teacher-out", type=Path, default=None, help="where the teacher's results and traces are kept "
                   "(default OUT.teacher/); rerunning into it reuses every finished answer")
    t.add_argument("--executor", choices=["local", "ray"], default="local", help="where the teacher runs")
    t.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local one)")
    add_model_args(fc, skip_runtime=("budget",))
    fc.set_defaults(func=cmd_from_csv)


def cmd_from_csv(args: argparse.Namespace) -> int:
    """Read the questions; have the teacher answer those without answers; write the tasks."""
    from videvolve.datasets.own import read_questions, unanswered_error
    from videvolve.errors import HostError, InfraError, UsageError
    from videvolve.interrupt import INTERRUPTED
    from videvolve.labelfree.generate import describe_sources
    from videvolve.tasks import summarize, write_tasks

    if args.teacher_budget is not None and args.teacher_budget < 1:
        raise UsageError(f"--teacher-budget must be at least 1 frame, got {args.teacher_budget}")
    table = read_questions(args.file, args.videos, args.source)
    if table.late:  # an answer that can never be found: the times are likely in another unit, or the video another
        shown = "; ".join(table.late[:8]) + ("; ..." if len(table.late) > 8 else "")
        err.print(f"[yellow]warning:[/] {len(table.late)} row(s) of {args.file} have an interval that ends after "
                  f"their video does ({shown}): check that the times are seconds from the video's start (or "
                  "HH:MM:SS) and that the row names the right video", highlight=False)
    tasks = list(table.tasks)
    if table.unanswered and not args.teacher:
        raise unanswered_error(table)
    if table.unanswered:
        teacher_out = args.teacher_out or args.out.with_name(args.out.name + ".teacher")
        try:
            report = _teach(args, table, teacher_out)
        except (InfraError, HostError) as exc:
            err.print(f"[bold red]teaching stopped:[/] {exc}\nThe teacher's finished answers are kept in "
                      f"{teacher_out}; rerun the same command to continue.", highlight=False)
            return 3
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted:[/] the teacher's finished answers are kept in {teacher_out}; rerun the "
                      "same command to continue.", highlight=False)
            return INTERRUPTED
        tasks += report.tasks
        for f in report.failures:
            err.print(f"[yellow]left out[/] {args.file}:{f.line} ({f.question_id}): {f.reason}", highlight=False)
        out.print(f"teacher {args.teacher} answered {len(report.tasks)} of {len(table.unanswered)} question(s) "
                  f"({report.reused} answer(s) reused from {teacher_out}); {len(report.failures)} left out"
                  + (" (listed above)" if report.failures else ""), highlight=False)
    elif args.teacher:
        err.print(f"note: every question of {args.file} has an answer; the teacher was not asked", highlight=False)
    if not tasks:
        raise UsageError(f"no tasks from {args.file}: the teacher gave no usable answer (see the lines above)")
    write_tasks(tasks, args.out)
    summary = summarize(tasks)
    out.print(f"wrote {len(tasks)} tasks over {summary['videos']} videos to {args.out} (labels: "
              f"{describe_sources(tasks)}; {summary['by_split'].get('-', {})}); next: "
              f"`videvolve tasks split {args.out}"
              + (" --fractions train=0.7,selection=0.3" if any(t.label_source != "gold" for t in tasks) else "")
              + "`", highlight=False)  # teacher labels make no test split (the default deals one)
    return 0


def _teach(args: argparse.Namespace, table: QuestionTable, teacher_out: Path) -> TeachReport:
    """The teacher on the unanswered questions, with a progress bar as ``eval`` shows one."""
    from videvolve.api import resolve_harness
    from videvolve.config import RuntimeSettings
    from videvolve.evaluation.evaluate import with_proxies
    from videvolve.labelfree.teacher import teach
    from videvolve.models import make_vlm
    from videvolve.models.cost import cost_model

    ms = model_settings(args)
    rs = RuntimeSettings.model_validate({**runtime_settings(args).model_dump(), "budget": args.teacher_budget})
    src = resolve_harness(args.teacher, rs.budget)
    name = Path(args.teacher).name
    failed: list[str] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        bar = progress.add_task(f"teacher {name}", total=len(table.unanswered), info="")

        def on_result(r: Any) -> None:
            if r.outcome != "ok":
                failed.append(r.task_id)
            progress.update(bar, advance=1, info=f"{len(failed)} failed" if failed else "")

        return teach(table.unanswered, src, name, teacher_out, make_vlm(ms), cost_model(ms.family, ms.max_pixels), rs,
                     open_cache(args), ms, args.executor, args.ray_address, on_result,
                     videos=lambda ts: with_proxies(ts, args.proxy))
