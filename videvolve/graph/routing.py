"""Pure routing functions: the loop's policy, testable without any model."""

from __future__ import annotations

from typing import Literal

from videvolve.loop.state import State
from videvolve.search.tree import pending_children


def _pending(state: State) -> list[str]:
    """Children of this iteration's parent that lost an earlier promotion (mcts with multi-fidelity)."""
    return pending_children(state.get("tree") or {}, state.get("parent"))


def route_after_edit(state: State) -> Literal["validate", "gate", "record"]:
    """Proposals are validated; with none, pending children still compete at the gate; else the record."""
    if state.get("candidates"):
        return "validate"
    return "gate" if _pending(state) else "record"


def route_after_validate(state: State) -> Literal["gate", "edit", "record"]:
    """Valid -> gate; invalid with repair rounds left -> back to the editor with the reason; none left -> record."""
    if not state.get("candidates"):
        return "gate" if _pending(state) else "record"
    return "gate" if state.get("feedback") is None else "edit"


def route_after_record(state: State) -> Literal["solve", "__end__"]:
    """Continue until a stop reason is set."""
    return "__end__" if state.get("stop_reason") else "solve"
