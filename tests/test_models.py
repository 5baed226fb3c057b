from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from videvolve.datasets.synthworld.render import render_frame
from videvolve.datasets.synthworld.script import make_script
from videvolve.errors import ModelRequestError
from videvolve.media.captions import SheetLayout, frame_caption, parse_caption, sheet_caption
from videvolve.models.base import Reply, Usage
from videvolve.models.cache import ResponseCache, complete, request_key
from videvolve.models.cost import cost_model
from videvolve.models.parsing import parse_intervals, parse_letter, parse_match, strip_think
from videvolve.models.sim import SimVLM
from videvolve.testing import CountingVLM


def data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def frame_parts(script, times):
    parts = []
    for t in times:
        parts += [{"type": "text", "text": frame_caption(t)},
                  {"type": "image_url", "image_url": {"url": data_url(Image.fromarray(render_frame(script, t)))}}]
    return parts


def test_cost_formulas():
    q25, q3 = cost_model("qwen2.5-vl"), cost_model("qwen3-vl")
    assert q25.resized(320, 180) == (308, 168) and q25.image_tokens(320, 180) == 11 * 6 + 2
    assert q25.image_tokens(1920, 1080) == 69 * 39 + 2
    assert q3.image_tokens(1920, 1080) == 60 * 34 + 2
    assert q25.video_tokens(320, 180, 8) == 4 * 66 + 2  # frames paired
    assert q25.image_tokens(8, 8) == 2 * 2 + 2  # min_pixels lifts tiny images
    with pytest.raises(ValueError):
        cost_model("gpt-4o")


def test_reply_parsing():
    assert strip_think("<think>long\nreasoning</think> B") == "B"
    assert parse_letter("<think>maybe A</think>\nThe answer is (C).", 4) == "C"
    assert parse_letter("B) blue", 4) == "B" and parse_letter("Answer: D", 4) == "D"
    assert parse_letter("no idea", 4) is None and parse_letter("E", 4) is None
    assert parse_intervals("[[30, 20], [25, 40], [50, 55]]", 52) == [(20.0, 40.0), (50.0, 52.0)]
    assert parse_intervals("From 00:01:05 to 00:01:20 and 2:00 - 2:10") == [(65.0, 80.0), (120.0, 130.0)]
    assert parse_intervals("It happens at 12.5 to 20 seconds.") == [(12.5, 20.0)]
    assert parse_intervals("The event never happens.") == [] and parse_intervals("[]") == []
    assert parse_intervals("somewhere in the middle") is None
    assert parse_match('{"yes": [1, 2], "maybe": [3]}') == {"yes": [1.0, 2.0], "maybe": [3.0]}
    assert parse_match("[4.5]") == {"yes": [4.5], "maybe": []}


def test_captions_round_trip():
    layout = SheetLayout(4, 2, 160, 90, 12, 2, (0.0, 1.5, 3.0, 4.5, 6.0, 7.5, 9.0, 10.5))
    assert parse_caption(sheet_caption(layout)) == layout
    assert parse_caption("look: " + frame_caption(12.25)) == 12.25
    assert parse_caption("no caption here") is None


def test_simvlm_answers_from_pixels_only():
    script = make_script("v", 300, seed=3)
    e = next(x for x in script.events if x.size >= 24)
    times = [e.start - 2, e.start + 0.25, (e.start + e.end) / 2, e.end + 2]
    vlm = SimVLM()
    q = f"The video is 300 seconds long.\nQuery: When does the {e.colour} {e.shape} appear?"
    reply = vlm.complete([{"role": "user", "content": [*frame_parts(script, times), {"type": "text", "text": q}]}])
    (start, end), = json.loads(reply.text)
    assert start == pytest.approx((times[0] + times[1]) / 2, abs=0.01)
    assert end == pytest.approx((times[2] + times[3]) / 2, abs=0.01)
    assert reply.usage.prompt_tokens and reply.usage.prompt_tokens > 4 * 68
    match = vlm.complete([{"role": "user", "content": [*frame_parts(script, times), {
        "type": "text", "text": f"Which of the images above show the {e.colour} {e.shape}?"}]}])
    assert json.loads(match.text)["yes"] == times[1:3]
    describe = vlm.complete([{"role": "user", "content": [*frame_parts(script, times[1:2]), {
        "type": "text", "text": "Describe each image above."}]}])
    assert e.colour in describe.text and e.shape in describe.text
    nothing = vlm.complete([{"role": "user", "content": q}])
    assert json.loads(nothing.text) == []  # nothing seen, nothing to report


def test_simvlm_refuses_non_data_urls():
    vlm = SimVLM()
    for url in ("file:///etc/passwd", "http://example.com/x.png"):
        with pytest.raises(ModelRequestError, match="data:image"):
            vlm.complete([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}])


def test_simvlm_opens_no_file(small_world, tmp_path: Path):
    """SimVLM answers with the tasks file gone and under an audit hook that fails on any open."""
    import shutil

    from videvolve.config import RuntimeSettings
    from videvolve.skill_library.services import TaskServices

    copy = tmp_path / "world"
    shutil.copytree(small_world.root, copy)
    tasks = [t for t in small_world.tasks if t.kind == "grounding"][:3]
    (copy / "tasks.jsonl").unlink()
    messages = []
    for task in tasks:  # build requests the way the SDK does (this part reads the video, before the hook)
        services = TaskServices(task.view(), str(copy / "videos" / Path(task.video).name), SimVLM(),
                                cost_model("qwen2.5-vl"), RuntimeSettings())
        handles = [o["handle"] for o in services.op_frames([task.duration * (i + 0.5) / 24 for i in range(24)])]
        content = [{"type": "observation_ref", "handle": h} for h in handles]
        rendered, *_ = services._render([{"role": "user", "content": [*content, {
            "type": "text", "text": services._instruction("answer", None)}]}])
        messages.append(rendered)
    vlm = SimVLM()
    vlm.complete(messages[0])  # warm the shape templates
    opened: list[str] = []
    armed = [True]

    def hook(event: str, args: tuple) -> None:
        if armed[0] and event == "open":
            opened.append(str(args[0]))
            raise RuntimeError(f"SimVLM opened {args[0]}")

    sys.addaudithook(hook)
    try:
        replies = [vlm.complete(m) for m in messages]
    finally:
        armed[0] = False
    assert opened == []
    assert all(isinstance(json.loads(r.text), list) for r in replies)


def test_simvlm_guesses_about_a_quarter_without_frames():
    """(tests/test_blind_baseline.py checks this per template on 2,000 questions each.)"""
    from videvolve.datasets.synthworld import plan_world

    vlm = SimVLM()
    mcq = [t for t in plan_world(videos=40, minutes=10, seed=5)[1] if t.kind == "mcq"]
    right = 0
    for t in mcq:
        options = "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(t.options or []))
        reply = vlm.complete([{"role": "user", "content": f"Question: {t.question}\nOptions:\n{options}"}])
        right += reply.text == t.answer
    assert len(mcq) >= 200
    assert 0.17 <= right / len(mcq) <= 0.33


def test_response_cache(tmp_path: Path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    vlm = CountingVLM()
    CountingVLM.calls = 0  # class-wide: other tests' runs count there too
    msgs = [{"role": "user", "content": "Describe each image above."}]
    a = complete(vlm, msgs, cache=cache)
    b = complete(vlm, msgs, cache=cache)
    assert CountingVLM.calls == 1 and (cache.hits, cache.misses) == (1, 1)
    assert b.cached and not a.cached and b.text == a.text
    again = ResponseCache(tmp_path / "c.sqlite")  # persisted on disk
    assert again.get(request_key(vlm, msgs, None)) is not None
    other = [{"role": "user", "content": "Describe each image above!"}]
    assert request_key(vlm, msgs, None) != request_key(vlm, other, None)
    r = Reply(text="x", usage=Usage(prompt_tokens=3))
    assert Reply.from_dict(r.to_dict()) == r


def test_a_reply_cached_under_one_server_image_cap_is_not_anothers() -> None:
    """``--max-pixels`` names how the server resizes images, which changes replies: it is part of the cache key."""
    from videvolve.config import ModelSettings
    from videvolve.models.openai_backend import openai_vlm

    msgs = [{"role": "user", "content": "Describe each image above."}]

    def key(max_pixels: int | None) -> str:
        settings = ModelSettings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m",
                                 max_pixels=max_pixels, max_retries=0)
        return request_key(openai_vlm(settings, api_key="k"), msgs, None)

    assert key(None) != key(1003520) != key(501760)
    assert key(1003520) == key(1003520)
    assert "server_max_pixels" not in openai_vlm(ModelSettings(backend="openai", base_url="http://127.0.0.1:9/v1",
                                                               model="m"), api_key="k").decoding()
