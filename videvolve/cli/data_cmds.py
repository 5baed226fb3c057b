"""Commands about data: ``synth``, ``tasks validate``, ``tasks split``, ``import``; ``tasks from-csv|generate``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from videvolve.cli import from_csv_cmd, generate_cmd
from videvolve.cli.common import output_folder, stdout_console
from videvolve.errors import UsageError

if TYPE_CHECKING:
    from videvolve.tasks import Task

out = stdout_console()
err = Console(stderr=True, soft_wrap=True)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the data commands."""
    p = sub.add_parser("synth", help="generate a SynthWorld: videos/*.mp4 and tasks.jsonl")
    p.add_argument("out_dir", type=Path)
    p.add_argument("--videos", type=int, default=12, help="number of videos (default 12)")
    p.add_argument("--minutes", type=float, default=20.0, help="mean video length in minutes (default 20)")
    p.add_argument("--seed", type=int, default=0, help="the world's random seed: the same seed (and settings) writes "
                   "the same videos, questions and splits; another seed, another world (default 0)")
    p.add_argument("--questions", type=int, default=None, help="questions per video, half of each kind "
                   "(default: about one of each kind per two minutes)")
    p.add_argument("--fractions", default="train=0.5,selection=0.25,test=0.25", help="video-disjoint split shares")
    p.add_argument("--workers", type=int, default=None, help="encoding processes (default: one per core)")
    p.add_argument("--narration", action="store_true", help="a narrator: its lines as .vtt captions beside each "
                   "video, and questions whose answer needs the pictures, the words, or both (see --mix)")
    p.add_argument("--speech", action="store_true", help="also speak the narration into each video's sound track "
                   "(implies --narration; needs espeak-ng; slow)")
    p.add_argument("--mix", default="pictures=0.4,words=0.3,both=0.3",
                   help="with --narration, the shares of questions by the evidence they need")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=cmd_synth)

    tasks = sub.add_parser("tasks", help="make, check or split a tasks.jsonl file: from-csv (your questions about "
                           "your videos), generate (questions with known answers from unlabelled videos), validate, "
                           "split")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    v = tsub.add_parser("validate", help="check every record; report the file and line of each problem")
    v.add_argument("file", type=Path)
    v.add_argument("--no-videos", action="store_true", help="do not check that the video files exist")
    v.add_argument("--json", action="store_true", help="print JSON instead of a table")
    v.set_defaults(func=cmd_validate)
    s = tsub.add_parser("split", help="assign video-disjoint splits")
    s.add_argument("file", type=Path)
    s.add_argument("--fractions", default="train=0.5,selection=0.25,test=0.25",
                   help="e.g. train=0.6,selection=0.2,test=0.2 (shares of videos)")
    s.add_argument("--seed", type=int, default=0, help="seed of the shuffle that deals the videos to the splits "
                   "(default 0)")
    s.add_argument("--out", type=Path, default=None, help="output file (default: FILE with .split.jsonl)")
    s.set_defaults(func=cmd_split)

    from_csv_cmd.register(tsub)
    generate_cmd.register(tsub)

    imp = sub.add_parser("import", help="turn a benchmark's annotation file into tasks.jsonl")
    imp.add_argument("benchmark", help="the benchmark's name, e.g. vue-tr, qvhighlights, videomme (a wrong name lists "
                     "them all)")
    imp.add_argument("annotations", type=Path, help="the benchmark's annotation file (or MLVU's folder)")
    imp.add_argument("--meta", type=Path, default=None, help="extra file, e.g. Charades_v1_test.csv for durations")
    imp.add_argument("--videos", type=Path, required=True, help="folder holding the benchmark's videos")
    imp.add_argument("--out", type=Path, required=True, help="where to write the tasks file (JSONL)")
    imp.set_defaults(func=cmd_import)


def stats_table(stats: dict[str, Any]) -> Table:
    """A world's statistics as a table."""
    table = Table(title="SynthWorld", show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("videos / hours", f"{stats['videos']} / {stats['hours']}")
    table.add_row("grounding questions", str(stats["grounding"]))
    table.add_row("  short targets (<= 10 s)", f"{stats['short_share']:.0%} of present targets")
    table.add_row("  multi-occurrence targets", f"{stats['multi_share']:.0%} of present targets")
    table.add_row("  absent targets", f"{stats['absent_share']:.0%}")
    table.add_row("mcq questions", str(stats["mcq"]))
    table.add_row("  templates", ", ".join(f"{k} {v}" for k, v in sorted(stats["mcq_templates"].items())))
    table.add_row("  correct letters", ", ".join(f"{k} {v}" for k, v in stats["mcq_letters"].items()))
    if "evidence" in stats:
        table.add_row("answer needs", ", ".join(f"{k} {v}" for k, v in stats["evidence"].items()))
    for name, s in stats["splits"].items():
        table.add_row(f"split {name}", f"{s['videos']} videos, {s['tasks']} tasks")
    return table


def cmd_synth(args: argparse.Namespace) -> int:
    """``videvolve synth``."""
    from videvolve.datasets.synthworld import generate_world, world_stats
    from videvolve.datasets.synthworld.spoken import parse_mix
    from videvolve.tasks import parse_fractions
    _check_synth(args)
    with Progress(TextColumn("encoding videos"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        bar = progress.add_task("videos", total=args.videos)
        world = generate_world(args.out_dir, videos=args.videos, minutes=args.minutes, seed=args.seed,
                               fractions=parse_fractions(args.fractions), workers=args.workers,
                               questions=args.questions, narration=args.narration, speech=args.speech,
                               mix=parse_mix(args.mix),
                               progress=lambda done, total: progress.update(bar, completed=done))
    stats = world_stats(world.tasks)
    if args.json:
        print(json.dumps(stats))
    else:
        out.print(stats_table(stats))
        out.print(f"wrote {world.tasks_path} and {len(world.scripts)} videos under {world.root / 'videos'}")
    return 0


def _check_synth(args: argparse.Namespace) -> None:
    """``synth``'s numbers and folder, before anything is written (a NaN or negative length crashed mid-way)."""
    import math

    if args.videos < 1:
        raise UsageError(f"--videos {args.videos}: give at least 1 video")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        raise UsageError(f"--minutes {args.minutes}: give a positive number of minutes, e.g. 3")
    for flag, value in (("--questions", args.questions), ("--workers", args.workers)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: give a positive number (or leave it out for the default)")
    output_folder(args.out_dir, "the world")
    if (args.out_dir / "tasks.jsonl").exists() or any((args.out_dir / "videos").glob("*.mp4")):
        raise UsageError(f"{args.out_dir} already holds a world (tasks.jsonl, videos/): synth would overwrite it, "
                         "and runs that read it. Give a new folder, or remove that one first")


def _warnings(tasks: Sequence[Task], check_videos: bool) -> list[str]:
    """What to fix before ``evolve``, each said once (the selection set's size as the gate's power says it)."""
    from videvolve.tasks import check_video_disjoint, selection_size
    warnings = []
    shared = check_video_disjoint(tasks)
    if shared:
        warnings.append(f"{len(shared)} video(s) appear in more than one split (e.g. {shared[0]}): "
                        "run `videvolve tasks split` to make the splits video-disjoint")
    if not any(t.split for t in tasks):
        warnings.append("no task has a split: run `videvolve tasks split` before `evolve`")
    elif (power := _power_note(*selection_size(tasks)))[1]:
        warnings.append(power[0])
    missing: list[str] = []
    if check_videos:
        missing = sorted({t.video for t in tasks if not Path(t.video).is_file()})
        if missing:
            warnings.append(f"{len(missing)} video file(s) not found (e.g. {missing[0]})")
        warnings += _duration_warnings([t for t in tasks if t.video not in missing])
    # the times of a task whose video was not read (--no-videos, or not found) against its declared duration
    late = [t for t in tasks if (not check_videos or t.video in missing) and t.duration
            and any(i.end > t.duration + 1.0 for i in t.intervals + t.evidence)]
    if late:
        warnings.append(f"{len(late)} task(s) have an interval that ends after their declared duration (e.g. task "
                        f"{late[0].id}, duration {late[0].duration:g} s)")
    return warnings


DURATION_SLACK = 2.0
"""Seconds a declared duration may differ from the container's (frame rounding, an audio track a little longer)."""


def _duration_warnings(tasks: Sequence[Task]) -> list[str]:
    """Each video read from its header: unreadable ones, and tasks whose declared duration or times are not its own.

    A harness is told the declared duration and samples within it: one that is not the video's misleads it, and an
    answer interval past the video's end can never be found.
    """
    from videvolve.errors import MediaError
    from videvolve.media.info import header_info

    lasts: dict[str, float | None] = {}
    for video in sorted({t.video for t in tasks}):
        try:
            lasts[video] = header_info(video).duration  # the header only: a folder of long videos stays quick
        except MediaError:
            lasts[video] = None
    out = []
    unreadable = sorted(v for v, d in lasts.items() if d is None)
    if unreadable:
        out.append(f"{len(unreadable)} video file(s) cannot be read (e.g. {unreadable[0]}): their tasks will score 0 "
                   "as media errors; re-encode or replace them")
    wrong = [(t, lasts[t.video]) for t in tasks if t.duration is not None and lasts[t.video] is not None
             and abs(t.duration - (lasts[t.video] or 0.0)) > DURATION_SLACK]
    if wrong:
        t, real = wrong[0]
        out.append(f"{len(wrong)} task(s) declare a duration that is not their video's (e.g. task {t.id}: "
                   f"{t.duration:g} s declared, {t.video} lasts {real:.1f} s): fix or drop `duration` (it is read "
                   "from the video when absent)")
    late = [t for t in tasks if (real := lasts[t.video]) is not None
            and any(i.end > real + DURATION_SLACK for i in t.intervals + t.evidence)]
    if late:
        out.append(f"{len(late)} task(s) have an interval that ends after their video does (e.g. task {late[0].id}, "
                   f"{late[0].video} lasts {lasts[late[0].video]:.1f} s)")
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    """``videvolve tasks validate``: exit 2 on invalid records, 0 otherwise (warnings printed)."""
    from videvolve.datasets.transcripts import TranscriptFormatError, check_transcripts
    from videvolve.tasks import read_tasks, selection_size, summarize
    tasks = _some_tasks(read_tasks(args.file), args.file)
    bad_transcripts = check_transcripts(tasks)
    if bad_transcripts:
        raise TranscriptFormatError(args.file, bad_transcripts)
    summary = summarize(tasks)
    warnings = _warnings(tasks, not args.no_videos)
    if args.json:
        print(json.dumps({"valid": True, **summary, "warnings": warnings}))
        return 0
    table = Table(title=f"{args.file}: {summary['tasks']} valid tasks, {summary['videos']} videos")
    table.add_column("split")
    table.add_column("videos", justify="right")
    table.add_column("mcq", justify="right")
    table.add_column("grounding", justify="right")
    for split, kinds in summary["by_split"].items():
        table.add_row(split, str(summary["videos_by_split"][split]), str(kinds.get("mcq", 0)),
                      str(kinds.get("grounding", 0)))
    out.print(table)
    if summary["mcq_letters"]:
        out.print("correct letters: " + ", ".join(f"{k} {v}" for k, v in summary["mcq_letters"].items()))
    for w in warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    text, warn = _power_note(*selection_size(tasks))
    if text and not warn:  # a warning is among the warnings above
        out.print(text, highlight=False)
    return 0


def _some_tasks(tasks: list[Task], path: Path) -> list[Task]:
    """``tasks``, refused when there are none: an empty file is a mistake to report, not a valid task set."""
    if not tasks:
        raise UsageError(f"{path} holds no tasks (an empty file, or only blank lines): write one JSON task per line "
                         "(docs/reference/task-format.md), or make them with `videvolve tasks import`, `from-csv` or "
                         "`generate`")
    return tasks


def _power_note(n_selection: int, videos: int) -> tuple[str, bool]:
    """What the default gate can detect on this selection set, and whether to warn ("" when there is none)."""
    from videvolve.loop.context import GateSettings

    if not n_selection:
        return "no selection split: `evolve` needs one for its gate", True
    return GateSettings().power(n_selection, videos)


def cmd_split(args: argparse.Namespace) -> int:
    """``videvolve tasks split``."""
    from videvolve.tasks import parse_fractions, read_tasks, selection_warning, split_by_video, summarize, write_tasks
    fractions = parse_fractions(args.fractions)
    tasks = split_by_video(_some_tasks(read_tasks(args.file), args.file), fractions, seed=args.seed)
    dest = args.out or args.file.with_name(args.file.name.removesuffix(".jsonl") + ".split.jsonl")
    write_tasks(tasks, dest)
    summary = summarize(tasks)
    for split, kinds in summary["by_split"].items():
        out.print(f"{split}: {summary['videos_by_split'][split]} videos, {sum(kinds.values())} tasks")
    empty = [name for name, share in fractions.items() if share > 0 and name not in summary["by_split"]]
    if empty:  # splits are dealt whole videos: fewer videos than splits leave some without any
        wanted = sum(1 for share in fractions.values() if share > 0)
        err.print(f"[yellow]warning:[/] {len(empty)} split(s) asked for got no video: {', '.join(empty)} ("
                  f"{summary['videos']} video(s) for {wanted} splits; each video goes to one split whole). Add "
                  f"videos, or leave {' and '.join(empty)} out of --fractions"
                  + (" and measure on gold questions of your own (`videvolve compare --tasks`)" if "test" in empty
                     else ""), highlight=False)
    w = selection_warning(sum(1 for t in tasks if t.split == "selection"))
    if w:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    from videvolve.labelfree.labels import label_mix, labels_line
    test = labels_line(label_mix(tasks, ("test",)))
    if test:  # generated or teacher labels are no measure: `tasks generate` refuses a test share for that reason
        err.print(f"[yellow]warning:[/] the test split's labels are not all gold: {test}; a test score on them "
                  "is agreement with those labels, not accuracy (measure on gold questions)", highlight=False)
    out.print(f"wrote {dest}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``videvolve import``."""
    from videvolve.datasets.benchmarks import import_benchmark
    from videvolve.tasks import write_tasks
    tasks = import_benchmark(args.benchmark, args.annotations, args.videos, args.meta)
    write_tasks(tasks, args.out)
    missing = sum(1 for v in {t.video for t in tasks} if not Path(v).is_file())
    unknown = sum(1 for t in tasks if t.duration is None)
    out.print(f"wrote {len(tasks)} tasks over {len({t.video_id for t in tasks})} videos to {args.out}")
    if missing:
        err.print(f"[yellow]warning:[/] {missing} video file(s) not found under {args.videos}; "
                  "put them there (named <video_id>.mp4/.mkv/...) before `eval`", highlight=False)
    if unknown:
        err.print(f"note: {unknown} task(s) have no duration in the annotations; `eval` probes their videos",
                  highlight=False)
    return 0
