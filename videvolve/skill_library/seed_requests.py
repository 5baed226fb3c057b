"""The largest request each program seed makes on a video of a given size, from the seed's own config.

``uniform`` sends all its frames in one request; ``scan_refine``'s last request carries every contact sheet and
every refinement frame. ``coevowhen_base`` is driven by the model's own tool calls, so it has no fixed largest
request (the client checks each request against the context before sending).
"""

from __future__ import annotations

import math
import tomllib

from videvolve.errors import UsageError
from videvolve.media.decode import scaled_size
from videvolve.media.sheet import sheet_size
from videvolve.models.cost import CostModel
from videvolve.skill_library.harness import seed_path

PROGRAM_SEEDS = ("uniform", "scan_refine")
PROMPT_TEXT = 1500
"""Prompt text, captions and the reply's room, generously, in tokens."""


def largest_request(seed: str, cost: CostModel, source: tuple[int, int]) -> int:
    """Prompt tokens of the seed's largest request on a ``source`` (width, height) video, text included."""
    cfg = tomllib.loads((seed_path(seed) / "config.toml").read_text())
    if seed == "uniform":
        w, h = scaled_size(*source, int(cfg["max_side"]))
        return int(cfg["n_frames"]) * cost.image_tokens(w, h) + PROMPT_TEXT
    if seed != "scan_refine":
        raise UsageError(f"{seed} has no fixed largest request (its model chooses what to look at)")
    n_scan = max(4, int(int(cfg["frames"]) * float(cfg["scan_share"])))
    cols = int(cfg["sheet_cols"])
    per_sheet = cols * cols
    *_, sw, sh = sheet_size(per_sheet, cols, int(cfg["cell_width"]), source)
    fw, fh = scaled_size(*source, int(cfg["refine_max_side"]) or None)
    refine = int(cfg["frames"]) - n_scan
    return math.ceil(n_scan / per_sheet) * cost.image_tokens(sw, sh) + refine * cost.image_tokens(fw, fh) + \
        PROMPT_TEXT
