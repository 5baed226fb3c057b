"""The memory of failure diagnoses (JSONL truth, Chroma index) shared by runs, and harness lineage.

Names load on first use: the records (pydantic) are light, the embedders and Chroma are not.
"""

from importlib import import_module
from typing import Any

_WHERE = {"Embedder": "embedders", "HashingEmbedder": "embedders", "MiniLMEmbedder": "embedders",
          "default_embedder": "embedders", "CATEGORIES": "records", "Diagnosis": "records", "Evidence": "records",
          "RevisionOutcome": "records", "ChromaStore": "store", "DiagnosisStore": "store", "InMemoryStore": "store",
          "open_store": "store"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """A name of the package, imported from its module on first use."""
    if name not in _WHERE:
        raise AttributeError(name)
    return getattr(import_module(f"videvolve.memory.{_WHERE[name]}"), name)
