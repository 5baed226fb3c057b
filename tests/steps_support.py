"""Trace steps as tests build them: a model call with only what a test cares about (the rest zero)."""

from __future__ import annotations

from videvolve.skill_library.steps import CallEvent, FrameSpec, ModelCall, SheetSpec


def model_call(times: list[float], max_side: int | None = None, event: CallEvent = "ask:answer", reply: str = "",
               tool_calls: list[str] | None = None, sheet: bool = False, new_frames: int | None = None) -> ModelCall:
    """A model call that showed ``times`` as frames (or as one contact sheet of 160 px cells)."""
    spec = SheetSpec(times=times, cell_width=160, cols=6) if sheet else \
        FrameSpec(kind="frame", times=times, max_side=max_side)
    return ModelCall(event=event, observed_times=sorted(times), observations=[spec],
                     new_frames=len(times) if new_frames is None else new_frames, image_tokens=0, video_tokens=0,
                     prompt_tokens=0, reported_prompt_tokens=None, cached=False, reply=reply,
                     tool_calls=tool_calls or [], wall_s=0.0)
