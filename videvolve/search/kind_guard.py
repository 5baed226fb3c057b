"""The guard on each kind: no kind of question (on a speaking world, no kind of evidence) may lose significantly.

A constraint every kept revision meets, as its cost bound is: it is held at the gate's stated level (``--gate-level``),
not at the smaller one alpha-investing gives a later decision, which would loosen it as the run goes on. Full
validation tests each kind on the whole selection set (:func:`~videvolve.search.gate.paired_rule`); multi-fidelity
predicts that test from a rung, to accept a winner early only where no kind may yet lose (:func:`may_yet_lose`) and to
stop a candidate early where one all but surely will (:func:`sure_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass

from videvolve.evaluation.results import TaskResult
from videvolve.search.curtailment import TINY, sign_chance
from videvolve.search.gate import guarded
from videvolve.search.significance import sign_flip_p
from videvolve.tasks import Task

FEW_CHANGES = 8
"""Fewer changed answers of a kind than this, and :func:`sure_loss` does not stop on it: the normal model of the
sign-flip test that predicts the rest overstates a loss on few points (two losses of four read looked all but sure to
be significant on eight, where the exact test cannot pass at 0.05)."""


@dataclass(frozen=True)
class KindLoss:
    """One guarded kind's answers so far."""

    group: str
    lost: list[float]
    """Parent minus candidate on each of its questions read (positive: a loss)."""
    size: int
    """How many questions of it the whole selection set holds."""

    @property
    def changed(self) -> int:
        """How many of its answers changed."""
        return sum(abs(x) > TINY for x in self.lost)


def losses(parent: list[TaskResult], candidate: list[TaskResult], selection: list[Task]) -> list[KindLoss]:
    """Each kind of the selection set, with its answers so far (none where no question of it was read yet).

    ``parent`` and ``candidate``: results on the same questions, in the same order.
    """
    position = {t.id: i for i, t in enumerate(selection)}
    lost = [(position[x.task_id], x.score - y.score) for x, y in zip(parent, candidate, strict=True)]
    out = []
    for group, idx in guarded(selection).items():
        members = set(idx)
        out.append(KindLoss(group, [v for i, v in lost if i in members], len(idx)))
    return out


def may_yet_lose(parent: list[TaskResult], candidate: list[TaskResult], selection: list[Task], level: float,
                 curtail: float) -> bool:
    """Whether some kind not read in full may yet lose significantly at ``level`` on the whole set.

    That is, its predictive chance is above 1 - ``curtail`` (where few answers changed, every later change counted
    as a loss); a kind none of whose questions was read yet may, unless it could not lose significantly even if every
    answer were lost (a rung of a tenth misses a kind of ten questions about a third of the time).
    """
    return any(len(k.lost) < k.size and (sign_chance(k.lost, k.size, level) > 1 - curtail if k.lost else
                                         sign_flip_p([1.0] * k.size) <= level)
               for k in losses(parent, candidate, selection))


def sure_loss(parent: list[TaskResult], candidate: list[TaskResult], selection: list[Task], level: float,
              futility: float, seed: int = 0) -> str | None:
    """Why some kind will all but surely lose significantly at ``level`` on the whole set, or None.

    Read in full, its test passes (the gate's own: the sign-flip test under the run's ``seed``); otherwise the
    predictive chance of that is above 1 - ``futility``. A kind where
    fewer than :data:`FEW_CHANGES` answers changed is left alone while not read in full, as is one that could not
    lose significantly even if every answer still to come were lost.
    """
    for k in losses(parent, candidate, selection):
        rest = k.size - len(k.lost)
        if rest > 0 and (k.changed < FEW_CHANGES or sign_flip_p([*k.lost, *[1.0] * rest], seed) > level):
            continue
        loses = sign_flip_p(k.lost, seed) <= level if len(k.lost) >= k.size else \
            sign_chance(k.lost, k.size, level) > 1 - futility
        if loses:
            return (f"{k.group} questions lose {sum(k.lost) / len(k.lost):.3f} on {len(k.lost)} of {k.size}: the "
                    f"predictive chance that they lose significantly on all of them (p <= {level:g}) is above "
                    f"{1 - futility:g}")
    return None
