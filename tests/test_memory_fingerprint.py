"""The memory keeps a run away from its selection and test videos by their content, whatever a task file calls them.

A user who evolved on generated tasks (video ids made from the file names) and then on their own questions about
the same folder (ids from their CSV) had every diagnosis of the first run's training videos shown to the second
run's editor, though those videos were now the second run's selection and test videos: the memory left out
videos by id only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from videvolve.evaluation.results import TaskResult, video_fingerprint
from videvolve.graph import Context
from videvolve.investigator.procedure import new_diagnosis
from videvolve.loop.services import open_run
from videvolve.memory.embedders import HashingEmbedder
from videvolve.memory.records import Diagnosis
from videvolve.memory.store import ChromaStore, InMemoryStore
from videvolve.tasks import Task, read_tasks, write_tasks


def diagnosis(i: int, fingerprint: str | None) -> Diagnosis:
    return Diagnosis(id=f"d{i}", run_id="earlier", iteration=0, harness_id="h", task_id=f"t{i}", video_id=f"v{i}",
                     video_fingerprint=fingerprint, kind="mcq", category="misperception",
                     hypothesis="the glyph was read at too small a size", applies_when="-", preserve="-")


@pytest.mark.parametrize("kind", ["chroma", "in-memory"])
def test_search_leaves_out_a_fingerprint_and_keeps_records_without_one(tmp_path: Path, kind: str):
    store = ChromaStore(tmp_path, HashingEmbedder()) if kind == "chroma" else InMemoryStore(HashingEmbedder())
    store.put([diagnosis(0, "aa" * 16), diagnosis(1, "bb" * 16), diagnosis(2, None)])
    hits = store.search("glyph too small", k=5, exclude_fingerprints=["aa" * 16])
    assert sorted(d.id for d, _ in hits) == ["d1", "d2"]  # d2: written before fingerprints were recorded
    assert sorted(d.id for d, _ in store.search("glyph", k=5)) == ["d0", "d1", "d2"]


def test_a_run_never_reads_diagnoses_of_its_held_out_videos_under_other_ids(small_world, tmp_path: Path,
                                                                             make_context: Callable[..., Context]):
    tasks = read_tasks(small_world.tasks_path)
    train = [t for t in tasks if t.split == "train"]
    memory = ChromaStore(tmp_path / "memory", HashingEmbedder())
    failed = TaskResult(task_id=train[0].id, harness_id="h", split="train", kind=train[0].kind, outcome="ok",
                        score=0.0)
    written = [new_diagnosis(t, failed.model_copy(update={"task_id": t.id}), "first", 1, category="misperception",
                             hypothesis="the glyph was read at too small a size", applies_when="-", preserve="-")
               for t in train]
    assert all(d.video_fingerprint == video_fingerprint(t.video) is not None for d, t in zip(written, train,
                                                                                            strict=True))
    memory.put(written)
    memory.close()
    # the same videos under other ids, the first task file's training videos now held out
    swapped = {"train": "selection", "selection": "train", "test": "test"}
    renamed = [Task.model_validate({**t.model_dump(), "id": f"csv-{t.id}", "video_id": f"csv-{t.video_id}",
                                    "split": swapped[t.split or "test"]}) for t in tasks]
    write_tasks(renamed, tmp_path / "csv.jsonl")
    ctx = make_context(tasks=str(tmp_path / "csv.jsonl"), memory=str(tmp_path / "memory"))
    run = open_run(ctx)
    try:
        assert run.memory.search("glyph too small", k=10)  # the records are there ...
        assert run.memory.search("glyph too small", k=10, exclude_videos=run.excluded_videos,
                                 exclude_fingerprints=run.excluded_fingerprints) == []  # ... and kept away
    finally:
        run.close()


@pytest.mark.slow
def test_a_diagnosis_read_from_a_proxy_records_its_sources_fingerprint(make_context: Callable[..., Context],
                                                                       tmp_path: Path):
    """With ``--proxy``, the investigator reads a training video's proxy: its diagnosis recorded the proxy's own
    fingerprint, which no later run's held-out source matches (the exclusion by content missed it)."""
    from videvolve.graph.driver import evolve

    ctx = make_context(memory=str(tmp_path / "memory"), iterations=1, proxy="always")
    made = evolve(ctx)["diagnoses"]
    lines = (tmp_path / "memory" / "diagnoses.jsonl").read_text(encoding="utf-8").splitlines()
    mine = [d for line in lines if (d := Diagnosis.model_validate_json(line)).id in made]
    sources = {t.video_id: video_fingerprint(t.video) for t in read_tasks(ctx.tasks)}
    assert mine and all(d.video_fingerprint == sources[d.video_id] is not None for d in mine)
