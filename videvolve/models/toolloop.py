"""A tool-calling conversation with a model: ask, run its calls, send their results back, until one call finishes it.

The model is driven through the :class:`~videvolve.models.base.VLM` protocol, whose OpenAI backend binds the tools
with langchain's ``bind_tools`` and reads its ``tool_calls`` (and ``invalid_tool_calls``); the conversation is plain
OpenAI messages. Every way a model can fail ends the loop with its reason in ``failure``: it answers without a tool
call (after one reminder), every call of several rounds in a row is refused (unknown tool, bad arguments, a call
that cannot be read, a refusal of the tool itself), its rounds or its time are spent, or the endpoint rejects a
request or returns something unreadable. A tool call that cannot be read (bad JSON arguments) gets the parse error
back as the next message, so the model can correct it, and counts as a refused round; a reply without any tool call
gets the ``nudge``. At most :data:`CALLS_PER_REPLY` calls of one reply run, and none once the deadline has passed;
the others are answered "skipped". Every model-driven part uses this one loop (the agent editor, the agent
investigator). An endpoint that is misconfigured (:class:`EndpointError`) or down after the retry window
(:class:`InfraError`) is not the model's failure: it propagates and stops the run cleanly for ``--resume``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from videvolve.errors import ModelRequestError
from videvolve.models.base import VLM, Message, Reply, Tool, ToolCall

T = TypeVar("T")

REFUSED_ROUNDS = 3
"""Consecutive rounds whose every tool call was refused before the conversation is abandoned."""
QUIET_ROUNDS = 2
"""Consecutive replies without a tool call before the conversation is abandoned (a reminder is sent after each)."""
CALLS_PER_REPLY = 16
"""Tool calls of one reply that are run; the rest are answered "skipped" (a reply of 10,000 trials ran them all)."""


def unencodable(args: object) -> str | None:
    """Why a call's arguments cannot be used, or None.

    Text UTF-8 cannot hold (a lone surrogate, which a JSON escape such as backslash-ud800 gives): every file, log
    and request it reached would fail to encode it.
    """
    try:
        json.dumps(args, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"the arguments hold text UTF-8 cannot encode ({exc.reason} at character {exc.start}); send UTF-8 text"
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the arguments cannot be read as JSON values ({str(exc)[:200]})"
    return None


def assistant_message(reply: Reply) -> Message:
    """A reply as the OpenAI assistant message that goes back into the conversation."""
    return {"role": "assistant", "content": reply.text or "",
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                           for c in reply.tool_calls]}


@dataclass
class ToolLoop(Generic[T]):
    """Runs one conversation; ``dispatch(call)`` returns (result text, whether it succeeded, the final value or None).

    ``deadline`` (``time.monotonic``) bounds the conversation's time; ``on_reply`` sees each reply once it is in the
    conversation (a log, a ledger); ``answer_final=False`` leaves the call that ended the conversation unanswered,
    its id in ``pending``, so that a later turn answers it (the editor's repair round sends the validation failure
    as that call's result).
    """

    vlm: VLM
    schemas: list[Tool]
    """The tools offered, as OpenAI function schemas."""
    rounds: int
    """Replies asked for at most (each reply is a round)."""
    who: str
    """Names the model in failure reasons ("the investigator model ...")."""
    goal: str
    """What its last call does ("diagnosing", "submitting")."""
    nudge: str
    """The reminder sent after a reply without a tool call."""
    used: int = 0
    """Rounds used so far."""
    failure: str | None = None
    """Why the last :meth:`run` ended without a value."""
    messages: list[Message] = field(default_factory=list)
    deadline: float | None = None
    on_reply: Callable[[Reply], None] | None = None
    answer_final: bool = True
    pending: str | None = None

    def _ask(self) -> Reply | None:
        try:
            return self.vlm.complete(self.messages, self.schemas)
        except ModelRequestError as exc:
            self.failure = f"the {self.who} model failed: {str(exc)[:400]}"
            return None

    def run(self, messages: list[Message], dispatch: Callable[[ToolCall], tuple[str, bool, T | None]]) -> T | None:
        """The final value, or None with the reason in ``failure``."""
        self.messages, self.failure, self.pending = messages, None, None
        quiet = refused = 0
        last = ""
        while self.used < self.rounds:
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.failure = f"the {self.who} model timed out after {self.used} round(s) without {self.goal}"
                return None
            reply = self._ask()
            if reply is None:
                return None
            self.used += 1
            messages.append(assistant_message(reply))
            if self.on_reply is not None:
                self.on_reply(reply)
            if not reply.tool_calls and reply.invalid_tool_calls:
                last = "; ".join(f"{c.get('name') or '?'}: {c.get('error')}" for c in reply.invalid_tool_calls)
                last = f"error: the tool call could not be read ({last[:300]}); send JSON arguments"
                messages.append({"role": "user", "content": last})
                refused += 1
            elif not reply.tool_calls:
                quiet += 1
                if quiet >= QUIET_ROUNDS:
                    self.failure = (f"the {self.who} model answered without calling a tool {quiet} times in a row "
                                    f"(last reply: {reply.text.strip()[:200]!r})")
                    return None
                messages.append({"role": "user", "content": self.nudge})
                continue
            else:
                quiet = 0
                done, ok_any, last = self._calls(reply, dispatch)
                if done is not None:
                    return done
                refused = 0 if ok_any else refused + 1
            if refused >= REFUSED_ROUNDS:
                self.failure = (f"every tool call of the {self.who} model's last {refused} rounds was refused; the "
                                f"last: {last[:300]}")
                return None
        self.failure = f"the {self.who} model used its {self.rounds} rounds without {self.goal}" + (
            f"; the last refused call: {last[:300]}" if refused else "")
        return None

    def _calls(self, reply: Reply, dispatch: Callable[[ToolCall], tuple[str, bool, T | None]]) -> tuple[
            T | None, bool, str]:
        ok_any, last = False, ""
        for i, call in enumerate(reply.tool_calls):
            late = self.deadline is not None and time.monotonic() > self.deadline
            if i >= CALLS_PER_REPLY or late:  # every call gets an answer, as the protocol wants; these are not run
                last = "skipped: " + ("out of time" if late else f"at most {CALLS_PER_REPLY} tool calls of one reply "
                                                                  "are run")
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": last})
                continue
            why = unencodable(call.arguments)
            text, ok, done = (f"error: {why}", False, None) if why else dispatch(call)
            ok_any, last = ok_any or ok, text
            if done is None or self.answer_final:
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            if done is not None:
                self.pending = None if self.answer_final else call.id
                for later in reply.tool_calls[i + 1:]:
                    self.messages.append({"role": "tool", "tool_call_id": later.id,
                                          "content": "skipped: the previous call ended the conversation"})
                return done, True, text
        return None, ok_any, last
