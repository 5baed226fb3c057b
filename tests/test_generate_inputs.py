"""`tasks generate` on odd inputs and a failing host: a clear error or a named, skipped video, never a traceback,
and nothing kept from a run reused where it does not belong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.testing import full_disk


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
