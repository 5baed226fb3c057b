"""``build_graph()``: the uncompiled loop. The CLI compiles it with a SQLite checkpointer, tests in memory."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from videvolve.graph.context import Context
from videvolve.graph.routing import route_after_edit, route_after_record, route_after_validate
from videvolve.graph.state import State
from videvolve.nodes import edit, gate, investigate, prepare, record, solve, validate


def build_graph() -> StateGraph[State, Context, State, State]:
    """Prepare -> solve -> investigate -> edit -> validate -> gate -> record -> (solve | END)."""
    g: StateGraph[State, Context, State, State] = StateGraph(State, context_schema=Context)
    for node in (prepare, solve, investigate, edit, validate, gate, record):
        g.add_node(node)
    g.add_edge(START, "prepare")
    g.add_conditional_edges("prepare", route_after_record, {"solve": "solve", "__end__": END})
    g.add_edge("solve", "investigate")
    g.add_edge("investigate", "edit")
    g.add_conditional_edges("edit", route_after_edit, {"validate": "validate", "gate": "gate", "record": "record"})
    g.add_conditional_edges("validate", route_after_validate, {"gate": "gate", "edit": "edit", "record": "record"})
    g.add_edge("gate", "record")
    g.add_conditional_edges("record", route_after_record, {"solve": "solve", "__end__": END})
    return g
