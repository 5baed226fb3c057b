"""The seeds' largest request fits the README's recipe (a 32k context) on 720p and 1080p sources; doctor says so.

Computed from each seed's own config with the cost model (``skill_library.seed_requests``): ``uniform`` sends all
its frames at once; ``scan_refine``'s last request carries every sheet and every refinement frame.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from videvolve.config import ModelSettings
from videvolve.doctor import run_checks
from videvolve.models.cost import cost_model
from videvolve.skill_library.harness import seed_path
from videvolve.skill_library.seed_requests import largest_request
from videvolve.testing import make_index_video

CONTEXT = 32768
MARGIN = 0.05  # the client's default safety margin


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
@pytest.mark.parametrize("source", [(1280, 720), (1920, 1080)])
@pytest.mark.parametrize("name", ["uniform", "scan_refine"])
def test_the_largest_request_fits_a_32k_context(name: str, family: str, source: tuple[int, int]) -> None:
    tokens = largest_request(name, cost_model(family), source)
    assert tokens <= CONTEXT * (1 - MARGIN), f"{name} on {source} with {family}: {tokens} prompt tokens"


def test_full_resolution_refinement_would_not_fit() -> None:
    """The check can fail: today's numbers with refinement at full resolution (the issue's 57k at 720p)."""
    cost = cost_model("qwen2.5-vl")
    cfg = tomllib.loads((seed_path("scan_refine") / "config.toml").read_text())
    n_scan = max(4, int(int(cfg["frames"]) * float(cfg["scan_share"])))
    assert (int(cfg["frames"]) - n_scan) * cost.image_tokens(1280, 720) > CONTEXT


def test_doctor_prints_each_seeds_largest_request_on_a_video(tmp_path: Path) -> None:
    video = make_index_video(tmp_path / "hd.mp4", seconds=1, fps=5, gop=5, width=1920, height=1080)
    checks = {c.name: c for c in run_checks(ModelSettings(), video=video)}
    assert checks["largest request: scan_refine"].status == "ok"
    assert "1920x1080" in checks["largest request: uniform"].detail
    tight = {c.name: c for c in run_checks(ModelSettings(), video=video, context=8000)}
    assert tight["largest request: scan_refine"].status == "fail"
    assert "refine_max_side" in tight["largest request: scan_refine"].detail


def test_doctor_says_when_the_video_does_not_decode(tmp_path: Path) -> None:
    """`doctor --video` checked only request sizes: a file that is no video, or one damaged midway, read as ok."""
    good = make_index_video(tmp_path / "good.mp4", seconds=2, fps=5, gop=5)
    assert {c.name: c for c in run_checks(ModelSettings(), video=good)}["video"].status == "ok"
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video" * 100)
    checks = {c.name: c for c in run_checks(ModelSettings(), video=junk)}
    assert checks["video"].status == "fail" and str(junk) in checks["video"].detail
    assert not any(name.startswith("largest request") for name in checks)  # no size to check, and no crash


def test_doctor_names_where_a_damaged_video_stops_decoding(tmp_path: Path) -> None:
    from tests.conftest import sample

    damaged = tmp_path / "clip.mp4"
    damaged.write_bytes(sample("videos", "decord_corrupted.mp4").read_bytes())
    checks = {c.name: c for c in run_checks(ModelSettings(), video=damaged)}
    assert checks["video"].status == "fail" and "damaged: decoding fails after" in checks["video"].detail
    assert "largest request: uniform" in checks
