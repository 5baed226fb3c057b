"""Contact sheets: many frames in one image, each cell labelled with its timestamp."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from videvolve.errors import VidevolveError
from videvolve.media.decode import Frame

LABEL_HEIGHT = 12
"""Height of the label band under each cell, in pixels (the cell's pixels are never painted over)."""
GAP = 2
"""Pixels between cells."""
BORDER_COLOUR = (24, 24, 24)
MAX_SHEET_PIXELS = 4096 * 4096
"""Largest contact sheet (width x height) ever composited: 48 MB of RGB. Larger ones are refused before any
frame is decoded (the parent checks a request's arguments against it) and again before the canvas is allocated."""


class SheetTooLarge(VidevolveError, ValueError):
    """A contact sheet would exceed :data:`MAX_SHEET_PIXELS`."""


def sheet_size(n: int, cols: int, cell_width: int, frame_size: tuple[int, int], labels: bool = True
               ) -> tuple[int, int, int, int]:
    """``(cols, rows, width, height)`` of a sheet of ``n`` cells of frames of ``frame_size`` (no pixels touched)."""
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    w0, h0 = frame_size
    cell_height = max(2, round(cell_width * h0 / w0))
    label_height = LABEL_HEIGHT if labels else 0
    return cols, rows, GAP + cols * (cell_width + GAP), GAP + rows * (cell_height + label_height + GAP)


def format_timestamp(t: float) -> str:
    """``M:SS`` under an hour, ``H:MM:SS`` above (whole seconds, for labels)."""
    s = math.floor(t + 1e-9)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


@dataclass(frozen=True)
class SheetLayout:
    """Where each cell of a contact sheet is: cell ``i`` (reading order) shows the frame at ``times[i]``."""

    cols: int
    rows: int
    cell_width: int
    cell_height: int
    label_height: int
    gap: int
    times: tuple[float, ...]

    def cell_box(self, i: int) -> tuple[int, int, int, int]:
        """``(left, top, right, bottom)`` of cell ``i``'s picture (without its label band)."""
        r, c = divmod(i, self.cols)
        left = self.gap + c * (self.cell_width + self.gap)
        top = self.gap + r * (self.cell_height + self.label_height + self.gap)
        return left, top, left + self.cell_width, top + self.cell_height


@dataclass(frozen=True)
class Sheet(SheetLayout):
    """A grid image plus its layout."""

    image: Image.Image

    def cell(self, i: int) -> Image.Image:
        """The picture of cell ``i``."""
        return self.image.crop(self.cell_box(i))


def contact_sheet(
    frames: Sequence[Frame], cols: int, cell_width: int, labels: bool = True
) -> Sheet:
    """Tile frames left to right, top to bottom; cell height keeps the first frame's aspect ratio."""
    if not frames:
        raise ValueError("a contact sheet needs at least one frame")
    if cols < 1 or cell_width < 8:
        raise ValueError(f"cols must be >= 1 and cell_width >= 8 (got {cols}, {cell_width})")
    cols, rows, width, height = sheet_size(len(frames), cols, cell_width, frames[0].image.size, labels)
    if width * height > MAX_SHEET_PIXELS:
        raise SheetTooLarge(f"a {width}x{height} contact sheet exceeds the cap of {MAX_SHEET_PIXELS} pixels; use "
                            "fewer cells or smaller ones")
    w0, h0 = frames[0].image.size
    cell_height = max(2, round(cell_width * h0 / w0))
    label_height = LABEL_HEIGHT if labels else 0
    image = Image.new("RGB", (width, height), BORDER_COLOUR)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    sheet = Sheet(cols, rows, cell_width, cell_height, label_height, GAP, tuple(f.requested for f in frames), image)
    for i, frame in enumerate(frames):
        left, top, right, bottom = sheet.cell_box(i)
        image.paste(frame.image.convert("RGB").resize((cell_width, cell_height), Image.Resampling.BILINEAR),
                    (left, top))
        if labels:
            draw.rectangle((left, bottom, right - 1, bottom + label_height - 1), fill=(0, 0, 0))
            draw.text((left + 2, bottom), format_timestamp(frame.requested), fill=(255, 255, 255), font=font)
    return sheet
