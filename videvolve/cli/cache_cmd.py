"""``videvolve cache info|clear``: the response cache's replies by model, and forgetting them.

Replies are keyed by model, revision, decoding and the exact request, so a server whose replies were wrong under the
same name and checkpoint (a chat template or processor misconfigured, then fixed) gives back its wrong replies from
the cache: ``clear --model NAME`` forgets that model's, and the next run pays for them again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from videvolve.cli.common import stdout_console
from videvolve.errors import InputNotFoundError, UsageError

out = stdout_console()
UNNAMED = "(stored before names were kept)"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``cache``."""
    p = sub.add_parser("cache", help="the response cache: its replies by model; forget them")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    i = csub.add_parser("info", help="where the cache is, its size, and its replies by model")
    c = csub.add_parser("clear", help="forget the replies of one model (--model), or every reply (--all)")
    for q in (i, c):
        q.add_argument("--cache", type=Path, default=None, help="the cache file (default: the one every command uses, "
                       "~/.cache/videvolve/responses.sqlite)")
    i.add_argument("--json", action="store_true", help="print JSON instead of a table")
    i.set_defaults(func=cmd_info)
    c.add_argument("--model", default=None, help="the served model name whose replies to forget")
    c.add_argument("--all", action="store_true", help="forget every reply")
    c.set_defaults(func=cmd_clear)


def _path(args: argparse.Namespace) -> Path:
    from videvolve.config import default_cache_path

    path = args.cache or default_cache_path()
    if not path.is_file():
        raise InputNotFoundError(f"no response cache at {path} (nothing was cached there yet; pass --cache PATH for "
                                 "another)")
    return path


def cmd_info(args: argparse.Namespace) -> int:
    """Where, how large, and replies per model."""
    from videvolve.models.cache import ResponseCache

    path = _path(args)
    cache = ResponseCache(path)
    try:
        models = cache.models()
    finally:
        cache.close()
    size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*") if f.is_file())
    if args.json:
        out.print_json(json.dumps({"path": str(path), "bytes": size, "replies": sum(models.values()),
                                   "models": [{"model": m, "replies": n} for m, n in models.items()]}))
        return 0
    table = Table(title=f"{path} ({size / 2**20:.1f} MiB, {sum(models.values())} replies)")
    table.add_column("model")
    table.add_column("replies", justify="right")
    for model, n in models.items():
        table.add_row(model if model is not None else UNNAMED, str(n))
    out.print(table)
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    """Forget one model's replies, or all."""
    from videvolve.models.cache import ResponseCache

    if bool(args.model) == bool(args.all):
        raise UsageError("say what to forget: --model NAME (one model's replies; `videvolve cache info` lists them) "
                         "or --all")
    path = _path(args)
    cache = ResponseCache(path)
    try:
        known = cache.models()
        if args.model and args.model not in known:
            named = ", ".join(str(m) for m in known if m is not None) or "none"
            older = "; replies stored before names were kept go only with --all" if None in known else ""
            raise UsageError(f"no replies of {args.model!r} in {path} (models there: {named}{older})")
        gone = cache.clear(None if args.all else args.model)
    finally:
        cache.close()
    out.print(f"forgot {gone} replies{'' if args.all else f' of {args.model}'} in {path}; the next run pays for them "
              "again", highlight=False)
    return 0
