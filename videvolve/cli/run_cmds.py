"""Commands about a run's harnesses and its report: ``harness list|show|diff|export``, ``report``."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from rich.table import Table

from videvolve.cli.common import stdout_console
from videvolve.errors import InputNotFoundError, UsageError
from videvolve.memory.lineage import LineageRecord
from videvolve.rundir import RunDir
from videvolve.skill_library.harness import read_manifest

out = stdout_console()


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``harness`` and ``report``."""
    h = sub.add_parser("harness", help="the harness versions of a run")
    hsub = h.add_subparsers(dest="harness_command", required=True, metavar="ACTION")
    ls = hsub.add_parser("list", help="every version with parent, operator, decision, score and cost")
    ls.add_argument("--run", type=Path, required=True, help="the run folder")
    ls.add_argument("--json", action="store_true", help="print the versions as a JSON list")
    ls.set_defaults(func=cmd_list)
    show = hsub.add_parser("show", help="a version's manifest, revision and files")
    show.add_argument("version")
    show.add_argument("--run", type=Path, required=True, help="the run folder")
    show.set_defaults(func=cmd_show)
    diff = hsub.add_parser("diff", help="unified diff of two versions")
    diff.add_argument("a")
    diff.add_argument("b")
    diff.add_argument("--run", type=Path, required=True, help="the run folder")
    diff.set_defaults(func=cmd_diff)
    export = hsub.add_parser("export", help="copy a version out of the run (e.g. to use with eval or ask)")
    export.add_argument("version")
    export.add_argument("dest", type=Path)
    export.add_argument("--run", type=Path, required=True, help="the run folder")
    export.set_defaults(func=cmd_export)
    mix = hsub.add_parser("mixture", help="the mixture of harnesses by frame budget (evolve --budgets)")
    mix.add_argument("--run", type=Path, required=True, help="the run folder")
    mix.add_argument("--json", action="store_true", help="print mixture.json")
    mix.set_defaults(func=cmd_mixture)
    r = sub.add_parser("report", help="HTML report with plots and a trace viewer (RUN/report/index.html)")
    r.add_argument("--run", type=Path, required=True, help="the run folder")
    r.set_defaults(func=cmd_report)


def _version_dir(run: Path, version: str) -> Path:
    folder = RunDir(run)
    if version == "best":
        return folder.best
    matches = [p for p in folder.harnesses.glob(f"{version}*") if p.is_dir()]
    if len(matches) != 1:
        raise UsageError(f"{'no' if not matches else 'more than one'} harness version {version!r} in "
                         f"{folder.harnesses} (see `videvolve harness list`)")
    return matches[0]


def _iteration(version: LineageRecord) -> str:
    """The iteration as the log and the report count it: the seed 0, the first revision 1."""
    if version.decision == "seed":
        return "0"
    return str(version.iteration + 1) if version.iteration is not None else ""


def cmd_list(args: argparse.Namespace) -> int:
    """``harness list``."""
    folder = RunDir(args.run)
    if not folder.lineage_file.exists():
        raise InputNotFoundError(f"no lineage in {args.run}: is it a run directory?")
    merged = folder.lineage()
    if args.json:
        print(json.dumps([v.as_dict() for v in merged.values()]))
        return 0
    table = Table(title=f"harness versions of {args.run.name}")
    for col in ("version", "parent", "iteration", "operator", "decision", "score", "cost", "reason"):
        table.add_column(col, overflow="fold")
    for v in merged.values():
        table.add_row(v.version, v.parent or "", _iteration(v), v.operator or "", v.decision or "",
                      f"{v.score or 0:.3f}", f"{v.cost or 0:.1f}", (v.reason or "")[:80])
    out.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``harness show``."""
    d = _version_dir(args.run, args.version)
    manifest = read_manifest(d)
    revision = manifest.pop("revision", None)
    out.print_json(data=manifest)
    if revision:
        out.print(f"[bold]{revision['operator']}[/]: {revision['rationale']}")
        out.print(revision.get("diff", ""), highlight=False, markup=False)
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        out.print(f"  {f.relative_to(d)}  ({f.stat().st_size} bytes)")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """``harness diff``."""
    from videvolve.editing.base import read_files, unified_diff

    text = unified_diff(read_files(_version_dir(args.run, args.a)), read_files(_version_dir(args.run, args.b)))
    out.print(text or "(no difference)", highlight=False, markup=False)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``harness export``."""
    src = _version_dir(args.run, args.version)
    if args.dest.exists():
        raise UsageError(f"{args.dest} exists; choose a new destination")
    shutil.copytree(src, args.dest)
    out.print(f"exported {src.name} to {args.dest} (use it with `videvolve eval --harness {args.dest}`)")
    return 0


def cmd_mixture(args: argparse.Namespace) -> int:
    """``harness mixture``."""
    path = RunDir(args.run).mixture
    if not path.exists():
        raise InputNotFoundError(f"no mixture in {args.run}: run `videvolve evolve ... --budgets 16,32,64,128`")
    mixture = json.loads(path.read_text())
    if args.json:
        print(json.dumps(mixture))
        return 0
    table = Table(title=f"mixture of {args.run.name}: the version per frame budget on the selection set "
                        f"({mixture['selection_questions']} questions)")
    for col in ("budget (frames/question)", "version", "selection score", "mean frames", "why"):
        table.add_column(col, justify="right" if col != "why" else "left")
    for cap, tier in sorted(mixture["tiers"].items(), key=lambda x: int(x[0])):
        table.add_row(cap, tier["version"], f"{tier['score']:.3f}", f"{tier['frames']:.1f}", tier.get("why", ""))
    out.print(table)
    out.print(f"use it with `videvolve eval --harness {args.run} --budget N` (or ask): the largest tier within N")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``report``."""
    from videvolve.report import build_report

    html = build_report(args.run)
    out.print(f"report: {html}")
    return 0
