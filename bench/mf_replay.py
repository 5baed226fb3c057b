"""Multi-fidelity against full validation on stored runs, for one or more futility thresholds.

``python bench/mf_replay.py RUN_DIR... [--futility 0.05,0.02,0.01] [--curtail 0.99] [--rungs 0.1,0.25,0.5,1]
[--orders 10]``:
every gated decision of each finished run
(an ``evolve`` run folder, e.g. ``bench/.cache/labelfree/world9749-v16-m12-q100/label-free/run``) is made again
both ways from stored results (candidates screened out early are first evaluated on the whole selection set, with
SimVLM), and the script prints, per threshold, how many decisions agree, the selection evaluations each way, and
the ceiling of any futility rule on these candidates (the accepted ones' evaluations). ``--orders N``: each run
replayed under N orders of the questions in the rungs (its seed and the next N - 1), counts summed over them: how
often multi-fidelity decides as full validation, not only whether it did under one draw.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from protocol import mf_agreement
from rich.console import Console
from rich.table import Table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--futility", default="0.05,0.02,0.01", help="thresholds to replay, comma-separated")
    parser.add_argument("--curtail", type=float, help="early acceptance threshold (default: the gate's)")
    parser.add_argument("--rungs", help="rung sizes, comma-separated fractions, or 'step:F' for F, 2F, ..., 1 "
                        "(default: the gate's)")
    parser.add_argument("--orders", type=int, default=1, help="rung orders to replay each run under")
    args = parser.parse_args()
    thresholds = [float(x) for x in args.futility.split(",")]
    console = Console()
    totals = {f: {"decisions": 0, "same": 0, "evaluations_mf": 0, "evaluations_full": 0, "evaluations_accepted": 0}
              for f in thresholds}
    for run in args.runs:
        for f in thresholds:
            got = mf_agreement(run, futility=f, curtail=args.curtail, rungs=_rungs(args.rungs), orders=args.orders)
            for k, v in got.items():
                totals[f][k] += v
            console.print(f"{run}: futility {f:g}: {got['same']} / {got['decisions']} as full validation, "
                          f"evaluations {got['evaluations_full']:,} / {got['evaluations_mf']:,}", highlight=False)
    table = Table(title=f"multi-fidelity against full validation on {len(args.runs)} run(s)")
    for col in ("futility", "same decision", "evaluations full / multi-fidelity", "saving", "ceiling"):
        table.add_column(col, justify="right")
    for f, t in totals.items():
        table.add_row(f"{f:g}", f"{t['same']} / {t['decisions']}",
                      f"{t['evaluations_full']:,} / {t['evaluations_mf']:,}",
                      f"{t['evaluations_full'] / max(1, t['evaluations_mf']):.2f}x",
                      f"{t['evaluations_full'] / max(1, t['evaluations_accepted']):.2f}x")
    console.print(table)
    console.print("ceiling: the saving if every candidate full validation rejects cost nothing and every one it "
                  "accepts cost the whole selection set (winners that stop early make it higher)", highlight=False)
    return 0


def _rungs(text: str | None) -> list[float] | None:
    if not text:
        return None
    if text.startswith("step:"):
        step = float(text.removeprefix("step:"))
        return [min(1.0, round(k * step, 9)) for k in range(1, math.ceil(round(1 / step, 9)) + 1)]
    return [float(x) for x in text.split(",")]


if __name__ == "__main__":
    raise SystemExit(main())
