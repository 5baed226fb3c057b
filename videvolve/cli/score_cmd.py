"""``videvolve score``: official metrics on a ground-truth file and a prediction file."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from videvolve.cli.common import stdout_console
from videvolve.errors import PredictionFormatError, UsageError

out = stdout_console()


def _ours(gt: Path, pred: Path, args: argparse.Namespace) -> dict[str, Any]:
    from videvolve.metrics import summarize_scores
    from videvolve.tasks import read_predictions, read_tasks
    tasks = read_tasks(gt)
    by_id = {p.task_id: p for p in read_predictions(pred)}
    unknown = set(by_id) - {t.id for t in tasks}
    if unknown:
        raise PredictionFormatError(f"{pred}: {len(unknown)} prediction(s) for unknown task ids, e.g. {min(unknown)}")
    return {"benchmark": "videvolve", **summarize_scores(tasks, [by_id.get(t.id) for t in tasks])}


def _benchmark(name: str) -> Callable[[Path, Path, argparse.Namespace], dict[str, Any]]:
    from videvolve.datasets.benchmarks import REGISTRY

    return lambda gt, pred, args: REGISTRY[name].score(gt, pred, {"parser": args.parser, "seed": args.seed})


def _scorers() -> dict[str, Callable[[Path, Path, argparse.Namespace], dict[str, Any]]]:
    from videvolve.datasets.benchmarks import REGISTRY

    return {**{name: _benchmark(name) for name in REGISTRY}, "videvolve": _ours}


def headline(benchmark: str) -> list[str] | None:
    """The metrics a benchmark's table shows first, in its own order (None: every metric)."""
    from videvolve.metrics.scales import SCALES

    vue_tr = ["precision_auc", "recall_auc", "iou_auc", "precision_auc_zero_filled", "miou", "n", "empty_predictions"]
    return {"vue-tr": vue_tr, "vue-tr-v2": vue_tr,
            "qvhighlights": list(SCALES["qvhighlights"].leaves),  # the official "brief" (HL-* when computed)
            "extremewhenbench": ["miou", "R@0.3", "R@0.5", "R@0.7", "parse_fail", "n"],
            "charades-sta": ["miou", "R@0.3", "R@0.5", "R@0.7", "parse_fail", "n"]}.get(benchmark)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``score``."""
    p = sub.add_parser("score", help="score predictions with a benchmark's official metric")
    p.add_argument("--benchmark", required=True,
                   help="a benchmark's name (vue-tr, qvhighlights, ...); 'videvolve' scores our own tasks.jsonl + "
                        "predictions.jsonl")
    p.add_argument("--gt", type=Path, required=True, help="ground truth (the benchmark's own file)")
    p.add_argument("--pred", type=Path, required=True, help="predictions (the benchmark's submission format)")
    p.add_argument("--parser", choices=["lmms", "vllm"], default="lmms",
                   help="ExtremeWhenBench text parser (lmms-eval, or the repository's vLLM script)")
    p.add_argument("--seed", type=int, default=0, help="LongVideoBench's random guess for unparsable answers")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_score)


def _flat(result: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows = []
    for k, v in result.items():
        if isinstance(v, dict):
            rows += _flat(v, f"{prefix}{k}.")
        elif not isinstance(v, list | tuple) or k == "wilson95":
            rows.append((f"{prefix}{k}", v))
    return rows


def cmd_score(args: argparse.Namespace) -> int:
    """Print the metrics (a table, or JSON)."""
    from videvolve.metrics.scales import on_official_scale

    scorers = _scorers()
    if args.benchmark not in scorers:
        raise UsageError(f"no benchmark {args.benchmark!r}; available: {', '.join(sorted(scorers))}")
    for flag, path, what in (("--gt", args.gt, "ground truth"), ("--pred", args.pred, "predictions")):
        if not path.exists():
            raise UsageError(f"{flag} {path}: not found (give the {what} file)")
    if args.pred.is_dir():  # a submission is one file; only MLVU's ground truth may be a folder
        raise UsageError(f"--pred {args.pred} is a folder: give the predictions file itself")
    result = on_official_scale(args.benchmark, scorers[args.benchmark](args.gt, args.pred, args))
    if args.json:
        print(json.dumps(result, default=float))
        return 0
    table = Table(title=f"{args.benchmark}: {args.pred.name}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    keys = headline(args.benchmark)
    rows = [(k, result[k]) for k in keys if k in result] if keys else _flat(result)
    for k, v in rows:
        if k in ("benchmark", "scale") or k.startswith("not_computed"):
            continue
        table.add_row(k, f"{v:.6f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v))
    out.print(table)
    out.print(f"scale: {result['scale']}", highlight=False)
    for line in result.get("not_computed", []):
        out.print(f"not computed: {line}", highlight=False)
    return 0
