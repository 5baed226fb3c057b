"""A media file's fingerprint changes with any change of its content, and is read once per file version."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from videvolve.media import fingerprint as fp


def _file(path: Path, size: int = 5 * 1024 * 1024) -> Path:
    path.write_bytes(bytes(range(256)) * (size // 256))
    return path


def test_an_edit_of_the_same_size_between_the_old_samples_changes_it(tmp_path: Path):
    """The old fingerprint hashed the size and 1 MB at the start, middle and end: a same-size edit at 1.2 MB of a
    5 MB file (a shot replaced in a constant-bitrate video) kept it, and the old content's results were served."""
    video = _file(tmp_path / "v.y4m")
    before = fp.fingerprint(video)
    with video.open("r+b") as fh:
        fh.seek(1_200_000)
        fh.write(b"\xff" * 4096)
    assert video.stat().st_size == 5 * 1024 * 1024
    assert fp.fingerprint(video) != before


def test_an_edit_whose_modification_time_is_set_back_is_hashed_again(tmp_path: Path):
    """The memo keys on the change time too, which writing sets and no user call sets back."""
    video = _file(tmp_path / "v.mp4")
    st = video.stat()
    before = fp.fingerprint(video)
    with video.open("r+b") as fh:
        fh.seek(2_000_000)
        fh.write(b"\x00" * 16)
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert video.stat().st_mtime_ns == st.st_mtime_ns
    assert fp.fingerprint(video) != before == fp.content_hash(_file(tmp_path / "same.mp4"))


def test_a_file_version_is_hashed_once_and_the_same_content_elsewhere_agrees(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    video = _file(tmp_path / "v.mp4")
    hashed: list[str] = []
    real = fp.content_hash

    def counted(path: str | Path) -> str:
        hashed.append(str(path))
        return real(path)

    monkeypatch.setattr(fp, "content_hash", counted)
    first = fp.fingerprint(video)
    assert fp.fingerprint(video) == first and len(hashed) == 1  # the second read the memo
    assert fp.memo_path().is_file()
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(video.read_bytes())
    assert fp.fingerprint(copy) == first and len(hashed) == 2


def test_without_a_usable_memo_the_file_is_hashed_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(fp, "memo_path", lambda: blocker / "fingerprints.sqlite")
    video = _file(tmp_path / "v.mp4", 1024)
    assert fp.fingerprint(video) == fp.content_hash(video)
