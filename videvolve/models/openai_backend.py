"""VLMs behind an OpenAI-compatible server (vLLM is the reference), through langchain-openai.

Transient failures (connection errors, timeouts, 429, 5xx) are retried with exponential backoff and a bound, then
raised as :class:`InfraError` (the run stops cleanly and resumes later). 400/401/403/404 fail at once: 401/403/404
as :class:`ModelAuthError`-style infrastructure errors naming the endpoint, the model and what to check; a 400 (too
many images, context too long) as :class:`ModelRequestError`, which is that task's error, not the end of the run.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from videvolve.config import ModelSettings
from videvolve.errors import InfraError, ModelRequestError, UsageError
from videvolve.models.base import Message, Reply, Tool, ToolCall, Usage

TRANSIENT = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError)


class EndpointError(InfraError):
    """The endpoint refuses us for a reason retrying will not fix (auth, unknown model, wrong URL)."""


def _to_langchain(messages: list[Message]) -> list[BaseMessage]:
    fixed = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            m["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                if "function" in c else
                {"id": c["id"], "type": "function", "function": {"name": c["name"],
                                                                 "arguments": json.dumps(c.get("arguments", {}))}}
                for c in m["tool_calls"]
            ]
        fixed.append(m)
    return convert_to_messages(fixed)


class ChatModelVLM:
    """Any LangChain chat model as a :class:`~videvolve.models.base.VLM` (tests inject scripted ones)."""

    def __init__(self, chat: BaseChatModel, name: str, revision: str = "", where: str = "",
                 decoding: dict[str, Any] | None = None, max_retries: int = 4) -> None:
        self.chat = chat
        self.name = name
        self.revision = revision
        self.where = where
        self._decoding = decoding or {}
        self.max_retries = max_retries

    def decoding(self) -> dict[str, Any]:
        """Settings that change replies."""
        return dict(self._decoding)

    def _invoke(self, messages: list[BaseMessage], tools: list[Tool] | None) -> AIMessage:
        model: Any = self.chat.bind_tools(tools) if tools else self.chat
        out = model.invoke(messages)
        assert isinstance(out, AIMessage)
        return out

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        """One request, with retries of transient failures only."""
        lc = _to_langchain(messages)
        try:
            for attempt in Retrying(retry=retry_if_exception_type(TRANSIENT), reraise=True,
                                    stop=stop_after_attempt(self.max_retries + 1),
                                    wait=wait_exponential(multiplier=0.5, max=20)):
                with attempt:
                    out = self._invoke(lc, tools)
        except TRANSIENT as exc:
            raise InfraError(f"model endpoint {self.where or '?'} (model {self.name}) failed after "
                             f"{self.max_retries} retries: {str(exc).rstrip('.')}. Check that the server is up; "
                             "finished work is kept.") from exc
        except openai.AuthenticationError as exc:
            raise EndpointError(f"{self.where}: authentication failed for model {self.name} (401). Set the API key "
                                "in the environment variable named by --api-key-env.") from exc
        except openai.PermissionDeniedError as exc:
            raise EndpointError(f"{self.where}: permission denied for model {self.name} (403).") from exc
        except openai.NotFoundError as exc:
            raise EndpointError(f"{self.where}: not found (404) for model {self.name!r}: check --base-url (it ends "
                                "in /v1 for vLLM) and that --model is the name `vllm serve` printed "
                                "(`videvolve doctor` lists the served models).") from exc
        except openai.BadRequestError as exc:
            raise ModelRequestError(f"{self.where} rejected the request (400) for model {self.name}: "
                                    f"{getattr(exc, 'message', exc)}") from exc
        calls = [ToolCall(id=c.get("id") or f"call_{i}", name=c["name"], arguments=dict(c.get("args") or {}))
                 for i, c in enumerate(out.tool_calls)]
        usage: dict[str, Any] = dict(out.usage_metadata or {})
        text = out.content if isinstance(out.content, str) else "".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in out.content)
        return Reply(text=text, tool_calls=calls,
                     usage=Usage(prompt_tokens=usage.get("input_tokens"), completion_tokens=usage.get("output_tokens")))


def openai_vlm(settings: ModelSettings, api_key: str | None = None) -> ChatModelVLM:
    """A VLM on an OpenAI-compatible endpoint; the API key comes from the flag or the environment, never stored."""
    from langchain_openai import ChatOpenAI

    if not settings.base_url:
        raise UsageError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1 for `vllm serve`)")
    key = api_key or os.environ.get(settings.api_key_env) or "EMPTY"
    chat = ChatOpenAI(base_url=settings.base_url, api_key=key, model=settings.model,
                      temperature=settings.temperature, max_tokens=settings.max_tokens,
                      timeout=settings.timeout_s, max_retries=0)
    return ChatModelVLM(chat, name=settings.model, where=settings.base_url, max_retries=settings.max_retries,
                        decoding={"temperature": settings.temperature, "max_tokens": settings.max_tokens})
