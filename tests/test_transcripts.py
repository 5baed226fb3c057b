"""Transcripts as task data: subtitle parsing, where a task's transcript comes from, importers, validation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import sample
from videvolve.cli import main
from videvolve.datasets.benchmarks import import_benchmark
from videvolve.datasets.transcripts import (
    TranscriptFormatError,
    check_transcripts,
    load_transcript,
    parse_subtitles,
    to_vtt,
)
from videvolve.tasks import Task, read_tasks, write_tasks

SRT = """1
00:00:01,000 --> 00:00:03,500
The red car stopped
at the gate.

2
00:00:04,250 --> 00:00:06,000
<i>Frame 4217</i>: EXIT now!

"""
VTT = """WEBVTT
Kind: captions

NOTE written by hand

intro
00:02.000 --> 00:04.000 align:start position:0%
<v Narrator>Welcome to the match.</v>

01:00:05.500 --> 01:00:07.000
The goalkeeper dives.
"""


def test_srt_and_vtt_parse_to_timed_segments(tmp_path: Path) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    t = parse_subtitles(srt)
    assert [(s.start, s.end, s.text) for s in t.segments] == [
        (1.0, 3.5, "The red car stopped at the gate."), (4.25, 6.0, "Frame 4217: EXIT now!")]
    assert [s.line for s in t.segments] == [2, 7]
    vtt = tmp_path / "b.vtt"
    vtt.write_text(VTT)
    v = parse_subtitles(vtt)
    assert [(s.start, s.end, s.text) for s in v.segments] == [(2.0, 4.0, "Welcome to the match."),
                                                               (3605.5, 3607.0, "The goalkeeper dives.")]
    assert [s.text for s in v.window(3000, 3606)] == ["The goalkeeper dives."]
    assert [s.start for s in v.search("GOALKEEPER dives")] == [3605.5]
    assert v.search("goalkeeper-dives!") and not v.search("goal dives") and not v.search("  ")
    again = tmp_path / "c.vtt"
    again.write_text(to_vtt(v.segments))
    assert [(s.start, s.end, s.text) for s in parse_subtitles(again).segments] == \
        [(s.start, s.end, s.text) for s in v.segments]


@pytest.mark.parametrize(("text", "line", "why"), [
    ("1\n00:00:01,000 --> 00:00:03,000\nok\n\n2\n00:00:04,000 -> 00:00:05,000\nbad arrow\n", 5, "timing line"),
    ("1\n00:00:01,000 --> 00:00:03,000\nok\n\n2\n00:00:09,000 --> 00:00:05,000\nbackwards\n", 6, "ends"),
    ("1\n00:00:01,000 --> 00:0x:03,000\nbad digits\n", 2, "cannot read the timing"),
])
def test_a_malformed_srt_names_the_file_and_line(tmp_path: Path, text: str, line: int, why: str) -> None:
    path = tmp_path / "bad.srt"
    path.write_text(text)
    with pytest.raises(TranscriptFormatError) as exc:
        parse_subtitles(path)
    assert f"{path}:{line}:" in str(exc.value) and why in str(exc.value)


def test_a_vtt_without_its_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.vtt"
    path.write_text(SRT)
    with pytest.raises(TranscriptFormatError, match=r"x\.vtt:1: a WebVTT file starts with 'WEBVTT'"):
        parse_subtitles(path)


def _task(tmp_path: Path, **kw: object) -> Task:
    video = tmp_path / "match.mp4"
    video.write_bytes(b"not decoded here")
    base = {"id": "t1", "video_id": "match", "video": str(video), "kind": "mcq", "question": "q?",
            "options": ["a", "b"], "answer": "A", "duration": 60.0}
    return Task.model_validate({**base, **kw})


def test_a_transcript_comes_from_the_field_then_beside_the_video(tmp_path: Path) -> None:
    task = _task(tmp_path)
    assert load_transcript(task) is None
    (tmp_path / "match.srt").write_text(SRT)
    beside = load_transcript(task)
    assert beside is not None and beside.segments[0].text.startswith("The red car")
    named = tmp_path / "other.vtt"
    named.write_text(VTT.replace("01:00:05.500 --> 01:00:07.000", "00:00:05.500 --> 00:00:07.000"))
    field = load_transcript(task.model_copy(update={"transcript": str(named)}))
    assert field is not None and field.segments[0].text == "Welcome to the match."


def test_tasks_files_keep_transcripts_relative_and_validate_checks_them(tmp_path: Path, capsys) -> None:
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "m.srt").write_text(SRT)
    tasks_file = tmp_path / "tasks.jsonl"
    write_tasks([_task(tmp_path, transcript=str(tmp_path / "subs" / "m.srt"), split="train")], tasks_file)
    assert json.loads(tasks_file.read_text())["transcript"] == "subs/m.srt"
    (task,) = read_tasks(tasks_file)
    assert task.transcript == str((tmp_path / "subs" / "m.srt").resolve())
    assert check_transcripts([task]) == []
    assert main(["tasks", "validate", str(tasks_file), "--no-videos"]) == 0
    short = task.model_copy(update={"duration": 4.5})  # the second cue ends at 6.0 s (tolerance 1 s)
    assert check_transcripts([short]) == [
        f"{task.transcript}:7: segment 4.25-6.00 s falls outside the video {task.video} (0-4.50 s)"]
    (tmp_path / "subs" / "m.srt").write_text("1\n00:00:01,000 --> nonsense\nx\n")
    capsys.readouterr()
    assert main(["tasks", "validate", str(tasks_file), "--no-videos"]) == 2
    assert f"{task.transcript}:2: cannot read the timing" in capsys.readouterr().err


def test_videomme_import_attaches_its_srt_subtitles(tmp_path: Path) -> None:
    rows = [{"video_id": "001", "videoID": "fFjv93ACGo8", "duration": "short", "domain": "Knowledge",
             "questions": [{"question_id": "001-1", "task_type": "Counting Problem", "question": "How many?",
                            "options": ["A. 1.", "B. 2.", "C. 3.", "D. 4."], "answer": "C", "response": ""}]},
            {"video_id": "002", "duration": "short", "domain": "Knowledge", "questions": [
                {"question_id": "002-1", "task_type": "OCR Problems", "question": "What is written?",
                 "options": ["A. x.", "B. y.", "C. z.", "D. w."], "answer": "A", "response": ""}]}]
    ann = tmp_path / "videomme.json"
    ann.write_text(json.dumps(rows, indent=1).replace('"response": ""', '"response": "",'))  # trailing commas
    (tmp_path / "subtitle").mkdir()
    (tmp_path / "subtitle" / "fFjv93ACGo8.srt").write_text(SRT)
    tasks = import_benchmark("videomme", ann, tmp_path / "data")
    assert tasks[0].transcript == str((tmp_path / "subtitle" / "fFjv93ACGo8.srt").resolve())
    assert tasks[1].transcript is None  # no subtitle shipped for that video: no transcript, no error
    transcript = load_transcript(tasks[0])
    assert transcript is not None and [s.start for s in transcript.segments] == [1.0, 4.25]


def test_videomme_sample_template_with_a_subtitle_folder(tmp_path: Path) -> None:
    template = sample("videomme", "output_test_template.verbatim_not_strict_json.txt")
    shutil.copy(template, tmp_path / "template.json")
    (tmp_path / "videos" / "subtitle").mkdir(parents=True)
    (tmp_path / "videos" / "subtitle" / "001.srt").write_text(SRT)
    tasks = import_benchmark("videomme", tmp_path / "template.json", tmp_path / "videos")
    with_subs = {t.video_id for t in tasks if t.transcript}
    assert with_subs == {"001"} and len(tasks) > len([t for t in tasks if t.transcript])


def test_longvideobench_import_applies_the_subtitle_offset(tmp_path: Path) -> None:
    rows = [{"id": "86CxyhFV9MI_0", "video_id": "86CxyhFV9MI", "video_path": "86CxyhFV9MI.mp4", "duration": 23.9,
             "subtitle_path": "86CxyhFV9MI_en.json", "starting_timestamp_for_subtitles": 100.0,
             "question": "What is the man holding?", "candidates": ["a cup", "a phone", "a book", "a pen"],
             "correct_choice": 2, "duration_group": 15, "question_category": "O2E"},
            {"id": "zz_0", "video_id": "zz", "video_path": "zz.mp4", "duration": 30.0, "subtitle_path": "zz_en.json",
             "starting_timestamp_for_subtitles": 0, "question": "Where?", "candidates": ["a", "b"],
             "correct_choice": 0}]
    ann = tmp_path / "lvb_val.json"
    ann.write_text(json.dumps(rows))
    subs = tmp_path / "subtitles"
    subs.mkdir()
    (subs / "86CxyhFV9MI_en.json").write_text(json.dumps([
        {"start": "00:01:41.500", "end": "00:01:44.000", "line": "I am holding a book."},
        {"start": "00:01:50.000", "end": "00:01:52.250", "line": "Look at it."}]))
    (subs / "zz_en.json").write_text(json.dumps([{"timestamp": [3.0, 5.5], "text": "We are in a park."},
                                                 {"timestamp": [25.0, None], "text": "The end."}]))
    tasks = import_benchmark("longvideobench", ann, tmp_path / "videos")
    assert tasks[0].transcript_offset == 100.0
    t0, t1 = load_transcript(tasks[0]), load_transcript(tasks[1])
    assert t0 is not None and [(s.start, s.end) for s in t0.segments] == [(1.5, 4.0), (10.0, 12.25)]
    assert t1 is not None and [(s.start, s.end, s.text) for s in t1.segments] == [
        (3.0, 5.5, "We are in a park."), (25.0, 25.0, "The end.")]
    assert check_transcripts(tasks) == []
