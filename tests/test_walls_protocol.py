"""What a hostile harness sends over its channel or returns: the task's error, never the run's stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from videvolve.config import RuntimeSettings
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.channel import decode_request
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task

SURROGATES = '''
def solve(task, ctx):
    if task.question == "Q1?":
        return {"answer": "A", "raw": "x" + chr(0xD800)}
    if task.question == "Q2?":
        raise ValueError(chr(0xDFFF))
    return {"answer": "A", "raw": "fine \\U0001F600"}
'''


def test_a_lone_surrogate_in_a_message_is_refused_and_a_pair_is_text():
    msg, why = decode_request(b'{"op": "final", "args": {"result": {"answer": "A", "raw": "x\\ud800"}}}')
    assert msg is None and "surrogate" in why
    msg, why = decode_request(b'{"op": "log", "args": {"\\udc00": 1}}')
    assert msg is None and "surrogate" in why
    msg, why = decode_request(b'{"op": "log", "args": {"message": "\\ud83d\\ude00 and \\\\ud800"}}')
    assert msg is not None and msg["args"]["message"] == "\U0001F600 and \\ud800", why


def test_a_lone_surrogate_in_an_answer_or_error_is_the_tasks_crash_not_the_runs_stop(index_video: Path,
                                                                                    tmp_path: Path):
    """Before: the result could not be written as UTF-8 (PydanticSerializationError) and eval stopped."""
    from videvolve.evaluation.solve import solve_tasks

    harness = tmp_path / "surrogates"
    harness.mkdir()
    (harness / "solver.py").write_text(SURROGATES)
    tasks = [Task(id=f"t{i}", video_id="v", video=str(index_video), kind="mcq", question=f"Q{i}?",
                  options=["x", "y"], answer="A", duration=20.0) for i in range(3)]
    results = solve_tasks(load_harness(harness), tasks, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                          tmp_path / "out")
    got = {r.task_id: (r.outcome, r.error_kind) for r in results}
    assert got == {"t0": ("ok", None), "t1": ("error", "crash"), "t2": ("error", "crash")}, results
    assert all("surrogate" in str(r.error) for r in results[1:]), results


def test_ocr_of_an_image_too_large_is_refused_before_decoding(index_video: Path, monkeypatch: pytest.MonkeyPatch):
    """Before: a 1024x15,500 contact sheet (under the sheet cap) cost the parent 1.6 GB and 80 s of OCR, under the
    lock every task shares."""
    from videvolve.errors import RequestRefused
    from videvolve.skill_library.services import TaskServices
    from videvolve.tasks import TaskView

    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)
    services = TaskServices(view, str(index_video), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings())

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the parent decoded or read before refusing")

    monkeypatch.setattr("videvolve.media.ocr.read_text", refuse)
    monkeypatch.setattr("videvolve.media.ocr.available", lambda: True)
    monkeypatch.setattr(services, "_image", refuse)
    tall = services.handle("sheet", {"times": [i * 0.5 for i in range(27)], "cols": 1, "cell_width": 1024})
    with pytest.raises(RequestRefused, match="OCR reads at most") as exc:
        services.handle("ocr", {"handle": tall["handle"]})
    assert exc.value.kind == "invalid" and services.meter.ocr_calls == 0


@pytest.mark.parametrize("expression", ["1+" * 5000 + "1", "not " * 100_000 + "1", "-" * 100_000 + "1"])
def test_code_nested_past_the_parsers_limits_is_refused_not_a_crash_of_the_run(expression: str, tmp_path: Path):
    """Before: ast.parse raised RecursionError or MemoryError in the parent, and `eval` (or an editor's validation)
    stopped with a crash."""
    from videvolve.errors import HarnessError
    from videvolve.skill_library.static_check import check_source, imported_modules

    source = f"import math\ndef solve(task, ctx):\n    return {expression}\n"
    [problem] = check_source(source, "solver.py")
    assert "nested too deeply" in problem and imported_modules(source) == frozenset()
    harness = tmp_path / "deep"
    harness.mkdir()
    (harness / "solver.py").write_text(source)
    with pytest.raises(HarnessError, match="nested too deeply"):
        load_harness(harness)
