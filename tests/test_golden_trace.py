"""A golden trace: a two-iteration heuristic run's normalised events and lineage, compared with a stored file.

A change of the loop's behaviour shows up as a diff of ``tests/golden/two_iterations.json`` in review. Regenerate it
only on purpose: ``VIDEVOLVE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_trace.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from videvolve.graph import Context
from videvolve.graph.driver import evolve

GOLDEN = Path(__file__).with_name("golden") / "two_iterations.json"
VOLATILE = {"ts"}


def normalise(value: Any, tmp: str) -> Any:
    """Rounded floats, temporary paths replaced, volatile keys dropped."""
    if isinstance(value, dict):
        return {k: normalise(v, tmp) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [normalise(v, tmp) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>")
    return value


@pytest.mark.slow
def test_two_iterations_match_the_golden_trace(small_world, tmp_path: Path, seed: Path) -> None:
    run = tmp_path / "run"
    ctx = Context(run_dir=str(run), run_id="golden", tasks=str(small_world.tasks_path), seed_harness=str(seed),
                  memory=str(tmp_path / "memory"), embedder="hashing", cache=str(tmp_path / "cache.sqlite"),
                  batch=4, iterations=2)
    evolve(ctx)
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    lineage = [json.loads(x) for x in (run / "lineage.jsonl").read_text().splitlines()]
    got = normalise({"events": events, "lineage": lineage}, str(tmp_path))
    got = normalise(got, str(seed))
    if os.environ.get("VIDEVOLVE_UPDATE_GOLDEN") == "1" or not GOLDEN.exists():
        if not GOLDEN.exists() and os.environ.get("CI"):
            pytest.fail(f"{GOLDEN} is missing; generate it with VIDEVOLVE_UPDATE_GOLDEN=1")
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert got["lineage"] == want["lineage"]
    assert got["events"] == want["events"]
