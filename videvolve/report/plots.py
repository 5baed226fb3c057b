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


def lineage(versions: list[dict[str, Any]], path: Path) -> Path:
    """Every version as a node (x = iteration), an edge from its parent, coloured by its decision."""
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.45 * len(versions))))
    pos: dict[str, tuple[float, float]] = {}
    for row, v in enumerate(versions):
        x = 0 if v.get("decision") == "seed" else int(v.get("iteration") or 0) + 1
        pos[v["version"]] = (x, -row)
    for v in versions:
        parent = v.get("parent")
        if parent in pos:
            (x0, y0), (x1, y1) = pos[parent], pos[v["version"]]
            ax.plot([x0, x1], [y0, y1], color="#bbbbbb", zorder=1)
    for v in versions:
        px, py = pos[v["version"]]
        ax.scatter(px, py, s=120, color=COLOURS.get(v.get("decision", "none"), "#999999"), zorder=2)
        ax.annotate(f"{v['version'][:8]} {v.get('operator') or 'seed'} {v.get('score') or 0:.3f}", (px, py),
                    xytext=(8, -3), textcoords="offset points", fontsize=8)
    ax.set_xlabel("iteration")
    ax.set_yticks([])
    ax.set_xlim(-0.5, max((p[0] for p in pos.values()), default=0) + 2.5)
    ax.set_title("lineage (green accepted, orange rejected, red dropped)")
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
