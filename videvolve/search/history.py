"""The gate's history: one typed entry per candidate and iteration, aggregates only.

The loop's state keeps entries as plain JSON (``GateEntry.model_dump()``) so the SQLite checkpointer stores them
as data; every reader validates them back with :func:`entries`. What the editor sees of them is rounded to what the
selection set can resolve (:func:`for_editor`), so that no aggregate can be read as one question's outcome.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from videvolve.memory.records import Diagnosis, GateDecision


class GateVerdict(BaseModel):
    """What the gate found of one candidate, less when and what it decided (a gate event's keys besides its own)."""

    model_config = ConfigDict(extra="forbid")

    parent: str = Field(description="the version the candidate revises")
    candidate: str | None = Field(None, description="None: nothing was proposed, or the revision could not be "
                                                    "written as a harness")
    operator: str | None = Field(None, description="how it was made: a heuristic operator, 'llm', ...")
    reason: str = Field(description="why, in words (with the figures it was decided on)")
    score: float | None = Field(None, description="the parent's mean score on the questions of the decision")
    cost: float | None = Field(None, description="the parent's mean cost per question there")
    cand_score: float | None = Field(None, description="the candidate's; None when it never reached the gate")
    cand_cost: float | None = None
    metric: str | None = Field(None, description="what the cost counts: visual_tokens (default) or frames")
    frames: float | None = Field(None, description="the parent's mean distinct frames per question (always shown)")
    cand_frames: float | None = None
    n: int | None = Field(None, description="questions the decision was made on")
    rung: int | None = Field(None, description="the rung of the decision (1-based); rungs: how many there are")
    rungs: int | None = None
    eps: float | None = None
    p_value: float | None = Field(None, description="paired bootstrap p of the score difference (full rung)")
    ci: tuple[float, float] | None = None
    mcnemar_p: float | None = None
    level: float | None = Field(None, description="the paired gate's level for this candidate (what a rejection "
                                "costs the run's alpha-wealth); None under --gate video-rsi, and for a rejection on "
                                "cost alone (a cost that fits neither a gain's bound nor a cut's: no test was made, "
                                "and nothing about the answers decided it)")
    p_gain: float | None = Field(None, description="one-sided paired sign-flip p of a gain, at the deciding look")
    p_videos: float | None = Field(None, description="one-sided p of a gain over the selection videos (the "
                                   "cluster-robust t a gain must pass too); None under two videos")
    bound: float | None = Field(None, description="one-sided lower bound of the mean difference at the level (the "
                                "lower of the question-level and the over-videos bound)")
    cost_bound: float | None = Field(None, description="the most a gain may cost per question on the questions read "
                                     "(the tighter of (1 + alpha) x the parent's and the seed's, or the ceiling)")
    cost_upper: float | None = Field(None, description="the most the candidate's mean cost may be on other videos: "
                                     "the one-sided upper bound over the selection videos of the questions read, "
                                     "which must be within cost_bound; None where the mean alone is judged")


class GateEntry(GateVerdict):
    """One candidate's fate in one iteration."""

    iteration: int
    decision: GateDecision

    @property
    def number(self) -> int:
        """The iteration as people count it: the seed is 0, the first revision 1 (logs, plots, report)."""
        return self.iteration + 1

    @property
    def gated(self) -> bool:
        """Whether the candidate answered selection questions (and so has a score and a cost)."""
        return self.cand_score is not None

    @property
    def full(self) -> bool:
        """Whether the decision was made on the whole selection set."""
        return self.rung is not None and self.rung == self.rungs

    def line(self) -> str:
        """The entry as one line of the log (rich markup)."""
        colour = {"accepted": "green", "rejected": "yellow", "dropped": "red"}.get(self.decision, "dim")
        scores = ""
        if self.gated and self.score is not None and self.cost is not None and self.cand_cost is not None:
            p = "" if self.p_value is None else f", two-sided bootstrap p {self.p_value:.3f}"
            unit = {"visual_tokens": " visual tokens", "frames": " frames"}.get(self.metric or "", "")
            frames = ""
            if self.metric != "frames" and self.frames is not None and self.cand_frames is not None:
                frames = f" ({self.frames:.1f} -> {self.cand_frames:.1f} frames)"
            scores = (f"score {self.score:.3f} -> {self.cand_score:.3f}, cost {self.cost:,.1f} -> "
                      f"{self.cand_cost:,.1f}{unit}{frames}{p}; ")
        return f"iteration {self.number}: {self.operator or '-'} [{colour}]{self.decision}[/]: {scores}{self.reason}"


def entries(history: Iterable[dict[str, Any]]) -> list[GateEntry]:
    """Typed entries from the state's plain history."""
    return [GateEntry.model_validate(h) for h in history]


def resolution(n_selection: int) -> float:
    """The score step the selection set can resolve: its worst-case standard error 0.5/sqrt(n)."""
    return 0.5 / math.sqrt(max(1, n_selection))


def diagnosis_for_editor(diagnosis: Diagnosis, n_selection: int) -> Diagnosis:
    """A past diagnosis as an editor may see it (its memory, ``memory_search``).

    Its outcome's score difference is rounded as :func:`for_editor` rounds the history's scores, to the coarser of
    this run's selection set and the one that measured it (another run's, maybe smaller), and the gate's reason (which
    repeats the scores at full precision) is left out.
    """
    o = diagnosis.outcome
    if o is None:
        return diagnosis
    step = resolution(min(n_selection, o.selection or n_selection))
    d_score = None if o.d_score is None else round(round(o.d_score / step) * step, 3)
    return diagnosis.model_copy(update={"outcome": o.model_copy(update={"d_score": d_score, "reason": ""})})


def for_editor(entry: GateEntry, n_selection: int) -> dict[str, Any]:
    """What an editor may see of an entry: decision, reason, and scores rounded to the selection set's resolution.

    The reason's own numbers are left out (it repeats the scores at full precision); the decision and the rounded
    figures carry what an editor needs.
    """
    step = resolution(n_selection)

    def rounded(x: float | None) -> float | None:
        return None if x is None else round(round(x / step) * step, 3)

    return {"iteration": entry.iteration, "parent": entry.parent, "candidate": entry.candidate,
            "operator": entry.operator, "decision": entry.decision,
            "score": rounded(entry.score), "cand_score": rounded(entry.cand_score),
            "cost": _cost(entry.cost), "cand_cost": _cost(entry.cand_cost),
            "cost_bound": _cost(entry.cost_bound), "cost_upper": _cost(entry.cost_upper),
            "reached": "the full selection set" if entry.full else
                       f"rung {entry.rung} of {entry.rungs}" if entry.rung else "not gated",
            "why": entry.reason if not entry.gated else None}


def _cost(x: float | None) -> float | None:
    """A cost as an editor sees it: to the nearest 10 from 100 up."""
    return None if x is None else round(x, -1 if x >= 100 else 0)


def missed_on_videos(entry: GateEntry) -> bool:
    """Whether a candidate turned down on its cost over the selection videos alone might pass if cheaper.

    It scored above its parent, its mean cost was within a gain's bound, the upper bound over the videos was not.
    """
    upper, bound, cost = entry.cost_upper, entry.cost_bound, entry.cand_cost
    score, cand_score = entry.score, entry.cand_score
    if entry.decision != "rejected" or upper is None or bound is None or cost is None or score is None or \
            cand_score is None:
        return False
    return cost <= bound < upper and cand_score > score
