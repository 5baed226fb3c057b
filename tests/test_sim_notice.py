"""SimVLM says what it is: outside SynthWorld (pictures or questions) it replies with a notice, and ``ask``,
``eval`` and the Python API report it once as the outcome ``unsupported``, not as a harness parse failure."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import sample
from videvolve.datasets.synthworld.render import render_frame
from videvolve.datasets.synthworld.script import make_script
from videvolve.media.captions import frame_caption
from videvolve.models.base import SIM_ONLY_NOTICE
from videvolve.models.parsing import parse_intervals, parse_letter
from videvolve.models.sim import SimVLM
from videvolve.tasks import Task, write_tasks
from videvolve.testing import index_frame, make_index_video


def videvolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated video that is not SynthWorld: white blocks over a gradient."""
    return make_index_video(tmp_path_factory.mktemp("foreign") / "index.mp4", seconds=12, fps=10, gop=10)


def _ask_sim(frame: np.ndarray, text: str) -> str:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    content = [{"type": "text", "text": frame_caption(3.0)}, {"type": "image_url", "image_url": {"url": url}},
               {"type": "text", "text": text}]
    return SimVLM().complete([{"role": "user", "content": content}]).text


def test_simvlm_replies_with_the_notice_outside_synthworld():
    script = make_script("v", 120, seed=1)
    synth = np.asarray(render_frame(script, script.events[0].start))
    off_grammar = _ask_sim(synth, "When does the goalkeeper dive?")
    assert off_grammar.startswith(SIM_ONLY_NOTICE) and "grammar" in off_grammar
    foreign = _ask_sim(index_frame(7, 320, 180), "When does the red circle appear?")
    assert foreign.startswith(SIM_ONLY_NOTICE) and "not SynthWorld frames" in foreign
    for reply in (off_grammar, foreign):  # never read as an answer
        assert parse_letter(reply, 4) is None and parse_intervals(reply, 120.0) is None
    in_domain = _ask_sim(synth, f"When does the {script.events[0].name} appear?")
    assert SIM_ONLY_NOTICE not in in_domain and json.loads(in_domain)


@pytest.mark.slow
def test_ask_prints_the_notice_once_on_a_generated_foreign_video(foreign: Path):
    r = videvolve("ask", str(foreign), "When does the goalkeeper dive?", "--harness", "uniform", "--no-cache")
    assert r.returncode == 1
    assert r.stderr.strip() == f"notice: {SIM_ONLY_NOTICE}" and "parse" not in r.stderr
    mcq = videvolve("ask", str(foreign), "What colour is the star that appears on the navy background?",
                    "--option", "red", "--option", "blue", "--harness", "uniform", "--no-cache", "--json")
    out = json.loads(mcq.stdout)
    assert mcq.returncode == 1 and out["error_kind"] == "unsupported" and out["error"].startswith(SIM_ONLY_NOTICE)


@pytest.mark.slow
def test_eval_prints_the_notice_once(foreign: Path, tmp_path: Path):
    common = {"video_id": "index", "video": str(foreign), "split": "test"}
    tasks = [Task(id="q1", kind="mcq", question="Who scores?", options=["home", "away"], answer="A", **common),
             Task(id="q2", kind="mcq", question="How many times does the red circle appear?",
                  options=["0", "1", "2", "3"], answer="B", **common),
             Task(id="q3", kind="grounding", question="When does the goalkeeper dive?", answer=[[1.0, 2.0]],
                  **common)]
    write_tasks(tasks, tmp_path / "tasks.jsonl")
    r = videvolve("eval", "--tasks", str(tmp_path / "tasks.jsonl"), "--split", "test", "--harness", "uniform",
                  "--out", str(tmp_path / "out"), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(SIM_ONLY_NOTICE) == 1 and "3 of 3 task(s)" in r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["errors_by_kind"] == {"unsupported": 3}


def test_python_api_reports_unsupported(foreign: Path):
    from videvolve import load_harness

    answer = load_harness("uniform").ask(foreign, "When does the goalkeeper dive?")
    assert answer.outcome == "error" and answer.error_kind == "unsupported"
    assert (answer.error or "").startswith(SIM_ONLY_NOTICE) and answer.usage["frames"] > 0


def test_python_api_on_a_real_sample_video(seed: Path):
    from videvolve import load_harness

    answer = load_harness(seed).ask(sample("videos", "moviepy_chaplin.mp4"), "When does the red circle appear?")
    assert answer.error_kind == "unsupported" and answer.error == f"{SIM_ONLY_NOTICE} (these pictures are not " \
        "SynthWorld frames)"
