"""One process at a time per run or evaluation folder.

Two processes writing one folder (``evolve --resume`` started twice on one run, a benchmark restarted while its
first copy still runs, two ``eval --out`` into one place) overwrite each other's results: a stored answer is
replaced by another process's, and later reads, a resumed run's decisions and every replay reuse it. Each writer
holds an advisory lock, ``fcntl.flock`` on ``<folder>/.videvolve.lock``, for as long as it writes; a second
process stops at once with :class:`FolderBusy`, which names the holder. The kernel releases the lock when its
process ends, however it ends, so a killed run leaves no stale lock behind.

Within one process a folder may be held several times (holds nest), and its threads share it. The lock file is
never inherited by child processes (it is opened close-on-exec). Folders on file systems without ``flock`` (some
network mounts) are not protected; the run still works.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from videvolve.errors import UsageError

LOCK_NAME = ".videvolve.lock"


class FolderBusy(UsageError):
    """Another process holds the folder; the message names it and what to do."""


_held: dict[Path, tuple[int, int]] = {}
"""Folders this process holds: the lock file's descriptor and how many holds are open."""
_guard = threading.Lock()


def _holder(fd: int) -> str:
    """What the holder wrote into the lock file (pid, command, since when), as words."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info.get("since", 0))))
    return f"process {info.get('pid', '?')}, `{info.get('command', '?')}`, since {since}"


def _acquire(folder: Path, what: str, hint: str) -> int:
    """A descriptor of the folder's lock file, locked for this process; :class:`FolderBusy` if another holds it."""
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return fd  # no flock on this file system: unprotected, as before
        holder = _holder(fd)
        os.close(fd)
        raise FolderBusy(f"the {what} {folder} is in use by another videvolve process ({holder}); two processes "
                         "writing one folder would overwrite each other's files. Wait for it to end (or stop "
                         f"it), or {hint}.") from None
    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300]
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}).encode(), 0)
    return fd


class Held:
    """One hold of a folder by this process; :meth:`release` ends it (once, whatever the number of calls)."""

    def __init__(self, key: Path) -> None:
        self.key = key
        self._released = False

    def release(self) -> None:
        """End this hold; the lock goes when the process's last hold of the folder ends."""
        with _guard:
            if self._released:
                return
            self._released = True
            fd, count = _held[self.key]
            if count > 1:
                _held[self.key] = (fd, count - 1)
                return
            del _held[self.key]
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def acquire(folder: Path, what: str = "folder", hint: str = "give this command another folder") -> Held:
    """Hold ``folder`` (created if missing) for this process until :meth:`Held.release`.

    ``what`` names it in the error (``run folder``, ``evaluation folder``, ``diagnosis memory``), ``hint`` says
    what else to do than wait.
    """
    folder.mkdir(parents=True, exist_ok=True)
    key = folder.resolve()
    with _guard:
        if key in _held:
            fd, count = _held[key]
            _held[key] = (fd, count + 1)
        else:
            _held[key] = (_acquire(key, what, hint), 1)
    return Held(key)


@contextlib.contextmanager
def hold(folder: Path, what: str = "folder", hint: str = "give this command another folder") -> Iterator[None]:
    """Hold ``folder`` (created if missing) for this process until the block ends (``hint``: as :func:`acquire`)."""
    held = acquire(folder, what, hint)
    try:
        yield
    finally:
        held.release()


def ensure_free(folder: Path, what: str = "folder") -> None:
    """Raise :class:`FolderBusy` when another process holds ``folder`` (before deleting or replacing it)."""
    if (folder / LOCK_NAME).exists():
        with hold(folder, what):
            pass


def remove_tree(folder: Path, what: str = "folder") -> None:
    """Delete ``folder`` for a fresh start, unless a process holds it or a folder in it (:class:`FolderBusy`).

    A benchmark or the demo that starts over must not delete a run another of its copies is still writing: that
    copy would go on writing results into the new run's folder.
    """
    if not folder.exists():
        return
    for lock in folder.rglob(LOCK_NAME):
        ensure_free(lock.parent, what)
    shutil.rmtree(folder, ignore_errors=True)
