"""An ``httpx`` client whose requests end within a total time (``httpx``'s own timeouts are per read).

A server (or a proxy before it) that trickles its reply a byte at a time never trips a per-read timeout: a request
to it would run for ever, and with it an editor's or investigator's step of the run. Through this client the reply's
body is read until the request's deadline, then :class:`httpx.ReadTimeout`, which the model client retries as any
timeout (:mod:`videvolve.models.http_errors`) and which ends in the run's clean stop if it goes on. Event hooks, not
a transport of its own: the client keeps ``httpx``'s transports (and the proxies the environment names).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx

_SENT = "videvolve.sent"


class _UntilDeadline(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, deadline: float, request: httpx.Request, total_s: float) -> None:
        self._stream, self._deadline, self._request, self._total_s = stream, deadline, request, total_s

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout(f"the reply to {self._request.url} was still arriving {self._total_s:g} s "
                                        "after the request was sent", request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


def total_timeout_client(total_s: float) -> httpx.Client:
    """A client whose replies must have arrived in full ``total_s`` seconds after their request was sent."""

    def sent(request: httpx.Request) -> None:
        request.extensions[_SENT] = time.monotonic()

    def bounded(response: httpx.Response) -> None:
        started = response.request.extensions.get(_SENT, time.monotonic())
        if isinstance(response.stream, httpx.SyncByteStream):
            response.stream = _UntilDeadline(response.stream, started + total_s, response.request, total_s)

    return httpx.Client(timeout=total_s, follow_redirects=True,
                        event_hooks={"request": [sent], "response": [bounded]})
