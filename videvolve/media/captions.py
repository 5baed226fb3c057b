"""The one caption format for observations sent to a VLM (real models read it as text; SimVLM parses it).

- a frame: ``[frame at 12.50 s]``
- a contact sheet: ``[contact sheet: 6 columns x 4 rows; cells 160x90 px, each with a 12 px time label below,
  2 px gaps; cell times in reading order (s): 0.00, 12.50, ...]``
- a clip sent as a video: ``[clip 10.00-20.00 s as video: 8 frames at (s): 10.00, 11.25, ...; timestamps inside the
  video count from 0 at 10.00 s]``
- a line of a transcript (words said, not seen): ``[12.0-14.0 s] Meet Bruno.``, one per line
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from videvolve.media.sheet import SheetLayout


def _times(times: Sequence[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


def frame_caption(t: float) -> str:
    """Caption of one frame."""
    return f"[frame at {t:.2f} s]"


def sheet_caption(layout: SheetLayout) -> str:
    """Caption of a contact sheet: its grid, cell geometry and every cell's time in reading order."""
    return (f"[contact sheet: {layout.cols} columns x {layout.rows} rows; cells {layout.cell_width}x"
            f"{layout.cell_height} px, each with a {layout.label_height} px time label below, {layout.gap} px gaps; "
            f"cell times in reading order (s): {_times(layout.times)}]")


def video_caption(start: float, end: float, times: Sequence[float]) -> str:
    """Caption of a clip sent as one video.

    The server numbers a video's frames from its own start: Qwen3-VL's processor writes ``<0.2 seconds>`` before a
    clip's first frames whatever time of the source they show (vLLM's timestamps are frame index / the clip's
    frame rate, vllm/model_executor/models/qwen3_vl.py:1073-1086), so the caption says where that 0 lies.
    """
    return (f"[clip {start:.2f}-{end:.2f} s as video: {len(times)} frames at (s): {_times(times)}; timestamps inside "
            f"the video count from 0 at {start:.2f} s]")


_FRAME = re.compile(r"\[frame at (\d++(?:\.\d++)?+) s\]")
_SHEET = re.compile(
    r"\[contact sheet: (\d+) columns x (\d+) rows; cells (\d+)x(\d+) px, each with a (\d+) px time label below, "
    r"(\d+) px gaps; cell times in reading order \(s\): ([\d., ]*+)\]"
)


def parse_caption(text: str) -> float | SheetLayout | None:
    """The last caption in ``text``: a frame's time, a sheet's layout, or None."""
    found: list[tuple[int, float | SheetLayout]] = []
    for m in _FRAME.finditer(text):
        found.append((m.start(), float(m.group(1))))
    for m in _SHEET.finditer(text):
        times = tuple(float(x) for x in m.group(7).split(",") if x.strip())
        cols, rows, cw, ch, lh, gap = (int(m.group(i)) for i in range(1, 7))
        found.append((m.start(), SheetLayout(cols, rows, cw, ch, lh, gap, times)))
    return max(found, key=lambda x: x[0])[1] if found else None


_SAID = re.compile(r"^\[(\d++(?:\.\d++)?+)-(\d++(?:\.\d++)?+) s\] [^\S\n]*+(\S(?:.*\S)?)", re.M)
"""One transcript line; linear: no lazy tail before ``\\s*$`` (harness prompts are parsed with it)."""


def said_caption(start: float, end: float, text: str) -> str:
    """One transcript line: what is said from ``start`` to ``end``."""
    return f"[{start:.1f}-{end:.1f} s] {text}"


def parse_said(text: str) -> list[tuple[float, float, str]]:
    """Every transcript line in ``text``: ``(start, end, words)``."""
    return [(float(a), float(b), said) for a, b, said in _SAID.findall(text)]
