"""videvolve: a self-improving agent for long-video understanding."""

__version__ = "0.1.0"

from typing import Any


def __getattr__(name: str) -> Any:
    """``videvolve.load_harness`` without importing the whole package at start-up."""
    if name == "load_harness":
        from videvolve.api import load_harness

        return load_harness
    raise AttributeError(name)
