"""Plots of a run: progress per iteration, the lineage tree, diagnosis categories over time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from videvolve.search.history import GateEntry

COLOURS = {"accepted": "#1a7f37", "rejected": "#d97706", "dropped": "#c00000", "seed": "#1f4e9c", "none": "#999999"}


def incumbent_steps(history: list[GateEntry], seed: dict[str, Any],
                    kept: dict[int, str] | None = None) -> tuple[list[int], dict[str, list[Any]]]:
    """The incumbent's score, cost and frames after each entry (x: its iteration number; the seed at 0).

    ``kept``: iteration -> the version the run kept after it (its ``record`` events). Without it, the best accepted
    of each iteration, as ``record`` chooses it (several may pass one decision: only the best goes on).
    """
    inc_x = [0]
    inc: dict[str, list[Any]] = {"score": [seed.get("score") or 0.0], "cost": [seed.get("cost") or 0.0],
                                 "frames": [seed.get("frames")]}
    by_iteration: dict[int, list[GateEntry]] = {}
    for h in history:
        by_iteration.setdefault(h.iteration, []).append(h)
    for it, group in by_iteration.items():
        accepted = [h for h in group if h.decision == "accepted" and h.cand_score is not None]
        best = max(accepted, key=lambda h: (h.cand_score or 0.0, -(h.cand_cost or 0.0)), default=None)
        if kept is not None:
            best = next((h for h in accepted if h.candidate == kept.get(it)), None)
        for _ in group:
            inc_x.append(group[0].number)
            inc["score"].append(best.cand_score if best else inc["score"][-1])
            inc["cost"].append(best.cand_cost if best else inc["cost"][-1])
            inc["frames"].append(best.cand_frames if best else inc["frames"][-1])
    return inc_x, inc


def progress(history: list[GateEntry], seed: dict[str, Any], path: Path, kept: dict[int, str] | None = None) -> Path:
    """Selection score, the gate's cost and frames per iteration (the seed at 0), candidates by decision.

    ``kept``: iteration -> the version the run kept after it (:func:`incumbent_steps`).
    """
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for h in history:
        it = h.number
        if h.cand_score is not None:
            colour = COLOURS.get(h.decision, "#999999")
            ax1.scatter(it, h.cand_score, color=colour, zorder=3, label=h.decision)
            ax2.scatter(it, h.cand_cost, color=colour, zorder=3)
            if h.cand_frames is not None:
                ax3.scatter(it, h.cand_frames, color=colour, zorder=3)
    inc_x, inc = incumbent_steps(history, seed, kept)
    for ax, key in ((ax1, "score"), (ax2, "cost"), (ax3, "frames")):  # the seed, where every line starts
        if inc[key][0] is not None:
            ax.scatter(0, inc[key][0], color=COLOURS["seed"], zorder=3, label="seed")
    ax1.step(inc_x, inc["score"], where="post", color="#333333", label="incumbent")
    ax2.step(inc_x, inc["cost"], where="post", color="#333333")
    if all(f is not None for f in inc["frames"]):
        ax3.step(inc_x, inc["frames"], where="post", color="#333333")
    handles, labels = ax1.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax1.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0))  # not over a point
    metric = next((h.metric for h in history if h.metric), "visual_tokens")
    ax1.set_ylabel("selection score")
    ax2.set_ylabel(f"{metric.replace('_', ' ')} / question\n(the gate's cost)")
    ax3.set_ylabel("frames / question")
    ax3.set_xlabel("iteration (0 = the seed)")
    last = max(inc_x)
    if last < 8:  # a locator's ticks would be fractions of an iteration for a run of one or none
        ax3.set_xticks(range(last + 1))
    else:
        ax3.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax3.set_xlim(-0.5, max(last, 1) + 0.5)
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _tree_rows(versions: list[dict[str, Any]]) -> dict[str, float]:
    """A row per leaf of the version tree, depth first (children by iteration); a parent centred on its children."""
    ids = {v["version"] for v in versions}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for v in versions:
        parent = v.get("parent") if v.get("parent") in ids else None
        children.setdefault(parent, []).append(v)
    rows: dict[str, float] = {}
    next_row = [0]

    def place(v: dict[str, Any]) -> float:
        kids = sorted(children.get(v["version"], []), key=lambda c: (int(c.get("iteration") or 0), c["version"]))
        if not kids:
            rows[v["version"]] = next_row[0]
            next_row[0] += 1
        else:
            placed = [place(c) for c in kids]
            rows[v["version"]] = (placed[0] + placed[-1]) / 2
        return rows[v["version"]]

    for root in children.get(None, []):
        place(root)
    return rows


def lineage(versions: list[dict[str, Any]], path: Path, iterations: int | None = None) -> Path:
    """The version tree, coloured by decision, with a legend of the decisions that occur.

    x is the iteration that made a version (the seed 0; ticks up to ``iterations``); an edge joins each version to
    its parent, and siblings (rejected candidates of one parent) sit one under the other, never on a chain.
    """
    rows = _tree_rows(versions)
    x_of = {v["version"]: 0 if v.get("decision") == "seed" else int(v.get("iteration") or 0) + 1 for v in versions}
    last = max([iterations or 0, *x_of.values()])
    # a label sits above its node, one part of the operator a line: the width and the rows make room for it
    fig, ax = plt.subplots(figsize=(min(24.0, max(8.0, 1.5 * (last + 1))),
                                    max(2.5, 0.9 * (max(rows.values(), default=0) + 2))))
    for v in versions:
        parent = v.get("parent")
        if parent in rows:
            ax.plot([x_of[parent], x_of[v["version"]]], [-rows[parent], -rows[v["version"]]], color="#bbbbbb",
                    zorder=1)
    for v in versions:
        decision = v.get("decision", "none")
        x, y = x_of[v["version"]], -rows[v["version"]]
        ax.scatter(x, y, s=120, color=COLOURS.get(decision, "#999999"), zorder=2, label=decision)
        operator = "\n".join(f"{part}+" for part in (v.get("operator") or "seed").split("+"))[:-1]
        ax.annotate(f"{v['version'][:8]} {v.get('score') or 0:.3f}\n{operator}", (x, y), xytext=(0, 8),
                    textcoords="offset points", fontsize=7, ha="center", va="bottom", linespacing=1.1)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_xlabel("iteration (0 = the seed)")
    ax.set_xticks(range(last + 1))
    ax.set_xlim(-0.6, last + 0.6)  # room for the first and last labels
    top = max((-r for r in rows.values()), default=0)
    ax.set_ylim(min((-r for r in rows.values()), default=0) - 0.4, top + 0.75)  # the top row's labels inside
    ax.set_yticks([])
    ax.set_title("lineage: each version under its parent (its id, selection score and operator above it)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the legend outside the axes too
    plt.close(fig)
    return path


def categories(diagnoses: list[dict[str, Any]], path: Path) -> Path:
    """Stacked bars: diagnosis categories per iteration."""
    by_it: dict[int, Counter[str]] = {}
    for d in diagnoses:
        by_it.setdefault(int(d["iteration"]) + 1, Counter())[d["category"]] += 1
    cats = sorted({c for cnt in by_it.values() for c in cnt})
    its = sorted(by_it)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = [0] * len(its)
    for c in cats:
        vals = [by_it[i][c] for i in its]
        ax.bar(its, vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("diagnoses")
    if len(its) < 12:  # a locator's ticks would be fractions of an iteration for a run of one
        ax.set_xticks(its)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if cats:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, not over them
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
