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


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A 30 s SynthWorld video and a grounding question in its grammar."""
    from videvolve.datasets.synthworld.render import encode_video

    script = make_script("v", 30, seed=1)
    return encode_video(script, tmp_path_factory.mktemp("synth") / "v.mp4"), \
        f"When does the {script.events[0].name} appear?"


INDUCES_THE_NOTICE = {
    "ask": 'ctx.ask(ctx.frames([1.0]), prompt="hello there")',
    "chat": 'ctx.chat([{"role": "user", "content": [ctx.frames([1.0])[0].part(), {"type": "text", "text": "hi"}]}])',
}
"""Requests out of SynthWorld's grammar, which SimVLM answers with its notice."""
UNPARSABLE = """
def solve(task, ctx):
    REQUEST
    return "I refuse to give intervals"
"""


@pytest.mark.parametrize("request_", sorted(INDUCES_THE_NOTICE))
def test_a_harness_cannot_make_its_unparsable_answer_unsupported(synth: tuple[Path, str], tmp_path: Path,
                                                                request_: str):
    """Before: one request out of SynthWorld's grammar made SimVLM send its notice, and the harness's unparsable
    answer was ``unsupported`` (not its fault: validation passed a candidate that never answers). The parent's own
    request gets no notice on a SynthWorld video, so the answer is the harness's ``parse``."""
    from tests.test_hostile_code import run_source
    from videvolve.skill_library.steps import ModelCall, NoticeCheck
    from videvolve.skill_library.trace import read_steps
    from videvolve.tasks import TaskView

    video, question = synth
    view = TaskView(id="t", kind="grounding", question=question, duration=30.0)
    out, trace = run_source(UNPARSABLE.replace("REQUEST", INDUCES_THE_NOTICE[request_]), str(video), tmp_path,
                            view=view)
    assert (out.outcome, out.error_kind) == ("error", "parse"), (out.error_kind, out.error)
    steps = read_steps(trace)
    asked = [s for s in steps if isinstance(s, ModelCall)]
    assert len(asked) == 1 and asked[0].reply.startswith(SIM_ONLY_NOTICE)  # the harness did get the notice
    [check] = [s for s in steps if isinstance(s, NoticeCheck)]
    assert check.observed_times == [15.0] and check.reply is not None and SIM_ONLY_NOTICE not in check.reply
    assert out.usage["requests"] == 1  # the parent's request is not the harness's


def test_the_notice_stands_where_the_parents_own_request_gets_it_too(foreign: Path, tmp_path: Path):
    """On a video that is not SynthWorld the parent's own request gets the notice too: ``unsupported`` stands."""
    from tests.test_hostile_code import run_source
    from videvolve.tasks import TaskView

    view = TaskView(id="t", kind="grounding", question="When does the goalkeeper dive?", duration=12.0)
    out, _ = run_source(UNPARSABLE.replace("REQUEST", "ctx.ask(ctx.frames([1.0]))"), str(foreign), tmp_path,
                        view=view)
    assert (out.outcome, out.error_kind) == ("error", "unsupported"), (out.error_kind, out.error)
    assert (out.error or "").startswith(SIM_ONLY_NOTICE) and out.usage["requests"] == 1
