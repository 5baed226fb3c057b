"""Untrusted code cannot hang or crash a run: each attack of issue 20 (items 1-8) ends as that task's error.

Every test here hung, crashed the parent or took minutes before the fixes; each uses short timeouts, so a hang
fails quickly instead of stalling the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.datasets.transcripts import Segment, Transcript
from videvolve.errors import ErrorKind, InfraError
from videvolve.models.base import VLM
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim import SimVLM
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.skill_library.harness import Harness, content_hash
from videvolve.skill_library.runner import RunOutcome, run_task
from videvolve.skill_library.services import TaskServices
from videvolve.skill_library.trace import TraceWriter
from videvolve.tasks import TaskView
from videvolve.testing import in_thread, make_index_video, serve_app

MCQ = TaskView(id="t", kind="mcq", question="What colour is the star that appears on the navy background?",
               options=("red", "blue", "green", "pink"), duration=20.0)


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(make_index_video(tmp_path_factory.mktemp("hostile") / "v.mp4", seconds=4, fps=10, gop=10,
                                width=64, height=48))


def run_source(source: str, video: str, tmp: Path, timeout: float = 4.0, transcript: Transcript | None = None,
               static_check: bool = True, view: TaskView = MCQ, vlm: VLM | None = None) -> tuple[RunOutcome, Path]:
    """Run one harness source on one task in the real sandbox; (outcome, its trace file)."""
    d = tmp / "harness"
    d.mkdir(exist_ok=True)
    (d / "solver.py").write_text(source)
    harness = Harness(path=d, version_id=content_hash(d), manifest={}, skill="", config={}, solver_source=source)
    settings = RuntimeSettings(budget=32, wall_seconds=timeout, memory_bytes=1024**3)
    trace = tmp / "trace.jsonl"
    services = TaskServices(view, video, vlm or SimVLM(), cost_model("qwen2.5-vl"), settings, trace=TraceWriter(trace),
                            transcript=transcript)
    return run_task(harness, services, static_check=static_check), trace


# ---- 1. the write deadlock ----

DEADLOCK = '''
def solve(task, ctx):
    big = "[" + "1," * 1900000 + "1]"
    try:
        ctx.parse_match(big)
    except Exception:
        pass
    while True:
        ctx.log("x" * 1000)
'''


@pytest.mark.slow
def test_a_reply_the_child_never_reads_ends_within_the_timeout(video: str, tmp_path: Path) -> None:
    from videvolve.skill_library.runner import TIMEOUT_MARGIN_S

    (out, trace), took = in_thread(lambda: run_source(DEADLOCK, video, tmp_path, timeout=3.0), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "timeout"), out.error
    assert took <= 3.0 + TIMEOUT_MARGIN_S
    assert trace.stat().st_size < 9 * 1024 * 1024


def slow_endpoint(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every model call answers as SimVLM does, ``seconds`` late (a busy or stuck server, not the harness)."""
    import videvolve.skill_library.services as services_module

    def complete(vlm, messages, tools, cache):
        time.sleep(seconds)
        return SimVLM().complete(messages, tools)

    monkeypatch.setattr(services_module, "complete", complete)


@pytest.mark.slow
def test_the_watchdog_ends_a_task_whose_request_is_still_being_served(video: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from videvolve.skill_library.runner import LONGEST, TIMEOUT_MARGIN_S

    slow_endpoint(monkeypatch, 30)  # a request the parent is still serving at the task's last deadline
    source = "def solve(task, ctx):\n    return ctx.ask(ctx.frames([1.0]))\n"
    (out, _), took = in_thread(lambda: run_source(source, video, tmp_path, timeout=2.0), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "timeout")
    assert "'ask'" in (out.error or "") and f"{LONGEST:g} x its 2 s timeout" in (out.error or ""), out.error
    assert LONGEST * 2.0 - 0.5 <= took <= LONGEST * 2.0 + TIMEOUT_MARGIN_S


@pytest.mark.slow
def test_a_slow_endpoint_is_not_the_harness_timing_out(video: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Three model calls of 1.5 s each take longer than a 3 s timeout; the harness's own time is a fraction of it."""
    slow_endpoint(monkeypatch, 1.5)
    source = ("def solve(task, ctx):\n    f = ctx.frames([1.0])\n    ctx.ask(f)\n    ctx.ask(f)\n    ctx.ask(f)\n"
              "    return 'A'\n")
    (out, _), took = in_thread(lambda: run_source(source, video, tmp_path, timeout=3.0), 30.0)
    assert out.outcome == "ok", out.error
    assert took > 4.5
    busy = "def solve(task, ctx):\n    ctx.ask(ctx.frames([1.0]))\n    while True:\n        pass\n"
    (out, _), took = in_thread(lambda: run_source(busy, video, tmp_path, timeout=3.0), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "timeout")  # its own time still runs out
    assert "3 s of its own time (not counting 2 s serving its requests)" in (out.error or ""), out.error


@pytest.mark.slow
def test_slow_ocr_is_not_the_harness_timing_out(video: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent decodes the frame and runs the OCR engine (one at a time for every task of the machine): like a
    model call, the machine's time. Three reads of 1.5 s each were counted against a 3 s timeout: a ``timeout``."""
    from videvolve.media import ocr

    def slow_read(image):
        time.sleep(1.5)
        return []

    monkeypatch.setattr(ocr, "read_text", slow_read)
    monkeypatch.setattr(ocr, "available", lambda: True)
    source = "def solve(task, ctx):\n    f = ctx.frames([1.0])[0]\n" + "    ctx.ocr(f)\n" * 3 + "    return 'A'\n"
    (out, _), took = in_thread(lambda: run_source(source, video, tmp_path, timeout=3.0), 30.0)
    assert out.outcome == "ok", out.error
    assert took > 4.5


def test_a_harness_has_no_clock_not_even_in_its_usage(video: str, tmp_path: Path) -> None:
    """Harness code imports no clock (no ``time``), but ``ctx.usage()`` held the parent's seconds spent decoding and
    waiting per task: a clock to time a request by, e.g. where a needle is painted (tasks generate) at a cost no
    look pays. Usage says what was spent, never how long the parent took."""
    source = ("def solve(task, ctx):\n    ctx.ask(ctx.frames([1.0]))\n    u = ctx.usage()\n"
              "    timed = [k for k, v in u.items() if isinstance(v, (float, dict))]\n"
              "    return 'A' if not timed and u['frames'] == 1 else 'B'\n")
    out, _ = run_source(source, video, tmp_path)
    assert out.outcome == "ok" and out.prediction is not None and out.prediction.answer == "A", out


def test_a_harness_cannot_tell_a_stored_reply_from_a_paid_one(video: str, tmp_path: Path) -> None:
    """``ctx.usage()`` held ``cache_hits`` and ``model_calls``: a harness sending one fixed request about a frame got a
    hit exactly where another task of the same video had sent the same pixels before, i.e. where no needle is painted
    (tasks generate), or where another harness of the run had looked. What it sent is its own knowledge; what was
    stored before is not."""
    from videvolve.models.cache import ResponseCache

    source = ("def solve(task, ctx):\n    ctx.ask(ctx.frames([1.0]), 'what is shown?')\n"
              "    return {'answer': 'A', 'raw': repr(sorted(ctx.usage().items()))}\n")
    d = tmp_path / "harness"
    d.mkdir()
    (d / "solver.py").write_text(source)
    harness = Harness(path=d, version_id=content_hash(d), manifest={}, skill="", config={}, solver_source=source)
    settings = RuntimeSettings(budget=32, wall_seconds=4.0, memory_bytes=1024**3)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    seen = []
    for i in range(2):  # the second run's request is a stored reply
        services = TaskServices(MCQ, video, SimVLM(), cost_model("qwen2.5-vl"), settings, cache=cache,
                                trace=TraceWriter(tmp_path / f"trace{i}.jsonl"))
        out = run_task(harness, services)
        assert out.outcome == "ok" and out.prediction is not None, out.error
        seen.append(out.prediction.raw)
        assert out.usage.get("cache_hits") == i  # the run still counts it
    assert seen[0] == seen[1], seen  # main: cache_hits 0 / 1, model_calls 1 / 0


ONE_LOOK = "def solve(task, ctx):\n    ctx.ask(ctx.frames([1.0]))\n    return 'A'\n"


@pytest.mark.slow
def test_an_endpoint_outage_longer_than_the_longest_time_is_not_the_harness_timing_out(
        video: str, tmp_path: Path) -> None:
    """The endpoint answers 503 (Retry-After: 1 s) to its first 7 requests: about 7 s of outage, more than the task's
    longest time (4 x 1 s), less than the retry window. Before: the watchdog scored the harness a ``timeout``."""
    app = create_app("m", mimic=MimicSettings(fail_first=7, retry_after=1.0))
    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", base_url=base, model="m", retry_window_s=60))
        (out, _), _ = in_thread(lambda: run_source(ONE_LOOK, video, tmp_path, timeout=1.0, vlm=vlm), 60.0)
    assert out.outcome == "ok", out.error
    assert app.state.faults.failed == 7


@pytest.mark.slow
def test_an_endpoint_down_for_the_whole_retry_window_stops_the_run_whatever_the_task_timeout(
        video: str, tmp_path: Path) -> None:
    """The endpoint stays down: the request is retried for its window (6 s), then the run stops for --resume.

    Before: with a task timeout under a quarter of the retry window every task ended as a ``timeout`` scored 0 (and
    reused on resume), and the run never stopped: each task's request was abandoned before its window ran out."""
    app = create_app("m", mimic=MimicSettings(fail_first=10_000, retry_after=1.0))
    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", base_url=base, model="m", retry_window_s=6))
        with pytest.raises(InfraError, match="HTTP 503"):
            in_thread(lambda: run_source(ONE_LOOK, video, tmp_path, timeout=1.0, vlm=vlm), 60.0)


def silent_app():
    """A server that says what it serves and then never answers a chat request (hung, not refusing)."""
    import asyncio

    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, object]:
        return {"object": "list", "data": [{"id": "m", "object": "model", "root": "m", "max_model_len": 32768}]}

    @app.post("/v1/chat/completions")
    async def chat() -> None:
        await asyncio.sleep(3600)

    return app


@pytest.mark.slow
def test_a_server_that_never_answers_stops_the_run_even_when_one_request_outlasts_the_tasks_longest_time(
        video: str, tmp_path: Path) -> None:
    """--timeout 3 s per request, --task-timeout 0.5 s (its longest time, 4 x 0.5 s, is shorter than one request).

    Before: the watchdog ended the task at 2 s, before the request failed, and scored the harness a ``timeout``; a
    hung server made every task a 0 and the run went on. Now the request fails by its own timeout, is retried for
    the window (4 s), and the run stops for --resume."""
    with serve_app(silent_app()) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", base_url=base, model="m", timeout_s=3.0, retry_window_s=4))
        with pytest.raises(InfraError, match="timed out"):
            in_thread(lambda: run_source(ONE_LOOK, video, tmp_path, timeout=0.5, vlm=vlm), 60.0)


RAW = '''
def solve(task, ctx):
    w = ctx._channel._writer
    w.write(PAYLOAD + "\\n")
    w.flush()
    while True:
        pass
'''


@pytest.mark.parametrize("payload", [
    '{"op": "log", "args": {"message": "d", "data": {"d": ' + "[" * 986 + "]" * 986 + "}}}",
    '{"op": "log", "args": {"message": "d", "data": {"d": [' + ",".join(["[]"] * 70_000) + "]}}}",
    '{"op": "final", "args": []}',
    '{"op": "fail", "args": "x"}',
    "[1]",
    '"\\ud800"',
])
def test_a_message_the_parent_cannot_handle_is_the_tasks_crash(video: str, tmp_path: Path, payload: str) -> None:
    """The SDK refuses these; a harness past the static check writes them to the channel itself."""
    source = RAW.replace("PAYLOAD", repr(payload))
    (out, _), took = in_thread(lambda: run_source(source, video, tmp_path, static_check=False), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "crash"), out.error
    assert took < 4.0


def test_an_op_that_is_no_string_is_refused_as_an_unknown_request(video: str, tmp_path: Path) -> None:
    """Not the parent's failure: the request is answered as unknown, and the harness goes on (here, to its timeout)."""
    source = RAW.replace("PAYLOAD", repr('{"op": ["ask"], "args": {}, "id": 1}'))
    (out, _), _ = in_thread(lambda: run_source(source, video, tmp_path, timeout=1.0, static_check=False), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "timeout"), out.error


def test_one_ask_shows_at_most_256_observations(video: str, tmp_path: Path) -> None:
    source = "def solve(task, ctx):\n    f = ctx.frames([1.0])[0]\n    return ctx.ask([f] * 20000)\n"
    (out, _), _ = in_thread(lambda: run_source(source, video, tmp_path, timeout=4.0), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "invalid"), out.error
    assert "observations" in (out.error or "")
    assert out.usage["model_calls"] == 0


# ---- 2. deep JSON ----

DEEP_LOG = '''
def solve(task, ctx):
    d = []
    for _ in range(986):
        d = [d]
    ctx.log("d", d=d)
    return "A"
'''

DEEP_RAW = '''
import json
def solve(task, ctx):
    ctx.log("d", d=json.loads("[" * 40 + "]" * 40))
    return "A"
'''


@pytest.mark.parametrize("source", [DEEP_LOG, DEEP_RAW])
def test_deep_json_from_the_child_is_the_task_error_not_the_runs(video: str, tmp_path: Path, source: str) -> None:
    """Before: RecursionError out of ``run_task`` (exit 70 for the whole run)."""
    (out, _), _ = in_thread(lambda: run_source(source, video, tmp_path), 30.0)
    assert (out.outcome, out.error_kind) == ("error", "crash")
    assert "nested" in (out.error or "") or "plain JSON" in (out.error or "")  # the SDK's refusal


def test_the_parent_refuses_deep_or_huge_messages_before_decoding() -> None:
    from videvolve.skill_library.sdk import MAX_MESSAGE_VALUES, MAX_NESTING, message_problem

    assert message_problem(json.dumps({"op": "log", "args": {"d": [[[1]]]}})) is None
    deep = '{"op": "log", "args": {"d": ' + "[" * 986 + "]" * 986 + "}}"
    assert "nested" in (message_problem(deep) or "")
    assert message_problem('{"op": "log", "args": {"d": ' + "[" * (MAX_NESTING - 3) + "]" * (MAX_NESTING - 3)
                           + "}}") is None
    wide = '{"op": "log", "args": {"d": [' + ",".join(["[]"] * (MAX_MESSAGE_VALUES + 1)) + "]}}"
    assert "values" in (message_problem(wide) or "")
    # brackets and commas inside strings are text, not structure
    assert message_problem(json.dumps({"op": "ask", "args": {"prompt": "[" * 5000 + ",\\\"" * 70000}})) is None


# ---- 3. parsers in linear time ----

ADVERSARIAL = ["1" * 1_000_000, "1 " * 500_000, "1." * 500_000, "{" * 1_000_000, "[" * 1_000_000,
               "[1," * 333_333, "answer " * 140_000, "(A " * 330_000, "A" * 1_000_000, " " * 999_999 + "x",
               "\n" * 1_000_000, "(A." + " " * 999_990 + "\n", "1-" * 500_000, "1 second" * 120_000,
               "1" * 999_990 + "-second", "[1.0-2.0 s] " * 80_000, "[1" * 500_000, "<think>" * 140_000,
               "1:00" * 250_000, "0:0" * 333_333, "{\"yes\": [" * 100_000, "A) " + "x " * 499_990 + "\nB) y",
               "answer" + " " * 999_990, "1" + " " * 999_990 + "-x", "[" * 500_000 + "]" * 500_000, "[]" * 500_000,
               "red" + " " * 999_990, "[1-2 s] x" + " " * 999_990 + "y", "[frame at 1" * 90_000,
               "1" + "\t" * 999_990 + "second"]


def _parsers() -> list[object]:
    from videvolve.media.captions import parse_caption, parse_said
    from videvolve.models.parsing import parse_intervals, parse_letter, parse_match, parse_times, strip_think
    from videvolve.models.sim import grammar

    return [lambda s: parse_intervals(s, 100.0), lambda s: parse_letter(s, 4), parse_match, parse_times,
            strip_think, parse_said, parse_caption, grammar.parse_question, grammar.parse_heard,
            grammar.parse_target, grammar.parse_duration, grammar.request_type]


def _cpu(parse: object, text: str, repeats: int) -> float:
    """The least CPU time of a few calls: the test machine is shared, and the least is the least disturbed."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        parse(text)  # type: ignore[operator]
        times.append(time.process_time() - started)
    return min(times)


def _growth(small: float, large: float, floor_s: float, repeats: tuple[int, int] = (3, 2)) -> None:
    """Ten times the text must cost well under a hundred times the CPU: a linear parser grows about 10x, a
    quadratic one 100x. Ratios, not absolute bounds, so a loaded CI machine does not fail a linear parser."""
    for text in ADVERSARIAL:
        for parse in _parsers():
            a = _cpu(parse, text[: int(len(text) * small)], repeats[0])
            b = _cpu(parse, text[: int(len(text) * large)], repeats[1])
            assert b < 30 * max(a, floor_s), (
                f"{parse} took {b:.3f} s of CPU on {int(len(text) * large)} chars of {text[:20]!r}... against "
                f"{a:.4f} s on a tenth of it: it grows faster than linearly")


@pytest.mark.slow
def test_every_parser_is_linear_on_100_kb_of_adversarial_text() -> None:
    """Before: 29 s for parse_intervals on 10 KB of digits, 11 s for SimVLM's duration rule."""
    _growth(0.01, 0.1, 0.002)


@pytest.mark.slow
def test_every_parser_stays_linear_up_to_a_megabyte_of_adversarial_text() -> None:
    _growth(0.1, 1.0, 0.01, (2, 1))


def test_simvlm_answers_a_megabyte_prompt_in_linear_time() -> None:
    vlm = SimVLM()
    for text in ("1" * 1_000_000, "A) " + "x " * 499_990, "1 second" * 120_000, "[1.0-2.0 s] " * 80_000):
        def ask(t: str) -> None:
            vlm.complete([{"role": "user", "content": [{"type": "text", "text": t}]}])
        assert _cpu(ask, text, 1) < 30 * max(_cpu(ask, text[: len(text) // 10], 2), 0.01)


def test_linear_parsers_still_read_what_models_say() -> None:
    from videvolve.media.captions import parse_said
    from videvolve.models.parsing import parse_intervals, parse_letter, parse_match
    from videvolve.models.sim import grammar

    assert parse_intervals("From 00:01:05 to 00:01:20 and 12 - 20 s", 1000) == [(12.0, 20.0), (65.0, 80.0)]
    assert parse_intervals("[[3, 5], [1, 2]]", 10) == [(1.0, 2.0), (3.0, 5.0)]
    assert parse_intervals("It never appears.") == []
    assert parse_letter("The answer is (C).", 4) == "C"
    assert parse_letter("B) a cat", 4) == "B"
    assert parse_letter("I think it is D, not A", 4) == "A"
    assert parse_match('Sure: {"yes": [1, 2.5], "maybe": [4]} done') == {"yes": [1.0, 2.5], "maybe": [4.0]}
    assert parse_said("[1.0-2.5 s] Meet Bruno.  \nx\n[3-4 s] hi") == [(1.0, 2.5, "Meet Bruno."), (3.0, 4.0, "hi")]
    assert grammar.parse_duration("a 1500-second video") == 1500.0
    assert grammar.parse_duration("The video is 12.5 seconds long") == 12.5
    q = grammar.parse_question("Which of these appears first?\n(A) red star\nB. blue circle\n  C: pink square.  \n")
    assert q is not None and q.options == {"A": "red star", "B": "blue circle", "C": "pink square"}


# ---- 6. the trace cannot fill the disk; 8. reading is never free ----

@pytest.mark.slow
def test_every_event_counts_against_the_trace_cap(tmp_path: Path) -> None:
    """Before: only log and tool notes were capped; a loop of searches wrote 15 MB in 20 s."""
    from videvolve.skill_library.steps import Failed, TranscriptSearch
    from videvolve.skill_library.trace import MAX_TRACE_BYTES, iter_steps

    trace = TraceWriter(tmp_path / "t.jsonl")
    for _ in range(150_000):
        trace.write(TranscriptSearch(text="x" * 60, hits=0))
    trace.write(Failed(kind=ErrorKind.TIMEOUT, error="the harness did not finish within 900 s"))
    size = (tmp_path / "t.jsonl").stat().st_size
    assert MAX_TRACE_BYTES - 1000 < size <= MAX_TRACE_BYTES + 1000
    steps = list(iter_steps(tmp_path / "t.jsonl"))
    assert [s.event for s in steps[-2:]] == ["trace_capped", "error"]  # the task's end is always written


def test_a_trace_is_read_as_a_stream_whatever_is_in_it(tmp_path: Path) -> None:
    from videvolve.skill_library.trace import MAX_LINE_BYTES, read_steps

    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"event": "a"}\n' + b"x" * (3 * MAX_LINE_BYTES) + b"\n[1]\n" + b"[" * 5000
                     + b'\n{"event": "b"}\n')
    assert [s.event for s in read_steps(path)] == ["a", "b"]
    assert read_steps(tmp_path / "missing.jsonl") == []


SPEECH = Transcript(segments=[Segment(start=2.0, end=3.0, text="Meet Bruno, our guide."),
                              Segment(start=8.0, end=9.0, text="And now meet Alice."),
                              Segment(start=12.0, end=13.0, text="Bruno again.")])


def test_search_transcript_meters_the_segments_it_matches(video: str, tmp_path: Path) -> None:
    """Before: answering from searches alone cost nothing (1.000 on `mentioned` at cost 0)."""
    source = ("def solve(task, ctx):\n    hits = ctx.search_transcript('bruno') + ctx.search_transcript('Bruno')\n"
              "    return 'A' if len(hits) == 4 else 'B'\n")
    out, _ = run_source(source, video, tmp_path, transcript=SPEECH)
    assert out.outcome == "ok" and out.prediction is not None and out.prediction.answer == "A"
    from videvolve.models.cost import text_tokens

    assert out.usage["transcript_tokens"] == text_tokens(SPEECH.segments[0].text) + text_tokens(
        SPEECH.segments[2].text)  # each matched segment once, as ctx.transcript meters it


def test_search_transcript_is_capped_per_task(video: str, tmp_path: Path) -> None:
    from videvolve.skill_library.reading import MAX_SEARCHES

    source = "def solve(task, ctx):\n    while True:\n        ctx.search_transcript('x' * 200)\n"
    (out, _), _ = in_thread(lambda: run_source(source, video, tmp_path, transcript=SPEECH, timeout=20.0), 40.0)
    assert out.outcome == "error" and str(MAX_SEARCHES) in (out.error or ""), out.error
    assert out.wall_s < 15


# ---- 4. folders of any depth ----

@pytest.fixture()
def deep_tmp(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, emptied at the end with the iterative removal (pytest's own would recurse on what is left)."""
    from videvolve.editing.safefs import remove_tree

    yield tmp_path
    for child in tmp_path.iterdir():
        remove_tree(child)


def make_deep(root: Path, levels: int) -> None:
    """``root/a/a/.../a/f`` ``levels`` folders deep (made through descriptors: the path is too long to name)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("a", dir_fd=fd)
            nxt = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.mkdir("empty", dir_fd=fd)
        os.symlink("/etc", "link", dir_fd=fd)
    finally:
        os.close(fd)


def open_under(folder: Path) -> list[str]:
    """This process's open descriptors on anything under ``folder``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(folder)):
                out.append(target)
    return out


def test_walks_of_a_1100_level_folder_are_refused_or_stop_not_crash(deep_tmp: Path) -> None:
    """Before: RecursionError in safefs.walk, exit 70 for `evolve` and again on `--resume`."""
    from videvolve.editing.safefs import MAX_DEPTH, PathRefused, open_dir, walk

    make_deep(deep_tmp / "ws" / "candidate" / "references", 1100)
    with open_dir(deep_tmp / "ws", "") as top, pytest.raises(PathRefused, match="folders deep"):
        list(walk(top))
    with open_dir(deep_tmp / "ws", "") as top:
        seen = [rel for rel, _, _ in walk(top, strict=False)]
    assert max(rel.count("/") + 1 for rel in seen) == MAX_DEPTH
    assert open_under(deep_tmp) == []  # every descriptor the walks opened closed (a count of all of them was
    # flaky: another test's Ray session in the same worker opens and closes its own meanwhile)


@pytest.mark.slow
def test_what_a_command_leaves_1100_levels_deep_is_removed_and_refused_cleanly(deep_tmp: Path) -> None:
    from videvolve.editing.command import drop_set_id, unsafe_candidate

    ws = deep_tmp / "ws"
    make_deep(ws / "candidate" / "references", 1100)
    (ws / "candidate" / "solver.py").write_text("def solve(task, ctx):\n    return 'A'\n")
    drop_set_id(ws)  # cut at the depth no walk enters
    assert unsafe_candidate(ws / "candidate") is None
    make_deep(ws / "candidate" / "more", 1100)
    assert "folders deep" in (unsafe_candidate(ws / "candidate") or "")


@pytest.mark.parametrize("levels", [1100, 3000])
@pytest.mark.slow
def test_remove_tree_removes_any_depth_and_never_follows_a_link(deep_tmp: Path, levels: int) -> None:
    """Before: shutil.rmtree recursed (RecursionError) in build_workspace on `--resume`."""
    from videvolve.editing.safefs import remove_tree

    outside = deep_tmp / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    make_deep(deep_tmp / "ws", levels)
    (deep_tmp / "ws" / "out").symlink_to(outside)
    remove_tree(deep_tmp / "ws")
    assert not (deep_tmp / "ws").exists()
    assert (outside / "keep.txt").read_text() == "keep"
    remove_tree(deep_tmp / "ws")  # nothing there: nothing to do


@pytest.mark.slow
def test_a_workspace_is_rebuilt_over_a_1100_level_folder(deep_tmp: Path, seed: Path) -> None:
    from videvolve.editing.base import EditorInput, read_files
    from videvolve.editing.workspace import EditorLimits, build_workspace

    make_deep(deep_tmp / "ws" / "candidate" / "references", 1100)
    inp = EditorInput(incumbent="v", files=read_files(seed), diagnoses=[])
    root = build_workspace(deep_tmp / "ws", seed, inp, [], EditorLimits(images=0), "TOOLS-DOC")
    assert not (root / "candidate" / "references").exists() and (root / "candidate" / "solver.py").exists()


# ---- 5. no door in the static check ----

ROUTES = {
    "fields name store, then replace": '''
import dataclasses
@dataclasses.dataclass
class P:
    x: int = 0
def solve(task, ctx):
    dataclasses.fields(P)[0].name = "_channel"
    return str(dataclasses.replace(ctx))
''',
    "fields name store, from import": '''
from dataclasses import dataclass, fields
@dataclass
class P:
    name: str = ""
def solve(task, ctx):
    f = fields(P)[0]
    f.name = "_channel"
    return "A"
''',
    "replace": "from dataclasses import replace\ndef solve(task, ctx):\n    return str(replace(ctx))\n",
    "asdict reaches deepcopy": "import dataclasses\ndef solve(task, ctx):\n    return str(dataclasses.asdict(ctx))\n",
    "astuple": "from dataclasses import astuple\ndef solve(task, ctx):\n    return str(astuple(ctx))\n",
    "functional Enum": '''
from enum import Enum
def f(*a):
    return a
def solve(task, ctx):
    Spy = Enum("Spy", {"__reduce_ex__": f, "A": 1})
    return "A"
''',
    "functional Enum, module attribute": '''
import enum
def solve(task, ctx):
    return str(enum.Enum("Spy", "A B"))
''',
    "functional form of an empty subclass": '''
from enum import Enum
class Base(Enum):
    pass
def solve(task, ctx):
    return str(Base("Spy", {"__reduce_ex__": print}))
''',
    "an enum class passed on": '''
from enum import IntEnum as E
def make(kind):
    return kind("Spy", {"__reduce_ex__": print})
def solve(task, ctx):
    return str(make(E))
''',
    "store on the context": 'def solve(task, ctx):\n    ctx.task = None\n    return "A"\n',
    "store of a known attribute on a declared name": '''
class Box:
    name = ""
def solve(task, ctx):
    ctx.name = "x"
    return "A"
''',
    "store through a rebound self": '''
from dataclasses import dataclass, fields
@dataclass
class P:
    x: int = 0
class Q:
    def go(self):
        self = fields(P)[0]
        self.name = "_channel"
def solve(task, ctx):
    return "A"
''',
    "dunder store on self": '''
class Q:
    def go(self, other):
        self.__class__ = other
def solve(task, ctx):
    return "A"
''',
}


@pytest.mark.parametrize("name", list(ROUTES))
def test_every_route_past_the_static_check_is_refused(name: str) -> None:
    """Each of these was admitted before (a harness printed ``ctx._channel`` through the first)."""
    from videvolve.skill_library.static_check import check_source

    assert check_source(ROUTES[name], "solver.py"), f"{name} was admitted"


def test_the_first_route_is_refused_before_it_runs_and_cannot_run_without_the_check(video: str,
                                                                                  tmp_path: Path) -> None:
    out, _ = run_source(ROUTES["fields name store, then replace"], video, tmp_path)
    assert (out.outcome, out.error_kind) == ("error", "static")
    out, _ = run_source(ROUTES["asdict reaches deepcopy"], video, tmp_path, static_check=False)
    assert (out.outcome, out.error_kind) == ("error", "crash") and "asdict" in (out.error or "")


def test_ordinary_classes_enums_and_dataclasses_still_pass() -> None:
    from tests.sandbox_cases import LEGITIMATE
    from videvolve.skill_library.static_check import check_source

    ordinary = '''
from dataclasses import dataclass, field, fields
from enum import Enum, IntEnum
class Colour(Enum):
    RED = 1
    BLUE = 2
class Level(IntEnum):
    LOW = 1
@dataclass
class Track:
    start: float
    hits: list = field(default_factory=list)
    def extend(self, t):
        self.start = min(self.start, t)
        self.hits.append(t)
class Counter2:
    total = 0
    def add(self, n):
        self.total += n
        self.last = n
def solve(task, ctx):
    t = Track(1.0)
    t.extend(0.5)
    t.start = 0.25
    c = Counter2()
    c.add(2)
    names = [f.name for f in fields(Track)]
    picked = Colour("red".upper() and 1)
    ok = isinstance(picked, Colour) and picked in Colour and Colour["RED"] == Colour.RED and len(Colour) == 2
    return {"answer": "A", "raw": str((names, [m.name for m in Colour], ok, Level.LOW + 1, c.last))}
'''
    assert check_source(ordinary, "solver.py") == []
    assert check_source(LEGITIMATE, "solver.py") == []


# ---- the soak: hostile and honest harnesses at once ----

def check_soak(stdout: str, timeout: float, concurrency: int) -> None:
    """Every task ends within its timeout plus the margin, the batch within (tasks / concurrency) rounds of that,
    honest results are those of a calm run, and the parent stays under 400 MB (measured: about 165 MB)."""
    import math

    from tests.hostile_soak import HOSTILE
    from videvolve.skill_library.runner import TIMEOUT_MARGIN_S

    got = json.loads(stdout.strip().splitlines()[-1])
    tasks = got["tasks"]
    assert got["wall_s"] <= math.ceil(len(tasks) / concurrency) * (timeout + TIMEOUT_MARGIN_S)
    for name, task in tasks.items():
        assert task["wall_s"] <= timeout + TIMEOUT_MARGIN_S, (name, task)
    for name in ("write_deadlock", "trace_flood", "busy_loop"):
        assert (tasks[name]["outcome"], tasks[name]["kind"]) == ("error", "timeout"), (name, tasks[name])
    assert (tasks["observation_flood"]["outcome"], tasks["observation_flood"]["kind"]) == ("error", "invalid")
    # 257 searches take about 1 s; on a loaded machine the timeout may come first (the cap has its own test)
    assert tasks["search_flood"]["outcome"] == "error" and tasks["search_flood"]["kind"] in ("invalid", "timeout")
    assert set(HOSTILE) < set(tasks)
    for name, calm in got["calm"].items():
        same = ("outcome", "kind", "answer", "frames")  # not the wall time, nor the trace's timings
        assert calm["outcome"] == "ok" and {k: tasks[name][k] for k in same} == {k: calm[k] for k in same}, name
    assert got["peak_rss_mb"] < 400


SOAK = (4.0, 8)
"""Timeout and concurrency of the soak."""


@pytest.mark.slow
def test_hostile_harnesses_at_concurrency_8_end_in_time_and_leave_honest_results_alone(video: str) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(repo / "tests" / "hostile_soak.py"), video, *map(str, SOAK)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_soak(proc.stdout, *SOAK)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to switch to an "
                    "unprivileged user (run as a normal user, the test above already is unprivileged)")
def test_the_soak_as_an_unprivileged_user(video: str) -> None:
    import shutil
    import subprocess
    import sysconfig

    from tests.test_sandbox import _system_python

    python = _system_python()
    if python is None or shutil.which("setpriv") is None:
        pytest.skip("no system Python of this version (or no setpriv) to run as an unprivileged user")
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    shared = Path(tempfile.mkdtemp(prefix="videvolve-soak-video-"))
    shared.chmod(0o755)  # the video, readable by the unprivileged user
    shutil.copy(video, shared / "v.mp4")
    (shared / "v.mp4").chmod(0o644)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp",
           "PYTHONPATH": f"{repo}{os.pathsep}{sysconfig.get_paths()['purelib']}"}
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python,
                            str(repo / "tests" / "hostile_soak.py"), str(shared / "v.mp4"), *map(str, SOAK)],
                           capture_output=True, text=True, env=env, timeout=120)
    finally:
        shutil.rmtree(shared)
    if r.returncode != 0 and ("Permission denied" in r.stderr and ("site-packages" in r.stderr
                                                                   or str(repo) in r.stderr)):
        pytest.skip("the virtual environment or the checkout is not readable by an unprivileged user here")
    assert r.returncode == 0, r.stderr[-3000:]
    check_soak(r.stdout, *SOAK)


def test_failing_requests_log_a_capped_number_of_tracebacks(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Before: every failing request logged a full traceback, without a cap."""
    import logging

    from videvolve.skill_library import runner

    monkeypatch.setattr(runner, "_logged", iter(range(3)))
    with caplog.at_level(logging.WARNING, logger=runner.__name__):
        for _ in range(50):
            try:
                raise ValueError("x" * 10_000)
            except ValueError as exc:
                runner._log_failure("ask", "t", exc)
    assert len(caplog.records) == 50
    assert sum(r.exc_info is not None for r in caplog.records) == 3
    assert max(len(r.getMessage()) for r in caplog.records) < 1000


def test_decoding_one_message_costs_the_parent_a_few_mb_at_most() -> None:
    """Before: a 4 MB ``[[],[],...]`` log message cost the parent about 45 MB to decode (x concurrency)."""
    import tracemalloc

    from videvolve.skill_library.channel import decode_request
    from videvolve.skill_library.sdk import MAX_MESSAGE_BYTES

    wide = ('{"op": "log", "args": {"message": "w", "data": {"d": [' + "[]," * (MAX_MESSAGE_BYTES // 3 - 100)
            + "[]]}}}").encode()
    assert len(wide) < MAX_MESSAGE_BYTES
    tracemalloc.start()
    try:
        msg, why = decode_request(wide)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert msg is None and "values" in why
    assert peak < 4 * len(wide)  # the text and a copy or two of it (12.5 MB here), never the decoded lists


def test_a_reply_over_the_cap_is_refused_as_the_requests_error() -> None:
    from videvolve.skill_library.channel import encode_reply
    from videvolve.skill_library.sdk import MAX_MESSAGE_BYTES

    reply = json.loads(encode_reply({"id": 7, "ok": True, "result": {"yes": [1.0] * 2_000_000}}, "parse"))
    assert reply["id"] == 7 and not reply["ok"] and reply["kind"] == "invalid" and "cap" in reply["error"]
    small = {"id": 8, "ok": True, "result": {"yes": [1.0], "maybe": []}}
    assert json.loads(encode_reply(small, "parse")) == small
    assert len(encode_reply(small, "parse")) < MAX_MESSAGE_BYTES
