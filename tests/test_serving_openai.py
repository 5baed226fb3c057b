"""`videvolve serve`: the stock `openai` client against the real server on 127.0.0.1 answers as `videvolve ask`."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletionContentPartParam

from tests.serving_support import ROOT, env, option_lines, running, video_part, videvolve_server
from videvolve.testing import reserved_port

pytestmark = pytest.mark.slow
KEY = "s3cret-for-tests"


@pytest.fixture(scope="module")
def world(serving_world):
    (serving_world.root / "broken.mp4").write_bytes(b"not a video" * 100)
    return serving_world


@pytest.fixture(scope="module")
def server(world):
    root, harness = world.root, world.harness
    with reserved_port() as port:
        args = ["serve", str(harness), "--port", str(port), "--media-root", str(root), "--api-key-env",
                "SERVE_TEST_KEY", "--backend", "sim", "--no-cache"]
        with videvolve_server(args, f"http://127.0.0.1:{port}/health", {"SERVE_TEST_KEY": KEY}):
            yield f"http://127.0.0.1:{port}/v1"


def _client(base: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300)


def _ask(client: openai.OpenAI, model: str, url: str, text: str, **extra):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": [
        video_part(url), {"type": "text", "text": text}]}], **extra)


def _same_as_ask(reply, asked: dict) -> None:
    extra = reply.model_extra["videvolve"]
    usage = asked["usage"]
    assert extra["outcome"] == "ok" == asked["outcome"]
    assert extra["cost"]["frames"] == usage["frames"] > 0
    assert extra["cost"]["visual_tokens"] == usage["image_tokens"] + usage["video_tokens"]
    assert extra["cost"]["calls"] == usage["requests"]
    assert extra["cost"]["prompt_tokens"] == usage["cumulative_tokens"] == reply.usage.prompt_tokens
    assert reply.usage.model_extra["frames"] == usage["frames"]
    assert reply.usage.completion_tokens == usage["completion_tokens"] > 0  # what the model wrote, as it said
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert extra["evidence_times"] == asked["evidence_times"] == reply.usage.model_extra["evidence_times"]


def test_mcq_and_grounding_answer_as_ask_does(world, server):
    video = world.video
    client = _client(server)
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == "uniform" and len(ids) == 2  # the harness's name, then its version id

    reply = _ask(client, "uniform", video.as_uri(), "\n".join([world.mcq.question, *option_lines(world.mcq)]))
    assert reply.choices[0].message.content == world.asked_mcq["answer"]
    _same_as_ask(reply, world.asked_mcq)
    assert reply.model_extra["videvolve"]["kind"] == "mcq"

    g = _ask(client, ids[1], video.as_uri(), world.grounding.question)  # by version id too
    assert json.loads(g.choices[0].message.content) == world.asked_grounding["answer"]
    _same_as_ask(g, world.asked_grounding)

    chunks = list(_ask(client, "uniform", video.as_uri(), world.grounding.question, stream=True,
                       stream_options={"include_usage": True}))  # streamed, as a chat UI asks
    assert json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices)) \
        == world.asked_grounding["answer"]
    assert chunks[-1].usage.prompt_tokens == world.asked_grounding["usage"]["cumulative_tokens"]
    told = "".join(getattr(c.choices[0].delta, "reasoning", None) or "" for c in chunks if c.choices)
    assert told.count("Asked the model (answer) about") == world.asked_grounding["usage"]["requests"], told

    # options and "grounding": true in the request: a grounding question, as `ask --grounding`
    forced = _ask(client, "uniform", video.as_uri(), "\n".join([world.grounding.question, "A) yes", "B) no"]),
                  extra_body={"grounding": True})
    assert forced.model_extra["videvolve"]["kind"] == "grounding"
    assert json.loads(forced.choices[0].message.content) == world.asked_grounding["answer"]


def test_data_and_http_urls_answer_the_same(world, server):
    root, video = world.root, world.video
    client = _client(server)
    q = world.grounding.question
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
    root = world.root
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
    frames: list[ChatCompletionContentPartParam] = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}] * 2
    with pytest.raises(openai.BadRequestError, match="image_url parts are not taken"):  # lmms-eval's openai model
        client.chat.completions.create(model="uniform", messages=[{"role": "user", "content": [
            {"type": "text", "text": "When does the red star appear?"}, *frames]}])
    with pytest.raises(openai.BadRequestError, match=r"broken\.mp4"):
        _ask(client, "uniform", (root / "broken.mp4").as_uri(), "When does the red star appear?")
    with pytest.raises(openai.BadRequestError, match="base64"):
        _ask(client, "uniform", "data:video/mp4;base64,@@@", "When does the red star appear?")
    with pytest.raises(openai.BadRequestError, match="a harness answers once"):
        _ask(client, "uniform", video, "When does the red star appear?", n=2)


def _refusal(client: openai.OpenAI, url: str, **extra) -> tuple[type, int | None, str]:
    """What the openai client raised for a question (its iteration included, for a stream): class, status, text."""
    with pytest.raises(openai.APIError) as caught:
        reply = _ask(client, "uniform", url, "When does the red star appear?", **extra)
        if isinstance(reply, openai.Stream):
            list(reply)
    return type(caught.value), getattr(caught.value, "status_code", None), str(caught.value)


def test_a_streamed_question_is_refused_with_the_status_it_has_without_streaming(world, server):
    """With `stream: true` a path outside the media roots, a missing file or a file that is no video was an error
    event in an open stream (the client's `APIError`, no status) where without streaming it is a 403 or a 400. As
    vLLM, the video is resolved and checked before the stream opens; the client raises the same error either way."""
    root = world.root
    client = _client(server)
    refused = [("outside the media roots", "file:///etc/hostname"),
               ("outside the media roots", f"file://{root}/../../etc/hostname"),
               ("no video at", (root / "videos" / "nope.mp4").as_uri()),
               ("broken.mp4", (root / "broken.mp4").as_uri()),
               ("base64", "data:video/mp4;base64,@@@"),
               ("not a readable media file", "data:video/mp4;base64," + base64.b64encode(b"no video").decode()),
               ("unsupported video URL scheme", "ftp://example.com/v.mp4")]
    for said, url in refused:
        plain, streamed = _refusal(client, url), _refusal(client, url, stream=True)
        assert plain[:2] == streamed[:2] and plain[1] in (400, 403), (url, plain, streamed)  # main: APIError, None
        assert said in streamed[2], (url, streamed)


def test_a_streamed_question_about_an_http_video_that_is_not_there_is_refused_before_the_stream(world, server):
    """An http(s) video was first fetched once the stream was open: a 404 or a host that does not answer was an
    error event inside a 200 (the client's `APIError`, no status) where without streaming it is a 400. Its headers
    are asked for before the stream opens now; the video itself still comes once the answer begins."""
    client = _client(server)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(world.root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    with reserved_port() as closed:  # nothing listens there
        refused = [("answered HTTP 404", f"http://127.0.0.1:{httpd.server_port}/videos/nope.mp4"),
                   ("cannot fetch the video", f"http://127.0.0.1:{closed}/v.mp4")]
        try:
            for said, url in refused:
                plain, streamed = _refusal(client, url), _refusal(client, url, stream=True)
                assert plain[:2] == streamed[:2] == (openai.BadRequestError, 400), (url, plain, streamed)
                assert said in streamed[2], (url, streamed)
            there = f"http://127.0.0.1:{httpd.server_port}/videos/video000.mp4"
            chunks = list(_ask(client, "uniform", there, world.grounding.question, stream=True))
            assert chunks[-1].choices[0].finish_reason == "stop"
        finally:
            httpd.shutdown()


def test_a_video_damaged_part_way_is_the_harness_failing_on_it_not_a_refusal(world, server):
    """A video that opens but stops decoding part-way is found while the harness looks at it: a 200 with
    `finish_reason: "error"`, `error_kind: "media"` and where it broke, streamed or not (the guide says so)."""
    from tests.conftest import sample

    damaged = world.root / "damaged.mp4"
    shutil.copy(sample("videos", "decord_corrupted.mp4"), damaged)
    client = _client(server)
    whole = _ask(client, "uniform", damaged.as_uri(), "When does the red star appear?")
    chunks = list(_ask(client, "uniform", damaged.as_uri(), "When does the red star appear?", stream=True))
    for finish, extra in ((whole.choices[0].finish_reason, whole.model_extra["videvolve"]),
                          (chunks[-1].choices[0].finish_reason, chunks[-1].model_extra["videvolve"])):
        assert finish == "error" and extra["outcome"] == "error" and extra["error_kind"] == "media", extra
        assert "cannot decode" in extra["error"] and " at " in extra["error"], extra
        assert f"the video {damaged.as_uri()}" in extra["error"] and "the task's video" not in extra["error"], extra


def test_a_down_model_endpoint_is_503(world):
    from videvolve.config import ModelSettings, RuntimeSettings
    from videvolve.serving.agent import CatalogAgents, HarnessCatalog
    from videvolve.serving.media import MediaRoots
    from videvolve.serving.openai_api import ServerLimits, create_app

    with reserved_port() as port:  # nothing listens there, and no other worker's server can
        down = ModelSettings(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0)
        agents = CatalogAgents(HarnessCatalog.open(world.harness), down, RuntimeSettings(image_format="jpeg"))
        with running(create_app(agents, MediaRoots([world.root]), ServerLimits())) as base, \
                pytest.raises(openai.InternalServerError) as caught:
            _ask(_client(f"{base}/v1", "x"), "uniform", world.video.as_uri(), world.grounding.question)
    assert caught.value.status_code == 503 and "down" in str(caught.value)


def test_a_model_endpoint_that_refuses_the_key_is_502(world, monkeypatch: pytest.MonkeyPatch):
    from videvolve.cli import build_parser
    from videvolve.cli.common import model_settings
    from videvolve.config import RuntimeSettings
    from videvolve.models.sim.server import create_app as sim_app
    from videvolve.serving.agent import CatalogAgents, HarnessCatalog
    from videvolve.serving.media import MediaRoots
    from videvolve.serving.openai_api import ServerLimits, create_app

    monkeypatch.setenv("SIM_KEY", "a-wrong-key")
    with running(sim_app(api_key="the-right-key")) as sim:
        args = build_parser().parse_args(["serve", str(world.harness), "--backend", "openai", "--base-url",
                                          f"{sim}/v1", "--model", "simvlm", "--vlm-api-key-env", "SIM_KEY"])
        settings = model_settings(args)
        assert settings.api_key_env == "SIM_KEY" and args.server_api_key_env is None
        agents = CatalogAgents(HarnessCatalog.open(world.harness), settings, RuntimeSettings(image_format="jpeg"))
        with running(create_app(agents, MediaRoots([world.root]), ServerLimits())) as base, \
                pytest.raises(openai.APIStatusError) as caught:
            _ask(_client(f"{base}/v1", "x"), "uniform", world.video.as_uri(), world.grounding.question)
    assert caught.value.status_code == 502 and "refuses" in str(caught.value) and "401" in str(caught.value)


def test_a_model_is_retrieved_and_unknown_routes_are_openai_errors(server):
    client = _client(server)
    card = client.models.retrieve("uniform")  # GET /v1/models/{id}: what clients ask to check a model exists
    assert card.id == "uniform" and card.object == "model" and card.model_extra is not None
    assert card.model_extra["harness"].startswith("uniform@")
    assert client.get("/models/", cast_to=object)["data"][0]["id"] == "uniform"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError, match="served models: uniform") as caught:
        client.models.retrieve("gpt-4o")
    assert caught.value.body["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError, match=r"POST /v1/completions") as caught:
        client.completions.create(model="uniform", prompt="When?")  # a route the server does not have
    assert caught.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(openai.APIStatusError, match="GET /v1/chat/completions") as wrong_method:
        client.get("/chat/completions", cast_to=object)  # a route asked with the wrong method
    assert wrong_method.value.status_code == 405 and wrong_method.value.response.headers["allow"] == "POST"


def test_the_serving_guides_examples_run_as_written(tmp_path: Path, reserved_tcp_port: int):
    """The guide's commands, its Python client and its curl line, copied from the page (only the port changed)."""
    page = (ROOT / "docs" / "guides" / "serving.md").read_text()
    bash = re.findall(r"```bash\n(.*?)```", page, re.S)
    python = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    port = str(reserved_tcp_port)
    setup, serve = bash[0].strip().splitlines()[:-1], bash[0].strip().splitlines()[-1].replace("8100", port)
    shell = f'videvolve() {{ "{sys.executable}" -m videvolve "$@"; }}\n' + "\n".join(setup)
    subprocess.run(["bash", "-ec", shell], cwd=tmp_path, env=env(), check=True, capture_output=True, timeout=300)
    key = {"VIDEVOLVE_SERVE_KEY": "change-me"}
    args = shlex.split(serve)[1:]
    assert args[0] == "serve" and "--api-key-env" in args
    with videvolve_server([*args, "--no-cache"], f"http://127.0.0.1:{port}/health", key, cwd=tmp_path):
        ran = subprocess.run([sys.executable, "-c", python.replace("8100", port)], cwd=tmp_path, text=True,
                             env={**env(), **key}, capture_output=True, timeout=300)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines()[0] == "D"  # as the page says
        curl = next(b for b in bash if b.startswith("curl"))
        if shutil.which("curl"):
            out = subprocess.run(["bash", "-ec", curl.replace("8100", port)], cwd=tmp_path, text=True,
                                 env={**env(), **key}, capture_output=True, timeout=300, check=True).stdout
            reply = json.loads(out)
            assert reply["choices"][0]["finish_reason"] == "stop", reply
            assert isinstance(json.loads(reply["choices"][0]["message"]["content"]), list)


def test_the_bearer_scheme_is_case_insensitive(server):
    """RFC 9110 11.1: the scheme is case-insensitive; `curl -H "Authorization: bearer $KEY"` was a 401."""
    import httpx

    for header in (f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"Bearer  {KEY}"):
        assert httpx.get(f"{server}/models", headers={"Authorization": header}).status_code == 200, header
    for header in (f"Bearer {KEY}x", f"Basic {KEY}", KEY, f"Bearer{KEY}", "Bearer", ""):
        assert httpx.get(f"{server}/models", headers={"Authorization": header}).status_code == 401, header
