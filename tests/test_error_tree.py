"""The error tree's rules, one test each: what stops the run, what is retried, what is one request's error, and
that no ``openai`` exception (nor langchain's reading of an unreadable reply) leaves ``call_with_retries``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import openai
import pytest

from videvolve import errors
from videvolve.config import ModelSettings
from videvolve.errors import (
    EndpointError,
    ErrorKind,
    InfraError,
    ModelError,
    ModelRequestError,
    RequestRejected,
    UnreadableResponse,
)
from videvolve.models import make_vlm
from videvolve.models.http_errors import call_with_retries

REQUEST = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def _status(code: int) -> openai.APIStatusError:
    response = httpx2.Response(code, request=REQUEST, json={"error": {"message": f"server says {code}"}})
    return openai.APIStatusError(f"HTTP {code}", response=response, body={"error": {"message": f"server says {code}"}})


def _call(exc: BaseException) -> tuple[BaseException, int]:
    """What ``call_with_retries`` raises for ``exc``, and how often it tried."""
    tries = [0]

    def fn() -> None:
        tries[0] += 1
        raise exc

    with pytest.raises(ModelError) as caught:
        call_with_retries(fn, "http://127.0.0.1:1/v1", "m", window_s=60, max_retries=2, sleep=lambda s: None)
    return caught.value, tries[0]


def _model_errors() -> list[type[ModelError]]:
    out, todo = [], [ModelError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo += cls.__subclasses__()
    return out


def test_every_model_error_is_on_one_branch_and_its_kind_says_which() -> None:
    """Infrastructure (never scored, the run stops) and one request's error (scored 0) never mix."""
    classes = _model_errors()
    assert {c.__name__ for c in classes} >= {"InfraError", "EndpointError", "ModelRequestError", "RequestRejected",
                                             "ContextTooLong", "UnreadableResponse"}
    for cls in classes[1:]:
        assert issubclass(cls, InfraError) != issubclass(cls, ModelRequestError), cls
        assert cls.kind.infrastructure == issubclass(cls, InfraError), cls
    assert not ErrorKind.AUTH.harness_fault and not ErrorKind.BAD_REQUEST.harness_fault


@pytest.mark.parametrize("code", [401, 403, 404])
def test_auth_and_unknown_models_stop_the_run_without_retrying(code: int) -> None:
    err, tries = _call(_status(code))
    assert isinstance(err, EndpointError) and isinstance(err, InfraError) and not isinstance(err, ModelRequestError)
    assert err.kind == ErrorKind.AUTH and tries == 1 and f"{code}" in str(err)


@pytest.mark.parametrize("exc", [_status(503), _status(429), openai.APIConnectionError(request=REQUEST)],
                         ids=["503", "429", "connection"])
def test_transient_failures_are_retried_then_stop_the_run(exc: BaseException) -> None:
    err, tries = _call(exc)
    assert type(err) is InfraError and err.kind == ErrorKind.UNREACHABLE and tries == 3
    assert "after 2 retries" in str(err)


@pytest.mark.parametrize("code", [400, 413, 422])
def test_a_rejected_request_is_that_requests_error_and_not_retried(code: int) -> None:
    err, tries = _call(_status(code))
    assert isinstance(err, RequestRejected) and isinstance(err, ModelRequestError) and tries == 1
    assert err.kind == ErrorKind.BAD_REQUEST and f"server says {code}" in str(err)


def test_a_response_the_client_cannot_validate_is_no_openai_exception() -> None:
    """``APIResponseValidationError`` is an ``openai.APIError`` but neither a status nor a connection error."""
    response = httpx2.Response(200, request=REQUEST, json={"choices": 5})
    err, tries = _call(openai.APIResponseValidationError(response=response, body={"choices": 5}))
    assert isinstance(err, UnreadableResponse) and isinstance(err, ModelRequestError) and tries == 1
    assert not isinstance(err, openai.APIError) and err.kind == ErrorKind.BAD_REQUEST


BODIES = {"not json": (b"oops", "text/plain"), "no choices": (b'{"id": "x"}', "application/json"),
          "wrong choices": (b'{"choices": 5}', "application/json"),
          "nested too deep": (b'{"choices": ' + b"[" * 200_000, "application/json")}  # main: RecursionError


@contextmanager
def _serving(body: bytes, content_type: str) -> Iterator[tuple[str, list[int]]]:
    hits: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            hits.append(1)
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", list(BODIES))
def test_a_server_answering_something_unreadable_is_that_requests_error(name: str) -> None:
    """A real server's 200 that is no chat completion: langchain raises ValueError or TypeError; we do not."""
    with _serving(*BODIES[name]) as (base, hits):
        vlm = make_vlm(ModelSettings(backend="openai", base_url=base, model="m", max_retries=2))
        with pytest.raises(UnreadableResponse, match="sent a reply the client cannot read"):
            vlm.complete([{"role": "user", "content": "hi"}])
    assert len(hits) == 1  # not retried


def test_the_docstrings_say_what_the_code_does() -> None:
    assert "auth" not in (ModelRequestError.__doc__ or "").split("Auth")[0]  # auth is EndpointError's
    assert "not retried" in (EndpointError.__doc__ or "").lower()
    assert "retried" in (InfraError.__doc__ or "") and "never scored" in (InfraError.__doc__ or "")
    assert "at once" in (errors.ErrorKind.__doc__ or "")  # auth stops without retries
