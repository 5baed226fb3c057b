"""`tasks generate` on odd inputs and a failing host: a clear error or a named, skipped video, never a traceback,
and nothing kept from a run reused where it does not belong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.errors import StorageError
from videvolve.labelfree.generate import GenerateSettings, Perceiver, generate
from videvolve.media.info import probe
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.needles.frames import plan_of
from videvolve.tasks import read_tasks
from videvolve.testing import full_disk, make_index_video


@pytest.fixture()
def videos(tmp_path: Path, index_video: Path) -> Path:
    """A folder with one 20 s video of real-looking footage (not a SynthWorld)."""
    folder = tmp_path / "videos"
    folder.mkdir()
    shutil.copy2(index_video, folder / "a.mp4")
    return folder


@pytest.mark.parametrize("flags, named", [
    (["--questions-per-video", "0"], "questions_per_video"),
    (["--perceive-fps", "0"], "perceive_fps"),
    (["--fractions", "train=nan"], "train=nan"),
    (["--fractions", "train=inf,selection=1"], "train=inf"),
    (["--fractions", "train=most"], "train=most"),
])
def test_a_bad_number_on_the_command_line_is_refused_in_words(videos: Path, tmp_path: Path, capsys,
                                                                flags: list[str], named: str):
    """main: a pydantic ValidationError or 'cannot convert float NaN to integer' traceback (exit 70)."""
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out), *flags]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert named in said and "Traceback" not in said, said
    assert not out.exists()


def test_a_full_disk_while_writing_the_tasks_file_keeps_the_old_one_and_says_so(videos: Path, tmp_path: Path,
                                                                                capsys):
    """main: OSError 'File too large' with a traceback, and a half-written ``t.jsonl.tmp`` left behind."""
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 0
    before = out.read_bytes()
    capsys.readouterr()
    with full_disk(len(before) // 2):  # the video's part is reused: the tasks file is the only write
        code = main(["tasks", "generate", str(videos), "--out", str(out)])
    said = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"cannot write the tasks file {out}" in said and "Traceback" not in said, said
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "t.jsonl", "t.jsonl.parts", "videos"]


def test_a_full_disk_during_the_perceived_look_stops_cleanly_and_the_rerun_looks_again(videos: Path,
                                                                                       tmp_path: Path):
    """main: OSError with a traceback, and a half-written ``a.timeline.json`` that crashed every rerun."""
    parts = tmp_path / "t.jsonl.parts"
    settings = GenerateSettings(sources=("needles", "perceived"), questions_per_video=4, perceive_fps=0.5)

    def run(where: Path) -> list[str]:
        perceiver = Perceiver(SimVLM(), cost_model("qwen2.5-vl"), None, where)
        return sorted(t.question for t in generate(videos, settings, where, perceiver, workers=1).tasks)

    with full_disk(64), pytest.raises(StorageError, match=r"a\.timeline\.json"):
        run(parts)
    assert not (parts / "a.timeline.json").exists() or (parts / "a.timeline.json").stat().st_size > 64
    (parts / "a.timeline.json").write_text('{"video_id": "a", "fps": 0.5, "entr')  # as an older version left it
    assert run(parts) == run(tmp_path / "fresh")


def test_a_video_too_short_for_any_question_is_named_with_the_reason(videos: Path, tmp_path: Path, capsys):
    """main: 'wrote ... about 1 videos' and not a word about short.mp4; with only short videos 'no tasks could be
    generated' without a reason."""
    make_index_video(videos / "short.mp4", seconds=0.4, fps=10)
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert f"skipped {videos / 'short.mp4'}" in said and "too short" in said and "0.40 s" in said, said
    assert {t.video_id for t in read_tasks(out)} == {"a"}
    (videos / "a.mp4").unlink()
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"skipped {videos / 'short.mp4'}" in said and "too short" in said, said


def test_a_stored_part_is_not_reused_once_the_video_it_splices_from_was_replaced(videos: Path, tmp_path: Path,
                                                                                 index_video: Path):
    """main: a.mp4's stored plan kept splicing 3.9 s of b.mp4 from 4.4 s on after b.mp4 became a 6 s video (its
    last frames then frozen on b's last one)."""
    make_index_video(videos / "b.mp4", seconds=20, fps=10)  # another video (a copy of a.mp4 would be skipped)
    # one split: a video splices in only videos of its own split (of two videos, one would be train, one selection)
    parts, settings = tmp_path / "parts", GenerateSettings(questions_per_video=4, fractions={"train": 1.0})

    def splices(report) -> list[tuple[str, float, float]]:
        return [(n.source, n.offset, n.end - n.start) for t in report.tasks if t.video_id == "a"
                and (plan := plan_of(t)) for n in plan.needles if n.kind == "splice" and n.source]

    first = splices(generate(videos, settings, parts, workers=1))
    assert first and first[0][0] == str((videos / "b.mp4").resolve()) and first[0][1] + first[0][2] > 6.0
    (videos / "b.mp4").unlink()
    make_index_video(videos / "b.mp4", seconds=6.0, fps=10)
    again = generate(videos, settings, parts, workers=1)
    short = probe(videos / "b.mp4").duration
    assert splices(again) and all(offset + length <= short + 1e-6 for _, offset, length in splices(again))
    assert not next(o for o in again.outcomes if o.video_id == "a").cached
    third = generate(videos, settings, parts, workers=1)  # nothing changed since: every part is reused
    assert all(o.cached for o in third.outcomes) and splices(third) == splices(again)


def test_a_second_generate_into_the_same_out_is_refused_while_the_first_runs(videos: Path, tmp_path: Path,
                                                                              capsys):
    """main: nothing stopped it; both wrote one `<out>.parts` (their temporary files too) and one `--out`."""
    from tests.test_folderlock import held_elsewhere

    out, parts = tmp_path / "t.jsonl", tmp_path / "t.jsonl.parts"
    with held_elsewhere(parts) as proc:
        assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"process {proc.pid}" in said and "another --out" in said, said
    assert not out.exists() and not list(parts.glob("*.json"))
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 0  # once it has ended
    assert read_tasks(out)


def test_a_folder_of_one_video_says_no_selection_split_can_be_made_and_evolve_says_why(videos: Path,
                                                                                     tmp_path: Path, capsys):
    """main: generate wrote every task to train without a word; evolve then said to run `tasks split`, which
    cannot make a video-disjoint selection split out of one video either."""
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert {t.split for t in read_tasks(out)} == {"train"}
    assert "no selection split: the splits are video-disjoint and 1 video (a) has questions" in said, said
    assert "add videos" in said, said
    assert main(["evolve", "--run", str(tmp_path / "r"), "--tasks", str(out), "--iterations", "1",
                 "--memory", str(tmp_path / "m")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "needs train and selection splits" in said and "1 video (a)" in said and "add videos" in said, said


def test_a_skipped_video_named_with_brackets_is_named_as_it_is(videos: Path, tmp_path: Path, capsys):
    """main: 'skipped .../talk .mp4' (rich read '[dQw4w9WgXcQ]' as a style and dropped it), and a name with '[/x]'
    crashed the whole command after every video was done (MarkupError, exit 70)."""
    from tests.conftest import sample

    shutil.copy(sample("videos", "decord_corrupted.mp4"), videos / "talk [dQw4w9WgXcQ].mp4")
    make_index_video(videos / "clip [/x].mp4", seconds=0.4, fps=10)
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", str(videos), "--out", str(out)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert f"skipped {videos / 'talk [dQw4w9WgXcQ].mp4'}: " in said, said
    assert f"skipped {videos / 'clip [/x].mp4'}: " in said and "too short" in said, said


def test_a_name_not_in_utf8_is_skipped_in_words_and_a_very_long_one_is_kept(videos: Path, tmp_path: Path, capsys):
    """main: a name with bytes that are not UTF-8 stopped the whole run (UnicodeEncodeError seeding the video's
    random numbers), and a 248-character name stopped it after that video's work was done (its stored part's file
    name over 255 bytes; said as a bug)."""
    import os

    good = videos / "a.mp4"
    shutil.copy2(good, os.fsdecode(bytes(videos) + b"/talk \xff\xfe.mp4"))
    long_name = "a very long title " * 13 + "end.mp4"
    make_index_video(videos / long_name, seconds=20, fps=10)  # another video (a copy of a.mp4 would be skipped)
    out = tmp_path / "t.jsonl"
    code = main(["tasks", "generate", str(videos), "--out", str(out)])
    said = " ".join(capsys.readouterr().err.split())
    assert code == 0, said
    assert "skipped" in said and "talk \\xff\\xfe.mp4" in said and "not valid UTF-8" in said and "rename" in said
    videos_named = {Path(t.video).name for t in read_tasks(out)}
    assert videos_named == {"a.mp4", long_name}, videos_named
    assert all(len(p.name.encode()) <= 255 for p in (tmp_path / "t.jsonl.parts").rglob("*"))


def test_the_perceived_look_tells_its_progress_frame_by_frame(videos: Path, tmp_path: Path):
    """A long video's look takes hours; the bar counted whole videos and stood still meanwhile (main)."""
    from videvolve.labelfree.perceived import stored_timeline

    settings = GenerateSettings(sources=("perceived",), questions_per_video=4, perceive_fps=2.0)
    told: list[int] = []
    perceiver = Perceiver(SimVLM(), cost_model("qwen2.5-vl"), None, tmp_path / "parts", on_frames=told.append)
    generate(videos, settings, tmp_path / "parts", perceiver, workers=1)
    timeline = stored_timeline(tmp_path / "parts", "a")
    assert timeline is not None and timeline.frames == 40 and len(told) > 1 and sum(told) == 40, told
    told.clear()
    (tmp_path / "parts" / "a.json").unlink()  # the tasks made again from the stored look: told at once
    generate(videos, settings, tmp_path / "parts", perceiver, workers=1)
    assert told == [40]


def test_a_same_named_video_added_elsewhere_renames_none_made_before(videos: Path, tmp_path: Path, index_video: Path):
    """main: a second `x.mp4` in a subfolder gave both a hashed id, so the first one's tasks, parts and every
    result keyed by its id were made again under a new one."""
    (videos / "sub").mkdir()
    parts, settings = tmp_path / "parts", GenerateSettings(questions_per_video=4)
    first = generate(videos, settings, parts, workers=1)
    make_index_video(videos / "sub" / "a.mp4", seconds=20, fps=10)  # another video of the same name
    again = generate(videos, settings, parts, workers=1)
    ids = {o.video_id: o for o in again.outcomes}
    assert [o.video_id for o in first.outcomes] == ["a"] and ids["a"].cached
    assert ids["a"].path == str((videos / "a.mp4").resolve()) and len(ids) == 2
    assert {t.id for t in first.tasks} <= {t.id for t in again.tasks}
    fresh = generate(videos, settings, tmp_path / "fresh-parts", workers=1)  # a new --out: both stems hashed
    assert all(o.video_id.startswith("a-") for o in fresh.outcomes)


def test_a_video_that_gave_no_question_keeps_its_id_too(tmp_path: Path, index_video: Path):
    """Its part held no task, so nothing named its path: a same-named file added elsewhere renamed it (its part and
    stored look made again under a hashed id)."""
    videos, parts = tmp_path / "videos", tmp_path / "parts"
    (videos / "sub").mkdir(parents=True)
    make_index_video(videos / "a.mp4", seconds=1, fps=10, gop=5)  # too short for any needle: no task
    settings = GenerateSettings(questions_per_video=4)
    assert [(o.video_id, o.tasks) for o in generate(videos, settings, parts, workers=1).outcomes] == [("a", [])]
    shutil.copy2(index_video, videos / "sub" / "a.mp4")
    ids = {o.path: o for o in generate(videos, settings, parts, workers=1).outcomes}
    kept = ids[str((videos / "a.mp4").resolve())]
    assert kept.video_id == "a" and kept.cached


def test_of_two_parts_naming_one_video_the_newest_names_it(videos: Path, tmp_path: Path):
    """A video an older version renamed has two parts (``a.json``, ``a-<hash>.json``); the one found first in the
    folder's listing named it, whichever run wrote it last (the ids of the tasks file in use)."""
    import json
    import os

    parts, settings = tmp_path / "parts", GenerateSettings(questions_per_video=4)
    generate(videos, settings, parts, workers=1)
    older = json.loads((parts / "a.json").read_text())
    (parts / "a-0123ab.json").write_text(json.dumps(older))
    for newest, other in (("a-0123ab", "a"), ("a", "a-0123ab")):
        os.utime(parts / f"{other}.json", (1_000_000, 1_000_000))
        os.utime(parts / f"{newest}.json", (2_000_000, 2_000_000))
        assert [o.video_id for o in generate(videos, settings, parts, workers=1).outcomes] == [newest]
