"""The loop's state: references (harness ids, task ids, diagnosis ids) and scores, never images or traces."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from videvolve.search.tree import Tree
from videvolve.usage import add_spend


def replace(_: Any, new: Any) -> Any:
    """Reducer of per-iteration channels: the latest value wins."""
    return new


def merge(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer of keyed channels: entries are added or replaced, never dropped."""
    return {**(old or {}), **(new or {})}


def extend_or_reset(old: list[Any] | None, new: list[Any] | None) -> list[Any]:
    """Reducer of per-iteration lists that several nodes add to: ``None`` starts the list afresh."""
    return [] if new is None else [*(old or []), *new]


class State(TypedDict, total=False):
    """One run of the loop."""

    started_at: float
    """Unix time of the first step."""
    running_s: float
    """Seconds the run has spent running (not stopped) up to ``running_at``, over every process that ran it:
    ``--hours`` counts these (:func:`videvolve.nodes.record.running_time`)."""
    running_at: float
    """Unix time ``running_s`` was counted to (the end of the last iteration, or of the seed's evaluation)."""
    tasks_digest: str
    """The train and selection tasks the run started on (``loop.services.tasks_digest``): --resume checks it."""
    run_uid: str
    """Drawn when the run starts, kept on resume: in its diagnoses' ids, so that a run of another's name (the memory
    is shared) never replaces its records (none: a run from before it, whose ids stay as they were)."""
    iteration: int
    """Iterations finished so far."""
    incumbent: str
    """Version id of the current best harness."""
    incumbent_score: float
    incumbent_cost: float
    batch: Annotated[list[str], replace]
    """Training task ids solved in this iteration."""
    failures: Annotated[list[str], replace]
    """Task ids of this batch that failed."""
    diagnoses: Annotated[list[str], replace]
    """Diagnosis ids written in this iteration."""
    parent: str
    """The version expanded in this iteration: the incumbent (chain search) or the tree node UCT picked (mcts)."""
    candidates: Annotated[list[str], replace]
    """Versions proposed in this iteration that are still in the running."""
    operators: Annotated[dict[str, str | None], merge]
    """How each candidate was made (a heuristic operator, or 'llm')."""
    feedback: str | None
    """Why validation failed, for the editor's repair round (one candidate at a time)."""
    dropped: Annotated[list[dict[str, Any]], extend_or_reset]
    """Candidates refused this iteration (by the editor's checks, or by validation after their repair rounds), with
    the reason; edit and validate add to it, solve starts it afresh."""
    no_proposal: str | None
    """Why the editor proposed nothing this iteration (None when it proposed something)."""
    repair_round: int
    tree: Annotated[Tree, merge]
    """Search tree (mcts): per version its parent, visits, value, score, cost, whether accepted or exhausted."""
    history: Annotated[list[dict[str, Any]], operator.add]
    """One :class:`~videvolve.search.history.GateEntry` (as plain JSON) per gated or dropped candidate: aggregates,
    no per-item selection outcome."""
    spent: Annotated[dict[str, float], add_spend]
    """Running totals (solver, gate, investigator, editor): a :class:`~videvolve.usage.Spend` as plain JSON (so
    checkpoints hold no class); read it with ``Spend.from_state``, add to it by returning ``spend.to_state()``."""
    stop_reason: str | None
