"""The VLM protocol: OpenAI-format messages in, a reply with usage out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
"""An OpenAI chat message: ``{"role": ..., "content": str | [parts], "tool_calls": [...]}``. Image parts are
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``."""
Tool = dict[str, Any]
"""An OpenAI tool schema: ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
SIM_ONLY_NOTICE = "SimVLM understands only SynthWorld; use --backend openai with a real VLM"
"""What SimVLM replies to a question or pictures outside SynthWorld. The parent recognises it in a reply, and a task
that ends without an answer after it is the outcome ``unsupported`` (a notice for the user), not a parse failure."""


@dataclass
class ToolCall:
    """One function call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Usage:
    """Token counts as the server reported them (None where it reported nothing)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass
class Reply:
    """What a model said."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    invalid_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Calls the model made that could not be read (``raw`` text and ``error``): the harness's parse error."""
    prompt_estimate: int | None = None
    """The request's prompt tokens as the context guard counts them (None: no guard, as SimVLM has none)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (for the response cache and traces)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        """Inverse of :meth:`to_dict`."""
        return cls(
            text=data.get("text", ""),
            tool_calls=[ToolCall(**c) for c in data.get("tool_calls", [])],
            usage=Usage(**data.get("usage", {})),
            cached=bool(data.get("cached", False)),
            invalid_tool_calls=list(data.get("invalid_tool_calls", [])),
            prompt_estimate=data.get("prompt_estimate"),
        )


@runtime_checkable
class ServedContext(Protocol):
    """A model behind an endpoint whose context length it knows (a server's ``max_model_len``)."""

    def served_context(self) -> int | None:
        """The prompt tokens a request may use there (the served length less the guard's margin; None: unknown)."""
        ...


def served_context_of(model: object) -> int | None:
    """``model``'s served context where it knows one (an endpoint's), else None (SimVLM, scripted models)."""
    return model.served_context() if isinstance(model, ServedContext) else None


@runtime_checkable
class ContextChecked(Protocol):
    """A model that refuses, before anything is sent, a request its endpoint's context cannot hold."""

    def check_context(self, messages: list[Message], tools: list[Tool] | None) -> int | None:
        """The request's prompt tokens (None: not counted); :class:`~videvolve.errors.ContextTooLong` if too long."""
        ...


def check_context(model: object, messages: list[Message], tools: list[Tool] | None) -> int | None:
    """``model``'s context check, where it has one: the request's prompt tokens as it counts them (else None).

    Run before the response cache is read: a reply stored under a longer ``--max-model-len`` is not given for a
    request the endpoint now refuses.
    """
    return model.check_context(messages, tools) if isinstance(model, ContextChecked) else None


@runtime_checkable
class Reachable(Protocol):
    """A model behind an endpoint that can be asked what it serves (``GET /v1/models``)."""

    def reach(self) -> None:
        """Ask until the endpoint answers (retried as a request is; :class:`InfraError` when it never does)."""
        ...


def reach(model: object) -> None:
    """Have ``model`` learn what its endpoint serves, where it has one (:class:`Reachable`; SimVLM has none).

    Its revision names the checkpoint behind the served name: what it is to produce is keyed once that is known, not
    while a server still loading looks like one serving the name itself.
    """
    if isinstance(model, Reachable):
        model.reach()


@runtime_checkable
class Timed(Protocol):
    """A model whose requests give up after a known time (then they are retried, or the run stops cleanly)."""

    @property
    def request_timeout_s(self) -> float | None:
        """Seconds one attempt of a request may take (an endpoint's client timeout; None: unbounded)."""
        ...


def request_timeout_of(model: object) -> float | None:
    """``model``'s :attr:`Timed.request_timeout_s` where it has one (an endpoint's), else None."""
    return model.request_timeout_s if isinstance(model, Timed) else None


class VLM(Protocol):
    """A vision-language model behind one call."""

    name: str
    """Model name (also part of the response-cache key)."""
    @property
    def revision(self) -> str:
        """Anything that changes the model's behaviour beyond its name (a checkpoint hash, a version)."""
        ...

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        """Answer a conversation; raise ``InfraError`` (retryable, run stops) or ``ModelRequestError``."""
        ...

    def decoding(self) -> dict[str, Any]:
        """Decoding settings that change replies (temperature, max tokens, ...), for the cache key."""
        ...
