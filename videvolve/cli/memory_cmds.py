"""``videvolve diagnoses list|show|search|rebuild-index``: inspect the stored failure diagnoses."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from videvolve.cli.common import stdout_console
from videvolve.errors import InputNotFoundError, UsageError
from videvolve.rundir import RunDir

if TYPE_CHECKING:
    from videvolve.memory.store import DiagnosisStore

out = stdout_console()
DEFAULT_MEMORY = Path.home() / ".videvolve" / "memory"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``diagnoses``."""
    p = sub.add_parser("diagnoses", help="list, show and search the memory of failure diagnoses")
    dsub = p.add_subparsers(dest="diagnoses_command", required=True, metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--memory", type=Path, default=None,
                       help=f"memory workspace (default: the --run's own, else {DEFAULT_MEMORY})")
        q.add_argument("--run", default=None, help="a run directory (or, for list, a run id): its memory, and for "
                       "list only its diagnoses")
        q.add_argument("--json", action="store_true", help="print JSON instead of a table")

    ls = dsub.add_parser("list", help="every diagnosis (newest last)")
    ls.add_argument("--category", default=None, help="only this category (missed_event, ...)")
    common(ls)
    ls.set_defaults(func=cmd_list)
    show = dsub.add_parser("show", help="one diagnosis in full")
    show.add_argument("id")
    common(show)
    show.set_defaults(func=cmd_show)
    search = dsub.add_parser("search", help="the diagnoses most similar to a text")
    search.add_argument("text")
    search.add_argument("-k", type=int, default=5, help="how many diagnoses to return")
    search.add_argument("--category", default=None, help="only this category (missed_event, ...)")
    common(search)
    search.set_defaults(func=cmd_search)
    rebuild = dsub.add_parser("rebuild-index", help="rebuild the search index from the JSONL records")
    common(rebuild)
    rebuild.set_defaults(func=cmd_rebuild)


def _memory(args: argparse.Namespace) -> Path:
    """The memory workspace the command names (``args.memory`` set to it); it must exist."""
    args.memory = memory_of(args)
    if not args.memory.exists():
        raise InputNotFoundError(f"no memory at {args.memory} (run `videvolve evolve` first, or pass --memory)")
    if not args.memory.is_dir():  # a file was read as an empty memory: "0 diagnoses"
        raise UsageError(f"{args.memory} is a file, not a memory folder: pass --memory the folder `evolve --memory` "
                         "wrote")
    return Path(args.memory)


def _store(args: argparse.Namespace) -> DiagnosisStore:
    """The memory to read (while a run writes it: its records, searched in memory)."""
    from videvolve.memory.store import read_store

    return read_store(_memory(args))


def memory_of(args: argparse.Namespace) -> Path:
    """``--memory``, else the memory a run directory given as ``--run`` was started with, else the default."""
    if args.memory is not None:
        return Path(args.memory)
    run = RunDir(Path(args.run)) if args.run else None
    if run is not None and run.settings.is_file():
        memory = run.read_settings().get("memory")  # a damaged settings.json: one line, not a traceback
        if not isinstance(memory, str) or not memory:
            raise UsageError(f"{run.settings} names no memory folder: pass --memory")
        return Path(memory)
    return DEFAULT_MEMORY


def run_id_of(run: str) -> str:
    """The id of the run ``--run`` names: a run directory's own ``run_id`` (its folder name may differ), or the id."""
    settings = RunDir(Path(run)).settings
    if settings.is_file():
        try:
            return str(json.loads(settings.read_text(encoding="utf-8"))["run_id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read the run id from {settings}: {exc}") from None
    if Path(run).is_dir():
        raise InputNotFoundError(f"{run} is not a run directory (no {settings.name}); pass a run directory or a "
                                 "run id")
    return run


def cmd_list(args: argparse.Namespace) -> int:
    """``diagnoses list``."""
    records = _store(args).records()
    run = run_id_of(args.run) if args.run else None
    records = [r for r in records if (run is None or r.run_id == run) and (args.category is None or
                                                                          r.category == args.category)]
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records]))
        return 0
    table = Table(title=f"{len(records)} diagnoses in {args.memory}")
    for col in ("id", "run", "it.", "task", "label", "category", "outcome", "hypothesis"):
        table.add_column(col, overflow="fold")
    for r in records:
        outcome = f"{r.outcome.decision} ({r.outcome.operator})" if r.outcome else "pending"
        table.add_row(r.id, r.run_id, str(r.iteration + 1), r.task_id, r.label_source, r.category, outcome,
                      r.hypothesis[:120])
    out.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``diagnoses show``."""
    record = _store(args).get(args.id)
    if record is None:
        raise UsageError(f"no diagnosis {args.id!r} in {args.memory} (see `videvolve diagnoses list`)")
    if args.json:
        print(record.model_dump_json())
        return 0
    out.print(f"[bold]{record.id}[/]  {record.category}  (run {record.run_id}, iteration {record.iteration + 1}, "
              f"harness {record.harness_id}, task {record.task_id}, video {record.video_id}, {record.kind}, "
              f"label: {record.label_source})")
    out.print(f"[bold]hypothesis:[/] {record.hypothesis}")
    out.print(f"[bold]applies when:[/] {record.applies_when}")
    out.print(f"[bold]preserve:[/] {record.preserve}")
    for e in record.evidence:
        out.print(f"  {e.time:9.2f} s  {e.seen}")
    out.print(f"[bold]probe cost:[/] {record.probe_cost}")
    if record.outcome:
        o = record.outcome
        deltas = "".join(f"; {name} {value:+.{places}f}" for name, value, places in
                         (("d_score", o.d_score, 4), ("d_cost", o.d_cost, 1)) if value is not None)
        out.print(f"[bold]led to:[/] {o.operator} -> {o.decision} ({o.reason}){deltas}", highlight=False)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """``diagnoses search``."""
    hits = _store(args).search(args.text, k=args.k, category=args.category)
    if args.json:
        print(json.dumps([{**d.model_dump(mode="json"), "similarity": s} for d, s in hits]))
        return 0
    table = Table(title=f"closest to {args.text!r}")
    for col in ("similarity", "id", "category", "outcome", "hypothesis"):
        table.add_column(col, overflow="fold")
    for d, s in hits:
        outcome = f"{d.outcome.decision} ({d.outcome.operator})" if d.outcome else "pending"
        table.add_row(f"{s:.3f}", d.id, d.category, outcome, d.hypothesis[:140])
    out.print(table)
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    """``diagnoses rebuild-index``."""
    from videvolve.memory.store import open_store

    n = open_store(_memory(args)).rebuild()
    out.print(f"rebuilt the index of {args.memory}: {n} diagnoses")
    return 0
