"""`evolve --dry-run` bounds what the run does: real small runs of each seed and editor stay within it (issue 20)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from videvolve.cli import build_parser, main
from videvolve.cli.evolve_cmd import build_context
from videvolve.graph.driver import evolve
from videvolve.graph.plan import ask_sites, estimate
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import read_tasks


def small_seed(name: str, tmp_path: Path) -> Path:
    d = tmp_path / f"{name}-small"
    shutil.copytree(seed_path(name), d)
    config = {"uniform": "n_frames = 16\nmax_side = 160\n",
              "scan_refine": "frames = 32\nscan_share = 0.75\nsheet_cols = 4\ncell_width = 160\nmax_candidates = 3\n"
                             "window_frames = 2\nboundary_frames = 1\nrefine_max_side = 160\n"}[name]
    (d / "config.toml").write_text(config)
    return d


@pytest.mark.slow
@pytest.mark.parametrize(("seed_name", "trials"), [("uniform", True), ("uniform", False), ("scan_refine", True),
                                                    ("scan_refine", False)])
def test_a_real_run_stays_within_its_dry_run_estimate(small_world, tmp_path: Path, seed_name: str, trials: bool):
    seed = small_seed(seed_name, tmp_path)
    args = ["evolve", "--tasks", str(small_world.tasks_path), "--run", str(tmp_path / "run"), "--seed-harness",
            str(seed), "--memory", str(tmp_path / "memory"), "--embedder", "hashing", "--iterations", "2",
            "--batch", "3", "--trial-batch", "2", "--no-cache", "--concurrency", "2", "--eps", "0.5",
            *([] if trials else ["--no-trials"])]
    ctx = build_context(build_parser().parse_args(args))
    plan = estimate(ctx, read_tasks(ctx.tasks), load_harness(seed))
    final = evolve(ctx)
    runs = len(list((tmp_path / "run" / "evals").glob("*/*/results/*.json")))
    calls = int(final["spent"]["model_calls"])
    assert final["iteration"] == 2 and runs > 0
    # measured 2026-12-03 (calls / main's formula / this bound): uniform 64 / 31 / 178, uniform --no-trials
    # 46 / 31 / 82, scan_refine 101 / 93 / 344, scan_refine --no-trials 101 / 93 / 152
    # visual tokens spent / bound, 2026-12-04 (the bound grows frames by one edit per iteration, not all at once):
    # uniform 15,443 / 237,116, --no-trials 8,824 / 114,716, scan_refine 50,016 / 468,112, --no-trials 36,414 / 226,576
    assert calls <= plan.model_calls, (calls, plan)
    assert runs <= plan.questions, (runs, plan)
    assert final["spent"]["visual_tokens"] <= plan.visual_tokens


def test_ask_sites_count_loops_and_the_dry_run_prints_the_bound(small_world, tmp_path: Path, capsys):
    assert ask_sites("r = ctx.ask(x)\n", 24) == 1
    assert ask_sites("for i in range(3):\n    ctx.ask(x)\nctx.ask(y)\n", 24) == 25
    assert ask_sites("while True:\n    ctx.ask(x)\n", 5) == 5
    assert main(["evolve", "--tasks", str(small_world.tasks_path), "--run", str(tmp_path / "run"), "--seed-harness",
                 "scan_refine", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "0.00 hours" not in printed and "about 70" not in printed and "qwen2.5-vl cost model" in printed
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


def test_a_long_dry_run_never_shows_a_question_more_frames_than_its_video_holds(small_world, tmp_path: Path,
                                                                                 capsys):
    # 30 iterations compounded one edit's 1.7x growth into 1.7**30 x 256 frames a question: the plan printed
    # 1.3e12 frames shown and 9e13 visual tokens for a 4-video world of 3 minutes (720 to 850 frames a video)
    from videvolve.media import probe

    assert main(["evolve", "--tasks", str(small_world.tasks_path), "--run", str(tmp_path / "run"),
                 "--iterations", "30", "--dry-run"]) == 0
    printed = capsys.readouterr().out

    def number(what: str) -> int:
        found = re.search(rf"{re.escape(what)}\s*│\s*([\d,]+)", printed)
        assert found is not None, what
        return int(found.group(1).replace(",", ""))

    value = {what: number(what) for what in ("question runs (harness on one task)", "frames shown")}
    most = max(probe(t.video).frame_count for t in read_tasks(small_world.tasks_path))
    assert 0 < value["frames shown"] <= value["question runs (harness on one task)"] * most, (value, most)


def test_ask_sites_of_a_deeply_nested_or_unparsable_file_is_a_count_not_a_crash():
    """The count walked the tree recursively: a file nested some hundreds deep (a solver an editor wrote) stopped
    `evolve --dry-run` with RecursionError."""
    deep = "x = " + "+".join(["ctx.ask(y)"] + ["1"] * 1000) + "\n"  # parsed; a thousand BinOps deep
    nested = "".join("    " * i + "for a in b:\n" for i in range(90)) + "    " * 90 + "ctx.ask(x)\n"
    assert ask_sites(deep, 24) == 1 and ask_sites(nested, 24) == 24
    too_deep = "x = " + "+".join(["1"] * 5000) + "\n"  # deeper than Python's own parser goes
    assert ask_sites(too_deep, 24) == 24 == ask_sites("def broken(:\n", 24)  # its load says what is wrong
