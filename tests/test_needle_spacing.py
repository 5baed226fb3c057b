"""Needles are placed as the footage's own glyphs are: as long as them, and as clear of their neighbours.

A needle pressed against the video's own glyphs, where those never come that close to each other, is told apart by
its timing alone (it was: 59 % of needles within 2 s of another glyph on SynthWorld scripts, none of the footage's
own glyphs).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from videvolve.datasets.synthworld.script import make_script
from videvolve.needles.plan import _clearance, needle_kinds, own_gaps, plan_needles
from videvolve.needles.scan import VideoScan


def _scan(free: list[tuple[float, float]], duration: float, native: set[tuple[str, str]] | None = None) -> VideoScan:
    return VideoScan("v", "/nonexistent.mp4", duration, 320, 180, 0.25, True, free=free, native=native or set())


def _nearest(spans: list[tuple[float, float]]) -> list[float]:
    """Each span's distance to its nearest neighbour (seconds)."""
    spans = sorted(spans)
    out = []
    for i, (a, b) in enumerate(spans):
        gaps = ([a - spans[i - 1][1]] if i else []) + ([spans[i + 1][0] - b] if i + 1 < len(spans) else [])
        out.append(min(gaps))
    return out


def test_needles_keep_as_clear_of_other_glyphs_as_the_footages_own_glyphs_keep():
    """On 40 SynthWorld scripts (no rendering): hardly a needle comes closer to another glyph than the footage's own
    glyphs ever come to each other (it was most of them), and their clearances are of the footage's order."""
    own: list[float] = []
    needle: list[float] = []
    closer = 0
    for k in range(40):
        script = make_script(f"v{k}", 720.0, 5000 + k)
        events = [(e.start, e.end) for e in script.events]
        free, t = [], 0.0
        for a, b in events:
            if a > t:
                free.append((t, a))
            t = max(t, b)
        free.append((t, script.duration))
        scan = _scan(free, script.duration, {e.kind for e in script.events})
        plan = plan_needles(scan, random.Random(k), [], [b - a for a, b in events])
        spans = [(n.start, n.end) for n in plan.needles]
        assert len(spans) == len(needle_kinds(random.Random(k), scan.native))  # every needle placed
        closest = min(own_gaps(scan))
        gaps = dict(zip(sorted(spans + events), _nearest(spans + events), strict=True))
        closer += sum(gaps[s] < closest - 1e-6 for s in spans)
        own += _nearest(events)
        needle += [gaps[s] for s in spans]
    assert closer <= 0.1 * len(needle), (closer, len(needle))
    own.sort()
    needle.sort()
    assert needle[len(needle) // 2] >= 0.5 * own[len(own) // 2], (needle[len(needle) // 2], own[len(own) // 2])


def test_glyph_needles_last_as_long_as_what_the_perceived_pass_saw_where_the_footage_has_room():
    """Needles as long as the footage's own events (here 6-9 s) where its gaps hold them clear; all of them fit."""
    rng = random.Random(0)
    roomy = _scan([(a, a + rng.uniform(20.0, 40.0)) for a in range(0, 1200, 45)], 1200.0)
    for k in range(50):
        kinds = len(needle_kinds(random.Random(k), roomy.native))
        short = plan_needles(roomy, random.Random(k), [])
        long = plan_needles(roomy, random.Random(k), [], seen=[6.0, 7.5, 9.0])
        assert len(short.needles) == len(long.needles) == kinds
        assert all(1.0 <= n.end - n.start <= 2.5 for n in short.needles)
        assert all(6.0 <= n.end - n.start <= 9.0 for n in long.needles), [n.end - n.start for n in long.needles]


def test_in_crowded_footage_needles_are_shortened_not_pressed_against_its_glyphs():
    """Gaps of 4-14 s between the footage's glyphs: 6-9 s needles are cut to what a gap holds with clearance around
    them (the footage's closest gap, or a quarter of the gaps they go in), and all of them still fit."""
    rng = random.Random(0)
    crowded = _scan([(a, a + rng.uniform(4.0, 14.0)) for a in range(0, 600, 15)], 600.0)
    kinds = len(needle_kinds(random.Random(0), crowded.native))
    room, closest = _clearance(crowded, kinds, own_gaps(crowded))
    assert closest > 2.5 and room < 9.0  # shorter than the longest seen, to keep that clearance
    for k in range(50):
        plan = plan_needles(crowded, random.Random(k), [], seen=[6.0, 7.5, 9.0])
        assert len(plan.needles) == kinds
        for n in plan.needles:
            stretch = next((a, b) for a, b in crowded.free if a <= n.start and n.end <= b)
            assert n.start - stretch[0] >= closest - 1e-6 and stretch[1] - n.end >= closest - 1e-6


def test_perceived_tasks_ask_every_mcq_template_the_world_asks():
    """What appears right after something is asked of the perceived timeline too (it was not: a look that reads
    what follows what gained on the world's questions and nothing on the generated ones)."""
    from videvolve.datasets.synthworld.questions import MCQ_TEMPLATES
    from videvolve.labelfree.perceived import Timeline, perceived_drafts

    script = make_script("v", 720.0, 7)
    entries = []
    for k in range(720):
        e = script.event_at(k + 0.5)
        bg = script.scene_at(k + 0.5).background
        entries.append((float(k), f"a {e.name} on a {bg} background" if e else f"nothing on a {bg} background"))
    timeline = Timeline(video_id="v", fps=1.0, duration=720.0, entries=entries, requests=90, prompt_tokens=1,
                        frames=720)
    templates = {d.template for seed in range(20) for d in perceived_drafts(timeline, random.Random(seed), 40)}
    assert {t.__name__ for t in MCQ_TEMPLATES} <= {t.split("_")[0] for t in templates}, templates


@pytest.mark.parametrize("fps", [0.25, 1.5, 4.0])
def test_a_clip_with_needles_is_encoded_at_its_own_frame_rate(tmp_path: Path, fps: float):
    """vLLM reads a clip's frame rate back from the file and tells the model each frame's time by it: a 0.25 fps
    clip written at 1 fps (``round(fps)``) had its frames 1 s apart where they are 4 s apart."""
    import av

    from videvolve.needles.frames import NeedleFrames
    from videvolve.needles.needles import NeedlePlan
    from videvolve.testing import make_index_video

    source = make_index_video(tmp_path / "v.mp4", seconds=24, fps=10, width=64, height=48)
    plan = NeedlePlan(id="plan-0001", video_id="v", style="footage", width=64, height=48)
    out = NeedleFrames(str(source), plan).clip(2.0, 2.0 + 5 / fps, tmp_path / "c.mp4", fps, None)
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        times = [float(f.time) for f in container.decode(stream)]
        assert stream.guessed_rate is not None and abs(float(stream.guessed_rate) - fps) < 1e-3
    assert times == pytest.approx([k / fps for k in range(5)], abs=1e-3)
