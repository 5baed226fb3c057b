"""`videvolve serve` and `videvolve mcp` against clients and video hosts that misbehave.

The agent is a fake (tests/serving_support.py); the server is real, on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.serving_support import FakeAgent, FakeAgents, running
from videvolve.errors import Cancelled
from videvolve.serving.media import MediaRoots, video_file
from videvolve.serving.openai_api import ServerLimits, create_app
from videvolve.testing import in_thread, serve_app, trickle


@pytest.fixture
def silent_host() -> Iterator[str]:
    """An http:// URL whose host takes the connection and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v.mp4"


@pytest.fixture
def trickling_host() -> Iterator[str]:
    """An http:// URL whose "video" arrives a byte at a time and never ends."""
    app = FastAPI()

    @app.get("/v.mp4")
    async def video() -> StreamingResponse:
        return StreamingResponse(trickle(b"x", 0.1), media_type="video/mp4")

    with serve_app(app) as base:
        yield base.removesuffix("/v1") + "/v.mp4"


def _body(url: str) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": "Which?\nA) x\nB) y"}]}]}


def _admitted(base: str) -> int:
    return int(httpx.get(f"{base}/health").json()["running_or_queued"])


@pytest.mark.parametrize("host", ["silent_host", "trickling_host"])
def test_a_download_stops_when_its_question_is_cancelled(host: str, request: pytest.FixtureRequest, tmp_path: Path):
    """A download ignored the cancel: it went on to its read timeout (120 s) or its 600 s in all."""
    url = request.getfixturevalue(host)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()

    def fetch() -> None:
        with video_file(url, MediaRoots([tmp_path]), cancel=cancel):
            pass

    with pytest.raises(Cancelled):
        in_thread(fetch, 20)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("host", ["silent_host", "trickling_host"])
def test_a_client_that_goes_away_during_its_download_frees_its_place(host: str, request: pytest.FixtureRequest):
    """A client that hung up while its video downloaded held its place (here the only one: every other question a
    429) until the download gave up, 2 to 10 minutes later."""
    url = request.getfixturevalue(host)
    agent = FakeAgent()
    agent.release.set()
    app = create_app(FakeAgents(agent), MediaRoots([]), ServerLimits(concurrency=1, queue=0))
    with running(app) as base:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{base}/v1/chat/completions", json=_body(url), timeout=1)
        deadline = time.monotonic() + 5
        while _admitted(base):
            assert time.monotonic() < deadline, "the gone client's download kept its place"
            time.sleep(0.05)
    assert not agent.started.acquire(blocking=False)  # no harness ran for it


def test_mcp_refuses_a_blank_question_or_option_before_any_harness_runs(tmp_path: Path):
    """ask_video and ground_in_video ran the harness (model calls spent) on an empty or blank question, or on blank
    options, where serve answers 400: each is a tool error now, and the session goes on."""
    from mcp import Client

    from tests.test_serving_mcp import _Blocking
    from videvolve.serving.mcp_server import create_mcp

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Blocking(concurrency=1)
    agent.release.set()
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ask_video", {"video": "v.mp4", "question": ""}), ("ask_video", {"video": "v.mp4", "question": " \n"}),
        ("ground_in_video", {"video": "v.mp4", "query": "  "}),
        ("ask_video", {"video": "v.mp4", "question": "Which?", "options": ["A) red", " "]}),
        ("ask_video", {"video": "v.mp4", "question": "Which?", "options": ["A) red", "B) blue"]})]

    async def main() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    *refused, answered = anyio.run(main)
    assert [r.content[0].text.split(": ", 1)[-1][:24] for r in refused] == [
        "the question is empty: s", "the question is empty: s", "the query is empty: say ", "every option needs its t"]
    assert all(r.is_error for r in refused) and not answered.is_error and agent.most == 1


@pytest.mark.slow
def test_a_body_of_countless_small_objects_is_refused_without_holding_the_server(tmp_path: Path):
    """A few MB of tiny JSON objects took seconds to parse and validate in the event loop (256 MiB: minutes), every
    other client waiting, /health too; a body of wrong items was answered with every one of its errors."""
    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = FakeAgent()
    agent.release.set()
    history = [{"role": "user", "content": "Earlier, about another video."}, {"role": "assistant", "content": "B"}]
    good = _body("v.mp4")
    good["messages"] = history * 100 + good["messages"]
    flood = json.dumps({"model": "fake", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
                        * 300_000}).encode()
    with running(create_app(FakeAgents(agent), MediaRoots([tmp_path]), ServerLimits())) as base:
        r = httpx.post(f"{base}/v1/chat/completions", content=flood, timeout=120)
        assert r.status_code == 400 and "at most 50000" in r.json()["error"]["message"], r.text[:300]
        wrong = httpx.post(f"{base}/v1/chat/completions", json={"model": "fake", "messages": [1] * 20_000}, timeout=60)
        assert wrong.status_code == 400 and len(wrong.json()["error"]["message"]) < 2000, len(wrong.text)
        r = httpx.post(f"{base}/v1/chat/completions", json=good, timeout=60)  # a long conversation is still read
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "B", r.text
        wordy = _body("v.mp4")  # commas and brackets inside a string (a transcript in the prompt) are not items
        wordy["messages"] = [{"role": "system", "content": "[0.0 s] one, two, {three}, " * 30_000}, *wordy["messages"]]
        r = httpx.post(f"{base}/v1/chat/completions", json=wordy, timeout=60)
        assert r.status_code == 200, r.text[:300]


def test_a_runs_mixture_spoiled_while_serving_leaves_the_best_it_had_answering(tmp_path: Path):
    """mixture.json made unreadable (edited by hand) under a server: GET /v1/models was a plain-text 500 with a
    traceback in the log, and each question a 400 blaming the client. The harness the name had goes on answering."""
    import shutil

    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.rundir import RunDir
    from videvolve.serving.agent import CatalogAgents, HarnessCatalog
    from videvolve.skill_library.harness import load_harness, seed_path

    run = RunDir(tmp_path / "myrun")
    run.harnesses.mkdir(parents=True)
    run.settings.write_text("{}")
    version = load_harness(seed_path("uniform")).version_id
    shutil.copytree(seed_path("uniform"), run.harness(version))
    run.set_best(run.harness(version))
    agents = CatalogAgents(HarnessCatalog.open(run.root), ModelSettings(), RuntimeSettings())
    run.mixture.write_text("{not json")
    with running(create_app(agents, MediaRoots([]), ServerLimits())) as base:
        listed = httpx.get(f"{base}/v1/models", timeout=30)
        asked = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={"model": "myrun", "messages": [
            {"role": "user", "content": "When does it happen?"}]})
    assert listed.status_code == 200 and listed.json()["data"][0]["harness"] == f"uniform@{version}", listed.text
    assert asked.status_code == 400 and "video_url" in asked.json()["error"]["message"]  # the request's own fault


def test_allowed_media_domains_hold_for_every_redirect(tmp_path: Path):
    """`--allowed-media-domains` (vLLM's flag): a host not named is refused before any request, and a redirect from
    an allowed host to another (127.0.0.1 -> localhost, the same server under another name) is refused too."""
    from fastapi.responses import RedirectResponse, Response

    from videvolve.serving.media import OutsideMediaRoots

    asked: list[str] = []
    app = FastAPI()

    @app.get("/v.mp4")
    async def video(request: Request) -> Response:
        asked.append(str(request.url))
        return Response(b"video bytes", media_type="video/mp4")

    @app.get("/elsewhere")
    async def elsewhere(request: Request) -> RedirectResponse:
        asked.append(str(request.url))
        return RedirectResponse(str(request.url).replace("127.0.0.1", "localhost").replace("/elsewhere", "/v.mp4"))

    with serve_app(app) as base:
        root = base.removesuffix("/v1")
        with video_file(f"{root}/v.mp4", MediaRoots([], domains=["127.0.0.1"])) as got:
            assert got.read_bytes() == b"video bytes"
        with pytest.raises(OutsideMediaRoots, match="not among this server's --allowed-media-domains"), \
                video_file(f"{root}/v.mp4", MediaRoots([], domains=["videos.example.org"])):
            pass
        assert len(asked) == 1  # refused before any request
        with pytest.raises(OutsideMediaRoots, match="'localhost' is not among"), \
                video_file(f"{root}/elsewhere", MediaRoots([], domains=["127.0.0.1"])):
            pass
        assert [u.split("/")[-1] for u in asked] == ["v.mp4", "elsewhere"]  # the redirect's target never asked
