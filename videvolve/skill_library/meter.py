"""What one task has cost: distinct frames, visual tokens, text read from transcripts, OCR calls, model calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Meter:
    """What one task has cost."""

    frame_keys: set[float] = field(default_factory=set)
    image_tokens: int = 0
    video_tokens: int = 0
    cumulative_tokens: int = 0
    reported_prompt_tokens: int = 0
    completion_tokens: int = 0
    """Tokens the model wrote, as the server reported them (a cached reply counts what it cost when made)."""
    largest_request_tokens: int = 0
    """The largest request's prompt tokens as the context guard counted them (0: no guard): where a rerun may
    reuse this result, the endpoint must still take it."""
    requests: int = 0
    cache_hits: int = 0
    tool_calls: int = 0
    observed_times: set[float] = field(default_factory=set)
    transcript_tokens: int = 0
    """Text tokens of the distinct transcript segments the harness read (never frames)."""
    transcript_segments: set[int] = field(default_factory=set)
    transcript_searches: int = 0
    """``search_transcript`` requests (capped per task; the segments they match are metered as read)."""
    ocr_calls: int = 0
    ocr_tokens: int = 0
    """The visual tokens of the images OCR read (the gate counts them as visual cost)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the task's client time went: sandbox start, decoding, encoding, waiting for the model."""
    notice: str | None = None
    """A reply in which the model said it cannot serve this input (``SIM_ONLY_NOTICE``)."""

    def spend(self, what: str, seconds: float) -> None:
        """Add to one of the client-time columns."""
        self.seconds[what] = self.seconds.get(what, 0.0) + seconds

    @property
    def frames(self) -> int:
        """Distinct video frames shown to the model (or read by OCR)."""
        return len(self.frame_keys)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form: exactly the fields of :class:`~videvolve.usage.TaskUsage`, which a result stores.

        A test holds the two to each other: a counter named otherwise here would be read there as 0.
        """
        return {"frames": self.frames, "image_tokens": self.image_tokens, "video_tokens": self.video_tokens,
                "cumulative_tokens": self.cumulative_tokens, "reported_prompt_tokens": self.reported_prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "largest_request_tokens": self.largest_request_tokens,
                "requests": self.requests, "model_calls": self.requests - self.cache_hits,
                "cache_hits": self.cache_hits, "tool_calls": self.tool_calls,
                "transcript_tokens": self.transcript_tokens, "ocr_calls": self.ocr_calls,
                "ocr_tokens": self.ocr_tokens, "observed_times": sorted(self.observed_times),
                "client_s": {k: round(v, 4) for k, v in sorted(self.seconds.items())}}
