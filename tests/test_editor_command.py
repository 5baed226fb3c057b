"""The command editor: an external agent (here a shell script) in bubblewrap over the workspace, with the editor's
tools behind ``bin/``; it cannot read the tasks file or the run's results; time limits, refusals, the report."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from tests.test_editor_agent import NEW, OLD, workspace
from tests.test_loop_graph import context, run_graph
from videvolve.editing.base import read_files
from videvolve.editing.command import CommandEditor, CommandSpec, mounts
from videvolve.errors import SandboxStartError, UsageError
from videvolve.loop.services import open_run
from videvolve.skill_library.sandbox import get_sandbox
from videvolve.testing import OneWorkspace

try:
    get_sandbox(False)
    BWRAP = True
except SandboxStartError:
    BWRAP = False
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot run here")

EDIT = f'''python3 - <<'PY'
p = "candidate/solver.py"
s = open(p).read()
assert s.count({OLD!r}) == 1
open(p, "w").write(s.replace({OLD!r}, {NEW!r}))
PY'''


def agent_script(tmp_path: Path, body: str) -> str:
    """An executable script in a folder of its own (the sandbox mounts its program's folder), as --editor-cmd."""
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    path = folder / "agent.sh"
    path.write_text("#!/bin/sh\nset -u\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def good_agent(tasks_file: Path, evals: Path) -> str:
    """Reads a trace, edits solver.py by search/replace, trials one training task, submits; tries to read the
    tasks file and the run's results, and records whether it could."""
    return f'''task=$(ls traces | grep -v INDEX.md | head -n 1)
cat "traces/$task/task.json" > seen_task.json
{EDIT}
bin/trial "$task" > trial.out; echo $? > trial.status
cat "{tasks_file}" > /dev/null 2>&1; echo $? > leak_tasks.status
ls "{evals}" > /dev/null 2>&1; echo $? > leak_evals.status
find / -name "$(basename "{tasks_file}")" 2>/dev/null | head -n 3 > leak_find.txt
bin/probe --task-id "$task" --times 3,9 --question "what is shown?" --mode describe > probe.out
bin/memory_search "short events" > memory.out
bin/submit "small glyphs need full resolution" --applies-when misperception
echo agent done'''


@needs_bwrap
@pytest.mark.slow
def test_a_scripted_agent_edits_trials_and_submits_and_cannot_read_the_run(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1)
    evals = tmp_path / "evals"
    assert small_world.tasks_path.is_file() and evals.is_dir()  # they exist: only the sandbox hides them
    cmd = agent_script(tmp_path, good_agent(small_world.tasks_path, evals))
    editor = CommandEditor(CommandSpec(cmd=cmd, timeout_s=120, protected=[str(small_world.tasks_path), str(evals)]))
    proposal = editor.propose(tools.inp, OneWorkspace(tools))
    root = tools.root
    assert proposal is not None, editor.last_failure
    assert proposal.operator == "command" and proposal.rationale == "small glyphs need full resolution"
    assert proposal.applies_when == "misperception"
    assert proposal.edits == {"solver.py": read_files(seed)["solver.py"].replace(OLD, NEW)}
    assert (root / "trial.status").read_text().strip() == "0"
    trial = json.loads((root / "trial.out").read_text())
    assert [r["task"] for r in trial["per_task"]] == list(tools.env.tasks)  # a training task of the batch
    assert tools.ledger.trial_tasks == 1
    assert (root / "leak_tasks.status").read_text().strip() != "0"
    assert (root / "leak_evals.status").read_text().strip() != "0"
    assert (root / "leak_find.txt").read_text().strip() == ""
    assert json.loads((root / "seen_task.json").read_text())["task_id"] in tools.env.tasks
    lines = [json.loads(x) for x in (root / "transcript.jsonl").read_text().splitlines()]
    assert [x["name"] for x in lines if x["kind"] == "tool"] == ["trial", "probe", "memory_search", "submit"]
    probe = json.loads((root / "probe.out").read_text())
    assert probe["times"] == [3.0, 9.0] and len(probe["images"]) == 2 and tools.ledger.probes == 1
    assert "## The tools from a shell" in (root / "TASK.md").read_text()
    command = next(x for x in lines if x["kind"] == "command")
    assert command["exit"] == 0 and "agent done" in command["output"]
    assert command["calls"] == "trial, probe, memory_search, submit"
    assert "agent done" in (root / "command.log").read_text()


@needs_bwrap
@pytest.mark.parametrize(("body", "why"), [
    ("sleep 30", "timed out after 2 s"),
    ("echo nothing to do", "without changing candidate/ or calling bin/submit"),
    (f"{EDIT}\nexit 3", "exited with status 3 without calling bin/submit"),
    ("mkdir -p candidate/references; ln -s /etc/passwd candidate/references/leak.md\nbin/trial > trial.out",
     "is a symbolic link"),
])
@pytest.mark.slow
def test_command_failures_end_the_proposal_with_the_reason(small_world, tmp_path, seed, body, why):
    tools = workspace(small_world, tmp_path, seed, n=1)
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=2))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None
    assert why in (editor.last_failure or ""), editor.last_failure
    last = json.loads((tools.root / "transcript.jsonl").read_text().splitlines()[-1])
    assert last["kind"] == "failure" and why in last["reason"]
    if "symbolic" in why:
        assert "refused" in (tools.root / "trial.out").read_text() and tools.ledger.trials == 0


@needs_bwrap
def test_an_edit_without_submit_is_taken_as_it_is(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1)
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, EDIT + "\necho edited"), timeout_s=60))
    proposal = editor.propose(tools.inp, OneWorkspace(tools))
    assert proposal is not None and "without bin/submit" in proposal.rationale and "edited" in proposal.rationale
    assert set(proposal.edits) == {"solver.py"}


def test_binds_that_would_expose_the_run_are_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(UsageError, match="editor-cmd-ro-binds"):
        mounts(CommandSpec(cmd="true", ro_binds=[str(tmp_path)], protected=[str(run)]))
    script = run / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    with pytest.raises(UsageError, match="program of --editor-cmd"):
        mounts(CommandSpec(cmd=str(script), protected=[str(run)]))
    config = tmp_path / "config"
    config.mkdir()
    assert (config, config) in mounts(CommandSpec(cmd="true", ro_binds=[str(config)], protected=[str(run)]))


def test_command_editor_without_a_command_refuses_at_start(small_world, tmp_path, seed):
    with pytest.raises(UsageError, match="needs --editor-cmd"):
        open_run(context(small_world, tmp_path, seed, editor="command"))


@needs_bwrap
@pytest.mark.slow
def test_command_editor_in_a_run_is_gated_and_reported(small_world, tmp_path, seed):
    from videvolve.report import build_report

    run = tmp_path / "run"
    cmd = agent_script(tmp_path, good_agent(small_world.tasks_path, run / "evals"))
    ctx = context(small_world, tmp_path, seed, iterations=1, editor="command", editor_cmd=cmd)
    state = run_graph(ctx)
    entry = state["history"][0]
    assert entry["operator"] == "command" and entry["cand_score"] is not None  # the gate judged it
    parent, cand = run / "harnesses" / entry["parent"], run / "harnesses" / entry["candidate"]
    assert read_files(cand) == {**read_files(parent), "solver.py": read_files(parent)["solver.py"].replace(OLD, NEW)}
    ws = run / "workspaces" / "1-0"
    train = {t.id for t in small_world.tasks if t.split == "train"}
    assert {r["task"] for r in json.loads((ws / "trial.out").read_text())["per_task"]} <= train
    assert (run / "evals").is_dir() and (ws / "leak_evals.status").read_text().strip() != "0"
    assert (ws / "leak_tasks.status").read_text().strip() != "0"
    assert json.loads((ws / "submitted.json").read_text())["version"] == entry["candidate"]
    (run / "settings.json").write_text(ctx.model_dump_json())  # as `evolve` writes it
    html = build_report(run).read_text()
    assert "tools called through bin/: trial, probe, memory_search, submit" in html and "agent done" in html
    assert "small glyphs need full resolution" in html
    shutil.rmtree(run / "report")


BROKEN = 'frames = ctx.frames(times)[: int("boom")]  # fails at run time'


@needs_bwrap
@pytest.mark.slow
def test_a_failed_smoke_run_reruns_the_command_with_repair_md(small_world, tmp_path, seed):
    fix = EDIT.replace(repr(OLD), repr(BROKEN), 2)
    broken = EDIT.replace(repr(NEW), repr(BROKEN))
    body = f'''if [ -f REPAIR.md ]; then
cp REPAIR.md repair_seen.md
{fix}
bin/submit "fixed after the smoke run failed"
else
{broken}
bin/submit "first try"
fi'''
    cmd = agent_script(tmp_path, body)
    state = run_graph(context(small_world, tmp_path, seed, iterations=1, editor="command", editor_cmd=cmd,
                              repair_rounds=1))
    entry = state["history"][0]
    assert entry["cand_score"] is not None and entry["operator"] == "command"
    text = (tmp_path / "run" / "harnesses" / entry["candidate"] / "solver.py").read_text()
    assert NEW in text and BROKEN not in text
    ws = tmp_path / "run" / "workspaces" / "1-0"
    assert "boom" in (ws / "repair_seen.md").read_text()  # the smoke run's error, in the same workspace
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["node"] == "validate"] == ["sent back", "passed"]


@pytest.mark.slow
def test_a_command_past_its_time_limit_leaves_the_run_going(small_world, tmp_path, seed):
    if not BWRAP:
        pytest.skip("bubblewrap cannot run here")
    cmd = agent_script(tmp_path, "echo thinking; sleep 60")
    state = run_graph(context(small_world, tmp_path, seed, iterations=2, editor="command", editor_cmd=cmd,
                              editor_cmd_timeout=1.0))
    assert state["iteration"] == 2 and all(h["decision"] == "none" for h in state["history"])
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    whys = [e["why"] for e in events if e["event"] == "no proposal"]
    assert len(whys) == 2 and all("timed out after 1 s" in w and "thinking" in w for w in whys)


@needs_bwrap
def test_the_agents_config_is_read_only_its_home_writable_and_only_named_variables_pass(
        small_world, tmp_path, seed, monkeypatch):
    home = tmp_path / "home"
    (home / ".agent").mkdir(parents=True)
    (home / ".agent" / "auth.json").write_text('{"key": "k"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("VIDEVOLVE_SECRET", "hidden")
    tools = workspace(small_world, tmp_path, seed, n=1)
    body = '''cat "$HOME/.agent/auth.json" > auth.seen
echo x >> "$HOME/.agent/auth.json"; echo $? > auth.write.status
echo y > "$HOME/.agent/session.log"; echo $? > home.write.status
echo "${ANTHROPIC_API_KEY:-unset} ${VIDEVOLVE_SECRET:-unset} $HOME $(pwd)" > env.seen'''
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=30,
                                       ro_binds=["~/.agent/auth.json"]))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None  # it changed nothing
    root = tools.root
    assert (root / "auth.seen").read_text() == '{"key": "k"}'
    assert (root / "auth.write.status").read_text().strip() != "0"
    assert (home / ".agent" / "auth.json").read_text() == '{"key": "k"}'
    assert (root / "home.write.status").read_text().strip() == "0"
    assert (root / ".home" / ".agent" / "session.log").read_text() == "y\n"
    assert (root / "env.seen").read_text().split() == ["sk-test", "unset", "/workspace/.home", "/workspace"]
