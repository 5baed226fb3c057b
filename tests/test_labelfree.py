"""Label-free tasks: needles painted in the parent, never in the file; exact answers SimVLM can read; generation."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import shutil
from pathlib import Path

import av
import numpy as np
import pytest

from tests.conftest import sample
from tests.test_blind_baseline import RULES, by_template, rule_accuracy
from videvolve.cli import main
from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.datasets.synthworld.palette import BACKGROUNDS
from videvolve.evaluation.solve import solve_tasks
from videvolve.labelfree.generate import GenerateSettings, generate, letter_tasks
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.models.sim.perception import perceive
from videvolve.needles.frames import NeedleFrames, PlainFrames, plan_of
from videvolve.needles.plan import glyph_drafts, plan_needles
from videvolve.needles.scan import VideoScan
from videvolve.skill_library.harness import load_harness
from videvolve.skill_library.services import TaskServices
from videvolve.tasks import Task, check_video_disjoint, read_tasks
from videvolve.testing import make_index_video

pytestmark = pytest.mark.slow  # module fixtures that render worlds (seconds each): make test, not test-fast


@pytest.fixture(scope="module")
def needle_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Task], dict[str, str]]:
    """A tiny SynthWorld (3 videos of about two minutes) and its needle tasks; file hashes taken before generation."""
    root = tmp_path_factory.mktemp("needle_world")
    world = generate_world(root / "world", videos=3, minutes=2.0, seed=11, workers=1)
    videos = root / "world" / "videos"
    hashes = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in videos.glob("*.mp4")}
    report = generate(videos, GenerateSettings(questions_per_video=12, seed=3), root / "parts", workers=1)
    assert not report.errors and world.tasks
    return videos, report.tasks, hashes


def _packets(path: Path) -> list[tuple[int | None, int, bool]]:
    with av.open(str(path)) as c:
        return [(p.pts, p.size, bool(p.is_keyframe)) for p in c.demux(c.streams.video[0]) if p.size]


def test_the_file_is_never_rewritten_so_metadata_packets_and_keyframes_say_nothing(needle_world):
    videos, tasks, hashes = needle_world
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in videos.glob("*.mp4")} == hashes
    task = tasks[0]
    plan = plan_of(task)
    assert plan is not None and plan.needles
    # everything a harness can learn about the file (probe, packet sizes, keyframe times) is the original's
    twin = videos.parent / "twin.mp4"
    shutil.copyfile(task.video, twin)
    view = task.view()
    needled = TaskServices(view, task.video, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                           frames=NeedleFrames(task.video, plan))
    plain = TaskServices(view, str(twin), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings())
    assert needled.op_probe() == plain.op_probe()
    assert _packets(Path(task.video)) == _packets(twin)
    # and the plan never reaches harness code: the view is the allowlist, its JSON holds no needle time
    text = view.model_dump_json()
    assert plan.id not in text and "needle" not in text


def test_needle_pixels_at_needle_times_native_pixels_elsewhere(needle_world):
    _, tasks, _ = needle_world
    task = tasks[0]
    plan = plan_of(task)
    assert plan is not None
    glyph = next(n for n in plan.needles if n.kind == "glyph")
    inside, outside = (glyph.start + glyph.end) / 2, max(0.0, glyph.start - 0.3)
    painted = NeedleFrames(task.video, plan).frames([inside, outside], None)
    native = PlainFrames(task.video).frames([inside, outside], None)
    assert perceive(painted[0].image).name == glyph.name
    assert perceive(native[0].image).glyph == "none"  # placed where no native glyph is on screen
    assert np.array_equal(np.asarray(painted[1].image), np.asarray(native[1].image))


def test_a_sandboxed_harness_sees_needles_through_ctx_frames(needle_world, tmp_path: Path):
    """A harness in the sandbox asks for frames and a description: the model is shown the needle, and only there."""
    _, tasks, _ = needle_world
    task = next(t for t in tasks if t.kind == "grounding" and t.intervals)
    plan = plan_of(task)
    assert plan is not None
    times = sorted({round((n.start + n.end) / 2, 2) for n in plan.needles}
                   | {round(n.start - 0.3, 2) for n in plan.needles if n.start >= 0.3})
    harness_dir = tmp_path / "describer"
    harness_dir.mkdir()
    (harness_dir / "solver.py").write_text(
        "def solve(task, ctx):\n"
        f"    times = {times!r}\n"
        "    text = ctx.ask(ctx.frames(times), mode='describe')\n"
        "    ctx.log('seen', text=text)\n"
        "    return {'answer': [], 'raw': text}\n")
    (harness_dir / "SKILL.md").write_text("describe every frame\n")
    (harness_dir / "config.toml").write_text("")
    (harness_dir / "manifest.json").write_text(json.dumps({"name": "describer", "entry": "solver.py"}))
    harness = load_harness(harness_dir)
    results = solve_tasks(harness, [task], SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(budget=None),
                          tmp_path / "out")
    assert results[0].outcome == "ok", results[0].error
    raw = results[0].prediction.raw if results[0].prediction else ""
    seen = {float(line.split(" s:")[0]): line for line in raw.splitlines() if " s:" in line}
    for n in plan.needles:
        at = [line for t, line in seen.items() if n.start <= t < n.end]
        assert at and all(n.name in line for line in at), (n, at)
    native = [line for t, line in seen.items() if not plan.active(t)]
    assert native and not any(n.name in line for line in native for n in plan.needles)


@pytest.mark.slow
def test_simvlm_answers_needle_questions_with_enough_frames(needle_world, tmp_path: Path, seed: Path):
    _, tasks, _ = needle_world
    (seed / "config.toml").write_text("n_frames = 240\n")
    chosen = [t for t in tasks if t.kind == "grounding" or t.meta.get("template") == "count"]
    assert any(t.meta.get("template") == "count" for t in chosen)
    results = solve_tasks(load_harness(seed), chosen, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                          tmp_path / "dense")
    assert all(r.outcome == "ok" for r in results)
    mean = sum(r.score for r in results) / len(results)
    assert mean >= 0.8, [(r.task_id, r.score) for r in results]


def _blind_scan(i: int) -> VideoScan:
    rng = random.Random(i)
    bgs = list(BACKGROUNDS)
    duration = 240.0
    cuts = sorted(rng.sample(range(10, 230), 3))
    edges = [0.0, *map(float, cuts), duration]
    return VideoScan(f"v{i}", "/nonexistent.mp4", duration, 320, 180, 0.25, True, free=[(0.0, duration)],
                     backgrounds=[(a, b, rng.choice(bgs)) for a, b in itertools.pairwise(edges)])


def test_needle_options_are_blind_to_text_only_rules():
    """Needle mcqs drawn without any video (free footage): every text-only rule of the world's test stays at chance."""
    tasks: list[Task] = []
    for i in range(500):
        rng = random.Random(i)
        scan = _blind_scan(i)
        plan = plan_needles(scan, rng, [])
        tasks += letter_tasks(glyph_drafts(scan, plan, rng, 16), scan.video_id, scan.path, 240.0, rng,
                              "needles", "n")
    templates = by_template(tasks)
    assert sum(len(ts) for ts in templates.values()) >= 1500
    for template, ts in templates.items():
        for name, rule in RULES.items():
            acc = rule_accuracy(rule, ts)
            tolerance = 0.05 if len(ts) >= 400 else 0.1
            assert acc is None or abs(acc - 0.25) <= tolerance, (template, len(ts), name, acc)


def test_simvlm_is_at_chance_on_a_blank_frame(needle_world):
    from PIL import Image

    from videvolve.media.data_url import encode_data_url
    from videvolve.models.parsing import parse_letter
    from videvolve.skill_library import prompts

    _, tasks, _ = needle_world
    blank = encode_data_url(Image.new("RGB", (320, 180), BACKGROUNDS["navy"]), "png")
    letters = []
    for t in (t for t in tasks if t.kind == "mcq"):
        text = prompts.render("answer_mcq", question=t.question, options=prompts.options_block(t.options or ()))
        reply = SimVLM().complete([{"role": "user", "content": [
            {"type": "text", "text": "Frame at 1.0 s"}, {"type": "image_url", "image_url": {"url": blank}},
            {"type": "text", "text": text}]}])
        letters.append(parse_letter(reply.text, len(t.options or ())) == t.answer)
    assert letters and sum(letters) / len(letters) <= 0.5


@pytest.mark.slow
def test_generate_on_the_real_samples_names_the_damaged_file_and_keeps_the_others(tmp_path: Path, capsys,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    videos = sample("videos")
    out = tmp_path / "tasks.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out), "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert "decord_corrupted.mp4" in " ".join(captured.err.split())
    tasks = read_tasks(out)
    assert tasks and all(t.label_source == "needles" for t in tasks)
    assert len({t.video_id for t in tasks}) >= 4 and not check_video_disjoint(tasks)
    assert {t.split for t in tasks} == {"train", "selection"}
    kinds = {n.kind for t in tasks if (p := plan_of(t)) for n in p.needles}
    assert kinds == {"glyph", "text", "splice"}
    # resumable: a second run reuses every video's stored part
    assert main(["tasks", "generate", str(videos), "--out", str(out), "--workers", "1"]) == 0
    assert [t.id for t in read_tasks(out)] == [t.id for t in tasks]
    capsys.readouterr()
    # evolve on them through an OpenAI-compatible server as vLLM answers: SimVLM cannot see real footage, so every
    # answer is an error; the run still completes, and says why its scores are 0
    from videvolve.testing import serve_sim

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with serve_sim("--mimic", "vllm") as base:
        code = main(["evolve", "--run", str(tmp_path / "r"), "--tasks", str(out), "--seed-harness", "uniform",
                     "--iterations", "1", "--batch", "2", "--memory", str(tmp_path / "m"), "--embedder", "hashing",
                     "--no-trials", "--backend", "openai", "--base-url", base, "--model", "simvlm"])
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())
    assert code == 0 and "train: 28 questions, labels: needles 28" in said and "iteration 1:" in said, said[-2000:]
    assert "selection answers of the best harness are errors" in said and "SimVLM understands only SynthWorld" in said


def test_generated_tasks_refuse_a_test_split(tmp_path: Path, capsys):
    assert main(["tasks", "generate", str(tmp_path), "--out", str(tmp_path / "t.jsonl"), "--fractions",
                 "train=0.5,selection=0.25,test=0.25"]) == 2
    assert "never make a test split" in capsys.readouterr().err


@pytest.mark.parametrize("sources", ["teacher", "needles,teacher"])
def test_generate_refuses_teacher_labels_and_points_to_from_csv(tmp_path: Path, capsys, sources: str):
    (tmp_path / "videos").mkdir()
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(tmp_path / "videos"), "--out", str(out), "--sources", sources]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "--sources teacher" in said and "tasks from-csv" in said and "--teacher scan_refine" in said, said
    assert not out.exists()


def test_generate_names_an_unknown_source(tmp_path: Path, capsys):
    assert main(["tasks", "generate", str(tmp_path), "--out", str(tmp_path / "t.jsonl"), "--sources", "oracle"]) == 2
    assert "unknown --sources oracle" in capsys.readouterr().err


@pytest.mark.slow
def test_one_evolve_iteration_on_generated_tasks(needle_world, tmp_path: Path, seed: Path, capsys):
    from videvolve.tasks import write_tasks

    _, tasks, _ = needle_world
    path = write_tasks(tasks, tmp_path / "tasks.jsonl")
    assert main(["evolve", "--run", str(tmp_path / "r"), "--tasks", str(path), "--seed-harness", str(seed),
                 "--iterations", "1", "--batch", "2", "--memory", str(tmp_path / "m"), "--embedder", "hashing",
                 "--no-trials"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not all labels are gold: train: " in out and "labels: needles" in out
    assert "(gate on selection: " in out


def test_tasks_stored_by_an_older_planner_are_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from videvolve.labelfree import generate as gen

    video = tmp_path / "v.mp4"
    video.write_bytes(b"not decoded here")
    settings = gen.GenerateSettings()
    now = gen._stamp(video, settings)
    assert gen._stamp(video, settings) == now  # the same video and settings: reused
    monkeypatch.setattr(gen, "PLANNER_VERSION", gen.PLANNER_VERSION - 1)
    assert gen._stamp(video, settings) != now


def test_perceived_tasks_are_not_reused_for_another_model_or_a_replaced_video(tmp_path: Path):
    from videvolve.labelfree.generate import Perceiver
    from videvolve.models.base import Reply

    class Blind(SimVLM):
        name = "blind"

        def complete(self, messages, tools=None):
            return Reply(text="I see nothing.")

    generate_world(tmp_path / "w", videos=2, minutes=1.0, seed=3, workers=1)
    videos, parts = tmp_path / "w" / "videos", tmp_path / "parts"
    settings = GenerateSettings(sources=("perceived",), questions_per_video=4, perceive_fps=0.5)

    def perceived(vlm: SimVLM, where: Path = parts) -> dict[str, list[str]]:
        report = generate(videos, settings, where, Perceiver(vlm, cost_model("qwen2.5-vl"), None, where), workers=1)
        return {v: sorted(t.question for t in report.tasks if t.video_id == v) for v in ("video000", "video001")}

    seen = perceived(SimVLM())
    assert seen["video000"] and seen["video001"]
    assert perceived(Blind()) == {"video000": [], "video001": []}  # main: the SimVLM's tasks, as the blind model's
    shutil.copy(videos / "video000.mp4", videos / "video001.mp4")  # same name, another video
    again = perceived(SimVLM())
    assert again == perceived(SimVLM(), tmp_path / "fresh")  # main: video001 kept the old file's timeline
    assert again["video001"] != seen["video001"]


def test_a_stored_part_that_is_not_one_generate_wrote_is_made_again(tmp_path: Path, index_video: Path):
    """A part damaged or edited by hand (valid JSON, not tasks) raised a ValidationError, TypeError or KeyError out of
    `tasks generate`; it is made again as a part made otherwise is."""
    videos, parts = tmp_path / "videos", tmp_path / "out.jsonl.parts"
    videos.mkdir()
    shutil.copy2(index_video, videos / "a.mp4")
    settings = GenerateSettings(questions_per_video=4)
    first = generate(videos, settings, parts, workers=1)
    (part,) = list(parts.glob("*.json"))
    stamp = json.loads(part.read_text())["stamp"]
    for damaged in ([1, 2], {"stamp": stamp}, {"stamp": stamp, "tasks": [{"id": "x"}]}, {"stamp": stamp, "tasks": 3}):
        part.write_text(json.dumps(damaged))
        again = generate(videos, settings, parts, workers=1)
        assert [t.id for t in again.tasks] == [t.id for t in first.tasks]


def test_stored_tasks_are_not_reused_after_the_folder_moved_or_a_splice_source_went(tmp_path: Path):
    videos, parts = tmp_path / "videos", tmp_path / "out.jsonl.parts"
    videos.mkdir()
    for fps, name in ((25, "a.mp4"), (10, "b.mp4"), (12, "c.mp4")):  # three videos (copies of one are skipped)
        make_index_video(videos / name, seconds=20, fps=fps)  # real footage (not a SynthWorld): they splice others
    settings = GenerateSettings(questions_per_video=4, fractions={"train": 1.0})  # one split: each splices another

    def files(report) -> set[Path]:
        plans = [plan_of(t) for t in report.tasks]
        return {Path(t.video) for t in report.tasks} | {Path(n.source) for p in plans if p for n in p.needles
                                                        if n.source}

    assert {f.parent for f in files(generate(videos, settings, parts, workers=1))} == {videos.resolve()}
    moved = videos.rename(tmp_path / "moved")  # mv keeps every file's size and time
    report = generate(moved, settings, parts, workers=1)
    assert {f.parent for f in files(report)} == {moved.resolve()}  # main: every task pointed into the old folder
    a = (moved / "a.mp4").resolve()
    assert len(files(report)) == 3 and any(t.video == str(a) and plan_of(t) for t in report.tasks)
    for name in ("b.mp4", "c.mp4"):
        (moved / name).unlink()  # main: a's stored plan still spliced from one of them
    assert files(generate(moved, settings, parts, workers=1)) == {a}
