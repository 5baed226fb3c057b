"""Where (harness, task) evaluations run: threads of this process, or Ray tasks (one sandboxed runner each).

Ray is an optional extra (``pip install 'videvolve[ray]'``). Each Ray task rebuilds the model client from its
settings, runs the task in its own sandbox and writes the result into the same run directory (a file system all
workers share), so resuming and skipping finished work behave exactly as with local threads.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import HostError, VidevolveError

CONNECT_S = 10.0
"""Seconds a cluster named by ``--ray-address`` has to answer (Ray itself would try for about 13 minutes)."""
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # preface, empty SETTINGS


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise VidevolveError("--executor ray needs Ray: pip install 'videvolve[ray]'") from None
    return ray


def ensure_ray(address: str | None = None) -> Any:
    """Connect to a cluster (``address``) or start a local Ray instance, once per process.

    Without an address, a local instance even where the machine has a cluster (``ray start``, ``RAY_ADDRESS``): Ray
    would join that one, and its CPUs are not ours to set.
    """
    ray = _ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            _check_cluster(address)
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError) as exc:
                raise HostError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]} (check that "
                                f"`ray status --address {address}` works from this machine: the same Ray version, "
                                "and the cluster's auth token where it has one; or leave out --ray-address to run "
                                "on a local Ray instance)") from exc
        else:
            ray.init(address="local", num_cpus=os.cpu_count() or 1, **kwargs)  # not RAY_ADDRESS's, nor `ray start`'s
    return ray


def _check_cluster(address: str, timeout: float = CONNECT_S) -> None:
    """:class:`HostError` at once where nothing at ``host:port`` speaks gRPC, as a Ray head (its GCS) does.

    Else ``ray.init`` retries for about 13 minutes, printing only warnings, before it gives up. ``auto`` and other
    forms that are not ``[ray://]host:port`` are left to Ray.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    reply = b""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(_HTTP2_HELLO)
            while len(reply) < 9 and (chunk := conn.recv(9 - len(reply))):
                reply += chunk
        problem = None if len(reply) == 9 and reply[3] == 4 else "it answers, but not as a Ray head (gRPC) does"
    except OSError as exc:  # refused, unknown host, timed out
        problem = exc.strerror or str(exc) or type(exc).__name__
    if problem is not None:
        raise HostError(f"no Ray cluster answers at {address} ({problem}): start one there (`ray start --head "
                        f"--port {port}` on that machine), check the address (the head's GCS port, 6379 by default, "
                        "not the dashboard's 8265), or leave out --ray-address to run on a local Ray instance")


T = TypeVar("T")


class InFlight(Generic[T]):
    """Ray tasks started ``limit`` at a time, a new one as each ends; iterated as they end, (item, ref) each.

    What ``--concurrency`` (``--workers`` for ``tasks generate``) says on threads it says on a cluster too: a
    cluster of a hundred cores behind one vLLM would otherwise send it a hundred requests at once. Items not yet
    started are never started once the caller stops iterating; :meth:`cancel` stops those under way.
    """

    def __init__(self, ray: Any, submit: Callable[[T], Any], items: Iterable[T], limit: int) -> None:
        self._ray, self._submit, self._items, self._limit = ray, submit, iter(items), max(1, limit)
        self._running: dict[Any, T] = {}

    def _top_up(self) -> None:
        for item in self._items:
            self._running[self._submit(item)] = item
            if len(self._running) >= self._limit:
                return

    def __iter__(self) -> Iterator[tuple[T, Any]]:
        if len(self._running) < self._limit:
            self._top_up()
        while self._running:
            (ref,), _ = self._ray.wait(list(self._running), num_returns=1)
            yield self._running.pop(ref), ref
            self._top_up()

    def cancel(self, force: bool = False) -> None:
        """Stop the tasks under way (``force``: their workers killed, as Ctrl-C does)."""
        for ref in self._running:
            self._ray.cancel(ref, force=force)


def _remote_task(harness_dir: str, task_json: str, view_id: str, key: str, model_json: str, runtime_json: str,
                 family: str, out_dir: str, cache_path: str | None, revision: str | None = None) -> str:
    from videvolve.evaluation.one_task import run_one
    from videvolve.models import make_vlm
    from videvolve.models.cache import ResponseCache
    from videvolve.models.cost import cost_model
    from videvolve.skill_library.harness import load_harness
    from videvolve.tasks import Task

    cache = ResponseCache(cache_path) if cache_path else None
    model = ModelSettings.model_validate_json(model_json)
    result = run_one(load_harness(harness_dir), Task.model_validate_json(task_json),
                     make_vlm(model), cost_model(family, model.max_pixels),
                     RuntimeSettings.model_validate_json(runtime_json), Path(out_dir), cache, view_id,
                     produced_by=key, revision=revision)
    return result.model_dump_json()


def run_on_ray(harness_dir: Path, tasks: Sequence[Any], view_ids: dict[str, str], keys: dict[str, str],
               model: ModelSettings,
               runtime: RuntimeSettings, out_dir: Path, cache_path: str | None, address: str | None,
               on_result: Callable[[Any], None] | None = None, revision: str | None = None) -> list[Any]:
    """Evaluate tasks as Ray tasks; an error raised on purpose in a worker (an endpoint down, a full disk) as itself.

    ``runtime.concurrency`` of them run at once, on a cluster as on threads (:class:`InFlight`). Paths are sent
    absolute: a cluster's workers do not run in this process's working directory. ``revision``: the model's revision
    ``keys`` name (a result a worker's model answered under another is keyed by none,
    :func:`~videvolve.evaluation.one_task.run_one`).
    """
    from videvolve.evaluation.results import TaskResult

    ray = ensure_ray(address)
    remote = ray.remote(num_cpus=1)(_remote_task)
    cache = str(Path(cache_path).resolve()) if cache_path else None
    flight = InFlight(ray, lambda t: remote.remote(
        str(harness_dir.resolve()), t.model_dump_json(), view_ids[t.id], keys[t.id], model.model_dump_json(),
        runtime.model_dump_json(), model.family, str(out_dir.resolve()), cache, revision), tasks, runtime.concurrency)
    results: list[Any] = []
    which = "?"
    try:
        for task, ref in flight:
            which = task.id
            result = TaskResult.model_validate_json(ray.get(ref))
            results.append(result)
            if on_result:
                on_result(result)
    except KeyboardInterrupt:  # Ctrl-C: stop the workers and the local cluster (finished results are on disk)
        flight.cancel(force=True)
        ray.shutdown()
        raise
    except ray.exceptions.RayError as exc:
        flight.cancel()
        cause = getattr(exc, "cause", None)
        if isinstance(cause, VidevolveError):  # InfraError, HostError (a full disk): the clean stop they are
            raise cause from None
        if isinstance(exc, ray.exceptions.RayTaskError):  # a bug in the code it ran, said as one
            raise
        raise HostError(f"Ray could not run task {which}: {str(exc).splitlines()[0]} (its worker died each time it "
                        "was tried: out of memory, or a node lost?); everything finished is kept") from exc
    except BaseException:  # anything else that stops the run here (a result it cannot keep): nothing left running
        flight.cancel()
        raise
    return results
