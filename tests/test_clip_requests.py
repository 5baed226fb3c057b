"""A harness's clip sent as one video (``clip_mode="video"``): vLLM must see exactly the frames the harness was told
it showed, and be able to take the request at all."""

from __future__ import annotations

import base64
import io
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pytest

from videvolve.config import RuntimeSettings
from videvolve.media.decode import frames_at
from videvolve.models.cost import cost_model
from videvolve.models.sim import qwen_rules
from videvolve.models.sim.mimic import MimicError, MimicSettings, decode_video, prepare
from videvolve.skill_library.services import TaskServices
from videvolve.tasks import TaskView
from videvolve.testing import ScriptedReplies, index_frame, make_index_video, read_index


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_video(tmp_path_factory.mktemp("clips") / "v.mp4", seconds=20, fps=25, gop=12)


@pytest.fixture(scope="module")
def odd_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """239x135 (H.264 in 4:4:4 takes odd sizes; a clip is 4:2:0, so even: 238x134)."""
    path = tmp_path_factory.mktemp("clips") / "odd.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(25))
        stream.width, stream.height, stream.pix_fmt = 239, 135, "yuv444p"
        for i in range(100):
            frame = av.VideoFrame.from_ndarray(index_frame(i, 239, 135), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _ask_clip(source: Path, family: str, start: float, end: float, fps: float,
              max_side: int | None = None) -> tuple[TaskServices, list[float], list[dict[str, Any]]]:
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)
    vlm = ScriptedReplies(["A"])
    services = TaskServices(view, str(source), vlm, cost_model(family), RuntimeSettings(clip_mode="video"))
    clip = services.op_clip(start, end, fps, max_side)
    services.op_ask([clip["handle"]], prompt="What happens?")
    parts = [p for m in vlm.requests[-1] if isinstance(m.get("content"), list) for p in m["content"]]
    return services, clip["times"], parts


def _shown(url: str) -> list[int]:
    raw = base64.b64decode(url.partition(",")[2])
    with av.open(io.BytesIO(raw), "r") as container:
        return [read_index(f.to_image()) for f in container.decode(container.streams.video[0])]


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
@pytest.mark.parametrize("start,end,fps", [(0.0, 3.3, 2.0), (5.0, 6.1, 4.0), (0.0, 20.0, 20.0)])
def test_the_video_holds_the_frames_the_harness_was_given(source: Path, family: str, start: float, end: float,
                                                          fps: float):
    """The clip's frames are those on screen at the clip's ``times`` (3.3 s at 2 fps: 7 frames at 0, 0.5 ... 3.0 s,
    not 7 spread evenly over 3.3 s; 400 frames capped at 256: the first 256 at 20 fps, not 256 over 20 s), and the
    tokens metered are those vLLM's processor counts for the video sent (mimic's count of the decoded clip)."""
    services, times, parts = _ask_clip(source, family, start, end, fps, max_side=96)
    video = next(p for p in parts if p.get("type") == "video_url")
    expected = [read_index(f.image) for f in frames_at(source, times, max_side=96, clamp=True)]
    assert _shown(video["video_url"]["url"]) == expected
    total, rate, w, h = decode_video(video["video_url"]["url"])
    served = qwen_rules.video_tokens(qwen_rules.PROCESSORS[family], w, h, list(range(total)), rate)
    assert services.meter.video_tokens == served


def test_a_clip_is_priced_at_its_own_even_size(odd_source: Path):
    """Frames of 239x135 go in a 238x134 clip: 8 x 5 tokens a frame pair on Qwen2.5-VL (238 / 28 = 8.5 rounds to 8),
    not the 9 x 5 of a 239-pixel frame."""
    services, _, parts = _ask_clip(odd_source, "qwen2.5-vl", 0.0, 2.0, 2.0)
    video = next(p for p in parts if p.get("type") == "video_url")
    total, rate, w, h = decode_video(video["video_url"]["url"])
    assert (total, w, h) == (4, 238, 134)
    assert services.meter.video_tokens == qwen_rules.video_tokens(qwen_rules.PROCESSORS["qwen2.5-vl"], w, h,
                                                                  list(range(total)), rate) == 2 * 40 + 2


def test_a_one_frame_clip_goes_as_a_frame(source: Path):
    """Qwen3-VL's video processor refuses a one-frame video (transformers' qwen3_vl ``smart_resize``: "t:1 must be
    larger than temporal_factor:2"; vLLM answers 400): a clip of one frame is sent as that frame's image."""
    services, times, parts = _ask_clip(source, "qwen3-vl", 2.0, 2.4, 2.5)
    assert len(times) == 1
    assert [p["type"] for p in parts if p["type"] != "text"] == ["image_url"]
    assert services.meter.video_tokens == 0 and services.meter.image_tokens == cost_model("qwen3-vl").image_tokens(
        320, 180)


def test_the_mimic_refuses_a_one_frame_video_on_qwen3_vl(source: Path, tmp_path: Path):
    from videvolve.media import clip as make_clip

    info = make_clip(source, 2.0, 2.4, tmp_path / "one.mp4", fps=2.5)
    assert info.frame_count == 1
    url = "data:video/mp4;base64," + base64.b64encode(Path(info.path).read_bytes()).decode()
    payload = {"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}}]}],
               "media_io_kwargs": {"video": {"video_backend": "opencv", "num_frames": 1, "fps": -1}},
               "mm_processor_kwargs": {"videos_kwargs": {"do_sample_frames": False}}}
    assert prepare(payload, MimicSettings(family="qwen2.5-vl", trust_request_mm_kwargs=True)).videos[0]["kept"] == 1
    with pytest.raises(MimicError, match=r"Failed to apply Qwen3VLProcessor .*\(t:1 must be larger than "
                                          r"temporal_factor:2\)") as refused:
        prepare(payload, MimicSettings(family="qwen3-vl", trust_request_mm_kwargs=True))
    assert refused.value.status == 400


def test_the_caption_says_where_the_videos_own_timestamps_start(source: Path):
    """Qwen3-VL is told ``<0.2 seconds>`` ... counted from the clip's own first frame (vLLM: frame index / the
    clip's rate), while the caption gives the source's times: it says which source time that 0 is."""
    _, _, parts = _ask_clip(source, "qwen3-vl", 5.0, 6.1, 4.0)
    caption = next(p["text"] for p in parts if p.get("type") == "text" and p["text"].startswith("[clip"))
    assert caption.startswith("[clip 5.00-") and "5.00, 5.25, 5.50" in caption
    assert caption.endswith("timestamps inside the video count from 0 at 5.00 s]")
