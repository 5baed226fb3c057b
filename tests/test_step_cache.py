"""A step run again after a kill counts the replies its earlier attempt paid for as paid, as the step did then."""

from __future__ import annotations

from pathlib import Path

from videvolve.models.cache import MeteredVLM, ResponseCache
from videvolve.models.step_cache import step_cache
from videvolve.testing import ScriptedReplies


def _attempt(cache: ResponseCache | None) -> dict[str, float]:
    """Three requests, the first asked twice: what a step's probes look like to the ledger."""
    model = MeteredVLM(ScriptedReplies(["a", "b", "c", "d"]), cache)
    for text in ("one", "one", "two", "three"):
        model.complete([{"role": "user", "content": text}])
    return dict(model.ledger)


def test_a_step_run_again_pays_what_its_killed_attempt_paid_and_no_more(tmp_path: Path):
    """The investigator's probes, run again on resume after a kill before the step's checkpoint, found every reply in
    the response cache and cost nothing: ``--max-calls 44`` stopped the uninterrupted run after one iteration and
    let the resumed one go on to two."""
    shared = ResponseCache(tmp_path / "replies.sqlite")
    first = step_cache(shared, tmp_path / "run", "0-investigate")
    assert _attempt(first)["cache_hits"] == 1  # the repeated request, as in any run
    for _ in range(2):  # killed, run again, killed again, run again
        again = step_cache(shared, tmp_path / "run", "0-investigate")
        ledger = _attempt(again)
        assert (ledger["calls"], ledger["cache_hits"]) == (4, 1)  # main: 4 hits, nothing paid
    other = _attempt(step_cache(shared, tmp_path / "run", "1-investigate"))  # another step: the cache serves it
    assert other["cache_hits"] == 4
    assert _attempt(shared)["cache_hits"] == 4 and step_cache(None, tmp_path / "run", "x") is None
