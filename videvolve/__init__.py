"""videvolve: a self-improving agent for long-video understanding."""

__version__ = "0.1.0"

from typing import Any


def __getattr__(name: str) -> Any:
    """``videvolve.load_harness`` and ``videvolve.evaluate`` without importing the whole package at start-up."""
    if name in ("load_harness", "evaluate"):
        from videvolve import api

        return getattr(api, name)
    raise AttributeError(name)
