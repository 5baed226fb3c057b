"""`videvolve serve`: the stock `openai` client against the real server on 127.0.0.1 answers as `videvolve ask`."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading
from pathlib import Path

import openai
import pytest

from tests.serving_support import ask_json, fast_harness, running, tiny_world, videvolve_server
from videvolve.testing import free_port

pytestmark = pytest.mark.slow
KEY = "s3cret-for-tests"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root, tasks = tiny_world(tmp_path_factory.mktemp("serve_world"))
    (root / "broken.mp4").write_bytes(b"not a video" * 100)
    harness = fast_harness(tmp_path_factory.mktemp("h") / "uniform12")
    return root, tasks, harness


@pytest.fixture(scope="module")
def server(world):
    root, _, harness = world
    port = free_port()
    args = ["serve", str(harness), "--port", str(port), "--media-root", str(root), "--api-key-env", "SERVE_TEST_KEY",
            "--backend", "sim", "--no-cache"]
    with videvolve_server(args, f"http://127.0.0.1:{port}/health", {"SERVE_TEST_KEY": KEY}):
        yield f"http://127.0.0.1:{port}/v1"


def _client(base: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300)


def _ask(client: openai.OpenAI, model: str, url: str, text: str, **extra):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": text}]}], **extra)


def _same_as_ask(reply, asked: dict) -> None:
    extra = reply.model_extra["videvolve"]
    usage = asked["usage"]
    assert extra["outcome"] == "ok" == asked["outcome"]
    assert extra["cost"]["frames"] == usage["frames"] > 0
    assert extra["cost"]["visual_tokens"] == usage["image_tokens"] + usage["video_tokens"]
    assert extra["cost"]["calls"] == usage["requests"]
    assert extra["cost"]["prompt_tokens"] == usage["cumulative_tokens"] == reply.usage.prompt_tokens
    assert reply.usage.model_extra["frames"] == usage["frames"]
    assert extra["evidence_times"] == asked["evidence_times"] == reply.usage.model_extra["evidence_times"]


def test_mcq_and_grounding_answer_as_ask_does(world, server):
    root, tasks, harness = world
    video = root / "videos" / "video000.mp4"
    client = _client(server)
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == "uniform" and len(ids) == 2  # the harness's name, then its version id

    mcq = next(t for t in tasks if t.kind == "mcq")
    options = [f"{chr(65 + i)}) {o}" for i, o in enumerate(mcq.options or [])]
    reply = _ask(client, "uniform", video.as_uri(), "\n".join([mcq.question, *options]))
    asked = ask_json(str(video), mcq.question, *[a for o in options for a in ("--option", o)],
                     "--harness", str(harness))
    assert reply.choices[0].message.content == asked["answer"] and asked["answer"] in "ABCD"
    _same_as_ask(reply, asked)
    assert reply.model_extra["videvolve"]["kind"] == "mcq"

    grounding = next(t for t in tasks if t.kind == "grounding")
    g = _ask(client, ids[1], video.as_uri(), grounding.question)  # by version id too
    g_asked = ask_json(str(video), grounding.question, "--harness", str(harness))
    assert json.loads(g.choices[0].message.content) == g_asked["answer"]
    _same_as_ask(g, g_asked)

    # options and "grounding": true in the request: a grounding question, as `ask --grounding`
    forced = _ask(client, "uniform", video.as_uri(), "\n".join([grounding.question, "A) yes", "B) no"]),
                  extra_body={"grounding": True})
    assert forced.model_extra["videvolve"]["kind"] == "grounding"
    assert json.loads(forced.choices[0].message.content) == g_asked["answer"]


def test_data_and_http_urls_answer_the_same(world, server):
    root, tasks, _ = world
    video = root / "videos" / "video000.mp4"
    client = _client(server)
    q = next(t for t in tasks if t.kind == "grounding").question
    local = _ask(client, "uniform", video.as_uri(), q)
    data_url = "data:video/mp4;base64," + base64.b64encode(video.read_bytes()).decode()
    by_data = _ask(client, "uniform", data_url, q)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        by_http = _ask(client, "uniform", f"http://127.0.0.1:{httpd.server_port}/videos/video000.mp4", q)
        with pytest.raises(openai.BadRequestError, match="404"):
            _ask(client, "uniform", f"http://127.0.0.1:{httpd.server_port}/videos/nope.mp4", q)
    finally:
        httpd.shutdown()
    for other in (by_data, by_http):
        assert other.choices[0].message.content == local.choices[0].message.content
        assert other.model_extra["videvolve"]["cost"] == local.model_extra["videvolve"]["cost"]


def test_errors_are_openai_errors_with_the_right_status(world, server):
    root, _, _ = world
    video = (root / "videos" / "video000.mp4").as_uri()
    client = _client(server)
    with pytest.raises(openai.AuthenticationError):
        _client(server, "wrong").models.list()
    with pytest.raises(openai.NotFoundError, match="served models: uniform"):
        _ask(client, "gpt-4o", video, "When does the red star appear?")
    with pytest.raises(openai.PermissionDeniedError, match="outside the media roots"):
        _ask(client, "uniform", "file:///etc/hostname", "When does the red star appear?")
    with pytest.raises(openai.PermissionDeniedError, match="outside the media roots"):
        _ask(client, "uniform", f"file://{root}/../../etc/hostname", "When does the red star appear?")
    with pytest.raises(openai.BadRequestError, match="video_url"):
        client.chat.completions.create(model="uniform", messages=[{"role": "user", "content": "When?"}])
    with pytest.raises(openai.BadRequestError, match=r"broken\.mp4"):
        _ask(client, "uniform", (root / "broken.mp4").as_uri(), "When does the red star appear?")
    with pytest.raises(openai.BadRequestError, match="base64"):
        _ask(client, "uniform", "data:video/mp4;base64,@@@", "When does the red star appear?")
    with pytest.raises(openai.BadRequestError, match="streaming"):
        _ask(client, "uniform", video, "When does the red star appear?", stream=True)


def test_a_down_model_endpoint_is_503(world, tmp_path: Path):
    root, tasks, harness = world
    port = free_port()
    args = ["serve", str(harness), "--port", str(port), "--media-root", str(root), "--backend", "openai",
            "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m", "--max-retries", "0", "--no-cache"]
    with videvolve_server(args, f"http://127.0.0.1:{port}/health"), \
            pytest.raises(openai.InternalServerError) as caught:
        _ask(_client(f"http://127.0.0.1:{port}/v1", "x"), "uniform",
             (root / "videos" / "video000.mp4").as_uri(), tasks[0].question)
    assert caught.value.status_code == 503 and "down" in str(caught.value)


def test_a_model_endpoint_that_refuses_the_key_is_502(world):
    from videvolve.models.sim.server import create_app as sim_app

    root, tasks, harness = world
    port = free_port()
    with running(sim_app(api_key="the-right-key")) as sim:
        args = ["serve", str(harness), "--port", str(port), "--media-root", str(root), "--backend", "openai",
                "--base-url", f"{sim}/v1", "--model", "simvlm", "--vlm-api-key-env", "SIM_KEY", "--no-cache"]
        with videvolve_server(args, f"http://127.0.0.1:{port}/health", {"SIM_KEY": "a-wrong-key"}), \
                pytest.raises(openai.APIStatusError) as caught:
            _ask(_client(f"http://127.0.0.1:{port}/v1", "x"), "uniform",
                 (root / "videos" / "video000.mp4").as_uri(), tasks[0].question)
    assert caught.value.status_code == 502 and "refuses" in str(caught.value) and "401" in str(caught.value)
