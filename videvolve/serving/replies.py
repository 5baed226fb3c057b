"""The replies of ``videvolve serve``: a chat completion, and the last chunks of a stream."""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from videvolve.errors import Cancelled
from videvolve.serving.agent import AgentAnswer
from videvolve.serving.api_errors import error_reply
from videvolve.serving.steps import steps_text
from videvolve.serving.streaming import final_chunks


def completion(model_id: str, answer: AgentAnswer, steps: list[str] | None = None) -> dict[str, Any]:
    """The chat completion object of an answer; a harness's own failure is an empty answer, its cost counted.

    ``steps``: what the harness did, a line each, as the message's ``reasoning`` (where vLLM puts a model's thinking).
    """
    message = {"role": "assistant", "content": answer.text, **({"reasoning": steps_text(steps)} if steps else {})}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": model_id,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(answer), "logprobs": None}],
        "usage": _usage(answer), "videvolve": _extra(answer),
    }


def streamed_end(answer: AgentAnswer | Exception, include_usage: bool) -> list[dict[str, Any]]:
    """The last events of a streamed answer: its chunks, or the error event of what was raised instead."""
    if isinstance(answer, Exception):
        return [] if isinstance(answer, Cancelled) else [error_reply(answer).body()]  # nobody is left to read a cancel
    return final_chunks(answer, _finish_reason(answer), _usage(answer), _extra(answer), include_usage)


def _finish_reason(answer: AgentAnswer) -> Literal["stop", "error"]:
    return "stop" if answer.outcome == "ok" else "error"


def _usage(answer: AgentAnswer) -> dict[str, Any]:
    cost = answer.cost
    return {"prompt_tokens": cost.prompt_tokens, "completion_tokens": cost.completion_tokens,
            "total_tokens": cost.prompt_tokens + cost.completion_tokens, "frames": cost.frames,
            "visual_tokens": cost.visual_tokens, "calls": cost.calls, "evidence_times": answer.evidence_times}


def _extra(answer: AgentAnswer) -> dict[str, Any]:
    """The ``videvolve`` field: the whole answer, and the harness that gave it (were best/ promoted since)."""
    return {**answer.model_dump(mode="json"), "harness": answer.harness}
