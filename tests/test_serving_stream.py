"""`stream: true` on `videvolve serve`: the stock `openai` client streams an answer as it would vLLM's.

The agent is a fake that blocks until released, so the tests see the stream while the harness works; the harness
run itself is the same as without streaming (tests/test_serving_openai.py streams one real answer too).
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.serving_support import FakeAgent, FakeAgents, running, video_part
from videvolve.errors import InfraError
from videvolve.serving.media import MediaRoots
from videvolve.serving.openai_api import ServerLimits, create_app


def _messages(video: Path) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": [video_part(video.as_uri()), {"type": "text", "text": "Which?\nA) x\nB) y"}]}]


@pytest.fixture
def video(tmp_path: Path, index_video: Path) -> Path:
    """A real video (a stream opens once its video is found and probed), alone under its media root."""
    shutil.copy(index_video, tmp_path / "v.mp4")
    return tmp_path / "v.mp4"


def _admitted(base: str) -> int:
    return int(httpx.get(f"{base}/health").json()["running_or_queued"])


def _until(check: Any, what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_streamed_answer_is_the_answer_with_its_usage_and_keepalives_meanwhile(video: Path):
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits(keepalive_s=0.2))
    with running(app) as base:
        lines: list[str] = []
        with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json={
                "model": "fake", "messages": _messages(video), "stream": True}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                lines.append(line)
                if line == ": keep-alive" and lines.count(line) == 3:
                    agent.release.set()  # three keep-alives while the harness works, then the answer
        events = [json.loads(x.removeprefix("data: ")) for x in lines if x.startswith("data: {")]
        assert lines.count(": keep-alive") >= 3 and lines[-2:] == ["data: [DONE]", ""]
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == "B"
        assert events[-1]["choices"][0]["finish_reason"] == "stop" and events[-1]["videvolve"]["harness"] == "fake@1"
        assert len({e["id"] for e in events}) == 1 and all(e["object"] == "chat.completion.chunk" for e in events)
        assert not any("usage" in e for e in events)  # only when stream_options asks for it
        told = [e["choices"][0]["delta"]["reasoning"] for e in events if "reasoning" in e["choices"][0]["delta"]]
        assert told == ["Asked the model about 2 moments from 0:01 to 0:30 (2 new frame(s)); it said: a red star "
                        "at 0:02.\n"]  # what the harness did, as it did it, before the answer
        assert lines.index(": keep-alive") > lines.index(f"data: {json.dumps(events[1])}")

        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30)
        chunks = list(client.chat.completions.create(model="fake", messages=_messages(video), stream=True,
                                                     stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "B"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert chunks[-1].usage.model_extra is not None  # its fields beyond the SDK's
        assert chunks[-1].usage.prompt_tokens == 50 and chunks[-1].usage.model_extra["frames"] == 3
        assert chunks[-1].usage.model_extra["evidence_times"] == [1.5]
        whole = client.chat.completions.create(model="fake", messages=_messages(video))  # the same, not streamed
        assert whole.choices[0].message.content == "B" and whole.choices[0].message.model_extra is not None
        assert whole.choices[0].message.model_extra["reasoning"] == told[0]
        assert _admitted(base) == 0


def test_a_failure_once_the_stream_is_open_is_an_error_event_the_sdk_raises(video: Path):
    agent = FakeAgent(raises=InfraError("connection refused by 127.0.0.1:8000"))
    agent.release.set()
    with running(create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits())) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30)
        with pytest.raises(openai.APIError, match=r"model endpoint behind the harness is down.*connection refused"):
            list(client.chat.completions.create(model="fake", messages=_messages(video), stream=True))
        # what is wrong before the stream opens is the status it has without streaming
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="nope", messages=_messages(video), stream=True)
        with pytest.raises(openai.BadRequestError, match="n=2: a harness answers once"):
            client.chat.completions.create(model="fake", messages=_messages(video), n=2)
        failed = FakeAgent(outcome="error")
        failed.release.set()
    with running(create_app(FakeAgents(failed), MediaRoots([video.parent]), ServerLimits())) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30)
        chunks = list(client.chat.completions.create(model="fake", messages=_messages(video), stream=True))
        assert chunks[-1].choices[0].finish_reason == "error"  # the harness's own failure, as without streaming
        assert chunks[-1].model_extra["videvolve"]["error_kind"] == "parse"


def test_a_url_the_server_may_not_fetch_is_refused_before_the_stream_opens(video: Path):
    """--no-fetch and --allowed-media-domains refuse a URL with a 403 before the stream opens, as without streaming
    (it was an error event in an open stream: the client's `APIError`, no status); no harness runs for it."""
    agent = FakeAgent()
    agent.release.set()
    for roots, url in ((MediaRoots([video.parent], fetch=False), "https://example.com/v.mp4"),
                       (MediaRoots([video.parent], domains=["example.com"]), "https://example.org/v.mp4")):
        with running(create_app(FakeAgents(agent), roots, ServerLimits())) as base:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30)
            messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": [
                video_part(url), {"type": "text", "text": "Which?\nA) x\nB) y"}]}]
            for stream in (False, True):
                with pytest.raises(openai.PermissionDeniedError, match=r"--no-fetch|--allowed-media-domains"):
                    client.chat.completions.create(model="fake", messages=messages, stream=stream)
            assert _admitted(base) == 0
    assert not agent.started.acquire(blocking=False)


def test_a_stream_holds_its_place_and_a_client_that_goes_away_stops_its_harness(video: Path):
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits(concurrency=1, queue=0))
    with running(app) as base:
        with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json={
                "model": "fake", "messages": _messages(video), "stream": True}) as r:
            lines = r.iter_lines()  # kept: an iterator dropped closes its connection (httpcore), a hang-up
            assert json.loads(next(lines).removeprefix("data: "))["choices"][0]["delta"]["role"] == "assistant"
            assert agent.started.acquire(timeout=10)
            assert _admitted(base) == 1  # the open stream's question, until the stream ends
            refused = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
                "model": "fake", "messages": _messages(video), "stream": True})
            assert refused.status_code == 429
        # the client hung up mid-answer: its harness is told to stop, and its place is free again
        assert agent.cancelled.wait(10)
        _until(lambda: _admitted(base) == 0, "the stream's place was never released")
        agent.release.set()
        done: list[Any] = []
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=30)
        worker = threading.Thread(target=lambda: done.extend(client.chat.completions.create(
            model="fake", messages=_messages(video), stream=True)))
        worker.start()
        worker.join(30)
        assert "".join(c.choices[0].delta.content or "" for c in done if c.choices) == "B"


def test_a_queued_stream_whose_client_goes_away_leaves_the_queue_at_once(video: Path):
    """A stream queued behind --concurrency whose client hung up held its place until the harness ahead of it
    ended, and then ran a harness of its own for nobody."""
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([video.parent]),
                     ServerLimits(concurrency=1, queue=1, keepalive_s=0.05))
    body = {"model": "fake", "messages": _messages(video), "stream": True}
    with running(app) as base:
        with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json=body) as first:
            first_lines = first.iter_lines()
            next(first_lines)
            assert agent.started.acquire(timeout=10)
            with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json=body) as queued:
                queued_lines = queued.iter_lines()
                assert ": keep-alive" in (next(queued_lines), next(queued_lines), next(queued_lines))
                assert _admitted(base) == 2
            _until(lambda: _admitted(base) == 1, "a hung-up queued stream kept its place", seconds=5)
            agent.release.set()
            assert any('"content": "B"' in line for line in first_lines)
        _until(lambda: _admitted(base) == 0, "the first stream's place was never released")
        assert not agent.started.acquire(blocking=False)  # the gone client's harness never started


def _sent(base: str, body: dict[str, Any]) -> socket.socket:
    """A chat request sent on a socket of its own, its reply unread."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


def test_a_queued_question_whose_client_goes_away_leaves_the_queue_at_once(video: Path):
    """The same without streaming: the client's hang-up was seen, but its question waited on for a place."""
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits(concurrency=1, queue=1))
    body = {"model": "fake", "messages": _messages(video)}
    with running(app) as base:
        with _sent(base, body) as first:
            assert agent.started.acquire(timeout=10)
            with _sent(base, body):
                _until(lambda: _admitted(base) == 2, "the second question never arrived")
            _until(lambda: _admitted(base) == 1, "a hung-up queued question kept its place", seconds=5)
            agent.release.set()
            reply = b""
            while b'"content":"B"' not in reply and (chunk := first.recv(65536)):
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200") and b'"content":"B"' in reply
        _until(lambda: _admitted(base) == 0, "the first question's place was never released")
        assert not agent.started.acquire(blocking=False)  # the gone client's harness never started


def test_a_bug_while_answering_leaves_its_traceback_in_the_log(video: Path, caplog: pytest.LogCaptureFixture):
    """The 500 (or the error event) says the server log has the traceback; the log had 'NoneType: None'."""
    agent = FakeAgent(raises=RuntimeError("boom in the agent"))
    agent.release.set()
    with running(create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits())) as base:
        for stream in (False, True):
            caplog.clear()
            r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
                "model": "fake", "messages": _messages(video), "stream": stream})
            assert "the server log has the traceback" in r.text
            bugs = [x for x in caplog.records if x.getMessage() == "a bug in videvolve while answering"]
            assert len(bugs) == 1 and bugs[0].exc_info is not None
            assert "boom in the agent" in caplog.text and "in ask" in caplog.text  # the agent's own frame


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_client_that_hangs_up_while_sending_its_body_leaves_no_traceback(video: Path):
    """uvicorn logged 'Exception in ASGI application' with a ClientDisconnect traceback for each such client."""
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([video.parent]), ServerLimits(concurrency=1, queue=0))
    with running(app) as base:
        seen = _Records()
        logging.getLogger("uvicorn.error").addHandler(seen)  # after uvicorn set up its logging, which would drop it
        try:
            for stream in (True, False):
                data = json.dumps({"model": "fake", "messages": _messages(video), "stream": stream}).encode()
                with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=30) as sock:
                    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(data), data[:20]))
                    _until(lambda: _admitted(base) == 1, "the request never arrived")
                _until(lambda: _admitted(base) == 0, "the hung-up request kept its place")
            agent.release.set()  # and the one place is free for the next question
            r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
                "model": "fake", "messages": _messages(video)})
            assert r.json()["choices"][0]["message"]["content"] == "B"
        finally:
            logging.getLogger("uvicorn.error").removeHandler(seen)
        assert not [x.getMessage() for x in seen.records if x.levelno >= logging.WARNING]


def test_each_step_of_a_trace_is_told_in_a_line_or_not_at_all():
    from tests.steps_support import model_call
    from videvolve.errors import ErrorKind
    from videvolve.serving.steps import clock, step_line
    from videvolve.skill_library.steps import (
        Failed,
        Final,
        InvalidToolCalls,
        LogNote,
        OcrRead,
        Refused,
        TranscriptRead,
        TranscriptSearch,
    )

    assert clock(5) == "0:05" and clock(754.9) == "12:34" and clock(3725) == "1:02:05"
    assert step_line(model_call([12.0], reply="B")) \
        == "Asked the model (answer) about the moment 0:12 (1 new frame(s)); it said: B."
    assert step_line(model_call([], event="chat", tool_calls=["look"])) \
        == "Asked the model about no moment of the video (0 new frame(s)); it called look."
    long = step_line(model_call([1, 2], event="ask:describe", reply="word " * 200))
    assert long is not None and len(long) < 260 and "…" in long and "\n" not in long
    ocr = OcrRead(observed_times=[61.0], new_frames=1, ocr_tokens=9, text=["EXIT"])
    assert step_line(ocr) == "Read the on-screen text at the moment 1:01."
    whole = TranscriptRead(start=0, end=None, segments=3, transcript_tokens=40)
    assert step_line(whole) == "Read the transcript from 0:00 to the end."
    assert step_line(whole.model_copy(update={"start": 61.0, "end": 75.5})) == "Read the transcript from 1:01 to 1:15."
    assert step_line(TranscriptSearch(text="goal", hits=2)) == 'Searched the transcript for "goal" (2 hit(s)).'
    refused = step_line(Refused(event="budget", error="showing 9 more frame(s) would exceed the budget", used=8,
                                budget=8))
    assert refused is not None and refused.startswith("A request was refused (budget)") and "9 more" in refused
    over = step_line(Refused(event="budget", requested=3, used=8, budget=8))  # as the frame budget writes it
    assert over == "A request was refused (budget): 3 new frame(s) after 8 shown, a budget of 8."
    unread = step_line(InvalidToolCalls(calls=[{"name": "look", "args": "{"}], reply="calling look"))
    assert unread == "A request was refused (invalid_tool_calls): calling look"
    assert step_line(Failed(kind=ErrorKind.TIMEOUT, error="3 s")) == "The harness failed (timeout): 3 s"
    assert step_line(Final(answer="B", parsed=True)) is None and step_line(LogNote(message="m", data={})) is None
