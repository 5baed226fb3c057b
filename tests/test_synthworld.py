from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from videvolve.datasets.synthworld import World, generate_world, plan_world, world_stats
from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, SHAPES
from videvolve.datasets.synthworld.render import GOP_SECONDS, render_frame
from videvolve.datasets.synthworld.script import SIZES, make_script
from videvolve.media import probe, stream_index
from videvolve.tasks import check_video_disjoint, read_tasks


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    """A world's plan (scripts and tasks) at the size the statistics need; nothing is encoded."""
    scripts, tasks = plan_world(videos=8, minutes=8, seed=11)
    return World(root=tmp_path_factory.mktemp("planned"), scripts=scripts, tasks=tasks)


@pytest.fixture(scope="module")
def encoded(tmp_path_factory: pytest.TempPathFactory):
    """A small world written to disk, for what its files must and must not say."""
    return generate_world(tmp_path_factory.mktemp("world"), videos=4, minutes=3, seed=11)


def test_vocabulary_sizes():
    assert len(SHAPES) >= 5 and len(GLYPH_COLOURS) >= 6 and len(SIZES) >= 3
    assert not set(BACKGROUNDS) & set(GLYPH_COLOURS)


def test_script_is_seeded_and_well_formed():
    a, b = make_script("v", 900, seed=5), make_script("v", 900, seed=5)
    assert a == b and a != make_script("v", 900, seed=6)
    assert a.scenes[0].start == 0 and a.scenes[-1].end == a.duration
    assert all(s.end - s.start >= 19.9 for s in a.scenes[:-1])
    for e, f in zip(a.events, a.events[1:], strict=False):
        assert e.end <= f.start  # at most one glyph at a time
    for e in a.events:
        assert (e.start * 4).is_integer() and (e.end * 4).is_integer()
        for t in (e.start, (e.start + e.end) / 2, e.end - 0.25):
            x, y = e.position(t)
            assert x >= 0 and x + e.size <= a.width and y >= 0 and y + e.size <= a.height


def test_render_frame_shows_exactly_the_event():
    s = make_script("v", 600, seed=2)
    e = s.events[3]
    frame = render_frame(s, e.start)
    bg = np.array(BACKGROUNDS[s.scene_at(e.start).background])
    assert (np.abs(frame.astype(int) - bg).sum(axis=2) > 60).sum() > 0.3 * e.size**2
    gap = e.end  # the frame at `end` no longer shows it
    if s.event_at(gap) is None:
        assert (render_frame(s, gap) == render_frame(s, gap)[0, 0]).all()


def test_world_files_validate(encoded, tmp_path: Path):
    world = encoded
    tasks = read_tasks(world.tasks_path)
    assert len(tasks) == len(world.tasks) > 20
    assert check_video_disjoint(tasks) == []
    assert {t.split for t in tasks} == {"train", "selection", "test"}
    assert all(Path(t.video).is_file() for t in tasks)
    result = subprocess.run([sys.executable, "-m", "videvolve", "tasks", "validate", str(world.tasks_path), "--json"],
                            capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    assert report["valid"] and report["tasks"] == len(tasks)


def test_world_is_deterministic(world):
    scripts, tasks = plan_world(videos=8, minutes=8, seed=11)
    assert scripts == world.scripts
    assert [t.model_dump(exclude={"video"}) for t in tasks] == [t.model_dump(exclude={"video"}) for t in world.tasks]
    _, other = plan_world(videos=8, minutes=8, seed=12)
    assert [t.question for t in other] != [t.question for t in tasks]


def test_world_statistics(world):
    stats = world_stats(world.tasks)
    assert 0.08 <= stats["absent_share"] <= 0.25
    assert stats["short_share"] >= 0.55  # most grounding targets last <= 10 s
    assert stats["multi_share"] >= 0.1  # some occur 2-4 times
    assert set(stats["mcq_templates"]) >= {"count", "order", "successor"}
    assert any(k.startswith("identity") for k in stats["mcq_templates"])
    letters = stats["mcq_letters"]
    assert set(letters) == {"A", "B", "C", "D"} and max(letters.values()) - min(letters.values()) <= 1
    for t in world.tasks:
        if t.kind == "mcq":
            assert len(t.options or []) == 4 and len(set(t.options or [])) == 4
        elif t.intervals:
            assert max(i.end for i in t.intervals) <= t.duration


def test_distractors_share_an_attribute(world):
    """Absent targets are near misses of present ones, so a misread glyph gives a wrong answer."""
    by_video = {s.video_id: s for s in world.scripts}
    absent = [t for t in world.tasks if t.kind == "grounding" and not t.intervals]
    assert absent
    for t in absent:
        colour, shape = t.meta["target"].split()
        present = {e.kind for e in by_video[t.video_id].events}
        assert (colour, shape) not in present
        assert any(c == colour or s == shape for c, s in present)


def test_gold_answers_match_the_scripts(world):
    by_video = {s.video_id: s for s in world.scripts}
    for t in world.tasks:
        s = by_video[t.video_id]
        if t.kind == "grounding":
            colour, shape = t.meta["target"].split()
            assert [i.pair() for i in t.intervals] == [(e.start, e.end) for e in s.occurrences(colour, shape)]
        elif t.meta["template"] == "count":
            colour, shape = t.meta["target"].split()
            assert (t.options or [])["ABCD".index(str(t.answer))] == str(len(s.occurrences(colour, shape)))


def test_no_side_channel(encoded):
    world = encoded
    names = sorted(p.name for p in (world.root / "videos").iterdir())
    assert names == [f"video{i:03d}.mp4" for i in range(4)]
    assert sorted(p.name for p in world.root.iterdir()) == ["tasks.jsonl", "videos"]
    for script in world.scripts[:3]:
        path = world.root / "videos" / f"{script.video_id}.mp4"
        with av.open(str(path)) as c:
            assert not {k: v for k, v in c.metadata.items() if k not in ("major_brand", "minor_version",
                                                                          "compatible_brands", "encoder")}
        idx = stream_index(path)
        steps = np.diff(idx.keyframes) * float(idx.time_base)
        assert np.allclose(steps, GOP_SECONDS)  # keyframes on a fixed grid, never at scene cuts or events
        info = probe(path)
        assert (info.width, info.height, info.fps, info.codec) == (320, 180, 4.0, "h264")
