"""Content fingerprints of media files: the whole file hashed, once per file version.

A stored result, a proxy and a cached transcript are reused by the fingerprint of the file they came from, so it
changes with any change of content. It used to hash the size and three 1 MB samples: an edit of the same size between
them (a shot replaced or faces blurred in a constant-bitrate or uncompressed file) kept it, and the old content's
results, proxy and transcript were served for the new one. Hashing a long video takes seconds (BLAKE2b reads about
1 GB/s), so each file version's fingerprint is kept in ``~/.cache/videvolve/fingerprints.sqlite``, keyed by its path,
device, inode, size, modification and change times: writing to a file sets its change time, which no user call sets
back, so an edit in place is hashed again. Where that database cannot be used, the file is hashed every time.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from videvolve.config import cache_home

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_SEEN: dict[str, tuple[tuple[int, ...], str]] = {}
"""This process's fingerprints, by resolved path: the version they are of and the digest."""


def memo_path() -> Path:
    """``~/.cache/videvolve/fingerprints.sqlite``."""
    return cache_home() / "fingerprints.sqlite"


def content_hash(path: str | Path) -> str:
    """BLAKE2b (128 bits) of the file's whole content and its size, in hex."""
    h = hashlib.blake2b(str(os.path.getsize(path)).encode(), digest_size=16)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(8 * 1024 * 1024), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(path: str | Path) -> str:
    """The content fingerprint of ``path``: :func:`content_hash`, read from the memo where this version is in it."""
    p = Path(path).resolve()
    st = p.stat()
    version = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if (known := _SEEN.get(str(p))) is not None and known[0] == version:
        return known[1]  # this process read it already: no database (every frame of a spliced task asks)
    digest = _kept(p, version)
    _SEEN[str(p)] = (version, digest)
    return digest


def _kept(p: Path, version: tuple[int, ...]) -> str:
    """The file version's fingerprint from the memo on disk, or hashed and written there."""
    try:
        with _LOCK, _open() as db:
            row = db.execute("SELECT dev, ino, size, mtime_ns, ctime_ns, digest FROM files WHERE path = ?",
                             (str(p),)).fetchone()
        if row is not None and tuple(row[:5]) == version:
            return str(row[5])
    except (sqlite3.Error, OSError) as exc:
        log.debug("fingerprint memo unavailable (%s): hashing %s", exc, p)
        return content_hash(p)
    digest = content_hash(p)
    after = p.stat()
    if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != version[2:]:
        return digest  # written while it was read: not kept
    try:
        with _LOCK, _open() as db:
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", (str(p), *version, digest))
    except (sqlite3.Error, OSError) as exc:
        log.debug("fingerprint memo not written (%s)", exc)
    return digest


@contextlib.contextmanager
def _open() -> Iterator[sqlite3.Connection]:
    """The memo (created on first use), closed on leaving the block (autocommit: each statement is kept at once)."""
    path = memo_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
        db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, size INTEGER, "
                   "mtime_ns INTEGER, ctime_ns INTEGER, digest TEXT)")
        yield db
