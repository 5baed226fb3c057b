"""``videvolve tasks generate``: tasks with known answers from a folder of videos alone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from videvolve.cli.common import add_model_args, model_settings, open_cache, runtime_settings, stdout_console

out = stdout_console()
err = Console(stderr=True, soft_wrap=True)


def register(tsub: argparse._SubParsersAction) -> None:
    """Add ``tasks generate`` under ``tasks``."""
    g = tsub.add_parser("generate", help="tasks with known answers from a folder of videos, no labels needed")
    g.add_argument("videos_dir", type=Path)
    g.add_argument("--out", type=Path, required=True, help="the tasks file to write")
    g.add_argument("--sources", default="needles", help="comma-separated: needles, perceived (default: needles); "
                   "for teacher labels of your own questions use `tasks from-csv --teacher`")
    g.add_argument("--questions-per-video", type=int, default=16, help="questions to generate per video")
    g.add_argument("--fractions", default="train=0.7,selection=0.3", help="video-disjoint shares (no test: "
                   "generated labels never make a test split)")
    g.add_argument("--seed", type=int, default=0, help="seed of the needle plans and the split")
    g.add_argument("--perceive-fps", type=float, default=1.0, help="perceived pass: frames per second described")
    g.add_argument("--workers", type=int, default=None,
                   help="videos processed at once (default: one per core; with --executor ray, of the cluster)")
    g.add_argument("--executor", choices=("local", "ray"), default="local", help="local threads, or Ray tasks")
    g.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_model_args(g)
    g.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    """Generate, write, report each unreadable video by name."""
    from rich.markup import escape  # file names such as 'talk [dQw4w9WgXcQ].mp4' (yt-dlp's) are not markup

    from videvolve.cli.flags import build
    from videvolve.errors import UsageError
    from videvolve.folderlock import hold
    from videvolve.labelfree.generate import GenerateSettings, Perceiver, check_sources, describe_sources, generate
    from videvolve.labelfree.labels import too_few_videos
    from videvolve.media.check import list_videos
    from videvolve.models import make_vlm
    from videvolve.models.cost import cost_model
    from videvolve.tasks import parse_fractions, selection_warning, summarize, write_tasks

    settings: GenerateSettings = build(GenerateSettings, {
        "sources": tuple(s.strip() for s in args.sources.split(",") if s.strip()),
        "questions_per_video": args.questions_per_video, "fractions": parse_fractions(args.fractions),
        "seed": args.seed, "perceive_fps": args.perceive_fps}, "the command line")
    check_sources(settings.sources)
    if not args.videos_dir.is_dir():
        raise UsageError(f"not a folder of videos: {args.videos_dir}")
    parts = args.out.with_name(args.out.name + ".parts")
    parts.mkdir(parents=True, exist_ok=True, mode=0o700)
    with hold(parts, "tasks folder", "give this command another --out"):  # a second run into --out: refused
        perceiver = None
        if "perceived" in settings.sources:
            model = model_settings(args)
            runtime = runtime_settings(args)
            perceiver = Perceiver(make_vlm(model), cost_model(model.family, model.max_pixels), open_cache(args), parts,
                                  model, image_format=runtime.image_format, jpeg_quality=runtime.jpeg_quality)
        total = len(list_videos(args.videos_dir))
        with Progress(TextColumn("generating {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True) as progress:
            bar = progress.add_task("videos", total=total)
            if perceiver is not None and args.executor != "ray":  # a Ray worker's look tells nobody here
                frames = progress.add_task("frames described", total=None)
                perceiver.on_frames = lambda n: progress.advance(frames, n)
            report = generate(args.videos_dir, settings, parts, perceiver, workers=args.workers,
                              executor=args.executor, on_done=lambda _o: progress.advance(bar))
        for o in report.errors:
            err.print(f"[red]skipped[/] {escape(o.path)}: {escape(o.error or '')}", markup=True, highlight=False)
        for o in report.outcomes:
            for note in o.notes:
                err.print(f"[yellow]note:[/] {escape(o.path)}: {escape(note)}", markup=True, highlight=False)
        if not report.tasks:
            raise UsageError(f"no tasks could be generated from {args.videos_dir}"
                             + (f" ({len(report.errors)} skipped video(s) listed above)" if report.errors else ""))
        write_tasks(report.tasks, args.out)
    summary = {**summarize(report.tasks), "labels": describe_sources(report.tasks),
               "skipped": [{"video": o.path, "error": o.error} for o in report.errors],
               "notes": [{"video": o.path, "note": n} for o in report.outcomes for n in o.notes], "out": str(args.out)}
    if args.json:
        out.print_json(json.dumps(summary))
    else:
        out.print(f"wrote {summary['tasks']} tasks about {summary['videos']} videos to {args.out} "
                  f"(labels: {summary['labels']}; splits: {summary['by_split']})", highlight=False)
    few = too_few_videos(report.tasks)
    warning = f"no selection split: {few}" if few else selection_warning(
        sum(1 for t in report.tasks if t.split == "selection"))
    if warning:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    return 0
