"""Start vLLM (a separate installation) with the flags harnesses need, wait until it serves, stop it cleanly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from videvolve.errors import EndpointError, InfraError, InputNotFoundError


def vllm_command(model: str, vllm_bin: str, host: str = "127.0.0.1", port: int = 8000,
                 max_model_len: int | None = None, images: int = 256, tool_call_parser: str = "hermes",
                 local_media: str | None = None, extra: Sequence[str] = (), api_key: str | None = None,
                 served_model_name: str | None = None) -> list[str]:
    """The ``vllm serve`` command line: tool calling on, enough images per request, optional local media path.

    ``--trust-request-mm-kwargs``: vLLM 0.34 refuses a request's ``media_io_kwargs`` and ``mm_processor_kwargs``
    without it (vllm/entrypoints/generate/base/protocol.py:72-97), and a clip sent as a video carries both
    (:func:`videvolve.models.openai_backend.media_request`).
    """
    cmd = [vllm_bin, "serve", model, "--host", host, "--port", str(port), "--enable-auto-tool-choice",
           "--tool-call-parser", tool_call_parser, "--limit-mm-per-prompt", json.dumps({"image": images, "video": 1}),
           "--trust-request-mm-kwargs"]
    if api_key:
        cmd += ["--api-key", api_key]
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    if local_media:
        cmd += ["--allowed-local-media-path", local_media]
    return [*cmd, *extra]


def find_vllm(vllm_bin: str | None) -> str:
    """The vLLM executable: the given one, or ``vllm`` on PATH."""
    found = vllm_bin if vllm_bin and Path(vllm_bin).exists() else shutil.which(vllm_bin or "vllm")
    if not found:
        raise InputNotFoundError("vLLM not found: install it in its own environment (`python -m venv ~/vllm && "
                                "~/vllm/bin/pip install vllm`) and pass --vllm-bin ~/vllm/bin/vllm")
    return found


class VLLMServer:
    """A running ``vllm serve``; logs go to ``log_path``."""

    def __init__(self, command: list[str], host: str, port: int, log_path: Path, api_key: str | None = None) -> None:
        self.command = command
        reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # a wildcard bind is reached on loopback here
        self.base_url = f"http://{reach}:{port}/v1"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Launch it in its own session (so stopping it stops its workers too)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 1800.0, model: str | None = None) -> list[str]:
        """Poll ``/v1/models`` (with the API key) until it serves ``model`` (the served name); the served names."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise InfraError(f"vLLM exited with code {self.proc.returncode} before serving; its log "
                                 f"({self.log_path}) ends with:\n{self.log_tail()}")
            try:
                r = httpx.get(f"{self.base_url}/models", headers=self.headers, timeout=5)
                if r.status_code == 401:
                    self.stop()
                    raise EndpointError(f"vLLM at {self.base_url} refuses the API key given (401)")
                if r.status_code == 200:
                    names = [m.get("id") for m in r.json().get("data", [])]
                    if model is None or model in names:
                        return names
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.stop()
        raise InfraError(f"vLLM did not answer at {self.base_url} within {timeout:.0f} s; see {self.log_path}")

    def log_tail(self, n: int = 20) -> str:
        """The last lines of the log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to its process group, then SIGKILL after ``grace`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass
