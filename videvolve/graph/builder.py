"""``build_graph()``: the uncompiled loop. The CLI compiles it with a SQLite checkpointer, tests in memory.

Its runtime context is the run's services (:class:`~videvolve.loop.services.Run`), given to ``stream``/``invoke``
as ``context=``: every node reads them from ``runtime.context``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph

from videvolve.graph.routing import route_after_edit, route_after_record, route_after_validate
from videvolve.loop.services import Run
from videvolve.loop.state import State
from videvolve.nodes import edit, gate, investigate, prepare, record, solve, validate

NODES = (prepare, solve, investigate, edit, validate, gate, record)
"""Every node, added under its function's name (``cli/evolve_cmd.py:NEXT`` says what follows each; a test checks)."""
GOES_ON = "record"
"""The node whose routing (``route_after_record``) decides whether the run goes on: a finished run that its settings
now let go further is resumed as if this node had just run (``graph/driver.py``)."""

NodeHook = Callable[[str, Callable[..., Any]], Callable[..., Any]]
"""Wraps a node by name (a test watches what a node does: the files it opens)."""


def build_graph(around: NodeHook | None = None) -> StateGraph[State, Run, State, State]:
    """Prepare -> solve -> investigate -> edit -> validate -> gate -> record -> (solve | END)."""
    g: StateGraph[State, Run, State, State] = StateGraph(State, context_schema=Run)
    for node in NODES:
        g.add_node(node.__name__, around(node.__name__, node) if around is not None else node)
    g.add_edge(START, "prepare")
    g.add_conditional_edges("prepare", route_after_record, {"solve": "solve", "__end__": END})
    g.add_edge("solve", "investigate")
    g.add_edge("investigate", "edit")
    g.add_conditional_edges("edit", route_after_edit, {"validate": "validate", "gate": "gate", "record": "record"})
    g.add_conditional_edges("validate", route_after_validate, {"gate": "gate", "edit": "edit", "record": "record"})
    g.add_edge("gate", "record")
    g.add_conditional_edges(GOES_ON, route_after_record, {"solve": "solve", "__end__": END})
    return g
