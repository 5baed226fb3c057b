"""Static check of harness code before it runs: imports and names against an allowlist.

Refused: importing anything but the allowlisted standard-library pieces and ``videvolve_sdk``; using a module
attribute that is not allowlisted (so ``typing.sys`` or ``dataclasses.inspect`` cannot reach ``os``); any
attribute or name starting with ``_`` (no ``__class__``, ``__subclasses__``, ``__globals__``); frame-walking
attributes (``gi_frame``, ``f_back``, ``f_globals``, ...); and builtins that open files or run code (``open``,
``exec``, ``eval``, ``getattr``, ...).
"""

from __future__ import annotations

import ast
import functools
import threading

from videvolve.skill_library.bootstrap import ALLOWED_MODULES, FORBIDDEN_ATTRIBUTES, FORBIDDEN_BUILTINS

_DUNDER_OK = frozenset({"__name__", "__init__", "__repr__", "__str__", "__eq__", "__lt__", "__le__", "__gt__",
                        "__ge__", "__hash__", "__len__", "__iter__", "__next__", "__contains__", "__getitem__",
                        "__post_init__", "__future__", "__bool__", "__call__"})


def _allowed_attr(module: str, name: str) -> bool:
    allowed = ALLOWED_MODULES[module]
    return not name.startswith("_") if allowed is None else name in allowed


# CPython 3.11 can raise "SystemError: AST constructor recursion depth mismatch" when several threads build ASTs at
# once (python/cpython#106905); the solve engine checks harnesses from many threads, so parsing is serialized.
_PARSE_LOCK = threading.Lock()


def check_source(source: str, filename: str) -> list[str]:
    """Every violation in one file, as 'file:line: reason' (empty when the file is acceptable)."""
    return list(_check_source(source, filename))


@functools.lru_cache(maxsize=256)
def _check_source(source: str, filename: str) -> tuple[str, ...]:
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source, filename)
    except SyntaxError as exc:
        return (f"{filename}:{exc.lineno}: syntax error: {exc.msg}",)
    problems: list[str] = []
    modules: dict[str, str] = {}  # local alias -> module

    def bad(node: ast.AST, reason: str) -> None:
        problems.append(f"{filename}:{getattr(node, 'lineno', 0)}: {reason}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_MODULES:
                    bad(node, f"import of {alias.name!r} is not allowed")
                else:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            if node.level or node.module not in ALLOWED_MODULES:
                bad(node, f"import from {node.module!r} is not allowed")
                continue
            for alias in node.names:
                if alias.name == "*" or not _allowed_attr(node.module, alias.name):
                    bad(node, f"name {alias.name!r} of {node.module!r} is not allowed")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_") and node.attr not in _DUNDER_OK:
                bad(node, f"attribute {node.attr!r} is not allowed (no '_' names)")
            elif node.attr in FORBIDDEN_ATTRIBUTES:
                bad(node, f"attribute {node.attr!r} is not allowed (no frame or code introspection)")
            elif isinstance(node.value, ast.Name) and node.value.id in modules \
                    and not _allowed_attr(modules[node.value.id], node.attr):
                bad(node, f"{modules[node.value.id]}.{node.attr} is not allowed")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_BUILTINS:
                bad(node, f"{node.id!r} is not allowed in a harness")
            elif node.id.startswith("__") and node.id not in _DUNDER_OK:
                bad(node, f"name {node.id!r} is not allowed")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name.startswith("__") and node.name not in _DUNDER_OK:
            bad(node, f"definition {node.name!r} is not allowed")
    return tuple(problems)
