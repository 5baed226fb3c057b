"""Errors a person can act on: the real JSON line and column, field errors in plain words."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from videvolve.datasets.loaders import read_json_records
from videvolve.datasets.own import tasks_from_table
from videvolve.errors import TaskFormatError, plain_errors
from videvolve.tasks import Task, read_tasks

GOOD = {"id": "g1", "video_id": "v", "video": "v.mp4", "kind": "grounding", "question": "When does it " + "x" * 350,
        "answer": [[1.0, 2.0]], "duration": 50.0}


def broken_line() -> tuple[str, int]:
    """A record with one comma missing far along the line; the column where json stops."""
    text = json.dumps(GOOD)
    cut = text.index(', "answer"')
    return text[:cut] + text[cut + 1:], cut + 2


def problems_of(fn, *args) -> list[str]:
    with pytest.raises(TaskFormatError) as info:
        fn(*args)
    return info.value.problems


def test_bad_json_line_reports_its_real_line_and_column(tmp_path: Path):
    line, column = broken_line()
    assert column > 350
    jsonl = tmp_path / "tasks.jsonl"
    jsonl.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    expected = f"{jsonl}:3:{column}: not JSON (Expecting ',' delimiter at line 3, column {column})"
    assert problems_of(read_tasks, jsonl) == [expected]
    assert problems_of(read_json_records, jsonl) == [expected]  # `import`'s reader
    assert problems_of(tasks_from_table, jsonl, tmp_path) == [expected]  # `tasks from-csv` on JSONL
    array = tmp_path / "annotations.json"
    array.write_text("[\n" + json.dumps(GOOD) + ",\n" + line + "\n]\n")
    assert problems_of(read_json_records, array) == [
        f"{array}:3:{column}: not JSON (Expecting ',' delimiter at line 3, column {column})"]


@pytest.mark.parametrize(("change", "expected"), [
    ({"answer": [[24.25, 17.0]]}, "answer, item 1: interval start 24.25 is after its end 17.0"),
    ({"evidence": [[1, 2], [5, 3]]}, "evidence, item 2: interval start 5.0 is after its end 3.0"),
    ({"answer": 5}, "answer: Input should be a valid string or a valid list (got 5)"),
    ({"answer": [[1, 2, 3]]}, "answer, item 1: an interval is [start, end], got [1, 2, 3]"),
    ({"answer": [[-1, 2]]}, "answer, item 1, start: Input should be greater than or equal to 0"),
    ({"kind": "foo"}, "kind: Input should be 'mcq' or 'grounding' (got 'foo')"),
    ({"colour": "red"}, "colour: not a known field (check its spelling, or remove it)"),
    ({"id": None}, "id: missing (this field is required)"),
])
def test_field_errors_are_plain_words(change: dict, expected: str):
    data = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ValidationError) as info:
        Task.model_validate(data)
    assert plain_errors(info.value) == [expected]


def test_tasks_file_reports_plain_field_errors(tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**GOOD, "answer": [[24.25, 17.0]]}) + "\n")
    [problem] = problems_of(read_tasks, path)
    assert problem == f"{path}:1: answer, item 1: interval start 24.25 is after its end 17.0"
    assert "function-after" not in problem and "list[" not in problem


READERS: list[Callable[[Path], object]] = [read_tasks, read_json_records,
                                            lambda path: tasks_from_table(path, path.parent)]


@pytest.mark.parametrize("read", READERS, ids=["tasks", "import", "from-csv"])
@pytest.mark.parametrize(("second", "says"), [
    (b'{"id": "caf\xe9"}', "not UTF-8 text (byte 0xe9"),  # a Latin-1 file
    (b'{"meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deep"),
])
def test_a_file_python_cannot_read_as_json_names_the_file_and_line(tmp_path: Path, read, second: bytes, says: str):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + second + b"\n")
    [problem] = problems_of(read, path)
    assert problem.startswith(f"{path}:2: {says}"), problem


@pytest.mark.parametrize("read", READERS[:2], ids=["tasks", "import"])
def test_a_byte_order_mark_and_a_line_separator_inside_a_string_are_read(tmp_path: Path, read):
    path = tmp_path / "tasks.jsonl"  # Windows tools write the mark; json.dumps(ensure_ascii=False) writes U+2028 raw
    records = [{**GOOD, "id": "a", "question": "When\u2028does it\u0085 happen?"}, {**GOOD, "id": "b"}]
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode())
    got = read(path)
    assert [r.id if isinstance(r, Task) else r["id"] for r in got] == ["a", "b"]


def test_questions_rows_of_the_wrong_shape_are_named_by_line(tmp_path: Path, index_video: Path):
    rows = [{"video": index_video.name, "question": "When?", "answer": "[1, 2]"},
            {"video": index_video.name, "question": "When?", "answer": "[[1, [2]]]"},
            {"video": index_video.name, "question": "Which?", "kind": 5, "options": "a|b", "answer": "A"},
            {"video": index_video.name, "question": "When?", "answer": "[" * 5000 + "]" * 5000}]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = problems_of(tasks_from_table, path, index_video.parent)
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:{i}" for i in range(1, 5)], problems
    assert "[start, end]" in problems[0] and "valid number" in problems[1] and "kind" in problems[2], problems
    path.write_text(json.dumps(rows[0]) + "\n[1, 2]\n")
    assert problems_of(tasks_from_table, path, index_video.parent) == [
        f"{path}:2: expected a JSON object, got list"]


def test_questions_ids_are_unique_and_a_row_shorter_or_longer_than_the_header_says_so(tmp_path: Path,
                                                                                       index_video: Path):
    v = index_video.name
    path = tmp_path / "questions.csv"  # saved by Excel: a byte-order mark before the first column's name
    path.write_bytes(f"\ufeffid,video,question,answer\nq1,{v},When?,1-2\nq1,{v},Where?,3-4\n,{v},How?,1-2\n"
                     f"index-003,{v},Why?,2-3\nq8,{v}\n".encode())
    assert problems_of(tasks_from_table, path, index_video.parent) == [
        f"{path}:3: duplicate id 'q1' (first on line 2): give each question its own id",
        f"{path}:5: duplicate id 'index-003' (first on line 4): give each question its own id",
        f"{path}:6: no 'question' (the row has fewer cells than the header)"]
    path.write_text(f"video,question,answer\n{v},When?,1-2\n{v},Who?,1-2,3-4\n")
    assert problems_of(tasks_from_table, path, index_video.parent) == [
        f"{path}:3: 4 cells, but the header names 3 columns (quote a cell that holds a comma)"]
