"""Vision-language model backends: SimVLM offline, or any OpenAI-compatible server such as vLLM."""

from __future__ import annotations

from videvolve.config import ModelSettings
from videvolve.models.base import VLM, Message, Reply, Tool, ToolCall, Usage


def make_vlm(settings: ModelSettings, api_key: str | None = None) -> VLM:
    """The backend named by the settings."""
    if settings.backend == "sim":
        from videvolve.models.sim import SimVLM

        return SimVLM(settings.family, settings.max_pixels)
    from videvolve.models.openai_backend import openai_vlm

    return openai_vlm(settings, api_key)


__all__ = ["VLM", "Message", "Reply", "Tool", "ToolCall", "Usage", "make_vlm"]
