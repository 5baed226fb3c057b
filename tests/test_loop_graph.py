"""The loop as a graph (in-memory checkpointer): isolation of the editor, the LLM editor's repair path."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.conftest import run_context
from videvolve.editing import HeuristicEditor, LLMEditor
from videvolve.editing.base import Editor, EditorInput, Proposal, Workspaces
from videvolve.graph import Context, build_graph
from videvolve.graph.builder import NodeHook
from videvolve.loop.services import open_run
from videvolve.skill_library.harness import content_hash
from videvolve.testing import ScriptedEditor, ScriptedReplies

context = run_context


def run_graph(ctx: Context, editor: Editor | None = None, around: NodeHook | None = None) -> dict[str, Any]:
    """The loop in memory, over services built here (with ``editor`` injected, if given) and closed here."""
    graph = build_graph(around).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": ctx.run_id}, "recursion_limit": 500}
    with open_run(ctx, editor=editor) as run:
        graph.invoke({}, config, context=run)
        return graph.get_state(config).values


class Recording:
    """The heuristic editor, recording every input it is given."""

    def __init__(self, ctx: Context) -> None:
        self.inner = HeuristicEditor(trials=not ctx.editor.no_trials, operators=ctx.editor.trial_operators,
                                     tasks=ctx.editor.trial_batch)
        self.seen: list[str] = []
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        self.seen.append(inp.model_dump_json())
        proposal = self.inner.propose(inp, workspaces)
        self.last_failure = self.inner.last_failure
        return proposal


@pytest.mark.slow
def test_editor_never_sees_selection_and_never_opens_its_results(small_world, tmp_path, seed):
    ctx = context(small_world, tmp_path, seed, iterations=2)
    editor = Recording(ctx)
    opened: list[str] = []
    active = [False]

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and isinstance(args[0], str | bytes | Path):
            opened.append(str(args[0]))

    sys.addaudithook(hook)

    def watched(name: str, node: Callable[..., Any]) -> Callable[..., Any]:
        def edit(state, runtime):
            active[0] = True
            try:
                return node(state, runtime)
            finally:
                active[0] = False

        return edit if name == "edit" else node

    state = run_graph(ctx, editor, around=watched)
    assert state["iteration"] == 2 and len(editor.seen) >= 2, (state.get("stop_reason"), len(editor.seen))
    selection = [t for t in small_world.tasks if t.split == "selection"]
    blob = "\n".join(editor.seen)
    for t in selection:
        for needle in (t.id, t.video, f'"{t.video_id}"', t.question):
            assert needle not in blob, (needle, blob[max(0, blob.find(needle) - 300): blob.find(needle) + 100])
    assert opened, "the audit hook saw the edit node work"
    assert not [p for p in opened if "/selection" in p], [p for p in opened if "/selection" in p]
    workspaces = tmp_path / "run" / "workspaces"  # every file the editor and its tools wrote or returned
    texts = [p.read_text(errors="replace") for p in workspaces.rglob("*") if p.is_file() and p.suffix != ".png"]
    assert any("trial" in t for t in texts) and (workspaces / "1-0" / "TASK.md").is_file()
    blob = "\n".join(texts)
    for t in selection:  # question templates repeat across splits: a question counts with its options
        for needle in (t.id, t.video, f'"{t.video_id}"'):
            assert needle not in blob, needle
    train = {t.id for t in small_world.tasks if t.split == "train"}
    shown = [json.loads(p.read_text()) for p in workspaces.glob("*/traces/*/task.json")]
    assert shown and {s["task_id"] for s in shown} <= train
    assert not {(s["question"], tuple(s["options"] or ())) for s in shown} & {
        (t.question, tuple(t.options or ())) for t in selection}
    lineage = [json.loads(x) for x in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
    assert lineage[0]["decision"] == "seed" and (tmp_path / "run" / "best" / "solver.py").exists()


GOOD_SOLVER = '''from videvolve_sdk import HarnessContext, TaskView


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    n = int(ctx.config.get("n_frames", 16))
    times = [task.duration * (i + 0.5) / n for i in range(n)]
    frames = ctx.frames(times)  # full resolution: small glyphs become readable
    reply = ctx.ask(frames)
    return {"answer": reply, "raw": reply, "evidence_times": times}
'''


def revision(solver: str, why: str) -> str:
    return json.dumps({"rationale": why, "applies_when": "small glyphs", "preserve": "frame count",
                       "edits": [{"path": "solver.py", "content": solver}]})


@pytest.mark.slow
def test_llm_editor_revision_is_validated_gated_recorded_and_a_broken_one_dropped(small_world, tmp_path, seed):
    model = ScriptedReplies([
        revision(GOOD_SOLVER, "read frames at full resolution"),
        revision("def solve(task, ctx:\n    return 'A'\n", "broken on purpose"),
        revision("def solve(task, ctx:\n    return 'B'\n", "still broken"),
    ])
    ctx = context(small_world, tmp_path, seed, iterations=2, editor="llm", repair_rounds=1)
    hashes_before: dict[str, str] = {}
    state = run_graph(ctx, LLMEditor(model))
    history = state["history"]
    assert history[0]["operator"] == "llm" and history[0]["decision"] in ("accepted", "rejected")
    assert history[0]["cand_score"] is not None  # it went through the gate
    assert history[1]["decision"] == "dropped" and "syntax error" in history[1]["reason"]
    assert len(model.requests) == 3  # the broken one was sent back once with its error
    feedback = model.requests[2][-1]["content"]
    assert "rejected by validation" in feedback and "syntax error" in feedback
    lineage = {json.loads(x)["version"]: json.loads(x)
               for x in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()}
    good = history[0]["candidate"]
    assert lineage[good]["operator"] == "llm"
    manifest = json.loads((tmp_path / "run" / "harnesses" / good / "manifest.json").read_text())
    assert "full resolution" in manifest["revision"]["diff"]
    for version_dir in (tmp_path / "run" / "harnesses").iterdir():  # every version is still what its id says
        hashes_before[version_dir.name] = content_hash(version_dir)
        assert hashes_before[version_dir.name] == version_dir.name


def test_a_repair_round_in_mcts_keeps_the_earlier_refusal(small_world, tmp_path, seed):
    """edit refuses one revision, validation sends the other back, the repair round's edit must not erase the first."""
    from videvolve.editing import Proposal

    broken = "def solve(task, ctx:\n    return 'A'\n"
    editor = ScriptedEditor([
        Proposal(operator="escape", rationale="r", edits={"../evil.py": "x"}),     # refused by the edit node
        Proposal(operator="broken", rationale="r", edits={"solver.py": broken}),    # sent back by validation
        Proposal(operator="broken2", rationale="r", edits={"solver.py": broken + "# 2\n"}),
        Proposal(operator="broken3", rationale="r", edits={"solver.py": broken + "# 3\n"}),
    ])
    state = run_graph(context(small_world, tmp_path, seed, iterations=1, search="mcts", children=2,
                             repair_rounds=1), editor)
    first = [h for h in state["history"] if h["iteration"] == 0]
    assert [(h["operator"], h["decision"]) for h in first] == [("escape", "dropped"), ("broken2", "dropped"),
                                                               ("broken3", "dropped")]
    assert "leaves the harness" in first[0]["reason"] and first[0]["candidate"] is None
    assert all("syntax error" in h["reason"] for h in first[1:])
    lineage = [json.loads(x) for x in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
    assert {v["operator"] for v in lineage if v["decision"] == "dropped"} == {"broken2", "broken3"}


def test_the_driver_hands_its_services_to_every_node_and_closes_only_those_it_built(small_world, tmp_path, seed):
    """No service locator: the nodes use the services the driver was given (here with a fake editor)."""
    from videvolve.graph.driver import evolve
    from videvolve.loop import services

    ctx = context(small_world, tmp_path, seed, iterations=1)
    editor = ScriptedEditor([Proposal(operator="scripted", rationale="r", edits={"SKILL.md": "# scripted\n"})])
    with open_run(ctx) as run:
        run.editor = editor
        final = evolve(ctx, services=run)
        assert editor.proposals == [] and final["history"][0]["operator"] == "scripted"
        assert run.cache is not None and run.cache.get("no such key") is None  # not closed: the test built it
    with pytest.raises(sqlite3.ProgrammingError):  # closed by the with block, as the driver closes what it built
        run.cache.get("no such key")
    assert not [v for v in vars(services).values() if isinstance(v, dict) and any(
        isinstance(x, services.Run) for x in v.values())]  # no module-level registry of runs


def test_an_operator_of_its_own_is_proposed_gated_and_recorded(small_world, tmp_path, seed):
    """A new move, tried without editing the catalogue: the heuristic editor takes it as ``catalogue=``."""
    from typing import get_args

    from videvolve.editing.operators import CATALOGUE, Operator
    from videvolve.memory.records import Category

    def note(files: dict[str, str], cfg: dict[str, Any]) -> dict[str, str] | None:
        skill = files.get("SKILL.md", "")
        return None if "Look twice." in skill else {"SKILL.md": skill + "\nLook twice.\n"}

    look_twice = Operator("look_twice", "ask for a second look in the policy", dict.fromkeys(get_args(Category), 5.0),
                          note)  # called for by every diagnosis: the first choice without trials
    ctx = context(small_world, tmp_path, seed, iterations=1, no_trials=True)
    state = run_graph(ctx, HeuristicEditor(catalogue=(look_twice, *CATALOGUE)))
    entry = state["history"][0]
    assert entry["operator"] == "look_twice" and entry["decision"] in ("accepted", "rejected")
    lineage = {json.loads(x)["version"]: json.loads(x)
               for x in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()}
    assert lineage[entry["candidate"]]["operator"] == "look_twice"


def test_a_run_takes_its_model_and_memory_as_arguments(small_world, tmp_path, seed):
    """Services swapped without patching a module: the solver's model (also the probes') and the memory of diagnoses
    are given to ``open_run``; the memory folder of the settings is never opened."""
    from videvolve.memory import HashingEmbedder, InMemoryStore
    from videvolve.testing import CountingVLM

    ctx = context(small_world, tmp_path, seed, iterations=1, no_trials=True, no_cache=True)
    memory, vlm = InMemoryStore(HashingEmbedder()), CountingVLM()
    CountingVLM.calls = 0
    graph = build_graph().compile(checkpointer=InMemorySaver())
    with open_run(ctx, vlm=vlm, memory=memory) as run:
        assert run.vlm is vlm and run.probe_vlm is vlm and run.memory is memory
        state = graph.invoke({}, {"configurable": {"thread_id": ctx.run_id}}, context=run)
    assert CountingVLM.calls > 0 and state["diagnoses"]
    assert {d.id for d in memory.records()} >= set(state["diagnoses"])
    assert not (tmp_path / "memory").exists()


@pytest.mark.slow
def test_resume_refuses_a_tasks_file_whose_train_or_selection_tasks_changed(small_world, tmp_path, seed):
    """An overnight run resumed after its tasks file was edited would judge new selection questions against results
    and decisions made on the old ones: refused, with the file named, and nothing of the run changed."""
    from videvolve.errors import UsageError
    from videvolve.graph.driver import evolve

    tasks = tmp_path / "tasks.jsonl"
    original = small_world.tasks_path.read_text()
    tasks.write_text(original)
    ctx = context(small_world, tmp_path, seed, iterations=1, tasks=str(tasks))

    def run(c: Context) -> dict[str, Any]:
        with open_run(c) as services:
            services.editor = ScriptedEditor([Proposal(operator="scripted", rationale="r",
                                                       edits={"SKILL.md": "# scripted\n"})])
            return evolve(c, services=services)

    assert run(ctx)["iteration"] == 1
    rows = [json.loads(line) for line in original.splitlines()]
    changed = next(r for r in rows if r["split"] == "selection")
    changed["question"] += " (edited)"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = (tmp_path / "run" / "settings.json").read_text()
    longer = ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 2})})
    with pytest.raises(UsageError, match=r"tasks\.jsonl changed since the run"):
        run(longer)
    assert (tmp_path / "run" / "settings.json").read_text() == settings  # the refused resume wrote nothing
    tasks.write_text(original)  # put back as it was: the run goes on
    assert run(longer)["iteration"] == 2


@pytest.mark.slow
def test_resuming_a_run_its_budget_stopped_spends_nothing_more(small_world, tmp_path, seed):
    """A run stopped by --max-calls (or --hours, or a STOP file) and resumed without more budget is finished: it
    reports its stop and runs no further iteration past the budget it was given."""
    from videvolve.graph.driver import evolve

    ctx = context(small_world, tmp_path, seed, stop={"iterations": 3, "max_calls": 1})

    def run(c: Context) -> dict[str, Any]:
        with open_run(c) as services:
            services.editor = ScriptedEditor([Proposal(operator="scripted", rationale="r",
                                                       edits={"SKILL.md": "# scripted\n"})] * 3)
            return evolve(c, services=services)

    first = run(ctx)
    assert first["iteration"] == 1 and first["stop_reason"] == "--max-calls 1"
    events = (tmp_path / "run" / "events.jsonl").read_text()
    again = run(ctx)
    assert again["iteration"] == 1 and again["stop_reason"] == "--max-calls 1"
    assert (tmp_path / "run" / "events.jsonl").read_text() == events  # nothing ran
    more = ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"max_calls": None})})
    assert run(more)["iteration"] == 3  # a budget grown on --resume is used



@pytest.mark.slow
def test_hours_count_the_time_a_run_spent_running_not_the_time_it_sat_stopped(small_world, tmp_path, seed,
                                                                              monkeypatch):
    """--hours counted from the run's first step: a run stopped for ten days and resumed with --hours 1 stopped
    after one more iteration ("1.0 hours"), or at once on a finished one, having run for minutes."""
    import importlib
    import types

    from videvolve.graph.driver import evolve

    prepare, record = (importlib.import_module(f"videvolve.nodes.{name}") for name in ("prepare", "record"))
    ten_days = 10 * 24 * 3600
    ctx = context(small_world, tmp_path, seed, stop={"iterations": 1, "hours": 1.0})

    def run(c: Context, opened_at: float | None = None) -> dict[str, Any]:
        with open_run(c) as services:
            if opened_at is not None:
                services.opened_at = opened_at
            services.editor = ScriptedEditor([Proposal(operator="scripted", rationale="r",
                                                       edits={"SKILL.md": "# scripted\n"})] * 3)
            return evolve(c, services=services)

    real = time.time()
    then = types.SimpleNamespace(time=lambda: time.time() - ten_days)  # the first iteration ran ten days ago
    with monkeypatch.context() as patch:
        patch.setattr(prepare, "time", then)
        patch.setattr(record, "time", then)
        first = run(ctx, opened_at=real - ten_days)
    assert first["iteration"] == 1 and first["stop_reason"] == "1 iterations"
    assert first["running_s"] < 600
    more = ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 3})})
    again = run(more)
    assert again["iteration"] == 3 and again["stop_reason"] == "3 iterations"
    assert first["running_s"] < again["running_s"] < 1200
    spent = ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 9, "hours": 1e-6})})
    assert run(spent)["stop_reason"] == "1e-06 hours"  # a run that has used its hours is finished on resume


def finished_run(small_world, tmp_path, seed) -> Context:
    """A run of no iteration (the seed's baseline only), finished on disk."""
    from videvolve.graph.driver import evolve

    ctx = context(small_world, tmp_path, seed, stop={"iterations": 0})
    with open_run(ctx) as services:
        evolve(ctx, services=services)
    return ctx


def test_a_corrupt_checkpoints_file_is_named_with_what_to_do(small_world, tmp_path, seed):
    """A checkpoints.sqlite that is not a database any more was 'a bug in videvolve' with sqlite's traceback."""
    from videvolve.errors import UsageError
    from videvolve.graph.driver import evolve

    ctx = finished_run(small_world, tmp_path, seed)
    checkpoints = tmp_path / "run" / "checkpoints.sqlite"
    with checkpoints.open("r+b") as fh:
        fh.write(b"garbage" * 20)  # its header overwritten
    with open_run(ctx) as services, pytest.raises(UsageError, match=r"checkpoints\.sqlite.*new --run"):
        evolve(ctx, services=services)


@pytest.mark.slow
def test_a_full_disk_under_the_checkpoints_stops_the_run_for_resume(small_world, tmp_path, seed):
    """The checkpointer that cannot write (a full disk) stops the run as every other write of the run does: a
    HostError naming the file (`run stopped: ...`, exit 3, resume later), not a traceback."""
    import resource
    import signal

    from videvolve.errors import HostError
    from videvolve.graph.driver import evolve

    ctx = finished_run(small_world, tmp_path, seed)
    grown = ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 1})})
    with open_run(grown) as services:
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))  # no file may grow past 2 KiB: a full disk
        try:
            with pytest.raises(HostError, match=r"checkpoints\.sqlite"):
                evolve(grown, services=services)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, handler)
    with open_run(grown) as services:  # the disk has room again: the run resumes
        assert evolve(grown, services=services)["iteration"] == 1


class Killed(Exception):
    """Stands for the process being killed in the middle of an edit step."""


class ReopeningEditor:
    """Works in its workspace as the agent and command editors do; killed once in its first repair round."""

    BROKEN = "def solve(task, ctx:\n    return 'A'\n"

    def __init__(self, kill_in_repair: bool) -> None:
        self.kill_in_repair = kill_in_repair
        self.opened: list[tuple[str, bool]] = []
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        assert workspaces is not None
        tools = workspaces.open(inp, resume=True)
        self.opened.append((tools.root.name, tools.resumed))
        if inp.feedback and self.kill_in_repair:
            raise Killed
        solver = self.BROKEN if not inp.feedback else "def solve(task, ctx):\n    return 'B'\n"
        return Proposal(operator="reopening", rationale="r", edits={"solver.py": solver}, workspace=str(tools.root))


def test_a_run_stopped_in_a_repair_round_reopens_the_failed_workspace(small_world, tmp_path, seed):
    """A repair round reopens the workspace whose submission failed and removes its ``submitted.json``: a run
    stopped then found no failed workspace on resume and opened a fresh one, so the repair lost its work."""
    from videvolve.graph.driver import evolve

    ctx = context(small_world, tmp_path, seed, iterations=1, repair_rounds=1)

    def run(editor: ReopeningEditor) -> dict[str, Any]:
        with open_run(ctx, editor=editor) as services:
            return evolve(ctx, services=services)

    killed = ReopeningEditor(kill_in_repair=True)
    with pytest.raises(Killed):
        run(killed)
    assert killed.opened == [("1-0", False), ("1-0", True)]  # the repair round reopened the failed one
    resumed = ReopeningEditor(kill_in_repair=False)
    state = run(resumed)
    assert resumed.opened == [("1-0", True)], resumed.opened
    assert not (tmp_path / "run" / "workspaces" / "1-1").exists()
    assert [h["operator"] for h in state["history"]] == ["reopening"]
    submitted = json.loads((tmp_path / "run" / "workspaces" / "1-0" / "submitted.json").read_text())
    assert submitted["version"] == state["history"][0]["candidate"]


def test_what_a_command_left_under_the_repair_markers_is_neither_followed_nor_waited_on(tmp_path: Path) -> None:
    """A command editor may leave a link or a pipe named ``repairing.json`` or ``submitted.json`` in its workspace:
    reopening it for a repair round writes through no link and waits on no pipe."""
    import os

    from videvolve.nodes.sessions import REPAIRING, _version_in, reopen

    ws, outside = tmp_path / "1-0", tmp_path / "outside.txt"
    ws.mkdir()
    outside.write_text("theirs\n")
    (ws / "submitted.json").write_text(json.dumps({"version": "v1"}))
    os.symlink(outside, ws / REPAIRING)
    reopen(ws)
    assert outside.read_text() == "theirs\n" and not (ws / REPAIRING).is_symlink()
    assert _version_in(ws / REPAIRING) == "v1" and not (ws / "submitted.json").exists()
    os.mkfifo(ws / "submitted.json")
    assert _version_in(ws / "submitted.json") is None  # a pipe is not read (it would wait for a writer)
    reopen(ws)
    assert not (ws / "submitted.json").exists() and _version_in(ws / REPAIRING) == "v1"
    (ws / "submitted.json").write_text("x" * 10_000)
    assert _version_in(ws / "submitted.json") is None
