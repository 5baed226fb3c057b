"""Generated tasks that gave their answers away or asked about what was not on screen (the s53 review's repros):
a splice whose source went, a video under two names, glyphs a splice shows, words off a portrait frame's edge,
train frames showing selection footage."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import sample
from videvolve.cli import main
from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.errors import MediaError
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.labelfree.generate import GenerateSettings, generate
from videvolve.labelfree.video_tasks import needle_tasks
from videvolve.media.encode import write_h264
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.models.sim.perception import perceive
from videvolve.needles.frames import NeedleFrames, frame_source, plan_of
from videvolve.needles.needles import paint
from videvolve.needles.plan import SPLICE_QUESTION, plan_needles
from videvolve.needles.scan import scan_video
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task, read_tasks
from videvolve.testing import make_index_video

pytestmark = pytest.mark.slow  # real videos decoded and generated (seconds each)

FOOTAGE = ("vidi_dummy.mp4", "moviepy_chaplin.mp4", "moviepy_long_example.mp4")

PROBE = '''
def solve(task, ctx):
    """Asks about a frame every half second and keeps the times whose frames could not be shown."""
    bad = []
    t = 0.25
    while t < task.duration:
        try:
            ctx.ask(ctx.frames([t], max_side=64), prompt="x")
        except Exception as exc:
            bad.append(t)
            ctx.log("error", at=t, said=str(exc)[:200])
        t += 0.5
    return {"answer": [], "raw": " ".join(str(t) for t in bad)}
'''


def _footage(folder: Path, names: tuple[str, ...] = FOOTAGE) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        shutil.copy2(sample("videos", name), folder / name)
    return folder


def _generated(folder: Path) -> Path:
    """Three videos of distinct content and sizes, made here (index frames: needles and splices plan on them)."""
    folder.mkdir(parents=True)
    for i, (w, h, seconds) in enumerate([(256, 256, 25), (320, 180, 30), (320, 240, 40)]):
        make_index_video(folder / f"g{i}.mp4", seconds=seconds, fps=10, width=w, height=h)
    return folder


def _probe_harness(folder: Path):
    folder.mkdir()
    (folder / "solver.py").write_text(PROBE)
    (folder / "SKILL.md").write_text("find the frames that fail\n")
    (folder / "config.toml").write_text("")
    (folder / "manifest.json").write_text(json.dumps({"name": "probe", "entry": "solver.py"}))
    return load_harness(folder)


def test_a_task_whose_spliced_video_went_or_changed_fails_whole_before_its_harness_runs(tmp_path: Path):
    """main: only the frames inside the splice failed ("video not found: the task's video"), so a harness that caught
    the errors read off the splice's times (the gold answer) and the task ended ok."""
    videos = _generated(tmp_path / "videos")  # no sample needed: this test runs in a plain clone
    report = generate(videos, GenerateSettings(questions_per_video=4, fractions={"train": 1.0}), tmp_path / "parts",
                      workers=1)
    task = next(t for t in report.tasks if t.question == SPLICE_QUESTION)
    plan = plan_of(task)
    assert plan is not None
    source = Path(next(str(n.source) for n in plan.needles if n.kind == "splice"))
    harness = _probe_harness(tmp_path / "probe")

    def run(out: str) -> tuple[TaskResult, list[dict]]:
        (result,) = solve_tasks(harness, [task], SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(budget=None),
                                tmp_path / out)
        trace = tmp_path / out / "traces" / f"{task.id}.jsonl"
        return result, [json.loads(line) for line in trace.read_text().splitlines()]

    source.rename(tmp_path / "moved.mp4")  # the user tidies the folder after generating
    result, steps = run("gone")
    assert result.outcome == "error" and result.error_kind == "media", (result.outcome, result.prediction)
    assert str(source) in (result.error or "") and "generate" in (result.error or "")
    assert not any(s["event"] == "log" for s in steps)  # refused before the harness ran: it was told nothing
    with pytest.raises(MediaError, match=str(source)):  # nor is any picture of the task shown elsewhere
        frame_source(task)
    from videvolve.editing.probe import ProbeArgs, run_probe

    probed = run_probe(ProbeArgs(task_id=task.id, times=[1.0, 2.0], question="what is shown?"), task, SimVLM(),
                       cost_model("qwen2.5-vl"), None, "png", tmp_path / "probe-out")
    assert probed.get("error", "").startswith("media:") and str(source) in probed["error"]  # the editor's probe
    make_index_video(source, seconds=12, fps=10, width=160, height=120)  # another video under the old name
    result, steps = run("replaced")
    assert result.error_kind == "media" and "changed" in (result.error or ""), result.error
    assert not any(s["event"] == "log" for s in steps)
    source.unlink()
    (tmp_path / "moved.mp4").rename(source)  # the original back: the task runs, every frame shown
    result, _ = run("back")
    assert result.outcome == "ok" and result.prediction is not None and result.prediction.raw == "", result.error
    # a plan made before fingerprints were kept: only the file's existence is checked
    old = {**task.meta["needle_plan"], "needles": [{k: v for k, v in n.items() if k != "fingerprint"}
                                                   for n in task.meta["needle_plan"]["needles"]]}
    older = task.model_copy(update={"meta": {**task.meta, "needle_plan": old}})
    make_index_video(source, seconds=12, fps=10, width=160, height=120)
    assert isinstance(frame_source(older), NeedleFrames)
    source.unlink()
    with pytest.raises(MediaError, match=str(source)):
        frame_source(older)


def _digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_same_video_under_two_names_gets_tasks_once_and_both_files_are_named(tmp_path: Path, capsys):
    """main: each copy was a video of its own, one in train and one in selection (the selection questions were
    train's, answers and all), silently."""
    videos = _generated(tmp_path / "videos")
    copy = videos / "a copy of g1.mp4"  # first in the folder's order: the one kept
    shutil.copy2(videos / "g1.mp4", copy)
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out), "--workers", "1"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert f"skipped {videos / 'g1.mp4'}: the same video as {copy.resolve()}" in said, said
    tasks = read_tasks(out)
    assert {Path(t.video).name for t in tasks} == {copy.name, "g0.mp4", "g2.mp4"}
    assert len({_digest(t.video) for t in tasks}) == len({t.video for t in tasks})
    # a copy added later never displaces the video an earlier run into the same --out gave tasks to
    (videos / "0 another copy.mp4").write_bytes(copy.read_bytes())
    assert main(["tasks", "generate", str(videos), "--out", str(out), "--workers", "1"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert f"skipped {videos / '0 another copy.mp4'}: the same video as {copy.resolve()}" in said, said
    assert [t.id for t in read_tasks(out)] == [t.id for t in tasks]


def _glyph_names(task: Task) -> set[str]:
    """The glyph kinds a glyph question's answer rests on: its target, and an order question's options."""
    template = task.meta.get("template")
    if template in ("grounding", "count"):
        return {str(task.meta["target"])}
    return set(task.options or ()) if template == "order" else set()


def test_no_question_is_asked_about_a_glyph_a_splice_of_a_synthworld_shows(tmp_path: Path):
    """main: a SynthWorld stretch spliced into real footage showed its own glyphs, and the footage's questions
    ignored them ('When does the yellow cross appear?' answered [] while the splice showed one)."""
    generate_world(tmp_path / "w", videos=1, minutes=1.0, seed=0, workers=1)
    target = make_index_video(tmp_path / "footage.mp4", seconds=25, fps=16, width=256, height=256)  # no sample needed
    source = tmp_path / "w" / "videos" / "video000.mp4"
    step = scan_video(target).step
    spliced = 0
    for seed in range(24):
        tasks = needle_tasks(target, "footage", [str(source)], GenerateSettings(seed=seed))
        plan = plan_of(tasks[0])
        assert plan is not None
        splice = next((n for n in plan.needles if n.kind == "splice"), None)
        if splice is None:
            continue
        times = list(np.arange(splice.start, splice.end, step))
        shown = {p.name for f in NeedleFrames(str(target), plan).frames(times, None) if (p := perceive(f.image)).name}
        spliced += bool(shown)
        for t in tasks:
            assert not _glyph_names(t) & shown, (seed, t.question, t.options, t.answer, shown)
    assert spliced >= 2  # the splices did show glyphs: the check above was not empty


def _portrait(path: Path, width: int, height: int) -> Path:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    return write_h264(path, (np.roll(base, k, axis=1) for k in range(300)), 10, width, height,
                      {"crf": "28", "preset": "ultrafast"})


@pytest.mark.parametrize("width, height", [(360, 640), (120, 640)])
def test_a_word_needle_is_drawn_whole_inside_a_portrait_frame(tmp_path: Path, width: int, height: int):
    """main: words were placed up to 0.55 of the width without measuring them, and ran off a portrait frame's right
    edge ("MARBL"), their questions counting them as shown; a frame too narrow for the usual size gets smaller
    words."""
    scan = scan_video(_portrait(tmp_path / "phone.mp4", width, height))
    words = 0
    for seed in range(30):
        plan = plan_needles(scan, random.Random(seed), [])
        for n in (n for n in plan.needles if n.kind == "text"):
            t = (n.start + n.end) / 2
            black = Image.new("RGB", (width, height))
            drawn = np.asarray(paint(black, t, plan.model_copy(update={"needles": (n,)})))
            ys, xs = np.nonzero((drawn == 250).all(axis=2))  # the light box painted behind the word
            assert xs.min() > 0 and xs.max() < width - 1 and ys.min() > 0 and ys.max() < height - 1, (seed, n)
            words += 1
    assert words >= 30


def test_a_splice_comes_only_from_a_video_of_the_same_split(tmp_path: Path):
    """main: the videos to splice from were every other video of the folder, fixed before the split, so train
    frames showed seconds of selection videos (and selection frames train footage)."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for k, fps in enumerate((25, 10, 12, 15, 20)):
        make_index_video(videos / f"v{k}.mp4", seconds=16, fps=fps, gop=10)
    spliced = 0
    for seed in range(4):
        report = generate(videos, GenerateSettings(questions_per_video=4, seed=seed), tmp_path / f"p{seed}",
                          workers=1)
        split = {t.video: t.split for t in report.tasks}
        assert set(split.values()) == {"train", "selection"}
        for t in report.tasks:
            for n in (plan.needles if (plan := plan_of(t)) else ()):
                if n.kind == "splice":
                    assert split[str(n.source)] == t.split, (seed, t.id, t.split, n.source)
                    spliced += 1
    assert spliced


def test_a_video_alone_in_its_split_is_told_it_gets_no_splice(tmp_path: Path):
    """A split of one video has no other video to splice in: its footage silently got no splice question."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for k, fps in enumerate((25, 10, 12)):
        make_index_video(videos / f"v{k}.mp4", seconds=16, fps=fps, gop=10)
    report = generate(videos, GenerateSettings(questions_per_video=4, fractions={"train": 0.6, "selection": 0.4}),
                      tmp_path / "parts", workers=1)
    split = {t.video_id: t.split for t in report.tasks}
    alone = [vid for vid, s in split.items() if list(split.values()).count(s) == 1]
    assert len(alone) == 1 and len(split) == 3, split
    for o in report.outcomes:
        told = [n for n in o.notes if "no other video is spliced into it" in n]
        assert bool(told) == (o.video_id in alone), (o.video_id, o.notes)
        assert not told or f"the only video of the {split[o.video_id]} split" in told[0]
