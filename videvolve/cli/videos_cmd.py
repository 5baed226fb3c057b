"""``videvolve videos check|proxy DIR``: what a folder of real videos holds, and proxies for the slow ones."""

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
    c.add_argument("folder", type=Path)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_check)
    x = vsub.add_parser("proxy", help="make low-resolution, short-GOP proxies (timestamps stay the source's)")
    x.add_argument("folder", type=Path)
    x.add_argument("--all", action="store_true", help="every readable file, not only the slow ones")
    x.add_argument("--cache", type=Path, default=None, help="proxy folder (default ~/.cache/videvolve/proxies)")
    x.set_defaults(func=cmd_proxy)


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 1 when a file fails."""
    from videvolve.media.check import check_video, list_videos

    files = list_videos(args.folder)
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
    from videvolve.media.check import check_video, list_videos
    from videvolve.media.proxy import make_proxy

    checks = [check_video(f) for f in list_videos(args.folder)]
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
