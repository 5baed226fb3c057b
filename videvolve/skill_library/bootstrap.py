"""Entry point of the sandboxed harness process (trusted; standard library only).

Run as ``python -I -S bootstrap.py`` inside the sandbox. It sets resource limits, builds restricted builtins
and an import hook that hands out only allowlisted modules (as namespaces holding only allowlisted names), loads
the harness's tools and solver, runs ``solve(task, ctx)`` and reports the answer or the failure to the parent.
The parent's static check (:mod:`videvolve.skill_library.static_check`) has already refused anything else; this
is the second wall, and the operating-system sandbox around the process is the third.
"""

from __future__ import annotations

import builtins
import json
import sys
import traceback
import types
from typing import Any

ALLOWED_MODULES: dict[str, frozenset[str] | None] = {
    # None: every public name of the module
    "math": None,
    "cmath": None,
    "itertools": None,
    "statistics": None,
    "heapq": None,
    "bisect": None,
    "json": frozenset({"loads", "dumps", "JSONDecodeError"}),
    "re": frozenset({"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split",
                     "escape", "IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S", "VERBOSE", "X", "Pattern",
                     "Match", "error"}),
    "collections": frozenset({"Counter", "defaultdict", "deque", "OrderedDict", "namedtuple", "ChainMap"}),
    "dataclasses": frozenset({"dataclass", "field", "asdict", "astuple", "replace", "fields"}),
    "typing": frozenset({"Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "Sequence", "Iterable",
                         "Iterator", "Callable", "Literal", "Mapping", "NamedTuple", "TypedDict", "cast"}),
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
FORBIDDEN_BUILTINS = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "input", "help",
    "exit", "quit", "memoryview", "getattr", "setattr", "delattr", "__build_class__", "__loader__", "__spec__",
})
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_back", "f_globals",
    "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "co_code", "func_globals", "mro", "format_map",
})


def allowed_names(module: types.ModuleType, allowed: frozenset[str] | None) -> dict[str, Any]:
    """The names of ``module`` a harness may use."""
    names = allowed if allowed is not None else {n for n in dir(module) if not n.startswith("_")}
    return {n: getattr(module, n) for n in names if hasattr(module, n)}


def _namespace(name: str, module: types.ModuleType) -> types.SimpleNamespace:
    return types.SimpleNamespace(**allowed_names(module, ALLOWED_MODULES[name]))


def make_importer(sdk: types.ModuleType) -> Any:
    """``__import__`` for harness code: allowlisted modules only, as namespaces of their allowed names."""
    cache: dict[str, types.SimpleNamespace] = {}

    def restricted_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
                          ) -> Any:
        if level != 0 or name not in ALLOWED_MODULES:
            if name == "__future__":
                return __import__("__future__")
            raise ImportError(f"import of {name!r} is not allowed in a harness")
        if name not in cache:
            module = sdk if name == "videvolve_sdk" else __import__(name)
            cache[name] = _namespace(name, module)
        return cache[name]

    return restricted_import


def safe_builtins(importer: Any) -> dict[str, Any]:
    """Builtins without file, code-execution or introspection escapes."""
    out = {k: v for k, v in vars(builtins).items() if k not in FORBIDDEN_BUILTINS}
    out["__import__"] = importer
    out["__build_class__"] = builtins.__build_class__  # class statements need it
    return out


def set_limits(limits: dict[str, int]) -> None:
    """Address space, CPU seconds, file size, processes and open files; umask 077."""
    import os
    import resource

    os.umask(0o077)
    for key, res in (("memory_bytes", resource.RLIMIT_AS), ("cpu_seconds", resource.RLIMIT_CPU),
                     ("file_bytes", resource.RLIMIT_FSIZE), ("processes", resource.RLIMIT_NPROC),
                     ("open_files", resource.RLIMIT_NOFILE)):
        if key in limits:
            resource.setrlimit(res, (limits[key], limits[key]))


def _exec(path: str, source: str, env: dict[str, Any]) -> None:
    exec(compile(source, path, "exec"), env)


def main() -> int:
    """Read the init message, run the harness, report."""
    out = sys.stdout
    sys.stdout = sys.stderr  # prints from harness code never reach the protocol channel
    channel_in = sys.stdin
    init = json.loads(channel_in.readline())
    set_limits(init.get("limits", {}))
    sys.path.insert(0, init["sdk_dir"])
    import videvolve_sdk as sdk

    channel = sdk.Channel(channel_in, out)
    task = sdk.TaskView(**init["task"])
    ctx = sdk.HarnessContext(channel, task, init.get("config", {}), init.get("budget"), init.get("skill", ""))
    importer = make_importer(sdk)
    try:
        for tool in init.get("tools", []):
            env: dict[str, Any] = {"__builtins__": safe_builtins(importer), "__name__": f"tool_{tool['name']}"}
            _exec(tool["path"], tool["source"], env)
            if not callable(env.get("run")):
                raise sdk.SDKError(f"tool {tool['name']} has no run(ctx, **args) function")
            ctx.tools[tool["name"]] = sdk.Tool(tool["name"], tool["description"], tool["parameters"], env["run"])
        env = {"__builtins__": safe_builtins(importer), "__name__": "solver"}
        _exec(init["solver_path"], init["solver_source"], env)
        solve = env.get("solve")
        if not callable(solve):
            raise sdk.SDKError("solver.py defines no solve(task, ctx) function")
        result = solve(task, ctx)
        channel.send("final", result=result if _jsonable(result) else repr(result)[:2000])
        return 0
    except sdk.BudgetExceeded as exc:
        channel.send("fail", kind="budget", error=str(exc))
    except MemoryError:
        channel.send("fail", kind="memory", error="the harness ran out of memory (address-space limit)")
    except RecursionError as exc:
        channel.send("fail", kind="crash", error=f"RecursionError: {exc}")
    except BaseException as exc:  # the harness's own failure, reported with its traceback
        kind = "bad_request" if isinstance(exc, sdk.SDKError) else "crash"
        tb = traceback.format_exc(limit=8)
        channel.send("fail", kind=kind, error=f"{type(exc).__name__}: {exc}\n{tb[-3000:]}")
    return 1


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
