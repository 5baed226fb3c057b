"""Static check of harness code before it runs: an allowlist of syntax, names, attributes and imports.

Harness code is untrusted. In CPython every object leads to every other through attributes read by name
(``().__class__.__base__.__subclasses__()``, ``f.__globals__``, ``gen.gi_frame.f_back``), so this check is the
first wall and it admits only what it knows:

- **syntax**: an allowlist of AST node types; no ``async``/``await`` (coroutine frames), no ``match`` class
  patterns (``case object(__func__=f)`` reads attributes by name), no ``except*``;
- **names**: the harness's own names, its imports and an allowlist of builtins (no ``getattr``, ``type``,
  ``vars``, ``open``, ``eval``, ``hasattr``...); no dunder name but ``__name__``;
- **attributes**: public attributes of the types a harness works with (str, list, dict, re.Match, Counter, the
  SDK...), names the harness defines itself, and a few dunders (``__init__`` for ``super().__init__``); never an
  ``_`` name, a frame, generator, traceback or code attribute (``gi_frame``, ``f_back``, ``tb_frame``,
  ``co_code``...) or ``mro``; a module's attributes only if allowlisted for that module;
- **format strings**: ``.format``/``.format_map`` only on a string literal whose fields are plain names or
  positions (no ``{0.__class__}`` or ``{0[x]}``);
- **stores**: an attribute is set or deleted only as ``self.x`` in a method of the harness's own class, or when a
  class of the harness declares ``x`` and ``x`` is not an attribute of a dataclass field (``fields(P)[0].name = "_x"``
  would make the dataclass machinery read ``_x`` by name); ``dataclasses.asdict``/``astuple``/``replace`` are not
  importable at all;
- **enums**: an enum class (``Enum``, ``IntEnum``, or the harness's own subclass) is used as a base, for its members
  (``Colour.RED``, ``Colour["RED"]``, ``Colour(1)``), in a comparison or an ``isinstance``; never called with names
  (the functional ``Enum("Spy", {"__reduce_ex__": f})`` defines dunders a class body may not) nor passed on.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import decimal
import fractions
import functools
import importlib
import random
import re
import statistics
import string
import threading
from collections.abc import Iterator

from videvolve.skill_library import sdk
from videvolve.skill_library.ast_names import bad_format_fields, called_name, dotted
from videvolve.skill_library.bootstrap import ALLOWED_MODULES, SAFE_BUILTINS, allowed_names

_A = ast
ALLOWED_NODES: frozenset[type] = frozenset({
    _A.Module, _A.Interactive, _A.Expression, _A.FunctionDef, _A.ClassDef, _A.Return, _A.Delete, _A.Assign,
    _A.AugAssign, _A.AnnAssign, _A.For, _A.While, _A.If, _A.With, _A.Raise, _A.Try, _A.Assert, _A.Import,
    _A.ImportFrom, _A.Global, _A.Nonlocal, _A.Expr, _A.Pass, _A.Break, _A.Continue, _A.BoolOp, _A.NamedExpr,
    _A.BinOp, _A.UnaryOp, _A.Lambda, _A.IfExp, _A.Dict, _A.Set, _A.ListComp, _A.SetComp, _A.DictComp,
    _A.GeneratorExp, _A.Yield, _A.YieldFrom, _A.Compare, _A.Call, _A.FormattedValue, _A.JoinedStr, _A.Constant,
    _A.Attribute, _A.Subscript, _A.Starred, _A.Name, _A.List, _A.Tuple, _A.Slice, _A.Load, _A.Store, _A.Del,
    _A.And, _A.Or, _A.Add, _A.Sub, _A.Mult, _A.MatMult, _A.Div, _A.Mod, _A.Pow, _A.LShift, _A.RShift, _A.BitOr,
    _A.BitXor, _A.BitAnd, _A.FloorDiv, _A.Invert, _A.Not, _A.UAdd, _A.USub, _A.Eq, _A.NotEq, _A.Lt, _A.LtE,
    _A.Gt, _A.GtE, _A.Is, _A.IsNot, _A.In, _A.NotIn, _A.comprehension, _A.ExceptHandler, _A.arguments, _A.arg,
    _A.keyword, _A.alias, _A.withitem, _A.Match, _A.match_case, _A.MatchValue, _A.MatchSingleton,
    _A.MatchSequence, _A.MatchMapping, _A.MatchStar, _A.MatchAs, _A.MatchOr, _A.type_ignore,
})
_WHY_NOT = {
    "MatchClass": "match class patterns read attributes by name",
    "AsyncFunctionDef": "async code is not allowed (coroutine frames)",
    "Await": "async code is not allowed (coroutine frames)",
    "AsyncFor": "async code is not allowed (coroutine frames)",
    "AsyncWith": "async code is not allowed (coroutine frames)",
}
FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "dir", "breakpoint", "input",
    "help", "exit", "quit", "memoryview", "getattr", "setattr", "delattr", "hasattr", "type", "__build_class__",
    "__builtins__", "__loader__", "__spec__", "__file__", "__dict__", "sys", "os", "builtins",
})
"""Names refused even where a harness defines them itself."""
DUNDER_METHODS = frozenset({"__init__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
                            "__ge__", "__hash__", "__len__", "__iter__", "__next__", "__contains__", "__getitem__",
                            "__post_init__", "__bool__", "__call__"})
"""Special methods a harness may define (and call as attributes, as in ``super().__init__()``)."""
DENIED_ATTRIBUTES = frozenset({"mro", "format", "format_map", "with_traceback", "modules", "sys", "os", "builtins",
                               "func_globals", "func_code", "im_func", "im_self", "cell_contents", "f_back"})
DENIED_PREFIXES = ("_", "gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_")
NAMEDTUPLE_PRIVATE = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})


FIELD_ATTRIBUTES = frozenset(n for n in dir(dataclasses.Field) if not n.startswith("_")) | frozenset(
    dataclasses.Field.__slots__) - {"_field_type"}
"""A ``dataclasses.Field``'s attributes (``name``, ``type``, ``default``...): the dataclass machinery reads and sets
attributes by the names they hold, so a store to one is refused unless it is ``self.x`` in the harness's own class."""


def _public(*types_: type) -> set[str]:
    return {n for t in types_ for n in dir(t) if not n.startswith("_")}


def _sdk_attributes() -> set[str]:
    names = _public(sdk.HarnessContext, sdk.TaskView, sdk.Observation, sdk.ModelReply, sdk.Tool)
    return names | {"task", "config", "skill", "budget", "tools"}  # HarnessContext's instance attributes


KNOWN_ATTRIBUTES: frozenset[str] = frozenset(
    (_public(str, bytes, bytearray, list, dict, set, frozenset, tuple, int, float, complex, bool, range, slice,
             re.Pattern, re.Match, collections.Counter, collections.deque, collections.OrderedDict,
             collections.defaultdict, collections.ChainMap, fractions.Fraction, decimal.Decimal, random.Random,
             statistics.NormalDist, string.Template, dataclasses.Field, functools.partial)
     | {"args", "msg", "doc", "pos", "lineno", "colno", "name", "value", "cache_info", "cache_clear"}
     | _sdk_attributes() | NAMEDTUPLE_PRIVATE) - DENIED_ATTRIBUTES)
"""Attributes of the types harness code works with (exceptions' args, json errors, enums, lru_cache...)."""


@functools.cache
def module_names(module: str) -> frozenset[str]:
    """The names of an allowlisted module a harness may use (those the sandbox's namespace holds)."""
    allowed = ALLOWED_MODULES[module]
    if allowed is not None:
        return allowed
    return frozenset(allowed_names(importlib.import_module(module), None))


# CPython 3.11 can raise "SystemError: AST constructor recursion depth mismatch" when several threads build ASTs at
# once (python/cpython#106905); the solve engine checks harnesses from many threads, so parsing is serialized.
_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, one thread at a time.

    Every parse of the parent's goes through here: a bare one in another thread is what the lock is for
    (``tests/test_static_parse.py`` checks that there is none).
    """
    with _PARSE_LOCK:
        return ast.parse(source, filename)


@functools.lru_cache(maxsize=256)
def imported_modules(source: str) -> frozenset[str]:
    """The allowed modules ``source`` imports (``import`` statements are the only way in: ``__import__`` is refused).

    A sandboxed child prepares only these (and the SDK's own), which halves its start-up; empty when it does not parse.
    """
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # refused by check_source
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return frozenset(n for n in names if n in ALLOWED_MODULES)


def check_source(source: str, filename: str) -> list[str]:
    """Every violation in one file, as 'file:line: reason' (empty when the file is acceptable)."""
    return list(_check_source(source, filename))


@functools.lru_cache(maxsize=256)
def _check_source(source: str, filename: str) -> tuple[str, ...]:
    try:
        tree = parse(source, filename)
    except (SyntaxError, ValueError) as exc:
        return (f"{filename}:{getattr(exc, 'lineno', 0)}: syntax error: {getattr(exc, 'msg', exc)}",)
    except (RecursionError, MemoryError):  # the parser's own limits: ``1+1+...`` thousands deep, ``not not ...``
        return (f"{filename}:0: an expression nested too deeply to parse; write it in steps",)
    return tuple(f"{filename}:{line}: {reason}" for line, reason in _Checker(tree).problems())


class _Checker:
    """One pass over a parsed file: collect what the harness defines, then judge every node."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.modules: dict[str, str] = {}  # local alias -> allowlisted module
        self.defined: set[str] = set()
        self.format_nodes: set[int] = set()
        self.declared: set[str] = set()  # attributes the harness's classes declare (body names, self.x stores)
        self.self_stores: set[int] = set()  # ``self.x = ...`` nodes in methods of the harness's classes
        self.parents: dict[int, ast.AST] = {}
        self.enums: set[str] = set()  # names bound to enum classes (imported or the harness's own)

    def problems(self) -> Iterator[tuple[int, str]]:
        yield from self._collect()
        self._classes()
        for node in ast.walk(self.tree):
            line = getattr(node, "lineno", 0)
            if type(node) not in ALLOWED_NODES:
                name = type(node).__name__
                yield line, _WHY_NOT.get(name, f"{name} is not allowed in a harness")
            elif isinstance(node, ast.Name):
                yield from ((line, r) for r in self._name(node.id))
                if self._is_enum(node):
                    yield from ((line, r) for r in self._enum_use(node))
            elif isinstance(node, ast.Attribute):
                if not isinstance(node.ctx, ast.Load):
                    yield from ((line, r) for r in self._store(node))
                yield from ((line, r) for r in self._attribute(node))
                if self._is_enum(node):
                    yield from ((line, r) for r in self._enum_use(node))
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                yield from ((line, r) for r in self._definition(node))
            elif isinstance(node, ast.arg) and (node.arg.startswith("__") or node.arg in FORBIDDEN_NAMES):
                yield line, f"argument name {node.arg!r} is not allowed"
            elif isinstance(node, ast.keyword) and node.arg is not None and node.arg.startswith("__"):
                yield line, f"keyword {node.arg!r} is not allowed"
            elif isinstance(node, ast.Call):
                yield from ((line, r) for r in self._format_call(node))

    def _collect(self) -> Iterator[tuple[int, str]]:
        """Imports (checked here) and every name the harness defines."""
        for node in ast.walk(self.tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or "").startswith("__")
                                                                     for a in node.names):
                yield line, "an import may not bind a dunder name"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name not in ALLOWED_MODULES:
                        yield line, f"import of {alias.name!r} is not allowed"
                    else:
                        self.modules[alias.asname or alias.name] = alias.name
                        self.defined.add(alias.asname or alias.name)
            elif isinstance(node, ast.ImportFrom):
                yield from ((line, r) for r in self._import_from(node))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.defined.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.defined.add(node.name)
            elif isinstance(node, ast.arg):
                self.defined.add(node.arg)
            elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
                self.defined.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self.defined.add(node.rest)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                self.defined.update(node.names)
            elif isinstance(node, ast.Call) and called_name(node) in ("namedtuple", "NamedTuple"):
                self.defined.update(_field_words(node))

    def _classes(self) -> None:
        """What the harness's classes declare, its ``self.x`` stores, its enum classes, and every node's parent."""
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.Call) and called_name(node) in ("namedtuple", "NamedTuple"):
                self.declared.update(_field_words(node))
            if not isinstance(node, ast.ClassDef):
                continue
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
                    stmt, ast.AnnAssign | ast.AugAssign) else []
                self.declared.update(t.id for t in targets if isinstance(t, ast.Name))
                if isinstance(stmt, ast.FunctionDef):
                    self.declared.add(stmt.name)
                    self._method(stmt)
        for alias, module in self.modules.items():
            if module == "enum":
                self.enums.add(f"{alias}.Enum")
                self.enums.add(f"{alias}.IntEnum")
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module == "enum":
                self.enums.update(a.asname or a.name for a in node.names if a.name in ("Enum", "IntEnum"))
        grew = True
        while grew:  # the harness's own enum classes, and theirs
            grew = False
            for node in ast.walk(self.tree):
                if isinstance(node, ast.ClassDef) and node.name not in self.enums and any(
                        dotted(b) in self.enums for b in node.bases):
                    self.enums.add(node.name)
                    grew = True

    def _method(self, fn: ast.FunctionDef) -> None:
        """Note ``self.x`` stores of a method whose first parameter is never rebound."""
        params = [*fn.args.posonlyargs, *fn.args.args]
        if not params:
            return
        me = params[0].arg
        rebound = any((isinstance(n, ast.Name) and n.id == me and not isinstance(n.ctx, ast.Load))
                      or (isinstance(n, ast.arg) and n.arg == me and n is not params[0]) for n in ast.walk(fn))
        if rebound:
            return
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) \
                    and n.value.id == me:
                self.self_stores.add(id(n))
                self.declared.add(n.attr)
                self.defined.add(n.attr)

    def _store(self, node: ast.Attribute) -> Iterator[str]:
        attr = node.attr
        if attr.startswith("_"):
            yield f"a store to attribute {attr!r} is not allowed"
        elif id(node) in self.self_stores:
            return
        elif attr not in self.declared or attr in FIELD_ATTRIBUTES:
            yield (f"a store to attribute {attr!r} is not allowed: set only self.{attr} in a method of your own "
                   "class, or attributes your classes declare (never a dataclass field's own attributes)")

    def _is_enum(self, node: ast.Name | ast.Attribute) -> bool:
        return isinstance(node.ctx, ast.Load) and dotted(node) in self.enums

    def _enum_use(self, node: ast.AST) -> Iterator[str]:
        """Refuse an enum class used other than for its members, as a base, in a comparison or ``isinstance``."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.ClassDef) and node in parent.bases:
            return
        if isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is node:
            return
        if isinstance(parent, ast.Compare):
            return
        if isinstance(parent, ast.Call) and parent.func is node and len(parent.args) <= 1 and not parent.keywords \
                and not any(isinstance(a, ast.Starred) for a in parent.args):
            return
        if isinstance(parent, ast.Call) and called_name(parent) in ("isinstance", "issubclass", "list", "tuple",
                                                                     "set", "len", "sorted", "iter", "reversed") \
                and isinstance(parent.func, ast.Name) and parent.args and parent.args[-1] is node \
                and not parent.keywords:
            return
        if isinstance(parent, ast.For | ast.comprehension) and parent.iter is node:
            return
        yield (f"the enum {dotted(node)} may be used only as a base, for its members, in a comparison or "
               "isinstance (no functional Enum(name, members) form, no passing it on)")

    def _import_from(self, node: ast.ImportFrom) -> Iterator[str]:
        if node.module == "__future__" and not node.level:
            self.defined.update(a.asname or a.name for a in node.names)
            return
        if node.level or node.module not in ALLOWED_MODULES:
            yield f"import from {node.module!r} is not allowed"
            return
        for alias in node.names:
            if alias.name == "*" or alias.name not in module_names(node.module):
                yield f"name {alias.name!r} of {node.module!r} is not allowed"
            else:
                self.defined.add(alias.asname or alias.name)

    def _name(self, name: str) -> Iterator[str]:
        if name in FORBIDDEN_NAMES:
            yield f"{name!r} is not allowed in a harness"
        elif name.startswith("__") and name != "__name__":
            yield f"name {name!r} is not allowed"
        elif name not in self.defined and name not in SAFE_BUILTINS and name != "__name__":
            yield f"name {name!r} is neither defined in the harness nor an allowed builtin"

    def _attribute(self, node: ast.Attribute) -> Iterator[str]:
        attr = node.attr
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.modules:
            module = self.modules[base.id]
            if attr not in module_names(module):
                yield f"{module}.{attr} is not allowed"
            return
        if attr in ("format", "format_map"):
            if id(node) not in self.format_nodes:
                yield f"{attr} is only allowed as a call on a string literal with plain fields"
            return
        if attr in DUNDER_METHODS or attr == "__name__" or attr in NAMEDTUPLE_PRIVATE:
            return
        if attr.startswith(DENIED_PREFIXES) or attr in DENIED_ATTRIBUTES:
            yield f"attribute {attr!r} is not allowed (no '_' names, frames, code or type internals)"
        elif attr not in KNOWN_ATTRIBUTES and attr not in self.defined:
            yield f"attribute {attr!r} is neither one the harness defines nor a known public attribute"

    def _definition(self, node: ast.FunctionDef | ast.ClassDef) -> Iterator[str]:
        if (node.name.startswith("__") and node.name not in DUNDER_METHODS) or node.name in FORBIDDEN_NAMES:
            yield f"definition {node.name!r} is not allowed"
        if isinstance(node, ast.ClassDef) and any(k.arg == "metaclass" for k in node.keywords):
            yield "metaclasses are not allowed"

    def _format_call(self, node: ast.Call) -> Iterator[str]:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("format", "format_map"):
            return
        base = func.value
        if not (isinstance(base, ast.Constant) and isinstance(base.value, str)):
            yield f"{func.attr} is only allowed on a string literal"
            return
        bad = bad_format_fields(base.value)
        if bad is not None:
            yield f"format field {bad!r} is not allowed (only plain names or positions)"
            return
        self.format_nodes.add(id(func))


def _field_words(node: ast.Call) -> set[str]:
    """Field names given to ``namedtuple``/``NamedTuple`` as strings (so ``p.x`` is the harness's own name)."""
    words: set[str] = set()
    for arg in [*node.args[1:2], *[k.value for k in node.keywords if k.arg in ("field_names", "fields")]]:
        for const in ast.walk(arg):
            if isinstance(const, ast.Constant) and isinstance(const.value, str):
                words.update(w for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", const.value)
                             if not w.startswith(DENIED_PREFIXES[1:]) and w not in DENIED_ATTRIBUTES)
    return words
