"""SynthWorld's narrator: timed lines that state some facts, omit others, and sometimes contradict the pictures.

The narrator says two kinds of line, each a WebVTT cue written beside the video (and, with ``speak``, spoken into
its sound track by espeak-ng):

- an introduction, ``Meet Bruno.``, said while a glyph kind that appears only once is on screen (from its first
  frame, for at most two seconds). The name is never drawn: it exists only in the words. The line never says what
  the glyph looks like, so which glyph bears a name is known only by looking while the name is said.
- a room announcement, ``Now the teal room.``, at the start of some scenes, naming the background. A fixed share of
  announcements name the wrong room (a commentator who is wrong); the rest state what the pictures show.

Glyph colours, shapes, kinds and counts are never said, so questions about them need the pictures. The rates are
fixed here, before any question is drawn or any harness evolved.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import wave
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from videvolve.datasets.synthworld.palette import BACKGROUNDS, NAMES
from videvolve.datasets.synthworld.script import Event, VideoScript
from videvolve.datasets.transcripts import Segment, to_vtt
from videvolve.errors import UsageError

NAME_SHARE = 0.6
"""Share of the glyph kinds that appear once which the narrator introduces by name."""
ROOM_SHARE = 0.5
"""Share of scenes whose start the narrator announces."""
WRONG_SHARE = 0.25
"""Share of room announcements that name the wrong room."""
INTRO_SECONDS = 2.0
ROOM_SECONDS = 2.0


@dataclass(frozen=True)
class Line:
    """One narrated line: when it is said, its words, and what it refers to (the generator's truth)."""

    start: float
    end: float
    text: str
    kind: Literal["intro", "room"]
    name: str = ""
    event: Event | None = None
    room: str = ""
    wrong: bool = False


@dataclass(frozen=True)
class Narration:
    """All the lines of one video, in time order."""

    video_id: str
    lines: tuple[Line, ...]

    @property
    def intros(self) -> list[Line]:
        """The introductions, in time order."""
        return [ln for ln in self.lines if ln.kind == "intro"]

    def segments(self) -> list[Segment]:
        """The lines as transcript segments."""
        return [Segment(start=ln.start, end=ln.end, text=ln.text) for ln in self.lines]

    def vtt(self) -> str:
        """The lines as a WebVTT file."""
        return to_vtt(self.segments())


def narrate(script: VideoScript, world_seed: int) -> Narration:
    """The narration of one video.

    Deterministic in the world's seed and the video id; the world's own random stream is not touched, so a world
    without narration is the same world.
    """
    rng = random.Random(f"narration:{world_seed}:{script.video_id}")
    counts = Counter(e.kind for e in script.events)
    once = [e for e in script.events if counts[e.kind] == 1]
    named = sorted(rng.sample(once, min(len(NAMES), round(len(once) * NAME_SHARE))), key=lambda e: e.start)
    names = rng.sample(NAMES, len(named))
    lines = [Line(e.start, e.start + min(INTRO_SECONDS, e.end - e.start), f"Meet {n}.", "intro", name=n, event=e)
             for e, n in zip(named, names, strict=True)]
    for scene in script.scenes:
        if rng.random() >= ROOM_SHARE:
            continue
        wrong = rng.random() < WRONG_SHARE
        room = rng.choice([b for b in BACKGROUNDS if b != scene.background]) if wrong else scene.background
        end = min(scene.start + ROOM_SECONDS, script.duration)
        lines.append(Line(scene.start, end, f"Now the {room} room.", "room", room=room, wrong=wrong))
    return Narration(script.video_id, tuple(sorted(lines, key=lambda ln: (ln.start, ln.kind))))


# ---- speech: espeak-ng into the video's sound track ----


def espeak_available() -> bool:
    """Whether espeak-ng is installed."""
    return shutil.which("espeak-ng") is not None


def _speak_line(text: str, path: Path) -> tuple[np.ndarray, int]:
    subprocess.run(["espeak-ng", "-s", "160", "-w", str(path), text], check=True, capture_output=True, timeout=60)
    with wave.open(str(path)) as w:
        rate, raw = w.getframerate(), w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype=np.int16).astype(np.float32), rate


def speak(narration: Narration, duration: float, video: Path) -> Path:
    """Speak every line at its time with espeak-ng and put the sound into ``video`` (AAC); the same path."""
    from videvolve.media.audio import add_audio

    if not espeak_available():
        raise UsageError("speaking the narration needs espeak-ng: apt install espeak-ng (or leave out --speak; "
                         "the narration is still written as .vtt captions)")
    with tempfile.TemporaryDirectory() as tmp:
        spoken = [(line.start, *_speak_line(line.text, Path(tmp) / f"{k}.wav"))
                  for k, line in enumerate(narration.lines)]
        rate = spoken[0][2] if spoken else 22050
        track = np.zeros(round(duration * rate) + 1, dtype=np.float32)
        for start, samples, _ in spoken:
            at = round(start * rate)
            piece = samples[: max(0, len(track) - at)]
            track[at : at + len(piece)] += piece
        wav = Path(tmp) / "narration.wav"
        with wave.open(str(wav), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(np.clip(track, -32768, 32767).astype(np.int16).tobytes())
        out = video.with_name(video.stem + ".voiced.mp4")
        add_audio(video, wav, out)
        out.replace(video)
    return video
