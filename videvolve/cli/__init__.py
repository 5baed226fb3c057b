"""The ``videvolve`` console entry point: parse arguments, call the library, print."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import version

from videvolve import interrupt
from videvolve.cli import (
    data_cmds,
    demo_cmd,
    evolve_cmd,
    memory_cmds,
    model_cmds,
    run_cmds,
    score_cmd,
    videos_cmd,
)
from videvolve.errors import VidevolveError


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
    videos_cmd.register(sub)
    demo_cmd.register(sub)
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
    interrupt.install()
    try:
        code = int(args.func(args) or 0)
        if interrupt.STOP.is_set():  # a command that said what was kept: leave without waiting for requests
            interrupt.exit_now(code)
        return code
    except VidevolveError as exc:
        from rich.markup import escape  # a message may hold brackets ("pip install 'videvolve[speech]'")

        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True)
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: every finished result is kept; rerun the same command (or "
                      "`--resume` a run) to continue")
        interrupt.exit_now(interrupt.INTERRUPTED)
        return interrupt.INTERRUPTED
    except Exception:
        console.print_exception(max_frames=20)
        console.print("[bold red]This is a bug in videvolve[/], not something you did: please report it with the "
                      "traceback above and the command you ran (https://github.com/videvolve/videvolve/issues).",
                      highlight=False)
        return 70

if __name__ == "__main__":
    sys.exit(main())
