"""The tool-calling loop that drives the model-driven editor and investigator: what one reply may make it do."""

from __future__ import annotations

import time
from typing import Any

from videvolve.models.base import Reply, ToolCall
from videvolve.models.toolloop import CALLS_PER_REPLY, ToolLoop


class Replies:
    """A model whose replies are given, in order."""

    name, revision = "replies", "1"

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies

    def decoding(self) -> dict[str, Any]:
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        return self.replies.pop(0)


def _calls(n: int, name: str = "trial") -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=name, arguments={"i": i}) for i in range(n)]


def _loop(replies: list[Reply], deadline: float | None = None) -> ToolLoop[str]:
    return ToolLoop(vlm=Replies(replies), schemas=[], rounds=5, who="editor", goal="submitting", nudge="call a tool",
                    deadline=deadline)


def test_a_reply_of_thousands_of_calls_runs_a_bounded_number_and_answers_every_one() -> None:
    ran: list[int] = []

    def dispatch(call: ToolCall) -> tuple[str, bool, str | None]:
        if call.name == "submit":
            return "submitted", True, "done"
        ran.append(call.arguments["i"])
        return "ok", True, None

    loop = _loop([Reply(text="", tool_calls=_calls(5000)), Reply(text="", tool_calls=_calls(1, "submit"))])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "edit"}]
    assert loop.run(messages, dispatch) == "done"
    assert ran == list(range(CALLS_PER_REPLY))
    answered = [m for m in messages if m["role"] == "tool"]
    assert len(answered) == 5001  # every call id has its answer, as the chat protocol requires
    assert all("skipped" in m["content"] for m in answered[CALLS_PER_REPLY:5000])


def test_calls_of_one_reply_stop_at_the_deadline() -> None:
    ran: list[int] = []
    loop = _loop([Reply(text="", tool_calls=_calls(6))], deadline=time.monotonic() + 3600)

    def dispatch(call: ToolCall) -> tuple[str, bool, str | None]:
        ran.append(call.arguments["i"])
        loop.deadline = time.monotonic() - 1  # the first call spends the conversation's time (no clock race)
        return "ok", True, None

    assert loop.run([{"role": "user", "content": "edit"}], dispatch) is None
    assert ran == [0] and loop.failure is not None and "timed out" in loop.failure
