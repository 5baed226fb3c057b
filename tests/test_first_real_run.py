"""docs/guides/first-real-run.md: the rehearsal block, pasted verbatim into bash, works against a real serve-sim."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "first-real-run.md"


def rehearsal_block() -> str:
    """The first bash block of the guide's rehearsal section."""
    section = GUIDE.read_text().split("## The rehearsal", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert found, f"no bash block in the rehearsal section of {GUIDE}"
    return found.group(1)


def test_the_rehearsal_names_the_model_serve_sim_serves():
    block = rehearsal_block()
    served = re.search(r"serve-sim .*?--model (\S+)", block, re.DOTALL)
    assert served and f"--model {served.group(1)}" in block.split("B=", 1)[1]
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in block


@pytest.mark.slow
def test_the_rehearsal_pasted_verbatim_works(tmp_path: Path, reserved_tcp_port: int):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "videvolve"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m videvolve "$@"\n')
    wrapper.chmod(0o755)
    script = tmp_path / "rehearsal.sh"
    script.write_text("set -uo pipefail\n" + rehearsal_block())  # the block stops at a failure and ends its server
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PORT": str(reserved_tcp_port),
           "HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join(filter(None, [
               str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=420)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "Traceback" not in r.stderr, r.stderr[-4000:]
    for line in ("clip calibration", "worst 0.0%"):
        assert line in r.stdout, r.stdout[-4000:]
    here = work / "rehearsal"  # its own folder: the Quickstart's world and runs/first beside it are not touched
    assert (here / "runs" / "first" / "lineage.jsonl").exists()
    assert list((here / "evals" / "results").glob("*.json"))
    assert sorted(p.name for p in work.iterdir()) == ["rehearsal"]


FAKE_VIDEVOLVE = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$1" in
  synth) mkdir -p world/videos && : > world/videos/v.mp4 ;;
  serve-sim) mkdir -p served && : > served/health && cd served && exec "$PYTHON" -m http.server "$PORT" \\
    --bind 127.0.0.1 ;;
  doctor) exit 1 ;;
esac
"""
"""A stand-in for ``videvolve``: ``serve-sim`` answers /health, ``doctor`` fails, every call is logged."""


def test_the_rehearsal_stops_at_the_first_failure_and_ends_its_server(tmp_path: Path, reserved_tcp_port: int):
    """Pasted beside the Quickstart's world, the block ran on after a failing step (and ran into the Quickstart's
    files); it now works in a folder of its own, stops at the first failing command, and its server stops too."""
    import socket
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "videvolve"
    fake.write_text(FAKE_VIDEVOLVE)
    fake.chmod(0o755)
    work = tmp_path / "work"
    (work / "world").mkdir(parents=True)  # the Quickstart's
    calls = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PORT": str(reserved_tcp_port),
           "CALLS": str(calls), "PYTHON": sys.executable}
    r = subprocess.run(["bash", "-c", rehearsal_block()], cwd=work, env=env, capture_output=True, text=True,
                       timeout=60)
    said = [line.split()[0] for line in calls.read_text().splitlines()]
    assert r.returncode != 0 and said == ["synth", "serve-sim", "doctor"], (said, r.stderr[-2000:])
    assert (work / "rehearsal" / "world" / "videos" / "v.mp4").exists() and not any((work / "world").iterdir())
    deadline = time.monotonic() + 10
    while True:  # the server was told to stop when the block ended
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", reserved_tcp_port)) != 0:
                break
        assert time.monotonic() < deadline, "the rehearsal's server still runs after the block failed"
        time.sleep(0.1)
