"""Errors a person can act on: pydantic validation errors and JSON syntax errors in plain words.

``plain_errors`` turns ``answer.list[function-after[_ordered(), Interval]].0: Value error, interval start 24.25 is
after its end 17.0`` into ``answer, item 1: interval start 24.25 is after its end 17.0``: union branches are dropped
from the path (and the branches the input plainly was not meant for are dropped from the messages), list positions
are counted from 1, and pydantic's prefixes go.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "tuple", "set", "none", "bytes"}
_PREFIXES = ("Value error, ", "Assertion failed, ")
_PLAIN = {
    "missing": "missing (this field is required)",
    "extra_forbidden": "not a known field (check its spelling, or remove it)",
}


def _is_branch(part: Any) -> bool:
    """Whether a location part names a union branch (``str``, ``list[...]``, ``Interval``), not a field."""
    return isinstance(part, str) and (not part.isidentifier() or part in _TYPE_NAMES or part[:1].isupper())


def _path(loc: Sequence[Any]) -> str:
    fields: list[str] = []
    for part in loc:
        if isinstance(part, int):
            fields.append(f"item {part + 1}")
        elif not _is_branch(part):
            fields.append(part)
    return ", ".join(_join_dotted(fields))


def _join_dotted(parts: list[str]) -> list[str]:
    """``meta``, ``key`` -> ``meta.key``; ``answer``, ``item 1`` stay separate."""
    out: list[str] = []
    for p in parts:
        if out and not p.startswith("item ") and not out[-1].startswith("item "):
            out[-1] = f"{out[-1]}.{p}"
        else:
            out.append(p)
    return out


def _message(e: dict[str, Any]) -> str:
    msg = _PLAIN.get(e["type"], e["msg"])
    for prefix in _PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


def _got(errors: list[dict[str, Any]]) -> str:
    """`` (got 5)`` after a wrong-type message, to show what was there."""
    if not any(_is_type_error(e) or e["type"] in ("literal_error", "enum") for e in errors):
        return ""
    shown = repr(errors[0].get("input"))
    return f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"


def _is_type_error(e: dict[str, Any]) -> bool:
    return e["type"].endswith(("_type", "_parsing"))


def plain_errors(err: ValidationError) -> list[str]:
    """One ``path: message`` line per problem, without pydantic's internal names."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in err.errors():
        groups.setdefault(_path(e["loc"]), []).append(dict(e))
    # a union reports every branch: keep the branches the input was meant for (errors other than a wrong type)
    field_of = {path: path.split(",")[0] for path in groups}
    meant = {field_of[p] for p, es in groups.items() if any(not _is_type_error(e) for e in es)}
    lines = []
    for path, errors in groups.items():
        if field_of[path] in meant and all(_is_type_error(e) for e in errors) and \
                any(_is_branch(x) for e in errors for x in e["loc"]):
            continue
        messages = list(dict.fromkeys(_message(e) for e in errors))
        if len(messages) > 1 and all(m.startswith("Input should be ") for m in messages):
            messages = ["Input should be " + " or ".join(m.removeprefix("Input should be ") for m in messages)]
        text = "; ".join(messages) + _got(errors)
        lines.append(f"{path}: {text}" if path else text)
    return lines


def describe(err: ValidationError) -> str:
    """:func:`plain_errors` on one line."""
    return "; ".join(plain_errors(err))


def json_error(path: Any, exc: json.JSONDecodeError, lineno: int | None = None) -> str:
    """``FILE:LINE:COLUMN: not JSON (...)``; ``lineno``: the file's line when ``exc`` came from that line alone."""
    line = exc.lineno if lineno is None else lineno + exc.lineno - 1
    return f"{path}:{line}:{exc.colno}: not JSON ({exc.msg} at line {line}, column {exc.colno})"
