"""Append-only JSON-lines files (the diagnoses, a run's lineage and events) that survive a write stopped half-way.

A write a full disk, a kill or a power cut stops half-way leaves a last line with no newline that does not parse:
an unfinished write, never a record. Readers leave it out (:func:`read_lines`, on the bytes: a line cut inside a
character must not stop the file decoding); the next append cuts it off first (:func:`append_lines`), so the record
written next is not glued to it, and the run that repeats the unfinished step writes it whole. Lines are written as
ASCII (non-ASCII escaped, as ``json.dumps`` does), so a cut never splits a character. Writes that fail are
:class:`StorageError`: the run stops for ``--resume``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from videvolve.errors import StorageError


def _parses(line: bytes | str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def read_lines(path: Path) -> list[bytes]:
    """The lines of ``path`` (none when it does not exist), less a torn last one (no newline, not JSON or not UTF-8).

    Blank lines are kept, so a line's index + 1 is its line number. Each line is parsed by its reader (``json.loads``
    takes bytes; a line that is not UTF-8 is a ``ValueError`` there, as other damage is).
    """
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    last = lines.pop()  # what follows the last newline: nothing, when the last write was whole
    if last.strip() and _parses(last):
        lines.append(last)  # a whole line written by hand without a final newline
    return lines


def _mend(fh: BinaryIO) -> None:
    """Cut off a torn last line (or end a whole one that lacks its newline) before appending."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    fh.seek(0)
    data = fh.read()
    start = data.rfind(b"\n") + 1
    if _parses(data[start:]):
        fh.write(b"\n")  # written by hand without a final newline: kept
    else:
        fh.truncate(start)


def append_lines(path: Path, lines: Sequence[str], what: str) -> None:
    """Append ``lines`` to ``path`` after mending its end; ``what`` names it in errors.

    Each line is one JSON text in ASCII (``json.dumps`` with its default ``ensure_ascii``): a cut never splits a
    character.
    """
    data = "".join(line + "\n" for line in lines).encode("ascii")  # a non-ASCII line is a bug of the caller
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+b") as fh:
            _mend(fh)
            fh.write(data)
    except OSError as exc:
        raise StorageError.writing(what, path, exc) from exc
