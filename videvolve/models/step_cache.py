"""The response cache as one step of a run sees it: a reply its own earlier attempt paid for counts as paid.

A step stopped by a kill before its checkpoint is written runs again on resume, and finds in the response cache every
reply it had already paid for: counted as cache hits, they cost nothing, so the resumed run's spend, and the
``--max-calls`` decisions made on it, differed from the uninterrupted run's (the investigator's probes, an editor's
calls). Each step keeps the keys of the requests it paid for in a log of its own (``RUN/paid/<step>.keys``); the
first hit on a key of that log in a later attempt of the same step is marked paid (``cached`` False), as the
uninterrupted step paid it, and any later hit on it is a hit, as it was there.
"""

from __future__ import annotations

from pathlib import Path

from videvolve.errors import StorageError
from videvolve.models.base import Reply
from videvolve.models.cache import ResponseCache


class StepCache(ResponseCache):
    """``path``'s response cache, with ``log`` listing the keys this step has paid for, in any attempt."""

    def __init__(self, path: str | Path, log: Path) -> None:
        super().__init__(path)
        self.log = log
        self._earlier = set(log.read_text(encoding="ascii").split()) if log.is_file() else set()
        self._seen: set[str] = set()

    def get(self, key: str) -> Reply | None:
        """A stored reply; marked paid the first time this attempt meets a key an earlier attempt paid for."""
        reply = super().get(key)
        if reply is not None and key in self._earlier and key not in self._seen:
            reply.cached = False
        self._seen.add(key)
        return reply

    def put(self, key: str, reply: Reply, model: str | None = None) -> None:
        """Store a reply this step paid for, and log its key."""
        super().put(key, reply, model)
        self._seen.add(key)
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("a", encoding="ascii") as fh:
                fh.write(key + "\n")
        except OSError as exc:
            raise StorageError.writing("the keys a step paid for", self.log, exc) from exc


def step_cache(cache: ResponseCache | None, run_root: Path, step: str) -> StepCache | None:
    """``cache`` as the step ``step`` (e.g. ``3-investigate``) of the run in ``run_root`` sees it; None without one."""
    return None if cache is None else StepCache(cache.path, run_root / "paid" / f"{step}.keys")
