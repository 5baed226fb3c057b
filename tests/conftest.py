from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from videvolve.media import frame_cache
from videvolve.skill_library.harness import seed_path
from videvolve.testing import make_index_video

SHARED = Path(os.environ.get("VIDEVOLVE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
SAMPLES = SHARED / "samples"


def sample(*parts: str) -> Path:
    """A file under ../shared/samples, or skip the test when the folder is absent (a user's clone)."""
    path = SAMPLES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"sample data not available: {path}")
    return path


@pytest.fixture(scope="session")
def index_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 s, 25 fps, GOP of 12 frames, B-frames; frame i shows index i."""
    return make_index_video(tmp_path_factory.mktemp("media") / "index.mp4", seconds=20, fps=25, gop=12)


@pytest.fixture(scope="session")
def long_gop_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s, 30 fps, a keyframe every 5 s."""
    return make_index_video(tmp_path_factory.mktemp("media") / "long_gop.mp4", seconds=12, fps=30, gop=150)


@pytest.fixture(autouse=True)
def _fresh_frame_cache() -> None:
    frame_cache.clear()


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory):
    """A SynthWorld of 4 videos of about 3 minutes (both task kinds, three splits)."""
    from videvolve.datasets.synthworld import generate_world

    return generate_world(tmp_path_factory.mktemp("small_world"), videos=4, minutes=3, seed=5)


@pytest.fixture()
def seed(tmp_path: Path) -> Path:
    """The uniform seed at 16 frames: a harness that evolves quickly in tests."""
    d = tmp_path / "uniform16"
    shutil.copytree(seed_path("uniform"), d)
    (d / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    return d


@pytest.fixture(scope="session")
def serving_world(tmp_path_factory: pytest.TempPathFactory):
    """A one-minute SynthWorld, a fast harness, and `videvolve ask`'s answers (the serving tests' reference)."""
    from tests.serving_support import ServingWorld

    return ServingWorld.make(tmp_path_factory.mktemp("serving"))
