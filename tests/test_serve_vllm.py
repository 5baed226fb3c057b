"""serve-vllm starts vLLM with the flags harnesses need, waits until it serves, and stops it cleanly.

A fake ``vllm`` executable records its arguments and serves serve-sim in its place.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

FAKE = '''#!{python}
import json, os, sys
json.dump(sys.argv[1:], open({record!r}, "w"))
args = sys.argv[1:]
port = args[args.index("--port") + 1]
name = args[args.index("--served-model-name") + 1] if "--served-model-name" in args else args[1]
key = ["--api-key", args[args.index("--api-key") + 1]] if "--api-key" in args else []
os.execv({python!r}, [{python!r}, "-m", "videvolve", "serve-sim", "--port", port, "--model", name, *key])
'''


@pytest.mark.slow
def test_serve_vllm_with_a_fake_vllm(tmp_path: Path, reserved_tcp_port: int):
    record = tmp_path / "args.json"
    fake = tmp_path / "vllm"
    fake.write_text(FAKE.format(python=sys.executable, record=str(record)))
    fake.chmod(0o755)
    port = reserved_tcp_port
    proc = subprocess.Popen([sys.executable, "-m", "videvolve", "serve-vllm", "Qwen/Qwen2.5-VL-7B-Instruct",
                             "--vllm-bin", str(fake), "--port", str(port), "--max-model-len", "32768",
                             "--allowed-local-media-path", str(tmp_path), "--ready-timeout", "60", "--",
                             "--gpu-memory-utilization", "0.9"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None  # stdout=PIPE
        line = proc.stdout.readline()  # blocks until "ready: ..."
        assert line.startswith("ready:") and f"http://127.0.0.1:{port}/v1" in line
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert models["data"][0]["id"] == "Qwen/Qwen2.5-VL-7B-Instruct"
        args = json.loads(record.read_text())
        assert args[:2] == ["serve", "Qwen/Qwen2.5-VL-7B-Instruct"]
        for flag in ("--enable-auto-tool-choice", "--tool-call-parser", "--limit-mm-per-prompt", "--max-model-len",
                     "--allowed-local-media-path", "--gpu-memory-utilization"):
            assert flag in args
        assert json.loads(args[args.index("--limit-mm-per-prompt") + 1]) == {"image": 256, "video": 1}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        time.sleep(0.5)
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            raise AssertionError("the server still answers after serve-vllm stopped")
        except httpx.HTTPError:
            pass
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_serve_vllm_reports_a_missing_binary_and_a_crash(tmp_path: Path, reserved_tcp_port: int):
    r = subprocess.run([sys.executable, "-m", "videvolve", "serve-vllm", "m", "--vllm-bin", str(tmp_path / "none")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "vLLM not found" in r.stderr
    crash = tmp_path / "vllm"
    crash.write_text(f"#!{sys.executable}\nimport sys\nprint('CUDA out of memory')\nsys.exit(1)\n")
    crash.chmod(0o755)
    r = subprocess.run([sys.executable, "-m", "videvolve", "serve-vllm", "m", "--vllm-bin", str(crash), "--port",
                        str(reserved_tcp_port)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "exited with code 1" in r.stderr and "CUDA out of memory" in r.stderr  # the server


@pytest.mark.slow
def test_serve_vllm_ready_by_served_name_with_a_key(tmp_path: Path, reserved_tcp_port: int):
    record = tmp_path / "args.json"
    fake = tmp_path / "vllm"
    fake.write_text(FAKE.format(python=sys.executable, record=str(record)))
    fake.chmod(0o755)
    port = reserved_tcp_port
    proc = subprocess.Popen([sys.executable, "-m", "videvolve", "serve-vllm", "Qwen/Qwen3-VL-8B-Instruct", "--vllm-bin",
                             str(fake), "--port", str(port), "--api-key", "s3cret", "--served-model-name", "qwen",
                             "--ready-timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None  # both PIPE
        line = proc.stdout.readline()  # readiness polls with the key and waits for the served name
        assert line.startswith("ready:") and "--model qwen" in line
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert "s3cret" not in proc.stderr.read()  # the key is not echoed
    finally:
        if proc.poll() is None:
            proc.kill()
