"""One exception tree for videvolve.

Media errors also subclass the matching builtin (as PyAV's ``InvalidDataError(FFmpegError, ValueError)`` does),
so callers that only know ``FileNotFoundError`` or ``ValueError`` still catch them.
"""

from __future__ import annotations

from pathlib import Path


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


class HarnessError(VidevolveError):
    """A harness failed on a task; recorded as an ``error`` outcome that scores 0."""


class BudgetExceeded(HarnessError):
    """A harness asked for more frames than its per-task budget."""
