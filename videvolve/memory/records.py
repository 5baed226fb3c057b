"""A diagnosis is a first-class record: what failed, what a probe found, why, and what the fix led to."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from videvolve.tasks import LabelSource

Category = Literal["missed_event", "misperception", "evidence_unused", "boundary_error", "format_error",
                   "infra_error", "budget_exhausted", "crash", "unresolved", "transcript_unused"]
CATEGORIES: tuple[str, ...] = ("missed_event", "misperception", "evidence_unused", "boundary_error", "format_error",
                               "infra_error", "budget_exhausted", "crash", "unresolved", "transcript_unused")


GateDecision = Literal["accepted", "rejected", "pending", "dropped", "none"]
"""What the loop decided of a candidate: a gate verdict (accepted, rejected, or pending a later promotion in mcts);
refused before the gate (dropped); or nothing proposed at all (none)."""
Decision = Literal["seed"] | GateDecision
"""What became of a harness version: the seed, or what the loop decided of it (:data:`GateDecision`)."""


class Evidence(BaseModel):
    """One probe observation: a time and what was seen there."""

    time: float
    seen: str


class RevisionOutcome(BaseModel):
    """What the revision a diagnosis led to became."""

    candidate: str | None = Field(None, description="harness version proposed")
    operator: str | None = Field(None, description="the editor's operator (heuristic) or 'llm'")
    decision: Decision
    reason: str = ""
    d_score: float | None = None
    d_cost: float | None = None
    selection: int | None = Field(None, description="questions in the selection set that measured d_score (an editor "
                                  "sees it no finer than they resolve; None: written before it was recorded)")


class Diagnosis(BaseModel):
    """Why one training task failed, found by revisiting its video."""

    id: str
    run_id: str
    iteration: int
    harness_id: str
    task_id: str
    video_id: str
    video_fingerprint: str | None = Field(None, description="the video's content fingerprint: a run keeps away "
                                          "from its selection and test videos by it too, whatever another task "
                                          "file named them (None: unreadable, or written before it was recorded)")
    kind: Literal["mcq", "grounding"]
    source: str = "custom"
    label_source: LabelSource = Field("gold", description="where the diagnosed task's answer came from (gold, "
                                      "needles, perceived, teacher): what the failure was measured against")
    category: Category
    evidence: list[Evidence] = Field(default_factory=list, description="probe times and what was seen")
    hypothesis: str = Field(description="why the harness failed")
    applies_when: str = Field(description="conditions under which a fix applies")
    preserve: str = Field(description="behaviour a fix must keep")
    probe_cost: dict[str, int] = Field(default_factory=dict, description="the investigator's own frames and tokens")
    investigator: Literal["procedure", "agent"] = Field("procedure", description="who wrote it: the decision tree "
                                                        "or the agent investigator's model")
    fallback: str | None = Field(None, description="why the agent's reply was unusable, when the decision tree's "
                                 "diagnosis was kept instead")
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    outcome: RevisionOutcome | None = None

    def text(self) -> str:
        """What is embedded for similarity search."""
        return f"{self.category.replace('_', ' ')}: {self.hypothesis} Applies when: {self.applies_when}"
