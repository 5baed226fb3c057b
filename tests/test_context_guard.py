"""What the endpoint says of its model (GET /v1/models): asked once, again after RECHECK_S; its context bounds
requests, its checkpoint keys replies and results."""

from __future__ import annotations

import functools
import time

import httpx
import pytest
from fastapi.responses import Response

from videvolve.config import ModelSettings
from videvolve.models.cache import request_key
from videvolve.models.context import ContextGuard, EndpointInfo, ServedModel, served_model
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim import SimVLM
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.testing import in_thread, serve_app, trickle


def test_a_length_not_reported_is_not_asked_for_again_and_an_unreachable_endpoint_is():
    asked: list[str] = []

    def fetch() -> ServedModel:
        asked.append("GET /v1/models")
        if len(asked) == 1:
            raise httpx.ConnectError("connection refused")  # the server is still starting
        return ServedModel()  # then it answers, without a length (not vLLM)

    endpoint = EndpointInfo(fetch)
    guard = ContextGuard(cost_model("qwen2.5-vl"), endpoint.max_model_len)
    assert guard.limit() is None and len(asked) == 1
    for _ in range(5):
        guard.check([{"role": "user", "content": "hello"}], None)
    assert guard.limit() is None and len(asked) == 2  # main: one GET before every request (7)


def test_what_a_real_server_reports_and_what_a_broken_one_does():
    with serve_app(create_app()) as base:
        assert served_model(base, "simvlm", None) == ServedModel(max_model_len=131072,
                                                                 root=f"simvlm@SimVLM-revision-{SimVLM.revision}")
        assert served_model(base, "another-model", None) == ServedModel()  # answered: not this model's
    with pytest.raises(httpx.TransportError):  # gone: not taken for a server that reports nothing
        served_model(base, "simvlm", None, timeout=2)
    broken = create_app()
    broken.router.routes = [r for r in broken.router.routes if getattr(r, "path", "") != "/v1/models"]

    @broken.get("/v1/models")
    async def models() -> dict[str, object]:
        return {"object": "list", "data": None}  # main: TypeError out of the guard, the run crashed

    with serve_app(broken) as base:
        assert served_model(base, "simvlm", None) == ServedModel()


@pytest.mark.slow
def test_another_checkpoint_under_the_same_served_name_shares_no_reply():
    """``vllm serve ckpt-a --served-model-name qwen``, then ckpt-b under the same name: a reply cached from the
    first is not the second's (its revision names the checkpoint vLLM reports as ``root``)."""
    messages = [{"role": "user", "content": "Which letter? A or B"}]
    keys = {}
    for checkpoint in ("/models/ckpt-a", "/models/ckpt-b", "qwen"):
        app = create_app("qwen", mimic=MimicSettings(checkpoint=checkpoint))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=5))
            keys[checkpoint] = (vlm.revision, request_key(vlm, messages, None))
    assert keys["/models/ckpt-a"][0] == "checkpoint=/models/ckpt-a"
    assert keys["/models/ckpt-a"][1] != keys["/models/ckpt-b"][1]  # main: the same key, ckpt-a's replies reused
    assert keys["qwen"][0] == ""  # served under its own name: the revision (and every key made so far) unchanged


@pytest.mark.slow
def test_a_server_restarted_at_the_same_address_with_another_checkpoint_is_asked_again(tmp_path, monkeypatch,
                                                                                         reserved_tcp_port):
    """``videvolve serve`` (or ``mcp``, or an overnight ``evolve``) in front of ``vllm serve ckpt-a
    --served-model-name qwen --max-model-len 8000``; the operator restarts vLLM on the same port with ckpt-b and
    4000. The client had asked GET /v1/models once, at its first request: it went on taking ckpt-a's replies from the
    response cache for ckpt-b, storing ckpt-b's under ckpt-a's key, and guarding requests with the old context."""
    from videvolve.models import context
    from videvolve.models.cache import ResponseCache, complete
    monkeypatch.setattr(context, "RECHECK_S", 0.2)  # vLLM takes far longer than RECHECK_S to load a checkpoint
    messages = [{"role": "user", "content": "Which letter? A or B"}]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    port, vlm, served, seen = reserved_tcp_port, None, {}, {}  # held between the two: no other worker takes it
    for checkpoint, length in (("/models/ckpt-a", 8000), ("/models/ckpt-b", 4000)):
        app = create_app("qwen", mimic=MimicSettings(checkpoint=checkpoint, max_model_len=length))
        with serve_app(app, port) as base:
            vlm = vlm or openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            complete(vlm, messages, None, cache)
            served[checkpoint] = app.state.stats["served"]
            seen[checkpoint] = (vlm.revision, vlm.served_context())
        time.sleep(0.3)  # the restart
    assert served == {"/models/ckpt-a": 1, "/models/ckpt-b": 1}  # main: ckpt-b 0, ckpt-a's reply from the cache
    assert seen["/models/ckpt-b"] == ("checkpoint=/models/ckpt-b", 3800)  # main: ckpt-a's, 7600


def _models_route(app, answer):
    """``app`` with its GET /v1/models replaced by ``answer(n)`` (n: how many times it was asked, from 1)."""
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/v1/models"]
    asked = [0]

    @app.get("/v1/models")
    async def models() -> Response:
        asked[0] += 1
        return answer(asked[0])

    return asked


def test_a_models_list_the_client_cannot_read_does_not_crash_the_run():
    """A broken or hostile endpoint's GET /v1/models (a body nested past Python's recursion limit, a gzip body that
    is not gzip) is a server that reports nothing readable, not an exception out of every request."""
    for body, headers in ((b"[" * 200_000, {}), (b"not gzip", {"content-encoding": "gzip"})):
        app = create_app("qwen", mimic=MimicSettings())
        _models_route(app, lambda n, body=body, headers=headers: Response(body, headers=headers,
                                                                          media_type="application/json"))
        with serve_app(app) as base:
            assert served_model(base, "qwen", None) == ServedModel()  # main: RecursionError, httpx.DecodingError
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=5))
            assert vlm.revision == "" and vlm.served_context() is None
            assert vlm.complete([{"role": "user", "content": "Which letter? A or B"}]).text


@pytest.mark.slow
def test_a_reply_cached_while_the_endpoint_was_still_starting_is_not_another_checkpoints(tmp_path):
    """The first request of ``tasks generate --sources perceived``, an editor or an investigator may find the server
    still loading (GET /v1/models not reached yet): its reply is ckpt-a's, not that of a model served under its own
    name, and ckpt-b, starting alike, does not get it from the cache."""
    from videvolve.models.cache import ResponseCache, complete

    messages = [{"role": "user", "content": "Which letter? A or B"}]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    served = {}
    for checkpoint in ("/models/ckpt-a", "/models/ckpt-b"):
        app = create_app("qwen", mimic=MimicSettings(checkpoint=checkpoint))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            asked: list[int] = []

            def fetch(base: str = base, asked: list[int] = asked) -> ServedModel:
                asked.append(1)
                if len(asked) == 1:  # counted by requests, not by the clock
                    raise httpx.ConnectError("connection refused")
                return served_model(base, "qwen", None)

            assert vlm.guard is not None
            vlm.endpoint = EndpointInfo(fetch)
            vlm.guard = ContextGuard(vlm.guard.cost, vlm.endpoint.max_model_len, vlm.guard.margin)
            complete(vlm, messages, None, cache)
            served[checkpoint] = app.state.stats["served"]
    assert served == {"/models/ckpt-a": 1, "/models/ckpt-b": 1}  # main: ckpt-b got ckpt-a's reply from the cache


@pytest.mark.slow
def test_a_gateway_busy_on_the_models_list_is_asked_again_not_taken_for_a_server_reporting_nothing():
    """A proxy in front of vLLM answers 503 while the server restarts or is overloaded: that GET /v1/models is
    asked again, as a failing request is retried, not taken as a server that reports no checkpoint and no length
    (the context guard off and replies keyed as a model served under its own name, for the whole run)."""
    from fastapi.responses import JSONResponse

    from videvolve.models.base import reach

    app = create_app("qwen", mimic=MimicSettings(checkpoint="/models/ckpt-a", max_model_len=4000))
    card = {"id": "qwen", "object": "model", "root": "/models/ckpt-a", "max_model_len": 4000}
    asked = _models_route(app, lambda n: JSONResponse({"error": "upstream busy"}, status_code=503) if n == 1
                          else JSONResponse({"object": "list", "data": [card]}))
    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
        reach(vlm)
        assert vlm.revision == "checkpoint=/models/ckpt-a"  # main: "" (the 503 was kept for the whole run)
        assert vlm.served_context() == 3800 and asked[0] == 2  # main: None, the context guard off


def test_a_context_length_no_server_can_have_does_not_refuse_every_request():
    """A broken endpoint reporting ``max_model_len`` 0 or below: not a length (vLLM's is at least 1), so the guard
    does not refuse every request as the harness's ``budget`` error, scored 0, on the server's word."""
    from fastapi.responses import JSONResponse

    for length in (0, -1):
        app = create_app("qwen", mimic=MimicSettings())
        card = {"id": "qwen", "object": "model", "root": "qwen", "max_model_len": length}
        _models_route(app, lambda n, card=card: JSONResponse({"object": "list", "data": [card]}))
        with serve_app(app) as base:
            assert served_model(base, "qwen", None) == ServedModel(root="qwen")  # main: max_model_len=0 / -1
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=5))
            assert vlm.complete([{"role": "user", "content": "Which letter? A or B"}]).text  # main: ContextTooLong


@pytest.mark.slow
def test_a_models_list_trickled_a_byte_at_a_time_or_endless_is_bounded():
    """``httpx``'s timeout is per read: a body trickled a byte every 0.2 s never tripped it, and the request held the
    lock every request of the run waits on (main: still reading after 12 s; now 2 s, then "not reached", asked again
    as a failing request is). A body larger than any models list is read no further than 4 MiB."""
    from fastapi.responses import StreamingResponse

    for body in (trickle, lambda: trickle(b" " * 65536, 0.0)):
        app = create_app("qwen", mimic=MimicSettings())
        _models_route(app, lambda n, body=body: StreamingResponse(body(), media_type="application/json"))
        with serve_app(app) as base:
            if body is trickle:
                with pytest.raises(httpx.ReadTimeout):
                    in_thread(functools.partial(served_model, base, "qwen", None, timeout=2), 12)
            else:
                known, took = in_thread(functools.partial(served_model, base, "qwen", None, timeout=2), 12)
                assert known == ServedModel() and took < 6


@pytest.mark.slow
def test_a_chat_reply_trickled_a_byte_at_a_time_ends_in_the_clean_stop_not_a_hang():
    """``--timeout`` is the time of a whole request: a reply trickled a byte every 0.2 s never tripped ``httpx``'s
    per-read timeout, and an editor's or investigator's request to it (no task runner around it) ran for ever.
    Now each attempt ends at 2 s, is retried as a timeout for the window (3 s), and the run stops for --resume."""
    from fastapi.responses import StreamingResponse

    from videvolve.errors import InfraError

    app = create_app("qwen", mimic=MimicSettings())
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/v1/chat/completions"]

    @app.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        return StreamingResponse(trickle(), media_type="application/json")

    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, timeout_s=2, retry_window_s=3))
        started = time.monotonic()
        with pytest.raises(InfraError, match="timed out"):
            in_thread(lambda: vlm.complete([{"role": "user", "content": "Which letter? A or B"}]), 30)
    assert time.monotonic() - started < 15
