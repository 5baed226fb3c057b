"""A response cache that cannot be written (its disk full) stops the run for --resume; no task is scored for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.errors import StorageError
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.base import Reply
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness
from videvolve.testing import full_disk


def test_a_full_disk_under_the_cache_is_a_storage_error_naming_it(tmp_path: Path) -> None:
    """sqlite's ``database or disk is full`` left the cache as a bare OperationalError."""
    path = tmp_path / "responses.sqlite"
    cache = ResponseCache(path)
    cache.put("a", Reply(text="x"))
    grown = max(p.stat().st_size for p in tmp_path.iterdir())
    with full_disk(grown + 100), pytest.raises(StorageError, match=r"response cache .*responses\.sqlite.*--no-cache"):
        cache.put("b", Reply(text="y" * 200_000))
    assert cache.get("a") is not None  # what was stored is still there
    cache.close()


class FullCache(ResponseCache):
    """A cache on a disk that filled up after it was opened."""

    def put(self, key: str, reply: Reply, model: str | None = None) -> None:
        raise StorageError(f"cannot write the response cache {self.path}: database or disk is full")


def test_a_task_whose_reply_cannot_be_cached_is_not_scored(small_world, seed: Path, tmp_path: Path) -> None:
    """The harness's request failed with the cache's error, and the task was stored as its `invalid` error (score
    0), which a resumed run then reused: an overnight run's home disk filling up scored every task 0."""
    out = tmp_path / "evals"
    with pytest.raises(StorageError, match="response cache"):
        solve_tasks(load_harness(seed), small_world.tasks[:2], SimVLM(), cost_model("qwen2.5-vl"),
                    RuntimeSettings(concurrency=1), out, FullCache(tmp_path / "cache.sqlite"))
    assert not list(out.glob("results/*.json"))  # nothing scored: a rerun runs both tasks
