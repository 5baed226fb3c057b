"""The trusted side of the harness SDK: media handles, rendering with captions, metering, budget, model calls.

One :class:`TaskServices` serves one task's harness process; it holds the task's allowlisted view and the video's
path, never the gold answer. Every image or clip that reaches the model is metered
here when the request is built (so a cache hit costs the same as a call): distinct frames (a contact sheet of 24
cells is 24 frames, one image's tokens), image and video tokens, and cumulative prompt tokens across rounds.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Hashable
from typing import Any, cast

from videvolve.config import RuntimeSettings
from videvolve.datasets.transcripts import Transcript
from videvolve.errors import MediaError, ModelRequestError, RequestRefused
from videvolve.media import probe
from videvolve.media.captions import frame_caption
from videvolve.media.data_url import data_url_cache
from videvolve.models.base import SIM_ONLY_NOTICE, VLM, Message, Tool
from videvolve.models.cache import ResponseCache, complete
from videvolve.models.cost import CostModel, text_tokens
from videvolve.models.parsing import parse_match
from videvolve.needles.frames import FrameSource, PlainFrames
from videvolve.skill_library import limits, prompts
from videvolve.skill_library.meter import Meter
from videvolve.skill_library.reading import ReadingServices
from videvolve.skill_library.rendering import Obs, RenderingServices
from videvolve.skill_library.steps import (
    CallEvent,
    InvalidToolCalls,
    LogNote,
    ModelCall,
    ModelError,
    NoticeCheck,
    Refused,
    ToolNote,
)
from videvolve.skill_library.trace import TraceWriter
from videvolve.tasks import TaskView

__all__ = ["Meter", "ServiceError", "TaskServices", "TraceWriter"]

MAX_SHEET_CELLS, MAX_CLIP_FRAMES, MAX_CLIP_FPS = 400, 256, 120.0


class ServiceError(RequestRefused):
    """A refused request; ``kind`` (an :class:`ErrorKind`: budget, invalid, media, ...) is reported to the harness."""


TASK_VIDEO = "the task's video"
"""How a media error names the video to harness code, which never sees its path (a server puts its caller's name
for it back: :func:`videvolve.serving.agent.naming_the_video`)."""
HIDDEN_USAGE = frozenset({"observed_times", "client_s", "largest_request_tokens", "cache_hits", "model_calls"})
"""What ``ctx.usage()`` leaves out of a task's meter: the parent's clock, and what the response cache and the
endpoint did (the same figures for a stored reply as for a paid one)."""

class TaskServices(RenderingServices, ReadingServices):
    """Serves the requests of one task's harness process.

    Each ``op_<name>`` method is a request harness code may send (``HarnessContext.<name>`` in ``sdk.py`` sends it;
    :meth:`handle` refuses any other). Reading (transcript, OCR) is in ``reading.py``, rendering in ``rendering.py``.
    """

    def __init__(self, view: TaskView, video: str, vlm: VLM, cost: CostModel, settings: RuntimeSettings,
                 skill: str = "", cache: ResponseCache | None = None, trace: TraceWriter | None = None,
                 transcript: Transcript | None = None, frames: FrameSource | None = None) -> None:
        self.transcript = transcript
        self.pictures = frames or PlainFrames(video)
        """Every picture shown comes from here (a task with needles gets them painted in; the file is untouched)."""
        self.view = view
        self.video = video
        self.vlm = vlm
        self.cost = cost
        self.settings = settings
        self.skill = skill
        self.cache = cache
        self.trace = trace or TraceWriter(None)
        self.meter = Meter()
        self._handles: dict[str, Obs] = {}
        self._times_held = 0
        self._video_key: Hashable = None

    # ---- the allowlist of calls ----

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        """Dispatch one request from the harness (a video that cannot be read: the task's ``media`` error)."""
        method = getattr(self, f"op_{op}", None)
        if method is None:
            raise ServiceError("invalid", f"unknown request {op!r}")
        try:
            return method(**args)
        except MediaError as exc:  # the task's input (gone, or changed since it was observed), not the harness's
            said = str(exc)  # without the file's path, which harness code never sees
            named = {str(getattr(exc, "path", "") or self.video), str(self.video)}
            for path in sorted(named, key=len, reverse=True):  # the longer first: never "/dir/the task's video"
                said = said.replace(path, TASK_VIDEO)
            raise ServiceError("media", said) from None

    def op_probe(self) -> dict[str, Any]:
        """Duration, rate and size of the task's video."""
        info = probe(self.video)
        return {"duration": info.duration, "fps": info.fps, "width": info.width, "height": info.height}

    def _clamp(self, t: Any) -> float:
        if not isinstance(t, int | float) or not math.isfinite(t):
            raise ServiceError("invalid", f"a time must be a number of seconds, got {t!r}")
        return min(max(float(t), 0.0), self.view.duration)

    def _new(self, obs: Obs) -> dict[str, Any]:
        held = self._times_held + len(obs.times)
        if len(self._handles) >= limits.MAX_HANDLES or held > limits.MAX_HELD_TIMES:
            raise ServiceError("invalid", f"this task's observations would exceed the cap of {limits.MAX_HANDLES} "
                                          f"handles or {limits.MAX_HELD_TIMES} times; reuse the ones you have")
        info = probe(self.video)
        obs.shape = limits.observation_shape(obs.kind, obs.times, info, obs.max_side, obs.cols, obs.cell_width)
        try:
            limits.check_observation(obs.kind, obs.shape)
        except limits.CapExceeded as exc:
            raise ServiceError(exc.kind, str(exc)) from None
        self._times_held = held
        handle = secrets.token_hex(12)
        self._handles[handle] = obs
        return {"handle": handle, "times": obs.times}

    def op_frames(self, times: list[float], max_side: int | None = None) -> list[dict[str, Any]]:
        """One frame handle per time."""
        if not isinstance(times, list) or len(times) > MAX_SHEET_CELLS:
            raise ServiceError("invalid", f"frames takes a list of at most {MAX_SHEET_CELLS} times")
        if len(self._handles) + len(times) > limits.MAX_HANDLES:
            raise ServiceError("invalid", f"{len(times)} more frame handles would exceed this task's cap of "
                                          f"{limits.MAX_HANDLES}; reuse the observations you have")
        side = _side(max_side)
        return [self._new(Obs("frame", [self._clamp(t)], max_side=side)) for t in times]

    def op_sheet(self, times: list[float], cols: int = 6, cell_width: int = 160) -> dict[str, Any]:
        """A contact-sheet handle."""
        if not isinstance(times, list) or not 1 <= len(times) <= MAX_SHEET_CELLS:
            raise ServiceError("invalid", f"a sheet has 1 to {MAX_SHEET_CELLS} cells")
        if not isinstance(cols, int) or not 1 <= cols <= 16 or not isinstance(cell_width, int) \
                or not 16 <= cell_width <= 1024:
            raise ServiceError("invalid", "sheet needs 1 <= cols <= 16 and 16 <= cell_width <= 1024")
        return self._new(Obs("sheet", [self._clamp(t) for t in times], cols=cols, cell_width=cell_width))

    def op_clip(self, start: float, end: float, fps: float = 2.0, max_side: int | None = None) -> dict[str, Any]:
        """A clip handle (its sampled frames)."""
        start, end = self._clamp(start), self._clamp(end)
        if end <= start or not isinstance(fps, int | float) or not 0 < fps <= MAX_CLIP_FPS:
            raise ServiceError("invalid", f"clip needs start < end and 0 < fps <= {MAX_CLIP_FPS}")
        n = min(MAX_CLIP_FRAMES, max(1, math.ceil((end - start) * fps - 1e-9)))
        times = [start + k / fps for k in range(n)]
        return self._new(Obs("clip", times, max_side=_side(max_side), start=start, end=end, fps=float(fps)))

    def op_ask(self, handles: list[str], prompt: str | None = None, mode: str = "answer",
               target: str | None = None, context: str | None = None) -> str:
        """Show observations with a prompt (after ``context``, e.g. a transcript, when given); the model's text."""
        if mode not in ("answer", "match", "describe"):
            raise ServiceError("invalid", f"mode must be answer, match or describe, not {mode!r}")
        if not isinstance(handles, list):
            raise ServiceError("invalid", "ask takes a list of observations")
        try:
            limits.check_observation_count(len(handles))
        except limits.CapExceeded as exc:
            raise ServiceError(exc.kind, str(exc)) from None
        content: list[dict[str, Any]] = []
        for h in handles:
            content += self._observation_parts(h)
        instruction = prompt if isinstance(prompt, str) else self._instruction(mode, target)
        if isinstance(context, str) and context.strip():
            content.append({"type": "text", "text": context})
        content.append({"type": "text", "text": instruction})
        messages: list[Message] = []
        if self.skill.strip():
            messages.append({"role": "system", "content": self.skill})
        messages.append({"role": "user", "content": content})
        return self._call(messages, None, event=cast(CallEvent, f"ask:{mode}"), handles=handles)["text"]

    def op_chat(self, messages: list[dict[str, Any]], tools: list[Tool] | None = None) -> dict[str, Any]:
        """A raw model call with observation parts and tools."""
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ServiceError("invalid", "chat takes a list of message objects")
        rendered: list[Message] = []
        handles: list[str] = []
        for m in messages:
            content = m.get("content")
            why = limits.chat_message_problem(m)
            if why:
                raise ServiceError("invalid", why)
            if isinstance(content, list):
                parts: list[dict[str, Any]] = []
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "observation":
                        handles.append(str(part.get("handle")))
                        parts += self._observation_parts(str(part.get("handle")))
                    elif isinstance(part, dict) and part.get("type") == "text":
                        parts.append({"type": "text", "text": str(part.get("text", ""))})
                    else:
                        raise ServiceError("invalid", "chat content parts are text or observation parts")
                rendered.append({**{k: v for k, v in m.items() if k != "content"}, "content": parts})
            else:
                rendered.append(dict(m))
        return self._call(rendered, tools or None, event="chat", handles=handles)

    def op_parse(self, what: str, text: str) -> Any:
        """Parse a reply in the trusted parent."""
        if what != "match":
            raise ServiceError("invalid", f"cannot parse {what!r}")
        return parse_match(str(text)) or {"yes": [], "maybe": []}

    def op_usage(self) -> dict[str, Any]:
        """What the task has cost so far, as the harness spent it.

        Never how long the parent took (harness code has no clock to time by), nor which of its requests the response
        cache answered (a hit says another task sent the same pixels before: where a needle is not painted).
        """
        return {k: v for k, v in self.meter.to_dict().items() if k not in HIDDEN_USAGE}

    def op_log(self, message: str, data: dict[str, Any] | None = None) -> None:
        """A note in the trace."""
        self.trace.note(LogNote(message=str(message)[:2000], data=data or {}))

    def op_tool(self, name: str, args: dict[str, Any] | None = None) -> None:
        """Count and trace a tool call."""
        self.meter.tool_calls += 1
        self.trace.note(ToolNote(tool=str(name)[:200], params=args or {}))

    # ---- the parent's own request ----

    def confirmed_notice(self) -> str | None:
        """The model's notice that it cannot serve this task, if it says so to the parent's own request (else None).

        A harness can make SimVLM send the notice (a prompt outside SynthWorld's grammar, frames too small to read),
        and the notice turns an unparsable answer into ``unsupported``, which is not the harness's fault. So once a
        task ends unparsed after a notice, the parent asks as the seeds do: the frame at the video's middle at the
        default size, the default instruction, no harness text; neither metered nor traced as the harness's
        request. A real model never sends the notice: this runs only with SimVLM.
        """
        if self.meter.notice is None:
            return None
        middle = self.view.duration / 2
        try:
            image = self.pictures.frames([middle], None)[0].image
            url = data_url_cache.url(None, image, self.settings.image_format, self.settings.jpeg_quality)
            content = [{"type": "text", "text": frame_caption(middle)},
                       {"type": "image_url", "image_url": {"url": url}},
                       {"type": "text", "text": self._instruction("answer", None)}]
            reply = complete(self.vlm, [{"role": "user", "content": content}], None, self.cache).text
        except (MediaError, ModelRequestError) as exc:  # unconfirmed: the harness's own unparsable answer
            said = f"{type(exc).__name__}: {exc}".replace(self.video, TASK_VIDEO)  # as the harness's errors
            self.trace.write(NoticeCheck(observed_times=[middle], error=said[:500]))
            return None
        self.trace.write(NoticeCheck(observed_times=[middle], reply=reply[:500]))
        return reply[:500] if SIM_ONLY_NOTICE in reply else None

    # ---- rendering and metering ----

    def _instruction(self, mode: str, target: str | None) -> str:
        v = self.view
        if mode == "describe":
            return prompts.render("describe")
        if mode == "match":
            return prompts.render("match", target=target or v.question)
        if v.kind == "mcq":
            return prompts.render("answer_mcq", question=v.question, options=prompts.options_block(v.options or ()))
        return prompts.render("answer_grounding", question=v.question, duration=f"{v.duration:.0f}")

    def _observation_parts(self, handle: str) -> list[dict[str, Any]]:
        obs = self._handles.get(handle)
        if obs is None:
            raise ServiceError("invalid", f"unknown observation handle {handle[:8]!r} (handles belong to one task)")
        return [{"type": "observation_ref", "handle": handle}]

    def _call(self, messages: list[Message], tools: list[Tool] | None, event: CallEvent,
              handles: list[str]) -> dict[str, Any]:
        started = time.perf_counter()
        if self.meter.requests >= limits.MAX_REQUESTS:
            raise ServiceError("invalid", f"this task already made {limits.MAX_REQUESTS} model requests (the cap)")
        refs = [p["handle"] for m in messages if isinstance(m.get("content"), list)
                for p in m["content"] if p.get("type") == "observation_ref"]
        try:
            limits.check_observation_count(len(refs))
        except limits.CapExceeded as exc:
            raise ServiceError(exc.kind, str(exc)) from None
        specs = [self._spec(h) for h in refs]
        try:  # from the arguments, before anything is decoded or composited
            limits.check_request([s for h in refs if (s := self._handles[h].shape) is not None], probe(self.video),
                          self.settings.budget)
        except limits.CapExceeded as exc:
            self.trace.write(Refused(event="budget" if exc.kind == "budget" else "invalid", error=str(exc),
                                     used=self.meter.frames, budget=self.settings.budget))
            raise ServiceError(exc.kind, str(exc)) from None
        encoding_before = self.meter.seconds.get("encode", 0.0)
        rendering = time.perf_counter()
        rendered, keys, image_tokens, video_tokens, observed = self._render(messages)
        self.meter.spend("decode", time.perf_counter() - rendering - (self.meter.seconds.get("encode", 0.0)
                                                                       - encoding_before))
        new = keys - self.meter.frame_keys
        budget = self.settings.budget
        if budget is not None and self.meter.frames + len(new) > budget:
            self.trace.write(Refused(event="budget", requested=len(new), used=self.meter.frames, budget=budget))
            raise ServiceError("budget", f"showing {len(new)} more frame(s) would exceed the budget of {budget} "
                                         f"(already shown: {self.meter.frames})")
        text = " ".join(str(p.get("text", "")) for m in rendered for p in (
            m["content"] if isinstance(m.get("content"), list) else [{"text": m.get("content") or ""}]))
        prompt_tokens = text_tokens(text) + image_tokens + video_tokens
        self.meter.frame_keys |= new
        self.meter.image_tokens += image_tokens
        self.meter.video_tokens += video_tokens
        self.meter.cumulative_tokens += prompt_tokens
        self.meter.requests += 1
        self.meter.observed_times |= observed
        try:
            waiting = time.perf_counter()
            reply = complete(self.vlm, rendered, tools, self.cache)
            self.meter.spend("model_wait", time.perf_counter() - waiting)
        except ModelRequestError as exc:
            self.trace.write(ModelError(error=str(exc)))
            raise ServiceError(str(getattr(exc, "kind", "bad_request")), str(exc)) from exc
        if reply.invalid_tool_calls:  # a call the model made but nobody can read: the harness's parse error
            self.trace.write(InvalidToolCalls(calls=reply.invalid_tool_calls, reply=reply.text[:500]))
            raise ServiceError("parse", f"the model's tool call could not be read: {reply.invalid_tool_calls[0]}")
        self.meter.cache_hits += int(reply.cached)
        self.meter.notice = reply.text[:500] if SIM_ONLY_NOTICE in reply.text else self.meter.notice
        self.meter.reported_prompt_tokens += reply.usage.prompt_tokens or 0
        self.meter.completion_tokens += reply.usage.completion_tokens or 0
        self.meter.largest_request_tokens = max(self.meter.largest_request_tokens, reply.prompt_estimate or 0)
        self.trace.write(ModelCall(event=event, observed_times=sorted(observed), observations=specs,
                                   new_frames=len(new), image_tokens=image_tokens, video_tokens=video_tokens,
                                   prompt_tokens=prompt_tokens, reported_prompt_tokens=reply.usage.prompt_tokens,
                                   cached=reply.cached, reply=reply.text[:500],
                                   tool_calls=[c.name for c in reply.tool_calls],
                                   wall_s=round(time.perf_counter() - started, 4)))
        return {"text": reply.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls]}


def _side(max_side: Any) -> int | None:
    if max_side is None:
        return None
    if not isinstance(max_side, int) or not 16 <= max_side <= 4096:
        raise ServiceError("invalid", f"max_side must be an integer in [16, 4096], got {max_side!r}")
    return max_side
