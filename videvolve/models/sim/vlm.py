"""SimVLM: answers from the pixels in the request and its text, nothing else.

Its only input is the serialized message list: text parts and ``data:`` image URLs (it refuses file and http
URLs). It sees a picture at most at the size its processor (``family``, a server's ``max_pixels``) feeds the
encoder, the size its tokens are metered at. Each image is read with the caption before it (a frame's time, or a
contact sheet's grid and cell times); sheets are cut into cells and every cell perceived. Three request types: a
final answer (an option letter, or intervals built from which observed times show the target, with boundaries
halfway to the nearest observation that clearly does not), a match ('which of these images show X?') and a
describe. Transcript lines in the request are words heard over a time span, read by the same rule as a picture's
caption: a name introduced while a glyph is seen belongs to that glyph (:func:`identify`). Among readings that
disagree the most frequent wins, a tie the one seen first (:func:`most_seen`: never a set's hash order). When
nothing it saw answers an mcq question it guesses from a hash of the request's text: the same request, the same
letter, and no option favoured (chance over many questions, checked by ``tests/test_blind_baseline.py``). Pictures
that are not SynthWorld frames and questions outside SynthWorld's grammar get :data:`SIM_ONLY_NOTICE`. It never
opens a file and never chooses tools.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from PIL import Image

from videvolve.errors import ModelRequestError
from videvolve.media.captions import SheetLayout, parse_caption
from videvolve.models.base import SIM_ONLY_NOTICE, Message, Reply, Tool, Usage
from videvolve.models.cost import CostModel, cost_model, text_tokens
from videvolve.models.sim.grammar import (
    GROUNDING_TEMPLATES,
    Heard,
    Question,
    parse_duration,
    parse_heard,
    parse_question,
    parse_target,
    request_type,
)
from videvolve.models.sim.perception import Percept, perceive


@dataclass(frozen=True)
class Seen:
    """One perceived picture at one time."""

    time: float
    percept: Percept


def decode_data_url(url: str) -> Image.Image:
    """The image of a ``data:`` URL; anything else is refused."""
    if not url.startswith("data:image/"):
        raise ModelRequestError(f"SimVLM accepts only data:image URLs, got {url[:40]!r}")
    try:
        _, payload = url.split(",", 1)
        return Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB")
    except (ValueError, OSError) as exc:
        raise ModelRequestError(f"undecodable image in request: {exc}") from exc


def _parts(message: Message) -> list[dict[str, Any]]:
    content = message.get("content") or ""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


TEMPLATE_TOKENS_PER_MESSAGE = 4


class SimVLM:
    """The offline VLM of SynthWorld (see the module docstring)."""

    name = "simvlm"
    revision = "3"
    """Part of every key its replies and results are stored under: bumped whenever it answers otherwise (2: it reads
    the frame captioned 0.00 s; 3: it perceives a picture at most at the size its processor feeds the encoder), so
    nothing made by the old replies is taken for the new ones (``tests/test_sim_revision.py`` pins each revision's
    replies)."""

    def __init__(self, family: str = "qwen2.5-vl", max_pixels: int | None = None) -> None:
        self.family = family
        self.cost: CostModel = cost_model(family, max_pixels)

    def decoding(self) -> dict[str, Any]:
        """SimVLM is deterministic; its processor (family, and a server's max_pixels) changes what it perceives."""
        return {"processor": self.cost.name}

    def observe(self, messages: list[Message]) -> tuple[list[Seen], str, int]:
        """Every observation in the conversation (time order), all its text, and its prompt tokens."""
        seen: list[Seen] = []
        texts: list[str] = []
        tokens = 0
        for message in messages:
            caption: float | SheetLayout | None = None
            for part in _parts(message):
                if part.get("type") == "text":
                    text = str(part.get("text", ""))
                    texts.append(text)
                    tokens += text_tokens(text)
                    caption = c if (c := parse_caption(text)) is not None else caption  # 0.0 s is a time
                elif part.get("type") == "image_url":
                    image = decode_data_url(str(part.get("image_url", {}).get("url", "")))
                    tokens += self.cost.image_tokens(*image.size)
                    seen += self._read(image, caption, self.cost.resized(*image.size))
                    caption = None
        return sorted(seen, key=lambda s: s.time), "\n".join(texts), tokens

    @staticmethod
    def _read(image: Image.Image, caption: float | SheetLayout | None, processed: tuple[int, int]) -> list[Seen]:
        """The sightings in one picture, as the encoder gets it: ``processed`` is the processor's (width, height).

        Where the processor shrinks a side (a picture over max_pixels, a side rounded down to the patch grid) the
        picture is perceived shrunk so: a sheet of full-size cells metered at max_pixels is read at the size the
        model is shown, not the size sent. A side it enlarges stays as sent: upsampling adds no detail.
        """
        if caption is None:
            return []  # an image without a caption has no time: nothing to place on the timeline
        width, height = min(image.width, processed[0]), min(image.height, processed[1])
        sx, sy = width / image.width, height / image.height
        if (width, height) != image.size:
            image = image.resize((width, height), Image.Resampling.BICUBIC)
        if isinstance(caption, SheetLayout):
            return [Seen(t, perceive(image.crop(_scaled(caption.cell_box(i), sx, sy))))
                    for i, t in enumerate(caption.times)]
        return [Seen(caption, perceive(image))]

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        """Answer the last request in ``messages``."""
        seen, text, prompt_tokens = self.observe(messages)
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": text})
        request = " ".join(str(p.get("text", "")) for p in _parts(last_user) if p.get("type") == "text")
        kind = request_type(request)
        if kind == "describe":
            out = "\n".join(f"{s.time:.2f} s: {s.percept.describe()}" for s in seen) or "I see no images."
        elif kind == "match":
            out = self._match(seen, request)
        else:
            out = self._answer(seen, text)
        overhead = TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + 3  # role markers, as a chat template adds
        return Reply(text=out, usage=Usage(prompt_tokens=prompt_tokens + overhead,
                                           completion_tokens=text_tokens(out)))

    @staticmethod
    def _match(seen: list[Seen], request: str) -> str:
        target = parse_target(request.split("show", 1)[-1] if "show" in request else request)
        yes, maybe = [], []
        for s in seen:
            p = s.percept
            if p.glyph == "unclear" and p.background is not None:
                maybe.append(s.time)
            elif p.glyph == "clear" and target is not None:
                colour, shape = target
                if (colour is None or p.colour == colour) and (shape is None or p.shape == shape):
                    yes.append(s.time)
        return json.dumps({"yes": yes, "maybe": maybe})

    def _answer(self, seen: list[Seen], text: str) -> str:
        if seen and all(s.percept.background is None for s in seen):
            return f"{SIM_ONLY_NOTICE} (these pictures are not SynthWorld frames)"
        q = parse_question(text)
        if q is None:
            return f"{SIM_ONLY_NOTICE} (the question is outside SynthWorld's grammar)"
        heard = parse_heard(text)
        if q.template in GROUNDING_TEMPLATES:
            spans = ground_spoken(seen, heard, q, parse_duration(text))
            return json.dumps([[round(a, 2), round(b, 2)] for a, b in spans])
        choice = choose(seen, q, heard)
        if choice is None:
            letters = sorted(q.options) or ["A", "B", "C", "D"]
            key = hashlib.sha256((text[-2000:]).encode()).digest()[0]
            return letters[key % len(letters)]
        return choice


def _scaled(box: tuple[int, int, int, int], sx: float, sy: float) -> tuple[int, int, int, int]:
    """A sheet cell's box in a picture resized by ``sx`` x ``sy``."""
    left, top, right, bottom = box
    return round(left * sx), round(top * sy), max(round(right * sx), round(left * sx) + 1), \
        max(round(bottom * sy), round(top * sy) + 1)


def _runs(seen: list[Seen], name: str) -> list[tuple[int, int]]:
    """Index ranges of consecutive clear sightings of ``name`` (unclear pictures neither break nor extend)."""
    runs: list[tuple[int, int]] = []
    start = last = None
    for i, s in enumerate(seen):
        if s.percept.glyph == "unclear":
            continue
        if s.percept.name == name:
            start = i if start is None else start
            last = i
        elif start is not None and last is not None:
            runs.append((start, last))
            start = last = None
    if start is not None and last is not None:
        runs.append((start, last))
    return runs


def _negative_before(seen: list[Seen], i: int) -> float | None:
    for j in range(i - 1, -1, -1):
        if seen[j].percept.glyph != "unclear":
            return seen[j].time
    return None


def _negative_after(seen: list[Seen], i: int) -> float | None:
    for j in range(i + 1, len(seen)):
        if seen[j].percept.glyph != "unclear":
            return seen[j].time
    return None


def ground(seen: list[Seen], slots: tuple[str, ...], duration: float | None) -> list[tuple[float, float]]:
    """Intervals where the target was seen, boundaries halfway to the nearest clear negative sighting."""
    name = " ".join(slots)
    out = []
    for a, b in _runs(seen, name):
        before, after = _negative_before(seen, a), _negative_after(seen, b)
        start = (before + seen[a].time) / 2 if before is not None else seen[a].time
        end = (seen[b].time + after) / 2 if after is not None else (duration or seen[b].time)
        out.append((max(0.0, start), end))
    return out


def identify(seen: list[Seen], heard: Heard) -> str | None:
    """The glyph a name belongs to: the one seen clearly while the name is said (the most seen, if several)."""
    return most_seen([s.percept.name for s in seen if heard.start <= s.time <= heard.end and s.percept.name])


def most_seen(values: list[str]) -> str | None:
    """The value seen most often; a tie goes to the one seen first (``values`` in time order), never to chance.

    Not ``max(set(values), key=values.count)``: a set of strings iterates in an order that changes with each
    process's hash seed, so a tie would answer differently from one run to the next on the same pixels.
    """
    return Counter(values).most_common(1)[0][0] if values else None


def ground_spoken(seen: list[Seen], heard: list[Heard], q: Question,
                  duration: float | None) -> list[tuple[float, float]]:
    """Intervals for a grounding question: where a glyph is seen, a name said, or the glyph a name belongs to seen."""
    if q.template == "grounding":
        return ground(seen, q.slots, duration)
    said = [h for h in heard if h.name == q.slots[0]]
    if q.template == "mentioned":
        return [(h.start, h.end) for h in said]
    kinds = [k for k in (identify(seen, h) for h in said) if k]
    return ground(seen, tuple(kinds[0].split()), duration) if kinds else []


def _spoken_value(seen: list[Seen], q: Question, heard: list[Heard]) -> str | None:
    """The answer of a question about names, from what was heard (and seen while it was said)."""
    if q.template == "name_of":
        glyph = " ".join(q.slots)
        return next((h.name for h in heard if identify(seen, h) == glyph), None)
    names = [h.name for h in heard]
    if q.slots[0] not in names:
        return None
    k = names.index(q.slots[0]) + (1 if q.template == "said_after" else -1)
    return names[k] if 0 <= k < len(names) else None


def choose(seen: list[Seen], q: Question, heard: list[Heard] | None = None) -> str | None:
    """The option letter the sightings (and the words heard) support, or None when they do not settle it."""
    clear = [s for s in seen if s.percept.glyph == "clear"]
    value: str | None = None
    if q.template in ("name_of", "said_after", "said_before"):
        value = _spoken_value(seen, q, heard or [])
    elif q.template == "identity_colour":
        shape, bg = q.slots
        value = most_seen([str(s.percept.colour) for s in clear
                           if s.percept.shape == shape and s.percept.background == bg])
    elif q.template == "identity_shape":
        colour, bg = q.slots
        value = most_seen([str(s.percept.shape) for s in clear
                           if s.percept.colour == colour and s.percept.background == bg])
    elif q.template == "order":
        firsts = {text: next((s.time for s in clear if s.percept.name == text), None) for text in q.options.values()}
        known = {k: v for k, v in firsts.items() if v is not None}
        value = min(known, key=lambda k: known[k]) if known else None
    elif q.template == "count":
        if seen:
            value = str(len(_runs(seen, " ".join(q.slots))))
    elif q.template == "successor":
        name = " ".join(q.slots)
        runs = _runs(seen, name)
        if runs:
            after = [s for s in seen[runs[0][1] + 1 :] if s.percept.glyph == "clear" and s.percept.name != name]
            value = after[0].percept.name if after else None
    if value is None:
        return None
    for letter, text in q.options.items():
        if text == value:
            return letter
    return None
