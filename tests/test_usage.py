"""One definition of cost: the gate, the budgets, the status line, the editor's view and stored results agree."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_type_hints

import pytest
from pydantic import ValidationError

from videvolve.editing.workspace import TraceItem, write_trace
from videvolve.evaluation.results import TaskResult, read_result, result_path
from videvolve.loop.state import State
from videvolve.nodes.common import spent
from videvolve.nodes.record import stop_reason
from videvolve.rundir import RunDir
from videvolve.search.gate import aggregate
from videvolve.tasks import Task
from videvolve.usage import VISUAL_TOKENS, CostMeasure, Spend, TaskUsage, add_spend

USAGE = {"frames": 6, "image_tokens": 100, "video_tokens": 30, "ocr_tokens": 20, "transcript_tokens": 50,
         "requests": 4, "model_calls": 3, "cache_hits": 1}
VISUAL = 100 + 30 + 20  # OCR reads images: visual cost; transcript text is not


def _task() -> Task:
    return Task(id="t1", video_id="v", video="v.mp4", kind="mcq", question="which?", options=["a", "b"], answer="A",
                split="train")


def _result(**usage: Any) -> TaskResult:
    return TaskResult(task_id="t1", harness_id="h", kind="mcq", outcome="ok", score=1.0, usage=usage or USAGE)


def _stop(tmp_path: Path, state: dict[str, Any], **limits: Any) -> str | None:
    stop = SimpleNamespace(**{"iterations": 99, "hours": None, "max_calls": None, "max_visual_tokens": None, **limits})
    ctx = SimpleNamespace(stop=stop)
    return stop_reason(SimpleNamespace(ctx=ctx, dir=RunDir(tmp_path)), state, 1)  # type: ignore[arg-type]


def test_ocr_and_transcript_tokens_count_the_same_everywhere(tmp_path: Path) -> None:
    r = _result()
    # the gate
    assert VISUAL_TOKENS.of(r) == VISUAL
    assert CostMeasure(metric="visual_tokens+text", text_weight=0.5).of(r) == VISUAL + 25
    assert aggregate([r], VISUAL_TOKENS) == (1.0, VISUAL)
    # the budgets: what the nodes add to the state, and --max-visual-tokens / --max-calls on it
    state = {"spent": add_spend(None, spent([r]))}
    totals = Spend.from_state(state["spent"])
    assert (totals.visual_tokens, totals.transcript_tokens, totals.model_calls) == (VISUAL, 50, 3)
    assert _stop(tmp_path, state, max_visual_tokens=VISUAL) == f"--max-visual-tokens {VISUAL}"
    assert _stop(tmp_path, state, max_visual_tokens=VISUAL + 1) is None
    assert _stop(tmp_path, state, max_calls=3) == "--max-calls 3"
    # the status line
    assert f"{VISUAL} visual tokens, 50 transcript tokens" in totals.line()
    assert totals.line().startswith("3 model calls paid for, ")  # a run served from the cache: "0 ... paid for"
    assert "response cache count too" in totals.line()
    # the editor's workspace (what it reads of a parent's result)
    line = write_trace(tmp_path / "trace", TraceItem(_task(), r, []), max_images=0)
    assert line["visual_tokens"] == VISUAL == json.loads((tmp_path / "trace" / "task.json").read_text())[
        "visual_tokens"]


def test_spend_adds_up_as_the_state_reducer() -> None:
    hint = get_type_hints(State, include_extras=True)["spent"]
    assert hint.__metadata__ == (add_spend,)
    a = Spend(model_calls=2, visual_tokens=10)
    b = Spend.of_model("editor", {"calls": 5, "cache_hits": 2})
    assert a + b == Spend(model_calls=5, visual_tokens=10, editor_calls=5, editor_cache_hits=2)
    assert add_spend(a.to_state(), b.to_state()) == (a + b).to_state()
    assert add_spend({}, {}) == {} and Spend.total([]) == Spend()
    # a checkpoint written before the model: floats, and a key this version no longer knows
    old = {"model_calls": 7.0, "visual_tokens": 120.0, "editor_trial_tasks": 2.0, "retired": 1.0}
    assert Spend.from_state(old) == Spend(model_calls=7, visual_tokens=120, editor_trial_tasks=2)


def test_a_result_stored_before_requests_were_counted_still_loads(tmp_path: Path) -> None:
    """Then ``model_calls`` counted every request, cache hits included; now those are ``requests``."""
    old = {"task_id": "t1", "harness_id": "h", "split": "train", "kind": "mcq", "outcome": "ok", "score": 1.0,
           "usage": {"frames": 8, "image_tokens": 500, "video_tokens": 0, "cumulative_tokens": 900,
                     "reported_prompt_tokens": 0, "model_calls": 3, "cache_hits": 1, "tool_calls": 2,
                     "observed_times": [1.5, 3.0]}}
    path = result_path(tmp_path, "t1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    result = read_result(tmp_path, "t1")
    assert result is not None
    assert (result.usage.requests, result.usage.model_calls, result.usage.cache_hits) == (3, 2, 1)
    assert result.frames == 8 and result.usage.observed_times == [1.5, 3.0]
    # today's form is read as written
    assert TaskUsage.model_validate(USAGE).model_calls == 3


def test_an_unknown_cost_metric_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown cost metric 'tokens'; use one of visual_tokens, frames, "
                                              "visual_tokens\\+text"):
        CostMeasure.model_validate({"metric": "tokens"})
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        CostMeasure(metric="visual_tokens+text", text_weight=-1.0)


def test_a_cost_measure_prices_each_metric_and_says_what_it_counts() -> None:
    """One value, the metric and a transcript token's weight: the same numbers from a usage or a result carrying it."""
    usage = TaskUsage(frames=3, image_tokens=100, video_tokens=20, ocr_tokens=5, transcript_tokens=10)
    result = TaskResult(task_id="t", harness_id="h", kind="mcq", outcome="ok", score=1.0, usage=usage)
    text = CostMeasure(metric="visual_tokens+text", text_weight=0.5)
    for measure, price, label in ((CostMeasure(), 125.0, "visual tokens"),
                                  (CostMeasure(metric="frames", text_weight=7.0), 3.0, "frames"),
                                  (text, 130.0, "visual tokens + 0.5 x text tokens"),
                                  (CostMeasure(metric="visual_tokens+text"), 135.0,
                                   "visual tokens + 1.0 x text tokens")):
        assert measure.of(usage) == measure.of(result) == price
        assert measure.label == str(measure) == label
    assert CostMeasure() == VISUAL_TOKENS and hash(text) == hash(text.model_copy())
    with pytest.raises(ValidationError):
        text.text_weight = 2.0  # type: ignore[misc]  # frozen: one value, shared


def test_the_gate_settings_give_their_cost_measure() -> None:
    from videvolve.loop.context import Context, GateSettings

    assert GateSettings().cost_measure == VISUAL_TOKENS
    gate = GateSettings(cost_metric="visual_tokens+text", text_token_weight=0.25)
    assert gate.cost_measure == CostMeasure(metric="visual_tokens+text", text_weight=0.25)
    flat = Context.model_validate({"run_dir": "r", "run_id": "r", "tasks": "t.jsonl", "cost_metric": "frames",
                                   "text_token_weight": 2.0})  # a settings file of the flat form
    assert flat.gate.cost_measure == CostMeasure(metric="frames", text_weight=2.0)


def test_every_cost_metric_the_gate_takes_is_priced_and_described() -> None:
    """The metrics were listed twice (``usage.COST_METRICS`` and ``GateSettings.cost_metric``'s Literal); both now
    come from ``usage.CostMetric``, and each is priced and told to an editor in words of its own."""
    from typing import get_args

    from videvolve.loop.context import GateSettings
    from videvolve.search.gate import rule_text
    from videvolve.usage import COST_METRICS, CostMetric

    assert get_args(GateSettings.model_fields["cost_metric"].annotation) == COST_METRICS == get_args(CostMetric)
    usage = TaskUsage(frames=3, image_tokens=100, transcript_tokens=10)
    assert [CostMeasure.model_validate({"metric": m}).of(usage) for m in COST_METRICS] == [100.0, 3.0, 110.0]
    for metric in COST_METRICS:
        measure = GateSettings(cost_metric=metric).cost_measure  # accepted
        assert f"(C = {metric})" not in rule_text(0.1, 0.2, 0.01, measure)  # words, not the bare name


def test_task_usages_add() -> None:
    total = TaskUsage.model_validate(USAGE) + TaskUsage(frames=1, ocr_tokens=5, observed_times=[2.0],
                                                        client_s={"decode": 0.5})
    assert (total.frames, total.visual_tokens, total.requests) == (7, VISUAL + 5, 4)
    assert total.observed_times == [2.0] and total.client_s == {"decode": 0.5}


def test_every_figure_the_meter_reports_is_kept_with_the_result() -> None:
    """A task's result keeps its meter's figures as a ``TaskUsage``, which ignores unknown keys: a counter added to
    the meter for a new SDK service, and not to ``TaskUsage``, would be dropped without a word."""
    from videvolve.skill_library.meter import Meter

    assert set(Meter().to_dict()) == set(TaskUsage.model_fields)  # and no field of a result the meter never fills
