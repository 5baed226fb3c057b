"""``videvolve demo``: what `make demo` runs on the offline default."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``demo``."""
    p = sub.add_parser("demo", help="the offline demo: a SynthWorld, an evolution run, the held-out comparison")
    p.add_argument("--out", type=Path, default=Path("demo"), help="working folder (default ./demo)")
    p.add_argument("--videos", type=int, default=32, help="videos in the demo's SynthWorld")
    p.add_argument("--iterations", type=int, default=6, help="iterations of the loop")
    p.add_argument("--minutes", type=float, default=6.0, help="minutes of each video")
    p.add_argument("--children", type=int, default=3, help="candidates the editor proposes each iteration")
    p.add_argument("--seed", type=int, default=0, help="seed of the demo's SynthWorld")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo."""
    from videvolve.cli.demo import run_demo

    return run_demo(args.out, videos=args.videos, minutes=args.minutes, seed=args.seed, iterations=args.iterations,
                    children=args.children)
