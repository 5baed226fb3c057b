"""The investigator as an agent, against a real HTTP server on 127.0.0.1 serving a scripted tool-calling model: it
probes a training video with the editor's probe (refused when the question holds the gold answer) and returns a
validated diagnosis; every unusable reply falls back to the decision tree, with the reason recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.steps_support import model_call
from tests.test_loop_graph import context
from videvolve.config import ModelSettings
from videvolve.errors import UsageError
from videvolve.evaluation.results import TaskResult
from videvolve.investigator import Investigator
from videvolve.investigator.agent import AgentInvestigator
from videvolve.loop.services import open_run
from videvolve.memory.embedders import HashingEmbedder
from videvolve.memory.store import InMemoryStore
from videvolve.models.cache import MeteredVLM, ResponseCache
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim import SimVLM
from videvolve.skill_library.steps import ModelCall
from videvolve.tasks import Prediction, Task
from videvolve.testing import serve_scripted_chat


@pytest.fixture(scope="module")
def failure(small_world) -> tuple[Task, TaskResult, list[ModelCall]]:
    """A grounding task answered 'absent' by a trace that looked only far from the event."""
    task = next(t.with_duration() for t in small_world.tasks if t.kind == "grounding" and t.intervals
                and t.split == "train")
    result = TaskResult(task_id=task.id, harness_id="h", kind="grounding", outcome="ok", score=0.0,
                        prediction=Prediction(task_id=task.id, kind="grounding", answer=[]), usage={"frames": 2})
    far = [t for t in (task.intervals[0].start - 40, task.intervals[0].end + 40) if 0 < t < (task.duration or 0)]
    trace = [model_call(far or [0.5], max_side=160)]
    return task, result, trace


def investigate(base: str, tmp_path: Path, failure, rounds: int = 4, cache: ResponseCache | None = None):
    """The agent investigator over the scripted endpoint; (its diagnosis, the procedure's, the agent)."""
    task, result, trace = failure
    settings = ModelSettings(backend="openai", base_url=base, model="scripted-investigator", max_retries=0,
                             timeout_s=30)
    procedure = Investigator(SimVLM(), cost_model("qwen2.5-vl"), probe_frames=8, cache=cache)
    agent = AgentInvestigator(MeteredVLM(openai_vlm(settings), cache), procedure, tmp_path / "inv", rounds=rounds)
    d = agent.diagnose(task, result, trace, "run", 0)
    plain = Investigator(SimVLM(), cost_model("qwen2.5-vl"), probe_frames=8).diagnose(task, result, trace, "run", 0)
    return d, plain, agent


def test_the_agent_probes_twice_and_its_diagnosis_is_stored(failure, tmp_path):
    task, _, _ = failure
    gold = task.intervals[0]
    inside = [round(gold.start + (gold.end - gold.start) * k / 4, 2) for k in (1, 2, 3)]
    plan = [
        {"name": "probe", "arguments": {"task_id": task.id, "times": inside, "question": f"is it at {gold.start:g}?"}},
        {"name": "probe", "arguments": {"task_id": task.id, "times": inside, "question": task.question,
                                        "mode": "match"}},
        {"name": "probe", "arguments": {"task_id": task.id, "times": inside[:2], "show": "sheet",
                                        "question": "what is shown?", "mode": "describe"}},
        {"name": "diagnose", "arguments": {
            "category": "missed_event", "evidence": [{"time": inside[1], "seen": "the target"}],
            "hypothesis": "a short event fell between frames sampled 40 s apart",
            "applies_when": "grounding of short events", "preserve": "the frame count"}},
    ]

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        step = sum(m["role"] == "assistant" for m in messages)
        return {"tool_calls": [plan[step]]} if step < len(plan) else {"content": "done"}

    with serve_scripted_chat(script) as (base, requests):
        d, _, agent = investigate(base, tmp_path, failure)
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"probe", "diagnose"}
    brief = requests[0]["messages"][1]["content"]
    assert task.question in brief and f"{gold.start:.2f}" in brief  # the agent knows the gold, as the procedure
    results = [m["content"] for m in requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("refused: the question contains a gold time")  # its probes are still checked
    assert d.investigator == "agent" and d.fallback is None and d.category == "missed_event"
    assert d.hypothesis.startswith("a short event") and [e.time for e in d.evidence] == [inside[1]]
    assert d.probe_cost["model_calls"] == 2 and d.probe_cost["frames"] == 5  # two probes ran, the refused one not
    assert d.probe_cost["agent_calls"] == 4
    assert agent.model.ledger["calls"] == 4 and len(requests) == 4
    folder = tmp_path / "inv" / "1" / task.id
    assert len(list((folder / "probes" / "01").glob("frame_*.png"))) == 3 and (folder / "probes" / "02").is_dir()
    assert json.loads((folder / "conversation.json").read_text())["failure"] is None
    memory = InMemoryStore(HashingEmbedder())
    memory.put([d])
    assert memory.get(d.id) == d


def _diagnose(category: str, time: float) -> dict[str, Any]:
    return {"name": "diagnose", "arguments": {"category": category, "evidence": [{"time": time, "seen": "x"}],
                                              "hypothesis": "h", "applies_when": "a", "preserve": "p"}}


def _probe_then(task_id: str, after: dict[str, Any]) -> Any:
    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        first = not any(m["role"] == "assistant" for m in messages)
        probe = {"name": "probe", "arguments": {"task_id": task_id, "times": [2.0], "question": "what is shown?",
                                                "mode": "describe"}}
        return {"tool_calls": [probe if first else after]}
    return script


@pytest.mark.parametrize(("case", "why"), [
    ("unknown category", "invalid diagnosis: category"),
    ("time never probed", "were never probed"),
    ("no tool", "without calling a tool"),
    ("past the round limit", "used its 3 rounds without diagnosing"),
    ("unknown tool", "unknown tool 'look'"),
    ("unreadable call", "could not be read"),
])
def test_an_unusable_reply_falls_back_to_the_decision_tree(failure, tmp_path, case, why):
    task = failure[0]
    scripts = {
        "unknown category": _probe_then(task.id, _diagnose("blurry", 2.0)),
        "time never probed": _probe_then(task.id, _diagnose("missed_event", 9.5)),
        "no tool": lambda m: {"content": "It is a missed event."},
        "past the round limit": _probe_then(task.id, {"name": "probe", "arguments": {
            "task_id": task.id, "times": [4.0], "question": "anything?", "mode": "describe"}}),
        "unknown tool": lambda m: {"tool_calls": [{"name": "look", "arguments": {}}]},
        "unreadable call": lambda m: {"tool_calls": [{"name": "probe", "arguments": "{times: [1"}]},
    }
    with serve_scripted_chat(scripts[case]) as (base, _):
        d, plain, _ = investigate(base, tmp_path, failure, rounds=3)
    assert d.investigator == "procedure" and why in (d.fallback or ""), d.fallback
    assert (d.category, d.hypothesis, d.evidence) == (plain.category, plain.hypothesis, plain.evidence)
    folder = tmp_path / "inv" / "1" / task.id
    assert why in json.loads((folder / "conversation.json").read_text())["failure"]


def test_a_resumed_investigation_is_not_paid_twice(failure, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with serve_scripted_chat(_probe_then(failure[0].id, _diagnose("missed_event", 2.0))) as (base, requests):
        first, _, paid = investigate(base, tmp_path, failure, cache=cache)
        again, _, resumed = investigate(base, tmp_path, failure, cache=cache)
    same = {"created_at", "probe_cost"}
    assert first.investigator == "agent" and again.model_dump(exclude=same) == first.model_dump(exclude=same)
    assert first.probe_cost["model_calls"] == 1 and again.probe_cost["model_calls"] == 0  # the probe's too
    assert len(requests) == paid.model.ledger["calls"] == 2 and paid.model.ledger["cache_hits"] == 0
    assert resumed.model.ledger["calls"] == resumed.model.ledger["cache_hits"] == 2  # the cache served both


def test_agent_investigator_with_sim_and_no_endpoint_refuses_at_start(small_world, tmp_path, seed):
    with pytest.raises(UsageError, match=r"agent needs a model that .*SimVLM \(the sim backend\)"):
        open_run(context(small_world, tmp_path, seed, investigator="agent"))


def investigator_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Probes the task it is given where the harness looked first, then diagnoses evidence_unused there."""
    brief = messages[1]["content"]
    task_id = re.findall(r"with task_id '([^']+)'", brief)[0]
    seen = re.findall(r"as frame at \S+ px: ([\d.]+)", brief)
    t = float(seen[0]) if seen else 1.0
    if not any(m["role"] == "assistant" for m in messages):
        return {"tool_calls": [{"name": "probe", "arguments": {"task_id": task_id, "times": [t],
                                                               "question": "what is shown?", "mode": "describe"}}]}
    return {"tool_calls": [_diagnose("evidence_unused", t)]}


@pytest.mark.slow
@pytest.mark.parametrize("usable", [True, False])
def test_evolve_with_the_agent_investigator(small_world, tmp_path, seed, caplog, capsys, usable):
    from videvolve.cli import main
    from videvolve.report import build_report

    run = tmp_path / "run"
    script = investigator_script if usable else (lambda m: {"content": "No tools for me."})
    with serve_scripted_chat(script) as (base, requests):
        code = main(["evolve", "--run", str(run), "--tasks", str(small_world.tasks_path), "--seed-harness", str(seed),
                     "--iterations", "1", "--batch", "3", "--investigator", "agent", "--investigator-agent-base-url",
                     base, "--investigator-agent-model", "scripted-investigator", "--memory", str(tmp_path / "mem"),
                     "--cache", str(tmp_path / "cache.sqlite"), "--embedder", "hashing"])
    assert code == 0 and requests
    assert f"(investigator {len(requests)} call(s), 0 from the cache)" in capsys.readouterr().out  # metered
    train = {t.id for t in small_world.tasks if t.split == "train"}
    assert {re.findall(r"with task_id '([^']+)'", r["messages"][1]["content"])[0] for r in requests} <= train
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    summary = next(e for e in events if e["event"] == "diagnoses")
    n = sum(summary["categories"].values())
    records = list({r["id"]: r for x in (tmp_path / "mem" / "diagnoses.jsonl").read_text().splitlines()
                    if (r := json.loads(x))}.values())
    assert n == len(records) > 0
    assert json.loads((run / "settings.json").read_text())["investigator"]["agent_model"]["base_url"] == base
    html = build_report(run).read_text()
    if usable:
        assert summary["investigators"] == {"agent": n, "procedure": 0}
        assert all(r["investigator"] == "agent" and r["category"] == "evidence_unused" for r in records)
        assert html.count("<td>agent</td>") == n  # the report says who wrote each diagnosis
        return
    assert summary["investigators"] == {"agent": 0, "procedure": n}
    fallbacks = [e for e in events if e["event"] == "fallback"]
    assert len(fallbacks) == n and all("without calling a tool" in e["reason"] for e in fallbacks)
    assert all(r["investigator"] == "procedure" and "without calling a tool" in r["fallback"] for r in records)
    assert "the agent's reply was unusable" in html and "without calling a tool" in caplog.text
