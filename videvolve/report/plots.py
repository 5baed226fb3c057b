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


def progress(history: list[GateEntry], seed: dict[str, Any], path: Path) -> Path:
    """Selection score, the gate's cost and frames per iteration (the seed at 0), candidates by decision."""
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    inc_x = [0]
    inc = {"score": [seed.get("score") or 0.0], "cost": [seed.get("cost") or 0.0], "frames": [seed.get("frames")]}
    for h in history:
        it = h.number
        if h.cand_score is not None:
            colour = COLOURS.get(h.decision, "#999999")
            ax1.scatter(it, h.cand_score, color=colour, zorder=3, label=h.decision)
            ax2.scatter(it, h.cand_cost, color=colour, zorder=3)
            if h.cand_frames is not None:
                ax3.scatter(it, h.cand_frames, color=colour, zorder=3)
        accepted = h.decision == "accepted" and h.cand_score is not None
        inc_x.append(it)
        inc["score"].append(h.cand_score if accepted else inc["score"][-1])
        inc["cost"].append(h.cand_cost if accepted else inc["cost"][-1])
        inc["frames"].append(h.cand_frames if accepted else inc["frames"][-1])
    ax1.step(inc_x, inc["score"], where="post", color="#333333", label="incumbent")
    ax2.step(inc_x, inc["cost"], where="post", color="#333333")
    if all(f is not None for f in inc["frames"]):
        ax3.step(inc_x, inc["frames"], where="post", color="#333333")
    handles, labels = ax1.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax1.legend(unique.values(), unique.keys(), loc="lower right")
    metric = next((h.metric for h in history if h.metric), "visual_tokens")
    ax1.set_ylabel("selection score")
    ax2.set_ylabel(f"{metric.replace('_', ' ')} / question\n(the gate's cost)")
    ax3.set_ylabel("frames / question")
    ax3.set_xlabel("iteration (0 = the seed)")
    ax3.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.5 * (max(rows.values(), default=0) + 2))))
    for v in versions:
        parent = v.get("parent")
        if parent in rows:
            ax.plot([x_of[parent], x_of[v["version"]]], [-rows[parent], -rows[v["version"]]], color="#bbbbbb",
                    zorder=1)
    for v in versions:
        decision = v.get("decision", "none")
        x, y = x_of[v["version"]], -rows[v["version"]]
        ax.scatter(x, y, s=120, color=COLOURS.get(decision, "#999999"), zorder=2, label=decision)
        ax.annotate(f"{v['version'][:8]} {v.get('operator') or 'seed'} {v.get('score') or 0:.3f}", (x, y),
                    xytext=(8, -3), textcoords="offset points", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_xlabel("iteration (0 = the seed)")
    ax.set_xticks(range(last + 1))
    ax.set_xlim(-0.4, last + 0.9)  # room for the last labels; the ticks stop at the last iteration
    ax.set_yticks([])
    ax.set_title("lineage: each version under its parent")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if cats:
        ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
