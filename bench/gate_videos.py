"""Stored decisions judged again with the gate's test over videos: which acceptances it would have turned down.

``python bench/gate_videos.py RUN_DIR...`` (``evolve`` run folders, e.g.
``bench/.cache/protocol/world77519-uniform/run``): for every gated decision, the candidate and its parent are compared
on the selection questions both answered (the rung the decision was made on), question by question (the sign-flip
test) and over the questions' videos (:func:`videvolve.search.significance.video_t`), at the level the run gave
it. No model is called: only stored results are read. Which of the acceptances turned down the test split confirmed
is read from the benchmark that made the run (``test would reject``, or its test gain).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mf_agreement import gated
from rich.console import Console
from rich.table import Table

from videvolve.loop.context import Context
from videvolve.search.significance import paired
from videvolve.tasks import read_tasks


def scores(run: Path, version: str | None) -> dict[str, float]:
    """The version's stored per-question selection scores, by task id."""
    folder = run / "evals" / str(version) / "selection" / "results"
    if version is None or not folder.is_dir():
        return {}
    return {p.stem: float(json.loads(p.read_text())["score"]) for p in folder.glob("*.json")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    table = Table("run", "operator", "decision", "level", "n", "videos", "diff", "p questions", "p over videos",
                  "turned down")
    accepted = turned = 0
    for run in args.runs:
        ctx = Context.model_validate(json.loads((run / "settings.json").read_text()))
        video = {t.id: t.video_id for t in read_tasks(ctx.tasks) if t.split == "selection"}
        for e in gated(run):
            a, b = scores(run, e.parent), scores(run, e.candidate)
            keys = sorted(k for k in b if k in a and k in video)
            if e.level is None or len(keys) < 2:
                continue
            st = paired([a[k] for k in keys], [b[k] for k in keys], e.level, videos=[video[k] for k in keys])
            over = st.over_videos
            down = e.decision == "accepted" and st.p_gain <= e.level and st.p_gate > e.level
            accepted += e.decision == "accepted"
            turned += down
            table.add_row("/".join(run.parts[-3:-1]), str(e.operator), e.decision,
                          f"{e.level:.4f}", str(len(keys)), str(over.videos if over else 1), f"{st.diff:+.3f}",
                          f"{st.p_gain:.4f}", f"{over.p_gain:.4f}" if over else "-", "yes" if down else "")
    Console(width=200).print(table)
    print(f"acceptances turned down by the test over videos: {turned} / {accepted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
