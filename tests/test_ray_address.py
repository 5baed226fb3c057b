"""`--ray-address`: a cluster that is not there is said at once, in words, with what to do."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from videvolve.testing import reserved_port

pytestmark = pytest.mark.slow  # the command's own start, and Ray's imports


@pytest.fixture()
def web_server() -> Iterator[int]:
    """A real HTTP/1.1 server on 127.0.0.1 (say, Ray's dashboard given instead of the head's GCS port)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("there", ["nothing", "a web server"])
def test_a_ray_address_with_no_cluster_is_said_at_once(small_world, seed: Path, tmp_path: Path, web_server: int,
                                                      there: str):
    """main: no word for about 13 minutes (Ray tries the address 20 times, 40 s each, printing only its own
    warnings), then a crash said as a bug in videvolve."""
    with reserved_port() as free:  # held: connections to it are refused
        port = free if there == "nothing" else web_server
        run = subprocess.run([sys.executable, "-m", "videvolve", "eval", "--tasks", str(small_world.tasks_path),
                              "--split", "all", "--limit", "1", "--harness", str(seed), "--out", str(tmp_path / "out"),
                              "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--no-cache"],
                             capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    assert f"run stopped: no Ray cluster answers at 127.0.0.1:{port}" in run.stderr
    assert "ray start --head" in run.stderr and "leave out --ray-address" in run.stderr
