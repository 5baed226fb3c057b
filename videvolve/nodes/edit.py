"""edit: propose revisions of the parent from diagnoses, similar past diagnoses and the gate's history.

The editor's input holds no selection-set task, question, video or per-item outcome; memory queries leave out
diagnoses of videos in this run's selection or test split. Each candidate is written as a new version; the
parent's files are never modified. The editor is asked for ``children`` candidates (one in chain search, three in mcts
by default).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from videvolve.editing import EditorInput, HeuristicEditor, LLMEditor, PastDiagnosis, read_files, write_candidate
from videvolve.editing.agent import AgentEditor
from videvolve.editing.base import Editor
from videvolve.editing.command import CommandEditor
from videvolve.editing.heuristic import base_operator
from videvolve.errors import HarnessError
from videvolve.loop.services import Run, command_spec
from videvolve.loop.state import State
from videvolve.models import make_vlm
from videvolve.models.cache import MeteredVLM, ResponseCache
from videvolve.models.step_cache import step_cache
from videvolve.nodes.sessions import Sessions
from videvolve.search.events import EditProposal, EditRefused, NoProposal
from videvolve.search.history import GateEntry, diagnosis_for_editor, entries, for_editor, missed_on_videos
from videvolve.usage import Spend


def tried_on(gated: list[GateEntry], parent: str) -> list[str]:
    """The operators already proposed on ``parent``, which the editor does not propose again.

    A look turned down only because its cost over the selection videos missed the bound
    (:func:`~videvolve.search.history.missed_on_videos`) may be tried once more: its trial then aims under the bound
    less its measured :func:`~videvolve.editing.heuristic.headroom`.
    """
    mine = [e for e in gated if e.parent == parent and e.operator]
    missed = Counter(base_operator(e.operator or "") for e in mine if missed_on_videos(e))
    return [e.operator or "" for e in mine if not (missed_on_videos(e) and missed[base_operator(e.operator or "")] < 2)]


def headroom_by_operator(gated: list[GateEntry]) -> dict[str, float]:
    """Per operator, the most the upper bound of a candidate's cost over the selection videos lay above its mean."""
    room: dict[str, float] = {}
    for e in gated:
        if e.operator and e.cost_upper and e.cand_cost:
            key = base_operator(e.operator)
            room[key] = max(room.get(key, 1.0), e.cost_upper / e.cand_cost)
    return room


def editor_input(run: Run, state: State) -> EditorInput:
    """What the editor may see (and nothing else)."""
    parent = state["parent"]
    diagnoses = [d for i in state.get("diagnoses", []) if (d := run.memory.get(i)) is not None]
    current = {d.id for d in diagnoses}
    similar: dict[str, PastDiagnosis] = {}
    for d in diagnoses:
        for past, sim in run.memory.search(d.text(), k=3, exclude_videos=run.excluded_videos,
                                     exclude_fingerprints=run.excluded_fingerprints):
            if past.id not in current and (past.id not in similar or similar[past.id].similarity < sim):
                similar[past.id] = PastDiagnosis(diagnosis=diagnosis_for_editor(past, len(run.selection)),
                                                 similarity=sim)
    gated = entries(state.get("history", []))
    history = [for_editor(e, len(run.selection)) for e in gated]
    tried = tried_on(gated, parent)
    if state.get("feedback"):
        tried += [op for op in state.get("operators", {}).values() if op]
    gate = run.ctx.gate
    rule = gate.acceptance.text(gate, len(run.selection))
    return EditorInput(incumbent=parent, files=read_files(run.harness_dir(parent)), diagnoses=diagnoses,
                       similar=sorted(similar.values(), key=lambda p: (-p.similarity, p.diagnosis.id))[:10],
                       history=history, feedback=state.get("feedback"), tried=sorted(set(tried)), gate_rule=rule,
                       gate=gate.terms(len(run.selection)).model_copy(update={"headroom": headroom_by_operator(gated)}))


def editor_model(run: Run, cache: ResponseCache | None = None) -> MeteredVLM:
    """The editor's model (by default the solver's, as in Video-RSI) with its own reply cap, cached and metered."""
    ctx = run.ctx
    settings = (ctx.editor.model or ctx.model).model_copy(update={"max_tokens": ctx.editor.max_tokens})
    return MeteredVLM(make_vlm(settings), cache or run.cache)


def make_editor(run: Run, model: MeteredVLM | None = None) -> Editor:
    """The editor the run's settings ask for (``model``: the LLM and agent editors' metered model)."""
    ctx = run.ctx
    if ctx.editor.kind == "llm":
        return LLMEditor(model or editor_model(run))
    if ctx.editor.kind == "agent":
        return AgentEditor(model or editor_model(run), rounds=ctx.editor.rounds)
    if ctx.editor.kind == "command":
        return CommandEditor(command_spec(ctx, [t.video for t in [*run.train, *run.selection]]))
    e = ctx.editor
    return HeuristicEditor(trials=not e.no_trials, operators=e.trial_operators, tasks=e.trial_batch)


def edit(state: State, runtime: Runtime[Run]) -> dict[str, Any]:
    """Candidate versions (possibly none)."""
    run = runtime.context
    cache = step_cache(run.cache, run.root, f"{state['iteration']}-edit-{state.get('repair_round', 0)}")
    try:  # a rerun after a kill pays the editor's calls and probes its killed attempt paid
        return _edit(run, state, cache)
    finally:
        if cache is not None:
            cache.close()


def _edit(run: Run, state: State, cache: ResponseCache | None) -> dict[str, Any]:
    ctx = run.ctx
    it, parent = state["iteration"], state["parent"]
    model = editor_model(run, cache) if ctx.editor.kind in ("llm", "agent") and run.editor is None else None
    editor = run.editor or make_editor(run, model)
    sessions = Sessions(run, state, cache)
    inp = editor_input(run, state)
    want = ctx.candidates_per_iteration
    candidates: list[str] = []
    operators: dict[str, str | None] = {}
    dropped: list[dict[str, Any]] = []
    for _ in range(want):
        proposal = editor.propose(inp, sessions)
        if proposal is None:
            break
        inp = inp.model_copy(update={"tried": [*inp.tried, proposal.operator]})
        try:
            version = write_candidate(run.harness_dir(parent), run.dir.harnesses, proposal)
        except HarnessError as exc:
            run.event(EditRefused(iteration=it, operator=proposal.operator, reason=str(exc)))
            dropped.append({"candidate": None, "operator": proposal.operator, "reason": str(exc)})
            continue
        if version == parent or version in candidates:
            continue
        candidates.append(version)
        operators[version] = proposal.operator
        if proposal.workspace:
            (Path(proposal.workspace) / "submitted.json").write_text(json.dumps({"version": version}) + "\n")
        run.event(EditProposal(iteration=it, parent=parent, candidate=version, operator=proposal.operator,
                               rationale=proposal.rationale, workspace=_rel(run, proposal.workspace)))
    why = None
    if not candidates and not dropped:
        why = editor.last_failure or "the editor had nothing to propose"
        run.event(NoProposal(iteration=it, parent=parent, why=why,
                             workspace=_rel(run, str(sessions.opened[-1].root)) if sessions.opened else None))
    return {"candidates": candidates, "operators": operators, "dropped": dropped, "feedback": None,
            "no_proposal": why, "spent": (sessions.spent() + _editor_calls(model)).to_state()}


def _editor_calls(model: MeteredVLM | None) -> Spend:
    """The editor model's own ledger (calls paid for count against --max-calls; cache hits cost nothing)."""
    return Spend.of_model("editor", model.ledger) if model is not None else Spend()


def _rel(run: Run, workspace: str) -> str | None:
    return Path(workspace).relative_to(run.root).as_posix() if workspace else None
