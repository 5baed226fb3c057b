"""The command editor: an external coding agent (Claude Code, Codex, aider, any script) run in the workspace.

The command runs under ``/bin/sh -c`` in bubblewrap, with the workspace mounted writable at ``/workspace`` (its working
directory) and nothing else of the run: the system's ``/usr`` (and ``/lib*``, ``/bin``, ``/sbin``) and a few files of
``/etc`` (name resolution, certificates, users) read-only, the agent's own install and config (``ro_binds``) read-only,
a fresh ``/tmp`` of at most 1 GiB, ``HOME=/workspace/.home``, the network on for its API, and only the environment
variables named in ``env``. Every bind is checked against the run's protected paths (the run directory, the tasks file
and its folder, memory, cache, the videos' folders): one that would expose them is refused, so the agent can never read
the tasks file, ``evals/`` or anything of the selection and test splits.

The editor's tools are served on a Unix socket mounted at ``/workspace/.tools/`` and reached with ``bin/<tool>``. Only
``candidate/`` is taken back. A command that exits 0 with a changed candidate but never called ``bin/submit`` counts as
a submission with a default rationale (an agent that edited and stopped meant its edit); one that fails, times out (its
whole process tree is killed) or changes nothing ends the proposal with the reason. A candidate that fails validation
comes back in a repair round: the command (or ``repair_cmd``) runs again in the same workspace, with the failure in
``REPAIR.md`` and ``VIDEVOLVE_REPAIR=1``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

from pydantic import BaseModel, Field

from videvolve.editing.base import EditorInput, Proposal, Workspaces
from videvolve.editing.safefs import (
    MAX_DEPTH,
    PathRefused,
    copy_tree,
    open_dir,
    remove_tree,
    remove_tree_at,
    walk,
    write_bytes,
)
from videvolve.editing.tools import EditorTools
from videvolve.editing.toolserver import ToolServer, install_bin, journal, serve_tools
from videvolve.editing.workspace import candidate_edits
from videvolve.errors import SandboxStartError, UsageError
from videvolve.skill_library.harness import HASHED_SUFFIXES, MAX_FILE_BYTES
from videvolve.skill_library.sandbox import get_sandbox, ro_bind, system_binds, tmpfs

WORKSPACE = Path("/workspace")
HOME = ".home"
DEFAULT_CONFIGS = ("~/.claude/settings.json", "~/.claude/.credentials.json", "~/.codex/auth.json",
                   "~/.codex/config.toml", "~/.aider.conf.yml")
"""The agents' login and settings files, not their folders (which hold past sessions' transcripts)."""
DEFAULT_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "OPENAI_API_KEY",
               "OPENAI_BASE_URL", "CODEX_API_KEY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy",
               "http_proxy", "no_proxy", "TERM", "LANG")
ETC = ("resolv.conf", "hosts", "nsswitch.conf", "host.conf", "gai.conf", "ssl", "ca-certificates", "pki",
       "crypto-policies", "passwd", "group", "localtime", "alternatives")
RECORDS = ("TASK.md", "REPAIR.md", "traces", "diagnoses.md", "diagnoses.jsonl", "memory.md", "lineage.md",
           "parent.json", "bin", "transcript.jsonl", "trials", "probes", "command.log")
"""What the run writes in the workspace and trusts later (the report shows them): read-only in the sandbox, so
the command can neither forge them nor put a link where the run writes."""
OUTPUT_HEAD, OUTPUT_TAIL = 4 * 1024, 64 * 1024
"""Bytes of the command's output kept: its start and its end."""


TMP_BYTES = 1024**3
"""The command's ``/tmp`` at most (a tmpfs holds its files in the machine's memory, outside every limit of the
command's: unbounded, an agent writing there could take the memory the run itself needs)."""


class CommandSpec(BaseModel):
    """How the command editor runs (the run's settings fill these in)."""

    cmd: str = Field(description="the shell command, run with /bin/sh -c in /workspace")
    repair_cmd: str | None = Field(None, description="the command of a repair round (default: cmd)")
    timeout_s: float = Field(1800.0, gt=0, description="wall-clock seconds of one run of the command")
    ro_binds: list[str] | None = Field(None, description="extra read-only paths (None: the defaults that exist)")
    env: list[str] | None = Field(None, description="variables passed through (None: DEFAULT_ENV)")
    protected: list[str] = Field(default_factory=list, description="paths no bind may expose")
    tmp_bytes: int = Field(TMP_BYTES, gt=0, description="the size of the command's /tmp, a tmpfs: the machine's memory")


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _exe_dirs(cmd: str) -> list[Path]:
    """The folder of the command's program, where it was found and where it really is (its install prefix)."""
    try:
        words = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--editor-cmd is not a valid shell command: {exc}") from None
    found = shutil.which(words[0]) if words else None
    if not found:
        return []
    dirs = []
    for exe in (Path(found).absolute(), Path(os.path.realpath(found))):
        d = exe.parent
        dirs.append(d.parent if d.name == "bin" and d.parent != Path("/") else d)
    return list(dict.fromkeys(dirs))


def mounts(spec: CommandSpec) -> list[tuple[Path, Path]]:
    """Read-only binds besides the system: (host path, path in the sandbox).

    A bind that would expose a protected path (or all of ``/`` or the home folder) is refused with a UsageError when
    the user asked for it (``ro_binds``, the command's own program), and left out when it is a default.
    """
    home = Path.home().resolve()
    given = spec.ro_binds is not None
    wanted = DEFAULT_CONFIGS if spec.ro_binds is None else spec.ro_binds
    configs = [Path(os.path.expanduser(p)).absolute() for p in wanted]
    exes = _exe_dirs(spec.cmd)
    out: list[tuple[Path, Path]] = []
    for path in [*configs, *exes, Path(sys.base_prefix).resolve()]:
        real = path.resolve()
        if not real.exists() or _under(real, Path("/usr")):
            continue
        exposed = [p for p in spec.protected if _under(Path(p).resolve(), real) or _under(real, Path(p).resolve())]
        if exposed or real in (Path("/"), home):
            if path in exes or (given and path in configs):
                what = "the program of --editor-cmd lives in" if path in exes else "--editor-cmd-ro-binds:"
                raise UsageError(f"{what} {path}, which the editor command would see, and with it "
                                 f"{exposed[0] if exposed else 'everything under it'}; install or bind it in a "
                                 "narrower folder of its own")
            continue
        dest = WORKSPACE / HOME / path.relative_to(home) if path in configs and _under(path, home) else real
        out.append((real, dest))
    return list(dict.fromkeys(out))


def require_bwrap() -> None:
    """Refuse at start where bubblewrap cannot run (the weak sandbox is never used for an agent with a shell)."""
    try:
        sandbox = get_sandbox(False)
    except SandboxStartError as exc:
        raise UsageError(f"--editor command runs the agent in bubblewrap, and it cannot run here: {exc}. "
                         "--allow-weak-sandbox does not apply to it (under unshare the agent could read the tasks "
                         "file); use another --editor") from None
    if sandbox.mode != "bwrap":
        raise UsageError("--editor command needs bubblewrap")


def check_command(spec: CommandSpec) -> None:
    """Everything checkable before a run starts: a command, bubblewrap, binds that expose nothing of the run."""
    if not spec.cmd.strip():
        raise UsageError("--editor command needs --editor-cmd, the shell command that runs the agent (for example "
                         "--editor-cmd 'claude -p \"$(cat TASK.md)\" ...'; see the README's Editors section)")
    require_bwrap()
    mounts(spec)


def bwrap_argv(workspace: Path, tools_dir: Path, spec: CommandSpec, repair: bool = False) -> list[str]:
    """The whole argv: bubblewrap's mounts and environment, then ``/bin/sh -c <command>``."""
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL", "--clearenv"]
    made: set[Path] = set()
    args += system_binds(made)
    for name in ETC:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += [*tmpfs("/tmp", spec.tmp_bytes), "--proc", "/proc", "--dev", "/dev",
             "--bind", str(workspace), str(WORKSPACE), "--bind", str(tools_dir), str(WORKSPACE / ".tools")]
    for name in RECORDS:
        if (workspace / name).exists() and not (workspace / name).is_symlink():
            args += ["--ro-bind", str(workspace / name), str(WORKSPACE / name)]
    path = [str(WORKSPACE / "bin")]
    for host, dest in mounts(spec):
        args += ro_bind(host, made) if host == dest else ["--ro-bind", str(host), str(dest)]
        if host == dest and (host / "bin").is_dir():
            path.append(str(host / "bin"))
        elif host == dest:
            path.append(str(host))
    env = {k: os.environ[k] for k in (DEFAULT_ENV if spec.env is None else spec.env) if k in os.environ}
    env.update({"HOME": str(WORKSPACE / HOME), "PATH": ":".join([*path, "/usr/local/bin", "/usr/bin", "/bin"]),
                "VIDEVOLVE_WORKSPACE": str(WORKSPACE), "VIDEVOLVE_TOOLS_SOCKET": str(WORKSPACE / ".tools" /
                                                                                  "tools.sock")})
    if repair:
        env["VIDEVOLVE_REPAIR"] = "1"
    for key, value in env.items():
        args += ["--setenv", key, value]
    cmd = (spec.repair_cmd or spec.cmd) if repair else spec.cmd
    return [*args, "--chdir", str(WORKSPACE), "/bin/sh", "-c", cmd]


class Output:
    """The command's output as it comes: its first and its last bytes, and how many there were."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.head, self.tail, self.kept, self.total = b"", deque[bytes](), 0, 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := stream.read(65536):
            self.total += len(chunk)
            room = OUTPUT_HEAD - len(self.head)
            self.head, chunk = self.head + chunk[:room], chunk[room:] if room > 0 else chunk
            if chunk:
                self.tail.append(chunk)
                self.kept += len(chunk)
            while self.tail and self.kept - len(self.tail[0]) >= OUTPUT_TAIL:
                self.kept -= len(self.tail.popleft())

    def text(self) -> str:
        """The output, condensed: its start, a marker where bytes were left out, and its end."""
        self.thread.join(timeout=10)
        tail = b"".join(self.tail)
        cut = self.total - len(self.head) - len(tail)
        middle = f"\n[... {cut} bytes left out ...]\n".encode() if cut > 0 else b""
        return (self.head + middle + tail).decode(errors="replace")


def unsafe_candidate(candidate: Path) -> str | None:
    """Why the candidate cannot be read by the trusted side, or None.

    A link or a special file in it (the trusted side would follow it), a file too large to read, text not in UTF-8.
    """
    try:
        copy_tree(candidate.parent, candidate.name, None, MAX_FILE_BYTES, HASHED_SUFFIXES)
    except PathRefused as exc:
        return f"{exc}; candidate/ may hold only regular files and folders"
    return None


def prepare_records(root: Path) -> None:
    """Make the run's records in the workspace (RECORDS, ``.tools``, HOME) real files and folders, to be bound.

    No command runs at this point, so nothing can change them between this and the bind.
    """
    for name in (*RECORDS, ".tools", HOME):
        path = root / name
        if path.is_symlink() or (path.exists() and not (path.is_file() or path.is_dir())):
            path.unlink()
    for name in ("traces", "bin", "trials", "probes", ".tools", HOME):
        (root / name).mkdir(exist_ok=True)
    for name in ("transcript.jsonl", "command.log"):
        (root / name).touch()


def drop_set_id(root: Path) -> None:
    """Clear the set-user-ID and set-group-ID bits of the files the command left.

    On the host they belong to the run's user (root, where the run runs as root): one would run a shell as that user.
    A folder :data:`~videvolve.editing.safefs.MAX_DEPTH` levels down is removed with all it holds (no walk enters it).
    """
    with open_dir(root, "") as top:
        for rel, entry, dir_fd in walk(top, strict=False):
            if entry.is_dir(follow_symlinks=False) and rel.count("/") + 1 >= MAX_DEPTH:
                remove_tree_at(dir_fd, entry.name)  # deeper than any walk enters: nothing of it is taken back
            elif entry.is_file(follow_symlinks=False):
                mode = entry.stat(follow_symlinks=False).st_mode
                if mode & (stat.S_ISUID | stat.S_ISGID):
                    os.chmod(entry.name, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID), dir_fd=dir_fd)


SHELL_TOOLS = """
## The tools from a shell

You work in this folder with your own tools; the run's tools are executables in `bin/` (each prints its result and
exits 1 when it refused): `bin/trial [TASK ...]` (no task: the whole batch), `bin/probe --task-id T --times 3,9
--question "..." [--show frames|sheet|clip] [--mode ask|match|describe]`, `bin/memory_search "query"`, and, to
finish, `bin/submit "rationale" [--applies-when "..."] [--preserve "..."]`. `bin/<tool> --help` shows the
arguments; a JSON object of them works too. Only the editable files of `candidate/` are taken back; nothing outside
this folder is reachable.
"""

REPAIR = """# Your submission failed validation

{feedback}

`candidate/` is as you left it. Fix it, check it with `bin/trial`, and submit again with `bin/submit "<rationale>"`.
"""


class CommandEditor:
    """Proposes by running an external command in the workspace, with the tools behind ``bin/``."""

    def __init__(self, spec: CommandSpec) -> None:
        self.spec = spec
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """One proposal, or None with the reason in ``last_failure``."""
        if workspaces is None:
            raise ValueError("the command editor works in a workspace: pass the edit node's workspaces")
        self.last_failure = None
        tools = workspaces.open(inp, resume=True)
        tools.operator = "command"
        tools.deadline = time.monotonic() + self.spec.timeout_s
        repair = bool(tools.resumed and inp.feedback)
        remove_tree(tools.root / "REPAIR.md")  # a folder, should the last command have made one there
        if repair:
            (tools.root / "REPAIR.md").write_text(REPAIR.format(feedback=inp.feedback), encoding="utf-8")
        prepare_records(tools.root)
        tools.root.chmod(0o700)  # what the command leaves there is the run user's: no one else may reach it
        install_bin(tools.root)
        task = tools.root / "TASK.md"
        if SHELL_TOOLS.splitlines()[1] not in task.read_text(encoding="utf-8"):
            task.write_text(task.read_text(encoding="utf-8") + SHELL_TOOLS, encoding="utf-8")
        tools.submitted = None
        server = ToolServer(tools, guard=lambda: unsafe_candidate(tools.candidate))
        with serve_tools(server) as tools_dir:
            code, seconds, output = self._run(bwrap_argv(tools.root, tools_dir, self.spec, repair))
        timed_out = code is None
        remove_tree(tools.root / "submitted.json")  # the run writes it, after the proposal, alone (a folder the
        # command made there too: `mkdir submitted.json` stopped the run with an IsADirectoryError)
        drop_set_id(tools.root)
        write_bytes(tools.root, "command.log", output.encode("utf-8"))
        tools.log({"kind": "command", "command": (self.spec.repair_cmd or self.spec.cmd) if repair else
                   self.spec.cmd, "exit": code, "seconds": round(seconds, 1), "timed_out": timed_out,
                   "calls": journal(server.calls), "output": output[-4000:]})
        return self._take_back(tools, code, output)

    def _run(self, argv: list[str]) -> tuple[int | None, float, str]:
        """Run the sandboxed command; (exit status or None when killed at the time limit, seconds, output)."""
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
        assert proc.stdout is not None
        out = Output(proc.stdout)
        code: int | None = None
        try:
            code = proc.wait(timeout=self.spec.timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:  # at the time limit, or when the run itself is interrupted
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # bubblewrap dies, and with it the sandbox's PID namespace
                proc.wait()
        return code, time.monotonic() - start, out.text()

    def _fail(self, tools: EditorTools, why: str) -> None:
        self.last_failure = why
        tools.log({"kind": "failure", "reason": why})

    def _take_back(self, tools: EditorTools, code: int | None, output: str) -> Proposal | None:
        """The proposal from ``candidate/`` (as the command left it), or None with the reason."""
        last = output.strip().splitlines()[-1][:200] if output.strip() else "no output"
        unsafe = unsafe_candidate(tools.candidate)
        if unsafe:
            self._fail(tools, f"the editor command left {unsafe}")
            return None
        submitted = tools.submitted
        if submitted is not None and submitted.edits == candidate_edits(tools.env.parent_dir, tools.candidate):
            return submitted  # what it submitted, even if it then ran past its time
        if code is None:
            self._fail(tools, f"the editor command timed out after {self.spec.timeout_s:.0f} s and was killed "
                              f"(last output: {last!r})")
            return None
        if submitted is None and code != 0:
            self._fail(tools, f"the editor command exited with status {code} without calling bin/submit "
                              f"(last output: {last!r})")
            return None
        if submitted is None and not candidate_edits(tools.env.parent_dir, tools.candidate):
            self._fail(tools, "the editor command ended without changing candidate/ or calling bin/submit "
                              f"(last output: {last!r})")
            return None
        args = submitted.model_dump(include={"rationale", "applies_when", "preserve"}) if submitted else {
            "rationale": f"(the editor command exited 0 without bin/submit; its last output: {last})"}
        text, ok = tools.call("submit", args)  # changed after its submit, or never submitted: take it as it is
        if not ok or tools.submitted is None:
            self._fail(tools, f"the candidate the editor command left cannot be taken back: {text}")
            return None
        return tools.submitted
