"""A model that answers every request with the same text and does no work: to measure the client alone."""

from __future__ import annotations

from typing import Any

from videvolve.models.base import Reply, Usage


class CannedVLM:
    """Replies ``text`` to everything (``serve-sim --canned TEXT``); usage counts nothing."""

    revision = "1"

    def __init__(self, text: str, name: str = "canned") -> None:
        self.text, self.name = text, name

    def decoding(self) -> dict[str, Any]:
        """No decoding settings."""
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """The canned text."""
        return Reply(text=self.text, usage=Usage())
