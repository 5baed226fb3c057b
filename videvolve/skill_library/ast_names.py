"""Small readings of harness syntax for the static check: format fields, dotted names, called names."""

from __future__ import annotations

import ast
import re
import string


def bad_format_fields(template: str, depth: int = 0) -> str | None:
    """The first field that reaches into its argument (``{0.attr}``, ``{0[key]}``), or None."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return str(exc)
    for _text, field, spec, _conversion in parsed:
        if field is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\d*", field):
            return field
        if field is not None and field.startswith("_"):
            return field
        if spec and depth < 2:
            inner = bad_format_fields(spec, depth + 1)
            if inner is not None:
                return inner
    return None


def dotted(node: ast.AST) -> str | None:
    """``name`` or ``module.name`` of a Name or a one-level Attribute, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def called_name(node: ast.Call) -> str | None:
    """The name a call calls (``f`` of ``f(...)`` or ``x.f(...)``), or None."""
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
