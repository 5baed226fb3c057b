"""Writing a file whole or not at all: a temporary file beside it, renamed into place.

A kill, a power cut or a full disk in the middle of a write leaves the former file as it was (or none), never half
of the new one that a later read would take for the whole.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from videvolve.errors import StorageError


def write_text_atomic(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` whole; :class:`StorageError` naming ``what`` (``the result``) when it cannot."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # the name itself refused (too long), or no folder: nothing was made
            tmp.unlink(missing_ok=True)
        raise StorageError.writing(what, path, exc) from exc
