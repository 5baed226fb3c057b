"""videvolve: a self-improving agent for long-video understanding."""

from typing import Any

from videvolve.version import __version__

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    """``videvolve.load_harness`` and ``videvolve.evaluate`` without importing the whole package at start-up."""
    if name in ("load_harness", "evaluate"):
        from videvolve import api

        return getattr(api, name)
    raise AttributeError(name)
