"""The seeds' largest request fits the README's recipe (a 32k context) on 720p and 1080p sources.

Computed from each seed's own config with the cost model: ``uniform`` sends all its frames at once;
``scan_refine``'s last request carries every sheet and every refinement frame. (``coevowhen_base`` is driven by the
model's own tool calls; its context is checked per request by the client before sending.)
"""

from __future__ import annotations

import math
import tomllib

import pytest

from videvolve.media.decode import scaled_size
from videvolve.media.sheet import sheet_size
from videvolve.models.cost import cost_model
from videvolve.skill_library.harness import seed_path

CONTEXT = 32768
MARGIN = 0.05  # the client's default safety margin
TEXT = 1500    # prompt text, captions and the reply's room, generously


def config(name: str) -> dict:
    return tomllib.loads((seed_path(name) / "config.toml").read_text())


def largest_request(name: str, family: str, source: tuple[int, int]) -> int:
    cost = cost_model(family)
    cfg = config(name)
    if name == "uniform":
        w, h = scaled_size(*source, int(cfg["max_side"]))
        return int(cfg["n_frames"]) * cost.image_tokens(w, h)
    n_scan = max(4, int(int(cfg["frames"]) * float(cfg["scan_share"])))
    cols = int(cfg["sheet_cols"])
    per_sheet = cols * cols
    sheets = math.ceil(n_scan / per_sheet)
    *_, sw, sh = sheet_size(per_sheet, cols, int(cfg["cell_width"]), source)
    fw, fh = scaled_size(*source, int(cfg["refine_max_side"]) or None)
    return sheets * cost.image_tokens(sw, sh) + (int(cfg["frames"]) - n_scan) * cost.image_tokens(fw, fh)


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
@pytest.mark.parametrize("source", [(1280, 720), (1920, 1080)])
@pytest.mark.parametrize("name", ["uniform", "scan_refine"])
def test_the_largest_request_fits_a_32k_context(name: str, family: str, source: tuple[int, int]) -> None:
    tokens = largest_request(name, family, source) + TEXT
    assert tokens <= CONTEXT * (1 - MARGIN), f"{name} on {source} with {family}: {tokens} prompt tokens"


def test_full_resolution_refinement_would_not_fit() -> None:
    """The check can fail: today's numbers with refinement at full resolution (the issue's 57k at 720p)."""
    cost = cost_model("qwen2.5-vl")
    cfg = config("scan_refine")
    n_scan = max(4, int(int(cfg["frames"]) * float(cfg["scan_share"])))
    assert (int(cfg["frames"]) - n_scan) * cost.image_tokens(1280, 720) > CONTEXT
