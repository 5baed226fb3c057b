"""Bad input across the command line: one clear line and exit 2, never a traceback, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from videvolve.cli import main

TASK = {"id": "t1", "video_id": "v", "video": "v.mp4", "kind": "mcq", "question": "Which?",
        "options": ["A) a", "B) b"], "answer": "A", "duration": 60.0, "split": "train"}


def one_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``videvolve argv`` in-process; it must exit 2 with one ``error:`` line and no traceback."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "bug in videvolve" not in err and "error:" in err, err
    return " ".join(err.split())


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASK) + "\n")
    return path


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain.mp4"
    path.write_bytes(b"")
    return path


def test_tasks_written_under_a_file_name_the_path(capsys, tasks_file: Path, a_file: Path):
    """A NotADirectoryError escaped write_tasks' own cleanup (`tasks split/import --out FILE/x.jsonl`): exit 70."""
    said = one_error(capsys, "tasks", "split", str(tasks_file), "--out", str(a_file / "x.jsonl"))
    assert f"{a_file / 'x.jsonl'}: part of that path is a file, not a folder" in said
    said = one_error(capsys, "tasks", "split", str(tasks_file), "--out", str(tasks_file.parent))
    assert "a folder is in the way" in said


@pytest.mark.parametrize("under", ["", "sub"])
def test_eval_out_that_is_a_file(capsys, tasks_file: Path, a_file: Path, under: str):
    """`eval --out FILE` (or a folder below a file) raised NotADirectoryError from makedirs: exit 70."""
    out = a_file / under if under else a_file
    said = one_error(capsys, "eval", "--tasks", str(tasks_file), "--split", "train", "--harness", "uniform",
                     "--out", str(out))
    assert f"{a_file} is a file, not a folder" in said
    assert a_file.read_bytes() == b""


@pytest.mark.parametrize(("flags", "named"), [
    (["--minutes", "0"], "--minutes"), (["--minutes", "nan"], "--minutes"), (["--minutes", "inf"], "--minutes"),
    (["--minutes", "-2"], "--minutes"), (["--videos", "0"], "--videos"), (["--questions", "-4"], "--questions"),
    (["--workers", "0"], "--workers"),
])
def test_synth_absurd_numbers(capsys, tmp_path: Path, flags: list[str], named: str):
    """NaN, inf, zero or negative lengths crashed mid-way (ValueError, OverflowError, a missing .part.mp4);
    --videos 0 wrote an empty world."""
    said = one_error(capsys, "synth", str(tmp_path / "w"), "--videos", "1", "--minutes", "1", *flags)
    assert said.startswith(f"error: {named}")
    assert not (tmp_path / "w").exists()


def test_synth_into_a_file(capsys, a_file: Path):
    said = one_error(capsys, "synth", str(a_file), "--videos", "1", "--minutes", "1")
    assert f"{a_file} is a file, not a folder" in said


def test_synth_into_an_existing_world(capsys, tmp_path: Path):
    """A second synth into a world's folder rewrote its tasks.jsonl (and runs that read it) without a word."""
    world = tmp_path / "w"
    (world / "videos").mkdir(parents=True)
    (world / "tasks.jsonl").write_text('{"id": "mine"}\n')
    said = one_error(capsys, "synth", str(world), "--videos", "1", "--minutes", "1")
    assert f"{world} already holds a world" in said and "new folder" in said
    assert (world / "tasks.jsonl").read_text() == '{"id": "mine"}\n'


def test_score_names_which_file_is_missing_or_a_folder(capsys, tmp_path: Path):
    """`score --pred FOLDER` (or a missing --pred) said "annotation file not found", naming the wrong file's role."""
    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"qid": 1, "relevant_windows": [[0, 2]]}\n')
    said = one_error(capsys, "score", "--benchmark", "qvhighlights", "--gt", str(gt), "--pred", str(tmp_path))
    assert said.startswith(f"error: --pred {tmp_path} is a folder")
    said = one_error(capsys, "score", "--benchmark", "qvhighlights", "--gt", str(tmp_path / "no.jsonl"),
                     "--pred", str(gt))
    assert said.startswith(f"error: --gt {tmp_path / 'no.jsonl'}: not found")


def test_eval_names_the_harness_folder_given(capsys, tmp_path: Path):
    """An empty --harness folder was reported by the path of eval's own copy (evals/.../harnesses/e3b0c44298fc)."""
    empty = tmp_path / "mine"
    empty.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "video_id": "v", "video": "v.mp4", "kind": "mcq", "question": "q?",
                                 "options": ["a", "b"], "answer": "A", "duration": 10.0, "split": "test"}) + "\n")
    said = one_error(capsys, "eval", "--harness", str(empty), "--tasks", str(tasks), "--out", str(tmp_path / "o"))
    assert said.startswith(f"error: harness {empty} is not valid: solver.py is missing"), said


@pytest.mark.parametrize("command", [["cache", "info"], ["cache", "clear", "--all"]])
def test_cache_that_is_no_database(capsys, tmp_path: Path, command: list[str]):
    """`--cache` naming a file that is not SQLite raised sqlite3.DatabaseError (exit 70); the file is left alone."""
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a database\n" * 20)
    said = one_error(capsys, *command, "--cache", str(text))
    assert f"cannot open the response cache {text}: file is not a database" in said
    assert text.read_text() == "hello, this is not a database\n" * 20


@pytest.mark.parametrize("settings", ['{"run_id": "x", "memo', "[]", b"\xff\xfe", '{"memory": 3}'])
def test_diagnoses_of_a_half_written_run(capsys, tmp_path: Path, settings: str | bytes):
    """`diagnoses list --run R` read R/settings.json bare: JSONDecodeError, TypeError or UnicodeDecodeError."""
    run = tmp_path / "run"
    run.mkdir()
    target = run / "settings.json"
    target.write_bytes(settings) if isinstance(settings, bytes) else target.write_text(settings)
    said = one_error(capsys, "diagnoses", "list", "--run", str(run))
    assert str(target) in said


@pytest.mark.parametrize("command", [["list"], ["search", "sparse"], ["show", "d1"]])
def test_diagnoses_memory_that_is_a_file(capsys, a_file: Path, command: list[str]):
    """A file as --memory was read as an empty memory: "0 diagnoses", exit 0."""
    said = one_error(capsys, "diagnoses", *command, "--memory", str(a_file))
    assert f"{a_file} is a file, not a memory folder" in said


@pytest.mark.parametrize(("flag", "value", "field"), [
    ("--budget", "-1", "budget"), ("--budget", "0", "budget"), ("--task-timeout", "nan", "wall_seconds"),
    ("--task-timeout", "-1", "wall_seconds"), ("--timeout", "0", "timeout_s"), ("--max-tokens", "-5", "max_tokens"),
    ("--temperature", "nan", "temperature"), ("--memory-bytes", "-1", "memory_bytes"),
    ("--max-retries", "-1", "max_retries"), ("--retry-window", "-1", "retry_window_s"),
])
def test_absurd_model_and_runtime_flags(capsys, tasks_file: Path, tmp_path: Path, flag: str, value: str, field: str):
    """`--budget -1` scored every task 0 as the harness's budget error; `--task-timeout nan` as a timeout (with a
    ValueError); a negative timeout, token cap or retry count was taken as given."""
    said = one_error(capsys, "eval", "--tasks", str(tasks_file), "--split", "train", "--harness", "uniform",
                     "--out", str(tmp_path / "e"), "--no-cache", flag, value)
    assert f"invalid settings in the command line: {field} ({flag}):" in said  # the setting, and the flag that sets it
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize(("flag", "value", "field"), [
    ("--hours", "-1", "stop.hours"), ("--hours", "nan", "stop.hours"), ("--max-calls", "-5", "stop.max_calls"),
    ("--probe-frames", "-1", "investigator.probe_frames"),
    ("--failure-threshold", "nan", "investigator.failure_threshold"),
    ("--editor-timeout", "-1", "editor.timeout"), ("--curtail", "0.3", "gate.curtail"), ("--alpha", "-1", "gate.alpha"),
    ("--beta", "1", "gate.beta"), ("--eps", "-0.1", "gate.eps"),
])
def test_absurd_evolve_flags(capsys, tasks_file: Path, tmp_path: Path, flag: str, value: str, field: str):
    said = one_error(capsys, "evolve", "--tasks", str(tasks_file), "--run", str(tmp_path / "run"), "--dry-run",
                     flag, value)
    assert f"invalid settings in the command line: {field} ({flag}):" in said, said


def test_ask_on_a_video_damaged_midway_names_it(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A video whose header reads but whose frames stop decoding: `ask` said "the harness failed (media): SDKError:
    cannot decode the task's video" (or, by set order, "/dir/the task's video") and exited 1."""
    from tests.conftest import sample

    damaged = tmp_path / "clip.mp4"
    damaged.write_bytes(sample("videos", "decord_corrupted.mp4").read_bytes())
    monkeypatch.chdir(tmp_path)
    said = one_error(capsys, "ask", "clip.mp4", "When does the blue diamond appear?", "--no-cache")
    assert said.startswith("error: cannot decode clip.mp4 at ") and "the harness failed" not in said
    assert "task's video" not in said


def test_ask_against_an_endpoint_that_is_down_exits_3(capsys, index_video: Path):
    """The endpoint, not the input: exit 3 as the docs say (it was 2, "a problem with what you gave")."""
    from videvolve.testing import reserved_port

    with reserved_port() as port:
        code = main(["ask", str(index_video), "When does the blue diamond appear?", "--backend", "openai",
                     "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--no-cache", "--timeout", "1",
                     "--retry-window", "1"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "Traceback" not in err and "error:" in err, err


@pytest.mark.parametrize("command", ["validate", "split"])
def test_an_empty_tasks_file_is_refused_not_valid(capsys, tmp_path: Path, command: str):
    """`tasks validate` said "0 valid tasks" (exit 0) and `tasks split` wrote an empty file."""
    empty = tmp_path / "tasks.jsonl"
    empty.write_text("\n\n")
    said = one_error(capsys, "tasks", command, str(empty))
    assert "holds no tasks" in said and str(empty) in said
    assert not (tmp_path / "tasks.split.jsonl").exists()


def test_a_folder_given_as_the_tasks_file_is_named_a_folder(capsys, tmp_path: Path):
    said = one_error(capsys, "tasks", "validate", str(tmp_path))
    assert "is a folder: give the tasks file" in said


def test_videos_check_takes_one_file(capsys, index_video: Path):
    """`videos check clip.mp4` said "no video files under clip.mp4"."""
    assert main(["videos", "check", str(index_video), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["file"] == str(index_video) and row["status"] == "ok"
