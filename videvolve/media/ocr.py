"""On-screen text: RapidOCR (ONNX Runtime; its wheel ships the detection and recognition models, so it works offline).

Optional: ``pip install 'videvolve[ocr]'``. The engine is loaded once per process and shared under a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image

from videvolve.errors import UsageError

INSTALL_HINT = "on-screen text needs the OCR extra: pip install 'videvolve[ocr]' (rapidocr-onnxruntime)"
_LOCK = threading.Lock()


class OcrUnavailable(UsageError):
    """The OCR extra is not installed; the message says how to install it."""


@dataclass(frozen=True)
class TextLine:
    """One line of text found in an image: what it says, how sure the recogniser is, and its box (x0, y0, x1, y1)."""

    text: str
    score: float
    box: tuple[int, int, int, int]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return {"text": self.text, "score": round(self.score, 4), "box": list(self.box)}


def available() -> bool:
    """Whether the OCR extra is installed."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


PACKAGE = "rapidocr-onnxruntime"


def engine() -> str | None:
    """The OCR engine installed, as ``rapidocr-onnxruntime 1.4.4`` (None: none); read without loading it.

    What ``ctx.ocr`` answers with (or the refusal it is without one): a stored result's key names it.
    """
    import importlib.metadata
    import importlib.util

    try:
        if importlib.util.find_spec("rapidocr_onnxruntime") is None:
            return None
        return f"{PACKAGE} {importlib.metadata.version(PACKAGE)}"
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None


@lru_cache(maxsize=1)
def _engine() -> Any:
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError as exc:
        raise OcrUnavailable(INSTALL_HINT) from exc
    return RapidOCR()


def read_text(image: Image.Image) -> list[TextLine]:
    """The lines of text in an image, top to bottom."""
    array = np.asarray(image.convert("RGB"))[:, :, ::-1]  # RapidOCR takes OpenCV's BGR order
    with _LOCK:
        found, _ = _engine()(np.ascontiguousarray(array))
    lines = []
    for points, text, score in found or []:
        xs, ys = [int(p[0]) for p in points], [int(p[1]) for p in points]
        lines.append(TextLine(str(text), float(score), (min(xs), min(ys), max(xs), max(ys))))
    return sorted(lines, key=lambda t: (t.box[1], t.box[0]))
