"""One exception tree for videvolve, and the one taxonomy of a task's errors (:class:`ErrorKind`).

Errors also subclass the matching builtin (as PyAV's ``InvalidDataError(FFmpegError, ValueError)`` does), so
callers that only know ``FileNotFoundError`` or ``ValueError`` still catch them. The CLI prints an error of this
tree as one line; anything else is a bug and prints its traceback.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path


class ErrorKind(StrEnum):
    """Why a task failed. Harness errors score 0 with their cost counted; infrastructure errors are never scored.

    Infrastructure errors (endpoint down, auth, overload, unknown model) are retried, then stop the run cleanly
    for a later ``--resume``: they never become a task's result. Every other kind is the harness's own failure.
    """

    PARSE = "parse"
    """The model's reply, or the harness's answer, could not be read as an answer."""
    BUDGET = "budget"
    """The harness asked for more than its per-task budget (frames, context, handles, pixels)."""
    TIMEOUT = "timeout"
    """The harness ran past its wall-clock limit and was killed."""
    MEMORY = "memory"
    """The harness ran past its memory limit."""
    CRASH = "crash"
    """The harness raised, exited or broke the protocol."""
    STATIC = "static"
    """The static check refused the harness's code before it ran."""
    INVALID = "invalid"
    """The harness sent a request the SDK could not serve (wrong arguments, malformed messages)."""
    BAD_REQUEST = "bad_request"
    """The model server rejected the request (400, 413, 422: too long, undecodable media)."""
    MEDIA = "media"
    """The task's video cannot be read."""
    UNSUPPORTED = "unsupported"
    """The model said it cannot read this question or these pictures (SimVLM outside SynthWorld): a notice for the
    user, shown once; it scores 0 like any error but is not the harness's fault."""
    UNREACHABLE = "unreachable"
    """Infrastructure: the endpoint cannot be reached, or keeps failing (connection, 5xx, overload)."""
    AUTH = "auth"
    """Infrastructure: the endpoint refuses our credentials or does not serve the model."""

    @property
    def infrastructure(self) -> bool:
        """Retried then a clean stop; never a scored outcome."""
        return self in (ErrorKind.UNREACHABLE, ErrorKind.AUTH)

    @property
    def harness_fault(self) -> bool:
        """The candidate's own code is broken (validation sends it back to the editor)."""
        return self in (ErrorKind.STATIC, ErrorKind.CRASH, ErrorKind.PARSE, ErrorKind.TIMEOUT, ErrorKind.MEMORY,
                        ErrorKind.INVALID)


class VidevolveError(Exception):
    """Base of every error raised on purpose by videvolve."""


class MediaError(VidevolveError):
    """A video could not be found, read or written."""


class MediaNotFoundError(MediaError, FileNotFoundError):
    """The video file does not exist."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        super().__init__(f"video not found: {self.path} (check the path, or the task's 'video' field)")

    def __str__(self) -> str:
        return str(self.args[0])


class UnreadableVideoError(MediaError, ValueError):
    """The file exists but cannot be decoded (at all, or at ``time`` seconds)."""

    def __init__(self, path: str | Path, reason: str, time: float | None = None) -> None:
        self.path = str(path)
        self.time = time
        self.reason = reason
        if time is None:
            hint = "(check that it is a video file that plays; re-encoding it with ffmpeg often helps)"
            where = ""
        else:
            hint = "(the file is damaged here; earlier times may still decode, or re-encode the file)"
            where = f" at {time:.3f} s"
        super().__init__(f"cannot decode {self.path}{where}: {reason} {hint}")


class TimeOutOfRangeError(MediaError, ValueError):
    """A requested timestamp lies outside [0, duration]."""

    def __init__(self, path: str | Path, time: float, duration: float) -> None:
        self.path = str(path)
        self.time = time
        self.duration = duration
        super().__init__(
            f"time {time:.3f} s is outside [0, {duration:.3f}] s of {self.path} (pass clamp=True to clamp)"
        )


class UsageError(VidevolveError, ValueError):
    """A command, setting or argument the user gave cannot be used; the message says what to do."""


class InputNotFoundError(VidevolveError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class TaskFormatError(VidevolveError, ValueError):
    """A tasks or annotation file holds invalid records; ``problems`` lists each as 'file:line: reason'."""

    def __init__(self, path: str | Path, problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} invalid record(s) in {self.path}:\n  {shown}{more}")


class PredictionFormatError(VidevolveError, ValueError):
    """A prediction file cannot be scored (wrong shape, missing keys)."""


class ModelError(VidevolveError):
    """A model endpoint failed."""


class InfraError(ModelError):
    """Infrastructure failure (endpoint down, overload, timeout): retried, never scored."""


class ModelRequestError(ModelError):
    """The endpoint rejected the request (bad request, auth, unknown model): not retried."""


class EndpointError(InfraError):
    """The endpoint refuses us for a reason retrying will not fix (auth, unknown model, wrong URL): the run stops."""

    kind = ErrorKind.AUTH


class RequestRejected(ModelRequestError):
    """The server rejected this request (400, 413, 422, ...): that task's error, with the server's message."""

    kind = ErrorKind.BAD_REQUEST


class ContextTooLong(ModelRequestError):
    """The request would not fit the served context: refused before sending (that task's ``budget`` error)."""

    kind = ErrorKind.BUDGET


class HarnessError(VidevolveError):
    """A harness failed on a task, or a harness directory is unusable; a task's failure scores 0."""

    kind: ErrorKind = ErrorKind.CRASH


class RequestRefused(HarnessError):
    """The trusted parent refused a harness's request (a cap, a budget, bad arguments): that task's error."""

    def __init__(self, kind: ErrorKind | str, message: str) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)


class BudgetExceeded(HarnessError):
    """A harness asked for more frames than its per-task budget."""

    kind = ErrorKind.BUDGET
