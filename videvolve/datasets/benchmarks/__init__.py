"""Every benchmark's loader, submission writer and official scorer, by name."""

from videvolve.datasets.benchmarks import grounding, mcq  # noqa: F401  (they register themselves)
from videvolve.datasets.benchmarks.registry import REGISTRY, Benchmark

__all__ = ["REGISTRY", "Benchmark"]
