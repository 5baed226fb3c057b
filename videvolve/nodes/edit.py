"""edit: propose a revision of the incumbent from diagnoses, similar past diagnoses and the gate's history.

The editor's input holds no selection-set task, question, video or per-item outcome; memory queries leave out
diagnoses of videos in this run's selection or test split. The candidate is written as a new version; the
incumbent's files are never modified.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from videvolve.editing import EditorInput, HeuristicEditor, LLMEditor, PastDiagnosis, read_files, write_candidate
from videvolve.editing.base import Editor
from videvolve.errors import HarnessError
from videvolve.graph.context import Context
from videvolve.graph.run import Run, get_run
from videvolve.graph.state import State
from videvolve.models import make_vlm

GATE_FIELDS = ("iteration", "parent", "candidate", "operator", "decision", "reason", "score", "cost", "cand_score",
               "cand_cost", "p_value")


def editor_input(run: Run, state: State) -> EditorInput:
    """What the editor may see (and nothing else)."""
    incumbent = state["incumbent"]
    diagnoses = [d for i in state.get("diagnoses", []) if (d := run.memory.get(i)) is not None]
    current = {d.id for d in diagnoses}
    similar: dict[str, PastDiagnosis] = {}
    for d in diagnoses:
        for past, sim in run.memory.search(d.text(), k=3, exclude_videos=run.excluded_videos):
            if past.id not in current and (past.id not in similar or similar[past.id].similarity < sim):
                similar[past.id] = PastDiagnosis(diagnosis=past, similarity=sim)
    history = [{k: h.get(k) for k in GATE_FIELDS} for h in state.get("history", [])]
    tried = [h["operator"] for h in state.get("history", []) if h.get("parent") == incumbent and h.get("operator")]
    if state.get("feedback") and state.get("operator"):
        tried.append(str(state["operator"]))
    return EditorInput(incumbent=incumbent, files=read_files(run.harness_dir(incumbent)), diagnoses=diagnoses,
                       similar=sorted(similar.values(), key=lambda p: (-p.similarity, p.diagnosis.id))[:10],
                       history=history, feedback=state.get("feedback"), tried=tried)


def make_editor(run: Run) -> Editor:
    """The editor the run's settings ask for."""
    if run.ctx.editor == "llm":
        return LLMEditor(make_vlm(run.ctx.editor_model) if run.ctx.editor_model else run.vlm)
    return HeuristicEditor()


def edit(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """A candidate version, or none."""
    run = get_run(runtime.context)
    proposal = make_editor(run).propose(editor_input(run, state))
    it = state["iteration"]
    if proposal is None:
        run.event(it, "edit", "no proposal")
        return {"candidate": None, "operator": None, "feedback": None}
    try:
        version = write_candidate(run.harness_dir(state["incumbent"]), run.root / "harnesses", proposal)
    except HarnessError as exc:
        run.event(it, "edit", "refused", operator=proposal.operator, reason=str(exc))
        return {"candidate": None, "operator": proposal.operator, "dropped": "(refused edit)", "feedback": str(exc)}
    if version == state["incumbent"]:
        run.event(it, "edit", "no change", operator=proposal.operator)
        return {"candidate": None, "operator": proposal.operator, "feedback": None}
    run.event(it, "edit", "proposal", candidate=version, operator=proposal.operator, rationale=proposal.rationale)
    return {"candidate": version, "operator": proposal.operator, "feedback": None}
