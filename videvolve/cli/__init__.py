"""The ``videvolve`` console entry point: parse arguments, call the library, print."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from videvolve import interrupt
from videvolve.cli import (
    cache_cmd,
    compare_cmd,
    data_cmds,
    demo_cmd,
    evolve_cmd,
    memory_cmds,
    model_cmds,
    run_cmds,
    score_cmd,
    serve_cmds,
    videos_cmd,
)
from videvolve.errors import InfraError, VidevolveError


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (one sub-command per verb)."""
    parser = argparse.ArgumentParser(
        prog="videvolve",
        description="A self-improving agent for long-video understanding.",
    )
    parser.add_argument("--version", action="version", version=f"videvolve {version('videvolve')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data_cmds.register(sub)
    score_cmd.register(sub)
    model_cmds.register(sub)
    evolve_cmd.register(sub)
    memory_cmds.register(sub)
    run_cmds.register(sub)
    compare_cmd.register(sub)
    videos_cmd.register(sub)
    cache_cmd.register(sub)
    demo_cmd.register(sub)
    serve_cmds.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command: our own errors print one line and exit 2; a bug prints its traceback and exits 70."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # what follows `--` goes to a wrapped program (serve-vllm)
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1 :]
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)
    with interrupt.installed():
        code = _run(args, argv, console)
    if interrupt.requested():  # Ctrl-C: leave without waiting for requests in flight (finished work is on disk)
        interrupt.exit_now(interrupt.INTERRUPTED if code else 0)
    return code


def _run(args: argparse.Namespace, argv: Sequence[str], console: Any) -> int:
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except VidevolveError as exc:
        from rich.markup import escape  # a message may hold brackets ("pip install 'videvolve[speech]'")

        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True)
        return 3 if isinstance(exc, InfraError) else 2  # the endpoint failed for good, not the input
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: every finished result is kept; rerun the same command (or "
                      "`--resume` a run) to continue")
        return interrupt.INTERRUPTED
    except BrokenPipeError:
        if not stdout_closed():
            return _bug(console, argv)
        return closed_pipe_exit()
    except Exception:
        return _bug(console, argv)


CLOSED_PIPE = 141
"""Exit status when the reader of stdout went away (``| head``): 128 + SIGPIPE, as the shell's own tools end."""


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``videvolve ... | head -1``)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def closed_pipe_exit() -> int:
    """A quiet end for a closed pipe: what is still buffered for stdout goes nowhere, no traceback."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_PIPE


def _new_crash_file(folder: Path, stamp: str, text: str) -> Path:
    """``crash-<time>-<pid>.log`` in ``folder``, created, never an existing one (``-2``, ``-3``... after the pid).

    Named by the second alone, two commands failing in the same second wrote one file, each over the other's.
    """
    import os

    for n in range(1, 1000):
        where = folder / f"crash-{stamp}-{os.getpid()}{f'-{n}' if n > 1 else ''}.log"
        try:
            with where.open("x", encoding="utf-8") as fh:
                fh.write(text)
            return where
        except FileExistsError:
            continue
    raise FileExistsError(f"crash-{stamp}-{os.getpid()}-*.log: every name taken")


def _bug(console: Any, argv: Sequence[str]) -> int:
    """A bug: the traceback on stderr and in a crash file, with what to do with it."""
    import time
    import traceback

    from videvolve.config import default_cache_path

    console.print_exception(max_frames=20)
    text = (f"videvolve {version('videvolve')}, Python {sys.version.split()[0]}\n"
            f"command: videvolve {' '.join(argv)}\n\n{traceback.format_exc()}")
    try:
        where = _new_crash_file(default_cache_path().parent, time.strftime("%Y%m%d-%H%M%S"), text)
        saved = f"The traceback, the command and the version are saved in {where}"
    except OSError:
        saved = "Copy the traceback above and the command you ran"
    console.print(f"[bold red]This is a bug in videvolve[/], not something you did. {saved}: please send it to "
                  "whoever maintains your videvolve installation.", highlight=False)
    return 70


if __name__ == "__main__":
    sys.exit(main())
