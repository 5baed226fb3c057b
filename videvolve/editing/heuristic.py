"""The heuristic editor: chooses an operator by the diagnoses' categories and by what worked before (memory)."""

from __future__ import annotations

from collections import Counter, defaultdict

from videvolve.editing.base import EditorInput, Proposal
from videvolve.editing.operators import CATALOGUE, Operator, config_of

MEMORY_WEIGHT = 0.5
"""How much one similar past diagnosis moves an operator's score (+ if its revision was accepted, - if not)."""


def score_operators(inp: EditorInput) -> list[tuple[float, Operator]]:
    """Every applicable operator not yet tried on this incumbent, best first (ties keep catalogue order)."""
    counts = Counter(d.category for d in inp.diagnoses)
    n = max(1, sum(counts.values()))
    past: defaultdict[str, float] = defaultdict(float)
    for p in inp.similar:
        outcome = p.diagnosis.outcome
        if outcome and outcome.operator:
            past[outcome.operator] += MEMORY_WEIGHT * p.similarity * (1 if outcome.decision == "accepted" else -1)
    cfg = config_of(inp.files)
    scored = []
    for i, op in enumerate(CATALOGUE):
        if op.name in inp.tried or op.apply(inp.files, cfg) is None:
            continue
        score = sum(op.weights.get(c, 0.0) * k for c, k in counts.items()) / n
        score += past[op.name] / max(1, len(inp.similar))
        scored.append((score, -i, op))
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [(s, op) for s, _, op in scored]


class HeuristicEditor:
    """Works offline; every proposal is a bounded diff of the incumbent's files."""

    last_failure: str | None = None

    def propose(self, inp: EditorInput) -> Proposal | None:
        """The best-scoring applicable operator; with no failures, a cost cut; None when nothing is left."""
        ranked = score_operators(inp)
        if not inp.diagnoses:
            ranked = [(s, op) for s, op in ranked if op.name == "sparser_sampling"]
        positive = [(s, op) for s, op in ranked if s > 0] or [(s, op) for s, op in ranked
                                                             if op.name == "sparser_sampling"]
        if not positive:
            self.last_failure = ("the heuristic editor has no operator left to try on this version" if not ranked else
                                 "no untried operator addresses this batch's diagnoses")
            return None
        score, op = positive[0]
        edits = op.apply(inp.files, config_of(inp.files)) or {}
        counts = Counter(d.category for d in inp.diagnoses)
        why = ", ".join(f"{k} {v}" for k, v in counts.most_common()) or "no failures in this batch"
        return Proposal(
            operator=op.name, rationale=f"{op.summary} (score {score:.2f}; diagnoses: {why})",
            applies_when="; ".join(sorted({d.applies_when for d in inp.diagnoses if op.weights.get(d.category)}))[:500],
            preserve="; ".join(sorted({d.preserve for d in inp.diagnoses}))[:300], edits=dict(edits),
            diagnoses=[d.id for d in inp.diagnoses if op.weights.get(d.category)])
