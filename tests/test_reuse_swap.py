"""A result is stored under the checkpoint that answered it: a server restarted mid-run with another checkpoint under
the same served name does not leave the new checkpoint's answers keyed as the old one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.models import context
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.skill_library.harness import load_harness
from videvolve.testing import serve_app

ONE_AT_A_TIME = RuntimeSettings(concurrency=1, warm_sandboxes=False)


@pytest.mark.slow
def test_answers_of_a_checkpoint_swapped_in_mid_run_are_not_stored_as_the_old_ones(small_world, seed: Path,
                                                                                  tmp_path: Path, monkeypatch):
    """``vllm serve /models/ckpt-a --served-model-name qwen`` is restarted with ckpt-b after the first of two tasks,
    behind an overnight run that keeps its client (it asks GET /v1/models again: here at every request). The second
    task is ckpt-b's answer: against ckpt-a it is run again, not reused as ckpt-a's."""
    monkeypatch.setattr(context, "RECHECK_S", 0.0)  # what the endpoint serves is asked again at every request
    harness = load_harness(seed)
    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"

    def against(checkpoint: str, swap_to: str | None = None) -> tuple[list[TaskResult], int]:
        mimic = MimicSettings(checkpoint=checkpoint)
        app = create_app("qwen", mimic=mimic)

        def swap(result: TaskResult) -> None:  # the server restarted with another checkpoint under the same name
            if swap_to is not None:
                mimic.checkpoint = swap_to

        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            results = solve_tasks(harness, tasks, vlm, cost_model("qwen2.5-vl"), ONE_AT_A_TIME, out,
                                  on_result=swap)
            return results, int(app.state.stats["served"])

    first, _ = against("/models/ckpt-a", swap_to="/models/ckpt-b")
    assert [r.outcome for r in first] == ["ok", "ok"]
    _, served = against("/models/ckpt-a")
    assert served > 0  # main: 0, ckpt-b's answer to the second task reused as ckpt-a's
    _, served = against("/models/ckpt-a")
    assert served == 0  # ckpt-a's own answers are reused



def test_other_weights_under_the_same_name_and_path_are_told_apart_by_the_model_revision(small_world, seed: Path,
                                                                                          tmp_path: Path):
    """vLLM's ``root`` is the checkpoint's path: it does not change with ``--revision``, ``--quantization``,
    ``--dtype`` or a checkpoint retrained in place. Two servers of the same name and path answer differently; with
    ``--model-revision`` told, the second's answers come from the second, not from the first's stored results or
    cached replies."""
    from videvolve.models.cache import ResponseCache
    from videvolve.models.sim.canned import CannedVLM

    harness = load_harness(seed)
    tasks = [t for t in small_world.tasks if t.split == "test" and t.kind == "mcq"][:2]
    cache = ResponseCache(tmp_path / "replies.sqlite")

    def answers(reply: str, revision: str) -> tuple[list[str | None], int]:
        app = create_app("qwen", mimic=MimicSettings(checkpoint="/models/qwen"), backend=CannedVLM(reply))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, revision=revision))
            results = solve_tasks(harness, tasks, vlm, cost_model("qwen2.5-vl"), ONE_AT_A_TIME, tmp_path / "e",
                                  cache=cache)
            return [str(r.prediction.answer) if r.prediction else None for r in results], int(app.state.stats["served"])

    assert answers("A", "bf16") == (["A", "A"], 2)
    assert answers("B", "awq") == (["B", "B"], 2)  # without the revision: ["A", "A"] and 0 served
    assert answers("A", "bf16")[1] == 0  # the first weights' own answers are reused
