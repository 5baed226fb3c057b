"""Audio: whether a file has sound, and adding a sound track to a silent video (test videos, narrated worlds)."""

from __future__ import annotations

from pathlib import Path

import av


def has_audio(path: str | Path) -> bool:
    """Whether the file holds an audio stream."""
    with av.open(str(path)) as container:
        return bool(container.streams.audio)


def add_audio(video: str | Path, audio: str | Path, out: str | Path, offset: float = 0.0) -> Path:
    """A copy of ``video`` (its stream unchanged) with ``audio`` as its sound track.

    The audio (any file PyAV reads: WAV...) is encoded as AAC from ``offset`` seconds on, silence before it.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(video)) as src, av.open(str(audio)) as sound, av.open(str(out), "w") as dst:
        v_in = src.streams.video[0]
        v_out = dst.add_stream_from_template(v_in)
        a_in = sound.streams.audio[0]
        rate = a_in.rate or 16000
        a_out = dst.add_stream("aac", rate=rate, layout="mono")
        resampler = av.AudioResampler(format="fltp", layout="mono", rate=rate)
        for packet in src.demux(v_in):
            if packet.dts is not None:
                packet.stream = v_out
                dst.mux(packet)
        start = round(offset * rate)
        for frame in sound.decode(a_in):
            for chunk in resampler.resample(frame):
                chunk.pts, start = start, start + chunk.samples
                dst.mux(a_out.encode(chunk))
        for chunk in resampler.resample(None):
            chunk.pts = start
            dst.mux(a_out.encode(chunk))
        dst.mux(a_out.encode(None))
    return out
