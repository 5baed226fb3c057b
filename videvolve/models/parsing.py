"""Parse what real VLMs say, in one place: think blocks, option letters, intervals, timestamps.

A reply that does not parse yields None, which the runner records as an ``error`` outcome of kind ``parse``
(the reply is kept in the trace) — never as a wrong answer.

Replies come from models and harnesses, so every pattern here runs in linear time: a number may start only where no
digit precedes it (``(?<!...)``), runs are matched possessively (``++``, ``*+``) so a failed attempt never tries
shorter splits, and braces and brackets are found with ``str.find``, never with a ``{.*}`` search. Anything longer than
:data:`MAX_PARSE_CHARS` is cut to its last :data:`MAX_PARSE_CHARS` characters first (answers come last).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from videvolve.metrics.intervals import normalize, to_seconds

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_BRACKET = re.compile(r"[\[\]]")
_ABSENT = re.compile(r"\b(never|does not (appear|happen|occur)|doesn't (appear|happen|occur)|not (present|found|"
                     r"visible|shown)|no such|none)\b", re.I)
_TIME = r"(?<![\d.:])(\d{1,2}:\d{2}(?::\d{2})?+(?:\.\d++)?+|\d++(?:\.\d++)?+)"
_RANGE = re.compile(_TIME + r"\s*+(?:seconds|sec|s)?+\s*+(?:-|–|—|~|to|until|and)\s*+" + _TIME, re.I)
MAX_PARSE_CHARS = 1_000_000
"""Characters of a reply that are parsed (its last ones)."""
MAX_JSON_SPANS = 256
"""Bracketed spans of a reply tried as JSON, from its end."""


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` blocks (and an unclosed one at the end); cut to :data:`MAX_PARSE_CHARS`."""
    return _THINK.sub("", text[-MAX_PARSE_CHARS:]).strip()



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
    m = re.search(rf"(?:answer|option|choice)\s*+(?:is|:)?+\s*+\(?([{letters}])\b", s, re.I)
    if m:
        return m.group(1)
    found = re.findall(rf"(?<![A-Za-z])\(?([{letters}])\)?(?![A-Za-z])", s)
    return found[-1] if found else None


def _json_candidates(s: str) -> Iterator[Any]:
    """The outermost balanced ``[...]`` spans of ``s`` that parse as JSON, last first (too deep: skipped).

    Read from the end (the answer is what a reply ends with) and lazily, so a caller that takes the last usable
    one does no more; at most :data:`MAX_JSON_SPANS` spans are tried.
    """
    n, depth, end, tried = len(s), 0, -1, 0
    for m in _BRACKET.finditer(s[::-1]):
        i = n - 1 - m.start()
        if m.group() == "]":
            if depth == 0:
                end = i
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                tried += 1
                obj = _loads(s[i : end + 1])
                if obj is not _INVALID:
                    yield obj
                if tried >= MAX_JSON_SPANS:
                    return


_INVALID = object()


def _loads(text: str) -> Any:
    """``text`` as JSON, or :data:`_INVALID` (not JSON, or nested too deep to decode)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return _INVALID


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
    for obj in _json_candidates(s):
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
    for obj in _json_candidates(s):
        if isinstance(obj, list) and all(isinstance(x, int | float) for x in obj):
            return [float(x) for x in obj]
    if _ABSENT.search(s):
        return []
    return None


def parse_match(text: str) -> dict[str, list[float]] | None:
    """A match reply: ``{"yes": [times], "maybe": [times]}``, or a plain list of times (all 'yes')."""
    s = strip_think(text)
    first, last = s.find("{"), s.rfind("}")  # the widest {...} span, as a greedy search would find it
    if first != -1 and last > first:
        try:
            obj = json.loads(s[first : last + 1])
            if isinstance(obj, dict):
                return {k: [float(x) for x in v if isinstance(x, int | float)] if isinstance(v := obj.get(k, []), list)
                        else [] for k in ("yes", "maybe")}
        except (json.JSONDecodeError, RecursionError):
            pass
    times = parse_times(s)
    return None if times is None else {"yes": times, "maybe": []}
