"""`tasks generate --sources perceived` against an endpoint whose replies are not what was asked: a frame a reply
leaves out is never taken for a frame showing nothing, so no label is written from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.datasets.synthworld import generate_world
from videvolve.labelfree.generate import GenerateSettings, Perceiver, generate
from videvolve.labelfree.perceived import BATCH
from videvolve.media.info import probe
from videvolve.models.base import Message, Reply, Tool
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.tasks import Task, read_tasks
from videvolve.testing import serve_app

pytestmark = pytest.mark.slow  # SynthWorld videos and a real HTTP server

SETTINGS = GenerateSettings(sources=("needles", "perceived"), questions_per_video=8, perceive_fps=0.5)


class CutOff(SimVLM):
    """SimVLM whose replies stop after five lines, as a model's do when they reach ``--max-tokens``."""

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        reply = super().complete(messages, tools)
        return Reply(text="\n".join(reply.text.splitlines()[:5]), usage=reply.usage)


class Chatty(SimVLM):
    """A model that never answers in the asked form."""

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        return Reply(text="Sure! These images show colourful shapes on plain backgrounds.")


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replies")
    generate_world(root / "w", videos=2, minutes=1.0, seed=5, workers=1)
    return root / "w" / "videos"


def perceived(tasks: list[Task]) -> list[tuple[str, str, str]]:
    return sorted((t.video_id, t.question, str(t.answer)) for t in tasks if t.label_source == "perceived")


def run_against(backend: SimVLM, videos: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, int]:
    app = create_app("simvlm", mimic=MimicSettings(), backend=backend)
    with serve_app(app) as base:
        code = main(["tasks", "generate", str(videos), "--out", str(out), "--sources", "needles,perceived",
                     "--questions-per-video", "8", "--perceive-fps", "0.5", "--backend", "openai", "--base-url",
                     base, "--model", "simvlm", "--no-cache", "--workers", "1"])
        served = int(app.state.stats["served"])
    return code, " ".join(capsys.readouterr().err.split()), served


def test_frames_a_cut_off_reply_left_out_are_asked_about_alone_and_the_labels_are_the_full_replies(
        videos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """main: the frames after a reply's fifth line were taken for frames showing nothing, so one appearance became
    two and another vanished ('When does the red diamond appear?' answered with one of its two intervals)."""
    full = generate(videos, SETTINGS, tmp_path / "ref", Perceiver(SimVLM(), cost_model("qwen2.5-vl"), None,
                                                                   tmp_path / "ref"), workers=1)
    assert perceived(full.tasks)
    code, said, served = run_against(CutOff(), videos, tmp_path / "t.jsonl", capsys)
    assert code == 0, said
    assert perceived(read_tasks(tmp_path / "t.jsonl")) == perceived(full.tasks)
    frames = [int(probe(v).duration * 0.5) for v in sorted(videos.glob("*.mp4"))]
    batches = [[min(BATCH, n - i) for i in range(0, n, BATCH)] for n in frames]
    assert served == sum(len(b) + sum(max(0, k - 5) for k in b) for b in batches)  # each frame cut off, alone


def test_a_model_that_never_answers_in_form_makes_no_perceived_question_and_is_not_paid_further(
        videos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """main: every frame was taken for one showing nothing: no perceived question and not a word about why, the
    needles as short as without a perceived pass; now it is said, and the look stops at the frame not described."""
    out = tmp_path / "t.jsonl"
    code, said, served = run_against(Chatty(), videos, out, capsys)
    assert code == 0, said
    assert {t.label_source for t in read_tasks(out)} == {"needles"}
    for name in ("video000.mp4", "video001.mp4"):
        n = int(probe(videos / name).duration * 0.5)
        assert f"note: {videos / name}: no perceived questions: the model did not describe the frame at 0.00 s" \
            in said and f"({n} of {n} frames not described)" in said, said
    assert "'Sure! These images show colourful shapes on plain backgrounds.'" in said
    assert served == 2 * 2  # per video: its first batch, then its first frame alone


def test_simvlm_describes_the_frame_at_zero_seconds(videos: Path):
    """main: '[frame at 0.00 s]' parsed as 0.0, which is false, so SimVLM read that frame as one without a caption
    and said nothing of it (a harness showing the first frame was answered as if it had not)."""
    from videvolve.labelfree.perceived import look

    timeline = look(str(videos / "video000.mp4"), "video000", SimVLM(), cost_model("qwen2.5-vl"), None, 0.5)
    assert timeline.entries[0][0] == 0.0 and "background" in timeline.entries[0][1]


class Formats(SimVLM):
    """SimVLM that notes the encoding of every picture it is sent."""

    seen: set[str]

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        self.seen |= {str(p["image_url"]["url"]).split(";")[0] for m in messages if isinstance(m["content"], list)
                      for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"}
        return super().complete(messages, tools)


@pytest.mark.parametrize("flag", [[], ["--image-format", "png"]])
def test_the_perceived_pass_sends_frames_as_image_format_says(videos: Path, tmp_path: Path, flag: list[str]):
    """A real server's frames are jpeg unless ``--image-format`` says otherwise, the perceived pass's too (main: PNG
    whatever was asked, several times the bytes of every frame of a long video at full resolution)."""
    backend = Formats()
    backend.seen = set()
    with serve_app(create_app("simvlm", mimic=MimicSettings(), backend=backend)) as base:
        code = main(["tasks", "generate", str(videos), "--out", str(tmp_path / "t.jsonl"), "--sources", "perceived",
                     "--questions-per-video", "4", "--perceive-fps", "0.2", "--backend", "openai", "--base-url", base,
                     "--no-cache", "--workers", "1", *flag])
    assert code == 0
    assert backend.seen == {"data:image/png" if flag else "data:image/jpeg"}


class Sizes(SimVLM):
    """SimVLM that counts the bytes of the pictures it is sent."""

    sent: int = 0

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        self.sent += sum(len(str(p["image_url"]["url"])) for m in messages if isinstance(m["content"], list)
                         for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")
        return super().complete(messages, tools)


def test_the_perceived_pass_encodes_jpeg_at_jpeg_quality(videos: Path, tmp_path: Path):
    """``--jpeg-quality`` was taken and ignored by the perceived pass (every frame at 90), and a look stored at one
    quality was reused for another."""
    sent = []
    for quality in ("90", "30"):  # into the same --out: the look at 90 is not the look at 30
        backend = Sizes()
        with serve_app(create_app("simvlm", mimic=MimicSettings(), backend=backend)) as base:
            code = main(["tasks", "generate", str(videos), "--out", str(tmp_path / "t.jsonl"), "--sources",
                         "perceived", "--questions-per-video", "4", "--perceive-fps", "0.2", "--backend", "openai",
                         "--base-url", base, "--no-cache", "--workers", "1", "--jpeg-quality", quality])
        assert code == 0
        sent.append(backend.sent)
    assert 0 < sent[1] < sent[0]
