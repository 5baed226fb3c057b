"""Run the loop for a context: compile with a SQLite checkpointer in the run directory, stream, resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from videvolve.atomic import write_text_atomic
from videvolve.errors import UsageError
from videvolve.folderlock import ensure_free, hold
from videvolve.graph.builder import GOES_ON, build_graph
from videvolve.graph.checkpoints import RunCheckpoints
from videvolve.loop.context import Context
from videvolve.loop.inputs import check_inputs, keep_inputs
from videvolve.loop.services import Run, open_run
from videvolve.loop.state import State
from videvolve.nodes.record import stop_reason
from videvolve.rundir import RunDir
from videvolve.search.mixture import build_mixture

OnUpdate = Callable[[str, dict[str, Any], dict[str, Any]], None]
"""Called with (node, its update, the state so far) after every node."""


def evolve(ctx: Context, on_update: OnUpdate | None = None, services: Run | None = None) -> dict[str, Any]:
    """Run (or resume: same run directory, same thread id) until a stop reason; returns the final state.

    A finished run whose settings now allow more (``iterations``, ``hours``, ...) is extended. The run's services
    are built here once (or given: ``services``, with fakes) and handed to every node as the graph's runtime
    context; those built here are closed here. They are opened before the run's directory is written, so a start
    they refuse (a bad tasks file, settings that cannot run) leaves nothing behind.
    """
    if services is None:  # the run's own folder, before its memory, is the clearer refusal for a second copy
        ensure_free(RunDir(ctx.root).root, "run folder")
    run = services if services is not None else open_run(ctx)
    folder = run.dir
    folder.root.mkdir(parents=True, exist_ok=True)
    folder.root.chmod(0o700)  # evaluations and traces hold the answers of the selection set
    try:
        with hold(folder.root, "run folder"):  # a second process on this run stops here, having written nothing
            return _stream(ctx, run, on_update)
    finally:
        if services is None:
            run.close()


def _stream(ctx: Context, run: Run, on_update: OnUpdate | None) -> dict[str, Any]:
    """The graph on the run folder's checkpoints, streamed to the end (the folder is held by this process)."""
    folder = run.dir
    checkpoints = RunCheckpoints(folder.checkpoints)
    try:
        graph = build_graph().compile(checkpointer=checkpoints)
        config: RunnableConfig = {"configurable": {"thread_id": ctx.run_id}, "recursion_limit": 10_000}
        snapshot = graph.get_state(config)
        _same_tasks(ctx, run, snapshot.values or {})
        ended = bool(snapshot.values) and not snapshot.next  # it goes on only where its stop settings now allow more
        finished = stop_reason(run, cast(State, snapshot.values), snapshot.values.get("iteration", 0)) if ended \
            else None
        if not snapshot.values:
            keep_inputs(run)
        elif not finished or ctx.budgets:  # checked before anything is written or evaluated (a mixture evaluates)
            check_inputs(run)
        write_text_atomic(folder.settings, ctx.model_dump_json(indent=2), "the run's settings")
        inputs: State | None = None if snapshot.values else {}
        if ended and finished is None:
            graph.update_state(config, {"stop_reason": None}, as_node=GOES_ON)
        state: dict[str, Any] = dict(snapshot.values or {})
        if not finished:
            for update in graph.stream(inputs, config, context=run, stream_mode="updates", durability="sync"):
                for node, values in update.items():
                    if on_update is not None:  # the state after the reducers (a node's update is only its part)
                        state = dict(graph.get_state(config).values)
                        on_update(node, values or {}, state)
        final = dict(graph.get_state(config).values)
        if finished is not None:  # why it is still over (a budget it used up, a STOP file still there)
            final["stop_reason"] = finished
        if ctx.budgets:  # (re)built from results on disk, so a run stopped while building it finishes it
            final["mixture"] = build_mixture(run, ctx.budgets, final["incumbent"])
        return final
    finally:
        checkpoints.close()


def _same_tasks(ctx: Context, run: Run, values: dict[str, Any]) -> None:
    """A resumed run reads the train and selection tasks it started on: its decisions and stored results rest on them.

    A run checkpointed before the digest was kept is not checked.
    """
    started_on = values.get("tasks_digest")
    if started_on and run.tasks_digest and started_on != run.tasks_digest:
        raise UsageError(f"{ctx.tasks} changed since the run in {ctx.root} started: its train or selection tasks are "
                         "not the ones the run's decisions were made on. Put the file back as it was to resume, or "
                         "start a new --run with it.")
