"""Append-only JSON-lines files (the diagnoses, a run's lineage and events) that survive a write stopped half-way.

A write a full disk, a kill or a power cut stops half-way leaves a last line with no newline that does not parse:
an unfinished write, never a record. Readers leave it out (:func:`complete_lines`); the next append cuts it off
first (:func:`append_lines`), so the record written next is not glued to it, and the run that repeats the unfinished
step writes it whole. Writes that fail are :class:`StorageError`: the run stops for ``--resume``.
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


def complete_lines(text: str) -> list[str]:
    """The lines of a file's ``text``, less a torn last one (no newline, not JSON); blank lines are kept."""
    lines = text.splitlines()
    if lines and not text.endswith("\n") and lines[-1].strip() and not _parses(lines[-1]):
        lines.pop()
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
    """Append ``lines`` (one JSON text each) to ``path`` after mending its end; ``what`` names it in errors."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+b") as fh:
            _mend(fh)
            fh.write("".join(line + "\n" for line in lines).encode("utf-8"))
    except OSError as exc:
        raise StorageError.writing(what, path, exc) from exc
