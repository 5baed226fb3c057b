"""Tool calls a server left in the reply text (``<tool_call>{...}</tool_call>``, hermes and Qwen's format).

vLLM returns them as plain text when it runs without ``--enable-auto-tool-choice --tool-call-parser hermes`` (and
Qwen2.5-VL's own chat template has no tool section at all); we parse them on our side. A call that cannot be read
is kept as an invalid call (the harness's ``parse`` error), never dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from videvolve.models.base import ToolCall

TAG = "<tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def _one(raw: str, i: int) -> ToolCall | dict[str, Any]:
    try:
        obj = json.loads(raw.strip())
    except json.JSONDecodeError as exc:
        return {"raw": raw.strip()[:2000], "error": f"not JSON ({exc.msg} at {exc.pos})"}
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return {"raw": raw.strip()[:2000], "error": "no 'name' string"}
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return {"raw": raw.strip()[:2000], "error": "'arguments' is a string that is not JSON"}
    if not isinstance(args, dict):
        return {"raw": raw.strip()[:2000], "error": "'arguments' is not an object"}
    return ToolCall(id=f"call_text_{i}", name=obj["name"], arguments=args)


def calls_in_text(text: str) -> tuple[str, list[ToolCall], list[dict[str, Any]]]:
    """(text before the first call, the calls read, the calls that could not be read)."""
    if TAG not in text:
        return text, [], []
    calls: list[ToolCall] = []
    invalid: list[dict[str, Any]] = []
    for i, (closed, open_) in enumerate(_CALL.findall(text)):
        got = _one(closed or open_, i)
        (calls if isinstance(got, ToolCall) else invalid).append(got)  # type: ignore[arg-type]
    return text[: text.find(TAG)].strip(), calls, invalid
