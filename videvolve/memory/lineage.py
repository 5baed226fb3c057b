"""Harness lineage: one JSON line per change of a version, the last line of a version wins (the one merge).

``evolve`` appends a line whenever a version's entry changes (a resumed run may append the same version again,
with a later decision or score); every reader gets the merged entry: the fields of all lines of a version, a later
line's value replacing an earlier one's.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from videvolve.errors import UsageError
from videvolve.memory.jsonl import append_lines, read_lines


class LineageRecord(BaseModel):
    """A harness version of a run: its parent, how it was made, its gate decision and selection scores."""

    model_config = ConfigDict(extra="allow")

    version: str
    parent: str | None = None
    iteration: int | None = Field(None, description="the iteration that made it, counted from 0 (the seed: 0)")
    operator: str | None = Field(None, description="how it was made: a heuristic operator, 'llm', ... (seed: None)")
    decision: str | None = Field(None, description="seed, accepted, rejected, dropped, pending, ...")
    reason: str | None = None
    score: float | None = Field(None, description="mean selection score")
    cost: float | None = Field(None, description="mean cost per selection question")
    frames: float | None = Field(None, description="mean distinct frames per selection question")
    rung: int | None = None
    rungs: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields its lines set (extra ones included), as they are stored."""
        return self.model_dump(exclude_unset=True)


class LineageStore:
    """The lineage file of a run: read merged, appended to when a version's entry changes."""

    def __init__(self, path: Path, lock: threading.Lock | None = None) -> None:
        self.path = path
        self._lock = lock or threading.Lock()

    def read(self) -> dict[str, LineageRecord]:
        """Every version, in the order of its first line, merged (the last line of a version wins).

        Raises :class:`UsageError` naming the file and line when a line is not a lineage entry (a last line that a
        stopped write left unfinished is no entry: it is left out, and the resumed run records it again).
        """
        merged: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(read_lines(self.path), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                version = rec["version"]
            except (ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"{self.path}:{n}: not a lineage entry ({exc}); remove or repair that line") \
                    from None
            merged[version] = {**merged.get(version, {}), **rec}
        try:
            return {v: LineageRecord.model_validate(d) for v, d in merged.items()}
        except ValidationError as exc:
            raise UsageError(f"{self.path}: an entry does not read as a lineage entry: {exc}") from None

    def record(self, version: str, **data: Any) -> None:
        """Add or update one version's entry (idempotent: nothing is written when nothing changes)."""
        old = self.read().get(version)
        current = old.as_dict() if old is not None else {}
        merged = {**current, "version": version, **data}
        if merged != current:
            with self._lock:
                append_lines(self.path, [json.dumps(merged, default=float)], "the run's lineage")
