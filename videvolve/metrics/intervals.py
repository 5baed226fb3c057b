"""Interval arithmetic shared by the grounding metrics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Pair = tuple[float, float]


def hull_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two intervals with the hull as denominator (equals the true IoU whenever they overlap); 0 if empty."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    hull = max(a[1], b[1]) - min(a[0], b[0])
    return inter / hull if hull > 0 else 0.0


def merge(intervals: Iterable[Sequence[float]]) -> list[Pair]:
    """Sort by start and merge intervals that overlap or touch; reversed intervals are swapped first."""
    spans = sorted((min(s, e), max(s, e)) for s, e in intervals)
    out: list[list[float]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def total_length(intervals: Iterable[Sequence[float]]) -> float:
    """Sum of interval lengths (overlaps counted twice)."""
    return float(sum(e - s for s, e in intervals))


def set_iou(pred: Sequence[Sequence[float]], gold: Sequence[Sequence[float]]) -> float:
    """IoU of two interval sets as sets of time: |P ∩ G| / |P ∪ G|; two empty sets score 1 (a correct rejection)."""
    p, g = merge(pred), merge(gold)
    if not p and not g:
        return 1.0
    inter = sum(max(0.0, min(pe, ge) - max(ps, gs)) for ps, pe in p for gs, ge in g)
    union = total_length(p) + total_length(g) - inter
    if union <= 0:  # only zero-length intervals on both sides
        return 1.0 if p == g else 0.0
    return inter / union


def normalize(intervals: Iterable[Sequence[float]], duration: float | None = None) -> list[Pair]:
    """What an agent should submit: swap reversed, clip to [0, duration], drop empty, sort and merge."""
    out = []
    for s, e in intervals:
        s, e = min(s, e), max(s, e)
        if duration is not None:
            s, e = min(max(s, 0.0), duration), min(max(e, 0.0), duration)
        if e > s:
            out.append((s, e))
    return merge(out)


def to_seconds(token: str) -> float:
    """``12.5``, ``1:05`` (m:ss) or ``1:02:05`` (h:mm:ss) to seconds."""
    parts = token.split(":")
    value = 0.0
    for p in parts:
        value = value * 60 + float(p)
    return value
