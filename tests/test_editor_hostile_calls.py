"""A hostile editor or investigator model's tool calls are refused with a reason, never raised into the run:
names with a NUL byte or over the file system's length, a transcript window of NaN, a reply of braces that never
close (the LLM editor's parse stays linear)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.test_editor_agent import Scripted, call, spoken_task, workspace
from tests.test_investigator_agent import failure as failure
from tests.test_investigator_agent import investigate
from videvolve.editing.agent import AgentEditor
from videvolve.editing.base import Proposal, check_edit, write_candidate
from videvolve.editing.llm import LLMEditor, parse_revision
from videvolve.editing.workspace import EditorLimits
from videvolve.errors import HarnessError
from videvolve.models.base import Reply
from videvolve.testing import OneWorkspace, serve_scripted_chat
from videvolve.usage import CostMeasure

LONG = "a" * 300


@pytest.mark.parametrize(("name", "args"), [
    ("read_file", {"path": "TASK.md\x00"}),
    ("read_file", {"path": LONG}),
    ("read_file", {"path": f"traces/{LONG}/task.json"}),
    ("list_files", {"path": "traces\x00"}),
    ("list_files", {"path": LONG}),
    ("write_file", {"path": f"candidate/references/{LONG}.md", "content": "x"}),
    ("write_file", {"path": f"candidate/tools/{LONG}/tool.py", "content": "x"}),
    ("edit_file", {"path": f"candidate/references/{LONG}.md", "old": "x", "new": "y"}),
])
def test_a_hostile_path_is_refused_not_raised(small_world, tmp_path, seed, name, args):
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    text, ok = tools.call(name, args)
    assert not ok and text.startswith(("refused:", "error:")), text


def test_a_transcript_probe_of_nan_times_is_refused_for_the_editor(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0, probes=2))
    task_id, _ = spoken_task(tools, tmp_path, "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nthe crane\n")
    text, _ = tools.call("probe", {"task_id": task_id, "times": [float("nan")], "show": "transcript",
                                    "question": "what is said?"})
    assert "nan" in text.lower() and "error" in text.lower(), text


def test_an_agent_editor_sending_nul_and_long_names_ends_its_proposal_not_the_run(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    agent = AgentEditor(Scripted([call("read_file", path="TASK.md\x00"), call("list_files", path=LONG),
                                  call("write_file", path=f"candidate/references/{LONG}.md", content="x")]),
                        rounds=4)
    assert agent.propose(tools.inp, OneWorkspace(tools)) is None
    assert "refused" in (agent.last_failure or ""), agent.last_failure


def test_an_edit_path_with_a_final_newline_is_refused(tmp_path, seed):
    """``$`` matches before a final newline: ``"solver.py\\n"`` was written as a file of that name, which the static
    check never read, and an agent's stray ``candidate/SKILL.md\\n`` made a copy of the parent pass as new."""
    for path in ("solver.py\n", "SKILL.md\n", "config.toml\n", "references/a.md\n", "tools/t/tool.py\n"):
        assert check_edit(path, "x") is not None, path
    with pytest.raises(HarnessError, match="not an editable harness file"):
        write_candidate(seed, tmp_path / "harnesses",
                        Proposal(operator="llm", rationale="r", edits={"solver.py\n": "import os\n"}))


def test_an_overlong_editable_name_is_refused_before_it_is_written(tmp_path, seed):
    """The LLM editor's edits reach write_candidate by name: one the file system cannot hold is the edit's fault."""
    assert check_edit(f"references/{LONG}.md", "x") is not None
    assert check_edit(f"tools/{LONG}/tool.py", "x") is not None
    assert check_edit("references/notes.md", "x") is None
    proposal = Proposal(operator="llm", rationale="r", edits={f"references/{LONG}.md": "x"})
    with pytest.raises(HarnessError):
        write_candidate(seed, tmp_path / "harnesses", proposal)


def test_the_llm_editor_reads_a_reply_of_unclosed_braces_in_linear_time(small_world, tmp_path, seed):
    start = time.monotonic()
    with pytest.raises(ValueError):
        parse_revision("{" * 200_000)
    assert time.monotonic() - start < 2.0
    good = json.dumps({"rationale": "r", "edits": [{"path": "SKILL.md", "content": "x"}]})
    assert parse_revision(f"Here it is: {good} done").rationale == "r"
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    editor = LLMEditor(Scripted([Reply(text="{" * 200_000)] * 3))
    start = time.monotonic()
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None
    assert time.monotonic() - start < 5.0 and "no JSON object" in (editor.last_failure or "")


def test_arguments_utf8_cannot_hold_are_refused_in_every_tool_loop(small_world, tmp_path, seed):
    """A lone surrogate (JSON's \\ud800 escape) in a path, a file's content, a question or a rationale."""
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    task_id = next(iter(tools.env.tasks))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": "candidate/SKILL.md", "content": "x\ud800"}), ("read_file", {"path": "TASK\ud800.md"}),
        ("probe", {"task_id": task_id, "times": [1.0], "question": "what \ud800 is shown?"}),
        ("submit", {"rationale": "r\ud800"})]
    for name, args in calls:
        text, ok = tools.call(name, args)
        assert not ok and "UTF-8" in text, text
    assert check_edit("SKILL.md", "x\ud800") is not None
    agent = AgentEditor(Scripted([call("write_file", path="candidate/SKILL.md", content="x\ud800")] * 3), rounds=4)
    assert agent.propose(tools.inp, OneWorkspace(tools)) is None and "UTF-8" in (agent.last_failure or "")


def test_the_investigator_agent_s_hostile_probes_are_answered_not_raised(failure, tmp_path):
    """A transcript window of NaN and a question UTF-8 cannot hold: errors it reads, never raised into the run."""
    task, _, _ = failure
    head = json.dumps({"task_id": task.id})[:-1]
    plan = [head + ', "times": [NaN], "show": "transcript", "question": "what is said?"}',
            head + r', "times": [1.0], "question": "what \ud800 is shown?"}',
            json.dumps({"category": "unresolved", "hypothesis": "h", "applies_when": "a", "preserve": "p"})]

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        step = sum(m["role"] == "assistant" for m in messages)
        name = "diagnose" if step == 2 else "probe"
        return {"tool_calls": [{"name": name, "arguments": plan[step]}]} if step < len(plan) else {"content": "."}

    with serve_scripted_chat(script) as (base, _):
        d, _, _ = investigate(base, tmp_path, failure)
    saved = json.loads(next((tmp_path / "inv").rglob("conversation.json")).read_text())
    results = [m["content"] for m in saved["messages"] if m["role"] == "tool"]
    assert "nan" in results[0] and "UTF-8" in results[1], results
    assert d.category == "unresolved"  # the agent's, or the procedure's where the endpoint chokes on the echo


def test_memory_shows_an_editor_past_outcomes_only_as_finely_as_the_selection_set_resolves(tmp_path):
    """A past revision's d_score is a selection-set figure: the history rounds it (0.5/sqrt(n)), memory did not (the
    exact difference of correct answers, and the gate's reason repeating the scores at full precision)."""
    from types import SimpleNamespace

    from videvolve.editing.tools import EditorTools, MemorySearchArgs
    from videvolve.memory.records import Diagnosis, RevisionOutcome
    from videvolve.nodes.sessions import editor_env

    past = Diagnosis(id="d1", run_id="r", iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
                     category="missed_event", hypothesis="short events", applies_when="a", preserve="p",
                     outcome=RevisionOutcome(decision="rejected", d_score=0.37, reason="0.4100 -> 0.7800 (n=100)"))
    memory = SimpleNamespace(search=lambda q, k, exclude_videos=None, exclude_fingerprints=None: [(past, 0.9)])
    gate = SimpleNamespace(cost_measure=CostMeasure())
    run = SimpleNamespace(memory=memory, excluded_videos=set(), excluded_fingerprints=set(),
                          selection=[object()] * 100,
                          harness_dir=lambda v: tmp_path, probe_vlm=None, cost=None, cache=None,
                          ctx=SimpleNamespace(runtime=SimpleNamespace(image_format="png"), gate=gate))
    env = editor_env(run, "h", [])  # type: ignore[arg-type]
    seen = env.memory_search("short", 5)[0].diagnosis.outcome
    assert seen is not None and seen.d_score == 0.35 and seen.reason == ""
    tools = SimpleNamespace(env=env)
    assert '"d_score": 0.35' in EditorTools.memory_search(tools, MemorySearchArgs(query="short"))  # type: ignore[arg-type]
