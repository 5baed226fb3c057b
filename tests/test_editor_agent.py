"""The editor as an agent: the workspace, the tools (exact edits, trials, probes that never contain the answer), the
agent driver against a real HTTP server serving a scripted tool-calling model, and its failures."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.test_loop_graph import context, run_graph
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.editing.agent import AgentEditor
from videvolve.editing.base import EditorInput, GateTerms, read_files
from videvolve.editing.heuristic import passes_on_trial
from videvolve.editing.probe import leaks_gold
from videvolve.editing.tools import EditorEnv, EditorTools
from videvolve.editing.workspace import EditorLimits, TraceItem, build_workspace
from videvolve.errors import InfraError, UsageError
from videvolve.evaluation.solve import solve_tasks
from videvolve.loop.services import open_run
from videvolve.models.base import Reply, ToolCall
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness
from videvolve.skill_library.steps import TraceStep
from videvolve.skill_library.trace import read_steps
from videvolve.testing import OneWorkspace, serve_scripted_chat
from videvolve.usage import CostMeasure

OLD = 'frames = ctx.frames(times, max_side=ctx.config.get("max_side"))'
NEW = "frames = ctx.frames(times)  # full resolution"


def workspace(world, tmp_path: Path, seed: Path, n: int = 2, limits: EditorLimits | None = None) -> EditorTools:
    """A workspace over ``n`` training tasks with the seed's real results, and its tools."""
    train = [t.with_duration() for t in world.tasks if t.split == "train"][:n]
    vlm, cost = SimVLM(), cost_model("qwen2.5-vl")
    settings = RuntimeSettings(concurrency=2)

    def evaluate(harness, tasks):
        return solve_tasks(harness, tasks, vlm, cost, settings, tmp_path / "evals" / harness.version_id)

    parent = load_harness(seed)
    results = {r.task_id: r for r in evaluate(parent, train)}

    def trace_of(version: str, task_id: str) -> list[TraceStep]:
        return read_steps(tmp_path / "evals" / version / "traces" / f"{task_id}.jsonl")

    env = EditorEnv(parent=parent.version_id, parent_dir=seed, tasks={t.id: t for t in train},
                    parent_results=results, evaluate=evaluate, trace_of=trace_of, probe_vlm=vlm, cost=cost)
    inp = EditorInput(incumbent=parent.version_id, files=read_files(seed), diagnoses=[], gate_rule="RULE-TEXT")
    limits = limits or EditorLimits(images=4)
    items = [TraceItem(t, results[t.id], trace_of(parent.version_id, t.id)) for t in train]
    root = build_workspace(tmp_path / "ws", seed, inp, items, limits, "TOOLS-DOC")
    return EditorTools(root, env, limits, inp)


def test_workspace_holds_the_batch_and_edits_are_exact(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed)
    root = tools.root
    task_md = (root / "TASK.md").read_text()
    assert "RULE-TEXT" in task_md and "TOOLS-DOC" in task_md and "ctx.frames" not in task_md.split("SDK")[0]
    assert "`frames(times: list[float], max_side: int | None = None) -> list[Observation]`" in task_md  # sdk.py
    first = next(iter(tools.env.tasks))
    info = json.loads((root / "traces" / first / "task.json").read_text())
    assert info["question"] and info["gold"] and info["score"] is not None
    assert list((root / "traces" / first / "images").glob("step*_frame_*s.png"))
    text, ok = tools.call("edit_file", {"path": "candidate/solver.py", "old": "ctx", "new": "x"})
    assert not ok and "occurs" in text and "exactly once" in text
    text, ok = tools.call("edit_file", {"path": "candidate/solver.py", "old": "no such text", "new": "x"})
    assert not ok and "0 times" in text
    assert not tools.call("write_file", {"path": "candidate/evil.sh", "content": "x"})[1]
    assert not tools.call("write_file", {"path": "TASK.md", "content": "x"})[1]
    assert "leaves the workspace" in tools.call("read_file", {"path": "../x"})[0]
    assert "bad arguments" in tools.call("edit_file", {"path": "candidate/solver.py"})[0]
    assert "unknown tool" in tools.call("rm", {})[0]
    assert tools.call("edit_file", {"path": "candidate/solver.py", "old": OLD, "new": NEW})[1]
    assert (seed / "solver.py").read_text().count(OLD) == 1  # the parent is untouched
    report = json.loads(tools.call("trial", {"tasks": [first]})[0])
    assert report["tasks"] == 1 and report["per_task"][0]["task"] == first
    assert report["mean_difference_vs_parent"] is not None and report["mean_visual_tokens"] > 0
    assert report["cost_metric"] == "visual_tokens"
    assert report["mean_cost"] == pytest.approx(report["mean_visual_tokens"])
    assert tools.ledger.trial_tasks == 1 and tools.ledger.model_calls >= 1
    assert "not a training task" in tools.call("trial", {"tasks": ["selection-task"]})[0]
    tools.call("submit", {"rationale": "full resolution"})
    assert tools.submitted is not None and set(tools.submitted.edits) == {"solver.py"}
    assert NEW in tools.submitted.edits["solver.py"]  # type: ignore[operator]


def test_trials_cost_what_the_gate_counts_text_included(small_world, tmp_path, seed):
    """Under ``visual_tokens+text`` a trial's cost includes the transcript read, and the heuristic's check uses it."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    first = next(iter(tools.env.tasks))
    base = tools.env.parent_results[first]
    reading = base.model_copy(update={"usage": base.usage.model_copy(update={"transcript_tokens": 1000})})
    tools.env.cost_measure = CostMeasure(metric="visual_tokens+text", text_weight=0.5)
    visual = _visual_tokens(base)
    assert tools._cost(reading) == pytest.approx(visual + 500)
    tools.env.cost_measure = CostMeasure()
    assert tools._cost(reading) == pytest.approx(visual)
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    gain = {"mean_difference_vs_parent": 0.2, "parent_mean_visual_tokens": 100.0, "mean_visual_tokens": 100.0}
    assert passes_on_trial({**gain, "parent_mean_cost": 100.0, "mean_cost": 105.0}, gate)
    assert not passes_on_trial({**gain, "parent_mean_cost": 100.0, "mean_cost": 150.0}, gate)  # text read counts


def _visual_tokens(r) -> int:
    return r.usage.image_tokens + r.usage.video_tokens + r.usage.ocr_tokens


def test_probe_refuses_a_question_with_the_gold_answer_and_passes_another(small_world, tmp_path, seed):
    mcq = next(t for t in small_world.tasks if t.kind == "mcq")
    gold = mcq.options[ord(mcq.answer) - 65]
    assert leaks_gold(mcq, f"Is there a {gold.upper()} here?")
    assert leaks_gold(mcq, "What is on screen?") is None
    grounding = next(t for t in small_world.tasks if t.kind == "grounding" and t.answer)
    start = grounding.answer[0].start
    assert "gold time" in (leaks_gold(grounding, f"what happens at {start:g} s?") or "")
    assert leaks_gold(grounding, "when does it first appear?") is None
    tools = workspace(small_world, tmp_path, seed, limits=EditorLimits(images=0, probes=1))
    task = tools.env.tasks[next(iter(tools.env.tasks))]
    if task.kind == "mcq":
        bad = task.options[ord(task.answer) - 65]  # type: ignore[index, arg-type]
    else:
        bad = f"{task.answer[0].start:g}" if task.answer else None  # type: ignore[union-attr]
    if bad:
        text, ok = tools.call("probe", {"task_id": task.id, "times": [1.0], "question": f"is it {bad}?"})
        assert not ok and "refused" in text and tools.ledger.probes == 0
    text, ok = tools.call("probe", {"task_id": task.id, "times": [1.0, 5.0], "question": "what is shown?",
                                    "mode": "describe"})
    out = json.loads(text)
    assert ok and out["reply"] and len(out["images"]) == 2 and out["frames"] == 2
    assert (tools.root / out["images"][0]).is_file() and tools.ledger.probes == 1
    assert "probes are spent" in tools.call("probe", {"task_id": task.id, "times": [2.0], "question": "what?"})[0]


def spoken_task(tools: Any, tmp_path: Path, vtt: str) -> tuple[str, Any]:
    """The workspace's first task on a copy of its video with ``vtt`` beside it: (its id, the task as it was)."""
    task_id = next(iter(tools.env.tasks))
    task = tools.env.tasks[task_id]
    video = tmp_path / "said" / Path(task.video).name
    video.parent.mkdir()
    shutil.copy(task.video, video)
    video.with_suffix(".vtt").write_text(vtt, encoding="utf-8")
    tools.env.tasks[task_id] = task.model_copy(update={"video": str(video)})
    return task_id, task


def test_probe_reads_the_transcript_of_a_window(small_world, tmp_path, seed):
    """show=transcript returns what is said between two times, metered as text, with no model call."""
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0, probes=2))
    task_id, task = spoken_task(tools, tmp_path, "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nthe crane lifts a crate"
                                                 "\n\n00:00:08.000 --> 00:00:09.000\nlater words\n")
    text, ok = tools.call("probe", {"task_id": task_id, "times": [0.5, 3.0], "show": "transcript",
                                    "question": "what is said?"})
    out = json.loads(text)
    assert ok and "the crane lifts a crate" in out["reply"] and "later words" not in out["reply"]
    assert out["model_calls"] == 0 and out["frames"] == 0 and out["transcript_tokens"] > 0
    tools.env.tasks[task_id] = task  # the world's own video: no transcript beside it
    out = json.loads(tools.call("probe", {"task_id": task_id, "times": [0.5, 3.0], "show": "transcript",
                                          "question": "what is said?"})[0])
    assert "no transcript" in out["reply"]


class Scripted:
    """A VLM that returns scripted replies (tool calls included)."""

    name, revision = "scripted", "1"

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[list[dict[str, Any]]] = []

    def decoding(self) -> dict[str, Any]:
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        self.requests.append(list(messages))
        return self.replies.pop(0) if self.replies else Reply(text="done")


def call(name: str, **args: Any) -> Reply:
    return Reply(text="", tool_calls=[ToolCall(id=f"c-{name}", name=name, arguments=args)])


@pytest.mark.parametrize(("replies", "why"), [
    ([Reply(text="I think it is fine."), Reply(text="Really.")], "without calling a tool"),
    ([call("delete_everything")] * 3, "was refused"),
    ([call("edit_file", path="candidate/solver.py")] * 3, "bad arguments"),
    ([call("list_files")] * 5, "used its 4 rounds"),
])
def test_agent_failures_end_the_proposal_with_the_reason(small_world, tmp_path, seed, replies, why):
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    agent = AgentEditor(Scripted(list(replies)), rounds=4)
    assert agent.propose(tools.inp, OneWorkspace(tools)) is None
    assert why in (agent.last_failure or ""), agent.last_failure
    lines = [json.loads(x) for x in (tools.root / "transcript.jsonl").read_text().splitlines()]
    assert lines[-1]["kind"] == "failure" and why in lines[-1]["reason"]


class Down(Scripted):
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        raise InfraError("model endpoint http://127.0.0.1:1/v1 failed after 9 retries over 600 s")


def test_an_endpoint_down_for_good_stops_the_run_instead_of_ending_the_proposal(small_world, tmp_path, seed):
    """Infrastructure is never the editor's failure: the error reaches the driver, which stops for --resume."""
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    agent = AgentEditor(Down([]), rounds=4)
    with pytest.raises(InfraError, match="failed after 9 retries"):
        agent.propose(tools.inp, OneWorkspace(tools))


def test_agent_times_out(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0, timeout_s=0.0))
    agent = AgentEditor(Scripted([call("list_files")]), rounds=4)
    assert agent.propose(tools.inp, OneWorkspace(tools)) is None and "timed out" in (agent.last_failure or "")


def test_agent_editor_with_sim_and_no_endpoint_refuses_at_start(small_world, tmp_path, seed):
    with pytest.raises(UsageError, match=r"agent needs a model that .*SimVLM \(the sim backend\)"):
        open_run(context(small_world, tmp_path, seed, editor="agent"))


def editor_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Reads a trace, edits solver.py, runs a trial, probes a video, submits; then, if sent back, gives up."""
    calls = [m for m in messages if m["role"] == "assistant"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    step = len(calls)
    if step == 0:
        return {"tool_calls": [{"name": "list_files", "arguments": {"path": "traces"}}]}
    task = re.findall(r"traces/([^/\n]+)/task\.json", results[0])[0]
    script = [
        {"name": "read_file", "arguments": {"path": f"traces/{task}/task.json"}},
        {"name": "edit_file", "arguments": {"path": "candidate/solver.py", "old": OLD, "new": NEW}},
        {"name": "trial", "arguments": {"tasks": [task]}},
        {"name": "probe", "arguments": {"task_id": task, "times": [3.0, 9.0], "question": "what is shown?",
                                        "mode": "describe"}},
        {"name": "submit", "arguments": {"rationale": "small glyphs need full resolution",
                                         "applies_when": "misperception", "preserve": "the frame count"}},
    ]
    return {"tool_calls": [script[step - 1]]} if step <= len(script) else {"content": "I am done."}


@pytest.mark.slow
def test_agent_editor_over_http_edits_trials_probes_submits_and_is_gated(small_world, tmp_path, seed):
    from videvolve.report import build_report

    with serve_scripted_chat(editor_script) as (base, requests):
        editor = ModelSettings(backend="openai", base_url=base, model="scripted-editor", max_retries=0,
                               timeout_s=30)
        ctx = context(small_world, tmp_path, seed, iterations=1, editor="agent", editor_model=editor)
        state = run_graph(ctx)
    assert requests and requests[0]["tools"] and {t["function"]["name"] for t in requests[0]["tools"]} >= {
        "read_file", "edit_file", "trial", "probe", "submit"}
    entry = state["history"][0]
    assert entry["operator"] == "agent" and entry["cand_score"] is not None  # the gate judged it
    run = tmp_path / "run"
    parent, cand = run / "harnesses" / entry["parent"], run / "harnesses" / entry["candidate"]
    assert (cand / "solver.py").read_text() == (parent / "solver.py").read_text().replace(OLD, NEW)
    assert read_files(cand) == {**read_files(parent), "solver.py": (cand / "solver.py").read_text()}
    ws = run / "workspaces" / "1-0"
    train = {t.id for t in small_world.tasks if t.split == "train"}
    trial = json.loads((ws / "trials" / "01.json").read_text())
    assert {r["task"] for r in trial["per_task"]} <= train
    assert json.loads((ws / "submitted.json").read_text())["version"] == entry["candidate"]
    assert list((ws / "probes" / "01").glob("*.png"))
    (run / "settings.json").write_text(ctx.model_dump_json())  # as `evolve` writes it
    html = build_report(run).read_text()
    assert "edit_file" in html and "trial" in html and "small glyphs need full resolution" in html
    shutil.rmtree(run / "report")


@pytest.mark.slow
def test_an_agent_that_never_calls_a_tool_leaves_the_run_going(small_world, tmp_path, seed):
    with serve_scripted_chat(lambda messages: {"content": "No tools for me."}) as (base, _):
        editor = ModelSettings(backend="openai", base_url=base, model="scripted-editor", max_retries=0)
        state = run_graph(context(small_world, tmp_path, seed, iterations=2, editor="agent", editor_model=editor))
    assert state["iteration"] == 2 and all(h["decision"] == "none" for h in state["history"])
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    whys = [e["why"] for e in events if e["event"] == "no proposal"]
    assert len(whys) == 2 and all("without calling a tool" in w for w in whys)


BROKEN = 'frames = ctx.frames(times)[: int("boom")]  # fails at run time'


def repairing_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Submits a candidate that crashes at run time; told so by the submit's result, fixes it and submits again."""
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    failed = any("validation failed" in r for r in tool_results)
    after = len([m for m in messages if m["role"] == "assistant"]) - (
        next(i for i, m in enumerate([m for m in messages if m["role"] == "assistant"])
             if m["tool_calls"][0]["function"]["name"] == "submit") + 1 if failed else 0)
    if not failed:
        plan = [{"name": "edit_file", "arguments": {"path": "candidate/solver.py", "old": OLD, "new": BROKEN}},
                {"name": "submit", "arguments": {"rationale": "first try"}}]
        step = len([m for m in messages if m["role"] == "assistant"])
    else:
        plan = [{"name": "edit_file", "arguments": {"path": "candidate/solver.py", "old": BROKEN, "new": NEW}},
                {"name": "submit", "arguments": {"rationale": "fixed after the smoke run failed"}}]
        step = after
    return {"tool_calls": [plan[step]]} if step < len(plan) else {"content": "done"}


@pytest.mark.slow
def test_a_failed_smoke_run_goes_back_to_the_same_conversation(small_world, tmp_path, seed):
    with serve_scripted_chat(repairing_script) as (base, requests):
        editor = ModelSettings(backend="openai", base_url=base, model="scripted-editor", max_retries=0)
        state = run_graph(context(small_world, tmp_path, seed, iterations=1, editor="agent", editor_model=editor,
                                  repair_rounds=1))
    entry = state["history"][0]
    assert entry["cand_score"] is not None and entry["operator"] == "agent"
    cand = tmp_path / "run" / "harnesses" / entry["candidate"] / "solver.py"
    assert NEW in cand.read_text() and BROKEN not in cand.read_text()
    last = requests[-1]["messages"]
    assert last[0]["role"] == "system" and sum(m["role"] == "system" for m in last) == 1  # one conversation
    sent_back = [m for m in last if m["role"] == "tool" and "validation failed" in m["content"]]
    assert sent_back and "boom" in sent_back[0]["content"]  # the smoke run's error
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["node"] == "validate"] == ["sent back", "passed"]


def test_an_unreadable_tool_call_gets_its_parse_error_back_as_in_every_tool_loop(small_world, tmp_path, seed):
    """One loop for every model-driven part: the editor answers a call it cannot read as the investigator does."""
    tools = workspace(small_world, tmp_path, seed, n=1, limits=EditorLimits(images=0))
    bad = Reply(text="", invalid_tool_calls=[{"name": "read_file", "args": "{path: TASK", "error": "not JSON"}])
    vlm = Scripted([bad, bad, bad])
    agent = AgentEditor(vlm, rounds=8)
    assert agent.propose(tools.inp, OneWorkspace(tools)) is None
    answer = vlm.requests[1][-1]
    assert answer["role"] == "user" and "could not be read (read_file: not JSON)" in answer["content"]
    assert "every tool call of the editor model's last 3 rounds was refused" in (agent.last_failure or "")
    assert len(vlm.requests) == 3 and tools.ledger.rounds == 3
