from __future__ import annotations

import math
import random
from pathlib import Path

import av
import pytest
from PIL import Image

from tests.conftest import sample
from videvolve.errors import MediaNotFoundError, TimeOutOfRangeError, UnreadableVideoError
from videvolve.media import FrameCache, clip, contact_sheet, frame_cache, frames_at, iter_frames, probe, stream_index
from videvolve.media.info import FileKey
from videvolve.media.sheet import format_timestamp
from videvolve.testing import read_index

FPS = 25
N_FRAMES = 500


def expected(t: float, fps: int = FPS, n: int = N_FRAMES) -> int:
    return min(math.floor(t * fps + 1e-9), n - 1)


def test_probe(index_video: Path):
    info = probe(index_video)
    assert info.duration == pytest.approx(20.0)
    assert info.fps == pytest.approx(25.0)
    assert (info.width, info.height) == (320, 180)
    assert info.frame_count == N_FRAMES
    assert info.codec == "h264"
    assert info.keyframe_interval == pytest.approx(12 / 25)
    assert not info.has_audio and not info.variable_frame_rate
    assert info.start_time == 0.0


def test_frames_at_200_random_times_including_edges_and_gop_boundaries(index_video: Path):
    rng = random.Random(1234)
    times = [rng.uniform(0, 20.0) for _ in range(200)]
    times += [0.0, 20.0 - 1e-6, 20.0, 19.96]
    gop = 12 / FPS
    times += [k * gop for k in range(1, 41)] + [k * gop - 1e-4 for k in range(1, 41)]  # on and just before
    frames = frames_at(index_video, times, cache=None)
    assert [f.requested for f in frames] == times  # the caller's order
    for f in frames:
        assert read_index(f.image) == expected(f.requested), f.requested
        assert f.time == pytest.approx(expected(f.requested) / FPS)
        assert f.time <= f.requested + 1e-9


def test_frames_at_keeps_order_and_duplicates(index_video: Path):
    times = [15.0, 1.0, 15.0, 0.02, 1.0]
    frames = frames_at(index_video, times)
    assert [read_index(f.image) for f in frames] == [375, 25, 375, 0, 25]


def test_frames_at_dense_sweep_and_long_gop(long_gop_video: Path):
    times = [i / 10 for i in range(120)]
    frames = frames_at(long_gop_video, times, cache=None)
    assert [read_index(f.image) for f in frames] == [expected(t, 30, 360) for t in times]


def test_frames_at_max_side(index_video: Path):
    frames = frames_at(index_video, [3.0, 7.5], max_side=96)
    assert frames[0].image.size == (96, 54)
    assert [read_index(f.image) for f in frames] == [75, 187]


def test_out_of_range_times(index_video: Path):
    with pytest.raises(TimeOutOfRangeError, match=r"outside \[0, 20.000\]"):
        frames_at(index_video, [-0.5])
    with pytest.raises(TimeOutOfRangeError):
        frames_at(index_video, [21.0])
    with pytest.raises(TimeOutOfRangeError):
        frames_at(index_video, [float("nan")])
    frames = frames_at(index_video, [-3.0, 99.0], clamp=True)
    assert [read_index(f.image) for f in frames] == [0, N_FRAMES - 1]


def test_missing_and_unreadable_files(tmp_path: Path):
    with pytest.raises(MediaNotFoundError, match=r"no_such\.mp4") as info:
        frames_at(tmp_path / "no_such.mp4", [0.0])
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        probe(tmp_path / "no_such.mp4")
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"this is not a video" * 100)
    with pytest.raises(UnreadableVideoError, match=r"junk\.mp4") as info2:
        probe(junk)
    assert isinstance(info2.value, ValueError)
    with pytest.raises(MediaNotFoundError):
        probe(tmp_path)  # a folder is not a video


def test_truncated_file_raises_with_the_time(index_video: Path, tmp_path: Path):
    data = index_video.read_bytes()
    cut = tmp_path / "cut.mp4"
    # keep the moov atom (at the end for PyAV's muxer) but zero a stretch in the middle of the media data
    damaged = bytearray(data)
    start, stop = len(data) // 2, len(data) // 2 + 20000
    damaged[start:stop] = bytes(stop - start)
    cut.write_bytes(bytes(damaged))
    early = frames_at(cut, [0.5, 5.0])
    assert [read_index(f.image) for f in early] == [12, 125]
    with pytest.raises(UnreadableVideoError, match=r"cut\.mp4 at ") as info:
        frames_at(cut, [i * 0.5 for i in range(40)], cache=None)
    assert info.value.time is not None and 5.0 < info.value.time < 20.0
    assert read_index(frames_at(cut, [19.0], cache=None)[0].image) == 475  # past the damage, a seek recovers


def test_frame_cache_hits_and_bound(index_video: Path):
    frames_at(index_video, [1.0, 2.0])
    before = frame_cache.hits
    frames = frames_at(index_video, [1.0, 1.01, 2.0])  # 1.01 is still frame 25 on screen
    assert frame_cache.hits - before == 3
    assert [read_index(f.image) for f in frames] == [25, 25, 50]
    small = FrameCache(max_bytes=320 * 180 * 3 * 2)
    frames_at(index_video, [1.0, 2.0, 3.0, 4.0], cache=small)
    assert len(small) == 2 and small.nbytes <= small.max_bytes
    assert small.get(*_key(index_video), 4.0) is not None and small.get(*_key(index_video), 1.0) is None


def _key(path: Path) -> tuple[FileKey, int | None]:
    from videvolve.media.info import file_key

    return file_key(path), None


def test_cache_sees_a_rewritten_file(index_video: Path, tmp_path: Path):
    copy = tmp_path / "v.mp4"
    copy.write_bytes(index_video.read_bytes())
    assert read_index(frames_at(copy, [2.0])[0].image) == 50
    from videvolve.testing import make_index_video

    make_index_video(copy, seconds=4, fps=10, gop=10)  # same path, new content
    assert read_index(frames_at(copy, [2.0])[0].image) == 20


def test_iter_frames_and_clip_are_frame_exact(index_video: Path, tmp_path: Path):
    frames = list(iter_frames(index_video, 2.01, 3.0))
    assert [read_index(f.to_image()) for f in frames] == list(range(50, 75))
    info = clip(index_video, 2.01, 3.0, tmp_path / "c.mp4")
    assert info.frame_count == 25 and info.frame_times[0] == pytest.approx(2.0)
    got = [read_index(f.image) for f in frames_at(info.path, [i / 25 + 0.001 for i in range(25)])]
    assert got == list(range(50, 75))
    sampled = clip(index_video, 4.0, 6.0, tmp_path / "s.mp4", fps=4, max_side=160)
    assert [round(t * 25) for t in sampled.frame_times] == [100, 106, 112, 118, 125, 131, 137, 143]
    assert (sampled.width, sampled.height) == (160, 90)
    with av.open(sampled.path) as c:
        assert sum(1 for _ in c.decode(video=0)) == 8
    with pytest.raises(Exception, match="after its start"):
        clip(index_video, 3.0, 3.0, tmp_path / "x.mp4")


def test_contact_sheet_layout(index_video: Path):
    times = [i * 1.5 for i in range(10)]
    sheet = contact_sheet(frames_at(index_video, times), cols=4, cell_width=96)
    assert (sheet.cols, sheet.rows) == (4, 3)
    assert sheet.cell_height == 54 and sheet.times == tuple(times)
    assert sheet.image.size == (2 + 4 * 98, 2 + 3 * (54 + 12 + 2))
    for i, t in enumerate(times):
        assert read_index(sheet.cell(i)) == expected(t)  # labels never cover the picture
    bare = contact_sheet(frames_at(index_video, times[:3]), cols=8, cell_width=64, labels=False)
    assert bare.cols == 3 and bare.label_height == 0
    with pytest.raises(ValueError):
        contact_sheet([], cols=2, cell_width=64)
    assert format_timestamp(59.9) == "0:59" and format_timestamp(3725) == "1:02:05"


def test_contact_sheet_labels_are_drawn(index_video: Path):
    sheet = contact_sheet(frames_at(index_video, [0.0, 10.0]), cols=2, cell_width=96)
    left, _, right, bottom = sheet.cell_box(1)
    band = sheet.image.crop((left, bottom, right, bottom + sheet.label_height)).convert("L")
    assert max(band.getdata()) > 200  # white text on the black band


# ---- real files from ../shared/samples (skipped where absent) ----

REAL = ["moviepy_chaplin.mp4", "moviepy_doc_example.mp4", "moviepy_long_example.mp4",
        "moviepy_big_buck_bunny_0_30.webm", "moviepy_smpte-2997.mp4", "decord_flipping_a_pancake.mkv",
        "decord_video_0.mov", "vidi_dummy.mp4"]


@pytest.mark.parametrize("name", REAL)
def test_real_samples_probe_and_decode(name: str):
    path = sample("videos", name)
    info = probe(path)
    assert info.duration > 0 and info.width > 0 and info.frame_count > 0
    times = [0.0, info.duration / 3, info.duration / 2, info.duration]
    frames = frames_at(path, times, max_side=160)
    assert all(isinstance(f.image, Image.Image) and max(f.image.size) == 160 for f in frames)
    assert all(f.time <= max(f.requested, info.start_time) + 1e-6 for f in frames)
    assert [f.time for f in frames] == sorted(f.time for f in frames)


def test_corrupted_sample_names_the_file_and_time():
    path = sample("videos", "decord_corrupted.mp4")
    info = probe(path)
    assert info.frame_count == 50
    early = frames_at(path, [0.0, 1.0, 2.5], cache=None)  # frames before the damage come back
    assert [f.time for f in early] == [0.0, 1.0, 2.5]
    with pytest.raises(UnreadableVideoError) as err:
        frames_at(path, [0.5, 4.0], cache=None)
    assert "decord_corrupted.mp4" in str(err.value) and err.value.time == 4.0
    assert "last good frame at 2.700 s" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_stream_index_of_webm_with_irregular_keyframes():
    path = sample("videos", "moviepy_big_buck_bunny_0_30.webm")
    idx = stream_index(path)
    assert idx.packets == 720 and len(idx.keyframes) > 5
    frames = frames_at(path, [5.8, 5.79, 11.13], cache=None)
    assert frames[0].time <= 5.8 < frames[0].time + 0.05


def test_parallel_groups_return_the_same_frames(long_gop_video: Path, monkeypatch):
    from videvolve.media import decode

    times = [0.3, 11.9, 5.2, 0.3, 7.77, 2.5, 9.0, 10.1, 1.1, 6.4]
    idx = stream_index(long_gop_video)
    groups = decode.plan_groups(idx, sorted(set(times)), workers=2)
    assert len(groups) == 2 and sorted(groups[0] + groups[1]) == sorted(set(times))
    assert max(groups[0]) < min(groups[1])  # contiguous in time
    assert decode.plan_groups(idx, sorted(set(times)), workers=1) == [sorted(set(times))]
    monkeypatch.setattr(decode, "DECODE_WORKERS", 1)
    serial = [read_index(f.image) for f in frames_at(long_gop_video, times, cache=None)]
    monkeypatch.setattr(decode, "DECODE_WORKERS", 2)
    parallel = [read_index(f.image) for f in frames_at(long_gop_video, times, cache=None)]
    assert serial == parallel == [expected(t, 30, 360) for t in times]


@pytest.mark.slow
def test_pixels_at_a_time_do_not_depend_on_what_was_decoded_before_or_alongside(index_video: Path, monkeypatch):
    """The same times give the same frames, pixel for pixel, after any cache history, grouping or concurrent decode."""
    from concurrent.futures import ThreadPoolExecutor

    from videvolve.media import decode

    rng = random.Random(7)
    wanted = [20.0 * (i + 0.5) / 48 for i in range(48)]

    def shown(cache: FrameCache | None) -> list[tuple[float, bytes]]:
        return [(f.time, f.image.tobytes()) for f in frames_at(index_video, wanted, 64, cache=cache)]

    monkeypatch.setattr(decode, "DECODE_WORKERS", 1)
    reference = shown(None)
    assert [t for t, _ in reference] == [expected(t) / FPS for t in wanted]
    monkeypatch.setattr(decode, "MIN_PARALLEL_FRAMES", 1)
    for workers in (1, 3):
        monkeypatch.setattr(decode, "DECODE_WORKERS", workers)
        cache = FrameCache(max_bytes=64 * 36 * 3 * 40)  # room for 40 small frames: evictions happen
        histories = [[rng.uniform(0.0, 20.0) for _ in range(rng.randint(1, 60))] for _ in range(6)]
        histories += [[round(rng.uniform(0.0, 20.0) * 25) / 25 + d for d in (-1e-7, 0.0, 0.0399)] for _ in range(4)]
        with ThreadPoolExecutor(max_workers=2) as pool:  # other tasks decoding the same video into the same cache
            others = [pool.submit(frames_at, index_video, times, side, clamp=True, cache=cache)
                      for times in histories for side in (64, 32)]
            mine = [pool.submit(shown, cache) for _ in range(3)]
            assert all(m.result() == reference for m in mine)
            assert all(len(o.result()) > 0 for o in others)
        assert shown(cache) == reference
