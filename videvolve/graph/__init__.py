"""The loop as a LangGraph state machine: state, run context, routing, ``build_graph()``.

The names load on first use, so that reading the settings (``graph.context``) does not import LangGraph.
"""

from typing import Any

__all__ = ["Context", "State", "build_graph"]


def __getattr__(name: str) -> Any:
    """``Context``, ``State`` and ``build_graph`` from their modules, on first use."""
    if name == "Context":
        from videvolve.graph.context import Context

        return Context
    if name == "State":
        from videvolve.graph.state import State

        return State
    if name == "build_graph":
        from videvolve.graph.builder import build_graph

        return build_graph
    raise AttributeError(name)
