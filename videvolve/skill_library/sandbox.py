"""Launch harness code in a confined child process, as an unprivileged user.

bubblewrap (the default): new network, PID, IPC and UTS namespaces; the file system holds only the interpreter and
is read-only throughout (a file in a tmpfs is the machine's memory, outside every limit of the child's: empty files
cost no bytes of a tmpfs's size, and under a user namespace the root and ``/dev`` belong to the child's uid); a
seccomp filter (no namespace of its own, no System V shared memory: :mod:`~videvolve.skill_library.seccomp`); an
empty environment; the child is its own session and dies with its parent. The harness code and the SDK travel in the
init message and the bootstrap in ``-c``, so nothing is written to disk for the sandbox and there is no folder to
clean up. The child always runs as a real unprivileged uid
(65534), so ``RLIMIT_NPROC`` and the other limits hold:

- started by root: bubblewrap keeps only CAP_SETUID and CAP_SETGID, and the bootstrap drops to 65534 before it
  reads anything (uid 0 inside a user namespace would still be root to the kernel's process count);
- started by a normal user: a new user namespace maps uid 65534 inside to that user, who has no privileges.

Where bubblewrap cannot run, harness code is refused unless the user passed ``--allow-weak-sandbox``; then it runs
under ``unshare`` (own network, PID, IPC and UTS namespaces, unprivileged) on the machine's own file system, with
no seccomp filter: it has no network interface, but it can do all of :data:`WEAK_SANDBOX_HOLES`.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from videvolve.errors import SandboxStartError
from videvolve.skill_library import seccomp

log = logging.getLogger(__name__)
UNPRIVILEGED_UID = 65534
WEAK_SANDBOX_HOLES = ("read every file the unprivileged user can read (your tasks' answers included), write "
                      "files that outlive the task in every world-writable folder (/tmp, /var/tmp, /run/lock, and "
                      "/dev/shm: the machine's memory, outside its limits), and reach the machine's services over "
                      "Unix sockets in the file system")
"""What harness code past the static check can do under ``unshare`` (``--allow-weak-sandbox``), said wherever the
weak sandbox is offered or used: the network namespace hides TCP, UDP and abstract sockets, not path sockets."""
_PROBE = ("import os\nif os.getuid() == 0:\n    os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
          "print('ok', os.getuid())")


@dataclass(frozen=True)
class Sandbox:
    """How to start a confined interpreter."""

    mode: str
    """``bwrap`` or ``unshare`` (the weak fallback)."""
    python: str

    def command(self, code: str | None = None, seccomp_fd: int | None = None) -> list[str]:
        """Argv that runs ``python -I -S -c code`` (the bootstrap by default) in the sandbox.

        ``seccomp_fd``: bubblewrap's child gets the filter read from it (:mod:`~videvolve.skill_library.seccomp`).
        """
        tail = [self.python, "-I", "-S", "-c", code if code is not None else bootstrap_source()]
        if self.mode == "bwrap":
            return [*_bwrap_prefix(self.python), *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
                    *tail]
        flags = ["--net", "--pid", "--fork", "--ipc", "--uts", "--kill-child"]
        if os.geteuid() != 0:
            flags.insert(0, "--user")
        return ["unshare", *flags, *tail]


    def popen(self, code: str | None = None, **kwargs: Any) -> subprocess.Popen[Any]:
        """Start :meth:`command` with an empty environment, no descriptor but the filter's (bubblewrap reads it)."""
        fd = seccomp.filter_fd() if self.mode == "bwrap" else None
        try:
            return subprocess.Popen(self.command(code, fd), env={}, close_fds=True,
                                    pass_fds=() if fd is None else (fd,), **kwargs)
        finally:
            if fd is not None:
                os.close(fd)


@functools.lru_cache(maxsize=1)
def bootstrap_source() -> str:
    """The trusted bootstrap, run with ``-c``."""
    return (resources.files("videvolve.skill_library") / "bootstrap.py").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def sdk_source() -> str:
    """The SDK module's source, executed by the bootstrap in a namespace of its own."""
    return (resources.files("videvolve.skill_library") / "sdk.py").read_text(encoding="utf-8")


def _base_python() -> str:
    exe = getattr(sys, "_base_executable", sys.executable)
    return os.path.realpath(exe)


@functools.cache
def bwrap_sizes_tmpfs() -> bool:
    """Whether this bubblewrap has ``--size`` (0.8.0 and later)."""
    try:
        out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in out.stdout + out.stderr


def tmpfs(path: str, size: int) -> list[str]:
    """The arguments for a tmpfs of at most ``size`` bytes at ``path`` (without a bound, and a warning, before 0.8)."""
    if bwrap_sizes_tmpfs():
        return ["--size", str(size), "--tmpfs", path]
    log.warning("bubblewrap here has no --size (0.8.0 and later): %s is bounded only by the machine's memory", path)
    return ["--tmpfs", path]


def ro_bind(path: Path, made: set[Path]) -> list[str]:
    """Bind ``path`` read-only, first making its ancestors 0755 (bubblewrap makes them 0700, closed to uid 65534)."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent != Path("/") and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return [*args, "--ro-bind", str(path), str(path)]


def system_binds(made: set[Path]) -> list[str]:
    """The system's programs and libraries, read-only: /usr, and /lib*, /bin, /sbin as links or binds."""
    args = ["--ro-bind", "/usr", "/usr"]
    made.add(Path("/usr"))
    for top in ("lib", "lib64", "lib32", "bin", "sbin"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ro_bind(p, made)
    return args


def _bwrap_prefix(python: str) -> list[str]:
    args = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if os.geteuid() == 0:  # no user namespace: the bootstrap drops to a real unprivileged uid itself
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--uid", str(UNPRIVILEGED_UID), "--gid", str(UNPRIVILEGED_UID)]
    made: set[Path] = set()
    args += system_binds(made)
    prefix = Path(sys.base_prefix).resolve()
    if not str(prefix).startswith("/usr"):
        args += ro_bind(prefix, made)
    py_dir = Path(python).parent
    if not str(py_dir).startswith(("/usr", str(prefix))):
        args += ro_bind(py_dir, made)
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--dir", "/tmp", "--remount-ro", "/",
             "--chdir", "/tmp"]  # read-only last: the mount points above are made in the root first
    return args


def _works(sandbox: Sandbox) -> tuple[bool, str]:
    try:
        proc = sandbox.popen(_PROBE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        return False, str(exc)
    ok = proc.returncode == 0 and out.strip() == f"ok {UNPRIVILEGED_UID}"
    return ok, (err or out).strip()[-300:]


@functools.lru_cache(maxsize=2)
def get_sandbox(allow_weak: bool = False) -> Sandbox:
    """The best sandbox this machine supports (checked once per process); the weak one only if allowed."""
    python = _base_python()
    if shutil.which("bwrap"):
        sb = Sandbox("bwrap", python)
        ok, why = _works(sb)
        if ok:
            return sb
        reason = f"bubblewrap failed: {why}"
    else:
        reason = "bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)"
    if not allow_weak:
        raise SandboxStartError(f"no sandbox for harness code: {reason}. Fix bubblewrap, or pass "
                                "--allow-weak-sandbox to run harness code under `unshare`, where it can "
                                f"{WEAK_SANDBOX_HOLES}; everything finished is kept: fix it, then resume")
    if shutil.which("unshare"):
        sb = Sandbox("unshare", python)
        ok, why = _works(sb)
        if ok:
            message = (f"WEAK SANDBOX (--allow-weak-sandbox): {reason}. Harness code runs under `unshare` (no "
                       "network interface, own PID namespace, unprivileged user) but can "
                       f"{WEAK_SANDBOX_HOLES}.")
            log.warning(message)
            print(f"warning: {message}", file=sys.stderr)
            return sb
        reason += f"; unshare failed: {why}"
    raise SandboxStartError(f"no sandbox available for harness code: {reason} (`videvolve doctor` checks the sandbox; "
                            "everything finished is kept: fix it, then resume)")
