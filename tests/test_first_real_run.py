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
    # the trap only makes a failing step end the background server too (it would hold the output pipes open)
    script.write_text("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + rehearsal_block())
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
    assert (work / "runs" / "first" / "lineage.jsonl").exists()
    assert list((work / "evals" / "results").glob("*.json"))
