"""The house rules a newcomer can check: no import circle, no upward import, no module over 400 lines.

Every ``import`` counts, also those inside functions (a lazy import that closes a circle is still a circle); only
imports under ``if TYPE_CHECKING:`` are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "videvolve"
MAX_LINES = 400

# Lower number = lower layer. A module may import its own part and parts of a lower layer only.
LAYERS: dict[str, float] = {
    "errors": 0, "config": 0, "interrupt": 0.5, "threads": 0.6, "folderlock": 0.7, "atomic": 0.7, "version": 0,
    "media": 1,
    "tasks": 2, "usage": 2,
    "metrics": 3, "datasets": 3, "models": 4, "memory": 4,
    "needles": 4.5, "rundir": 4.2,
    "skill_library": 5,
    "labelfree": 6.5,
    "evaluation": 6,
    "search": 7, "investigator": 7, "editing": 7, "report": 8,
    "loop": 8,
    "nodes": 9,
    "graph": 10,
    "testing": 11, "api": 11, "doctor": 11.5, "serving": 11.7,
    "cli": 12, "__main__": 13, "__init__": 13,
}
# Same-layer imports that the design allows (from -> to): SimVLM reads SynthWorld's palette; parsing normalises
# intervals; the report reads runs' results; the agent investigator uses the editor's probe (one probe, one refusal).
ALLOWED_SIDEWAYS = {("models", "datasets"), ("models", "metrics"), ("datasets", "metrics"),
                    ("investigator", "editing")}


def module_name(path: Path) -> str:
    if not path.is_relative_to(PACKAGE.parent):
        return f"videvolve.{path.stem}"
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "seeds" not in p.parts}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Modules of the package this file imports (a name imported from a package counts as its submodule if any)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("videvolve"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                    else []))
            if base.startswith("videvolve"):
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out.discard(this)
    return {m for m in out if m in known}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports_of(p, known) for m, p in mods.items()}


def layer_of(module: str) -> tuple[str, float]:
    rel = module.removeprefix("videvolve").removeprefix(".") or "__init__"
    parts = rel.split(".")
    for n in (2, 1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return key, LAYERS[key]
    raise AssertionError(f"{module}: not in any layer of tests/test_architecture.py (add its part to LAYERS)")


def part_of(key: str) -> str:
    return key.split(".")[0]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def upward(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in g.items():
        skey, slayer = layer_of(src)
        for dst in targets:
            dkey, dlayer = layer_of(dst)
            if part_of(skey) == part_of(dkey):
                continue
            if dlayer < slayer or (part_of(skey), part_of(dkey)) in ALLOWED_SIDEWAYS:
                continue
            bad.append(f"{src} (layer {slayer}) imports {dst} (layer {dlayer})")
    return sorted(bad)


def test_no_import_circle() -> None:
    found = cycles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_upward_import() -> None:
    bad = upward(graph())
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_every_part_sits_in_one_layer() -> None:
    """No part straddles another (``graph/`` once held modules below ``nodes/`` and above it)."""
    assert not [k for k in LAYERS if "." in k]


def test_no_module_over_400_lines() -> None:
    big = {m: n for m, p in modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """The checks see a circle and an upward import when there is one."""
    g = {"videvolve.models.a": {"videvolve.skill_library.b"}, "videvolve.skill_library.b": {"videvolve.models.a"}}
    assert cycles(g) == [["videvolve.models.a", "videvolve.skill_library.b"]]
    assert upward(g) == ["videvolve.models.a (layer 4) imports videvolve.skill_library.b (layer 5)"]
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from videvolve.graph import run\n")
    assert imports_of(src, {"videvolve.graph", "videvolve.graph.run"}) == {"videvolve.graph.run"}


@pytest.mark.parametrize("module", ["videvolve.cli", "videvolve.loop.context"])
def test_every_module_has_a_layer(module: str) -> None:
    for m in modules():
        layer_of(m)
    assert layer_of(module)


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    """``videvolve --help`` and ``evolve --help`` build every parser without LangGraph, SciPy, Chroma or the nodes."""
    import subprocess
    import sys

    code = ("import sys; from videvolve.cli import build_parser; p = build_parser(); "
            "heavy = [m for m in ('langgraph', 'scipy', 'chromadb', 'videvolve.nodes', 'videvolve.graph.builder', "
            "'torch', 'av') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"imported at start-up: {out} (import them inside the command that needs them)"


CHILD_SIDE = {"videvolve.skill_library.sdk", "videvolve.skill_library.bootstrap"}
"""Run inside the sandboxed child, which never imports the package: their exceptions travel as protocol text."""


def test_every_exception_is_in_the_one_tree() -> None:
    import importlib
    import inspect

    from videvolve.errors import VidevolveError

    outside = []
    for name in sorted(modules()):
        if name in CHILD_SIDE or name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name \
                    and not issubclass(obj, VidevolveError):
                outside.append(f"{name}.{obj.__name__}")
    assert not outside, f"exceptions outside videvolve.errors.VidevolveError: {outside}"


def test_a_child_cannot_report_an_unknown_or_infrastructure_error_kind() -> None:
    from videvolve.errors import ErrorKind
    from videvolve.skill_library.outcome import child_kind

    assert child_kind("budget") == ErrorKind.BUDGET
    assert child_kind("nonsense") == ErrorKind.CRASH and child_kind(None) == ErrorKind.CRASH
    assert child_kind("unreachable") == ErrorKind.CRASH  # never an infrastructure stop from harness code


def test_nodes_reach_their_services_through_protocols_not_attribute_names():
    """The edit node once did ``hasattr``/``setattr(editor, "open", ...)``: the Editor protocol is all it uses."""
    for path in (PACKAGE / "nodes").glob("*.py"):
        calls = {n.func.id for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"hasattr", "setattr", "getattr"}, path.name
