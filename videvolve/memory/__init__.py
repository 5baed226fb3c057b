"""The memory of failure diagnoses (JSONL truth, Chroma index) shared by runs, and harness lineage."""

from videvolve.memory.embedders import Embedder, HashingEmbedder, MiniLMEmbedder, default_embedder
from videvolve.memory.records import CATEGORIES, Diagnosis, Evidence, RevisionOutcome
from videvolve.memory.store import ChromaStore, DiagnosisStore, InMemoryStore, open_store

__all__ = ["CATEGORIES", "ChromaStore", "Diagnosis", "DiagnosisStore", "Embedder", "Evidence", "HashingEmbedder",
           "InMemoryStore", "MiniLMEmbedder", "RevisionOutcome", "default_embedder", "open_store"]
