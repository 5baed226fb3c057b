"""Run the loop for a context: compile with a SQLite checkpointer in the run directory, stream, resume."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver

from videvolve.graph.builder import build_graph
from videvolve.graph.context import Context
from videvolve.graph.run import close_run, get_run
from videvolve.graph.state import State
from videvolve.search.mixture import build_mixture

OnUpdate = Callable[[str, dict[str, Any], dict[str, Any]], None]
"""Called with (node, its update, the state so far) after every node."""


def evolve(ctx: Context, on_update: OnUpdate | None = None) -> dict[str, Any]:
    """Run (or resume: same run directory, same thread id) until a stop reason; returns the final state.

    A finished run whose settings now allow more (``iterations``, ``hours``, ...) is extended. A new run's tasks and
    services are opened before its directory is written, so a start they refuse leaves nothing behind.
    """
    run = ctx.root
    if not (run / "settings.json").exists():  # a start refused (bad tasks file, settings that cannot run) leaves no
        try:                                   # run behind: a corrected command starts afresh, without --resume
            get_run(ctx)
        except BaseException:
            close_run(ctx)
            raise
    run.mkdir(parents=True, exist_ok=True)
    run.chmod(0o700)  # evaluations and traces hold the answers of the selection set
    (run / "settings.json").write_text(ctx.model_dump_json(indent=2))
    conn = sqlite3.connect(str(run / "checkpoints.sqlite"), check_same_thread=False)
    try:
        graph = build_graph().compile(checkpointer=SqliteSaver(conn))
        config: RunnableConfig = {"configurable": {"thread_id": ctx.run_id}, "recursion_limit": 10_000}
        snapshot = graph.get_state(config)
        inputs: State | None = {}
        finished = False
        if snapshot.values:
            inputs = None
            if not snapshot.next:
                finished = snapshot.values.get("iteration", 0) >= ctx.iterations
                if not finished:
                    graph.update_state(config, {"stop_reason": None}, as_node="record")
        state: dict[str, Any] = dict(snapshot.values or {})
        if not finished:
            for update in graph.stream(inputs, config, context=ctx, stream_mode="updates", durability="sync"):
                for node, values in update.items():
                    if on_update is not None:  # the state after the reducers (a node's update is only its part)
                        state = dict(graph.get_state(config).values)
                        on_update(node, values or {}, state)
        final = dict(graph.get_state(config).values)
        if ctx.budgets:  # (re)built from results on disk, so a run stopped while building it finishes it
            final["mixture"] = build_mixture(get_run(ctx), ctx.budgets, final["incumbent"])
        return final
    finally:
        conn.close()
        close_run(ctx)
