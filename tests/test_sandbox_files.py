"""The sandbox's file system holds nothing a harness may write: files cost the machine memory no limit counts.

A harness past the static check (``len.__self__`` is the real builtins module) writes through the real ``open``.
Every file it makes in a tmpfs is kernel memory outside its address-space limit, held until its sandbox ends: empty
files (no bytes, so a tmpfs's size never stops them) at about 200,000 a second, up to half the machine's pages of
inodes per tmpfs; and, under a user namespace (bubblewrap started by a normal user), the sandbox's root and ``/dev``
belong to the sandbox's uid, tmpfs of half the machine's memory each, filled 16 MB a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.test_hostile_code import run_source
from videvolve.skill_library import sandbox
from videvolve.testing import make_index_video

WRITER = '''
def solve(task, ctx):
    b = len.__self__
    os = b.__import__("os")
    made = {}
    for folder in ("/", "/tmp", "/dev", "/dev/shm", "/proc", "/usr"):
        try:
            with b.open(os.path.join(folder, "videvolve-probe"), "w") as fh:
                fh.write("x")
            made[folder] = "written"
        except OSError as exc:
            made[folder] = exc.__class__.__name__
    return {"answer": "A", "raw": b.__import__("json").dumps({"made": made, "cwd": os.getcwd(),
                                                              "tmp": os.listdir("/tmp")})}
'''


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(make_index_video(tmp_path_factory.mktemp("files") / "v.mp4", seconds=4, fps=10, gop=10, width=64,
                                height=48))


@pytest.fixture(params=[False, True], ids=["as started", "user namespace"])
def started_as(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap as this process starts it, and as a normal user starts it (root may make a user namespace too)."""
    if request.param:
        if os.geteuid() != 0:
            pytest.skip("the test as this user is the user-namespace case already")
        monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)


@pytest.mark.usefixtures("started_as")
def test_a_harness_past_the_static_check_can_write_no_file(video: str, tmp_path: Path) -> None:
    """Before: /tmp was a writable tmpfs (64 MB of bytes, but empty files without bound: 1,000,000 of them held
    1.2 GB of the host's kernel memory), and started by a normal user, / and /dev were writable too."""
    out, _ = run_source(WRITER, video, tmp_path, static_check=False)
    assert out.outcome == "ok" and out.prediction is not None, out.error
    seen = json.loads(out.prediction.raw)
    assert "written" not in seen["made"].values(), seen
    assert seen["cwd"] == "/tmp" and seen["tmp"] == [], seen


ESCAPES = '''
def solve(task, ctx):
    b = len.__self__
    os = b.__import__("os")
    libc = b.__import__("ctypes").CDLL(None, use_errno=True)

    def unshare():  # in a forked process: a process of several threads (this one) may not make a user namespace
        pid = os.fork()
        if pid == 0:
            os._exit(0 if libc.unshare(0x10000000 | 0x00020000) == 0 else 1)
        return 0 if os.waitpid(pid, 0)[1] == 0 else -1

    said = {}
    for name, call in (("own user namespace", unshare),
                       ("System V shared memory", lambda: libc.shmget(0, 256 * 1024 * 1024, 0o1600)),
                       ("System V message queue", lambda: libc.msgget(0, 0o1600)),
                       ("memory file", lambda: libc.memfd_create(b"x", 0))):
        said[name] = "refused" if call() == -1 else "made"
    b.__import__("threading").Thread(target=print).start()  # a thread still starts
    return {"answer": "A", "raw": b.__import__("json").dumps(said)}
'''


@pytest.mark.usefixtures("started_as")
def test_a_harness_past_the_static_check_makes_no_namespace_or_ipc_object(video: str, tmp_path: Path) -> None:
    """Before: ``unshare(CLONE_NEWUSER | CLONE_NEWNS)`` made the harness root of namespaces of its own, where it mounted
    a writable tmpfs over the read-only ``/tmp`` (100,000 files made); ``shmget`` and ``msgget`` kept memory outside
    its address-space limit (eight 256 MB segments, written and detached, held 2 GB under a 1 GB limit), and so did
    ``memfd_create`` (forty memory files of 16 MB, the file-size limit, written and never mapped: 640 MB)."""
    out, _ = run_source(ESCAPES, video, tmp_path, static_check=False)
    assert out.outcome == "ok" and out.prediction is not None, out.error
    said = json.loads(out.prediction.raw)
    assert set(said.values()) == {"refused"}, said
