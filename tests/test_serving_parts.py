"""The serving parts without a harness run: question parsing, media confinement, the queue (429), error mapping."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.serving_support import FakeAgent, FakeAgents, running, video_part
from videvolve.errors import EndpointError, InfraError
from videvolve.serving.agent import AgentAnswer, Cost, answer_text, question_kind, split_question
from videvolve.serving.media import BadVideoSource, MediaRoots, OutsideMediaRoots, video_file
from videvolve.serving.openai_api import ApiError, ChatRequest, ServerLimits, create_app, read_question


def test_split_question_reads_option_lines_in_order():
    q, opts = split_question("What shape is the red glyph?\nA) circle\nB. square\n(C) star\nAnswer with the letter.")
    assert q == "What shape is the red glyph? Answer with the letter."
    assert opts == ["A) circle", "B) square", "C) star"]
    assert split_question("When does the red star appear?") == ("When does the red star appear?", [])
    # a line that merely starts like an option, out of order, stays in the question
    assert split_question("B) is not first\nWhen?") == ("B) is not first When?", [])
    assert question_kind(["A) x"]) == "mcq" and question_kind(["A) x"], grounding=True) == "grounding"
    assert question_kind(None) == "grounding" == question_kind([])
    assert answer_text("B") == "B" and answer_text([(1.0, 2.5)]) == "[[1.0, 2.5]]" and answer_text([]) == "[]"
    assert answer_text(None) == ""


def test_media_roots_confine_paths(tmp_path: Path):
    root = tmp_path / "media"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "v.mp4").write_bytes(b"x")
    (tmp_path / "secret.mp4").write_bytes(b"s")
    (root / "link.mp4").symlink_to(tmp_path / "secret.mp4")
    roots = MediaRoots([root])
    assert roots.resolve(root / "sub" / "v.mp4") == (root / "sub" / "v.mp4").resolve()
    assert roots.resolve("sub/v.mp4") == (root / "sub" / "v.mp4").resolve()
    for outside in (tmp_path / "secret.mp4", "../secret.mp4", root / "sub" / ".." / ".." / "secret.mp4",
                    root / "link.mp4"):
        with pytest.raises(OutsideMediaRoots, match="outside the media roots"):
            roots.resolve(outside)
    with pytest.raises(FileNotFoundError, match="no video at"):
        roots.resolve("sub/missing.mp4")
    with pytest.raises(OutsideMediaRoots, match="--media-root"):
        MediaRoots([]).resolve(root / "sub" / "v.mp4")
    with pytest.raises(FileNotFoundError, match="not a folder"):
        MediaRoots([tmp_path / "nope"])
    with video_file((root / "sub" / "v.mp4").as_uri(), roots) as p:
        assert p.read_bytes() == b"x"
    with pytest.raises(OutsideMediaRoots), video_file("file:///etc/hostname", roots):
        pass


def test_data_urls_and_schemes(tmp_path: Path):
    roots = MediaRoots([tmp_path])
    with video_file("data:video/mp4;base64," + base64.b64encode(b"\x00video bytes").decode(), roots) as p:
        assert p.read_bytes() == b"\x00video bytes"
        kept = p
    assert not kept.exists()  # the temporary copy is removed after the answer
    with pytest.raises(OutsideMediaRoots, match="--no-fetch"), \
            video_file("http://127.0.0.1:9/v.mp4", MediaRoots([tmp_path], fetch=False)):
        pass
    (tmp_path / "v.mp4").write_bytes(b"v")
    for url in (f"file:{tmp_path}/v.mp4", f"FILE:{tmp_path}/v.mp4", f"file://localhost{tmp_path}/v.mp4"):
        with video_file(url, roots) as p:  # file:/path: RFC 8089's short form, Java's File.toURI()
            assert p == tmp_path.resolve() / "v.mp4"
    for bad, why in (("data:video/mp4;base64,@@@", "base64"), ("data:video/mp4,rawbytes", "base64"),
                     ("ftp://host/v.mp4", "scheme")):
        with pytest.raises(BadVideoSource, match=why), video_file(bad, roots):
            pass



UNUSABLE = ["v.mp4\x00", "file:///%00/v.mp4", "~no-such-user-here/v.mp4", "a" * 5000 + ".mp4", "x/" * 3000 + "v.mp4",
            "http://[::1/v.mp4", "https://[bad/v.mp4", "http://127.0.0.1:9/v\x7f.mp4", "http://" + "a" * 70 + ".com/v",
            "http://ex\u00e4mple..com/v.mp4"]


def test_unusable_video_references_are_400(tmp_path: Path):
    """A NUL byte, an unknown ~user, a name too long or a URL that cannot be parsed raised ValueError, RuntimeError
    or OSError out of the media layer: a 500 "a bug in videvolve, not in your request"."""
    roots = MediaRoots([tmp_path])
    for bad in UNUSABLE:
        with pytest.raises(BadVideoSource, match="file://"), video_file(bad, roots):
            pass
    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = FakeAgent()
    agent.release.set()
    with running(create_app(FakeAgents(agent), roots, ServerLimits())) as base:
        for bad in UNUSABLE:
            r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={"model": "fake", "messages": [{
                "role": "user", "content": [{"type": "video_url", "video_url": {"url": bad}},
                                            {"type": "text", "text": "Which?\nA) x\nB) y"}]}]})
            assert r.status_code == 400 and "file://" in r.json()["error"]["message"], (bad[:20], r.text[:300])
        assert agent.started.acquire(timeout=0) is False  # none reached the harness

@pytest.mark.slow
def test_a_video_trickled_a_byte_at_a_time_ends_the_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """httpx's timeout is per read: a server trickling a "video" held the request (and its worker) for ever. A
    download now ends within its time in all (DOWNLOAD_S, here 2 s) as an unreachable video."""
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    import videvolve.serving.media as media
    from videvolve.serving.media import VideoUnreachable
    from videvolve.testing import in_thread, serve_app, trickle

    app = FastAPI()

    @app.get("/v.mp4")
    async def video() -> StreamingResponse:
        return StreamingResponse(trickle(b"x", 0.1), media_type="video/mp4")

    def fetch(url: str) -> None:
        with video_file(url, MediaRoots([tmp_path])):
            pass

    monkeypatch.setattr(media, "DOWNLOAD_S", 2.0)
    with serve_app(app) as base:
        started = time.monotonic()
        with pytest.raises(VideoUnreachable, match="still arriving"):
            in_thread(lambda: fetch(base.removesuffix("/v1") + "/v.mp4"), 20)
    assert time.monotonic() - started < 10


def _req(content: Any, **extra: Any) -> ChatRequest:
    return ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": content}], **extra})


def test_read_question_refuses_what_it_cannot_answer():
    video = {"type": "video_url", "video_url": {"url": "file:///v.mp4"}}
    q = read_question(_req([video, {"type": "text", "text": "Which?\nA) red\nB) blue"}]))
    assert (q.video, q.question, q.options, q.grounding) == ("file:///v.mp4", "Which?", ["A) red", "B) blue"], False)
    assert read_question(_req([video, {"type": "text", "text": "When?"}], grounding=True)).grounding
    for content, why in (("When?", "0 video_url"), ([video, video, {"type": "text", "text": "When?"}], "2 video_url"),
                         ([video], "no question"),
                         ([video, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "Q?"}],
                          "unsupported content")):
        with pytest.raises(ApiError, match=why) as caught:
            read_question(_req(content))
        assert caught.value.status == 400
    with pytest.raises(ApiError, match="no user message"):
        read_question(ChatRequest.model_validate({"model": "m", "messages": [{"role": "system", "content": "x"}]}))


def _ask_in_thread(client: openai.OpenAI, url: str, results: list[Any]) -> threading.Thread:
    def go() -> None:
        try:
            results.append(client.chat.completions.create(model="fake", messages=[{"role": "user", "content": [
                video_part(url), {"type": "text", "text": "Which?\nA) x\nB) y"}]}]))
        except Exception as exc:
            results.append(exc)
    t = threading.Thread(target=go)
    t.start()
    return t


def _running_or_queued(base: str, n: int) -> None:
    for _ in range(500):
        if httpx.get(f"{base}/health").json()["running_or_queued"] == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"never {n} questions admitted")


def test_a_full_queue_is_429_and_frees_up(tmp_path: Path):
    (tmp_path / "v.mp4").write_bytes(b"x")
    url = (tmp_path / "v.mp4").as_uri()
    agent = FakeAgent()
    app = create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits(concurrency=1, queue=1))
    with running(app) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        results: list[Any] = []
        first = _ask_in_thread(client, url, results)
        assert agent.started.acquire(timeout=30)  # the first is running
        second = _ask_in_thread(client, url, results)
        _running_or_queued(base, 2)  # the second waits in the queue
        with pytest.raises(openai.RateLimitError, match="retry later"):
            client.chat.completions.create(model="fake", messages=[{"role": "user", "content": [
                video_part(url), {"type": "text", "text": "Which?\nA) x\nB) y"}]}])
        agent.release.set()
        first.join(30)
        second.join(30)
        assert [r.choices[0].message.content for r in results] == ["B", "B"]
        _running_or_queued(base, 0)
        third: list[Any] = []
        _ask_in_thread(client, url, third).join(30)
        assert third[0].choices[0].message.content == "B"
        assert third[0].usage.model_extra["frames"] == 3 and third[0].model_extra["videvolve"]["harness"] == "fake@1"


@pytest.mark.parametrize(("outcome", "raises", "status"), [
    ("error", None, 200), ("ok", EndpointError("401 from the model server"), 502),
    ("ok", InfraError("connection refused"), 503), ("ok", ZeroDivisionError("a bug"), 500)])
def test_harness_failures_and_endpoint_failures(tmp_path: Path, outcome: str, raises: Exception | None, status: int):
    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = FakeAgent(outcome, raises)
    agent.release.set()
    with running(create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits())) as base:
        r = httpx.post(f"{base}/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": [
            {"type": "video_url", "video_url": {"url": (tmp_path / "v.mp4").as_uri()}},
            {"type": "text", "text": "Which?\nA) x\nB) y"}]}]}, timeout=60)
    assert r.status_code == status
    body = r.json()
    if status == 200:  # the harness's own failure: an empty answer with its cost, never hidden as a wrong letter
        assert body["choices"][0]["finish_reason"] == "error" and body["choices"][0]["message"]["content"] == ""
        assert body["videvolve"]["error_kind"] == "parse" and body["usage"]["frames"] == 3
    else:
        assert body["error"]["code"] == status and str(raises) in body["error"]["message"]



def _chunked_open(base: str) -> Any:
    """A raw socket that has sent a chat request's head with Transfer-Encoding: chunked (no Content-Length)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    return sock


def _chunked_send(sock: Any, body: bytes, end: bool = True) -> None:
    try:
        for i in range(0, len(body), 65536):
            piece = body[i:i + 65536]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        if end:
            sock.sendall(b"0\r\n\r\n")
    except OSError:  # the server answered and closed before reading the rest
        pass


def _reply(sock: Any) -> tuple[int, dict[str, Any]]:
    """The status and JSON of the reply on a raw socket (within the socket's timeout)."""
    import json

    reply = b""
    while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < _length(reply):
        got = sock.recv(65536)
        if not got:
            break
        reply += got
    head, _, rest = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest[:_length(reply)])


def _chunked_post(base: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST a body in 64 KiB chunks without a Content-Length; the reply's status and JSON."""
    with _chunked_open(base) as sock:
        _chunked_send(sock, body)
        return _reply(sock)


def _length(reply: bytes) -> int:
    head = reply.split(b"\r\n\r\n", 1)[0].lower()
    return next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.startswith(b"content-length:")),
                1 << 30)


def test_a_chunked_body_over_the_cap_is_413(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The 413 cap held for a Content-Length only: a chunked body of any size was read into memory whole."""
    import json

    from videvolve.serving import openai_api

    monkeypatch.setattr(openai_api, "MAX_BODY_BYTES", 1024 * 1024)
    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = FakeAgent()
    agent.release.set()
    message = {"role": "user", "content": [{"type": "video_url", "video_url": {"url": (tmp_path / "v.mp4").as_uri()}},
                                           {"type": "text", "text": "Which?\nA) x\nB) y"}]}
    with running(create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits())) as base:
        over = json.dumps({"model": "fake", "messages": [message], "pad": "x" * 3 * 1024 * 1024}).encode()
        status, body = _chunked_post(base, over)
        assert status == 413 and "over 1048576 bytes" in body["error"]["message"], body
        under = json.dumps({"model": "fake", "messages": [message], "pad": "x" * 512 * 1024}).encode()
        status, body = _chunked_post(base, under)  # read as it comes, and answered
        assert status == 200 and body["choices"][0]["message"]["content"] == "B", body


def test_a_body_nested_too_deep_is_400(tmp_path: Path):
    """JSON nested past Python's recursion limit raised RecursionError out of the handler: a bare-text 500."""
    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = FakeAgent()
    agent.release.set()
    video = {"type": "video_url", "video_url": {"url": (tmp_path / "v.mp4").as_uri()}}
    with running(create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits())) as base:
        for body in (b"[" * 100_000, b'{"model": "fake", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
            r = httpx.post(f"{base}/v1/chat/completions", content=body, timeout=30,
                           headers={"content-type": "application/json"})
            assert r.status_code == 400 and "nested" in r.json()["error"]["message"], r.text
        deep: list[Any] = [[]]  # just under the limit, in a part's extra field: read, and answered
        for _ in range(500):
            deep = [deep]
        r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={"model": "fake", "messages": [{
            "role": "user", "content": [video, {"type": "text", "text": "Which?\nA) x\nB) y", "extra": deep}]}]})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "B", r.text



@pytest.mark.slow
def test_a_full_queue_turns_a_request_away_before_reading_its_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The queue was counted after the body was read: a flood of large bodies was read into memory, all at once,
    before any was told 429. A body that does not arrive within BODY_S frees its place (408)."""
    from videvolve.serving import openai_api

    (tmp_path / "v.mp4").write_bytes(b"x")
    url = (tmp_path / "v.mp4").as_uri()
    agent = FakeAgent()
    with running(create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits(concurrency=1, queue=0))) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        results: list[Any] = []
        first = _ask_in_thread(client, url, results)
        assert agent.started.acquire(timeout=30)
        with _chunked_open(base) as sock:
            _chunked_send(sock, b'{"model": "fake", "pad": "' + b"x" * 100_000, end=False)  # more to come
            sock.settimeout(10)
            try:
                status, body = _reply(sock)
            except TimeoutError:
                raise AssertionError("the server waits for the body of a request it has no place for") from None
            assert status == 429 and "retry later" in body["error"]["message"], body
        agent.release.set()
        first.join(30)
        _running_or_queued(base, 0)
        monkeypatch.setattr(openai_api, "BODY_S", 1.0)
        with _chunked_open(base) as sock:  # admitted, and never finished: its place comes back
            _chunked_send(sock, b'{"model": "fake"', end=False)
            sock.settimeout(20)
            status, body = _reply(sock)
            assert status == 408 and "1 s" in body["error"]["message"], body
        _running_or_queued(base, 0)
        second: list[Any] = []
        _ask_in_thread(client, url, second).join(30)
        assert results[0].choices[0].message.content == "B" == second[0].choices[0].message.content

def test_a_server_that_cannot_start_a_sandbox_is_503(index_video: Path, monkeypatch: pytest.MonkeyPatch):
    """No sandbox on the serving machine (bubblewrap missing) is the server's failure, as it stops a run for
    --resume: it was answered 500, "a bug in videvolve"."""
    from videvolve.api import load_harness
    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.serving.agent import VideoAgent
    from videvolve.skill_library import sandbox

    real_which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    sandbox.get_sandbox.cache_clear()
    agent = VideoAgent(load_harness("uniform"), ModelSettings(), RuntimeSettings())
    try:
        with running(create_app(FakeAgents(agent), MediaRoots([index_video.parent]), ServerLimits())) as base:
            r = httpx.post(f"{base}/v1/chat/completions", timeout=120, json={"model": "fake", "messages": [{
                "role": "user", "content": [{"type": "video_url", "video_url": {"url": index_video.as_uri()}},
                                            {"type": "text", "text": "Which?\nA) x\nB) y"}]}]})
    finally:
        sandbox.get_sandbox.cache_clear()
    assert r.status_code == 503, r.text
    assert "--allow-weak-sandbox" in r.json()["error"]["message"] and "bug" not in r.json()["error"]["message"]


def test_a_harness_changed_on_disk_under_the_server_is_503_not_a_bug(index_video: Path, tmp_path: Path):
    """Harness versions are immutable: one edited while the server answers with it is refused for every question.
    That is how the server was set up (503, restart it), not "a bug in videvolve" (500, before)."""
    import shutil

    from videvolve.api import load_harness
    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.serving.agent import VideoAgent
    from videvolve.skill_library.harness import seed_path

    shutil.copytree(seed_path("uniform"), tmp_path / "h")
    agent = VideoAgent(load_harness(tmp_path / "h"), ModelSettings(), RuntimeSettings())
    with (tmp_path / "h" / "solver.py").open("a") as fh:
        fh.write("\n# edited after the server started\n")
    with running(create_app(FakeAgents(agent), MediaRoots([index_video.parent]), ServerLimits())) as base:
        r = httpx.post(f"{base}/v1/chat/completions", timeout=120, json={"model": "fake", "messages": [{
            "role": "user", "content": [{"type": "video_url", "video_url": {"url": index_video.as_uri()}},
                                        {"type": "text", "text": "Which?\nA) x\nB) y"}]}]})
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "changed on disk" in message and "restart" in message and "bug" not in message


def test_a_harness_that_cannot_be_loaded_is_an_openai_error_not_plain_text(index_video: Path):
    """Loading the asked model's harness failed (a run's best/ removed by hand): the reply is the JSON error every
    client reads (503, what to do), not Starlette's plain-text 500."""
    from videvolve.errors import HarnessError

    class Broken(FakeAgents):
        def agent(self, model_id: str) -> FakeAgent:
            raise HarnessError("no harness /runs/r/best: give a directory or one of the seeds")

    with running(create_app(Broken(None), MediaRoots([index_video.parent]), ServerLimits())) as base:
        r = httpx.post(f"{base}/v1/chat/completions", timeout=60, json={"model": "fake", "messages": [{
            "role": "user", "content": [{"type": "video_url", "video_url": {"url": index_video.as_uri()}},
                                        {"type": "text", "text": "Which?\nA) x\nB) y"}]}]})
    assert r.status_code == 503 and "no harness /runs/r/best" in r.json()["error"]["message"], r.text


def test_catalog_of_a_seed_and_of_a_run(tmp_path: Path):
    import shutil

    from videvolve.serving.agent import HarnessCatalog
    from videvolve.skill_library.harness import load_harness, seed_path

    seed = HarnessCatalog.open("uniform")
    version = load_harness(seed_path("uniform")).version_id
    assert seed.ids() == ["uniform", version] and seed.load(version).harness.name == "uniform"
    run = tmp_path / "myrun"
    (run / "harnesses").mkdir(parents=True)
    (run / "settings.json").write_text("{}")
    for name in ("uniform", "scan_refine"):
        shutil.copytree(seed_path(name), run / "harnesses" / load_harness(seed_path(name)).version_id)
    shutil.copytree(seed_path("scan_refine"), run / "best")
    catalog = HarnessCatalog.open(run)
    assert catalog.ids()[0] == "myrun" and set(catalog.ids()[1:]) == {p.name for p in (run / "harnesses").iterdir()}
    assert catalog.load("myrun").harness.name == "scan_refine"  # no mixture: the run's best
    with pytest.raises(KeyError):
        catalog.load("gpt-4o")
    shutil.rmtree(run / "best")  # a promotion's instant: best/ moved away before the new one is in place
    assert catalog.load("myrun").harness.name == "scan_refine"  # the best it had answers, not an error


def test_lmms_eval_model_arguments_and_visuals():
    from videvolve.errors import UsageError
    from videvolve.serving.lmms_eval_model import agent_from_args, video_of

    assert video_of(["/v/a.mp4", "/v/b.mp4"]) == "/v/a.mp4" and video_of(Path("/v/c.mp4")) == "/v/c.mp4"
    with pytest.raises(UsageError, match="doc_to_visual"):
        video_of([object()])
    with pytest.raises(UsageError, match=r"could not be asked .* pass model=NAME in --model_args"):
        agent_from_args("uniform", base_url="http://127.0.0.1:9/v1", timeout="2")
    agent = agent_from_args("uniform", base_url="http://127.0.0.1:9/v1", model="m", budget="32", no_cache="true")
    assert agent.model.backend == "openai" and agent.runtime.budget == 32 and agent.cache is None
    assert agent.runtime.image_format == "jpeg" and agent_from_args("uniform", no_cache=True).model.backend == "sim"
    # any setting by its name (main: only eleven were read, and the rest, a typo too, were silently dropped)
    agent = agent_from_args("uniform", base_url="http://127.0.0.1:9/v1", model="m", no_cache=True, max_pixels=1003520,
                            jpeg_quality=70, timeout=30)
    assert agent.model.max_pixels == 1003520 and agent.runtime.jpeg_quality == 70 and agent.model.timeout_s == 30
    with pytest.raises(UsageError, match="unknown modle"):
        agent_from_args("uniform", base_url="http://127.0.0.1:9/v1", modle="m", model="m", no_cache=True)
    with pytest.raises(UsageError, match="jpeg_quality"):
        agent_from_args("uniform", no_cache=True, jpeg_quality="best")


@pytest.mark.slow
def test_lmms_eval_model_generate_until_follows_the_documented_interface(serving_world):
    """lmms-eval's model interface without lmms-eval: Instance.args = (context, gen_kwargs, doc_to_visual, doc_id,
    task, split); the document is self.task_dict[task][split][doc_id] (the lmms-eval test proper is an integration
    test in .venv-lmms)."""
    from types import SimpleNamespace

    from videvolve.serving.lmms_eval_model import VidevolveLMM

    w = serving_world
    model = VidevolveLMM(harness=str(w.harness), no_cache=True, batch_size=1, device="cpu")
    model.task_dict = {"t": {"test": [{"video": str(w.video)}]}}
    context = "\n".join([w.mcq.question, *[f"{chr(65 + i)}) {o}" for i, o in enumerate(w.mcq.options or [])]])
    request = SimpleNamespace(args=(context, {"max_new_tokens": 16}, lambda doc: [doc["video"]], 0, "t", "test"))
    assert model.generate_until([request]) == [w.asked_mcq["answer"]]
    answer = model.answer(context, str(w.video))
    assert answer.cost.frames == w.asked_mcq["usage"]["frames"] and answer.evidence_times == w.asked_mcq[
        "evidence_times"]


def test_a_runs_name_follows_its_best_and_a_promotion_breaks_no_answer(tmp_path: Path):
    import shutil

    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.rundir import RunDir
    from videvolve.serving.agent import CatalogAgents, HarnessCatalog
    from videvolve.skill_library.harness import load_harness, seed_path

    run = RunDir(tmp_path / "myrun")
    run.harnesses.mkdir(parents=True)
    run.settings.write_text("{}")
    ids = {}
    for name in ("uniform", "scan_refine"):
        ids[name] = load_harness(seed_path(name)).version_id
        shutil.copytree(seed_path(name), run.harness(ids[name]))
    run.set_best(run.harness(ids["uniform"]))
    agents = CatalogAgents(HarnessCatalog.open(run.root), ModelSettings(), RuntimeSettings())
    before = agents.agent("myrun")
    assert before.harness.harness.path == run.harness(ids["uniform"])  # main: best/, replaced at each promotion
    run.set_best(run.harness(ids["scan_refine"]))  # the run, still evolving, promotes another version
    assert agents.describe("myrun") == f"scan_refine@{ids['scan_refine']}"  # main: uniform's, then 503 for ever
    assert agents.describe(ids["uniform"]) == f"uniform@{ids['uniform']}"  # a version id stays that version
    # the harness loaded before is unchanged on disk: an answer under way finishes as it started
    from videvolve.skill_library.harness import content_hash
    assert content_hash(before.harness.harness.path) == before.harness.harness.version_id


@pytest.mark.slow
def test_a_client_that_goes_away_stops_its_harness(index_video: Path, tmp_path: Path):
    """Before: the harness of a client that timed out or hung up ran on to its task timeout (15 minutes by default),
    holding its place (and, on a real server, the GPU); now it is stopped within a second or two."""
    from videvolve.api import load_harness
    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.serving.agent import VideoAgent

    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "solver.py").write_text("def solve(task, ctx):\n    while True:\n        pass\n")
    agent = VideoAgent(load_harness(tmp_path / "h"), ModelSettings(), RuntimeSettings(wall_seconds=120))
    with running(create_app(FakeAgents(agent), MediaRoots([index_video.parent]), ServerLimits())) as base:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{base}/v1/chat/completions", timeout=2, json={"model": "fake", "messages": [{
                "role": "user", "content": [{"type": "video_url", "video_url": {"url": index_video.as_uri()}},
                                            {"type": "text", "text": "Which?\nA) x\nB) y"}]}]})
        gone = time.monotonic()
        _running_or_queued(base, 0)  # main: 1 for the next 118 s
        assert time.monotonic() - gone < 5


@pytest.mark.slow
def test_lmms_eval_model_scores_an_unreadable_video_and_answers_the_rest(serving_world, tmp_path: Path):
    """lmms-eval hands a simple model every request of a run in one generate_until call: one missing or damaged
    video raised out of it and ended the whole run, every answer before it lost. As `eval` does, such a document is
    answered with nothing (scored 0), its reason in the costs file, and the rest are answered."""
    from types import SimpleNamespace

    from videvolve.serving.lmms_eval_model import VidevolveLMM

    w = serving_world
    (tmp_path / "text.mp4").write_text("not a video")
    costs = tmp_path / "costs.jsonl"
    model = VidevolveLMM(harness=str(w.harness), no_cache=True, costs=str(costs))
    model.task_dict = {"t": {"test": [{"video": str(tmp_path / "text.mp4")}, {"video": str(tmp_path / "gone.mp4")},
                                      {"video": str(w.video)}]}}
    context = "\n".join([w.mcq.question, *[f"{chr(65 + i)}) {o}" for i, o in enumerate(w.mcq.options or [])]])
    requests = [SimpleNamespace(args=(context, {}, lambda doc: [doc["video"]], i, "t", "test")) for i in range(3)]
    assert model.generate_until(requests) == ["", "", w.asked_mcq["answer"]]  # main: UnreadableVideoError
    lines = sorted((json.loads(line) for line in costs.read_text().splitlines()), key=lambda g: g["doc_id"])
    assert [(g["doc_id"], g["outcome"], g["error_kind"]) for g in lines] == [
        (0, "error", "media"), (1, "error", "media"), (2, "ok", None)]
    assert "cannot decode" in lines[0]["error"] and lines[0]["kind"] == "mcq" and lines[0]["cost"]["frames"] == 0


@pytest.mark.slow
def test_lmms_eval_multi_round_requests_are_answered_in_one_round(serving_world):
    """A generate_until_multi_round task's Instance.args has doc_to_text between doc_to_visual and doc_id (lmms-eval's
    api/task.py): generate_until_multi_round handed them to generate_until, which unpacked six and raised
    ValueError for every such task. Its first round is answered, as documented."""
    from types import SimpleNamespace

    from videvolve.serving.lmms_eval_model import VidevolveLMM

    w = serving_world
    model = VidevolveLMM(harness=str(w.harness), no_cache=True)
    model.task_dict = {"t": {"test": [{"video": str(w.video)}]}}
    context = "\n".join([w.mcq.question, *[f"{chr(65 + i)}) {o}" for i, o in enumerate(w.mcq.options or [])]])
    request = SimpleNamespace(args=(context, {}, lambda doc: [doc["video"]], lambda doc, *a, **k: context, 0, "t",
                                    "test"))
    assert model.generate_until_multi_round([request]) == [w.asked_mcq["answer"]]  # main: ValueError


def test_lmms_eval_model_answers_concurrency_documents_at_once_in_order(tmp_path: Path):
    """lmms-eval hands the model every document in one generate_until call; it answered them one at a time
    (eval runs --concurrency 4): an lmms-eval run took 4x eval's time. `concurrency` of them run at once now, the
    replies in the requests' order, a costs line for each."""
    from types import SimpleNamespace

    from videvolve.serving.agent import AgentAnswer
    from videvolve.serving.lmms_eval_model import VidevolveLMM

    class Slow:
        version = "fake@1"

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.now = self.most = 0

        def ask(self, video: Any, question: str, options: Any = None, grounding: bool = False,
                cancel: threading.Event | None = None) -> AgentAnswer:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            time.sleep(0.3 if question.endswith("0") else 0.1)  # the first finishes last
            with self.lock:
                self.now -= 1
            return AgentAnswer(harness="fake@1", kind="grounding", outcome="ok", answer=[], text=question, cost=Cost())

    costs = tmp_path / "costs.jsonl"
    model = VidevolveLMM(harness="uniform", no_cache=True, concurrency="3", costs=str(costs))
    slow = Slow()
    model.agent = slow  # type: ignore[assignment]
    model.task_dict = {"t": {"test": [{"video": f"/v/{i}.mp4"} for i in range(7)]}}
    requests = [SimpleNamespace(args=(f"When {i}", {}, lambda doc: [doc["video"]], i, "t", "test")) for i in range(7)]
    assert model.generate_until(requests) == [f"When {i}" for i in range(7)]
    assert slow.most == 3  # main: 1
    assert sorted(json.loads(line)["doc_id"] for line in costs.read_text().splitlines()) == list(range(7))


def test_ground_in_video_asks_a_query_as_a_when_question_and_a_question_as_it_is():
    from videvolve.serving.mcp_server import as_question

    assert as_question("the orange diamond appears") == "When does the orange diamond appears?"
    assert as_question("  The orange  diamond appears. ") == "When does the orange diamond appears?"
    assert as_question("Bob waves") == "When does Bob waves?"
    for question in ("When does the red star appear?", "when is Bob mentioned", "How often does it rain?", "When?"):
        assert as_question(f" {question} ") == question


def test_an_http_videos_headers_are_asked_for_and_a_server_without_head_is_left_to_the_download() -> None:
    """reachable() (what a streamed question asks before its stream opens): an error status is the video's 400; a
    server that answers HEAD with 405 or 501 (many do) is not refused for it."""
    from fastapi import FastAPI
    from fastapi.responses import Response

    from videvolve.serving.media import VideoUnreachable, reachable
    from videvolve.testing import serve_app

    app = FastAPI()

    @app.get("/v.mp4")
    async def video() -> Response:  # GET only: FastAPI answers HEAD with 405
        return Response(b"x", media_type="video/mp4")

    @app.head("/gone.mp4")
    async def gone() -> Response:
        return Response(status_code=410)

    with serve_app(app) as base:
        root = base.removesuffix("/v1")
        reachable(f"{root}/v.mp4")
        with pytest.raises(VideoUnreachable, match="answered HTTP 410"):
            reachable(f"{root}/gone.mp4")
        with pytest.raises(VideoUnreachable, match="answered HTTP 404"):
            reachable(f"{root}/nope.mp4")
