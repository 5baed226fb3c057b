"""coevowhen_base drives its own tool loop: a scripted tool-calling chat model stands in for the VLM."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import AIMessage

from videvolve.config import RuntimeSettings
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import ChatModelVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.testing import ScriptedChat, tool_call


def run(script: list[AIMessage], task, tmp_path: Path):
    ScriptedChat.seen, ScriptedChat.tools_seen = [], []
    vlm = ChatModelVLM(ScriptedChat(messages=iter(script)), name="scripted")
    harness = load_harness(seed_path("coevowhen_base"))
    return solve_tasks(harness, [task], vlm, cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path)[0]


def test_tool_loop_end_to_end(small_world, tmp_path: Path):
    task = next(t for t in small_world.tasks if t.kind == "grounding" and t.intervals)
    a, b = task.intervals[0].start, task.intervals[0].end
    script = [tool_call("probe_media", 1), tool_call("extract_frames_at", 2, timestamps=[a + 0.1, b - 0.1, 5.0]),
              tool_call("extract_video_clip", 3, start=a, end=min(b, a + 2), fps=2),
              tool_call("final_answer", 4, answer=json.dumps([[a, b]]))]
    result = run(script, task, tmp_path)
    assert result.outcome == "ok" and result.score > 0.6
    assert len(ScriptedChat.seen) == 4
    names = {t["function"]["name"] for t in ScriptedChat.tools_seen[0]}
    assert names == {"probe_media", "extract_frames_at", "extract_video_clip", "inspect_images", "inspect_video",
                     "final_answer", "read_transcript"}
    second = ScriptedChat.seen[1]  # after probe_media: the tool's text result comes back
    assert any(m.type == "tool" and "duration" in str(m.content) for m in second)
    third = ScriptedChat.seen[2]  # after extract_frames_at: three captioned images are in the conversation
    images = [p for m in third if isinstance(m.content, list) for p in m.content
              if isinstance(p, dict) and p.get("type") == "image_url"]
    texts = " ".join(str(p.get("text")) for m in third if isinstance(m.content, list) for p in m.content
                     if isinstance(p, dict) and p.get("type") == "text")
    assert len(images) == 3 and "[frame at 5.00 s]" in texts
    steps = [json.loads(x) for x in (tmp_path / "traces" / f"{task.id}.jsonl").read_text().splitlines()]
    chats = [s for s in steps if s["event"] == "chat"]
    assert [s["event"] for s in steps if s["event"] == "tool"] == ["tool"] * 3
    assert len(chats) == 4
    # cumulative tokens: every round re-sends the history, so the per-round prompt grows
    prompts = [s["prompt_tokens"] for s in chats]
    assert prompts == sorted(prompts) and prompts[-1] > prompts[1] + 3 * 60
    assert result.usage.cumulative_tokens == sum(prompts)
    clip_times = [a + k * 0.5 for k in range(int((min(b, a + 2) - a) * 2 + 0.999))]
    distinct = {int(t * 4 + 1e-9) for t in [a + 0.1, b - 0.1, 5.0, *clip_times]}  # 4 fps: frames shared count once
    assert result.usage.frames == len(distinct) and result.usage.tool_calls == 3


def test_round_cap(small_world, tmp_path: Path):
    task = next(t for t in small_world.tasks if t.kind == "mcq")
    script = [tool_call("probe_media", i) for i in range(30)]
    result = run(script, task, tmp_path)
    assert result.outcome == "error" and result.error_kind == "parse"
    assert len(ScriptedChat.seen) == 24
    steps = (tmp_path / "traces" / f"{task.id}.jsonl").read_text()
    assert "no final_answer within 24 rounds" in steps
