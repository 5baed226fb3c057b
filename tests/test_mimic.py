"""The client against `serve-sim --mimic vllm`, a real HTTP server on 127.0.0.1 behaving as vLLM 0.34 does."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import InfraError
from videvolve.evaluation.solve import solve_tasks
from videvolve.media import clip as make_clip
from videvolve.models.base import Reply, ToolCall
from videvolve.models.cost import cost_model
from videvolve.models.http_errors import ContextTooLong, EndpointError, RequestRejected
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim import qwen_rules
from videvolve.models.sim.mimic import Faults, MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.testing import make_index_video, serve_app


@contextlib.contextmanager
def mimic(backend: Any = None, api_key: str | None = None, model: str = "m", **settings: Any) -> Iterator[Any]:
    """The mimic in a thread; yields (base_url, app)."""
    app = create_app(model, mimic=MimicSettings(**settings), backend=backend, api_key=api_key)
    with serve_app(app) as base:
        yield base, app


def image_url(w: int, h: int) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 20, 30)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def vlm_for(base: str, family: str = "qwen2.5-vl", **kw: Any):
    return openai_vlm(ModelSettings(backend="openai", base_url=base, model="m", family=family, **kw), api_key="k")


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*parts, {"type": "text", "text": "How many images?"}]}]


def test_vllm_errors_and_usage():
    with mimic(api_key="k", family="qwen3-vl", max_model_len=3000, limit_mm_per_prompt={"image": 2}) as (base, _):
        assert httpx.get(f"{base}/models").json() == {"error": "Unauthorized"}  # vLLM's 401 body, every /v1 path
        assert httpx.post(f"{base}/chat/completions", json={}).status_code == 401
        auth = {"Authorization": "Bearer k"}

        def post(parts: list[dict[str, Any]], model: str = "m") -> httpx.Response:
            return httpx.post(f"{base}/chat/completions", headers=auth, timeout=30,
                              json={"model": model, "messages": [{"role": "user", "content": parts}]})

        assert post([{"type": "text", "text": "hi"}], "x").json()["error"]["message"] == \
            "The model `x` does not exist. Valid aliases: m."
        bad = post([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])
        assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("Failed to load image: ")
        many = post([{"type": "image_url", "image_url": {"url": image_url(16, 16)}}] * 3)
        assert many.status_code == 400 and "At most 2 image(s) may be provided in one prompt" in many.text
        long = post([{"type": "image_url", "image_url": {"url": image_url(1920, 1080)}}] * 2)
        assert long.status_code == 400 and "exceeds model's maximum context length (3000)." in long.text
        assert "retry-after" not in {k.lower() for k in long.headers}
        ok = post([{"type": "image_url", "image_url": {"url": image_url(160, 90)}}])
        assert ok.json()["usage"]["prompt_tokens"] == 4 + 3 + 66 + 2  # a 160x90 frame costs 66 (+2), not 17

        vlm = vlm_for(base, "qwen3-vl")  # the key goes with every request, the models list included
        reply = vlm.complete(user({"type": "image_url", "image_url": {"url": image_url(160, 90)}}))
        assert reply.usage.prompt_tokens == 68 + 4 + 3 + 4
        with pytest.raises(ContextTooLong, match=r"about \d+ prompt tokens .* context is 3000 tokens"):
            vlm.complete(user(*[{"type": "image_url", "image_url": {"url": image_url(1920, 1080)}}] * 2))
        with pytest.raises(RequestRejected, match=r"\(400\).*Failed to load image"):
            vlm.complete(user({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}))
        with pytest.raises(EndpointError, match="401"):
            openai_vlm(ModelSettings(backend="openai", base_url=base, model="m"), api_key="wrong").complete(
                user())


def test_a_501_is_the_requests_fault_not_an_outage():
    """vLLM answers a data URL that is not base64 with ``NotImplementedError`` (multimodal/media/connector.py:340-343),
    which its handler makes a 501 (serve/exception_handling/error_response.py:84-87): the same request gets it again,
    so it is that request's error at once, not an outage retried for the retry window."""
    with mimic() as (base, app):
        r = httpx.post(f"{base}/chat/completions", timeout=30, json={"model": "m", "messages": user(
            {"type": "image_url", "image_url": {"url": "data:image/png,abc"}})})
        assert r.status_code == 501 and r.json()["error"] == {
            "message": "Only base64 data URLs are supported for now.", "type": "NotImplementedError", "param": None,
            "code": 501}
        started = time.monotonic()
        with pytest.raises(RequestRejected, match=r"\(501\).*Only base64 data URLs"):
            vlm_for(base, retry_window_s=30).complete(user({"type": "image_url",
                                                            "image_url": {"url": "data:image/png,abc"}}))
        assert time.monotonic() - started < 10 and app.state.stats["requests"] == 2


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_cost_model_agrees_with_the_mimics_processor(family: str):
    cost, proc = cost_model(family), qwen_rules.PROCESSORS[family]
    for w, h in ((160, 90), (320, 180), (333, 187), (1280, 720), (1920, 1080), (3840, 2160), (20, 600)):
        assert cost.image_tokens(w, h) == qwen_rules.image_tokens(proc, w, h), (w, h)
        for n, fps in ((2, 1.0), (5, 2.0), (32, 4.0), (64, 0.5)):
            assert cost.video_tokens(w, h, n, fps) == qwen_rules.video_tokens(proc, w, h, list(range(n)), fps)


def test_wrong_client_estimate_meets_the_servers_400():
    # the client believes in Qwen2.5-VL's small-image cost; the server is Qwen3-VL (66 tokens per small frame)
    with mimic(family="qwen3-vl", max_model_len=250) as (base, app):
        vlm = vlm_for(base, "qwen2.5-vl", context_margin=0.0)
        parts = [{"type": "image_url", "image_url": {"url": image_url(160, 90)}}] * 4
        with pytest.raises(RequestRejected, match=r"Input length \(\d+\) exceeds model's maximum context length "
                           r"\(250\)"):
            vlm.complete(user(*parts))
        assert app.state.stats["requests"] == 1


def clip_part(tmp_path: Path, frames: int, rate: float, side: int = 64) -> tuple[dict[str, Any], Any]:
    """A clip of exactly ``frames`` frames at ``rate`` fps cut from an index video, as the harness SDK sends it."""
    seconds = frames / rate
    source_fps = max(2, min(25, math.ceil(rate * 2)))
    source = make_index_video(tmp_path / f"s{frames}-{rate}.mp4", seconds=seconds + 1, fps=source_fps, width=side,
                              height=side * 3 // 4, gop=50)
    info = make_clip(source, 0.0, seconds, tmp_path / f"c{frames}-{rate}.mp4", fps=rate)
    assert info.frame_count == frames
    url = "data:video/mp4;base64," + base64.b64encode(Path(info.path).read_bytes()).decode()
    return {"type": "video_url", "video_url": {"url": url}, "num_frames": frames}, info


CLIPS = [(4, 2.0), (7, 0.35), (33, 4.0), (120, 12.0), (300, 25.0)]


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_clips_decoded_by_the_server_are_the_metered_frames(family: str, tmp_path: Path):
    """4-300 frames at 0.35-25 fps: the loader decodes every frame, the processor keeps them, tokens agree."""
    from videvolve.models.context import estimate_prompt_tokens

    with mimic(family=family, trust_request_mm_kwargs=True) as (base, app):
        vlm = vlm_for(base, family)
        for frames, rate in CLIPS:
            part, info = clip_part(tmp_path, frames, rate)
            messages = user(part)
            metered = estimate_prompt_tokens(messages, None, cost_model(family))
            served = vlm.complete(messages).usage.prompt_tokens
            video = app.state.stats["videos"][-1]
            assert video == {"backend": "opencv", "loaded": frames, "kept": frames}, (frames, rate)
            assert served is not None and abs(served - metered) <= 0.01 * served, (frames, rate, served, metered)
            video_tokens = cost_model(family).video_tokens(info.width, info.height, frames, rate)
            assert served - video_tokens == 4 + 3 + 4  # the rest is the text, counted alike


def test_a_server_that_refuses_a_requests_media_settings_stops_the_run_with_the_fix(tmp_path: Path):
    """vLLM 0.34 refuses a request's ``media_io_kwargs`` / ``mm_processor_kwargs`` unless started with
    ``--trust-request-mm-kwargs``: a server's configuration, so the run stops (never a task's ``bad_request``, which
    would score every clip 0) and the message names both fixes."""
    part, _ = clip_part(tmp_path, 4, 2.0)
    with mimic() as (base, app):
        with pytest.raises(EndpointError, match=r"--trust-request-mm-kwargs .*--clip-kwargs server") as stopped:
            vlm_for(base).complete(user(part))
        assert "Per-request mm_processor_kwargs are disabled" in str(stopped.value)
        assert app.state.stats["requests"] == 1


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_a_server_started_with_the_clip_settings_decodes_every_frame_of_requests_without_them(family: str,
                                                                                              tmp_path: Path):
    """``--clip-kwargs server``: no request field, the server's own ``--media-io-kwargs`` and
    ``--mm-processor-kwargs`` (as docs/reference/vllm.md gives them) decode and keep every frame of the clip."""
    from videvolve.models.http_errors import SERVER_CLIP_FLAGS

    flags = SERVER_CLIP_FLAGS.split("'")
    media, processor = json.loads(flags[1]), json.loads(flags[3])
    with mimic(family=family, media_io_kwargs=media, mm_processor_kwargs=processor) as (base, app):
        vlm = vlm_for(base, family, clip_kwargs="server")
        for frames, rate in CLIPS[:3]:
            part, _ = clip_part(tmp_path, frames, rate)
            assert vlm.complete(user(part)).text
            assert app.state.stats["videos"][-1] == {"backend": "opencv", "loaded": frames, "kept": frames}


@pytest.mark.parametrize("family,old_kwargs,no_kwargs", [("qwen2.5-vl", 4, 6), ("qwen3-vl", 4, 7)])
def test_the_checkpoints_loader_ignores_num_frames(family: str, old_kwargs: int, no_kwargs: int, tmp_path: Path):
    """vLLM's Qwen loaders: 4 frames for the old ``fps: -1`` request; at 2 fps without it (a 7-frame clip at
    0.35 fps: 6 frames on Qwen2.5-VL, its even floor; all 7 on Qwen3-VL)."""
    part, _ = clip_part(tmp_path, 7, 0.35)
    clean = {k: v for k, v in part.items() if k != "num_frames"}
    thirty_two, _ = clip_part(tmp_path, 32, 4.0)
    with mimic(family=family, trust_request_mm_kwargs=True) as (base, app):
        def post(p: dict[str, Any], **extra: Any) -> None:
            r = httpx.post(f"{base}/chat/completions", timeout=30,
                           json={"model": "m", "messages": user(p), **extra})
            assert r.status_code == 200, r.text

        old = {"media_io_kwargs": {"video": {"num_frames": 7, "fps": -1}}}
        post(clean, **old)
        post(clean)
        post({k: v for k, v in thirty_two.items() if k != "num_frames"},
             media_io_kwargs={"video": {"num_frames": 32, "fps": -1}})
    videos = app.state.stats["videos"]
    backend = qwen_rules.VIDEO_BACKENDS[family]
    assert videos[0] == {"backend": backend, "loaded": old_kwargs, "kept": old_kwargs}
    assert videos[1]["loaded"] == no_kwargs and videos[1]["kept"] == no_kwargs
    assert videos[2]["kept"] == 4
    if family == "qwen2.5-vl":  # the figures: 600 tokens served for a 32-frame clip metered at 4,786
        assert cost_model(family).video_tokens(640, 360, 4) == 600
        assert cost_model(family).video_tokens(640, 360, 32) == 4786


@pytest.mark.slow
def test_retry_window_honours_retry_after_then_stops_cleanly():
    with mimic(fail_first=3, retry_after=0.2) as (base, app):
        started = time.monotonic()
        reply = vlm_for(base, retry_window_s=10).complete(user())
        assert reply.text and app.state.faults.failed == 3 and time.monotonic() - started >= 0.6
        httpx.post(f"{base.removesuffix('/v1')}/mimic/faults", json={"unavailable_s": 30})
        with pytest.raises(InfraError, match=r"failed after \d+ retries over [12] s: HTTP 503"):
            vlm_for(base, retry_window_s=1.5).complete(user())


class ScriptedToolVLM:
    """A model that calls tools in order (the mimic renders them as hermes text, as Qwen models write them)."""

    name, revision = "scripted", "1"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = list(calls)

    def decoding(self) -> dict[str, Any]:
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        name, args = self.calls.pop(0)
        return Reply(text="", tool_calls=[ToolCall(id="x", name=name, arguments=args)])


TOOL_FLAGS: dict[str, Any] = {"enable_auto_tool_choice": True, "tool_call_parser": "hermes"}


def test_coevowhen_tool_loop_on_hermes_text(small_world, tmp_path: Path):
    task = next(t for t in small_world.tasks if t.kind == "grounding" and t.intervals)
    a, b = task.intervals[0].start, task.intervals[0].end
    script = ScriptedToolVLM([("probe_media", {}), ("extract_frames_at", {"timestamps": [a + 0.1, b - 0.1]}),
                              ("final_answer", {"answer": json.dumps([[a, b]])})])
    with mimic(backend=script, **TOOL_FLAGS) as (base, app):
        result = solve_tasks(load_harness(seed_path("coevowhen_base")), [task], vlm_for(base),
                             cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path)[0]
    assert result.outcome == "ok" and result.score > 0.6 and app.state.stats["served"] == 3


def test_without_the_tool_flags_the_run_stops_at_the_first_tool_request(small_world, tmp_path: Path):
    """vLLM answers every request carrying tools with a 400 when started without a tool parser: the run stops with
    the fix instead of scoring each task an error (renderers/online_renderer.py:278-281)."""
    tasks = [t for t in small_world.tasks if t.kind == "grounding"][:3]
    script = ScriptedToolVLM([("probe_media", {})] * 10)
    with mimic(backend=script) as (base, app):
        with pytest.raises(EndpointError, match="--enable-auto-tool-choice --tool-call-parser hermes") as caught:
            solve_tasks(load_harness(seed_path("coevowhen_base")), tasks, vlm_for(base), cost_model("qwen2.5-vl"),
                        RuntimeSettings(concurrency=1), tmp_path)
        # one request, or two when the pool's one worker took the next task before the stop (threads.run_in_threads)
        assert 1 <= app.state.stats["requests"] <= 2 and app.state.stats["served"] == 0
    assert '"auto" tool choice requires --enable-auto-tool-choice' in str(caught.value)


def test_malformed_tool_call_is_a_parse_error(small_world, tmp_path: Path):
    class Broken(ScriptedToolVLM):
        def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
            return Reply(text='<tool_call>{"name": "probe_media", "arguments": {</tool_call>')

    task = next(t for t in small_world.tasks if t.kind == "grounding")
    with mimic(backend=Broken([]), **TOOL_FLAGS) as (base, _):  # the hermes parser fails: vLLM returns the text
        result = solve_tasks(load_harness(seed_path("coevowhen_base")), [task], vlm_for(base),
                             cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path)[0]
    assert result.outcome == "error" and result.error_kind == "parse"
    trace = (tmp_path / "traces" / f"{task.id}.jsonl").read_text()
    assert "invalid_tool_calls" in trace and "not JSON" in trace


def run_eval(world, out: Path, base: str, *extra: str) -> dict[str, Any]:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "videvolve", "eval", "--tasks", str(world.tasks_path), "--split", "all",
                        "--harness", "uniform", "--limit", "4", "--out", str(out), "--concurrency", "1", "--json",
                        "--backend", "openai", "--base-url", base, "--model", "simvlm", "--no-cache", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    summary: dict[str, Any] = json.loads(r.stdout)
    return summary


@pytest.mark.slow
def test_a_422_is_one_tasks_error_and_eval_finishes_the_rest(small_world, tmp_path: Path):
    from videvolve.testing import serve_sim

    with serve_sim("--mimic", "vllm") as base:
        httpx.post(f"{base.removesuffix('/v1')}/mimic/faults", json={"status": 422, "count": 1})
        summary = run_eval(small_world, tmp_path / "e", base)
    assert summary["n"] == 4 and summary["errors_by_kind"] == {"bad_request": 1}
    result = next(json.loads(p.read_text()) for p in (tmp_path / "e" / "results").glob("*.json")
                  if json.loads(p.read_text()).get("error_kind") == "bad_request")
    assert "422" in result["error"] and "fault injected" in result["error"]  # the server's message


@pytest.mark.slow
def test_a_restart_longer_than_the_old_retry_budget_is_ridden_out(small_world, tmp_path: Path):
    from videvolve.testing import serve_sim

    with serve_sim("--mimic", "vllm") as base:
        calm = run_eval(small_world, tmp_path / "calm", base)
        httpx.post(f"{base.removesuffix('/v1')}/mimic/faults", json={"unavailable_s": 10})  # > the old ~8 s budget
        started = time.monotonic()
        stormy = run_eval(small_world, tmp_path / "stormy", base, "--retry-window", "40")
        assert time.monotonic() - started >= 10
        failed = httpx.get(f"{base.removesuffix('/v1')}/mimic/stats").json()["failed"]
    assert failed >= 3 and stormy["score"] == calm["score"] and stormy["errors_by_kind"] == calm["errors_by_kind"]


class PlainTextVLM(ScriptedToolVLM):
    """A model that answers in words and never calls a tool."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        return Reply(text="A")


@pytest.mark.slow
def test_doctor_tells_no_tool_parser_from_no_tool_call_and_calibrates_clips(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path):
    from videvolve.doctor import run_checks

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    video = make_index_video(tmp_path / "v.mp4", seconds=20, fps=10, width=320, height=180)
    calls = ScriptedToolVLM([("final_answer", {"answer": "A"})] * 40)
    cases: tuple[tuple[dict[str, Any], ScriptedToolVLM, str, str], ...] = (
        ({"trust_request_mm_kwargs": True}, calls, "fail", "the server has no tool parser"),
        (TOOL_FLAGS, calls, "ok", "parses tool calls"),
        (TOOL_FLAGS, PlainTextVLM([]), "warn", "the model made no tool call"))
    seen = []
    for flags, backend, status, expected in cases:
        with mimic(backend=backend, api_key="k", family="qwen3-vl", **flags) as (base, _):
            settings = ModelSettings(backend="openai", base_url=base, model="m", family="qwen3-vl")
            first = flags is cases[0][0]
            checks = {c.name: c for c in run_checks(settings, calibration=first, video=video if first else None)}
        tool = checks["tool calling"]
        assert tool.status == status and expected in tool.detail and checks["endpoint"].status == "ok"
        seen.append(checks)
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in seen[0]["tool calling"].detail
    calibration = seen[0]["calibration"]
    assert calibration.status == "ok" and "160x90: server 68, formula 68 (error +0)" in calibration.detail
    assert "worst 0.0%" in calibration.detail
    clips = seen[0]["clip calibration"]
    assert clips.status == "ok" and "7 frames 320x180" in clips.detail and "worst 0.0%" in clips.detail, clips
    with mimic(backend=calls, api_key="k", family="qwen3-vl") as (base, _):  # vLLM's default: request fields refused
        settings = ModelSettings(backend="openai", base_url=base, model="m", family="qwen3-vl")
        clips = next(c for c in run_checks(settings, calibration=True, video=video) if c.name == "clip calibration")
    assert clips.status == "fail" and "restart vLLM with --trust-request-mm-kwargs" in clips.detail, clips
    assert "--clip-kwargs server" in clips.detail


@pytest.mark.slow
def test_doctor_clip_calibration_catches_a_server_that_resamples(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """``--clip-kwargs server`` against a server started without the clip settings: it decodes with the checkpoint's
    own loader, and is caught, with the frame count its tokens imply."""
    from videvolve.doctor import run_checks

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    video = make_index_video(tmp_path / "v.mp4", seconds=20, fps=10, width=320, height=180)
    with mimic(api_key="k", family="qwen2.5-vl", **TOOL_FLAGS) as (base, _):
        settings = ModelSettings(backend="openai", base_url=base, model="m", family="qwen2.5-vl", clip_kwargs="server")
        checks = {c.name: c for c in run_checks(settings, calibration=True, video=video)}
    clips = checks["clip calibration"]
    assert clips.status == "fail" and "7 frames 320x180: server 200, formula 266 (the server's count is that of 6 " \
        "frames)" in clips.detail, clips  # sampled at 2 fps, to an even count
    assert "started as --clip-kwargs server says" in clips.detail


@pytest.mark.slow
def test_an_evolve_run_rides_out_a_server_restart(small_world, tmp_path: Path, seed: Path):
    """A 10 s outage (longer than the old ~8 s retry budget) inside an evolve run changes nothing of its outcome."""
    import subprocess
    import sys

    from videvolve.testing import serve_sim

    def evolve(run: Path, base: str) -> list[dict[str, Any]]:
        r = subprocess.run([sys.executable, "-m", "videvolve", "evolve", "--tasks", str(small_world.tasks_path),
                            "--run", str(run), "--seed-harness", str(seed), "--iterations", "1", "--batch", "2",
                            "--memory", str(tmp_path / f"m-{run.name}"), "--embedder", "hashing", "--no-cache",
                            "--backend", "openai", "--base-url", base, "--model", "simvlm", "--retry-window", "60"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
        return [{k: v.get(k) for k in ("version", "decision", "score", "cost")}
                for v in map(json.loads, (run / "lineage.jsonl").read_text().splitlines())]

    with serve_sim("--mimic", "vllm") as base:
        calm = evolve(tmp_path / "calm", base)
        httpx.post(f"{base.removesuffix('/v1')}/mimic/faults", json={"unavailable_s": 10})
        stormy = evolve(tmp_path / "stormy", base)
        failed = httpx.get(f"{base.removesuffix('/v1')}/mimic/stats").json()["failed"]
    assert failed >= 3 and stormy == calm
    from videvolve.report import build_report

    html = " ".join(build_report(tmp_path / "calm").read_text().split())
    assert "reported by the model" in html, html[:2000]


def test_context_edge_dead_engine_and_health():
    """N == M is refused too (max_tokens would be 0); a dead engine answers 500 with /health at 503; no Retry-After."""
    with mimic(max_model_len=10) as (base, _):
        def post(text: str) -> httpx.Response:
            return httpx.post(f"{base}/chat/completions", timeout=30,
                              json={"model": "m", "messages": [{"role": "user", "content": text}]})

        assert post("x" * 8).status_code == 200  # 4 + 3 + 2 = 9 tokens
        edge = post("x" * 12)  # 4 + 3 + 3 = 10 == max_model_len
        assert edge.status_code == 400 and edge.json()["error"]["message"] == "max_tokens must be at least 1, got 0."
        over = post("x" * 16)
        assert "maximum context length is 10 tokens. However, your prompt contains 11 input tokens" in over.text
        root = base.removesuffix("/v1")
        assert httpx.get(f"{root}/health").status_code == 200 and httpx.get(f"{root}/health").content == b""
        httpx.post(f"{root}/mimic/faults", json={"dead": 1})
        assert httpx.get(f"{root}/health").status_code == 503
        dead = post("hi")
        assert dead.status_code == 500 and "retry-after" not in {k.lower() for k in dead.headers}
        assert dead.json()["error"]["message"] == "The server had an error while processing your request."
        assert httpx.get(f"{root}/health").status_code == 200 and post("hi").status_code == 200


def test_a_restart_window_opens_at_the_next_request_not_at_the_call():
    """A client slow to start (a loaded machine) still meets the whole window: it starts by request, not by clock."""
    faults = Faults()
    faults.open_window(0.2)
    time.sleep(0.3)  # longer than the window: opened at the call, it would be over
    assert faults.fail_now() and faults.fail_now() and faults.failed == 2
    time.sleep(0.3)
    assert not faults.fail_now()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_a_servers_max_pixels_is_metered_when_given_and_doctor_says_so_when_not(monkeypatch: pytest.MonkeyPatch,
                                                                               family: str) -> None:
    """vLLM with ``--mm-processor-kwargs '{"max_pixels": N}'`` (as the docs start it) resizes a larger image to fit:
    a 1920x1080 frame costs 1,224 tokens on Qwen2.5-VL, not the 2,693 the checkpoint's own limits give. Before, the
    cost model could not know it (every large picture metered above what it cost, calibration failing)."""
    from videvolve.doctor import run_checks
    from videvolve.models.cost import cost_model

    assert cost_model("qwen2.5-vl", 1003520).image_tokens(1920, 1080) == 1224
    assert cost_model("qwen2.5-vl").image_tokens(1920, 1080) == 2693
    assert cost_model("qwen2.5-vl", 1003520).image_tokens(1280, 720) == cost_model("qwen2.5-vl").image_tokens(1280, 720)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cap = 1003520 if family == "qwen2.5-vl" else 1310720
    seen = {}
    with mimic(api_key="k", family=family, mm_processor_kwargs={"max_pixels": cap}, **TOOL_FLAGS) as (base, _):
        for given in (None, cap):
            settings = ModelSettings(backend="openai", base_url=base, model="m", family=family, max_pixels=given)
            seen[given] = {c.name: c for c in run_checks(settings, calibration=True)}["calibration"]
    assert seen[cap].status == "ok" and "worst 0.0%" in seen[cap].detail, seen[cap]  # main: no --max-pixels
    assert seen[None].status != "ok" and "as --max-pixels (None)" in seen[None].detail, seen[None]


def test_serve_vllm_names_the_max_pixels_it_passes_on() -> None:
    from videvolve.cli.model_cmds import served_max_pixels

    assert served_max_pixels(["--chat-template", "t.jinja", "--mm-processor-kwargs", '{"max_pixels": 1003520}']) \
        == 1003520
    assert served_max_pixels(["--mm-processor-kwargs", '{"videos_kwargs": {"do_sample_frames": false}}']) is None
    assert served_max_pixels(["--mm-processor-kwargs", "not json"]) is None and served_max_pixels([]) is None


def test_a_wrong_key_says_what_vllm_said():
    """vLLM's 401 body is ``{"error": "Unauthorized"}``: the stop read ``(401: Error code: 401)``."""
    with mimic(api_key="right") as (base, _):
        vlm = openai_vlm(ModelSettings(backend="openai", base_url=base, model="m"), api_key="wrong")
        with pytest.raises(EndpointError, match=r"authentication failed for model m \(401: Unauthorized\)"):
            vlm.complete(user())


def test_a_400_that_merely_quotes_a_servers_configuration_message_is_the_requests_not_the_servers():
    """A harness writes messages and tool schemas; a 400 that echoes them must not stop the run as a server
    misconfiguration: only vLLM's own messages, from their start, do."""
    from videvolve.models.http_errors import refuses_request_mm_kwargs, server_misconfigured

    assert server_misconfigured('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
                                'be set')
    assert server_misconfigured('tool_choice="required" requires --tool-call-parser to be set')
    assert refuses_request_mm_kwargs("Per-request media_io_kwargs are disabled by default because they can change "
                                     "multimodal media loading resource usage. Start the server with "
                                     "--trust-request-mm-kwargs only when clients are trusted.")
    echoed = ("1 validation error: value='x --tool-call-parser to be set Per-request mm_processor_kwargs are disabled "
              "by default --trust-request-mm-kwargs' is not a valid tool name")
    assert not server_misconfigured(echoed) and not refuses_request_mm_kwargs(echoed)
