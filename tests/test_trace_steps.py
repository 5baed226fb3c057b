"""A task's trace steps are typed (skill_library/steps.py) and their lines are as before the models.

``tests/golden/trace_steps.jsonl`` is a trace of every kind of step written by the writer before the models (its
``write(event, **data)`` and ``note(event, **data)``, called as the services called it): the writer now writes those
bytes from the models, and the reader gives them back key for key.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from videvolve.errors import ErrorKind
from videvolve.skill_library import trace as trace_module
from videvolve.skill_library.steps import (
    KINDS,
    CutStep,
    Failed,
    Final,
    FrameSpec,
    InvalidToolCalls,
    LogNote,
    ModelCall,
    ModelError,
    NotesCapped,
    NoticeCheck,
    OcrRead,
    Refused,
    RequestError,
    Result,
    SheetSpec,
    ToolNote,
    TraceCapped,
    TraceStep,
    TranscriptRead,
    TranscriptSearch,
    UnknownStep,
    events_of,
    parse_step,
)
from videvolve.skill_library.trace import MAX_LINE_BYTES, TraceWriter, iter_steps, read_steps

GOLDEN = Path(__file__).with_name("golden") / "trace_steps.jsonl"

SAMPLES: list[TraceStep] = [
    ModelCall(event="ask:answer", observed_times=[12.0, 30.5],
              observations=[FrameSpec(kind="frame", times=[12.0], max_side=None),
                            SheetSpec(times=[30.5], cell_width=160, cols=3)],
              new_frames=2, image_tokens=512, video_tokens=0, prompt_tokens=700, reported_prompt_tokens=None,
              cached=False, reply="B", tool_calls=[], wall_s=0.0123),
    ModelCall(event="chat", observed_times=[1.0, 1.5], observations=[FrameSpec(kind="clip", times=[1.0, 1.5],
                                                                               max_side=336)],
              new_frames=0, image_tokens=0, video_tokens=144, prompt_tokens=300, reported_prompt_tokens=290,
              cached=True, reply="", tool_calls=["look"], wall_s=0.5),
    NoticeCheck(observed_times=[15.0], error="MediaError: the task's video cannot be read"),
    NoticeCheck(observed_times=[15.0], reply="a red star"),
    Refused(event="budget", requested=3, used=8, budget=8),
    Refused(event="invalid", error="this sheet would decode 99 pixels (cap 10)", used=0, budget=None),
    ModelError(error="400: the prompt is too long"),
    InvalidToolCalls(calls=[{"name": "look", "args": "{", "id": "c1", "error": "bad JSON"}], reply="calling"),
    RequestError(op="ocr", error="RuntimeError: boom"),
    TranscriptRead(start=0.0, end=None, segments=2, transcript_tokens=14),
    TranscriptSearch(text="goal", hits=1, transcript_tokens=21),
    OcrRead(observed_times=[4.0], new_frames=1, ocr_tokens=256, text=["EXIT", "42"]),
    LogNote(message="looked twice", data={"times": [1.0, 2.0]}),
    ToolNote(tool="zoom", params={"factor": 2}),
    Final(answer="B", parsed=True),
    Failed(kind=ErrorKind.CRASH, error="the harness process exited with code 1 without an answer."),
    Result(outcome="error", error_kind="crash", score=0.0, frames=3),
    NotesCapped(error="more than 1000 log or tool notes; later ones dropped"),
    TraceCapped(error="this task's trace reached 8,388,608 bytes; later steps are dropped"),
    CutStep(event="chat", cut="a step of 70,000 bytes (cap 65,536)"),
]
"""The golden trace's steps, as the services build them now."""


def write(path: Path, steps: list[TraceStep]) -> TraceWriter:
    writer = TraceWriter(path)
    for step in steps:
        if isinstance(step, LogNote | ToolNote):
            writer.note(step)
        else:
            writer.write(step)
    return writer


def test_every_kind_has_a_sample_and_an_event_of_its_own() -> None:
    assert {type(s) for s in SAMPLES} == {*KINDS, CutStep}
    events = [e for kind in KINDS for e in events_of(kind)]
    assert len(events) == len(set(events))


def test_the_writer_writes_the_lines_the_writer_before_the_models_wrote(tmp_path: Path) -> None:
    write(tmp_path / "t.jsonl", SAMPLES)
    assert (tmp_path / "t.jsonl").read_text(encoding="utf-8") == GOLDEN.read_text(encoding="utf-8")


def test_each_kind_round_trips_through_a_trace_file(tmp_path: Path) -> None:
    write(tmp_path / "t.jsonl", SAMPLES)
    got = read_steps(tmp_path / "t.jsonl")
    assert [type(s) for s in got] == [type(s) for s in SAMPLES]
    assert got == [s.model_copy(update={"step": n}) for n, s in enumerate(SAMPLES, 1)]


def test_a_trace_in_the_current_format_reads_key_for_key() -> None:
    lines = GOLDEN.read_text(encoding="utf-8").splitlines(keepends=True)
    steps = read_steps(GOLDEN)
    assert len(steps) == len(lines) and not [s for s in steps if isinstance(s, UnknownStep)]
    for step, line in zip(steps, lines, strict=True):
        assert list(step.record().items()) == list(json.loads(line).items())  # the keys in their order, and values
        assert step.line() == line
    call, sheet = steps[0], steps[0].observations[1]  # type: ignore[attr-defined]
    assert isinstance(call, ModelCall) and call.step == 1 and call.reported_prompt_tokens is None
    assert isinstance(sheet, SheetSpec) and (sheet.cols, sheet.columns) == (3, 3)
    failed = steps[15]
    assert isinstance(failed, Failed) and failed.kind is ErrorKind.CRASH


def test_a_sheet_of_a_trace_from_before_its_columns_were_kept_reads_six_wide() -> None:
    line = ('{"step": 1, "event": "ask:match", "observed_times": [2.0], "observations": [{"kind": "sheet", "times": '
            '[2.0], "cell_width": 96}], "new_frames": 1, "image_tokens": 85, "video_tokens": 0, "prompt_tokens": '
            '120, "reported_prompt_tokens": null, "cached": false, "reply": "yes: 2.00", "tool_calls": [], '
            '"wall_s": 0.01}\n')
    step = parse_step(json.loads(line))
    assert isinstance(step, ModelCall)
    [sheet] = step.observations
    assert isinstance(sheet, SheetSpec) and sheet.cols is None and sheet.columns == 6
    assert step.line() == line  # and writes back as it was, without a cols key


def test_a_search_from_before_its_tokens_were_counted_reads_and_writes_back_as_it_was() -> None:
    line = '{"step": 2, "event": "search_transcript", "text": "goal", "hits": 0}\n'
    step = parse_step(json.loads(line))
    assert isinstance(step, TranscriptSearch) and step.transcript_tokens is None and step.line() == line


def test_an_unknown_kind_and_a_step_that_does_not_fit_its_kind_are_kept_with_their_keys(
        caplog: pytest.LogCaptureFixture) -> None:
    unknown = {"step": 3, "event": "zoom", "factor": 2, "where": [1.0]}
    unfit = {"step": 4, "event": "final", "answer": "A"}  # no parsed
    strange_kind = {"step": 5, "event": "error", "kind": "gremlins", "error": "?"}
    with caplog.at_level(logging.WARNING, logger="videvolve.skill_library.steps"):
        steps = [parse_step(d) for d in (unknown, unfit, strange_kind)]
    assert all(isinstance(s, UnknownStep) for s in steps)
    assert [s.record() for s in steps] == [unknown, unfit, strange_kind]
    assert steps[0].model_extra == {"factor": 2, "where": [1.0]}
    assert "a final step this release cannot read" in caplog.text and "parsed" in caplog.text
    assert "zoom" not in caplog.text  # an unknown kind is another release's, not damage


def test_the_reader_leaves_out_what_is_no_step_and_stops_at_its_byte_limit(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    over_long = b"x" * (MAX_LINE_BYTES + 1) + b'{"step": 7, "event": "smuggled"}\n'  # its tail is no line of its own
    path.write_bytes(b'{"step": 1, "event": "a"}\n' + over_long + b"[1]\nnot json\n\n"
                     + b'{"step": 2}\n{"step": "two", "event": "b"}\n' + b"[" * 5000 + b"\n"
                     + b'{"event": "c"}\n' + Final(step=9, answer="A", parsed=True).line().encode())
    steps = read_steps(path)
    assert [(type(s), s.step, s.event) for s in steps] == [(UnknownStep, 1, "a"), (UnknownStep, 0, "c"),
                                                           (Final, 9, "final")]
    assert read_steps(tmp_path / "missing.jsonl") == []
    assert [s.event for s in iter_steps(path, max_bytes=30)] == ["a"]  # the first line's 26 bytes, then stop


def test_an_over_long_step_is_cut_to_its_event(tmp_path: Path) -> None:
    long = ModelError(error="e" * MAX_LINE_BYTES)
    write(tmp_path / "t.jsonl", [LogNote(message="x", data="y" * 10), long])
    size = len(long.model_copy(update={"step": 2}).line())
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    cut = f"a step of {size:,} bytes (cap {MAX_LINE_BYTES:,})"
    assert json.loads(lines[1]) == {"step": 2, "event": "model_error", "cut": cut}
    assert read_steps(tmp_path / "t.jsonl") == [LogNote(step=1, message="x", data="y" * 10),
                                                CutStep(step=2, event="model_error", cut=cut)]


def test_past_the_byte_cap_one_line_says_so_and_only_the_task_s_end_is_written(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "MAX_TRACE_BYTES", 1000)
    search = TranscriptSearch(text="x" * 40, hits=0, transcript_tokens=0)
    writer = write(tmp_path / "t.jsonl", [search] * 30 + [Final(answer="B", parsed=True),
                                                          Failed(kind=ErrorKind.TIMEOUT, error="late"), search])
    steps = read_steps(tmp_path / "t.jsonl")
    assert [s.event for s in steps[-3:]] == ["trace_capped", "final", "error"]
    assert isinstance(steps[-3], TraceCapped) and "1,000 bytes" in steps[-3].error
    assert sum(isinstance(s, TraceCapped) for s in steps) == 1 and writer.dropped > 1
    assert steps[-1].step == 32 and (tmp_path / "t.jsonl").stat().st_size < 1000 + 200


def test_notes_are_capped_in_number_and_each_in_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "MAX_NOTES", 3)
    notes: list[TraceStep] = [LogNote(message="m", data={"blob": "y" * 10_000}), ToolNote(tool="t", params=[1])]
    write(tmp_path / "t.jsonl", notes * 3)
    steps = read_steps(tmp_path / "t.jsonl")
    assert [type(s) for s in steps] == [LogNote, ToolNote, LogNote, NotesCapped]
    first = steps[0]
    assert isinstance(first, LogNote) and first.message == "m"
    assert isinstance(first.data, str) and len(first.data) == trace_module.MAX_NOTE_CHARS  # its JSON, cut
    assert first.data.startswith('{"blob": "yyy')
    assert steps[1] == ToolNote(step=2, tool="t", params=[1])


def test_the_listener_is_told_each_numbered_step_and_its_failure_ends_nothing(tmp_path: Path) -> None:
    heard: list[TraceStep] = []
    unwritten = TraceWriter(None, heard.append)
    unwritten.write(Final(answer="A", parsed=True))
    assert heard == [Final(step=1, answer="A", parsed=True)]

    def broken(step: TraceStep) -> None:
        raise RuntimeError("no one listens")

    writer = TraceWriter(tmp_path / "t.jsonl", broken)
    writer.write(ModelError(error="e"))
    writer.seal()
    writer.write(Final(answer="A", parsed=True))  # sealed: nothing more
    assert read_steps(tmp_path / "t.jsonl") == [ModelError(step=1, error="e")]
