"""The heuristic editor's moves on how a harness looks: routing by question kind, and cost cuts of expensive seeds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videvolve.config import RuntimeSettings
from videvolve.editing.base import EditorInput, read_files
from videvolve.editing.heuristic import candidates
from videvolve.editing.operators import OPERATORS, config_of, set_key
from videvolve.evaluation.solve import solve_tasks
from videvolve.memory.records import Diagnosis
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path, validate_harness


def _apply(name: str, seed: str, tmp_path: Path) -> Path:
    files = read_files(seed_path(seed))
    edits = OPERATORS[name].apply(files, config_of(files))
    assert edits, f"{name} does not apply to {seed}"
    out = tmp_path / f"{seed}-{name}"
    shutil.copytree(seed_path(seed), out)
    for rel, text in edits.items():
        (out / rel).write_text(text)
    assert validate_harness(out) is None
    return out


@pytest.mark.slow
def test_refine_mcq_only_routes_by_kind_and_runs(tmp_path: Path, small_world) -> None:
    out = _apply("refine_mcq_only", "uniform", tmp_path)
    cfg = config_of(read_files(out))
    assert cfg["grounding"]["refine_share"] == 0.0 and cfg["mcq"]["n_frames"] < cfg["n_frames"]
    assert OPERATORS["refine_mcq_only"].apply(read_files(out), cfg) is None  # applied once
    tasks = [t for t in small_world.tasks if t.split == "train"]
    one = [next(t for t in tasks if t.kind == "mcq"), next(t for t in tasks if t.kind == "grounding")]
    base = solve_tasks(load_harness(seed_path("uniform")), one, SimVLM(), cost_model("qwen2.5-vl"),
                       RuntimeSettings(concurrency=1), tmp_path / "base")
    routed = solve_tasks(load_harness(out), one, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=1),
                         tmp_path / "routed")
    assert all(r.outcome == "ok" for r in routed), [r.error for r in routed]
    assert routed[0].frames != base[0].frames  # mcq: fewer scan frames plus a refinement
    assert routed[1].frames == base[1].frames  # grounding: the seed's even scan, unchanged


def test_cost_cuts_of_scan_refine_and_the_lowres_route(tmp_path: Path) -> None:
    cells = config_of(read_files(_apply("smaller_cells", "scan_refine", tmp_path)))
    assert cells["cell_width"] == 160
    scan = config_of(read_files(_apply("sparser_scan", "scan_refine", tmp_path)))
    assert scan["scan_share"] == 0.6
    # uniform sends its 256 frames in one request, as many as one may show: no denser look applies to it
    assert OPERATORS["grounding_lowres_denser"].apply(read_files(seed_path("uniform")), config_of(
        read_files(seed_path("uniform")))) is None
    fewer = tmp_path / "fewer"
    shutil.copytree(seed_path("uniform"), fewer)
    (fewer / "config.toml").write_text(set_key((fewer / "config.toml").read_text(), "n_frames", 113))
    files = read_files(fewer)
    low = config_of({**files, **(OPERATORS["grounding_lowres_denser"].apply(files, config_of(files)) or {})})
    assert low["grounding"] == {"max_side": 120, "n_frames": 192}


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["uniform", "scan_refine"])
def test_every_operator_makes_requests_the_parent_accepts(tmp_path: Path, small_world, seed: str) -> None:
    """An edit the walls refuse wastes a trial (it once made every denser look of uniform fail on every task)."""
    tasks = [t for t in small_world.tasks if t.split == "train"]
    one = [next(t for t in tasks if t.kind == "mcq"), next(t for t in tasks if t.kind == "grounding")]
    files = read_files(seed_path(seed))
    applied = [name for name, op in OPERATORS.items() if op.apply(files, config_of(files)) is not None]
    assert len(applied) >= 5, applied
    for name in applied:
        out = _apply(name, seed, tmp_path)
        res = solve_tasks(load_harness(out), one, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2),
                          tmp_path / f"{name}-runs")
        assert all(r.outcome == "ok" for r in res), (name, [r.error for r in res])


@pytest.mark.slow
def test_the_final_look_of_scan_refine_resends_the_scan_only_where_it_flagged_something(tmp_path: Path,
                                                                                          small_world) -> None:
    out = _apply("final_look_flagged", "scan_refine", tmp_path)
    cfg = config_of(read_files(out))
    assert cfg["mcq"] == {"final_look": "flagged_sheets", "boundary_frames": 0}
    assert cfg["grounding"] == {"final_look": "near_cells", "final_near_cells": 2}
    assert OPERATORS["final_look_flagged"].apply(read_files(out), cfg) is None  # applied once
    tasks = [t for t in small_world.tasks if t.split == "train"]
    two = [next(t for t in tasks if t.kind == k and t.answer) for k in ("mcq", "grounding")]
    cost = cost_model("qwen2.5-vl")
    base = solve_tasks(load_harness(seed_path("scan_refine")), two, SimVLM(), cost,
                       RuntimeSettings(concurrency=1), tmp_path / "base")
    cut = solve_tasks(load_harness(out), two, SimVLM(), cost, RuntimeSettings(concurrency=1), tmp_path / "cut")
    assert all(r.outcome == "ok" for r in cut), [r.error for r in cut]
    for b, c in zip(base, cut, strict=True):  # the same frames decoded, fewer tokens sent
        assert c.usage.visual_tokens < b.usage.visual_tokens, (c.kind, c.usage, b.usage)


def test_the_editor_tries_a_cost_cut_beside_what_the_diagnoses_call_for() -> None:
    files = read_files(seed_path("scan_refine"))
    d = Diagnosis(id="d1", run_id="r", iteration=0, harness_id="h", task_id="t", video_id="v", kind="mcq",
                  category="misperception", hypothesis="h", applies_when="a", preserve="p")
    names = [op.name for _, op in candidates(EditorInput(incumbent="h", files=files, diagnoses=[d]), width=3)]
    assert len(names) >= 2 and OPERATORS[names[-1]].cost_cut and not any(OPERATORS[n].cost_cut for n in names[:-1])
    assert names[-1] == "bisect_boundaries"  # the cut that drops nothing a grounding answer reads comes first


@pytest.mark.slow
def test_grounding_pins_boundaries_by_bisection_and_pays_for_it(tmp_path: Path, small_world) -> None:
    out = _apply("bisect_boundaries", "scan_refine", tmp_path)
    cfg = config_of(read_files(out))
    assert cfg["grounding"] == {"final_look": "near_cells", "final_near_cells": 2, "bisect_rounds": 3}
    assert "mcq" not in cfg  # mcq keeps every contact sheet in its final look
    assert OPERATORS["bisect_boundaries"].apply(read_files(out), cfg) is None  # applied once
    tasks = [t for t in small_world.tasks if t.split == "train" and t.kind == "grounding" and t.answer][:2]
    cost = cost_model("qwen2.5-vl")
    base = solve_tasks(load_harness(seed_path("scan_refine")), tasks, SimVLM(), cost,
                       RuntimeSettings(concurrency=1), tmp_path / "base")
    new = solve_tasks(load_harness(out), tasks, SimVLM(), cost, RuntimeSettings(concurrency=1), tmp_path / "new")
    assert all(r.outcome == "ok" for r in new), [r.error for r in new]
    for b, c in zip(base, new, strict=True):
        assert c.usage.requests > b.usage.requests  # the bisection rounds' match requests
        assert c.usage.visual_tokens < b.usage.visual_tokens  # still cheaper than every contact sheet again
    # pinned boundaries score at least as well over the two (one boundary a frame either way can cost a task a
    # little: since SimVLM's revision 3 one of these ends 0.11 s later than the scan's, the other gains 0.07)
    assert sum(c.score for c in new) >= sum(b.score for b in base) - 1e-9, [(b.score, c.score) for b, c in
                                                                           zip(base, new, strict=True)]


def test_bisection_after_the_final_look_cut_keeps_the_cut() -> None:
    files = read_files(seed_path("scan_refine"))
    cut = {**files, **(OPERATORS["final_look_flagged"].apply(files, config_of(files)) or {})}
    edits = OPERATORS["bisect_boundaries"].apply(cut, config_of(cut))
    assert edits
    cfg = config_of({**cut, **edits})
    assert cfg["mcq"] == {"final_look": "flagged_sheets", "boundary_frames": 0}
    assert cfg["grounding"]["bisect_rounds"] == 3
    assert OPERATORS["bisect_boundaries"].apply(read_files(seed_path("uniform")), {}) is None


@pytest.mark.parametrize("seed", ["uniform", "scan_refine"])
def test_no_edit_grows_a_harness_past_what_the_dry_run_assumes_of_one(seed: str) -> None:
    """``evolve --dry-run`` bounds a run by what one edit may add (``graph/plan.py``): a new operator that sets more
    frames or larger sides in ``config.toml`` than that makes the printed worst case a wrong promise, so this fails
    first. ``add_refinement``'s refined frames are shown at its ``refine_max_side`` (0 would be full resolution)."""
    from videvolve.graph.plan import FRAME_GROWTH, SHOWN_SIDE

    def most(cfg: dict, keys: tuple[str, ...]) -> int:
        own = [cfg] + [cfg[k] for k in ("mcq", "grounding") if isinstance(cfg.get(k), dict)]
        return max((int(c[k]) or 10**6 for c in own for k in keys if k in c), default=0)  # 0: full resolution

    def within(files: dict[str, str], name: str) -> dict[str, str] | None:
        cfg = config_of(files)
        edits = OPERATORS[name].apply(files, cfg)
        if edits is None:
            return None
        new = config_of({**files, **edits})
        frames, side = ("n_frames", "frames"), ("max_side", "cell_width", "refine_max_side")
        assert most(new, frames) <= FRAME_GROWTH * most(cfg, frames) + 1, (name, cfg, new)
        assert most(new, side) <= max(SHOWN_SIDE, most(cfg, side)), (name, cfg, new)
        return {**files, **edits}

    start = read_files(seed_path(seed))
    for first in OPERATORS:  # each move on the seed, and each move after each
        once = within(start, first)
        if once is None:
            continue
        for second in OPERATORS:
            within(once, second)
