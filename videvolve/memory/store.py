"""Diagnosis stores: JSONL records are the truth; the search index (in memory, or Chroma on disk) is rebuildable.

A store lives in a memory workspace shared by runs (``--memory DIR``, default ``~/.videvolve/memory``):
``diagnoses.jsonl`` (append-only; the last line for an id wins) and ``chroma/`` (the index). The index is checked
against the records when the store opens and rebuilt if they disagree.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from videvolve.errors import StorageError, UsageError
from videvolve.folderlock import FolderBusy, acquire
from videvolve.memory.embedders import Embedder
from videvolve.memory.jsonl import append_lines, read_lines
from videvolve.memory.records import Diagnosis, RevisionOutcome

log = logging.getLogger(__name__)
COLLECTION = "diagnoses"


class DiagnosisStore(Protocol):
    """Where diagnoses are kept and found again."""

    def put(self, records: Sequence[Diagnosis]) -> None:
        """Add or replace records (by id)."""
        ...

    def set_outcome(self, ids: Sequence[str], outcome: RevisionOutcome) -> None:
        """Record what the revision these diagnoses led to became."""
        ...

    def get(self, id: str) -> Diagnosis | None:
        """One record."""
        ...

    def records(self) -> list[Diagnosis]:
        """Every record (latest version of each), oldest first."""
        ...

    def search(self, text: str, k: int = 5, exclude_videos: Iterable[str] = (), exclude_run: str | None = None,
               category: str | None = None,
               exclude_fingerprints: Iterable[str] = ()) -> list[tuple[Diagnosis, float]]:
        """The ``k`` records most similar to ``text`` with their similarity, leaving out the given videos.

        By id, and by content fingerprint: the same file under another task file's id.
        """
        ...

    def close(self) -> None:
        """Release what the store holds (the workspace, the index's database)."""
        ...


def latest_diagnoses(path: Path) -> list[Diagnosis]:
    """The last version of each diagnosis in a ``diagnoses.jsonl``, read without opening its index.

    A damaged line is skipped with a warning naming the file and line, as the memory itself does.
    """
    return list(_Records(path).by_id.values())


class _Records:
    """The JSONL truth, loaded into a dict."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.by_id: dict[str, Diagnosis] = {}
        self.order: dict[str, int] = {}
        """When each record was first written: equal similarities go to the older record, whatever the ids."""
        self.lock = threading.Lock()
        if path is not None:
            for lineno, line in enumerate(read_lines(path), start=1):
                if line.strip():
                    try:
                        d = Diagnosis.model_validate_json(line)
                    except ValueError as exc:
                        log.warning("%s:%d: skipping an unreadable diagnosis (%s)", path, lineno, exc)
                        continue
                    self.by_id.pop(d.id, None)
                    self.by_id[d.id] = d
                    self.order.setdefault(d.id, len(self.order))

    def write(self, records: Sequence[Diagnosis]) -> list[Diagnosis]:
        changed = [r for r in records if self.by_id.get(r.id) != r]
        if not changed:
            return []
        with self.lock:
            if self.path is not None:
                append_lines(self.path, [json.dumps(r.model_dump(mode="json")) for r in changed], "the diagnoses")
            for r in changed:
                self.by_id.pop(r.id, None)
                self.by_id[r.id] = r
                self.order.setdefault(r.id, len(self.order))
        return changed

    def nearest(self, scored: list[tuple[Diagnosis, float]], k: int) -> list[tuple[Diagnosis, float]]:
        """The ``k`` most similar; equal similarities (to 6 decimals) in the order the records were written."""
        return sorted(scored, key=lambda x: (-round(x[1], 6), self.order.get(x[0].id, len(self.order))))[:k]


def _keep(d: Diagnosis, exclude: set[str], exclude_run: str | None, category: str | None,
          fingerprints: frozenset[str] = frozenset()) -> bool:
    return d.video_id not in exclude and d.video_fingerprint not in fingerprints and \
        (exclude_run is None or d.run_id != exclude_run) and (category is None or d.category == category)


class InMemoryStore:
    """Records in a dict (optionally mirrored to JSONL), searched by cosine in numpy; records embedded on search."""

    def __init__(self, embedder: Embedder, path: str | Path | None = None, read_only: bool = False) -> None:
        self.embedder = embedder
        self.read_only = read_only
        self._records = _Records(Path(path) if path else None)

    def _writable(self) -> None:
        if self.read_only:
            raise UsageError(f"{self._records.path}: a read-only view (another process writes this memory)")

    def close(self) -> None:
        """Nothing to release."""

    def put(self, records: Sequence[Diagnosis]) -> None:
        """Add or replace records."""
        self._writable()
        self._records.write(records)

    def set_outcome(self, ids: Sequence[str], outcome: RevisionOutcome) -> None:
        """Attach an outcome."""
        self._writable()
        self._records.write([d.model_copy(update={"outcome": outcome}) for i in ids
                             if (d := self._records.by_id.get(i)) is not None])

    def get(self, id: str) -> Diagnosis | None:
        """One record."""
        return self._records.by_id.get(id)

    def records(self) -> list[Diagnosis]:
        """All records."""
        return list(self._records.by_id.values())

    def search(self, text: str, k: int = 5, exclude_videos: Iterable[str] = (), exclude_run: str | None = None,
               category: str | None = None,
               exclude_fingerprints: Iterable[str] = ()) -> list[tuple[Diagnosis, float]]:
        """Cosine similarity over the records that pass the filters."""
        exclude = set(exclude_videos)
        fingerprints = frozenset(exclude_fingerprints)
        pool = [d for d in self._records.by_id.values() if _keep(d, exclude, exclude_run, category, fingerprints)]
        if not pool:
            return []
        vectors = _embedded(self.embedder, [text, *(d.text() for d in pool)])
        scored = [(d, float(v @ vectors[0])) for d, v in zip(pool, vectors[1:], strict=True)]
        return self._records.nearest(scored, k)


_VECTORS: weakref.WeakKeyDictionary[Embedder, dict[str, np.ndarray]] = weakref.WeakKeyDictionary()
"""The vectors each embedder made, by text: a reader that opens the records again (serve's ``search_diagnoses``, once
a call) embeds only what is new (MiniLM on the CPU: thousands of diagnoses take minutes)."""


def _embedded(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``embedder``'s vectors of ``texts``, each text embedded once in this process."""
    known = _VECTORS.setdefault(embedder, {})
    new = [t for t in dict.fromkeys(texts) if t not in known]
    if new:
        known.update(zip(new, embedder.embed(new), strict=True))
    return np.stack([known[t] for t in texts])


class ChromaStore:
    """Records in ``diagnoses.jsonl``; a Chroma ``PersistentClient`` index (telemetry off) in ``chroma/``.

    Embeddings are computed by the injected embedder and handed to Chroma, so Chroma never loads (or downloads)
    an embedding model of its own.
    """

    def __init__(self, root: str | Path, embedder: Embedder) -> None:
        self.root = Path(root)
        # Chroma's PersistentClient is not process-safe (two writers can corrupt the HNSW index): one process at a
        # time holds the workspace, from here to close(); FolderBusy names the other one
        try:
            self._held = acquire(self.root, "diagnosis memory", "give this run its own with --memory DIR")
        except OSError as exc:  # a read-only mount, no write permission (FolderBusy is no OSError)
            raise StorageError(f"cannot write the diagnosis memory {self.root}: {exc.strerror or exc} (a run writes "
                               "its diagnoses there: give it a writable folder with --memory DIR)") from exc
        try:
            self.embedder = embedder
            self._records = _Records(self.root / "diagnoses.jsonl")
            self._connect()
        except BaseException:
            self._held.release()
            raise

    def _connect(self) -> None:
        """Open and check the index; one Chroma cannot read (damaged, another version's) is set aside and rebuilt."""
        from chromadb.errors import ChromaError

        try:
            self._attach()
        except ChromaError as exc:
            if any(word in str(exc).lower() for word in _NOT_DAMAGE):
                raise StorageError(f"cannot open the diagnosis index {self.root / 'chroma'}: {exc} (free space, or "
                                   "give the run a writable memory with --memory DIR)") from exc
            aside = self.root / f"chroma.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
            (self.root / "chroma").rename(aside)
            log.warning("the diagnosis index %s could not be read (%s): moved to %s and rebuilt from %s (%d "
                        "diagnoses); delete the old one when you no longer need it", self.root / "chroma", exc,
                        aside, self._records.path, len(self._records.by_id))
            try:
                self._attach()
            except ChromaError as again:
                raise StorageError(f"cannot build the diagnosis index {self.root / 'chroma'} again: {again} (the "
                                   f"diagnoses are kept in {self._records.path})") from again

    def _attach(self) -> None:
        import chromadb
        from chromadb.config import Settings

        path = str(self.root / "chroma")
        try:
            self._client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
        except BaseException:
            _forget_system(path)
            raise
        try:
            self._collection = self._open()
            self.check()
        except BaseException:
            self._close_client()
            raise

    def _close_client(self) -> None:
        close = getattr(self._client, "close", None)  # Client.close(); not on the ClientAPI protocol
        if close is not None:
            close()

    def close(self) -> None:
        """Release the index's database (Chroma stops its system when its last client closes) and the workspace."""
        self._close_client()
        self._held.release()

    def _open(self) -> Any:
        return self._client.get_or_create_collection(
            COLLECTION, embedding_function=None,
            metadata={"hnsw:space": "cosine", "embedder": self.embedder.name})

    def check(self) -> bool:
        """Compare the index with the records; rebuild it when they differ. Returns True if it was rebuilt.

        The records are the truth, but none at all beside a non-empty index is a records file moved away or
        emptied, not a memory with nothing in it: that is refused, since rebuilding would empty the index too and
        the index alone cannot give the diagnoses back. Indexed diagnoses without a record are dropped with a
        warning that counts them.
        """
        meta = self._collection.metadata or {}
        indexed = set(self._collection.get(include=[])["ids"])
        if indexed == set(self._records.by_id) and meta.get("embedder") == self.embedder.name:
            return False
        records = self.root / "diagnoses.jsonl"
        if indexed and not self._records.by_id:
            raise StorageError(f"the diagnoses memory {self.root} has an index of {len(indexed)} diagnoses but "
                               f"{'an empty' if records.exists() else 'no'} records file {records}: put "
                               "diagnoses.jsonl back (the index cannot give the diagnoses back), or remove "
                               f"{self.root / 'chroma'} to start an empty memory")
        if lost := indexed - set(self._records.by_id):
            log.warning("%d indexed diagnoses have no record in %s: dropped from the index", len(lost), records)
        log.info("diagnosis index out of date (%d indexed, %d records): rebuilding", len(indexed),
                 len(self._records.by_id))
        self.rebuild()
        return True

    def rebuild(self) -> int:
        """Drop the index and index every record again; returns how many."""
        self._client.delete_collection(COLLECTION)
        self._collection = self._open()
        self._upsert(list(self._records.by_id.values()))
        return len(self._records.by_id)

    def _upsert(self, records: Sequence[Diagnosis]) -> None:
        from chromadb.errors import ChromaError

        try:
            for i in range(0, len(records), 256):
                chunk = records[i : i + 256]
                self._collection.upsert(
                    ids=[r.id for r in chunk], embeddings=self.embedder.embed([r.text() for r in chunk]).tolist(),
                    metadatas=[{"video_id": r.video_id, "run_id": r.run_id, "category": r.category, "kind": r.kind,
                                **({"video_fingerprint": r.video_fingerprint} if r.video_fingerprint else {})}
                               for r in chunk],
                    documents=[r.text() for r in chunk])
        except ChromaError as exc:  # a full disk: "disk I/O error"; the records are already in diagnoses.jsonl
            raise StorageError(f"cannot write the diagnosis index {self.root / 'chroma'}: {exc} (is the disk full? "
                               "Every diagnosis is kept in diagnoses.jsonl, and the index is rebuilt from it when "
                               "the run resumes)") from exc

    def put(self, records: Sequence[Diagnosis]) -> None:
        """Add or replace records."""
        self._upsert(self._records.write(records))

    def set_outcome(self, ids: Sequence[str], outcome: RevisionOutcome) -> None:
        """Attach an outcome (the index holds ids only, so it needs no change)."""
        self._records.write([d.model_copy(update={"outcome": outcome}) for i in ids
                             if (d := self._records.by_id.get(i)) is not None])

    def get(self, id: str) -> Diagnosis | None:
        """One record."""
        return self._records.by_id.get(id)

    def records(self) -> list[Diagnosis]:
        """All records."""
        return list(self._records.by_id.values())

    def search(self, text: str, k: int = 5, exclude_videos: Iterable[str] = (), exclude_run: str | None = None,
               category: str | None = None,
               exclude_fingerprints: Iterable[str] = ()) -> list[tuple[Diagnosis, float]]:
        """Nearest records by cosine similarity, filtered in Chroma's ``where`` and again here."""
        exclude = set(exclude_videos)
        if not self._records.by_id:
            return []
        clauses: list[dict[str, Any]] = []
        fingerprints = frozenset(exclude_fingerprints)
        if exclude:
            clauses.append({"video_id": {"$nin": sorted(exclude)}})
        if fingerprints:  # a record indexed without one (older, or unreadable) passes, as Chroma's $nin lets it
            clauses.append({"video_fingerprint": {"$nin": sorted(fingerprints)}})
        if exclude_run:
            clauses.append({"run_id": {"$ne": exclude_run}})
        if category:
            clauses.append({"category": category})
        where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
        # more than k, then ties broken by age: Chroma's approximate index returns equal distances in any order
        res = self._collection.query(query_embeddings=self.embedder.embed([text]).tolist(),
                                     n_results=min(max(4 * k, 32), len(self._records.by_id)), where=where,
                                     include=["distances"])
        out = []
        for id_, dist in zip(res["ids"][0], res["distances"][0], strict=True):
            d = self._records.by_id.get(id_)
            if d is not None and _keep(d, exclude, exclude_run, category, fingerprints):
                out.append((d, 1.0 - float(dist)))
        return self._records.nearest(out, k)


_NOT_DAMAGE = ("disk is full", "disk i/o error", "readonly", "read-only", "permission denied", "locked")
"""Chroma errors of the place rather than of the index's files: the index is not set aside for them."""


def _forget_system(path: str) -> None:
    """Drop the Chroma system of ``path`` that failed to start from Chroma's cache of systems by path.

    Chroma caches a system before starting it and keeps it when the start fails, so every later client of that path
    in this process would be handed the broken one.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    if not SharedSystemClient._identifier_to_refcount.get(path):  # no client of this process holds it
        SharedSystemClient._identifier_to_system.pop(path, None)


def open_store(root: str | Path, embedder: Embedder | None = None) -> ChromaStore:
    """The shared memory workspace at ``root`` with the default (real where installed) embedder, held for writing."""
    from videvolve.memory.embedders import default_embedder

    return ChromaStore(root, embedder or default_embedder())


def read_store(root: str | Path, embedder: Embedder | None = None) -> ChromaStore | InMemoryStore:
    """The workspace at ``root`` to read and search.

    Its Chroma index, or, while another process (a run) writes it or where it cannot be written, an index in memory
    over its records (the truth; never Chroma's files, which that process owns). Close it soon: the Chroma one holds
    the workspace, and a run that starts meanwhile would be refused.
    """
    from videvolve.memory.embedders import default_embedder

    embedder = embedder or default_embedder()
    try:
        return ChromaStore(root, embedder)
    except (FolderBusy, StorageError) as busy:  # a run writes it, or it cannot be written (a read-only mount)
        log.info("%s; reading its records instead", busy)
        return InMemoryStore(embedder, Path(root) / "diagnoses.jsonl", read_only=True)


def dump(records: Iterable[Diagnosis]) -> str:
    """Records as JSON lines."""
    return "\n".join(json.dumps(r.model_dump(mode="json")) for r in records)
