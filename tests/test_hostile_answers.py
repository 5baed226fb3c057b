"""What a harness's answer carries into the trusted side: each value it returns is stored, read back and reused.

A harness that passes the static check returns plain Python values; the launcher encodes them as JSON, which carries
``NaN`` and ``Infinity``, and the parent decodes them as floats.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.evaluation.results import Producer, read_result, reusable_result
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task
from videvolve.testing import make_index_video

NON_FINITE_EVIDENCE = '''
import math
def solve(task, ctx):
    return {"answer": "A", "evidence_times": [float("nan"), math.inf, -math.inf, 2.5, 10 ** 400, True]}
'''


@pytest.fixture()
def mcq(tmp_path: Path) -> Task:
    video = make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48)
    return Task(id="q1", video_id="v", video=str(video), kind="mcq", question="Which?", options=["one", "two"],
                answer="A", duration=4.0)


def test_non_finite_evidence_times_are_left_out_so_the_stored_result_reads_back(mcq: Task, tmp_path: Path) -> None:
    """Before: the result was written with ``null`` evidence times, which no reader accepts: the task was run again at
    every resume and left out of every comparison that reads stored results (``beats``, the mixture)."""
    harness_dir = tmp_path / "h"
    harness_dir.mkdir()
    (harness_dir / "solver.py").write_text(NON_FINITE_EVIDENCE)
    harness = load_harness(harness_dir)
    vlm, cost, settings = SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(wall_seconds=10, warm_sandboxes=False)
    out = tmp_path / "eval"
    [result] = solve_tasks(harness, [mcq], vlm, cost, settings, out)
    assert (result.outcome, result.score) == ("ok", 1.0), result.error
    assert result.prediction is not None and result.prediction.evidence_times == [2.5]
    stored = read_result(out, mcq.id)
    assert stored is not None and stored.prediction is not None and stored.prediction.evidence_times == [2.5]
    assert reusable_result(out, mcq, Producer.of(harness.version_id, vlm, settings, cost)) is not None
    assert None not in json.loads((out / "results" / f"{mcq.id}.json").read_text())["prediction"]["evidence_times"]


CLAIMS_NOT_ITS_FAULT = '''
def solve(task, ctx):
    ctx._channel.send("fail", kind="KIND", error="the video cannot be read")
    while True:
        pass
'''


@pytest.mark.parametrize("claimed", ["media", "unsupported", "parse", "static"])
def test_a_harness_cannot_call_its_failure_anything_the_parent_did_not_see(claimed: str, tmp_path: Path) -> None:
    """Before: a child's ``fail`` with kind ``media`` or ``unsupported`` stood (not the harness's fault: validation
    let the broken candidate through, and a media error is never reused, so its task ran again at every rerun)."""
    from tests.test_hostile_code import run_source

    video = make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48)
    out, _ = run_source(CLAIMS_NOT_ITS_FAULT.replace("KIND", claimed), str(video), tmp_path, static_check=False)
    assert out.outcome == "error" and out.error_kind == "crash", (out.error_kind, out.error)


RAISES_BUDGET_ITSELF = '''
from videvolve_sdk import BudgetExceeded, SDKError
def solve(task, ctx):
    try:
        ctx.frames([1.0], max_side=3)  # an invalid request: refused, and caught
    except SDKError:
        pass
    raise BudgetExceeded("I am not broken, the budget is")
'''
REFUSED_FOR_ITS_BUDGET = '''
from videvolve_sdk import SDKError
def solve(task, ctx):
    try:
        ctx.ask(ctx.frames([i * 0.1 for i in range(40)]))  # over the budget of 32 frames: refused
    except SDKError:
        pass
    raise SDKError("a later bug, raised as an SDK error")
'''


@pytest.mark.parametrize("refusal", ["none", "invalid"])
def test_a_harness_that_raises_budget_exceeded_itself_is_its_crash(refusal: str, tmp_path: Path) -> None:
    """Before: the bootstrap reported any ``BudgetExceeded`` as ``budget`` (not the harness's fault: validation let
    a candidate that answers nothing through), whether or not the parent had refused a request for its budget."""
    from tests.test_hostile_code import run_source

    video = make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48)
    source = RAISES_BUDGET_ITSELF if refusal == "invalid" else RAISES_BUDGET_ITSELF.replace(
        "ctx.frames([1.0], max_side=3)", "pass")
    out, _ = run_source(source, str(video), tmp_path)
    assert (out.outcome, out.error_kind) == ("error", "crash"), (out.error_kind, out.error)
    assert "raised BudgetExceeded itself" in (out.error or "") and "I am not broken" in (out.error or "")


def test_an_sdk_error_after_a_budget_refusal_is_still_the_budgets(tmp_path: Path) -> None:
    """The parent did refuse a request of this task for its budget, so the failure that follows is ``budget``."""
    from tests.test_hostile_code import run_source

    video = make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48)
    out, _ = run_source(REFUSED_FOR_ITS_BUDGET, str(video), tmp_path)
    assert (out.outcome, out.error_kind) == ("error", "budget"), (out.error_kind, out.error)
