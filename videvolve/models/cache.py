"""An on-disk response cache keyed by model, revision, decoding settings and messages (image bytes hashed).

The endpoint address is not part of the key, so re-validation and resumed runs never pay twice for the same
request. Hits and misses are counted here; each reply served from the cache is marked ``cached``, so a task's
usage counts its cache hits wherever it ran (``CacheUse`` sums them for a summary line).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from videvolve.errors import StorageError, UsageError
from videvolve.models.base import (
    VLM,
    Message,
    Reply,
    Tool,
    check_context,
    reach,
    request_timeout_of,
    served_context_of,
)


def _fingerprint(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _fingerprint(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_fingerprint(v) for v in value]
    if isinstance(value, str) and value.startswith("data:") and len(value) > 64:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    return value


def request_key(vlm: VLM, messages: list[Message], tools: list[Tool] | None) -> str:
    """The cache key of one request."""
    payload = {"model": vlm.name, "revision": vlm.revision, "decoding": vlm.decoding(),
               "messages": _fingerprint(messages), "tools": _fingerprint(tools or [])}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ResponseCache:
    """SQLite-backed; safe to share between threads of one process and between processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:  # a --cache that is no database (a video, a folder) was a traceback
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._open()
        except (OSError, sqlite3.DatabaseError) as exc:
            raise UsageError(f"cannot open the response cache {self.path}: {exc} (pass --cache the path of a response "
                             "cache or of a file to create, or --no-cache)") from None
        self.hits = 0
        self.misses = 0

    def _open(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL, model TEXT)")
        if "model" not in {row[1] for row in self._db.execute("PRAGMA table_info(replies)")}:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it a moment ago
                self._db.execute("ALTER TABLE replies ADD COLUMN model TEXT")  # a cache made before names were kept
        self._db.commit()

    def get(self, key: str) -> Reply | None:
        """A stored reply, marked ``cached``."""
        with self._lock, self._storage("read"):
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        reply = Reply.from_dict(json.loads(row[0]))
        reply.cached = True
        return reply

    def put(self, key: str, reply: Reply, model: str | None = None) -> None:
        """Store a reply (``model``: the served name it came from, so its replies can be told and cleared)."""
        with self._lock, self._storage("write"):
            self._db.execute("INSERT OR REPLACE INTO replies (key, reply, model) VALUES (?, ?, ?)",
                             (key, json.dumps(reply.to_dict()), model))
            self._db.commit()

    def models(self) -> dict[str | None, int]:
        """Stored replies by the model they came from (None: stored before names were kept)."""
        with self._lock, self._storage("read"):
            rows = self._db.execute("SELECT model, COUNT(*) FROM replies GROUP BY model ORDER BY model").fetchall()
        return {model: int(n) for model, n in rows}

    def clear(self, model: str | None = None) -> int:
        """Forget the replies of ``model`` (None: every reply); how many were forgotten."""
        with self._lock, self._storage("write"):
            if model is None:
                gone = self._db.execute("DELETE FROM replies").rowcount
            else:
                gone = self._db.execute("DELETE FROM replies WHERE model = ?", (model,)).rowcount
            self._db.commit()
        return int(gone)

    @contextlib.contextmanager
    def _storage(self, verb: str) -> Iterator[None]:
        """Turn sqlite failing on the file (its disk full, the file damaged) into :class:`StorageError` naming it.

        Not the harness's error: the request asking through the cache would have been scored 0 with it (and
        reused on resume); the run stops for ``--resume`` instead.
        """
        try:
            yield
        except sqlite3.ProgrammingError:  # a closed cache used, a bug here: not the file's fault
            raise
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.rollback()
            raise StorageError(f"cannot {verb} the response cache {self.path}: {exc} (is the disk full? Free space, "
                               "or delete the file (its replies are paid for again) or pass --no-cache; everything "
                               "finished is kept: then resume)") from exc

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


class CacheUse(BaseModel):
    """How many of the model replies a command used came from the response cache."""

    replies: int = 0
    from_cache: int = 0
    enabled: bool = True
    reused_results: int = 0
    """Results read back from an earlier run's output (no request made for them now)."""
    rerun_results: int = 0
    """Stored results not taken: made by another producer (harness, backend, model, settings, task) or input errors."""

    @classmethod
    def of(cls, usages: Iterable[Mapping[str, Any]], enabled: bool, reused_results: int = 0,
           rerun_results: int = 0) -> CacheUse:
        """Sum the ``requests`` and ``cache_hits`` of task usages."""
        rows = list(usages)
        return cls(replies=int(sum(u.get("requests", 0) for u in rows)),
                   from_cache=int(sum(u.get("cache_hits", 0) for u in rows)), enabled=enabled,
                   reused_results=reused_results, rerun_results=rerun_results)

    def line(self) -> str:
        """``12 of 40 replies from the response cache (--no-cache to disable)``."""
        if not self.enabled:
            text = f"{self.replies} replies, none from the response cache (turned off by --no-cache)"
        else:
            text = f"{self.from_cache} of {self.replies} replies from the response cache (--no-cache to disable)"
        if self.reused_results:
            text += f"; {self.reused_results} result(s) reused from the output folder without asking the model"
        if self.rerun_results:
            text += (f"; {self.rerun_results} stored result(s) run again (made by another harness version, backend, "
                     "model, settings or task text, or a video that could not be read)")
        return text


def complete(vlm: VLM, messages: list[Message], tools: list[Tool] | None = None,
             cache: ResponseCache | None = None) -> Reply:
    """One model call through the cache (when given).

    A request the endpoint's context cannot hold is refused first, stored reply or not: one stored under a longer
    ``--max-model-len`` is not the endpoint's answer now.
    """
    if cache is not None:  # the revision in the key names the checkpoint the endpoint serves: asked first
        reach(vlm)
    key = request_key(vlm, messages, tools) if cache is not None else ""
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            estimate = check_context(vlm, messages, tools)  # a miss is checked by the model, before it is sent
            hit.prompt_estimate = estimate
            return hit
    reply = vlm.complete(messages, tools)
    if cache is not None:
        cache.put(key, reply, vlm.name)
    return reply


class MeteredVLM:
    """A model whose every call goes through the response cache and is counted in a ledger of its own.

    The editor's and the investigator's calls use it: they count against ``--max-calls``, show as their own ledger,
    and a resumed run gets the replies it already paid for from the cache.
    """

    def __init__(self, vlm: VLM, cache: ResponseCache | None) -> None:
        self.vlm, self.cache = vlm, cache
        self.name = vlm.name
        self.ledger: dict[str, float] = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}

    @property
    def revision(self) -> str:
        """The wrapped model's revision (an endpoint's may be learnt after the first request)."""
        return self.vlm.revision

    def decoding(self) -> dict[str, Any]:
        """The wrapped model's decoding settings."""
        return self.vlm.decoding()

    def served_context(self) -> int | None:
        """The wrapped model's served context, where it has one."""
        return served_context_of(self.vlm)

    def check_context(self, messages: list[Message], tools: list[Tool] | None) -> int | None:
        """The wrapped model's context check, where it has one."""
        return check_context(self.vlm, messages, tools)

    @property
    def request_timeout_s(self) -> float | None:
        """The wrapped model's time limit of one attempt, where it has one."""
        return request_timeout_of(self.vlm)

    def reach(self) -> None:
        """The wrapped model learns what its endpoint serves (:func:`~videvolve.models.base.reach`)."""
        reach(self.vlm)

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        """One call, through the cache, counted."""
        reply = complete(self.vlm, messages, tools, self.cache)
        self.ledger["calls"] += 1
        self.ledger["cache_hits"] += int(reply.cached)
        self.ledger["prompt_tokens"] += reply.usage.prompt_tokens or 0
        self.ledger["completion_tokens"] += reply.usage.completion_tokens or 0
        return reply
