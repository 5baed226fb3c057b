"""Every parse of Python source in the parent goes through ``static_check.parse`` (one thread at a time).

CPython 3.11 raises "SystemError: AST constructor recursion depth mismatch" when threads build ASTs at once
(python/cpython#106905): a bare ``ast.parse`` of the harness's imports beside the locked static check made a hostile-
harness test fail in CI as a crash of the harness ("the harness's task failed in the parent").
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from videvolve.skill_library import static_check

PACKAGE = Path(__file__).resolve().parent.parent / "videvolve"


def test_no_bare_ast_parse_in_the_package():
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"):
                bare.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert bare == ["videvolve/skill_library/static_check.py:" + str(_helper_line())], bare


def _helper_line() -> int:
    source = Path(static_check.__file__).read_text(encoding="utf-8")
    return next(i for i, line in enumerate(source.splitlines(), 1) if "return ast.parse(source, filename)" in line)


def test_parse_holds_the_lock():
    entered = threading.Event()

    def parse_then_say() -> None:
        static_check.parse("x = 1")
        entered.set()

    static_check._PARSE_LOCK.acquire()
    try:
        worker = threading.Thread(target=parse_then_say)
        worker.start()
        assert not entered.wait(0.2)  # waits for the lock
    finally:
        static_check._PARSE_LOCK.release()
    worker.join(5)
    assert entered.is_set()
