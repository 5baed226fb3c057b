"""The SDK reads as well as looks: transcript windows and search (metered as text tokens), and the gate's cost."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model, text_tokens
from videvolve.models.openai_backend import ChatModelVLM
from videvolve.models.sim import SimVLM
from videvolve.search.gate import aggregate
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.skill_library.static_check import check_source
from videvolve.tasks import Task
from videvolve.testing import ScriptedChat, ScriptedReplies, tool_call
from videvolve.usage import CostMeasure

SUBS = """WEBVTT

00:00:02.000 --> 00:00:04.000
Welcome back to the second half.

00:00:12.000 --> 00:00:14.000
And the goalkeeper DIVES to his left!

00:00:17.500 --> 00:00:19.000
What a save.
"""
READER = '''import json


def solve(task, ctx):
    hits = ctx.search_transcript("goalkeeper dives")
    first = ctx.transcript(0, 5)
    whole = ctx.transcript()
    again = ctx.transcript(11.0, 13.0)
    usage = ctx.usage()
    raw = json.dumps({"first": [s["text"] for s in first], "whole": len(whole), "again": len(again),
                      "transcript_tokens": usage["transcript_tokens"], "frames": usage["frames"]})
    return {"answer": [[a, b] for a, b in hits], "raw": raw}
'''


def _tasks(tmp_path: Path, index_video: Path) -> list[Task]:
    video = tmp_path / "match.mp4"
    shutil.copy(index_video, video)
    (tmp_path / "match.vtt").write_text(SUBS)
    other = tmp_path / "silent.mp4"
    shutil.copy(index_video, other)
    base = {"kind": "grounding", "question": "When does the goalkeeper dive?", "answer": [[12.0, 14.0]],
            "duration": 20.0}
    return [Task.model_validate({**base, "id": "spoken", "video_id": "match", "video": str(video)}),
            Task.model_validate({**base, "id": "silent", "video_id": "silent", "video": str(other)})]


def test_a_harness_finds_a_moment_by_searching_the_transcript(tmp_path: Path, index_video: Path) -> None:
    harness_dir = tmp_path / "reader"
    shutil.copytree(seed_path("uniform"), harness_dir)
    (harness_dir / "solver.py").write_text(READER)
    spoken, silent = solve_tasks(load_harness(harness_dir), _tasks(tmp_path, index_video), SimVLM(),
                                 cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path / "out")
    assert spoken.outcome == "ok" and spoken.score == pytest.approx(1.0)
    assert spoken.prediction is not None and isinstance(spoken.prediction.answer, list)
    assert spoken.prediction.answer[0].pair() == (12.0, 14.0)
    seen = json.loads(spoken.prediction.raw)
    tokens = sum(text_tokens(t) for t in ("Welcome back to the second half.", "And the goalkeeper DIVES to his left!",
                                          "What a save."))
    assert seen == {"first": ["Welcome back to the second half."], "whole": 3, "again": 1,
                    "transcript_tokens": tokens, "frames": 0}  # each segment is paid for once, never as frames
    assert spoken.usage.transcript_tokens == tokens and spoken.usage.image_tokens == 0
    assert silent.outcome == "ok" and silent.prediction is not None and silent.prediction.answer == []
    assert json.loads(silent.prediction.raw) == {"first": [], "whole": 0, "again": 0, "transcript_tokens": 0,
                                                 "frames": 0}  # no transcript: empty results, not an error
    trace = (tmp_path / "out" / "traces").glob("*.jsonl")
    assert any('"search_transcript"' in p.read_text() for p in trace)


def test_the_static_check_admits_the_reading_methods() -> None:
    source = READER + "\n\ndef more(ctx, obs):\n    return ctx.ocr(obs)[0]['text'], ctx.ask([obs], context='x')\n"
    assert check_source(source, "solver.py") == []


def test_the_gate_can_count_text_tokens_with_a_weight() -> None:
    def result(score: float, **usage: int) -> TaskResult:
        return TaskResult(task_id="t", harness_id="h", kind="mcq", outcome="ok", score=score, usage=usage)

    rs = [result(1.0, frames=4, image_tokens=100, transcript_tokens=50, ocr_tokens=20),
          result(0.0, frames=2, image_tokens=60, transcript_tokens=10)]
    assert aggregate(rs, CostMeasure(metric="frames")) == (0.5, 3.0)
    assert aggregate(rs, CostMeasure()) == (0.5, 90.0)  # OCR's images are visual cost; text is not
    assert aggregate(rs, CostMeasure(metric="visual_tokens+text", text_weight=0.5)) == (0.5, 105.0)


def _seed(tmp_path: Path, name: str, **config: object) -> Path:
    d = tmp_path / f"{name}-{'-'.join(map(str, config.values()))}"
    shutil.copytree(seed_path(name), d)
    text = (d / "config.toml").read_text()
    for key, value in config.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {json.dumps(value)}", text, flags=re.M)
    (d / "config.toml").write_text(text)
    return d


def _prompt_text(request: list[dict]) -> str:
    return " ".join(str(p.get("text", "")) for m in request if isinstance(m.get("content"), list)
                    for p in m["content"])


@pytest.mark.parametrize(("mode", "said"), [("none", []), ("video", ["Welcome back", "goalkeeper", "What a save"]),
                                            ("windows", ["Welcome back", "goalkeeper", "What a save"])])
def test_uniform_adds_the_transcript_to_its_prompt_when_configured(tmp_path: Path, index_video: Path, mode: str,
                                                                   said: list[str]) -> None:
    spoken = _tasks(tmp_path, index_video)[0]
    vlm = ScriptedReplies(["[[12, 14]]"])
    harness = load_harness(_seed(tmp_path, "uniform", n_frames=4, transcript=mode, transcript_window=2.0))
    (result,) = solve_tasks(harness, [spoken], vlm, cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path / mode)
    text = _prompt_text(vlm.requests[0])
    assert all(s in text for s in said) and ("Transcript" in text) == bool(said)
    tokens = result.usage.transcript_tokens
    assert (tokens > 0) == bool(said) and result.usage.frames == 4


def test_uniform_windows_read_only_what_is_said_near_its_frames(tmp_path: Path, index_video: Path) -> None:
    spoken = _tasks(tmp_path, index_video)[0]
    vlm = ScriptedReplies(["[[12, 14]]"])
    harness = load_harness(_seed(tmp_path, "uniform", n_frames=2, transcript="windows", transcript_window=1.0))
    solve_tasks(harness, [spoken], vlm, cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path / "w")
    text = _prompt_text(vlm.requests[0])  # frames at 5 s and 15 s, +-1 s (closed): the lines ending at 4 s and 14 s
    assert "Welcome back" in text and "goalkeeper" in text and "What a save" not in text


def test_coevowhen_calls_read_transcript_itself(tmp_path: Path, index_video: Path) -> None:
    spoken = _tasks(tmp_path, index_video)[0]
    ScriptedChat.seen, ScriptedChat.tools_seen = [], []
    script = [tool_call("read_transcript", 1, search="Goalkeeper dives"), tool_call("read_transcript", 2, start=11,
                                                                                       end=15),
              tool_call("final_answer", 3, answer="[[12, 14]]")]
    vlm = ChatModelVLM(ScriptedChat(messages=iter(script)), name="scripted")
    (result,) = solve_tasks(load_harness(seed_path("coevowhen_base")), [spoken], vlm, cost_model("qwen2.5-vl"),
                            RuntimeSettings(), tmp_path / "c")
    assert result.outcome == "ok" and result.score == pytest.approx(1.0) and result.usage.frames == 0
    tool_texts = [str(m.content) for m in ScriptedChat.seen[2] if m.type == "tool"]
    assert "said at: 12.0-14.0 s" in tool_texts[0] and "[12.0-14.0 s] And the goalkeeper DIVES" in tool_texts[1]
    assert result.usage.transcript_tokens == text_tokens("And the goalkeeper DIVES to his left!")


def test_one_transcript_request_returns_at_most_its_cap(index_video: Path) -> None:
    from videvolve.datasets.transcripts import Segment, Transcript
    from videvolve.skill_library.reading import MAX_SEGMENTS
    from videvolve.skill_library.services import TaskServices
    from videvolve.tasks import TaskView

    long = Transcript(segments=[Segment(start=k * 0.01, end=k * 0.01 + 0.01, text=f"word{k}") for k in range(1500)])
    view = TaskView(id="t", kind="mcq", question="q", options=("a", "b"), duration=20.0)
    services = TaskServices(view, str(index_video), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                            transcript=long)
    first = services.op_transcript(0.0, None)
    assert len(first) == MAX_SEGMENTS and services.meter.transcript_tokens == sum(
        text_tokens(f"word{k}") for k in range(MAX_SEGMENTS))
    rest = services.op_transcript(first[-1]["end"] + 0.001, None)  # the next window: the rest
    assert len(rest) == 1500 - MAX_SEGMENTS and len(services.meter.transcript_segments) == 1500
