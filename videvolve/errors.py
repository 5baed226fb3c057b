"""One exception tree for videvolve, and the one taxonomy of a task's errors (:class:`ErrorKind`).

Errors also subclass the matching builtin (as PyAV's ``InvalidDataError(FFmpegError, ValueError)`` does), so
callers that only know ``FileNotFoundError`` or ``ValueError`` still catch them. The CLI prints an error of this
tree as one line; anything else is a bug and prints its traceback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class ErrorKind(StrEnum):
    """Why a task failed. Harness errors score 0 with their cost counted; infrastructure errors are never scored.

    Infrastructure errors stop the run cleanly for a later ``--resume`` and never become a task's result: an
    endpoint down or overloaded (``unreachable``) after retries over a window, one that refuses us (``auth``: bad
    key, unknown model, wrong URL) at once, since retrying cannot fix it. Every other kind is that task's error,
    scored 0 with its cost counted (the harness's own failure, or a request the server rejected).
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
        """A clean stop of the run (after retries where they can help); never a scored outcome."""
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


class SpliceSourceError(MediaError, ValueError):
    """A video a generated task's needle plan splices in is gone, or is not the file the plan was made from.

    The task fails as a whole before its harness starts: were only the frames inside the splice to fail, the
    failures would tell harness code where the splice is (the answer of "When does footage from another video
    appear?"). Said to the user only.
    """

    def __init__(self, path: str | Path, changed: bool) -> None:
        self.path = str(path)
        self.changed = changed
        what = "has been replaced or changed since" if changed else "is gone since"
        super().__init__(
            f"{self.path}: this task shows a few seconds of that video (a splice made by `videvolve tasks "
            f"generate`), and it {what} the tasks were generated, so the task was not run; put the original file "
            f"back at that path, or generate the tasks again (`videvolve tasks generate VIDEOS_DIR --out ...`)"
        )


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


class HostError(VidevolveError, OSError):
    """The machine cannot do what a task needs of it (write the run's files, start a sandbox).

    Infrastructure, never a task's error: the run stops, everything finished is kept, and ``--resume`` continues once
    it is fixed.
    """


class StorageError(HostError):
    """A run's or an evaluation's own files cannot be written (the folder was deleted or moved, the disk is full)."""

    @classmethod
    def writing(cls, what: str, path: Path, exc: OSError) -> StorageError:
        """The error for ``exc`` raised while writing ``what`` (``the trace``, ``the result``) at ``path``."""
        import errno

        if exc.errno in (errno.ENOTDIR, errno.EEXIST):  # a path that runs through a file (mkdir: EEXIST)
            return cls(f"cannot write {what} {path}: part of that path is a file, not a folder: choose another path")
        if exc.errno == errno.EISDIR:
            return cls(f"cannot write {what} {path}: a folder is in the way (move it, or give another "
                       "path)")
        return cls(f"cannot write {what} {path}: {exc.strerror or exc} (was its folder deleted or moved, or is the "
                   "disk full? Everything finished is kept: fix it, then resume)")


class SandboxStartError(HostError):
    """No sandboxed interpreter can be started (the system refuses new processes, bubblewrap fails at once)."""


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
    """A model endpoint failed.

    Two branches, never mixed: :class:`InfraError` stops the run, never scored; :class:`ModelRequestError` is that
    one request's failure (a task's error, or the end of an agent's conversation). No ``openai`` exception leaves
    ``models.http_errors.call_with_retries``: each becomes one of these.
    """

    kind: ErrorKind


class InfraError(ModelError):
    """Infrastructure: never scored; the run stops cleanly for ``--resume``.

    Transient failures (endpoint down, overload, timeouts, 5xx, 429) are retried for a window first;
    :class:`EndpointError` is not retried.
    """

    kind = ErrorKind.UNREACHABLE


class EndpointError(InfraError):
    """The endpoint refuses us for a reason retrying will not fix (auth, unknown model, wrong URL).

    Not retried: the run stops at once with what to fix.
    """

    kind = ErrorKind.AUTH


class ModelRequestError(ModelError):
    """The endpoint rejected this request, or its reply cannot be read: not retried.

    That task's error (scored 0) or the end of an agent's conversation, never a stop of the run. Auth and unknown
    models are :class:`EndpointError` (infrastructure), not this.
    """

    kind = ErrorKind.BAD_REQUEST


class RequestRejected(ModelRequestError):
    """The server rejected this request (400, 413, 422, ...): that task's error, with the server's message."""

    kind = ErrorKind.BAD_REQUEST


class UnreadableResponse(ModelRequestError):
    """The endpoint answered with a body the client cannot read (``openai.APIResponseValidationError``)."""

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


# ---- errors a person can act on: pydantic validation errors and JSON syntax errors in plain words ----
#
# ``plain_errors`` turns ``answer.list[function-after[_ordered(), Interval]].0: Value error, interval start 24.25 is
# after its end 17.0`` into ``answer, item 1: interval start 24.25 is after its end 17.0``: union branches are dropped
# from the path (and the branches the input plainly was not meant for are dropped from the messages), list positions
# are counted from 1, and pydantic's prefixes go.

_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "tuple", "set", "none", "bytes"}
_PREFIXES = ("Value error, ", "Assertion failed, ")
_PLAIN = {
    "missing": "missing (this field is required)",
    "extra_forbidden": "not a known field (check its spelling, or remove it)",
}


def _is_branch(part: Any) -> bool:
    """Whether a location part names a union branch (``str``, ``list[...]``, ``Interval``), not a field."""
    return isinstance(part, str) and (not part.isidentifier() or part in _TYPE_NAMES or part[:1].isupper())


def _path(loc: Sequence[Any]) -> str:
    fields: list[str] = []
    for part in loc:
        if isinstance(part, int):
            fields.append(f"item {part + 1}")
        elif not _is_branch(part):
            fields.append(part)
    return ", ".join(_join_dotted(fields))


def _join_dotted(parts: list[str]) -> list[str]:
    """``meta``, ``key`` -> ``meta.key``; ``answer``, ``item 1`` stay separate."""
    out: list[str] = []
    for p in parts:
        if out and not p.startswith("item ") and not out[-1].startswith("item "):
            out[-1] = f"{out[-1]}.{p}"
        else:
            out.append(p)
    return out


def _message(e: dict[str, Any]) -> str:
    msg = _PLAIN.get(e["type"], e["msg"])
    for prefix in _PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


def _got(errors: list[dict[str, Any]]) -> str:
    """`` (got 5)`` after a wrong-type message, to show what was there."""
    if not any(_is_type_error(e) or e["type"] in ("literal_error", "enum") for e in errors):
        return ""
    shown = repr(errors[0].get("input"))
    return f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"


def _is_type_error(e: dict[str, Any]) -> bool:
    return e["type"].endswith(("_type", "_parsing"))


def plain_errors(err: ValidationError) -> list[str]:
    """One ``path: message`` line per problem, without pydantic's internal names."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in err.errors():
        groups.setdefault(_path(e["loc"]), []).append(dict(e))
    # a union reports every branch: keep the branches the input was meant for (errors other than a wrong type)
    field_of = {path: path.split(",")[0] for path in groups}
    meant = {field_of[p] for p, es in groups.items() if any(not _is_type_error(e) for e in es)}
    lines = []
    for path, errors in groups.items():
        if field_of[path] in meant and all(_is_type_error(e) for e in errors) and \
                any(_is_branch(x) for e in errors for x in e["loc"]):
            continue
        messages = list(dict.fromkeys(_message(e) for e in errors))
        if len(messages) > 1 and all(m.startswith("Input should be ") for m in messages):
            messages = ["Input should be " + " or ".join(m.removeprefix("Input should be ") for m in messages)]
        text = "; ".join(messages) + _got(errors)
        lines.append(f"{path}: {text}" if path else text)
    return lines


def describe(err: ValidationError) -> str:
    """:func:`plain_errors` on one line."""
    return "; ".join(plain_errors(err))


def json_error(path: Any, exc: json.JSONDecodeError, lineno: int | None = None) -> str:
    """``FILE:LINE:COLUMN: not JSON (...)``; ``lineno``: the file's line when ``exc`` came from that line alone."""
    line = exc.lineno if lineno is None else lineno + exc.lineno - 1
    return f"{path}:{line}:{exc.colno}: not JSON ({exc.msg} at line {line}, column {exc.colno})"


class Cancelled(VidevolveError):
    """The one who asked went away (a server's client disconnected); the harness was stopped, nothing is scored."""
