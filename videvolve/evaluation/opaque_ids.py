"""Opaque task ids: harness code sees a random id per task instead of the task's own.

A predictable id (``video007-012``) lets a candidate special-case one question and read its answer off the gate's
aggregate. So every folder of results keeps its own mapping from real to random ids (``opaque_ids.json``, written
0600 by the trusted parent): ids are random, not derived from the video or the position, stable across
``--resume`` (the file is reused), and never leave the parent; results, submission files and memory keep real ids.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path

FILE = "opaque_ids.json"


class OpaqueIds:
    """The real -> opaque mapping of one folder of results."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        self._lock = threading.Lock()
        self._ids: dict[str, str] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def of(self, task_id: str) -> str:
        """The opaque id of a task (made, and stored, on first use)."""
        with self._lock:
            if task_id not in self._ids:
                taken = set(self._ids.values())
                new = f"task-{secrets.token_hex(6)}"
                while new in taken:
                    new = f"task-{secrets.token_hex(6)}"
                self._ids[task_id] = new
                self._save()
            return self._ids[task_id]

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(self._ids, fh)
        tmp.replace(self.path)
