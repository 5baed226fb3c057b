"""The harness SDK as harness code sees it: pure data and a proxy. Standard library only.

Inside the sandbox this file is importable as ``videvolve_sdk``, the only videvolve module harness code may
import. Every service (decoding, model calls, metering, the frame budget) runs in the trusted parent process;
this proxy only sends size-capped JSON requests over a pipe and returns opaque handles, never pixels.

The bootstrap executes this source in a module whose builtins are the harness's restricted ones, through the
harness's own import function, so nothing here leads to a real module's globals. Errors reach harness code as
fresh :class:`SDKError` objects raised outside any ``except`` block: no traceback or context from the standard
library (whose frames hold real globals) travels with them.
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing is not imported at run time: a sandboxed child starts faster without it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_NESTING = 32
"""Lists and objects in one message nest at most this deep (both sides check, before the parent decodes it)."""
MAX_MESSAGE_VALUES = 65536
"""Lists, objects and separated values in one message: decoding one costs the parent at most a few MB."""
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")


def message_problem(text: str) -> str | None:
    """Why a JSON message is refused before it is decoded (nested too deep, too many values), or None.

    Linear: strings are cut out first (brackets and commas in text are not structure), then the rest is counted.
    """
    bare = _JSON_STRING.sub("", text)
    values = bare.count(",") + bare.count("[") + bare.count("{")
    if values > MAX_MESSAGE_VALUES:
        return f"a message holds more than {MAX_MESSAGE_VALUES} values (about {values}); send less per request"
    depth = deepest = 0
    for ch in _NOT_BRACKET.sub("", bare):
        depth += 1 if ch in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        return f"a message nested {deepest} levels deep (at most {MAX_NESTING}); flatten the data"
    return None


class SDKError(Exception):
    """A service refused a request (bad arguments, a model's bad-request error, ...)."""


class BudgetExceeded(SDKError):
    """The request would show the model more distinct frames than the task's budget allows."""


class TaskView:
    """What a harness knows about its task: id, kind, question, options, duration. Nothing else."""

    __slots__ = ("duration", "id", "kind", "options", "question")

    def __init__(self, id: str, kind: str, question: str, options: list[str] | None, duration: float) -> None:
        self.id = id
        self.kind = kind
        self.question = question
        self.options = tuple(options) if options else None
        self.duration = float(duration)

    def __repr__(self) -> str:
        return f"TaskView(id={self.id!r}, kind={self.kind!r}, question={self.question!r})"


class Observation:
    """An opaque handle to media prepared by the parent: a frame, a contact sheet or a clip."""

    __slots__ = ("handle", "kind", "times")

    def __init__(self, handle: str, kind: str, times: list[float]) -> None:
        self.handle = handle
        self.kind = kind
        self.times = tuple(times)

    def part(self) -> dict[str, str]:
        """The message content part that shows this observation in :meth:`HarnessContext.chat`."""
        return {"type": "observation", "handle": self.handle}

    def __repr__(self) -> str:
        return f"Observation({self.kind}, {len(self.times)} time(s))"


class ModelReply:
    """A model's reply: its text and the tool calls it asked for."""

    __slots__ = ("text", "tool_calls")

    def __init__(self, text: str, tool_calls: list[dict[str, Any]]) -> None:
        self.text = text
        self.tool_calls = tool_calls


class Tool:
    """A harness tool: a schema the model sees and a function run with the context."""

    __slots__ = ("description", "fn", "name", "parameters")

    def __init__(self, name: str, description: str, parameters: dict[str, Any], fn: Callable[..., Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.fn = fn

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema of this tool."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class Channel:
    """Line-delimited JSON requests to the parent over two pipes."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self._reader = reader
        self._writer = writer
        self._next = 0

    def _write(self, message: dict[str, Any]) -> None:
        data = _dumps(message)
        if data is None:
            raise SDKError("request arguments must be plain JSON (numbers, strings, lists, dicts)")
        if len(data) > MAX_MESSAGE_BYTES:
            raise SDKError(f"request too large ({len(data)} bytes)")
        why = message_problem(data)
        if why is not None:
            raise SDKError(why)
        failed = False
        try:
            self._writer.write(data + "\n")
            self._writer.flush()
        except (OSError, ValueError):
            failed = True
        if failed:
            raise SDKError("the parent closed the channel")

    def send(self, op: str, **args: Any) -> None:
        """Send a message that needs no reply."""
        self._write({"op": op, "args": args})

    def call(self, op: str, **args: Any) -> Any:
        """Send a request and wait for its reply."""
        self._next += 1
        self._write({"id": self._next, "op": op, "args": args})
        reply = None
        try:
            reply = json.loads(self._reader.readline(MAX_MESSAGE_BYTES + 1) or "null")
        except (OSError, ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            raise SDKError("the parent closed the channel")
        if reply.get("ok"):
            return reply.get("result")
        if reply.get("kind") == "budget":
            raise BudgetExceeded(str(reply.get("error", "frame budget exceeded")))
        raise SDKError(str(reply.get("error", "request failed")))


class HarnessContext:
    """Services for one task. ``config`` is the harness's config.toml; ``tools`` its media tools."""

    def __init__(self, channel: Channel, task: TaskView, config: dict[str, Any], budget: int | None,
                 skill: str = "") -> None:
        self._channel = channel
        self.task = task
        self.config = config
        self.skill = skill
        """The harness's SKILL.md (its policy; the system prompt for agentic use)."""
        self.budget = budget
        self.tools: dict[str, Tool] = {}

    def probe(self) -> dict[str, Any]:
        """Duration, frame rate and size of the task's video."""
        return dict(self._channel.call("probe"))

    def frames(self, times: list[float], max_side: int | None = None) -> list[Observation]:
        """One observation per time: the frame on screen then (times are clamped to the video)."""
        out = self._channel.call("frames", times=[float(t) for t in times], max_side=max_side)
        return [Observation(o["handle"], "frame", o["times"]) for o in out]

    def sheet(self, times: list[float], cols: int = 6, cell_width: int = 160) -> Observation:
        """A contact sheet: the frames at ``times`` in a grid, each cell labelled with its time."""
        o = self._channel.call("sheet", times=[float(t) for t in times], cols=cols, cell_width=cell_width)
        return Observation(o["handle"], "sheet", o["times"])

    def clip(self, start: float, end: float, fps: float = 2.0, max_side: int | None = None) -> Observation:
        """A clip of [start, end) sampled at ``fps`` (its frames count against the budget)."""
        o = self._channel.call("clip", start=float(start), end=float(end), fps=float(fps), max_side=max_side)
        return Observation(o["handle"], "clip", o["times"])

    def ask(self, observations: list[Observation], prompt: str | None = None, mode: str = "answer",
            target: str | None = None, context: str | None = None) -> str:
        """Show observations to the model with a prompt; returns its text.

        ``mode``: ``answer`` (the task's question; the default prompt asks for a letter or intervals),
        ``match`` (which observations show ``target``; reply ``{"yes": [...], "maybe": [...]}``) or
        ``describe`` (one line per observation). ``prompt`` replaces the default instruction; ``context`` (a
        transcript, notes) is shown before it.
        """
        return str(self._channel.call("ask", handles=[o.handle for o in observations], prompt=prompt, mode=mode,
                                      target=target, context=context))

    def chat(self, messages: list[dict[str, Any]], tools: list[Tool] | None = None) -> ModelReply:
        """A raw model call; content parts may be ``Observation.part()``. Tools are offered by schema."""
        out = self._channel.call("chat", messages=messages, tools=[t.schema() for t in tools or []])
        return ModelReply(out["text"], out["tool_calls"])

    def call_tool(self, name: str, **args: Any) -> Any:
        """Run one of the harness's tools (logged as a tool call)."""
        if name not in self.tools:
            raise SDKError(f"unknown tool {name!r}; this harness has {sorted(self.tools)}")
        self._channel.send("tool", name=name, args={k: v for k, v in args.items() if _plain(v)})
        return self.tools[name].fn(self, **args)

    def transcript(self, start: float = 0.0, end: float | None = None) -> list[dict[str, Any]]:
        """The transcript segments overlapping ``[start, end]``, each ``{"start", "end", "text"}``.

        ``end=None``: to the end of the video; ``[]`` when the video has no transcript. Metered as text tokens.
        """
        return list(self._channel.call("transcript", start=float(start), end=None if end is None else float(end)))

    def search_transcript(self, text: str) -> list[tuple[float, float]]:
        """``(start, end)`` of every transcript segment where ``text`` is said (case-folded plain matching)."""
        return [(float(a), float(b)) for a, b in self._channel.call("search_transcript", text=str(text))]

    def ocr(self, observation: Observation) -> list[dict[str, Any]]:
        """The text written in a frame or contact sheet, one ``{"text", "score", "box"}`` per line, top to bottom.

        Its frames count against the budget; the image's visual tokens are metered as ``ocr_tokens``.
        """
        return list(self._channel.call("ocr", handle=observation.handle))

    def parse_match(self, text: str) -> dict[str, list[float]]:
        """Parse a match reply (``{"yes": [...], "maybe": [...]}`` or a list of times) in the parent."""
        return dict(self._channel.call("parse", what="match", text=text))

    def usage(self) -> dict[str, Any]:
        """Frames and tokens this task has used so far."""
        return dict(self._channel.call("usage"))

    def log(self, message: str, **data: Any) -> None:
        """A note in the task's trace."""
        self._channel.send("log", message=str(message)[:2000], data={k: v for k, v in data.items() if _plain(v)})


def _dumps(value: Any) -> str | None:
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return None


def _plain(value: Any) -> bool:
    return _dumps(value) is not None
