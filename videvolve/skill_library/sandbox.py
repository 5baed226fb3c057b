"""Launch harness code in a confined child process.

bubblewrap (preferred): new user, network, PID, IPC and UTS namespaces; the root file system holds only the
interpreter (read-only), the bootstrap and SDK (read-only) and a tmpfs; no capabilities; an empty environment; the
child is its own session and dies with its parent. Where bubblewrap cannot run, the runner says so loudly and
falls back to ``unshare`` (new network and PID namespaces) as an unprivileged user; with neither it refuses to
run harness code.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from videvolve.errors import HarnessError

log = logging.getLogger(__name__)
UNPRIVILEGED_UID = 65534


@dataclass(frozen=True)
class Sandbox:
    """How to start a confined interpreter."""

    mode: str
    """``bwrap`` or ``unshare``."""
    python: str
    runtime_dir: Path

    def command(self, harness_dir: Path) -> tuple[list[str], int | None]:
        """Argv to run the bootstrap, and the uid to run it as (None: the caller's)."""
        boot = ["-I", "-S", "/vv/bootstrap.py"] if self.mode == "bwrap" else \
            ["-I", "-S", str(self.runtime_dir / "bootstrap.py")]
        if self.mode == "bwrap":
            return [*_bwrap_prefix(self.python, self.runtime_dir, harness_dir), self.python, *boot], None
        user = UNPRIVILEGED_UID if os.geteuid() == 0 else None
        flags = ["--net", "--pid", "--fork", "--ipc", "--uts", "--kill-child"]
        if os.geteuid() != 0:
            flags.insert(0, "--user")
        return ["unshare", *flags, self.python, *boot], user


def _base_python() -> str:
    exe = getattr(sys, "_base_executable", sys.executable)
    return os.path.realpath(exe)


def _bwrap_prefix(python: str, runtime_dir: Path, harness_dir: Path) -> list[str]:
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
            "--ro-bind", "/usr", "/usr"]
    for top in ("lib", "lib64", "lib32", "bin", "sbin"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    prefix = Path(sys.base_prefix).resolve()
    if not str(prefix).startswith("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    py_dir = Path(python).parent
    if not str(py_dir).startswith(("/usr", str(prefix))):
        args += ["--ro-bind", str(py_dir), str(py_dir)]
    args += ["--ro-bind", str(runtime_dir), "/vv", "--ro-bind", str(harness_dir), "/harness",
             "--size", str(64 * 1024 * 1024), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
    return args


def _runtime_dir() -> Path:
    """A private folder holding the bootstrap and the SDK module (``videvolve_sdk.py``)."""
    d = Path(tempfile.mkdtemp(prefix="videvolve-sandbox-"))
    pkg = resources.files("videvolve.skill_library")
    (d / "bootstrap.py").write_text((pkg / "bootstrap.py").read_text(encoding="utf-8"))
    (d / "videvolve_sdk.py").write_text((pkg / "sdk.py").read_text(encoding="utf-8"))
    d.chmod(0o755)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def _works(sandbox: Sandbox) -> tuple[bool, str]:
    argv, user = sandbox.command(sandbox.runtime_dir)
    probe = [*argv[: argv.index(sandbox.python) + 1], "-I", "-S", "-c", "print('ok')"]
    try:
        r = subprocess.run(probe, capture_output=True, text=True, timeout=30, env={}, user=user,
                           close_fds=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return r.returncode == 0 and r.stdout.strip() == "ok", (r.stderr or r.stdout).strip()[-300:]


@functools.lru_cache(maxsize=1)
def get_sandbox() -> Sandbox:
    """The best sandbox this machine supports (checked once per process)."""
    runtime = _runtime_dir()
    python = _base_python()
    reasons = []
    if shutil.which("bwrap"):
        sb = Sandbox("bwrap", python, runtime)
        ok, why = _works(sb)
        if ok:
            return sb
        reasons.append(f"bubblewrap failed: {why}")
    else:
        reasons.append("bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)")
    if shutil.which("unshare"):
        sb = Sandbox("unshare", python, runtime)
        ok, why = _works(sb)
        if ok:
            message = ("SANDBOX FALLBACK: " + "; ".join(reasons) + ". Harness code runs under `unshare` (no network, "
                       "own PID namespace, unprivileged user) but can read any file that user can read.")
            log.warning(message)
            print(f"warning: {message}", file=sys.stderr)
            return sb
        reasons.append(f"unshare failed: {why}")
    raise HarnessError("no sandbox available for harness code: " + "; ".join(reasons))
