"""Nested settings (editor, investigator, gate, stop): the old flags, old runs' flat settings.json and flat keyword
arguments all still work; new runs write the nested form; ``evolve --help`` reads in sections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from videvolve.cli import build_parser, main
from videvolve.cli.evolve_cmd import build_context
from videvolve.errors import UsageError
from videvolve.loop.context import Context, GateSettings

FLAT_RUN = Path(__file__).with_name("data") / "settings_flat_v1.json"
"""A ``settings.json`` written by the flat ``Context`` (before the grouping), with @PLACEHOLDERS@ for its paths."""

# every flag of `evolve` before the grouping: (flag, value typed, where it lands, the value there)
OLD_FLAGS: list[tuple[str, str | None, str, Any]] = [
    ("--editor", "llm", "editor.kind", "llm"),
    ("--editor-cmd", "claude -p hi", "editor.cmd", "claude -p hi"),
    ("--editor-cmd-repair", "claude -p fix", "editor.cmd_repair", "claude -p fix"),
    ("--editor-cmd-timeout", "60", "editor.cmd_timeout", 60.0),
    ("--editor-cmd-ro-binds", "/a,/b", "editor.cmd_ro_binds", ["/a", "/b"]),
    ("--editor-cmd-env", "TERM,LANG", "editor.cmd_env", ["TERM", "LANG"]),
    ("--editor-max-tokens", "2048", "editor.max_tokens", 2048),
    ("--editor-rounds", "3", "editor.rounds", 3),
    ("--editor-trial-tasks", "7", "editor.trial_tasks", 7),
    ("--editor-probes", "2", "editor.probes", 2),
    ("--editor-visual-tokens", "9000", "editor.visual_tokens", 9000),
    ("--editor-timeout", "30", "editor.timeout", 30.0),
    ("--workspace-images", "5", "editor.workspace_images", 5),
    ("--no-trials", None, "editor.no_trials", True),
    ("--trial-operators", "2", "editor.trial_operators", 2),
    ("--trial-batch", "4", "editor.trial_batch", 4),
    ("--repair-rounds", "0", "editor.repair_rounds", 0),
    ("--smoke-tasks", "3", "editor.smoke_tasks", 3),
    ("--investigator", "agent", "investigator.kind", "agent"),
    ("--investigator-rounds", "4", "investigator.rounds", 4),
    ("--investigator-max-tokens", "1024", "investigator.max_tokens", 1024),
    ("--failure-threshold", "0.7", "investigator.failure_threshold", 0.7),
    ("--probe-frames", "9", "investigator.probe_frames", 9),
    ("--iterations", "4", "stop.iterations", 4),
    ("--hours", "1.5", "stop.hours", 1.5),
    ("--max-calls", "100", "stop.max_calls", 100),
    ("--max-visual-tokens", "5000", "stop.max_visual_tokens", 5000),
    ("--gate", "video-rsi", "gate.rule", "video-rsi"),
    ("--gate-level", "0.1", "gate.level", 0.1),
    ("--gate-margin", "0.03", "gate.margin", 0.03),
    ("--gate-spending", "none", "gate.spending", "none"),
    ("--alpha", "0.2", "gate.alpha", 0.2),
    ("--beta", "0.3", "gate.beta", 0.3),
    ("--eps", "0.01", "gate.eps", 0.01),
    ("--cost-metric", "frames", "gate.cost_metric", "frames"),
    ("--text-token-weight", "0.5", "gate.text_token_weight", 0.5),
    ("--validation", "full", "gate.validation", "full"),
    ("--rungs", "0.5,1.0", "gate.rungs", [0.5, 1.0]),
    ("--penalty", "2.0", "gate.penalty", 2.0),
    ("--batch", "3", "batch", 3),
    ("--seed", "5", "seed", 5),
    ("--embedder", "hashing", "embedder", "hashing"),
    ("--no-cache", None, "no_cache", True),
    ("--proxy", "auto", "proxy", "auto"),
    ("--budgets", "8,16", "budgets", [8, 16]),
    ("--search", "mcts", "search", "mcts"),
    ("--children", "2", "children", 2),
    ("--uct-c", "0.7", "uct_c", 0.7),
    ("--executor", "ray", "executor", "ray"),
    ("--ray-address", "auto", "ray_address", "auto"),
]


def _at(ctx: Any, path: str) -> Any:
    for part in path.split("."):
        ctx = getattr(ctx, part)
    return ctx


def _context(tmp_path: Path, tasks: Path, *extra: str) -> Context:
    args = ["evolve", "--run", str(tmp_path / "run"), "--tasks", str(tasks), "--memory", str(tmp_path / "memory"),
            *extra]
    return build_context(build_parser().parse_args(args))


@pytest.mark.parametrize(("flag", "value", "path", "expected"), OLD_FLAGS, ids=[f[0] for f in OLD_FLAGS])
def test_every_old_flag_still_parses_to_its_nested_setting(small_world, tmp_path: Path, flag, value, path, expected):
    ctx = _context(tmp_path, small_world.tasks_path, flag, *([value] if value is not None else []))
    assert _at(ctx, path) == expected
    assert _at(Context(run_dir="x", run_id="x", tasks="t"), path) != expected  # the flag changed something


def test_the_model_flags_land_in_their_sections(small_world, tmp_path: Path):
    ctx = _context(tmp_path, small_world.tasks_path, "--editor-model", "ed", "--editor-base-url", "http://e/v1",
                   "--investigator-model", "probe", "--investigator-agent-model", "inv",
                   "--investigator-agent-base-url", "http://i/v1")
    assert ctx.editor.model is not None and (ctx.editor.model.model, ctx.editor.model.base_url) == ("ed", "http://e/v1")
    assert ctx.investigator.model is not None and ctx.investigator.model.model == "probe"
    agent = ctx.investigator.agent_model
    assert agent is not None and (agent.model, agent.base_url) == ("inv", "http://i/v1")


def test_help_reads_in_sections(capsys):
    with pytest.raises(SystemExit):
        main(["evolve", "--help"])
    text = capsys.readouterr().out
    text = text[text.index("\noptions:"):]  # the sections, not the usage line
    heads = [text.index(f"\n{h} settings:") for h in ("run", "editor", "investigator", "gate", "stop")]
    assert heads == sorted(heads)
    run, editor, investigator, gate, stop = heads
    assert editor < text.index("--editor-rounds") < investigator < text.index("--investigator-rounds") < gate
    assert gate < text.index("--gate-level") < text.index("--alpha") < text.index("--rungs") < stop
    assert stop < text.index("--max-visual-tokens")
    assert run < text.index("--search ") < editor  # run-wide settings stay at the top
    assert editor < text.index("--editor-base-url") < investigator  # the model flags sit in their sections


def _old_run(tmp_path: Path, tasks: Path, seed: Path) -> Path:
    run = tmp_path / "old"
    run.mkdir()
    text = FLAT_RUN.read_text()
    for key, value in {"RUN": run, "TASKS": tasks, "SEED": seed, "MEMORY": tmp_path / "memory",
                       "CACHE": tmp_path / "cache.sqlite"}.items():
        text = text.replace(f"@{key}@", str(value))
    (run / "settings.json").write_text(text)
    return run


def test_a_run_with_flat_settings_resumes_with_them(small_world, seed: Path, tmp_path: Path, capsys):
    run = _old_run(tmp_path, small_world.tasks_path, seed)
    assert "gate_level" in json.loads((run / "settings.json").read_text())  # really the old, flat form
    ctx = build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume"]))
    assert (ctx.editor.kind, ctx.editor.rounds, ctx.editor.no_trials) == ("llm", 5, True)
    assert ctx.editor.model is not None and ctx.editor.model.model == "editor-m"
    assert (ctx.investigator.rounds, ctx.investigator.failure_threshold) == (3, 0.7)
    assert (ctx.gate.level, ctx.gate.margin, ctx.gate.alpha, ctx.gate.cost_metric) == (0.1, 0.03, 0.2, "frames")
    assert (ctx.gate.validation, ctx.gate.rungs, ctx.gate.penalty) == ("full", [0.5, 1.0], 2.0)
    assert (ctx.stop.iterations, ctx.stop.max_calls, ctx.batch) == (2, 500, 2)

    grown = build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume", "--iterations", "5",
                                                     "--max-calls", "900"]))
    assert (grown.stop.iterations, grown.stop.max_calls, grown.gate.level) == (5, 900, 0.1)
    assert main(["evolve", "--run", str(run), "--resume", "--dry-run", "--iterations", "3"]) == 0

    same = ["--gate-level", "0.1", "--editor", "llm", "--validation", "full"]  # the run's own values: accepted
    assert build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume", *same])).gate.level == 0.1
    capsys.readouterr()
    assert main(["evolve", "--run", str(run), "--resume", "--dry-run", "--gate-level", "0.2", "--editor",
                 "heuristic", "--rungs", "0.5,1.0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--gate-level 0.2 (the run has 0.1)" in err and "--editor heuristic (the run has llm)" in err
    assert "--rungs" not in err.split("would change them:")[1].split(". Drop")[0]  # unchanged: not named
    assert "--iterations, --hours, --max-calls, --max-visual-tokens may grow" in err


def test_resume_of_a_nested_run_refuses_a_changed_section_setting(small_world, seed: Path, tmp_path: Path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    ctx = _context(tmp_path, small_world.tasks_path, "--gate-margin", "0.04", "--editor-rounds", "3")
    (run / "settings.json").write_text(ctx.model_dump_json())  # what `evolve` writes when it starts
    stored = json.loads((run / "settings.json").read_text())
    assert stored["gate"]["margin"] == 0.04 and "gate_margin" not in stored  # new runs write the nested form
    assert main(["evolve", "--run", str(run), "--resume", "--dry-run", "--gate-margin", "0.04"]) == 0
    assert main(["evolve", "--run", str(run), "--resume", "--dry-run", "--investigator-rounds", "2"]) == 2
    assert "--investigator-rounds 2 (the run has 8)" in " ".join(capsys.readouterr().err.split())
    resumed = build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume", "--hours", "2"]))
    assert (resumed.stop.hours, resumed.gate.margin, resumed.editor.rounds) == (2.0, 0.04, 3)


def test_config_files_take_flat_or_nested_keys(small_world, tmp_path: Path):
    flat, nested = tmp_path / "flat.toml", tmp_path / "nested.json"
    flat.write_text('editor = "llm"\ngate_level = 0.1\niterations = 3\ncost_metric = "frames"\n')
    nested.write_text(json.dumps({"editor": {"kind": "llm"}, "gate": {"level": 0.1, "cost_metric": "frames"},
                                  "stop": {"iterations": 3}}))
    a = _context(tmp_path, small_world.tasks_path, "--config", str(flat), "--alpha", "0.3")
    b = _context(tmp_path, small_world.tasks_path, "--config", str(nested), "--alpha", "0.3")
    assert a == b
    assert (a.editor.kind, a.gate.level, a.gate.alpha, a.gate.cost_metric, a.stop.iterations) == \
        ("llm", 0.1, 0.3, "frames", 3)
    over = _context(tmp_path, small_world.tasks_path, "--config", str(nested), "--gate-level", "0.2")
    assert (over.gate.level, over.gate.cost_metric) == (0.2, "frames")  # a flag overrides one key of a section
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(UsageError, match="does not hold a settings object"):
        _context(tmp_path, small_world.tasks_path, "--config", str(listed))


def test_flat_keyword_arguments_still_build_a_context():
    # flat keys, on purpose: Context's before-validator nests them; the pydantic plugin's __init__ knows only fields
    ctx = Context(  # type: ignore[call-arg]
        run_dir="/tmp/x", run_id="x", tasks="t.jsonl", validation="full", gate_level=0.1, editor="agent",
        editor_rounds=4, investigator_agent_model={"model": "m"}, iterations=2, gate=GateSettings(alpha=0.3))
    assert (ctx.gate.validation, ctx.gate.level, ctx.gate.alpha) == ("full", 0.1, 0.3)  # flat keys join the section
    assert (ctx.editor.kind, ctx.editor.rounds, ctx.stop.iterations) == ("agent", 4, 2)
    assert ctx.investigator.agent_model is not None and ctx.investigator.agent_model.model == "m"
    assert Context.model_validate_json(ctx.model_dump_json()) == ctx
    with pytest.raises(ValueError, match="gate_levle"):
        # a typo is still refused (a misspelt key, on purpose)
        Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", gate_levle=0.1)  # type: ignore[call-arg]


def test_the_report_reads_the_settings_of_old_and_new_runs(tmp_path: Path):
    from videvolve.report.build import _setting

    old = json.loads(FLAT_RUN.read_text())
    new = json.loads(Context.model_validate(old).model_dump_json())
    for settings in (old, new):
        assert _setting(settings, "editor", "kind", "editor") == "llm"
        assert _setting(settings, "gate", "cost_metric", "cost_metric") == "frames"
