"""What a resumed run reads back without running anything is keyed as what it runs: by the served checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_reuse import still_starting
from videvolve.config import ModelSettings
from videvolve.graph import Context
from videvolve.loop.services import open_run
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.skill_library.harness import copy_harness
from videvolve.testing import serve_app


def test_a_resumed_run_reads_its_stored_results_while_the_endpoint_is_still_starting(
        make_context: Callable[..., Context], seed: Path, tmp_path: Path):
    """``vllm serve /models/ckpt-a --served-model-name qwen``: the run stored its results under ckpt-a, then was
    stopped, and resumes (a fresh process) while the server is still loading. The investigate node, the mcts
    promotion (``beats``) and the mixture read stored results through ``Run.stored``, which keyed them as a model
    served under its own name: every result looked missing, so the failures went undiagnosed and an accepted
    candidate was not promoted, unlike in the uninterrupted run."""
    app = create_app("qwen", mimic=MimicSettings(checkpoint="/models/ckpt-a"))
    with serve_app(app) as base:
        model = ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30)
        ctx = make_context(model=model)
        with open_run(ctx) as first:
            version = copy_harness(seed, first.dir.harnesses).name
            tasks = first.selection[:2]
            made = first.evaluate(version, tasks, "selection")
            assert [r.outcome for r in made] == ["ok", "ok"]
        served = app.state.stats["served"]
        with open_run(ctx) as resumed:  # a fresh process: GET /v1/models not reached at first
            still_starting(resumed.vlm, base)
            found = [resumed.stored(version, t, "selection") for t in tasks]
            keys = [r.produced_by if r else None for r in found]
            assert keys == [r.produced_by for r in made]  # main: the first looked missing (None)
        assert app.state.stats["served"] == served  # nothing was asked of the model again


@pytest.mark.slow
def test_perceived_tasks_made_while_the_endpoint_was_still_starting_name_its_checkpoint(tmp_path: Path):
    """``tasks generate --sources perceived`` against ``vllm serve /models/ckpt-a --served-model-name qwen`` still
    loading: each video's part was stamped with the model as known before the first request (a model served under
    its own name), so a later run against ckpt-b, also still loading, reused ckpt-a's perceived tasks unasked."""
    from videvolve.datasets.synthworld import generate_world
    from videvolve.labelfree.generate import GenerateSettings, Perceiver, generate
    from videvolve.models.cost import cost_model
    from videvolve.models.openai_backend import openai_vlm

    generate_world(tmp_path / "w", videos=1, minutes=0.5, seed=3, workers=1)
    settings = GenerateSettings(sources=("perceived",), questions_per_video=4, perceive_fps=0.5)
    parts = tmp_path / "parts"

    def against(checkpoint: str) -> int:
        app = create_app("qwen", mimic=MimicSettings(checkpoint=checkpoint))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            still_starting(vlm, base)
            report = generate(tmp_path / "w" / "videos", settings, parts,
                              Perceiver(vlm, cost_model("qwen2.5-vl"), None, parts), workers=1)
            assert not report.errors
            return int(app.state.stats["served"])

    assert against("/models/ckpt-a") > 0
    assert against("/models/ckpt-a") == 0  # the same checkpoint: its part is reused
    assert against("/models/ckpt-b") > 0  # main: 0, ckpt-a's perceived tasks taken for ckpt-b's
