"""The investigator reads as well as looks: transcript_unused, and the editor's operator that switches reading on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.steps_support import model_call
from videvolve.editing import EditorInput, HeuristicEditor, read_files
from videvolve.editing.operators import OPERATORS, config_of
from videvolve.evaluation.results import TaskResult
from videvolve.investigator.procedure import Investigator
from videvolve.memory.records import CATEGORIES, Diagnosis
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import seed_path
from videvolve.skill_library.steps import TraceStep, TranscriptRead
from videvolve.tasks import Prediction, Task

SUBS = """WEBVTT

00:00:01.000 --> 00:00:03.000
Good evening and welcome.

00:00:12.000 --> 00:00:14.000
The winner tonight is the blue team, by two points.
"""


def _task(tmp_path: Path, index_video: Path, subs: str = SUBS, **kw: object) -> Task:
    video = tmp_path / "show.mp4"
    shutil.copy(index_video, video)
    (tmp_path / "show.vtt").write_text(subs)
    base = {"id": "q1", "video_id": "show", "video": str(video), "kind": "mcq", "question": "Who won tonight?",
            "options": ["the red team", "the blue team", "nobody"], "answer": "B", "duration": 20.0,
            "evidence": [[11.0, 15.0]]}
    return Task.model_validate({**base, **kw})


def _failed(task: Task) -> TaskResult:
    wrong = "A" if task.kind == "mcq" else []
    return TaskResult(task_id=task.id, harness_id="h", kind=task.kind, outcome="ok", score=0.0, usage={"frames": 2},
                      prediction=Prediction(task_id=task.id, kind=task.kind, answer=wrong))


LOOKED: list[TraceStep] = [model_call([5.0, 15.0])]


def _read(start: float, end: float) -> TranscriptRead:
    return TranscriptRead(start=start, end=end, segments=1, transcript_tokens=10)


def _diagnose(task: Task, trace: list[TraceStep]) -> tuple[Diagnosis, dict[str, int]]:
    inv = Investigator(SimVLM(), cost_model("qwen2.5-vl"), probe_frames=8)
    return inv.diagnose(task, _failed(task), trace, "run", 0), inv.ledger


@pytest.mark.slow
def test_an_answer_said_in_the_window_and_not_read_is_transcript_unused(tmp_path: Path, index_video: Path) -> None:
    assert "transcript_unused" in CATEGORIES
    d, ledger = _diagnose(_task(tmp_path, index_video), LOOKED)
    assert d.category == "transcript_unused" and [e.time for e in d.evidence] == [12.0]
    assert "never read the transcript" in d.hypothesis and ledger["model_calls"] == 0  # no model: plain matching
    read = [*LOOKED, _read(10.0, 16.0)]
    d2, _ = _diagnose(_task(tmp_path, index_video), read)  # it read that window: something else went wrong
    assert d2.category != "transcript_unused"
    elsewhere = [*LOOKED, _read(0.0, 5.0)]
    assert _diagnose(_task(tmp_path, index_video), elsewhere)[0].category == "transcript_unused"


@pytest.mark.slow
def test_not_transcript_unused_when_the_words_do_not_give_the_answer(tmp_path: Path, index_video: Path) -> None:
    both = SUBS.replace("the blue team, by two points.", "the blue team, or maybe the red team.")
    assert _diagnose(_task(tmp_path, index_video, subs=both), LOOKED)[0].category != "transcript_unused"
    task = _task(tmp_path, index_video)
    (tmp_path / "show.vtt").unlink()  # no transcript at all: the perception probes decide, as before
    assert _diagnose(task, LOOKED)[0].category != "transcript_unused"


def test_a_grounding_query_said_in_the_gold_window(tmp_path: Path, index_video: Path) -> None:
    task = _task(tmp_path, index_video, kind="grounding", question="When is the winner announced?",
                 options=None, answer=[[12.0, 14.0]], evidence=[])
    d, _ = _diagnose(task, LOOKED)
    assert d.category == "transcript_unused"


def _editor_input(categories: list[str], files: dict[str, str]) -> EditorInput:
    diagnoses = [Diagnosis(id=f"d{i}", run_id="r", iteration=0, harness_id="h", task_id=f"t{i}", video_id="v",
                           kind="mcq", category=c, hypothesis="h", applies_when="w", preserve="p")
                 for i, c in enumerate(categories)]
    return EditorInput(incumbent="h", files=files, diagnoses=diagnoses, similar=[], tried=[])


def test_the_editor_switches_reading_on_for_transcript_unused() -> None:
    files = read_files(seed_path("uniform"))
    proposal = HeuristicEditor().propose(_editor_input(["transcript_unused", "transcript_unused", "missed_event"],
                                                       files))
    assert proposal is not None and proposal.operator == "read_transcript"
    revised = {p: t for p, t in {**files, **proposal.edits}.items() if t is not None}  # None deletes a file
    assert config_of(revised)["transcript"] == "windows" and config_of(revised)["n_frames"] == 256
    op = OPERATORS["read_transcript"]
    then = op.apply(revised, config_of(revised))
    assert then is not None and config_of({**revised, **then})["transcript"] == "video"
    assert op.apply({**revised, **then}, config_of({**revised, **then})) is None  # reads everything already
    coevo = read_files(seed_path("coevowhen_base"))
    assert op.apply(coevo, config_of(coevo)) is None  # no switch: its model calls read_transcript itself


def test_refinement_and_reading_compose_on_uniform() -> None:
    from videvolve.skill_library.static_check import check_source

    files = read_files(seed_path("uniform"))
    refined = {**files, **(OPERATORS["add_refinement"].apply(files, config_of(files)) or {})}
    assert "_refine(task, ctx" in refined["solver.py"] and "context=_transcript(ctx, task, times))" in \
        refined["solver.py"]
    reading = {**refined, **(OPERATORS["read_transcript"].apply(refined, config_of(refined)) or {})}
    assert config_of(reading)["transcript"] == "windows" and config_of(reading)["refine_share"] == 0.25
    assert check_source(reading["solver.py"], "solver.py") == []
