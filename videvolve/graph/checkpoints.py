"""LangGraph's SQLite checkpointer on a run's ``checkpoints.sqlite``, whose failures say which file and what to do.

A full disk (or a folder that cannot be written) is the run's storage failing: :class:`StorageError`, so the run
stops for ``--resume`` like any other write of it. A file that is no database any more (overwritten, cut short) is
:class:`UsageError` naming it. Neither is left as sqlite's traceback, which the CLI would call a bug.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from videvolve.errors import StorageError, UsageError, VidevolveError

STORAGE = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM")
"""sqlite's errors (by name prefix) of a file that cannot be written or opened."""
DAMAGED = ("SQLITE_NOTADB", "SQLITE_CORRUPT")
"""sqlite's errors of a file that is not (any more) a readable database."""


def checkpoint_error(path: Path, exc: sqlite3.Error) -> VidevolveError | None:
    """The error to raise for ``exc`` from the checkpoints at ``path`` (None: not the file's fault, re-raise it)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(STORAGE):
        return StorageError(f"cannot write the run's checkpoints {path}: {exc} (was its folder deleted or moved, or "
                            "is the disk full? Everything finished is kept: fix it, then resume)")
    if name.startswith(DAMAGED):
        return UsageError(f"{path} is not a readable checkpoint database ({exc}): the run's progress cannot be read "
                          "back. Put back a copy of it from before it was damaged to resume, or start the run again "
                          "with a new --run (the response cache answers the model calls already paid for).")
    return None


class RunCheckpoints(SqliteSaver):
    """A :class:`SqliteSaver` on ``path`` (the connection is closed by :meth:`close`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            conn = sqlite3.connect(str(path), check_same_thread=False)
        except sqlite3.Error as exc:
            raise checkpoint_error(path, exc) or exc from exc
        super().__init__(conn)

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """SqliteSaver's cursor (every read and write goes through it), its sqlite errors as ours."""
        try:
            with super().cursor(transaction) as cur:
                yield cur
        except sqlite3.Error as exc:
            raise checkpoint_error(self.path, exc) or exc from exc

    def close(self) -> None:
        """Close the database."""
        self.conn.close()
