"""The run's events as typed models: each kind round-trips, files of the release before the models read as they did,
a torn last line is left out, and a line of a kind no model knows is kept rather than fatal."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from videvolve.errors import UsageError
from videvolve.rundir import RunDir
from videvolve.search.events import (
    KINDS,
    Baseline,
    Diagnoses,
    EditProposal,
    EditRefused,
    EventBase,
    GateEvent,
    InvestigateFallback,
    MixtureTier,
    NoProposal,
    RecordEvent,
    SolveBatch,
    UnknownEvent,
    ValidateFailed,
    ValidatePassed,
    parse_event,
    read_events,
)
from videvolve.search.history import GateEntry

ENTRY = GateEntry(iteration=1, parent="p0", candidate="c1", operator="raise_resolution", decision="rejected",
                  reason="screened out", score=0.8, cost=320.0, cand_score=0.6, cand_cost=329.0,
                  metric="visual_tokens", n=5, rung=5, rungs=7, ci=(-0.2, 0.1), level=0.025)
SAMPLES: list[EventBase] = [
    Baseline(iteration=0, harness="p0", score=0.27, cost=320.0, selection=7, questions=1),
    SolveBatch(iteration=0, parent="p0", tasks=4, failures=2, score=0.5),
    InvestigateFallback(iteration=0, task="t1", reason="no JSON", category="misperception"),
    Diagnoses(iteration=0, categories={"misperception": 1}, probe_cost={"frames": 8, "model_calls": 4},
              diagnosis_ids=["d1"]),
    Diagnoses(iteration=0, categories={}, probe_cost={}, diagnosis_ids=[], investigators={"agent": 1, "procedure": 0}),
    EditRefused(iteration=0, operator="llm", reason="solver.py: syntax error"),
    EditProposal(iteration=0, parent="p0", candidate="c1", operator="llm", rationale="why", workspace="workspaces/1-0"),
    NoProposal(iteration=0, parent="p0", why="nothing to propose", workspace=None),
    ValidatePassed(iteration=0, candidate="c1"),
    ValidateFailed(iteration=0, event="sent back", candidate="c1", reason="smoke run failed"),
    ValidateFailed(iteration=0, event="dropped", candidate="c1", reason="smoke run failed"),
    GateEvent.of(ENTRY),
    RecordEvent(iteration=1, event="rejected", parent="p0", candidate="c1", operator="llm", reason="r",
                incumbent="p0", stop=None),
    MixtureTier(iteration=-1, cap=16, version="p0", score=0.5, frames=15.5, why="the run's best harness"),
]


def test_every_kind_has_a_sample_here() -> None:
    assert {type(e) for e in SAMPLES} == set(KINDS)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: f"{e.node}/{e.event}")
def test_each_kind_round_trips_through_the_file(event: EventBase, tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.append_event(event.record())
    line = json.loads(run.events.read_text())
    assert list(line)[:4] == ["ts", "iteration", "node", "event"]  # the keys as the writers before the models
    assert read_events(run.events) == [event] and parse_event(event.record()) == event


def test_a_gate_event_holds_its_history_entry() -> None:
    event = GateEvent.of(ENTRY)
    assert event.entry() == ENTRY
    assert event.record().keys() - {"ts", "node", "event"} == ENTRY.model_dump().keys() - {"decision"}


def test_investigators_are_absent_without_the_agent_and_none_is_written_where_it_was() -> None:
    assert "investigators" not in Diagnoses(iteration=0, categories={}, probe_cost={}, diagnosis_ids=[]).record()
    assert NoProposal(iteration=0, parent="p0", why="w").record()["workspace"] is None
    assert RecordEvent(iteration=0, event="none", parent="p0", reason="", incumbent="p0").record()["stop"] is None


# Lines as the release before the models wrote them (ts and all), and as its first version did (fewer keys: a gate
# event that repeated its decision, a record without its parent, a mixture tier without why, ...).
PREVIOUS = [
    {"ts": 1.0, "iteration": 0, "node": "prepare", "event": "baseline", "harness": "39f7153976c7",
     "score": 0.2726510067114094, "cost": 320.0, "selection": 7, "questions": 1},
    {"ts": 2.0, "iteration": 0, "node": "investigate", "event": "diagnoses", "categories": {"unresolved": 1},
     "probe_cost": {"frames": 8, "image_tokens": 352, "model_calls": 2, "ocr_calls": 0},
     "diagnosis_ids": ["169dd15e04fddc5f"], "investigators": {"agent": 1, "procedure": 0}},
    {"ts": 3.0, "iteration": 0, "node": "gate", "event": "rejected", "parent": "39f7153976c7", "candidate": "82f6",
     "operator": "raise_resolution+fewer_frames", "reason": "screened out", "score": 0.85453, "cost": 320.0,
     "cand_score": 0.6, "cand_cost": 329.0, "metric": "visual_tokens", "frames": 16.0, "cand_frames": 7.0, "n": 5,
     "rung": 5, "rungs": 7, "eps": 0.142857, "p_value": None, "ci": None, "mcnemar_p": None, "level": 0.025,
     "p_gain": None, "p_videos": None, "bound": None, "cost_bound": 352.0, "cost_upper": None},
    {"ts": 4.0, "iteration": 0, "node": "record", "event": "rejected", "parent": "39f7153976c7", "candidate": "82f6",
     "operator": "raise_resolution+fewer_frames", "reason": "screened out", "incumbent": "39f7153976c7", "stop": None},
    {"ts": 5.0, "iteration": 1, "node": "solve", "event": "batch", "tasks": 4, "failures": 2, "score": 0.4},
    {"ts": 6.0, "iteration": 1, "node": "investigate", "event": "diagnoses", "categories": {"crash": 1},
     "probe_cost": {"frames": 0, "image_tokens": 0, "model_calls": 0, "ocr_calls": 0}},
    {"ts": 7.0, "iteration": 1, "node": "edit", "event": "no proposal"},
    {"ts": 8.0, "iteration": 1, "node": "gate", "event": "accepted", "parent": "p", "candidate": "c",
     "operator": None, "decision": "accepted", "reason": "better", "score": 0.5, "cost": 1.0, "cand_score": 0.7,
     "cand_cost": 1.0, "p_value": 0.01, "ci": [0.1, 0.3], "n": 7, "eps": 0.1, "mcnemar_p": None},
    {"ts": 9.0, "iteration": 1, "node": "record", "event": "accepted", "candidate": "c", "operator": None,
     "reason": "better", "incumbent": "c", "stop": "--iterations 2"},
    {"ts": 10.0, "iteration": -1, "node": "mixture", "event": "tier", "cap": 8, "version": "c", "score": 0.5,
     "frames": 7.5},
]


def test_a_file_of_the_previous_release_reads_typed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in PREVIOUS))
    with caplog.at_level(logging.WARNING):
        events = read_events(path)
    assert not caplog.records
    assert [type(e) for e in events] == [Baseline, Diagnoses, GateEvent, RecordEvent, SolveBatch, Diagnoses,
                                         NoProposal, GateEvent, RecordEvent, MixtureTier]
    assert [e.record() for e in events[:4]] == PREVIOUS[:4]  # today's lines: written back key for key
    gate, batch, older, none, old_gate, old_record, tier = events[2], *events[4:]
    assert isinstance(gate, GateEvent) and gate.entry().cand_frames == 7.0 and gate.entry().decision == "rejected"
    assert isinstance(batch, SolveBatch) and batch.parent is None and batch.failures == 2
    assert isinstance(older, Diagnoses) and older.diagnosis_ids is None and older.investigators is None
    assert isinstance(none, NoProposal) and none.why is None
    assert isinstance(old_gate, GateEvent) and old_gate.entry().ci == (0.1, 0.3) and old_gate.rung is None
    assert isinstance(old_record, RecordEvent) and old_record.parent is None and old_record.stop == "--iterations 2"
    assert isinstance(tier, MixtureTier) and tier.why is None and tier.iteration == -1


def test_a_torn_last_line_is_left_out_and_the_next_write_cuts_it_off(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.append_event(SAMPLES[0].record())
    with run.events.open("a") as fh:
        fh.write(json.dumps(SAMPLES[1].record())[:40])  # a write a kill stopped
    assert read_events(run.events) == [SAMPLES[0]]
    run.append_event(SAMPLES[2].record())
    assert read_events(run.events) == [SAMPLES[0], SAMPLES[2]]
    assert read_events(tmp_path / "absent.jsonl") == []


def test_an_unknown_event_is_kept_and_one_that_does_not_fit_its_kind_too(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "events.jsonl"
    lines = [{"ts": 1.0, "iteration": 0, "node": "edit", "event": "no change", "operator": "llm"},  # a removed kind
             {"ts": 2.0, "iteration": 0, "node": "solve", "event": "batch", "tasks": "many", "failures": 0,
              "score": 0.5},  # a known kind whose keys do not fit it
             {"ts": 3.0, "iteration": 0, "node": "gate", "event": "vetoed", "parent": "p", "reason": "r"},
             {"note": "not an event"}, [1, 2],
             {"ts": 4.0, "iteration": 1, "node": "validate", "event": "passed", "candidate": "c"}]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    with caplog.at_level(logging.WARNING):
        events = read_events(path)
    assert [type(e) for e in events] == [UnknownEvent, UnknownEvent, UnknownEvent, ValidatePassed]
    assert [(e.node, e.event) for e in events[:3]] == [("edit", "no change"), ("solve", "batch"), ("gate", "vetoed")]
    assert [e.record() for e in events[:3]] == lines[:3]  # kept as they are
    assert "solve/batch event this release cannot read" in caplog.text and "tasks" in caplog.text
    assert caplog.text.count("not an event, left out") == 2


def test_a_line_that_is_not_json_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(SAMPLES[0].record()) + "\nnot json\n" + json.dumps(SAMPLES[1].record()) + "\n")
    with pytest.raises(UsageError, match=r"events\.jsonl:2: not an event"):
        read_events(path)


def test_a_gate_or_record_event_cannot_say_seed() -> None:
    """Only the lineage records a seed; the gate and the record decide of candidates (accepted, rejected, ...)."""
    from pydantic import ValidationError
    base = {"iteration": 0, "parent": "p0", "candidate": "c1", "reason": "r"}
    for model, key in ((GateEvent, "event"), (RecordEvent, "event"), (GateEntry, "decision")):
        with pytest.raises(ValidationError):
            model.model_validate({**base, key: "seed"})
        assert getattr(model.model_validate({**base, key: "accepted"}), key) == "accepted"
