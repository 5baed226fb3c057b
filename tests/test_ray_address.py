"""`--ray-address`: a cluster that is not there is said at once, in words, with what to do."""

from __future__ import annotations

import http.server
import os
import shutil
import sqlite3
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


CLUSTER = """
import sys, ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the test closes it
ray.shutdown()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path]]:
    """(address, environment to join it with, working folder) of a Ray cluster in a folder of its own.

    Started by another process's ``ray.init``, not `ray start`: that names itself the machine's current cluster, which
    every ``ray.init()`` on the machine would then join. Its auth token is this test's own.
    """
    import secrets

    cwd = tmp_path_factory.mktemp("cluster_cwd")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        address = proc.stdout.readline().strip()
        assert address, "the cluster did not start"
        yield address, env, cwd
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_relative_folders_on_a_cluster(small_world, seed: Path, tmp_path: Path,
                                       cluster: tuple[str, dict[str, str], Path]):
    """main: exit 2, "harness out/harnesses/... is not valid: ... is not a directory" (each worker read the harness,
    and would have written the results and the response cache, under the cluster's working folder, not this one)."""
    address, env, cluster_cwd = cluster
    shutil.copytree(seed, tmp_path / "harness")
    run = subprocess.run([sys.executable, "-m", "videvolve", "eval", "--tasks", str(small_world.tasks_path),
                          "--split", "all", "--limit", "2", "--harness", "harness", "--out", "out", "--cache",
                          "cache.sqlite", "--executor", "ray", "--ray-address", address],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert len(list((tmp_path / "out" / "results").glob("*.json"))) == 2
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:  # the workers' replies are in this folder's cache
        assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] > 0
    assert not list(cluster_cwd.iterdir())  # and nothing was written where the cluster runs


def test_a_cluster_that_refuses_us_is_said_in_words(small_world, seed: Path, tmp_path: Path,
                                                    cluster: tuple[str, dict[str, str], Path]):
    """main: exit 70 after about 20 s, "This is a bug in videvolve" (Ray's ConnectionError on a wrong auth token)."""
    address, env, _ = cluster
    run = subprocess.run([sys.executable, "-m", "videvolve", "eval", "--tasks", str(small_world.tasks_path),
                          "--split", "all", "--limit", "1", "--harness", str(seed), "--out", str(tmp_path / "out"),
                          "--no-cache", "--executor", "ray", "--ray-address", address],
                         env={**env, "RAY_AUTH_TOKEN": "not-the-token"}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stderr
    assert f"run stopped: cannot join the Ray cluster at {address}" in run.stderr
    assert "auth token" in run.stderr and "bug" not in run.stderr


def test_without_an_address_a_local_instance_runs_whatever_cluster_the_machine_has(
        small_world, seed: Path, tmp_path: Path, cluster: tuple[str, dict[str, str], Path]):
    """main: exit 70, "When connecting to an existing cluster, num_cpus and num_gpus must not be provided" (ray.init
    joins the cluster RAY_ADDRESS or `ray start` names, and refused the local instance's CPU count)."""
    address, env, _ = cluster
    run = subprocess.run([sys.executable, "-m", "videvolve", "eval", "--tasks", str(small_world.tasks_path),
                          "--split", "all", "--limit", "1", "--harness", str(seed), "--out", str(tmp_path / "out"),
                          "--no-cache", "--executor", "ray"],
                         env={**env, "RAY_ADDRESS": address}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Started a local Ray instance" in run.stderr
