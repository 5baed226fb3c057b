"""Pure routing functions: the loop's policy, testable without any model."""

from __future__ import annotations

from typing import Literal

from videvolve.graph.state import State


def route_after_edit(state: State) -> Literal["validate", "record"]:
    """Proposals are validated; no proposal goes straight to the record."""
    return "validate" if state.get("candidates") else "record"


def route_after_validate(state: State) -> Literal["gate", "edit", "record"]:
    """Valid -> gate; invalid with repair rounds left -> back to the editor with the reason; none left -> record."""
    if not state.get("candidates"):
        return "record"
    return "gate" if state.get("feedback") is None else "edit"


def route_after_record(state: State) -> Literal["solve", "__end__"]:
    """Continue until a stop reason is set."""
    return "__end__" if state.get("stop_reason") else "solve"
