"""The loop as a LangGraph state machine: state, run context, routing, ``build_graph()``."""

from videvolve.graph.builder import build_graph
from videvolve.graph.context import Context
from videvolve.graph.state import State

__all__ = ["Context", "State", "build_graph"]
