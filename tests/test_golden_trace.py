"""A golden trace: a two-iteration heuristic run's normalised events and lineage, compared with a stored file.

A change of the loop's behaviour shows up as a diff of ``tests/golden/two_iterations.json`` in review. Regenerate it
only on purpose: ``VIDEVOLVE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_trace.py``. A missing file fails the
test, in CI and everywhere else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from videvolve.graph.driver import evolve

GOLDEN = Path(__file__).with_name("golden") / "two_iterations.json"
VOLATILE = {"ts", "diagnosis_ids"}  # diagnosis ids hold the run_uid drawn when a run starts
REGENERATE = "VIDEVOLVE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_trace.py"


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


def read_golden(path: Path = GOLDEN) -> Any:
    """The stored trace; a missing file fails the test (never silently written) and says how to make it."""
    if not path.is_file():
        pytest.fail(f"{path} is missing: the golden trace is part of the repository. Restore it from git, or write "
                    f"it on purpose with `{REGENERATE}` and review the diff")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_two_iterations_match_the_golden_trace(make_context, tmp_path: Path, seed: Path) -> None:
    run = tmp_path / "run"
    ctx = make_context(run_id="golden", iterations=2)
    evolve(ctx)
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    lineage = [json.loads(x) for x in (run / "lineage.jsonl").read_text().splitlines()]
    got = normalise({"events": events, "lineage": lineage}, str(tmp_path))
    got = normalise(got, str(seed))
    if os.environ.get("VIDEVOLVE_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = read_golden()
    assert got["lineage"] == want["lineage"]
    assert got["events"] == want["events"]


def test_a_missing_golden_file_fails_and_says_how_to_regenerate_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="VIDEVOLVE_UPDATE_GOLDEN=1"):
        read_golden(tmp_path / "absent.json")
