"""Entry point of the sandboxed harness process (trusted; standard library only).

Run as ``python -I -S -c <this source>`` inside the sandbox (no file on disk). It reads the harness (first line),
builds the harness's world, and then, as root (bubblewrap started by root), drops to uid/gid 65534, refusing to go
on if it cannot, so resource limits hold; it waits for the task (second line: a child may be started before its
task exists, see ``pool.py``), sets the limits and runs the harness. The harness's world is built in namespaces
of their own:

- the SDK (``videvolve_sdk``), the import function and the harness's modules are executed in module dicts whose
  ``__builtins__`` is a restricted dict, so a route through an SDK callable (``__func__``, ``__globals__``)
  ends in that dict, never in this module's globals or the real builtins;
- the import function looks names up in namespaces built here in advance; it holds no import machinery;
- harness code runs in a fresh thread whose bottom frame belongs to a restricted launcher, which also encodes the
  answer and describes errors (harness ``__repr__``/``__str__`` run there), so no ``f_back`` chain from harness
  code leads to this module's frames; the main thread only ever sees plain JSON and text.

This is the second wall. It cannot be complete in CPython (``().__class__.__base__.__subclasses__()`` reaches
every class from a literal), so the first wall is the parent's static check, which refuses every attribute-by-name
route, and the third is the operating-system sandbox around this process.
"""

from __future__ import annotations

import _thread
import builtins
import json
import os
import resource
import sys
import traceback
import types

TYPE_CHECKING = False  # typing is not imported at run time (a child's start-up is on every task's bill)
if TYPE_CHECKING:
    from typing import Any

UNPRIVILEGED_ID = 65534
ALLOWED_MODULES: dict[str, frozenset[str] | None] = {
    # None: the module's __all__ (never every public name of a Python module: statistics.sys is public)
    "math": None,
    "cmath": None,
    "itertools": None,
    "statistics": None,
    "heapq": frozenset({"heapify", "heappop", "heappush", "heappushpop", "heapreplace", "nlargest", "nsmallest"}),
    "bisect": frozenset({"bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right"}),
    "json": frozenset({"loads", "dumps", "JSONDecodeError"}),
    "re": frozenset({"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split",
                     "escape", "IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S", "VERBOSE", "X", "Pattern",
                     "Match", "error"}),
    "collections": frozenset({"Counter", "defaultdict", "deque", "OrderedDict", "namedtuple", "ChainMap"}),
    # not asdict, astuple or replace: they read and set attributes by name (copy.deepcopy reconstructs with setattr)
    "dataclasses": frozenset({"dataclass", "field", "fields"}),
    "typing": frozenset({"Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "Sequence", "Iterable",
                         "Iterator", "Callable", "Literal", "Mapping", "NamedTuple", "TypedDict", "cast",
                         "TYPE_CHECKING"}),
    "functools": frozenset({"lru_cache", "cache", "reduce", "partial", "cmp_to_key", "total_ordering"}),
    "string": frozenset({"ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "punctuation",
                         "Template"}),
    "fractions": frozenset({"Fraction"}),
    "decimal": frozenset({"Decimal"}),
    "enum": frozenset({"Enum", "IntEnum", "auto"}),
    "random": frozenset({"Random"}),
    "textwrap": frozenset({"dedent", "indent", "shorten", "wrap", "fill"}),
    "videvolve_sdk": frozenset({"HarnessContext", "TaskView", "Observation", "ModelReply", "Tool", "SDKError",
                                "BudgetExceeded"}),
}
FUTURE_FEATURES = ("annotations", "division", "absolute_import", "generator_stop")
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod", "complex",
    "dict", "divmod", "enumerate", "filter", "float", "frozenset", "hash", "hex", "id", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "print",
    "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "tuple", "zip", "format", "NotImplemented", "Ellipsis", "True", "False", "None",
    "BaseException", "Exception", "ArithmeticError", "AssertionError", "AttributeError", "IndexError", "KeyError",
    "LookupError", "MemoryError", "NotImplementedError", "OverflowError", "RecursionError", "RuntimeError",
    "StopIteration", "TypeError", "ValueError", "ZeroDivisionError", "ImportError", "NameError",
    "UnicodeError", "FloatingPointError", "OSError",
})
"""Builtins harness code may name (everything else, ``getattr``, ``type``, ``vars``, ``open``..., is absent)."""

_IMPORTER_SOURCE = '''
def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
    found = NAMESPACES.get(name) if level == 0 else None
    if found is None:
        raise ImportError("import of " + repr(name) + " is not allowed in a harness")
    return found
'''
_LAUNCHER_SOURCE = '''
def launch(codes, envs, tools, task, ctx, ready, done, box):
    ready.acquire()
    try:
        box.append(("final", plain(run(codes, envs, tools, task, ctx))))
    except BaseException as exc:
        box.append(describe(exc))
    finally:
        done.release()


def run(codes, envs, tools, task, ctx):
    for code, env in zip(codes, envs):
        exec(code, env)
    for spec, env in zip(tools, envs):
        if not callable(env.get("run")):
            raise SDK_ERROR("tool " + spec[0] + " has no run(ctx, **args) function")
        ctx.tools[spec[0]] = MAKE_TOOL(spec[0], spec[1], spec[2], env["run"])
    solve = envs[-1].get("solve")
    if not callable(solve):
        raise SDK_ERROR("solver.py defines no solve(task, ctx) function")
    return solve(task, ctx)


def plain(value):
    for candidate in (value, "repr"):
        try:
            return LOADS(DUMPS(value if candidate is value else repr(value)[:2000]))
        except BaseException:
            pass
    return "<an answer that cannot be shown>"


def describe(exc):
    if isinstance(exc, MemoryError):
        return ("fail", "memory", "the harness ran out of memory (address-space limit)")
    kind = "budget" if isinstance(exc, BUDGET) else "bad_request" if isinstance(exc, SDK_ERROR) else "crash"
    try:
        text = type(exc).__name__ + ": " + str(exc)
        if kind != "budget":
            text = text + "\\n" + "".join(FORMAT(exc, limit=8))[-3000:]
    except BaseException:
        text = "an exception that cannot be shown"
    return ("fail", kind, "" + text)
'''


def drop_privileges() -> None:
    """As root: become uid/gid 65534 with no groups (capabilities go with uid 0); refuse to stay root."""
    if os.getuid() == 0 or os.geteuid() == 0:
        os.setgroups([])
        os.setgid(UNPRIVILEGED_ID)
        os.setuid(UNPRIVILEGED_ID)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("refusing to run harness code as root")


def set_limits(limits: dict[str, int]) -> None:
    """Address space, CPU seconds, file size, processes and open files; umask 077."""
    os.umask(0o077)
    for key, res in (("memory_bytes", resource.RLIMIT_AS), ("cpu_seconds", resource.RLIMIT_CPU),
                     ("file_bytes", resource.RLIMIT_FSIZE), ("processes", resource.RLIMIT_NPROC),
                     ("open_files", resource.RLIMIT_NOFILE)):
        if key in limits:
            resource.setrlimit(res, (limits[key], limits[key]))


def allowed_names(module: Any, allowed: frozenset[str] | None) -> dict[str, Any]:
    """The names of ``module`` a harness may use."""
    names = allowed if allowed is not None else set(getattr(module, "__all__", ()))
    if allowed is None and not hasattr(module, "__all__") and not str(getattr(module, "__file__", "")).endswith(".py"):
        names = {n for n in dir(module) if not n.startswith("_")}  # a C module (math, itertools): functions only
    return {n: getattr(module, n) for n in names if hasattr(module, n) and not n.startswith("_")}


def _module(name: str, safe: dict[str, Any]) -> types.ModuleType:
    """An empty module whose globals see only ``safe`` builtins, registered so class machinery finds it."""
    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = safe
    sys.modules[name] = mod
    return mod


def build_world(sdk_source: str, modules: list[str] | None = None) -> tuple[dict[str, Any], types.ModuleType]:
    """The restricted builtins (with their import function) and the SDK module, built in namespaces of their own.

    ``modules``: the allowed modules the harness and the SDK import (the parent reads them from the sources), so a
    child prepares only those; None prepares every allowed module.
    """
    safe: dict[str, Any] = {k: v for k, v in vars(builtins).items() if k in SAFE_BUILTINS}
    safe["__build_class__"] = builtins.__build_class__  # class statements need it
    namespaces: dict[str, Any] = {"__future__": types.SimpleNamespace(**dict.fromkeys(FUTURE_FEATURES))}
    importer_env = {"__builtins__": {"ImportError": ImportError, "repr": repr}, "NAMESPACES": namespaces}
    exec(compile(_IMPORTER_SOURCE, "<videvolve importer>", "exec"), importer_env)
    safe["__import__"] = importer_env["restricted_import"]
    for name, allowed in ALLOWED_MODULES.items():
        if name != "videvolve_sdk" and (modules is None or name in modules):
            namespaces[name] = types.SimpleNamespace(**allowed_names(__import__(name), allowed))
    sdk = _module("videvolve_sdk", safe)
    exec(compile(sdk_source, "videvolve_sdk.py", "exec"), sdk.__dict__)
    namespaces["videvolve_sdk"] = types.SimpleNamespace(**allowed_names(sdk, ALLOWED_MODULES["videvolve_sdk"]))
    return safe, sdk


def run_harness(init: dict[str, Any], safe: dict[str, Any], sdk: types.ModuleType, ctx: Any) -> tuple[Any, ...]:
    """Load the tools and the solver and call ``solve`` in a fresh thread.

    Everything that touches harness objects (running it, encoding its answer, describing its exception) happens in
    that thread under the restricted launcher, so no harness callback ever has this module's frames below it.
    Returns ``("final", plain JSON)`` or ``("fail", kind, message)``.
    """
    codes, envs, tools = [], [], []
    for tool in init.get("tools", []):
        codes.append(compile(tool["source"], tool["path"], "exec"))
        envs.append(_module(f"tool_{tool['name']}", safe).__dict__)
        tools.append((tool["name"], tool["description"], tool["parameters"]))
    codes.append(compile(init["solver_source"], init["solver_path"], "exec"))
    envs.append(_module("solver", safe).__dict__)
    launcher_env = {"__builtins__": {"exec": exec, "zip": zip, "callable": callable, "BaseException": BaseException,
                                     "MemoryError": MemoryError, "isinstance": isinstance, "type": type, "str": str,
                                     "repr": repr},
                    "MAKE_TOOL": sdk.Tool, "SDK_ERROR": sdk.SDKError, "BUDGET": sdk.BudgetExceeded,
                    "DUMPS": json.dumps, "LOADS": json.loads, "FORMAT": traceback.format_exception}
    exec(compile(_LAUNCHER_SOURCE, "<videvolve launcher>", "exec"), launcher_env)
    ready, done = _thread.allocate_lock(), _thread.allocate_lock()
    box: list[tuple[Any, ...]] = []
    ready.acquire()
    done.acquire()
    _thread.stack_size(16 * 1024 * 1024)
    _thread.start_new_thread(launcher_env["launch"], (codes, envs, tools, ctx.task, ctx, ready, done, box))
    set_limits(init.get("limits", {}))  # after the thread exists: RLIMIT_NPROC counts threads too
    ready.release()
    done.acquire()
    return box[0] if box else ("fail", "crash", "the harness thread ended without a result")


def main() -> int:
    """Read the harness, build its world, drop privileges, wait for the task, run the harness, report."""
    out = sys.stdout
    sys.stdout = sys.stderr  # prints from harness code never reach the protocol channel
    init = json.loads(sys.stdin.readline())
    # trusted code only; imports done while files are readable
    safe, sdk = build_world(init["sdk_source"], init.get("modules"))
    drop_privileges()
    init["task"] = json.loads(sys.stdin.readline())["task"]  # a started child waits here until a task takes it
    channel = sdk.Channel(sys.stdin, out)
    ctx = sdk.HarnessContext(channel, sdk.TaskView(**init["task"]), init.get("config", {}), init.get("budget"),
                             init.get("skill", ""))
    try:
        outcome = run_harness(init, safe, sdk, ctx)
    except SyntaxError as exc:
        outcome = ("fail", "crash", f"SyntaxError: {exc}")
    if outcome[0] == "final":
        channel.send("final", result=outcome[1])
        return 0
    channel.send("fail", kind=outcome[1], error=outcome[2])
    return 1


if __name__ == "__main__":
    sys.exit(main())
