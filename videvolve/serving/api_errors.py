"""The error replies of ``videvolve serve``: OpenAI's error shape, and the status of each failure."""

from __future__ import annotations

import logging
from typing import Any

from fastapi.responses import JSONResponse

from videvolve.errors import (
    EndpointError,
    HarnessError,
    HostError,
    InfraError,
    InputNotFoundError,
    MediaError,
    UsageError,
    VidevolveError,
)
from videvolve.serving.media import OutsideMediaRoots, VideoUnreachable

log = logging.getLogger(__name__)


class ApiError(VidevolveError):
    """An error reply: HTTP status, OpenAI error type, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind

    def body(self) -> dict[str, Any]:
        """OpenAI-style error JSON (also an error event in a stream)."""
        return {"error": {"message": str(self), "type": self.kind, "param": None, "code": self.status}}

    def response(self) -> JSONResponse:
        """The error reply."""
        return JSONResponse(status_code=self.status, content=self.body())


def error_reply(exc: Exception) -> ApiError:
    """The reply for an error raised while answering."""
    if isinstance(exc, OutsideMediaRoots):
        return ApiError(403, "permission_error", str(exc))
    if isinstance(exc, EndpointError):
        return ApiError(502, "bad_gateway", f"the model endpoint behind the harness refuses us: {exc}")
    if isinstance(exc, InfraError):
        return ApiError(503, "service_unavailable", f"the model endpoint behind the harness is down: {exc}")
    if isinstance(exc, HostError):  # no sandbox, no processes left, a full disk: this machine's, as in a run
        log.error("this server cannot run a harness: %s", exc)
        return ApiError(503, "service_unavailable", f"this server cannot run the harness now: {exc}")
    if isinstance(exc, HarnessError):  # what the server answers with is unusable (a version edited on disk)
        log.error("the server's harness cannot be used: %s", exc)
        return ApiError(503, "service_unavailable", f"this server's harness cannot be used: {exc}; restart the server "
                        "with a harness that is not being edited (copy it first)")
    if isinstance(exc, MediaError | InputNotFoundError | UsageError | VideoUnreachable):
        return ApiError(400, "invalid_request_error", str(exc))
    log.error("a bug in videvolve while answering", exc_info=exc)  # returned from its thread: nothing is being handled
    return ApiError(500, "internal_error", f"a bug in videvolve, not in your request ({type(exc).__name__}: {exc}); "
                    "the server log has the traceback")
