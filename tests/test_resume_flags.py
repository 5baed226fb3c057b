"""``evolve --resume`` and the flags given with it: refused where they would change the run, taken where the server
moved or the machine runs differently, never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.cli import build_parser, main
from videvolve.cli.evolve_cmd import build_context
from videvolve.loop.context import Context


def _started(tmp_path: Path, tasks: Path) -> Path:
    """A run folder as `evolve` leaves it when it starts: against a server, editor and investigator on it."""
    run = tmp_path / "run"
    run.mkdir()
    args = ["evolve", "--run", str(run), "--tasks", str(tasks), "--memory", str(tmp_path / "memory"), "--backend",
            "openai", "--model", "qwen", "--base-url", "http://127.0.0.1:8000/v1", "--editor-model", "qwen"]
    ctx = build_context(build_parser().parse_args(args))
    (run / "settings.json").write_text(ctx.model_dump_json())
    return run


def _resumed(run: Path, *flags: str) -> Context:
    return build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume", *flags]))


@pytest.mark.parametrize(("flags", "named"), [
    (["--model", "other"], "--model other (the run has qwen)"),
    (["--temperature", "0.7"], "--temperature 0.7 (the run has 0.0)"),
    (["--budget", "32"], "--budget 32 (the run has None)"),
    (["--task-timeout", "30"], "--task-timeout 30.0 (the run has 900.0)"),
    (["--editor-model", "bigger"], "--editor-model bigger (the run has qwen)"),
    (["--investigator-model", "probe"], "--investigator-model probe (the run has none)"),
    (["--config", "x.toml"], "--config x.toml (a resumed run reads its own settings.json)")])
def test_a_flag_that_would_change_the_run_is_refused_not_ignored(small_world, tmp_path: Path, capsys, flags, named):
    run = _started(tmp_path, small_world.tasks_path)
    assert main(["evolve", "--run", str(run), "--resume", "--dry-run", *flags]) == 2  # main: 0, the flag ignored
    assert named in " ".join(capsys.readouterr().err.split())


def test_a_server_that_moved_is_followed_and_the_runs_own_values_are_accepted(small_world, tmp_path: Path):
    run = _started(tmp_path, small_world.tasks_path)
    ctx = _resumed(run, "--base-url", "http://10.0.0.2:8001/v1", "--concurrency", "2", "--retry-window", "60",
                   "--model", "qwen", "--editor-model", "qwen")
    assert ctx.model.base_url == "http://10.0.0.2:8001/v1"  # main: the old address, the flag ignored
    assert (ctx.runtime.concurrency, ctx.model.retry_window_s) == (2, 60.0)
    assert ctx.editor.model is not None and ctx.editor.model.base_url == "http://10.0.0.2:8001/v1"  # on it too
    assert (ctx.model.model, ctx.runtime.wall_seconds) == ("qwen", 900.0)


def test_a_run_folder_moved_or_copied_is_resumed_where_it_now_is(small_world, tmp_path: Path):
    """settings.json keeps the folder's absolute path: a run moved to another disk (its own one full) and resumed
    there was written back into the old path, and a copy resumed (to try something on it) wrote into the original."""
    run = _started(tmp_path, small_world.tasks_path)
    moved = tmp_path / "elsewhere" / "run-copy"
    moved.parent.mkdir()
    run.rename(moved)
    ctx = _resumed(moved)
    assert Path(ctx.run_dir) == moved.resolve()  # main: tmp_path / "run", which no longer exists
    assert ctx.run_id == "run"  # the checkpoints' thread: the run's own name, whatever its folder is called now
