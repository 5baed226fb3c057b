"""The run's events: ``RUN/events.jsonl``, one typed line per thing a node did (``Run.event`` writes them).

Each kind of event is a model, told apart by its ``node`` and ``event`` keys (one model may take several ``event``
values: the gate's and the record's hold the decision there). A line's keys are its model's fields, in the order
the release before these models wrote them, so old and new files are one format: old runs resume and report as
they did. Fields a later release added read as None (or empty) in an older file.

:func:`read_events` is the one reader. It leaves out a torn last line (an unfinished write:
:func:`~videvolve.memory.jsonl.read_lines`); keeps a line of a kind this release does not know (a removed event,
another release's) as an :class:`UnknownEvent`, and one of a known kind whose keys do not fit its model the same
way, with a warning in the log; leaves out, with a warning, a JSON line that is no event (no ``iteration``,
``node`` and ``event``); and stops at a line that is not JSON (damage: :class:`UsageError` names the line).
"""

from __future__ import annotations

import json
import logging
import time
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from videvolve.errors import UsageError
from videvolve.memory.jsonl import read_lines
from videvolve.memory.records import Category, GateDecision
from videvolve.search.history import GateEntry, GateVerdict

log = logging.getLogger(__name__)


def _now() -> float:
    return round(time.time(), 3)


class EventBase(BaseModel):
    """The keys every event has; a kind narrows ``node`` and ``event`` to its own values."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    ts: float = Field(default_factory=_now, description="when it was written (Unix seconds, to the millisecond)")
    iteration: int = Field(description="the loop's iteration, counted from 0 (the mixture's: -1)")
    node: str = Field(description="the node (or step) that wrote it")
    event: str = Field(description="what happened")

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()
    """Keys the line leaves out when they are None (as the writers before these models did)."""

    def record(self) -> dict[str, Any]:
        """The event as its JSON line's object."""
        data = self.model_dump(mode="json")
        return {k: v for k, v in data.items() if not (v is None and k in self.OMIT_IF_NONE)}


class Baseline(EventBase):
    """The seed harness on the selection set's first rung (its score and cost are the first incumbent's)."""

    node: Literal["prepare"] = "prepare"
    event: Literal["baseline"] = "baseline"
    harness: str = Field(description="the seed's version")
    score: float = Field(description="its mean score there")
    cost: float = Field(description="its mean cost per question there (the gate's cost metric)")
    selection: int = Field(description="questions in the selection set")
    questions: int | None = Field(None, description="questions it was evaluated on (None: a run before it was kept)")


class SolveBatch(EventBase):
    """The parent on the iteration's training batch."""

    node: Literal["solve"] = "solve"
    event: Literal["batch"] = "batch"
    parent: str | None = Field(None, description="the version run (None: a run before it was kept)")
    tasks: int = Field(description="tasks in the batch")
    failures: int = Field(description="tasks that failed (an error, or a score under the failure threshold)")
    score: float = Field(description="the mean score on the batch")


class InvestigateFallback(EventBase):
    """The agent investigator gave no usable diagnosis of a task; the procedure's was kept."""

    node: Literal["investigate"] = "investigate"
    event: Literal["fallback"] = "fallback"
    task: str = Field(description="the task's id")
    reason: str = Field(description="why the agent's reply was unusable")
    category: Category = Field(description="the procedure's category, kept")


class Diagnoses(EventBase):
    """The iteration's diagnoses, stored in the memory."""

    node: Literal["investigate"] = "investigate"
    event: Literal["diagnoses"] = "diagnoses"
    categories: dict[str, int] = Field(description="category -> diagnoses")
    probe_cost: dict[str, int] = Field(description="the probes' ledger: frames, image_tokens, model_calls, ...")
    diagnosis_ids: list[str] | None = Field(None, description="their ids in the memory (None: a run before they "
                                            "were named; the report then takes those with the run's id)")
    investigators: dict[str, int] | None = Field(None, description="with --investigator agent: agent and procedure "
                                                 "-> diagnoses each wrote (the key is absent otherwise)")

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"investigators"})


class EditRefused(EventBase):
    """A proposal that could not be written as a harness."""

    node: Literal["edit"] = "edit"
    event: Literal["refused"] = "refused"
    operator: str | None = Field(description="the editor's operator (heuristic) or 'llm', 'agent', ...")
    reason: str = Field(description="why its files are no harness")


class EditProposal(EventBase):
    """A candidate the editor wrote."""

    node: Literal["edit"] = "edit"
    event: Literal["proposal"] = "proposal"
    parent: str | None = Field(None, description="the version it revises (None: a run before it was kept)")
    candidate: str = Field(description="its version")
    operator: str | None = Field(description="the editor's operator (heuristic) or 'llm', 'agent', ...")
    rationale: str = Field(description="the editor's why")
    workspace: str | None = Field(None, description="its workspace, relative to the run folder (None: none)")


class NoProposal(EventBase):
    """The editor proposed nothing this iteration."""

    node: Literal["edit"] = "edit"
    event: Literal["no proposal"] = "no proposal"
    parent: str | None = Field(None, description="the version it was to revise (None: a run before it was kept)")
    why: str | None = Field(None, description="the editor's last failure, or that it had nothing to propose")
    workspace: str | None = Field(None, description="the last workspace opened, relative to the run folder")


class ValidatePassed(EventBase):
    """A candidate passed validation (static check and smoke run)."""

    node: Literal["validate"] = "validate"
    event: Literal["passed"] = "passed"
    candidate: str = Field(description="its version")


class ValidateFailed(EventBase):
    """A candidate failed validation: sent back to the editor (a repair round), or dropped."""

    node: Literal["validate"] = "validate"
    event: Literal["sent back", "dropped"]
    candidate: str = Field(description="its version")
    reason: str = Field(description="what failed")


class GateEvent(GateVerdict, EventBase):
    """The gate's verdict on one candidate (``event``: the decision), with its aggregates and statistics."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    node: Literal["gate"] = "gate"
    event: GateDecision = Field(description="the decision")

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        """A line without a parent or a reason (written by hand, or by an old run) reads as the report read it."""
        if isinstance(data, dict):
            return {"parent": "?", "reason": "", **data}
        return data

    @classmethod
    def of(cls, entry: GateEntry) -> GateEvent:
        """The event of a history entry."""
        return cls(iteration=entry.iteration, event=entry.decision,
                   **entry.model_dump(exclude={"iteration", "decision"}))

    def entry(self) -> GateEntry:
        """The history entry it records."""
        return GateEntry(iteration=self.iteration, decision=self.event,
                         **self.model_dump(include=set(GateVerdict.model_fields)))


class RecordEvent(EventBase):
    """The iteration's outcome (``event``: the lead candidate's decision), the incumbent after it, and a stop."""

    node: Literal["record"] = "record"
    event: GateDecision = Field(description="the lead candidate's decision")
    parent: str | None = Field(None, description="the version revised (None: a run before it was kept)")
    candidate: str | None = Field(None, description="the lead candidate (None: nothing was proposed)")
    operator: str | None = None
    reason: str = Field("", description="the gate's reason, or why nothing reached it")
    incumbent: str | None = Field(None, description="the incumbent after the iteration")
    stop: str | None = Field(None, description="why the run stops after it (None: it goes on)")


class MixtureTier(EventBase):
    """With ``--budgets``: the version chosen for one frame budget (``iteration`` is -1)."""

    node: Literal["mixture"] = "mixture"
    event: Literal["tier"] = "tier"
    cap: int = Field(description="the tier's frame budget")
    version: str = Field(description="the version chosen")
    score: float = Field(description="its mean score on the selection set under the cap")
    frames: float = Field(description="its mean distinct frames per question there")
    why: str | None = Field(None, description="why that version (None: a run before it was kept)")


class UnknownEvent(EventBase):
    """A line of a kind this release does not know, or whose keys do not fit its kind: kept as it is."""

    model_config = ConfigDict(extra="allow", frozen=True)


KnownEvent = (Baseline | SolveBatch | InvestigateFallback | Diagnoses | EditRefused | EditProposal | NoProposal
              | ValidatePassed | ValidateFailed | GateEvent | RecordEvent | MixtureTier)
"""What a node writes."""
RunEvent = KnownEvent | UnknownEvent
"""What :func:`read_events` reads."""
KINDS: tuple[type[EventBase], ...] = typing.get_args(KnownEvent)


def _values(kind: type[EventBase], key: str) -> tuple[str, ...]:
    return typing.get_args(kind.model_fields[key].annotation)


BY_KEYS: dict[tuple[str, str], type[EventBase]] = {
    (node, event): kind for kind in KINDS for node in _values(kind, "node") for event in _values(kind, "event")}
"""``(node, event)`` -> the model of that kind."""


def parse_event(data: dict[str, Any]) -> RunEvent:
    """One line's object as its kind (an :class:`UnknownEvent` when none fits); ValidationError: no event at all."""
    kind = BY_KEYS.get((str(data.get("node")), str(data.get("event"))))
    if kind is not None:
        try:
            return typing.cast(KnownEvent, kind.model_validate(data))
        except ValidationError as exc:
            log.warning("a %s/%s event this release cannot read is kept as unknown: %s", data.get("node"),
                        data.get("event"), "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                     for e in exc.errors()))
    return UnknownEvent.model_validate(data)


def read_events(path: Path) -> list[RunEvent]:
    """Every event of an events file, in order (none when it does not exist): see the module's docstring."""
    out: list[RunEvent] = []
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{n}: not an event ({exc}); remove or repair that line") from None
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            out.append(parse_event(data))
        except (ValueError, ValidationError) as exc:
            log.warning("%s:%d: not an event, left out: %s", path, n, str(exc).splitlines()[0])
    return out
