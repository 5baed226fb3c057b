"""Every benchmark's loader, submission writer and official scorer, by name."""

from pathlib import Path

from videvolve.datasets.benchmarks import grounding, mcq  # noqa: F401  (they register themselves)
from videvolve.datasets.benchmarks.registry import REGISTRY, Benchmark
from videvolve.errors import UsageError
from videvolve.tasks import Task

__all__ = ["REGISTRY", "Benchmark", "import_benchmark"]


def import_benchmark(benchmark: str, annotations: str | Path, videos_dir: str | Path,
                     meta: str | Path | None = None) -> list[Task]:
    """Tasks from a benchmark's annotation file (names: ``REGISTRY``)."""
    if benchmark not in REGISTRY:
        raise UsageError(f"no loader for {benchmark!r}; available: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[benchmark].load(Path(annotations), Path(videos_dir), Path(meta) if meta else None)
