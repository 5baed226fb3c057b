"""Perceived tasks: one dense look at a video by the model, and questions written from what it said it saw.

The model is shown every frame at a fixed rate, at full resolution, in batches, with the SDK's ``describe`` prompt
(each request metered with the cost model, each reply cached). Its replies form a timeline; glyph names it reports
on consecutive frames become appearances, and the world's question templates are drawn over them, the answers
being what the model saw (a model that misses a glyph writes questions without it: these labels are only as good as
the model's eyes, which is why each task records ``label_source = "perceived"``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from videvolve.atomic import write_text_atomic
from videvolve.datasets.synthworld import questions as q
from videvolve.datasets.synthworld.palette import BACKGROUNDS, GLYPH_COLOURS, SHAPES
from videvolve.datasets.synthworld.script import Event, Scene, VideoScript
from videvolve.media.captions import frame_caption
from videvolve.media.data_url import encode_data_url
from videvolve.media.decode import frames_at
from videvolve.media.info import file_key, probe
from videvolve.models.base import VLM, Message
from videvolve.models.cache import ResponseCache, complete
from videvolve.models.cost import CostModel, text_tokens
from videvolve.skill_library import prompts

BATCH = 8
"""Frames per describe request."""
LOOK_VERSION = 2
"""Bumped when the same replies would make another timeline (2: frames a reply left out are asked about alone, and
those still not described are recorded), so that a timeline of an older look is made again (its replies cached)."""
_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s\s*[:\-]\s*(.+?)\s*$", re.M)
_GLYPH = re.compile(rf"\b({'|'.join(GLYPH_COLOURS)})\s+({'|'.join(SHAPES)})\b", re.I)
_BG = re.compile(rf"\b({'|'.join(BACKGROUNDS)})\s+background\b", re.I)


class Timeline(BaseModel):
    """What the model said about each frame it was shown, and what that cost."""

    video_id: str
    fps: float
    duration: float
    entries: list[tuple[float, str]]
    requests: int
    prompt_tokens: int
    frames: int
    stamp: str = ""
    """:func:`look_stamp` of the look that made it (empty: written before stamps, never reused)."""
    undescribed: list[float] = []
    """The frame no reply described in the asked form (``<time> s: <what is seen>``), even shown alone, and every
    frame after it (the look stopped there): what is on screen there is unknown."""
    unread: str = ""
    """The start of the reply that left that frame undescribed (to show what the model said instead)."""


def model_identity(vlm: VLM, cost: CostModel, image_format: str = "png", jpeg_quality: int = 90) -> dict[str, Any]:
    """What decides a look's replies and its meter: the model client, the model, its decoding, the cost model.

    And how frames are encoded, named when not PNG (looks stored before it was asked for keep their stamps), with
    the JPEG quality when not 90 (the one every JPEG look had before ``--jpeg-quality`` was heard).
    """
    out = {"backend": type(vlm).__qualname__, "model": vlm.name, "revision": vlm.revision,
           "decoding": vlm.decoding(), "cost": cost.name}
    if image_format == "png":
        return out
    return {**out, "image_format": image_format, **({"jpeg_quality": jpeg_quality} if jpeg_quality != 90 else {})}


def look_stamp(path: str, vlm: VLM, cost: CostModel, fps: float, image_format: str = "png",
               jpeg_quality: int = 90) -> str:
    """One look's identity: the video file's version (size, mtime), the model (:func:`model_identity`) and the rate."""
    payload = [file_key(path)[1:], model_identity(vlm, cost, image_format, jpeg_quality), fps, LOOK_VERSION]
    return hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _describe(path: str, times: list[float], vlm: VLM, cost: CostModel, cache: ResponseCache | None,
              image_format: str, jpeg_quality: int = 90) -> tuple[dict[float, str], list[float], str, int]:
    """One describe request: what the reply says of each frame it names, the frames' times, its text, its tokens."""
    frames = frames_at(path, times, clamp=True)
    content: list[dict[str, object]] = []
    tokens = 0
    for f in frames:
        content += [{"type": "text", "text": frame_caption(f.requested)},
                    {"type": "image_url", "image_url": {"url": encode_data_url(f.image, image_format, jpeg_quality)}}]
        tokens += cost.image_tokens(*f.image.size)
    instruction = prompts.render("describe")
    content.append({"type": "text", "text": instruction})
    tokens += text_tokens(instruction)
    messages: list[Message] = [{"role": "user", "content": content}]
    reply = complete(vlm, messages, None, cache)
    said = {round(float(t), 2): text for t, text in _LINE.findall(reply.text)}
    return said, [f.requested for f in frames], reply.text, tokens


def look(path: str, video_id: str, vlm: VLM, cost: CostModel, cache: ResponseCache | None, fps: float,
         image_format: str = "png", on_frames: Callable[[int], None] | None = None, jpeg_quality: int = 90
         ) -> Timeline:
    """Describe every frame at ``fps`` (full resolution), ``BATCH`` frames a request.

    ``on_frames`` is told how many frames each batch dealt with (a progress bar: a long video's look takes hours).
    A frame a reply leaves out (cut off by ``--max-tokens``, skipped, not in the asked form) is asked about alone.
    One still not described ends the look (it is never taken for a frame showing nothing): it and every frame after
    it are ``undescribed``, and no more is paid for a video no question can then be asked about.
    """
    info = probe(path)
    n = max(1, int(info.duration * fps))
    times = [k / fps for k in range(n)]
    entries: list[tuple[float, str]] = []
    undescribed: list[float] = []
    unread = ""
    requests = tokens = 0
    for i in range(0, n, BATCH):
        said, shown, text, spent = _describe(path, times[i : i + BATCH], vlm, cost, cache, image_format,
                                            jpeg_quality)
        requests, tokens = requests + 1, tokens + spent
        for j, t in enumerate(shown, start=i):
            if round(t, 2) not in said and len(shown) > 1:
                alone, _, text, spent = _describe(path, [t], vlm, cost, cache, image_format, jpeg_quality)
                requests, tokens = requests + 1, tokens + spent
                if round(t, 2) in alone:  # only what it says of the one frame it was shown
                    said[round(t, 2)] = alone[round(t, 2)]
            if round(t, 2) not in said:
                undescribed, unread = times[j:], text[:200]
                break
            entries.append((t, said[round(t, 2)]))
        if on_frames is not None:  # a look that stops here is done with every frame left
            on_frames(n - i if undescribed else len(shown))
        if undescribed:
            break
    return Timeline(video_id=video_id, fps=fps, duration=info.duration, entries=entries, requests=requests,
                    prompt_tokens=tokens, frames=n, stamp=look_stamp(path, vlm, cost, fps, image_format, jpeg_quality),
                    undescribed=undescribed, unread=unread)


def unread_note(timeline: Timeline) -> str | None:
    """Why a look made no perceived question: frames the model's replies did not describe, in words (None: none)."""
    if not timeline.undescribed:
        return None
    first = timeline.undescribed[0]
    return (f"no perceived questions: the model did not describe the frame at {first:.2f} s as asked (one line "
            f"starting with its time, '{first:.2f} s: ...'), even shown it alone; it said "
            f"{' '.join(timeline.unread.split())[:120]!r}. What is on screen there is unknown, so no question about "
            f"the whole video can be answered; the look stopped there ({len(timeline.undescribed)} of "
            f"{timeline.frames} frames not described). Rerun with a larger --max-tokens, or a model that follows the "
            "describe prompt")


def stored_timeline(parts: Path, video_id: str) -> Timeline | None:
    """The timeline kept in ``parts/<video>.timeline.json``; None when there is none this tool wrote whole."""
    try:  # one this tool did not write whole (an older version on a full disk, an edit) is looked at again
        return Timeline.model_validate_json((parts / f"{video_id}.timeline.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValidationError is a ValueError
        return None


def cached_look(parts: Path, path: str, video_id: str, vlm: VLM, cost: CostModel, cache: ResponseCache | None,
                fps: float, on_frames: Callable[[int], None] | None = None, image_format: str = "png",
                jpeg_quality: int = 90) -> Timeline:
    """:func:`look`, kept in ``parts/<video>.timeline.json`` (one pass per video file, model and rate)."""
    stored = stored_timeline(parts, video_id)
    if stored is not None and stored.stamp == look_stamp(path, vlm, cost, fps, image_format, jpeg_quality):
        if on_frames is not None:
            on_frames(stored.frames)
        return stored
    timeline = look(path, video_id, vlm, cost, cache, fps, image_format, on_frames, jpeg_quality)
    write_text_atomic(parts / f"{video_id}.timeline.json", timeline.model_dump_json(), "a video's perceived timeline")
    return timeline


@dataclass
class Seen:
    """Appearances and backgrounds as the model reported them."""

    events: list[Event]
    scenes: list[Scene]


def appearances(timeline: Timeline) -> Seen:
    """Consecutive frames naming the same glyph are one appearance, ``[first, last + 1/fps)``."""
    step = 1 / timeline.fps
    events: list[Event] = []
    scenes: list[Scene] = []
    run: list[float | str] | None = None
    for t, text in timeline.entries:
        g = _GLYPH.search(text)
        kind = (g.group(1).lower(), g.group(2).lower()) if g else None
        if events and kind is not None and events[-1].kind == kind and abs(events[-1].end - t) < 1e-6:
            last = events[-1]
            events[-1] = Event(last.start, t + step, last.colour, last.shape, 0, (0, 0), (0, 0))
        elif kind is not None:
            events.append(Event(t, t + step, kind[0], kind[1], 0, (0, 0), (0, 0)))
        b = _BG.search(text)
        bg = b.group(1).lower() if b else None
        if bg and (run is None or run[2] != bg):
            if run is not None:
                scenes.append(Scene(float(run[0]), t, str(run[2])))
            run = [t, t, bg]
    if run is not None:
        scenes.append(Scene(float(run[0]), timeline.duration, str(run[2])))
    return Seen(events, scenes)


def perceived_drafts(timeline: Timeline, rng: random.Random, n: int) -> list[q.Draft]:
    """Grounding, count, identity, order and successor questions over what the model saw (the world's templates)."""
    seen = appearances(timeline)
    if not seen.events or timeline.undescribed:  # an unknown frame may hide an appearance, or join two
        return []
    script = VideoScript(timeline.video_id, timeline.duration, max(1, round(timeline.fps)), 0, 0,
                         tuple(seen.scenes), tuple(seen.events))
    drafts = q.grounding(script, rng, max(1, n // 2))
    mcqs = [d for t in q.MCQ_TEMPLATES for d in t(script, rng) if len(set(d.options)) == 4]
    rng.shuffle(mcqs)
    return drafts + mcqs[: max(0, n - len(drafts))]
