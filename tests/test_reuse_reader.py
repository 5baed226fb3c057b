"""Nothing is reused where it does not belong: a result made under another OCR engine, a training video as held out."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.evaluation.evaluate import evaluate
from videvolve.media import ocr
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import seed_path

RUNTIME = RuntimeSettings(concurrency=1, warm_sandboxes=False)
READS = "def solve(task, ctx):\n    f = ctx.frames([1.0], max_side=160)[0]\n    return ctx.ocr(f)[0]['text']\n"


def test_a_result_made_without_ocr_is_not_reused_once_ocr_is_installed(small_world, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    harness = tmp_path / "reader"
    shutil.copytree(seed_path("uniform"), harness)
    (harness / "solver.py").write_text(READS, encoding="utf-8")
    tasks = [next(t for t in small_world.tasks if t.kind == "mcq")]
    out = tmp_path / "e"

    def run() -> tuple[str, int]:
        done = evaluate(harness, tasks, out, SimVLM(), cost_model("qwen2.5-vl"), RUNTIME)
        result = done.results[0]
        return result.error or str(result.prediction.answer if result.prediction else None), \
            int(done.summary["cache_use"]["reused_results"])

    monkeypatch.setattr(ocr, "available", lambda: False)
    monkeypatch.setattr(ocr, "engine", lambda: None, raising=False)
    missing, _ = run()
    assert ocr.INSTALL_HINT in missing
    monkeypatch.setattr(ocr, "available", lambda: True)
    monkeypatch.setattr(ocr, "engine", lambda: "rapidocr-onnxruntime 1.4.4", raising=False)
    monkeypatch.setattr(ocr, "read_text", lambda image: [ocr.TextLine("B", 0.9, (0, 0, 1, 1))])
    installed, reused = run()
    assert (installed, reused) == ("B", 0)  # main: the stored "needs the OCR extra" error, reused
    assert run() == ("B", 1)  # the same engine reuses its own result
    monkeypatch.setattr(ocr, "engine", lambda: "rapidocr-onnxruntime 1.4.5", raising=False)
    assert run()[1] == 0  # another version of the engine may read the frame otherwise


def test_a_copy_of_a_video_the_run_evolved_on_is_not_held_out(small_world, tmp_path: Path) -> None:
    from videvolve.errors import UsageError
    from videvolve.evaluation.experiment import held_out

    train = next(t for t in small_world.tasks if t.split == "train")
    copy = tmp_path / "renamed.mp4"
    shutil.copy(train.video, copy)
    own = [train.model_copy(update={"video": str(copy), "video_id": "renamed", "split": None})]
    with pytest.raises(UsageError, match="evolved or selected on"):  # main: compared as held-out questions
        held_out(small_world.tasks, own, "own.jsonl")
    other = next(t for t in small_world.tasks if t.split == "test")
    held_out(small_world.tasks, [other.model_copy(update={"split": None})], "own.jsonl")  # a test video is fine


@pytest.mark.slow
def test_a_proxy_reads_the_transcript_of_its_source(small_world, tmp_path: Path, monkeypatch) -> None:
    from videvolve.datasets.transcripts import load_transcript
    from videvolve.evaluation.evaluate import with_proxies

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = next(t for t in small_world.tasks if t.split == "test")
    video = tmp_path / "v.mp4"
    shutil.copy(task.video, video)
    video.with_suffix(".vtt").write_text("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nhello\n", encoding="utf-8")
    source = task.model_copy(update={"video": str(video)})
    proxied = with_proxies([source], "always")[0]
    assert proxied.video != source.video
    said = load_transcript(proxied)
    assert said is not None and [s.text for s in said.segments] == ["hello"]  # main: None, the harness read nothing
