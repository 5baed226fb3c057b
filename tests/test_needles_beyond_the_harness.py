"""A generated task's needles are in every picture of its video, not only the harness's: the investigator's probes,
the editor's probes, the editor's workspace and the report show the same painted frames the harness was shown.

Before, only ``TaskServices`` in the evaluation painted them: the investigator's dense probe at a missed needle saw
the bare footage and called every such failure ``unresolved`` ("Neither the trace nor a dense full-resolution probe
could see the evidence"), and the workspace and report showed frames without the needle the question is about.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.steps_support import model_call
from videvolve.datasets.synthworld import generate_world
from videvolve.editing.probe import ProbeArgs, run_probe
from videvolve.editing.workspace import _render
from videvolve.evaluation.results import Prediction, TaskResult
from videvolve.investigator.procedure import Investigator
from videvolve.labelfree.generate import GenerateSettings, generate
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.models.sim.perception import perceive
from videvolve.needles.frames import NeedleFrames, PlainFrames, plan_of
from videvolve.report.traces import THUMB_SIDE, _thumbs
from videvolve.skill_library.steps import FrameSpec
from videvolve.tasks import Task


@pytest.fixture(scope="module")
def needle_task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, float, str]:
    """A grounding needle task on real SynthWorld footage (PyAV), a time inside its glyph needle, the glyph's name."""
    root = tmp_path_factory.mktemp("needles_beyond")
    generate_world(root / "world", videos=2, minutes=1.0, seed=11, workers=1)
    report = generate(root / "world" / "videos", GenerateSettings(questions_per_video=8, seed=3), root / "parts",
                      workers=1)
    for task in report.tasks:
        plan = plan_of(task)
        if task.kind != "grounding" or not task.intervals or plan is None:
            continue
        glyph = next((n for n in plan.needles if n.kind == "glyph" and any(
            i.start <= (n.start + n.end) / 2 <= i.end for i in task.intervals)), None)
        if glyph is not None:
            mid = round((glyph.start + glyph.end) / 2, 2)
            native = PlainFrames(task.video).frames([mid], None)[0]
            assert perceive(native.image).glyph == "none"  # the footage alone shows nothing there
            return task, mid, glyph.name
    raise AssertionError("no grounding task about a glyph needle")


def test_the_investigators_dense_probe_sees_the_needle_the_harness_missed(needle_task):
    task, _, _ = needle_task
    missed = TaskResult(task_id=task.id, harness_id="h", split="train", kind="grounding", outcome="ok",
                        prediction=Prediction(task_id=task.id, kind="grounding", answer=[]), score=0.0)
    diagnosis = Investigator(SimVLM(), cost_model("qwen2.5-vl")).diagnose(task, missed, [], "run", 1)
    assert diagnosis.category == "missed_event", diagnosis
    assert any(e.seen == "evidence" for e in diagnosis.evidence)


def test_the_editors_probe_is_shown_and_saves_the_needle(needle_task, tmp_path: Path):
    task, mid, name = needle_task
    args = ProbeArgs(task_id=task.id, times=[mid], question="what is on screen", mode="describe")
    out = run_probe(args, task, SimVLM(), cost_model("qwen2.5-vl"), None, "png", tmp_path)
    assert name in out["reply"], out
    from PIL import Image

    with Image.open(tmp_path / out["images"][0]) as saved:
        assert perceive(saved.convert("RGB")).name == name


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB")))


def test_the_workspace_and_the_report_show_the_frames_the_harness_was_shown(needle_task, tmp_path: Path):
    task, mid, _ = needle_task
    plan = plan_of(task)
    assert plan is not None
    painted = NeedleFrames(task.video, plan)
    (_, image), = _render(task, FrameSpec(kind="frame", times=[mid], max_side=None))
    assert _same(image, painted.frames([mid], None)[0].image)
    images, _ = _thumbs(task, model_call([mid]), "t", tmp_path)
    expected = painted.frames([mid], THUMB_SIDE)[0].image.copy()
    expected.thumbnail((THUMB_SIDE, THUMB_SIDE))
    from PIL import Image

    with Image.open(tmp_path / images[0]["src"]) as shown:
        assert _same(shown, expected)
