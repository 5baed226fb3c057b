"""The loop as a LangGraph state machine: routing, ``build_graph()`` and the driver (``evolve``).

The settings, state and services the nodes share live below the nodes, in ``videvolve.loop``; ``Context`` and
``State`` are re-exported here. The names load on first use, so that reading the settings does not import
LangGraph.
"""

from typing import Any

__all__ = ["Context", "State", "build_graph"]


def __getattr__(name: str) -> Any:
    """``Context``, ``State`` and ``build_graph`` from their modules, on first use."""
    if name == "Context":
        from videvolve.loop.context import Context

        return Context
    if name == "State":
        from videvolve.loop.state import State

        return State
    if name == "build_graph":
        from videvolve.graph.builder import build_graph

        return build_graph
    raise AttributeError(name)
