"""Teacher labels: `tasks from-csv --teacher` answers the questions a person left without answers.

A SynthWorld's own questions, written to a CSV without their answers, are answered by `scan_refine` on SimVLM; the
world's gold answers are the measure of the teacher (they never reach it: the CSV has none).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from videvolve.cli import main
from videvolve.datasets.own import Question, read_questions
from videvolve.labelfree.labels import label_mix, labels_line
from videvolve.labelfree.teacher import TeacherLabel
from videvolve.metrics import task_score
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.models.sim.vlm import SimVLM
from videvolve.tasks import Prediction, Task, read_tasks
from videvolve.testing import reserved_port, serve_app

VIDEOS = 2
"""Videos of the small world whose questions are taught (16 questions: a few seconds of scan_refine each)."""


def write_questions(tasks: list[Task], path: Path, answers: dict[str, str] | None = None) -> Path:
    """The tasks as a person's CSV: video file name, question, options; an answer only where ``answers`` has one."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "video", "question", "options"] + (["answer"] if answers is not None else []))
        for t in tasks:
            row = [t.id, Path(t.video).name, t.question, "|".join(t.options or [])]
            w.writerow(row + ([(answers or {}).get(t.id, "")] if answers is not None else []))
    return path


@pytest.fixture(scope="module")
def world_questions(small_world) -> list[Task]:
    videos = sorted({t.video_id for t in small_world.tasks})[:VIDEOS]
    return [t for t in small_world.tasks if t.video_id in videos]


@pytest.fixture()
def count_calls(monkeypatch) -> list[int]:
    """SimVLM's requests, counted."""
    calls: list[int] = []
    real = SimVLM.complete

    def counting(self: SimVLM, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimVLM, "complete", counting)
    return calls


@pytest.fixture(scope="module")
def taught(small_world, world_questions: list[Task], tmp_path_factory) -> tuple[Path, Path]:
    """scan_refine at full budget on the questions (no answer column): the tasks file written, and the CSV."""
    root = tmp_path_factory.mktemp("taught")
    questions = write_questions(world_questions, root / "questions.csv")
    out = root / "tasks.jsonl"
    assert main(["tasks", "from-csv", str(questions), "--videos", str(small_world.root / "videos"),
                 "--out", str(out), "--teacher", "scan_refine", "--no-cache"]) == 0
    return out, questions


def agreement(tasks: list[Task], gold: dict[str, Task], kind: str) -> float:
    """Mean score of the teacher's answers measured against the world's gold answers."""
    return statistics.mean(task_score(gold[t.id], Prediction(task_id=t.id, kind=t.kind, answer=t.answer))
                           for t in tasks if t.kind == kind)


@pytest.mark.slow
def test_every_question_is_labelled_by_the_teacher_and_agrees_with_gold(taught, world_questions: list[Task]):
    out, _ = taught
    tasks = read_tasks(out)
    assert len(tasks) == len(world_questions) == 16
    assert {t.label_source for t in tasks} == {"teacher"}
    gold = {t.id: t for t in world_questions}
    # measured: mcq 7/8, grounding mean IoU 0.91 on these 16 questions (on all 31 of the world: 0.94 and 0.94)
    assert agreement(tasks, gold, "mcq") >= 0.85
    assert agreement(tasks, gold, "grounding") >= 0.8
    labels = [TeacherLabel.model_validate(t.meta["teacher"]) for t in tasks]
    assert {lb.name for lb in labels} == {"scan_refine"} and len({lb.harness for lb in labels}) == 1
    assert all(lb.budget is None and lb.visual_tokens > 0 and lb.frames > 64 for lb in labels)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(x["label_source"] == "teacher" for x in lines)  # written as teacher, never defaulting to gold
    # what `evolve` rests on says so: the teacher's answer is the label, and nothing calls it gold
    for t in tasks:
        t.split = "selection"
    assert labels_line(label_mix(tasks)) == "train: 0 questions, labels: none · selection: 16 questions, " \
                                           "labels: teacher 16"


@pytest.mark.slow
def test_a_rerun_reuses_every_answer_without_asking_the_model(taught, small_world, count_calls, capsys):
    out, questions = taught
    before = out.read_text()
    assert main(["tasks", "from-csv", str(questions), "--videos", str(small_world.root / "videos"),
                 "--out", str(out), "--teacher", "scan_refine", "--no-cache"]) == 0
    assert count_calls == []
    said = " ".join(capsys.readouterr().out.split())
    assert "16 answer(s) reused" in said
    # the next step it names deals no test split of teacher labels (`tasks split`'s default fractions would)
    assert f"next: `videvolve tasks split {out} --fractions train=0.7,selection=0.3`" in said, said
    assert out.read_text() == before


@pytest.mark.slow
def test_the_teacher_budget_caps_the_frames(taught, small_world, world_questions: list[Task], tmp_path: Path):
    out, _ = taught
    full = {t.id: t.meta["teacher"]["frames"] for t in read_tasks(out)}
    few = world_questions[:3]
    capped = tmp_path / "capped.jsonl"
    assert main(["tasks", "from-csv", str(write_questions(few, tmp_path / "q.csv")), "--videos",
                 str(small_world.root / "videos"), "--out", str(capped), "--teacher", "scan_refine",
                 "--teacher-budget", "8", "--no-cache"]) == 0
    tasks = read_tasks(capped)
    assert [t.id for t in tasks] == [t.id for t in few]
    assert all(0 < t.meta["teacher"]["frames"] <= 8 < full[t.id] and t.meta["teacher"]["budget"] == 8
               for t in tasks)


def test_without_answers_and_without_a_teacher_the_error_says_what_to_do(small_world, world_questions, tmp_path,
                                                                         capsys):
    questions = write_questions(world_questions[:3], tmp_path / "q.csv")
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "from-csv", str(questions), "--videos", str(small_world.root / "videos"),
                 "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "3 question(s) have no answer (line(s) 2, 3, 4)" in err and "--teacher scan_refine" in err
    assert not out.exists()


def test_answered_rows_stay_gold_and_unanswered_rows_are_questions_not_tasks(small_world, world_questions,
                                                                            tmp_path):
    mcq = [t for t in world_questions if t.kind == "mcq"][:2]
    grounding = [t for t in world_questions if t.kind == "grounding"][:2]
    answers = {mcq[0].id: str(mcq[0].answer), grounding[0].id: "none"}  # the others left empty
    table = read_questions(write_questions(mcq + grounding, tmp_path / "q.csv", answers), small_world.root / "videos")
    assert [(t.id, t.label_source) for t in table.tasks] == [(mcq[0].id, "gold"), (grounding[0].id, "gold")]
    assert table.tasks[1].answer == []  # `none`: the event never happens (an empty cell is no answer)
    assert [q.id for q in table.unanswered] == [mcq[1].id, grounding[1].id]
    assert all(isinstance(q, Question) and not hasattr(q, "answer") for q in table.unanswered)


ERRING_HARNESS = '''
def solve(task, ctx):
    if "star" in task.question:
        raise RuntimeError("the teacher fell over")
    if task.options:
        return {"answer": "I cannot tell", "raw": "I cannot tell"}
    return {"answer": [[1.0, 2.0]], "raw": "1-2 s"}
'''


def test_questions_the_teacher_fails_on_are_left_out_and_named(small_world, world_questions, tmp_path, capsys):
    harness = tmp_path / "erring"
    harness.mkdir()
    (harness / "solver.py").write_text(ERRING_HARNESS)
    (harness / "manifest.json").write_text(json.dumps({"name": "erring", "task_kinds": ["mcq", "grounding"],
                                                       "entry": "solver.py"}))
    (harness / "SKILL.md").write_text("# erring\n")
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "from-csv", str(write_questions(world_questions, tmp_path / "q.csv")), "--videos",
                 str(small_world.root / "videos"), "--out", str(out), "--teacher", str(harness)]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    star = [t for t in world_questions if "star" in t.question]
    mcq = [t for t in world_questions if t.options and "star" not in t.question]
    kept = [t for t in world_questions if not t.options and "star" not in t.question]
    assert star and mcq and kept
    for t in star:
        assert f"({t.id}): the teacher's crash: RuntimeError: the teacher fell over" in err
    for t in mcq:
        assert f"({t.id}): the teacher's parse: no option letter in the answer 'I cannot tell'" in err
    assert f"{len(star) + len(mcq)} left out" in captured.out
    tasks = read_tasks(out)
    assert [t.id for t in tasks] == [t.id for t in kept]
    assert all(t.label_source == "teacher" and [i.pair() for i in t.intervals] == [(1.0, 2.0)]
               for t in tasks)


@pytest.fixture()
def dead_endpoint() -> Iterator[str]:
    with reserved_port() as port:  # nothing listens there, and no other worker's server can
        yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.slow
def test_through_an_openai_server_an_outage_stops_cleanly_and_a_rerun_resumes(small_world, world_questions,
                                                                              dead_endpoint, tmp_path, capsys):
    questions = write_questions(world_questions[:2], tmp_path / "q.csv")
    out = tmp_path / "t.jsonl"

    def run(base: str) -> int:
        return main(["tasks", "from-csv", str(questions), "--videos", str(small_world.root / "videos"), "--out",
                     str(out), "--teacher", "scan_refine", "--teacher-budget", "8", "--backend", "openai",
                     "--base-url", base, "--model", "simvlm", "--max-retries", "0", "--no-cache"])

    assert run(dead_endpoint) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "teaching stopped" in err and "rerun the same command to continue" in err and not out.exists()
    # served under its own name (`vllm serve simvlm`): a stored answer's checkpoint is its name, so a rerun needs no
    # endpoint to know its answers are this model's (serve-sim's own root names SimVLM's revision: that one is asked)
    with serve_app(create_app("simvlm", mimic=MimicSettings(checkpoint="simvlm"))) as base:
        assert run(base) == 0
    tasks = read_tasks(out)
    assert len(tasks) == 2 and {t.label_source for t in tasks} == {"teacher"}
    assert all(0 < t.meta["teacher"]["frames"] <= 8 for t in tasks)
    capsys.readouterr()
    assert run(dead_endpoint) == 0  # every answer is stored: the endpoint is not needed again
    assert "2 answer(s) reused" in capsys.readouterr().out


@pytest.mark.slow
def test_the_gate_line_the_report_and_diagnoses_say_which_labels_decisions_rest_on(taught, tmp_path, capsys):
    from videvolve.cli.evolve_cmd import _iteration_line
    from videvolve.evaluation.results import TaskResult
    from videvolve.investigator.procedure import new_diagnosis
    from videvolve.memory import ChromaStore, HashingEmbedder
    from videvolve.report import build_report
    from videvolve.search.history import GateEntry
    from videvolve.tasks import write_tasks

    out, _ = taught
    tasks = [t.model_copy(update={"split": "train" if i < 10 else "selection"}) for i, t in enumerate(read_tasks(out))]
    tasks.append(tasks[0].model_copy(update={"id": "gold-1", "label_source": "gold", "split": "selection"}))
    mixes = label_mix(tasks)
    assert labels_line(mixes) == "train: 10 questions, labels: teacher 10 · selection: 7 questions, labels: " \
                                 "teacher 6, gold 1"
    entry = GateEntry(iteration=0, parent="a", candidate="b", operator="sparser_scan", decision="rejected",
                      reason="no significant gain")
    _iteration_line({"iteration": 1, "history": [entry.model_dump()]}, mixes[1])
    assert capsys.readouterr().out.strip().endswith(
        "no significant gain (gate on selection: 7 questions, labels: teacher 6, gold 1)")

    run = tmp_path / "run"
    run.mkdir()
    path = write_tasks(tasks, tmp_path / "tasks.jsonl")
    (run / "settings.json").write_text(json.dumps({
        "run_id": "r", "tasks": str(path), "memory": str(tmp_path / "memory"), "seed_harness": "scan_refine",
        "model": {"model": "simvlm", "backend": "sim"}, "editor": "heuristic", "cost_metric": "visual_tokens"}))
    html = " ".join(build_report(run).read_text().split())
    assert "<tr><td>train</td><td>10</td><td>teacher 10</td></tr>" in html
    assert "<tr><td>selection</td><td>7</td><td>teacher 6, gold 1</td></tr>" in html
    assert "not all of them are a person's" in html

    result = TaskResult(task_id=tasks[0].id, harness_id="h", kind=tasks[0].kind, outcome="ok", score=0.0)
    diagnosis = new_diagnosis(tasks[0], result, "r", 0, category="missed_event", hypothesis="went unseen",
                              applies_when="short events", preserve="-")
    assert diagnosis.label_source == "teacher"
    ChromaStore(tmp_path / "memory", HashingEmbedder()).put([diagnosis])
    assert main(["diagnoses", "list", "--memory", str(tmp_path / "memory")]) == 0
    listed = capsys.readouterr().out
    assert "label" in listed and "teacher" in listed
    assert main(["diagnoses", "show", diagnosis.id, "--memory", str(tmp_path / "memory")]) == 0
    assert "label: teacher" in capsys.readouterr().out


@pytest.mark.parametrize(("source", "key", "said"), [
    ("gold", "gold", "a person's answer"),
    ("teacher", "answer (teacher)", "not a person's"),
    ("needles", "answer (needles)", "inserted into the frames"),
    ("perceived", "answer (perceived)", "not a person's answer"),
])
def test_the_editor_is_told_where_a_known_answer_came_from(tmp_path: Path, source: str, key: str, said: str):
    from videvolve.editing.workspace import TraceItem, write_trace

    task = Task(id="q1", video_id="v", video=str(tmp_path / "v.mp4"), kind="mcq", question="Which colour?",
                options=["red", "blue"], answer="B", label_source=source)
    info = write_trace(tmp_path / "trace", TraceItem(task, None, []), max_images=0)
    stored = json.loads((tmp_path / "trace" / "task.json").read_text())
    assert stored[key] == info[key] == "B (blue)" and said in stored["answer_from"]
    assert ("gold" in stored) == (source == "gold")  # only a person's answer is called gold
    readme = (tmp_path / "trace" / "README.md").read_text()
    assert f"{key}: B (blue)" in readme and said in readme


@pytest.mark.slow
def test_evolve_says_what_the_teacher_paid_and_what_a_gain_may_cost(taught, tmp_path):
    """On teacher labels: the teacher's cost per question, and the budget a gain may spend (or that it has none)."""
    from io import StringIO

    from rich.console import Console

    from videvolve.cli.evolve_cmd import _teacher_note
    from videvolve.labelfree.teacher import teacher_cost
    from videvolve.loop.context import Context, GateSettings

    out, _ = taught
    tasks = [t.model_copy(update={"split": "train"}) for t in read_tasks(out)]
    spent = teacher_cost(tasks)
    paid = [TeacherLabel.model_validate(t.meta["teacher"]).visual_tokens for t in tasks]
    assert spent is not None and spent == pytest.approx(statistics.mean(paid))
    assert teacher_cost([t.model_copy(update={"label_source": "gold", "meta": {}}) for t in tasks]) is None
    for ceiling, said in ((None, f"--cost-ceiling {spent / 2:.0f}: half the teacher's"),
                          (spent / 2, "(0.50x the teacher's)")):
        text = StringIO()
        ctx = Context(run_dir=str(tmp_path), run_id="r", tasks="t.jsonl", gate=GateSettings(cost_ceiling=ceiling))
        _teacher_note(tasks, ctx, Console(file=text, width=400))
        assert f"the teacher spent {spent:,.0f} visual tokens per question" in text.getvalue()
        assert said in text.getvalue(), text.getvalue()
    frames = teacher_cost(tasks, "frames")  # in the run's cost metric's units
    assert frames == pytest.approx(statistics.mean(TeacherLabel.model_validate(t.meta["teacher"]).frames
                                                   for t in tasks))
    text = StringIO()
    ctx = Context(run_dir=str(tmp_path), run_id="r", tasks="t.jsonl", gate=GateSettings(cost_metric="frames"))
    _teacher_note(tasks, ctx, Console(file=text, width=400))
    assert f"the teacher spent {frames:,.0f} frames per question" in text.getvalue()
