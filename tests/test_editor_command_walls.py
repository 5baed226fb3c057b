"""Attacks on the walls around ``--editor command``: an agent that leaves links where the run writes, swaps a
checked folder for a link, forges the run's records, leaves files the run cannot read, or floods the tool socket.

Host paths are no secret inside the sandbox (``/proc/self/mountinfo`` names the workspace's folder), so an agent
can aim a link at any file of the run; these tests aim them at files beside the workspace."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import stat
from pathlib import Path

import pytest

from tests.test_editor_agent import workspace
from tests.test_editor_command import agent_script, needs_bwrap
from tests.test_loop_graph import context
from videvolve.editing.command import CommandEditor, CommandSpec
from videvolve.editing.toolserver import SOCKET_NAME, ToolServer, serve_tools
from videvolve.errors import UsageError
from videvolve.loop.services import open_run
from videvolve.testing import OneWorkspace

HOST_WS = "WS=$(awk '$5==\"/workspace\"{print $4}' /proc/self/mountinfo); OUT=$(dirname \"$WS\")"
VICTIMS = ("victim_log", "victim_transcript", "victim_trial", "victim_probe", "victim_submitted")


@needs_bwrap
def test_links_and_forgeries_the_agent_leaves_never_reach_the_runs_writes(small_world, tmp_path, seed):
    tools = workspace(small_world, tmp_path, seed, n=1)
    task = next(iter(tools.env.tasks))
    (tmp_path / "victim_probe").mkdir()
    body = f'''{HOST_WS}
rm -f command.log; ln -s "$OUT/victim_log" command.log; echo $? > s_log
rm -f transcript.jsonl; ln -s "$OUT/victim_transcript" transcript.jsonl; echo $? > s_transcript
echo '{{"kind": "command", "command": "FORGED"}}' >> transcript.jsonl; echo $? > s_forge_transcript
mkdir -p trials probes; ln -s "$OUT/victim_trial" trials/01.json; echo $? > s_trial
ln -s "$OUT/victim_probe" probes/01; echo $? > s_probe
echo '{{"candidate": "FORGED", "per_task": []}}' > trials/09.json; echo $? > s_forge_trial
ln -s "$OUT/victim_submitted" submitted.json
bin/trial {task} > /dev/null
bin/probe --task-id {task} --times 3 --question "what is shown?" > /dev/null
echo OUTPUT-OF-THE-AGENT'''
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=60))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None  # it changed nothing
    root = tools.root
    assert [v for v in VICTIMS if (tmp_path / v).exists() and v != "victim_probe"] == []
    assert list((tmp_path / "victim_probe").iterdir()) == []  # nothing written outside the workspace
    for status in ("s_log", "s_transcript", "s_forge_transcript", "s_trial", "s_probe", "s_forge_trial"):
        assert (root / status).read_text().strip() != "0", status  # the run's records are read-only to it
    assert not (root / "submitted.json").exists()  # written by the run alone, after the command
    transcript = (root / "transcript.jsonl").read_text()
    assert "FORGED" not in transcript and '"name": "trial"' in transcript
    assert [p.name for p in (root / "trials").iterdir()] == ["01.json"]
    assert json.loads((root / "trials" / "01.json").read_text())["per_task"][0]["task"] == task
    assert (root / "probes" / "01" / "probe.json").is_file()
    assert "OUTPUT-OF-THE-AGENT" in (root / "command.log").read_text()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace with a secret in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("SECRET gold answers\n")
    return folder


def test_a_link_swapped_in_after_the_checks_is_never_followed(small_world, tmp_path, seed, outside, monkeypatch):
    """The agent runs beside the tools: a folder checked a moment ago may be a link when it is opened. Every check
    that looks for links is blinded here, as a well-timed swap would blind it; the open itself must refuse."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    root = tools.root
    (root / "scratch").symlink_to(outside)
    skill = root / "candidate" / "SKILL.md"
    skill.unlink()
    skill.symlink_to(outside / "secret.md")
    (root / "candidate" / "references").symlink_to(outside)
    monkeypatch.setattr(Path, "is_symlink", lambda self: False)
    text, ok = tools.call("read_file", {"path": "scratch/secret.md"})
    assert not ok and "SECRET" not in text
    text, ok = tools.call("list_files", {"path": "scratch"})
    assert not ok and "secret" not in text
    assert not tools.call("write_file", {"path": "candidate/references/new.md", "content": "x"})[1]
    assert not tools.call("edit_file", {"path": "candidate/SKILL.md", "old": "SECRET", "new": "x"})[1]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]
    assert (outside / "secret.md").read_text() == "SECRET gold answers\n"
    for tool in ("trial", "submit"):
        text, ok = tools.call(tool, {"rationale": "r"} if tool == "submit" else {})
        assert not ok and "link" in text, text
    assert tools.submitted is None and tools.ledger.trials == 0


@pytest.mark.parametrize(("make", "why"), [
    (lambda c: (c / "solver.py").write_bytes((c / "solver.py").read_bytes() + b'x = "\xff\xfe"\n'), "UTF-8"),
    (lambda c: (c / "references").mkdir() or (c / "references" / "big.md").open("wb").truncate(2 ** 40), "bytes"),
])
def test_a_candidate_the_run_cannot_read_ends_the_proposal_cleanly(small_world, tmp_path, seed, make, why):
    """Bytes that are not UTF-8, or a sparse terabyte, left in candidate/: refused with the reason, not a crash of
    the run (a decode error, or reading the whole file into memory)."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    make(tools.candidate)
    text, ok = tools.call("submit", {"rationale": "r"})
    assert not ok and why in text
    editor = CommandEditor(CommandSpec(cmd="true"))
    assert editor._take_back(tools, 0, "done") is None
    assert why in (editor.last_failure or "")


def test_a_request_body_over_the_limit_is_refused_unread(small_world, tmp_path, seed):
    """A flood on the tool socket is cut off at the limit instead of being buffered into the run's memory."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    server = ToolServer(tools)
    with serve_tools(server) as folder:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(folder / SOCKET_NAME))
        conn = http.client.HTTPConnection("localhost")
        conn.sock = sock
        body = b'{"content": "' + b"x" * (9 * 1024 * 1024) + b'"}'
        conn.request("POST", "/call/write_file", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        assert reply.status == 413 and "refused" in json.loads(reply.read())["result"]
    assert server.calls == []


def test_a_ray_executor_is_refused_with_the_command_editor(small_world, tmp_path, seed):
    """The agent shares the host's network for its API; a Ray cluster runs code for anyone who reaches it."""
    ctx = context(small_world, tmp_path, seed, editor="command", editor_cmd="true", executor="ray")
    with pytest.raises(UsageError, match="executor local"):
        open_run(ctx)


@needs_bwrap
def test_no_set_id_file_of_the_run_user_is_left_for_others(small_world, tmp_path, seed):
    """The command's files are the run user's on the host: a set-user-ID shell it leaves would let any local user
    act as the run's user (and read the tasks file)."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    body = "cp /bin/sh user_shell; chmod 4755 user_shell; cp /bin/sh group_shell; chmod 2755 group_shell; ls -l"
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=30))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None
    assert "rws" in (tools.root / "command.log").read_text()  # it could set the bit, inside
    for name in ("user_shell", "group_shell"):
        assert (tools.root / name).stat().st_mode & (stat.S_ISUID | stat.S_ISGID) == 0
    assert stat.S_IMODE(tools.root.stat().st_mode) == 0o700


@needs_bwrap
@pytest.mark.slow
def test_a_folder_1100_levels_deep_ends_neither_the_proposal_nor_the_next_workspace(small_world, tmp_path, seed):
    """Issue 20: a RecursionError in the walk after the command ended `evolve` (exit 70), and again on --resume."""
    from videvolve.editing.safefs import remove_tree
    from videvolve.editing.workspace import EditorLimits, build_workspace

    tools = workspace(small_world, tmp_path, seed, n=1)
    body = '''printf '\\nBe brief.\\n' >> candidate/SKILL.md
(cd candidate && mkdir references && cd references && i=0 &&
 while [ $i -lt 1100 ]; do mkdir a && cd a || exit 1; i=$((i+1)); done; echo deep > f)
bin/submit "deep folder" > submit.out 2>&1; echo $? > submit.status
echo DONE'''
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=120))
    try:
        proposal = editor.propose(tools.inp, OneWorkspace(tools))
        assert (tools.root / "submit.status").read_text().strip() == "1"  # refused while the tree was there
        assert "folders deep" in (tools.root / "submit.out").read_text()
        assert proposal is not None and "Be brief." in (proposal.edits.get("SKILL.md") or "")  # the rest is taken
        rebuilt = build_workspace(tools.root, seed, tools.inp, [], EditorLimits(images=0), "TOOLS-DOC")
        assert not (rebuilt / "candidate" / "references").exists()
    finally:
        remove_tree(tools.root)  # pytest's own clean-up recurses


@pytest.mark.slow
def test_many_requests_at_once_are_turned_away_instead_of_buffered(small_world, tmp_path, seed):
    """One request is cut at MAX_BODY, but an agent can open thousands of connections, each sending almost a MiB and
    holding it: only a few are taken at once (the rest answered 503 at their headers), so a few MiB at most are held."""
    from videvolve.editing.toolserver import MAX_BODY, MAX_REQUESTS

    tools = workspace(small_world, tmp_path, seed, n=1)
    server = ToolServer(tools)
    socks = []
    with serve_tools(server) as folder:
        head = (f"POST /call/write_file HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                f"Content-Length: {MAX_BODY}\r\n\r\n").encode()
        for _ in range(MAX_REQUESTS + 24):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(folder / SOCKET_NAME))
            sock.settimeout(2)
            with contextlib.suppress(OSError):  # one turned away is closed once answered
                sock.sendall(head + b'{"path": "candidate/SKILL.md", "content": "' + b"x" * (MAX_BODY // 2))
            socks.append(sock)
        turned_away = 0
        for sock in socks:
            sock.settimeout(0.5)
            with contextlib.suppress(TimeoutError, ConnectionResetError):
                turned_away += sock.recv(64).startswith(b"HTTP/1.1 503")
        for sock in socks:
            sock.close()
    assert turned_away >= 24 and server.calls == []


@needs_bwrap
def test_the_commands_tmp_is_bounded(small_world, tmp_path, seed):
    """The command's /tmp is a tmpfs: the machine's memory, outside every limit of the command's. Unbounded (main), an
    agent writing there could take what the run itself needs; it is bounded (1 GiB; 8 MiB here)."""
    from videvolve.skill_library.sandbox import bwrap_sizes_tmpfs

    if not bwrap_sizes_tmpfs():
        pytest.skip("this bubblewrap has no --size")
    tools = workspace(small_world, tmp_path, seed, n=1)
    body = '''dd if=/dev/zero of=/tmp/big bs=1048576 count=16 2> /dev/null; echo $? > s_tmp
wc -c < /tmp/big > tmp_size'''
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, body), timeout_s=60, tmp_bytes=8 * 1024**2))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None
    assert (tools.root / "s_tmp").read_text().strip() != "0"  # No space left on device
    assert int((tools.root / "tmp_size").read_text()) <= 8 * 1024**2


@needs_bwrap
@pytest.mark.parametrize("name", ["submitted.json", "REPAIR.md"])
def test_a_folder_the_command_makes_where_the_run_writes_ends_neither_the_proposal_nor_the_run(small_world, tmp_path,
                                                                                           seed, name):
    """``mkdir submitted.json`` (or ``REPAIR.md``, before the first repair round binds it) made the run's own
    ``unlink`` raise IsADirectoryError out of ``propose``: a hostile command stopped the run."""
    tools = workspace(small_world, tmp_path, seed, n=1)
    editor = CommandEditor(CommandSpec(cmd=agent_script(tmp_path, f"mkdir {name}\necho done"), timeout_s=60))
    assert editor.propose(tools.inp, OneWorkspace(tools)) is None  # its failure, said
    assert "without changing candidate/" in (editor.last_failure or "")
    if name == "REPAIR.md":  # the next round removes what the last command left there before it begins
        assert editor.propose(tools.inp.model_copy(update={"feedback": "smoke run failed"}), OneWorkspace(tools)) \
            is None
