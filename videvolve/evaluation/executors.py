"""Where (harness, task) evaluations run: threads of this process, or Ray tasks (one sandboxed runner each).

Ray is an optional extra (``pip install 'videvolve[ray]'``). Each Ray task rebuilds the model client from its
settings, runs the task in its own sandbox and writes the result into the same run directory (a file system all
workers share), so resuming and skipping finished work behave exactly as with local threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import VidevolveError


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise VidevolveError("--executor ray needs Ray: pip install 'videvolve[ray]'") from None
    return ray


def ensure_ray(address: str | None = None) -> Any:
    """Connect to a cluster (``address``) or start a local Ray instance, once per process."""
    ray = _ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=os.cpu_count() or 1, **kwargs)
    return ray


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

    ``revision``: the model's revision ``keys`` name (a result a worker's model answered under another is keyed by
    none, :func:`~videvolve.evaluation.one_task.run_one`).
    """
    from videvolve.evaluation.results import TaskResult

    ray = ensure_ray(address)
    remote = ray.remote(num_cpus=1)(_remote_task)
    refs = [remote.remote(str(harness_dir), t.model_dump_json(), view_ids[t.id], keys[t.id], model.model_dump_json(),
                          runtime.model_dump_json(), model.family, str(out_dir), cache_path, revision)
            for t in tasks]
    results: list[Any] = []
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            result = TaskResult.model_validate_json(ray.get(done[0]))
            results.append(result)
            if on_result:
                on_result(result)
    except KeyboardInterrupt:  # Ctrl-C: stop the workers and the local cluster (finished results are on disk)
        for ref in pending:
            ray.cancel(ref, force=True)
        ray.shutdown()
        raise
    except ray.exceptions.RayTaskError as exc:
        for ref in pending:
            ray.cancel(ref)
        cause = getattr(exc, "cause", None)
        if isinstance(cause, VidevolveError):  # InfraError, HostError (a full disk): the clean stop they are
            raise cause from None
        raise
    return results
