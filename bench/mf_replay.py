"""Multi-fidelity against full validation on stored runs, for one or more futility thresholds.

``python bench/mf_replay.py RUN_DIR... [--futility 0.05,0.02,0.01] [--curtail 0.99] [--rungs 0.1,0.25,0.5,1]
[--orders 10] [--plot stops.png] [--ideal 0.01,0.05,0.1]`` (``--futility``: the gate's, 0.01, unless given):
every gated decision of each finished run
(an ``evolve`` run folder, e.g. ``bench/.cache/labelfree/world9749-v16-m12-q100/label-free/run``) is made again
both ways from stored results (candidates screened out early are first evaluated on the whole selection set, with
SimVLM), and the script prints, per threshold, how many decisions agree, the selection evaluations each way, and
the ceiling of any futility rule on these candidates (the accepted ones' evaluations). ``--orders N``: each run
replayed under N orders of the questions in the rungs (its seed and the next N - 1), counts summed over them: how
often multi-fidelity decides as full validation, not only whether it did under one draw. ``--plot PNG``: for the
first threshold, each candidate's share of the selection set multi-fidelity read before it decided against how far
full validation's verdict on the whole set lay from the gate's threshold (:class:`mf_agreement.Stop`), with a table
of the same by distance: what a sequential rule can save depends on how many calls are close. ``--ideal DELTAS``:
beside multi-fidelity, what an idealized rule sure of each figure to 1 - delta would pay (:mod:`mf_ideal`).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from mf_agreement import Stop, gated, mf_replayed
from mf_ideal import ideal_evaluations
from rich.console import Console
from rich.table import Table

from videvolve.loop.context import GateSettings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--futility", default=f"{GateSettings().futility:g}",
                        help="thresholds to replay, comma-separated (default: the gate's)")
    parser.add_argument("--curtail", type=float, help="early acceptance threshold (default: the gate's)")
    parser.add_argument("--rungs", help="rung sizes, comma-separated fractions, or 'step:F' for F, 2F, ..., 1 "
                        "(default: the gate's)")
    parser.add_argument("--orders", type=int, default=1, help="rung orders to replay each run under")
    parser.add_argument("--plot", type=Path, help="where to draw each candidate's stop (PNG)")
    parser.add_argument("--ideal", help="for these error rates (comma-separated), what an idealized rule sure of "
                        "each figure to 1 - delta would pay")
    args = parser.parse_args()
    if args.ideal and args.orders > 1:
        parser.error("--ideal compares one order's replay: leave --orders at 1")
    thresholds = [float(x) for x in args.futility.split(",")]
    console = Console()
    totals = {f: {"decisions": 0, "same": 0, "evaluations_mf": 0, "evaluations_full": 0, "evaluations_accepted": 0}
              for f in thresholds}
    per_run: dict[Path, list[Stop]] = {}  # the first threshold's candidates, for --plot and --ideal
    for run in args.runs:
        for f in thresholds:
            got, stops = mf_replayed(run, futility=f, curtail=args.curtail, sizes=_rungs(args.rungs),
                                     orders=args.orders)
            per_run.setdefault(run, stops)
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
    if not (args.plot or args.ideal):
        return 0
    stops = [s for got in per_run.values() for s in got]
    if args.plot:
        console.print(_by_distance(stops, thresholds[0]))
        console.print(f"plot: {_plot(stops, args.plot, thresholds[0])}", highlight=False)
    if args.ideal:
        first = min(_rungs(args.rungs) or GateSettings().rungs)
        console.print(_idealized(per_run, [float(x) for x in args.ideal.split(",")], first, totals[thresholds[0]]))
    return 0


def _idealized(per_run: dict[Path, list[Stop]], deltas: list[float], floor: float, total: dict[str, int]) -> Table:
    """Multi-fidelity's evaluations beside an idealized rule's at each error rate, against full validation's."""
    full, mf = total["evaluations_full"], total["evaluations_mf"]
    table = Table(title=f"an idealized rule against multi-fidelity ({len(per_run)} run(s); full validation {full:,})")
    for col in ("rule", "evaluations", "saving"):
        table.add_column(col, justify="right")
    table.add_row("multi-fidelity", f"{mf:,}", f"{full / max(1, mf):.2f}x")
    seeds = {run: gated(run)[0].parent for run, got in per_run.items() if got}
    for delta in deltas:
        paid = sum(ideal_evaluations(got, seeds[run], delta, floor) for run, got in per_run.items() if got)
        table.add_row(f"sure to 1 - {delta:g}", f"{paid:,.0f}", f"{full / max(1.0, paid):.2f}x")
    return table


BANDS = ((0.0, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, math.inf))
"""Distances from the gate's threshold (absolute, in standard errors of the mean) the table groups candidates by."""


def _by_distance(stops: list[Stop], futility: float) -> Table:
    """How much of the selection set multi-fidelity read, by how close full validation's call was."""
    table = Table(title=f"where multi-fidelity's evaluations go (futility {futility:g}; {len(stops)} candidates)")
    for col in ("full validation's call (either side)", "candidates", "accepted", "share of the set read",
                "questions read"):
        table.add_column(col, justify="right")
    rows: list[tuple[str, list[Stop]]] = [
        (f"{lo:g}-{hi:g} SE from the threshold" if hi < math.inf else f">= {lo:g} SE", [
            s for s in stops if s.distance is not None and lo <= abs(s.distance) and (abs(s.distance) < hi or
                                                                              hi == math.inf)]) for lo, hi in BANDS]
    rows.append(("its cost fits no path", [s for s in stops if s.distance is None]))
    for name, group in rows:
        read = sum(s.read for s in group)
        table.add_row(name, str(len(group)), str(sum(s.full == "accepted" for s in group)),
                      f"{read / max(1, sum(s.population for s in group)):.2f}", f"{read:,}")
    return table


def _plot(stops: list[Stop], path: Path, futility: float) -> Path:
    """Each candidate: share of the selection set read (y) against full validation's distance from its threshold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    known = [s for s in stops if s.distance is not None and math.isfinite(s.distance)]
    for decision, colour in (("accepted", "#1a7f37"), ("rejected", "#d97706")):
        mine = [s for s in known if s.full == decision]
        ax.scatter([s.distance or 0.0 for s in mine], [s.read / s.population for s in mine], c=colour, s=24,
                   label=f"full validation {decision} ({len(mine)})", alpha=0.8)
    ax.axvspan(-1, 1, color="#999999", alpha=0.15, label="within 1 SE of the threshold")
    ax.axvline(0, color="#555555", lw=0.8)
    ax.set_xlabel("how far the whole set's mean difference lies from where the gate's test flips (its SEs)\n"
                  "(right of 0 and rejected: turned down by a kind's guard, or by the seed's cost)",
                  fontsize=8)
    ax.set_ylabel("share of the selection set read")
    ax.set_ylim(0, 1.05)
    unchanged = sum(1 for s in stops if s.distance is not None and not math.isfinite(s.distance))
    ax.set_title(f"multi-fidelity's stop per candidate (futility {futility:g})\nnot shown: "
                 f"{len(stops) - len(known) - unchanged} decided by cost, {unchanged} that changed no answer",
                 fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _rungs(text: str | None) -> list[float] | None:
    if not text:
        return None
    if text.startswith("step:"):
        step = float(text.removeprefix("step:"))
        return [min(1.0, round(k * step, 9)) for k in range(1, math.ceil(round(1 / step, 9)) + 1)]
    return [float(x) for x in text.split(",")]


if __name__ == "__main__":
    raise SystemExit(main())
