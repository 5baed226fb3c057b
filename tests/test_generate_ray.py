"""`tasks generate --executor ray`: the perceived pass runs on the workers as on threads, and each video is kept as
soon as it is done."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from videvolve.cli import main  # noqa: E402
from videvolve.datasets.synthworld import generate_world  # noqa: E402
from videvolve.labelfree.generate import GenerateSettings, run_jobs, video_ids, video_tasks  # noqa: E402
from videvolve.tasks import Task, read_tasks  # noqa: E402

pytestmark = pytest.mark.slow  # a local Ray instance and SynthWorld videos


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray_generate")
    generate_world(root / "w", videos=2, minutes=0.5, seed=7, workers=1)
    return root / "w" / "videos"


def rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])


def test_perceived_tasks_on_ray_with_the_response_cache_are_the_local_ones(videos: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str],
                                                                          local_ray):
    """main: exit 70, "cannot pickle 'sqlite3.Connection' object" (the perceiver, its response cache included,
    was sent to each worker as it was)."""
    cache = tmp_path / "cache.sqlite"
    flags = ["--sources", "needles,perceived", "--questions-per-video", "4", "--perceive-fps", "0.5",
             "--cache", str(cache)]
    code = main(["tasks", "generate", str(videos), "--out", str(tmp_path / "ray.jsonl"), "--executor", "ray", *flags])
    assert code == 0, capsys.readouterr().err
    paid = rows(cache)
    assert paid > 0  # the workers' replies are in the response cache
    assert main(["tasks", "generate", str(videos), "--out", str(tmp_path / "local.jsonl"), *flags]) == 0
    assert rows(cache) == paid  # and the same pass on threads asks for none of them again

    def made(out: str) -> list[tuple[str, str, str, str]]:
        return sorted((t.id, t.label_source, t.question, str(t.answer)) for t in read_tasks(tmp_path / out))

    assert made("ray.jsonl") == made("local.jsonl") and {s for _, s, _, _ in made("ray.jsonl")} == {
        "needles", "perceived"}


def test_a_video_done_on_ray_is_kept_while_another_still_runs(videos: Path, tmp_path: Path, local_ray):
    """main: the videos were kept in the order they were sent, so a long first video held every finished one in
    memory (lost to a kill, the progress bar still) until it ended: here the first waited for ever for the second."""
    parts, settings = tmp_path / "parts", GenerateSettings(questions_per_video=4)
    ids = video_ids(sorted(p.resolve() for p in videos.glob("*.mp4")))
    first, second = list(ids)

    def job(path: Path, vid: str, others: list[str]) -> list[Task]:
        deadline = time.monotonic() + 30
        while vid == first and not (parts / f"{second}.json").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{second} was done but not kept while {first} ran")
            time.sleep(0.1)
        return video_tasks(path, vid, others, settings)

    done: list[str] = []
    outcomes = run_jobs(ids, job, settings, parts, workers=2, executor="ray", on_done=lambda o: done.append(o.video_id))
    assert done == [second, first] and all(o.tasks and not o.error for o in outcomes)
