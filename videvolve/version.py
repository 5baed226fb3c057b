"""The release, on its own so that any layer may name it (result keys hold it; ``videvolve.__version__`` is it)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__version__ = "0.1.0"

RESULT_CODE = ("datasets", "evaluation", "media", "metrics", "models", "needles", "skill_library", "errors.py",
               "tasks.py", "usage.py")
"""What in the package makes a task's result: media, prompts, the SDK and its sandbox, the model clients and SimVLM,
parsing, scoring and cost accounting. The orchestration (the loop, the search, the editor, the CLI) decides which
results are made, not what they are."""


@functools.lru_cache(maxsize=1)
def result_code_digest(root: Path | None = None) -> str:
    """A digest of every file of :data:`RESULT_CODE` (name and content; caches left out), 12 hex digits.

    Part of a stored result's key (``Producer.release``): the version alone never changed between releases, so a
    result made by code since changed was reused (frames rendered otherwise, another prompt, a fixed parser).
    """
    base = root or Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=6)
    for name in RESULT_CODE:
        top = base / name
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
        for p in files:
            if "__pycache__" in p.parts or p.suffix in (".pyc", ".pyo"):
                continue
            h.update(p.relative_to(base).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def result_release() -> str:
    """The release and the digest of the code that makes results, as result keys hold it (``0.1.0+1a2b3c4d5e6f``)."""
    return f"{__version__}+{result_code_digest()}"
