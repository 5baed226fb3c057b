"""Real video files: check, proxies (timestamps stay the source's), SimVLM on real footage, the sandbox."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sample
from videvolve.media import frames_at, probe
from videvolve.media.check import check_video
from videvolve.media.proxy import fingerprint, make_proxy, proxied, proxy_path
from videvolve.models.base import SIM_ONLY_NOTICE
from videvolve.testing import make_index_video, read_index


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_videos_check_on_the_real_samples():
    folder = sample("videos")
    r = run("videos", "check", str(folder), "--json")
    assert r.returncode == 1  # one file fails
    rows = {Path(x["file"]).name: x for x in json.loads(r.stdout)}
    assert rows["decord_corrupted.mp4"]["status"] == "fail"
    assert rows["decord_corrupted.mp4"]["damage_at"] == pytest.approx(2.7)
    assert "2.70 s" in rows["decord_corrupted.mp4"]["notes"][0]
    others = {k: v["status"] for k, v in rows.items() if k != "decord_corrupted.mp4"}
    assert len(others) == 8 and set(others.values()) == {"ok"}
    table = run("videos", "check", str(folder))
    assert "fail" in table.stdout and "damaged" in table.stdout


def test_check_flags_what_will_be_slow(tmp_path: Path):
    big = make_index_video(tmp_path / "big.mp4", seconds=2, fps=10, gop=10, width=2560, height=1440,
                           preset="ultrafast")
    c = check_video(big)
    assert c.status == "slow" and "2560x1440 is large" in c.notes[0] and c.needs_proxy
    missing = check_video(tmp_path / "nope.mp4")
    assert missing.status == "fail"


@pytest.mark.slow
def test_proxy_keeps_source_time_and_is_cached(tmp_path: Path):
    src = make_index_video(tmp_path / "src.mp4", seconds=30, fps=25, gop=250, width=960, height=540)
    proxy = make_proxy(src, tmp_path / "proxies")
    info = probe(proxy)
    assert (info.width, info.height) == (640, 360) and info.keyframe_interval == pytest.approx(1.0)
    assert probe(src).duration == pytest.approx(info.duration, abs=0.05)
    times = [i * 0.73 for i in range(41)]
    got = [read_index(f.image) for f in frames_at(proxy, times)]
    assert got == [min(math.floor(t * 25 + 1e-9), 749) for t in times]  # the same frames at the same times
    assert make_proxy(src, tmp_path / "proxies") == proxy  # built once
    assert proxy == proxy_path(src, tmp_path / "proxies") and fingerprint(src) in proxy.name
    mapping = proxied([str(src)], "auto", tmp_path / "proxies")
    assert mapping[str(src)] == str(src)  # 960x540 H.264 with a 10 s GOP in 30 s is not slow
    assert proxied([str(src)], "always", tmp_path / "proxies")[str(src)] == str(proxy)


@pytest.mark.slow
def test_videos_proxy_cli_on_a_real_sample(tmp_path: Path):
    folder = tmp_path / "videos"
    folder.mkdir()
    (folder / "bunny.webm").write_bytes(sample("videos", "moviepy_big_buck_bunny_0_30.webm").read_bytes())
    r = run("videos", "proxy", str(folder), "--all", "--cache", str(tmp_path / "proxies"))
    assert r.returncode == 0, r.stderr
    proxy = Path(r.stdout.split("->")[-1].strip())
    a = frames_at(folder / "bunny.webm", [0.5, 10.0, 29.9])
    b = frames_at(proxy, [0.5, 10.0, 29.9])
    assert [f.time for f in a] == [f.time for f in b]


@pytest.mark.slow
def test_simvlm_on_real_footage_says_what_it_is_through_the_sandbox():
    video = sample("videos", "moviepy_chaplin.mp4")
    r = run("ask", str(video), "When does the red circle appear?", "--harness", "uniform", "--no-cache")
    assert r.returncode == 1
    assert r.stderr.strip() == f"notice: {SIM_ONLY_NOTICE}" and "Traceback" not in r.stderr
    mcq = run("ask", str(video), "What colour is the star that appears on the navy background?", "--option", "red",
              "--option", "blue", "--harness", "uniform", "--no-cache", "--json")
    assert mcq.returncode == 1 and json.loads(mcq.stdout)["error_kind"] == "unsupported"
