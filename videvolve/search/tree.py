"""The tree of harness versions (VidHarness's MCTS) as pure functions: choose a parent by UCT, back up a reward.

The tree lives in the loop's state as plain JSON, one :class:`TreeNode` per version. Chain search (Video-RSI) is
the degenerate case: the parent is always the incumbent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypedDict

from videvolve.search.gate import aggregate
from videvolve.search.history import GateEntry
from videvolve.search.services import StoredResults


class TreeNode(TypedDict, total=False):
    """One version in the search tree."""

    parent: str | None
    visits: int
    value: float
    """Sum of the rewards backed up through this node."""
    score: float
    cost: float
    accepted: bool
    """Accepted by the gate (the seed too): only accepted versions are expanded."""
    pending: bool
    """Lost a promotion on a rung but may still pass: it competes again when its parent is expanded."""
    exhausted: bool
    """Its editor had nothing left to propose."""
    full: bool
    """Its decision was made on the whole selection set."""
    n: int
    """The selection questions its score was measured on."""


Tree = dict[str, TreeNode]


def seed_of(tree: Tree) -> str | None:
    """The version the run started from (the tree's root), or None for an empty tree."""
    return next((v for v, node in tree.items() if node.get("parent") is None), None)


def root(version: str, score: float, cost: float, n: int) -> Tree:
    """A tree holding only the seed (its score measured on ``n`` selection questions)."""
    return {version: {"parent": None, "visits": 0, "value": 0.0, "score": score, "cost": cost, "accepted": True,
                      "exhausted": False, "n": n}}


def penalized(score: float, n: int | None, penalty: float) -> float:
    """A score measured on ``n`` questions less ``penalty`` worst-case standard errors (0.5 / sqrt(n)).

    VidHarness's penalty: a score read on a few questions of an early rung must not look as good as the same score
    read on the whole set. Without ``n`` (a node from before it was recorded) the score is taken as it is.
    """
    return score - penalty * 0.5 / math.sqrt(n) if n else score


def pick_parent(tree: Tree, incumbent: str, search: str, uct_c: float) -> str:
    """Chain: the incumbent. MCTS: the accepted, not exhausted node with the highest UCT score (unvisited first)."""
    open_nodes = [v for v, s in tree.items() if s.get("accepted") and not s.get("exhausted")]
    if search == "chain" or not open_nodes:
        return incumbent
    total = sum(tree[v]["visits"] for v in open_nodes) + 1

    def uct(v: str) -> float:
        s = tree[v]
        if s["visits"] == 0:
            return math.inf
        return s["value"] / s["visits"] + uct_c * math.sqrt(math.log(total) / s["visits"])

    return max(open_nodes, key=lambda v: (uct(v), tree[v]["score"], v))


def pending_children(tree: Tree, parent: str | None, exclude: Iterable[str] = ()) -> list[str]:
    """Children of ``parent`` that lost an earlier promotion and may compete again."""
    skip = set(exclude)
    return sorted(v for v, s in tree.items() if s.get("parent") == parent and s.get("pending") and v not in skip)


def record_children(tree: Tree, parent: str, gated: list[GateEntry], refused: list[GateEntry],
                    penalty: float) -> Tree:
    """Node updates for this iteration's candidates, and the back-up of the expansion to the root.

    The reward is the best penalized score (:func:`penalized`) among the children that were gated, the parent's own
    when none was: a child screened out on its first rung with a lucky score does not pull the search towards its
    parent as a child measured on the whole set would. A parent none of whose candidates even reached validation
    is exhausted. The parent's own score, cost and questions are those of the most questions its candidates read it
    on, where that is more than it had (a seed measured on the first rung, an incumbent accepted early).
    """
    updates: Tree = {}
    for e in [*gated, *refused]:
        if e.candidate is None:
            continue
        node: TreeNode = {"parent": parent, "visits": 0, "value": 0.0, "score": e.cand_score or 0.0,
                          "cost": e.cand_cost or 0.0, "accepted": e.decision == "accepted",
                          "pending": e.decision == "pending", "exhausted": False, "full": e.full}
        if e.n:
            node["n"] = e.n
        if e.candidate in tree:
            node["visits"], node["value"] = tree[e.candidate]["visits"], tree[e.candidate]["value"]
        updates[e.candidate] = node
    read = max((e for e in gated if e.n and e.score is not None), key=lambda e: e.n or 0, default=None)
    here: TreeNode = {**tree.get(parent, {}), **updates.get(parent, {})}
    if read is not None and read.n and parent in tree and read.n > (tree[parent].get("n") or 0):
        # multi-fidelity read the parent on more questions than it was measured on: its figures are those now
        here = updates[parent] = {**tree[parent], "score": read.score or 0.0, "cost": read.cost or 0.0, "n": read.n}
    reward = max([penalized(e.cand_score or 0.0, e.n, penalty) for e in gated]
                 or [penalized(here.get("score", 0.0), here.get("n"), penalty)])
    node_id: str | None = parent
    while node_id is not None and node_id in tree:
        stats: TreeNode = {**tree[node_id], **updates.get(node_id, {})}
        stats["visits"] = stats.get("visits", 0) + 1
        stats["value"] = stats.get("value", 0.0) + reward
        updates[node_id] = stats
        node_id = stats.get("parent")
    if not gated and not any(e.candidate for e in refused):
        updates[parent] = {**updates.get(parent, tree.get(parent, {})), "exhausted": True}
    return updates


def beats(run: StoredResults, incumbent: str, candidate: str) -> bool:
    """Whether ``candidate`` scores higher than ``incumbent`` (or as high for less) on the same selection questions.

    Under multi-fidelity validation the two were measured on different rungs (a winner stops early, the seed
    answered the whole set), so they are compared on the questions both answered, never one's rung against the
    other's. False when they share none.
    """
    gate = run.ctx.gate
    pairs = [(a, b) for t in run.selection
             if (a := run.stored(incumbent, t, "selection")) is not None
             and (b := run.stored(candidate, t, "selection")) is not None]
    if not pairs:
        return False
    inc = aggregate([a for a, _ in pairs], gate.cost_measure)
    cand = aggregate([b for _, b in pairs], gate.cost_measure)
    return (cand[0], -cand[1]) > (inc[0], -inc[1])
