from __future__ import annotations

import functools
import lzma
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from videvolve.graph import Context
from videvolve.media import frame_cache
from videvolve.skill_library.harness import seed_path
from videvolve.testing import make_index_video, reserved_port

SHARED = Path(os.environ.get("VIDEVOLVE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
SAMPLES = SHARED / "samples"
BUNDLED = Path(__file__).with_name("data") / "samples"
"""The small official files the metric tests need, shipped with the tests (xz-compressed; see SOURCES.md there)."""
_UNPACKED = Path(tempfile.gettempdir()) / f"videvolve-test-samples-{os.getuid()}"


def sample(*parts: str) -> Path:
    """A sample file: bundled in tests/data/samples, else under ../shared/samples, else the test is skipped."""
    packed = BUNDLED.joinpath(*parts[:-1], parts[-1] + ".xz")
    if packed.is_file():
        path = _UNPACKED.joinpath(*parts)
        if not path.is_file() or path.stat().st_mtime < packed.stat().st_mtime:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f"{path.name}.{os.getpid()}.part")
            part.write_bytes(lzma.decompress(packed.read_bytes()))
            part.replace(path)
        return path
    if BUNDLED.joinpath(*parts).is_file():
        return BUNDLED.joinpath(*parts)
    path = SAMPLES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"sample data not available: {path}")
    return path


def run_context(world: Any, tmp_path: Path, seed: Path, *, name: str | None = None, run_id: str = "run",
                **settings: Any) -> Context:
    """A run's settings for tests: the world's tasks, the seed, hashing embeddings, batch 4, all under ``tmp_path``.

    ``name`` gives a run its own folder, memory and cache (two runs in one test); ``settings`` override any field.
    """
    prefix = f"{name}-" if name else ""
    run = tmp_path / (name or "run")
    run.mkdir(parents=True, exist_ok=True)
    fields: dict[str, Any] = {"run_dir": str(run), "run_id": name or run_id, "tasks": str(world.tasks_path),
                              "seed_harness": str(seed), "memory": str(tmp_path / f"{prefix}memory"),
                              "embedder": "hashing", "cache": str(tmp_path / f"{prefix}cache.sqlite"), "batch": 4}
    return Context(**{**fields, **settings})


@pytest.fixture()
def make_context(small_world: Any, tmp_path: Path, seed: Path) -> Callable[..., Context]:
    """``run_context`` bound to the small world, this test's ``tmp_path`` and the 16-frame seed."""
    return functools.partial(run_context, small_world, tmp_path, seed)


@pytest.fixture()
def reserved_tcp_port() -> Iterator[int]:
    """A port of 127.0.0.1 held for this test (``videvolve.testing.reserved_port``): a server the test starts there
    binds it; no other pytest-xdist worker is given it meanwhile, and until a server listens, connections are
    refused."""
    with reserved_port() as port:
        yield port


@pytest.fixture(scope="session")
def index_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 s, 25 fps, GOP of 12 frames, B-frames; frame i shows index i."""
    return make_index_video(tmp_path_factory.mktemp("media") / "index.mp4", seconds=20, fps=25, gop=12)


@pytest.fixture(scope="session")
def long_gop_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s, 30 fps, a keyframe every 5 s."""
    return make_index_video(tmp_path_factory.mktemp("media") / "long_gop.mp4", seconds=12, fps=30, gop=150)


@pytest.fixture(scope="session", autouse=True)
def _own_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """This session's (each pytest-xdist worker's) ``XDG_CACHE_HOME``, for it and the commands it starts.

    Else every test that runs a command without ``--cache`` or ``--no-cache`` read and wrote the user's
    ``~/.cache/videvolve/responses.sqlite``, shared by both workers and kept between runs, and a transcript or proxy
    that any run left there, found by the video's content, was read by the next test with that video.
    """
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    patch.undo()


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
