"""Parse what real VLMs say, in one place: think blocks, option letters, intervals, timestamps.

A reply that does not parse yields None, which the runner records as an ``error`` outcome of kind ``parse``
(the reply is kept in the trace) — never as a wrong answer.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from videvolve.metrics.intervals import normalize, to_seconds

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_ABSENT = re.compile(r"\b(never|does not (appear|happen|occur)|doesn't (appear|happen|occur)|not (present|found|"
                     r"visible|shown)|no such|none)\b", re.I)
_TIME = r"(\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?|\d+(?:\.\d+)?)"
_RANGE = re.compile(_TIME + r"\s*(?:s|sec|seconds)?\s*(?:-|–|—|~|to|until|and)\s*" + _TIME, re.I)


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` blocks (and an unclosed one at the end)."""
    return _THINK.sub("", text).strip()



def parse_letter(text: str, n_options: int) -> str | None:
    """The option letter a reply chose, or None.

    Accepts the benchmarks' styles: ``B``, ``(B)``, ``B.``, ``B) text``, ``Answer: B``, ``The answer is B``;
    otherwise the last standalone letter wins over earlier ones.
    """
    s = strip_think(text)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n_options]
    if not s:
        return None
    if s[0] in letters and (len(s) == 1 or not s[1].isalpha()):
        return s[0]
    m = re.search(rf"(?:answer|option|choice)\s*(?:is|:)?\s*\(?([{letters}])\b", s, re.I)
    if m:
        return m.group(1)
    found = re.findall(rf"(?<![A-Za-z])\(?([{letters}])\)?(?![A-Za-z])", s)
    return found[-1] if found else None


def _json_candidates(s: str) -> list[Any]:
    """Every outermost balanced ``[...]`` span of ``s`` that parses as JSON, in order."""
    out = []
    depth, start = 0, -1
    for i, ch in enumerate(s):
        if ch == "[":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                with contextlib.suppress(json.JSONDecodeError):
                    out.append(json.loads(s[start : i + 1]))
    return out


def _as_pairs(obj: Any) -> list[tuple[float, float]] | None:
    if isinstance(obj, list) and all(isinstance(x, list | tuple) and len(x) == 2 for x in obj):
        try:
            return [(float(a), float(b)) for a, b in obj]
        except (TypeError, ValueError):
            return None
    if isinstance(obj, list) and len(obj) == 2 and all(isinstance(x, int | float) for x in obj):
        return [(float(obj[0]), float(obj[1]))]
    return None


def parse_intervals(text: str, duration: float | None = None) -> list[tuple[float, float]] | None:
    """Intervals in a reply (swapped, clipped, merged), or None.

    Accepts a JSON list (``[[s, e], ...]`` or ``[]``), ranges such as ``12 - 20``, ``12 to 20`` or
    ``00:01:05 - 00:01:20``, or an explicit 'never appears' (``[]``).
    """
    s = strip_think(text)
    for obj in reversed(_json_candidates(s)):
        if obj == [] or obj == [[]]:
            return []
        pairs = _as_pairs(obj)
        if pairs is not None:
            return normalize(pairs, duration)
    ranges = _RANGE.findall(s)
    if ranges:
        return normalize([(to_seconds(a), to_seconds(b)) for a, b in ranges], duration)
    if _ABSENT.search(s):
        return []
    return None


def parse_times(text: str) -> list[float] | None:
    """A list of timestamps (``[12.0, 48.5]``); ``[]`` when the reply says none."""
    s = strip_think(text)
    for obj in reversed(_json_candidates(s)):
        if isinstance(obj, list) and all(isinstance(x, int | float) for x in obj):
            return [float(x) for x in obj]
    if _ABSENT.search(s):
        return []
    return None


def parse_match(text: str) -> dict[str, list[float]] | None:
    """A match reply: ``{"yes": [times], "maybe": [times]}``, or a plain list of times (all 'yes')."""
    s = strip_think(text)
    m = re.search(r"\{[\s\S]*\}", s)
    if m:
        try:
            obj = json.loads(m.group(0))
            if isinstance(obj, dict):
                return {k: [float(x) for x in obj.get(k, []) if isinstance(x, int | float)] for k in ("yes", "maybe")}
        except json.JSONDecodeError:
            pass
    times = parse_times(s)
    return None if times is None else {"yes": times, "maybe": []}
