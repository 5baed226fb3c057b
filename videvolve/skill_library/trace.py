"""A task's trace: one JSON line per step, with the harness's own notes capped in number and size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_NOTES = 1000
"""Log and tool notes a harness may leave per task; later ones are dropped (one line says so)."""
MAX_NOTE_CHARS = 4000
"""A note's data, as JSON, is cut to this many characters."""


class TraceWriter:
    """Appends one JSON line per step to a task's trace file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.step = 0
        self.notes = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def write(self, event: str, **data: Any) -> None:
        """One step."""
        self.step += 1
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": self.step, "event": event, **data}, default=str) + "\n")

    def note(self, event: str, **data: Any) -> None:
        """A step the harness asked for (``log``, ``tool``): at most :data:`MAX_NOTES`, each size-capped."""
        self.notes += 1
        if self.notes > MAX_NOTES:
            if self.notes == MAX_NOTES + 1:
                self.write("notes_capped", error=f"more than {MAX_NOTES} log or tool notes; later ones dropped")
            return
        clipped = {k: v if len(text := json.dumps(v, default=str)) <= MAX_NOTE_CHARS else text[:MAX_NOTE_CHARS]
                   for k, v in data.items()}
        self.write(event, **clipped)
