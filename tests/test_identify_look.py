"""The detect-then-identify look: a cheap scan of small cells, full detail only where something is on screen."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.editing.base import read_files
from videvolve.editing.identify_look import DETECT_CELL_WIDTH, MARKER
from videvolve.editing.operators import OPERATORS, config_of, set_key
from videvolve.evaluation.solve import solve_tasks
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path, validate_harness


def _made(seed: str, name: str, out: Path, config: str | None = None) -> Path:
    shutil.copytree(seed_path(seed), out)
    if config is not None:
        (out / "config.toml").write_text(config)
    files = read_files(out)
    edits = OPERATORS[name].apply(files, config_of(files))
    assert edits, f"{name} does not apply to {seed}"
    for rel, text in edits.items():
        (out / rel).write_text(text)
    assert validate_harness(out) is None
    return out


def test_each_scan_gets_its_own_move_once_with_its_scan_length_and_transcript(tmp_path: Path) -> None:
    uniform, sheets = read_files(seed_path("uniform")), read_files(seed_path("scan_refine"))
    assert OPERATORS["detect_identify"].apply(uniform, config_of(uniform)) is None  # not a contact-sheet scan
    assert OPERATORS["identify_flagged"].apply(sheets, config_of(sheets)) is None
    assert OPERATORS["detect_identify"].cost_cut and not OPERATORS["identify_flagged"].cost_cut
    cut = _made("scan_refine", "detect_identify", tmp_path / "cut")
    cfg = config_of(read_files(cut))
    parent = config_of(sheets)
    assert cfg["frames"] == int(parent["frames"] * parent["scan_share"])  # the scan's moments, not its budget
    assert cfg["cell_width"] == DETECT_CELL_WIDTH and cfg["refine_max_side"] == parent["refine_max_side"]
    assert MARKER in (cut / "solver.py").read_text()
    assert OPERATORS["detect_identify"].apply(read_files(cut), cfg) is None  # made once
    # the moves written for scan_refine's code do not apply to it (final_look_flagged found its anchors in this
    # solver and made a look that scored -0.87 on every trial)
    assert OPERATORS["final_look_flagged"].apply(read_files(cut), cfg) is None
    assert OPERATORS["bisect_boundaries"].apply(read_files(cut), cfg) is None
    few = {**uniform, "config.toml": set_key(uniform["config.toml"], "n_frames", 16)}
    assert OPERATORS["identify_flagged"].apply(few, config_of(few)) is None  # 16 moments: each its own stretch
    spoken = set_key(set_key(uniform["config.toml"], "transcript", "windows"), "mcq.transcript", "video")
    made = config_of(read_files(_made("uniform", "identify_flagged", tmp_path / "spoken", spoken)))
    assert made["frames"] == 256 and made["transcript"] == "windows" and made["mcq"] == {"transcript": "video"}


@pytest.mark.slow
def test_the_look_identifies_what_the_small_cells_only_detect_at_a_fraction_of_the_cost(tmp_path: Path,
                                                                                       small_world) -> None:
    cut = _made("scan_refine", "detect_identify", tmp_path / "cut")
    blind = tmp_path / "blind"  # the same small cells, nothing identified
    shutil.copytree(cut, blind)
    (blind / "config.toml").write_text(set_key((cut / "config.toml").read_text(), "max_identify", 0))
    tasks = [t for t in small_world.tasks if t.split == "train" and t.answer][:8]
    cost, runtime = cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
    base = solve_tasks(load_harness(seed_path("scan_refine")), tasks, SimVLM(), cost, runtime, tmp_path / "base")
    new = solve_tasks(load_harness(cut), tasks, SimVLM(), cost, runtime, tmp_path / "new")
    cells = solve_tasks(load_harness(blind), tasks, SimVLM(), cost, runtime, tmp_path / "cells")
    assert all(r.outcome == "ok" for r in new + cells), [r.error for r in new + cells]
    for b, n, c in zip(base, new, cells, strict=True):
        assert n.usage.visual_tokens < 0.6 * b.usage.visual_tokens, (n.task_id, n.usage, b.usage)
        assert n.usage.visual_tokens > c.usage.visual_tokens, n.task_id  # something was identified
    capped = solve_tasks(load_harness(cut), tasks, SimVLM(), cost, RuntimeSettings(concurrency=2, budget=12),
                         tmp_path / "capped")  # a run's frame cap: scan, identification and edges within it
    assert all(r.outcome == "ok" and 0 < r.usage.frames <= 12 for r in capped), [(r.error, r.usage) for r in capped]
    score = {name: sum(r.score for r in rs) for name, rs in (("base", base), ("new", new), ("cells", cells))}
    assert score["new"] > score["cells"] + 2, score  # its answers come from what it identified


def test_raising_the_resolution_of_the_look_raises_its_identification_frames_not_its_detection_cells(
        tmp_path: Path) -> None:
    """Widening the cells (96 -> 176 px, the move's rule for a contact-sheet scan) cost 1.6x for nothing: the cells
    only detect. The move raises the identification frames' side, up to 448 px, and does not apply beyond."""
    look = read_files(_made("uniform", "identify_flagged", tmp_path / "look"))
    assert config_of(look)["refine_max_side"] == 448
    assert OPERATORS["raise_resolution"].apply(look, config_of(look)) is None  # already at 448
    low = {**look, "config.toml": set_key(look["config.toml"], "refine_max_side", 256)}
    raised = OPERATORS["raise_resolution"].apply(low, config_of(low))
    assert raised is not None
    cfg = config_of(raised)
    assert cfg["refine_max_side"] == 384 and cfg["cell_width"] == DETECT_CELL_WIDTH
    full = {**look, "config.toml": set_key(look["config.toml"], "refine_max_side", 0)}  # 0: full resolution
    assert OPERATORS["raise_resolution"].apply(full, config_of(full)) is None


@pytest.mark.slow
def test_the_look_reads_the_transcript_its_parent_read(tmp_path: Path) -> None:
    """A parent that read what is said around each of its frames: its look reads around each scan moment, not only
    around the stretches something on screen flagged (a words-only question's evidence is flagged by nothing)."""
    from videvolve.datasets.synthworld import generate_world

    world = generate_world(tmp_path / "w", videos=1, minutes=6, seed=1, questions=8, narration=True, workers=1)
    tasks = [t for t in world.tasks if t.meta.get("evidence") == "words"]
    assert tasks
    spoken = set_key(read_files(seed_path("uniform"))["config.toml"], "transcript", "windows")
    parent = tmp_path / "parent"
    shutil.copytree(seed_path("uniform"), parent)
    (parent / "config.toml").write_text(spoken)
    look = _made("uniform", "identify_flagged", tmp_path / "look", spoken)
    assert config_of(read_files(look))["transcript_window"] == config_of(read_files(parent))["transcript_window"]
    cost, runtime = cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
    read = {name: solve_tasks(load_harness(path), tasks, SimVLM(), cost, runtime, tmp_path / f"{name}-out")
            for name, path in (("parent", parent), ("look", look))}
    for p, n in zip(read["parent"], read["look"], strict=True):
        assert p.outcome == n.outcome == "ok", (p.error, n.error)
        assert n.usage.transcript_tokens == p.usage.transcript_tokens > 0, (n.task_id, n.usage, p.usage)
    sheets = _made("scan_refine", "detect_identify", tmp_path / "sheets",
                   set_key(read_files(seed_path("scan_refine"))["config.toml"], "transcript", "windows"))
    assert "transcript_window" not in config_of(read_files(sheets))  # it read around its refined windows: so does this
