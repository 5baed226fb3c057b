"""Every failure of an OpenAI-compatible endpoint, classified once (the task kinds come from :class:`ErrorKind`).

- 400, 413, 422 and any other 4xx not below: the request is wrong for this server; that task's ``bad_request``
  error, carrying the server's message.
- 401, 403, 404, and a 400 saying the server lacks the tool flags: retrying will not help; the run stops with what
  to fix (:class:`EndpointError`), never scoring every task as an error.
- connection errors (the client's, or ``httpx``'s asking ``GET /v1/models``), timeouts, 408, 409, 429, 5xx:
  retried with exponential backoff (honouring ``Retry-After``) for a window (10 minutes by default, so a vLLM
  restart does not end an overnight run), then the clean stop for ``--resume`` (:class:`InfraError`). The first
  failure of an endpoint says on stderr, at once, what is retried and until when (:class:`OutageNotice`); a wait
  between retries ends at once on Ctrl-C (:mod:`videvolve.interrupt`).
- a reply the client cannot read (``APIResponseValidationError``, any other ``openai.APIError``, or a 200 whose
  body is not a chat completion, which langchain reports as ``ValueError`` / ``TypeError``, or JSON nested too deep
  to parse, a ``RecursionError``): not retried; that request's error (:class:`UnreadableResponse`, a
  ``ModelRequestError``).

No ``openai`` exception leaves this module's :func:`call_with_retries`.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, stop_any
from tenacity.stop import stop_base
from tenacity.wait import wait_exponential_jitter

from videvolve import interrupt
from videvolve.errors import ContextTooLong, EndpointError, InfraError, RequestRejected, UnreadableResponse

__all__ = ["ContextTooLong", "EndpointError", "RequestRejected", "UnreadableResponse", "call_with_retries",
           "server_message"]

T = TypeVar("T")
RETRIED_STATUS = frozenset({408, 409, 429})
STOP_STATUS = frozenset({401, 403, 404})


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: ``error.message`` of an OpenAI/vLLM error body, or the body itself.

    The ``openai`` client keeps a body's ``error`` member as the body: vLLM's 401 (``{"error": "Unauthorized"}``)
    arrives as the string ``Unauthorized`` (a body that is no JSON, a proxy's page, as its first 300 characters).
    """
    body: Any = exc.body
    if isinstance(body, str) and body.strip():
        return " ".join(body.split())[:300]
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", exc))


def transient(exc: BaseException) -> bool:
    """Whether retrying may help: connection errors, timeouts, 408, 409, 429 and every 5xx except 501.

    vLLM 0.34 answers 501 for a ``NotImplementedError`` the request itself raised (a data URL that is not base64,
    vllm/multimodal/media/connector.py:340-343; serve/exception_handling/error_response.py:84-87): the same request
    gets it again every time, so it is that request's error, not an outage.
    """
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):  # includes timeouts
        return True
    if isinstance(exc, openai.APIStatusError | httpx.HTTPStatusError):
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else exc.response.status_code
        return status in RETRIED_STATUS or (status >= 500 and status != 501)
    return False


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds form), if any."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class _Wait:
    """Exponential backoff with jitter (0.5 s doubling to 30 s), or what ``Retry-After`` asks (up to 60 s)."""

    def __init__(self) -> None:
        self.backoff = wait_exponential_jitter(multiplier=0.5, max=30, jitter=0.5)

    def __call__(self, state: RetryCallState) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        return min(asked, 60.0) if asked is not None else float(self.backoff(state))


def describe(exc: BaseException) -> str:
    """One line for a failure."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {server_message(exc)}"
    return str(exc).rstrip(".") or type(exc).__name__


class OutageNotice:
    """One stderr line when an endpoint starts failing (what is retried, until when), one when it answers again.

    Printed once per outage of an endpoint however many tasks wait on it, on a terminal or not.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down: dict[str, float] = {}

    def _say(self, text: str) -> None:
        try:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed: the run goes on
            pass

    def failing(self, where: str, model: str, exc: BaseException | None, window_s: float, spent: float,
                max_retries: int | None) -> None:
        """An attempt failed and will be retried."""
        with self._lock:
            if where in self._down:
                return
            self._down[where] = time.monotonic()
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + max(0.0, window_s - spent)))
        limit = f", at most {max_retries} retries" if max_retries is not None else ""
        self._say(f"model endpoint {where or '?'} (model {model}) is failing ({describe(exc) if exc else '?'}): "
                  f"retrying until {until} (--retry-window {window_s:.0f} s{limit}), then the run stops cleanly "
                  "and a rerun (evolve: --resume) continues it. Ctrl-C stops now; finished work is kept.")

    def answered(self, where: str) -> None:
        """A request succeeded."""
        if where not in self._down:  # the common case, without the lock
            return
        with self._lock:
            since = self._down.pop(where, None)
        if since is not None:
            self._say(f"model endpoint {where} answers again (after {time.monotonic() - since:.0f} s)")


NOTICE = OutageNotice()

_listening = threading.local()


@contextlib.contextmanager
def outages_to(listener: Callable[[float | None], None]) -> Iterator[None]:
    """While in this block, this thread's requests tell ``listener`` when they meet a failing endpoint, and when not.

    ``listener(since)``: the request's first attempt failed and is retried (``since``: ``time.monotonic()`` when the
    request started); ``listener(None)``: the request ended (answered, refused, or the clean stop). A task's runner
    keeps that time off every clock: an endpoint that is down is never the harness's timeout.
    """
    before = getattr(_listening, "listener", None)
    _listening.listener = listener
    try:
        yield
    finally:
        _listening.listener = before


def call_with_retries(fn: Callable[[], T], where: str, model: str, window_s: float,
                      max_retries: int | None = None, sleep: Callable[[float], None] = interrupt.sleep) -> T:
    """``fn()``, with transient failures retried for ``window_s`` seconds; every failure mapped to our errors.

    The default ``sleep`` ends at once on Ctrl-C (:class:`~videvolve.interrupt.Interrupted`, an infrastructure stop).
    """
    stop: stop_base = stop_after_delay(window_s)
    if max_retries is not None:
        stop = stop_any(stop, stop_after_attempt(max_retries + 1))
    started = time.monotonic()
    listener: Callable[[float | None], None] | None = getattr(_listening, "listener", None)
    down = False

    def before_sleep(state: RetryCallState) -> None:
        nonlocal down
        if listener is not None and not down:
            down = True
            listener(started)
        NOTICE.failing(where, model, state.outcome.exception() if state.outcome else None, window_s,
                       time.monotonic() - started, max_retries)

    retrying = Retrying(retry=retry_if_exception(transient), stop=stop, wait=_Wait(), reraise=True, sleep=sleep,
                        before_sleep=before_sleep)
    attempts = 0
    try:
        for attempt in retrying:
            with attempt:
                attempts += 1
                reply = fn()
                NOTICE.answered(where)
                return reply
    except openai.APIStatusError as exc:
        raise classify(exc, where, model, attempts, time.monotonic() - started) from exc
    except (openai.APIConnectionError, httpx.TransportError, httpx.HTTPStatusError) as exc:
        raise InfraError(f"model endpoint {where or '?'} (model {model}) failed after {attempts - 1} retries over "
                         f"{time.monotonic() - started:.0f} s: {describe(exc)}. Check that the server is up; "
                         "finished work is kept.") from exc
    except (openai.APIError, ValueError, TypeError, RecursionError) as exc:  # the server answered something unreadable
        # (RecursionError: JSON nested past Python's limit, which json.loads does not report as a ValueError)
        raise UnreadableResponse(f"model endpoint {where or '?'} (model {model}) sent a reply the client cannot "
                                 f"read: {describe(exc)}") from exc
    finally:
        if down and listener is not None:
            listener(None)
    raise AssertionError("unreachable")  # pragma: no cover


def classify(exc: openai.APIStatusError, where: str, model: str, attempts: int, spent: float) -> Exception:
    """Our error for an HTTP failure that was not (or no longer) retried."""
    status, message = exc.status_code, server_message(exc)
    if transient(exc):
        return InfraError(f"model endpoint {where or '?'} (model {model}) failed after {attempts - 1} retries over "
                          f"{spent:.0f} s: HTTP {status}: {message}. Check the server; finished work is kept.")
    if status == 401:
        return EndpointError(f"{where}: authentication failed for model {model} (401: {message}). Pass the "
                             "server's --api-key in the environment variable named by --api-key-env "
                             "(OPENAI_API_KEY by default).")
    if status == 403:
        return EndpointError(f"{where}: permission denied for model {model} (403: {message}); check the key's "
                             "rights on this server.")
    if status == 404:
        return EndpointError(f"{where}: not found (404: {message}) for model {model!r}: check --base-url (it ends "
                             "in /v1 for vLLM) and that --model is the served name (`videvolve doctor` lists "
                             "the served models).")
    if status == 400 and refuses_request_mm_kwargs(message):
        return EndpointError(f"{where}: the server refuses a request's media settings ({status}: {message}); a clip "
                             "sent as a video (--clip-mode video) carries them so that vLLM decodes exactly its "
                             f"frames. Restart vLLM with --trust-request-mm-kwargs (videvolve serve-vllm sets it), or "
                             f"with {SERVER_CLIP_FLAGS} and pass --clip-kwargs server; finished work is kept, continue "
                             "with --resume.")
    if status == 400 and server_misconfigured(message):
        return EndpointError(f"{where}: the server cannot take tool calls ({status}: {message}). Restart vLLM with "
                             f"{TOOL_FLAGS} (videvolve serve-vllm sets them); finished work is kept, continue with "
                             "--resume.")
    return RequestRejected(f"{where} rejected the request ({status}) for model {model}: {message}")


TOOL_FLAGS = "--enable-auto-tool-choice --tool-call-parser hermes"
SERVER_CLIP_FLAGS = ("--media-io-kwargs '{\"video\": {\"video_backend\": \"opencv\", \"num_frames\": -1}}' "
                     "--mm-processor-kwargs "
                     "'{\"videos_kwargs\": {\"do_sample_frames\": false}}'")
"""vLLM's start-up flags that decode a clip's every frame, as a request's own fields would (add your max_pixels to
the same --mm-processor-kwargs object: a second one replaces the first)."""


def _said(message: str) -> str:
    """The server's message without the ``HTTP 400: `` that ``doctor``'s errors put before it."""
    return re.sub(r"^HTTP \d{3}: ", "", message.strip())


def refuses_request_mm_kwargs(message: str) -> bool:
    """Whether a 400 is vLLM 0.34 refusing a request's ``mm_processor_kwargs`` or ``media_io_kwargs``.

    Without ``--trust-request-mm-kwargs`` every request that carries them is refused
    (vllm/entrypoints/generate/base/protocol.py:72-97): a server's configuration, not the request's fault. Matched
    from the message's start, as :func:`server_misconfigured`.
    """
    text = _said(message)
    return text.startswith(("Per-request mm_processor_kwargs are disabled by default",
                             "Per-request media_io_kwargs are disabled by default"))


def server_misconfigured(message: str) -> bool:
    """Whether a 400 blames the server's start-up flags, not the request.

    vLLM 0.34 without a tool parser answers every request that carries tools with ``"auto" tool choice requires
    --enable-auto-tool-choice and --tool-call-parser to be set`` (or ``tool_choice=... requires --tool-call-parser
    to be set``): vllm/renderers/online_renderer.py:264-290. Matched from the message's start: a 400 that echoes a
    request's own text (a harness writes messages and tool schemas) must not stop the run on the harness's word.
    """
    text = _said(message)
    return text.startswith('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser') or (
        text.startswith("tool_choice=") and text.endswith("requires --tool-call-parser to be set"))
