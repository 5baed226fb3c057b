"""``videvolve evolve`` as a user meets it: flags from the settings, Ctrl-C, an editor that proposes nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.testing import serve_sim


def test_every_context_field_is_a_flag_with_its_description(capsys):
    from videvolve.cli.flags import flag_name
    from videvolve.loop.context import SECTIONS, Context

    with pytest.raises(SystemExit):
        main(["evolve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    fields = [(n, f) for n, f in Context.model_fields.items() if n not in SECTIONS]
    fields += [(n, f) for section in SECTIONS.values() for n, f in section.model_fields.items()]
    for name, field in fields:
        if name in ("run_dir", "run_id", "model", "runtime", "agent_model"):
            continue
        assert flag_name(name, field) + " " in text, name
        assert " ".join((field.description or "").split())[:40] in text, name


def test_flags_override_the_config_and_bad_settings_are_one_line(small_world, tmp_path: Path, capsys):
    from videvolve.cli.evolve_cmd import build_context, register  # noqa: F401

    config = tmp_path / "run.toml"
    config.write_text('iterations = 3\nbatch = 2\nalpha = 0.05\n')
    args = ["evolve", "--run", str(tmp_path / "r"), "--tasks", str(small_world.tasks_path), "--config", str(config),
            "--batch", "5", "--rungs", "0.5,1.0", "--budget", "32", "--dry-run"]
    assert main(args) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text("iterations = -1\n")
    assert main(["evolve", "--run", str(tmp_path / "r2"), "--tasks", str(small_world.tasks_path), "--config",
                 str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "invalid settings" in err and "iterations" in err and "Traceback" not in err


@pytest.mark.parametrize("helper", [("--editor", "llm"), ("--editor", "agent"), ("--investigator", "agent")],
                         ids=["llm-editor", "agent-editor", "agent-investigator"])
def test_an_editor_or_investigator_that_needs_a_real_model_is_refused_on_sim_at_once(
        small_world, tmp_path: Path, capsys, helper: tuple[str, str]):
    """settings.md's example (`editor.kind = "llm"`) on the default sim backend ran every iteration and ended in exit
    4 ("the llm editor never produced a usable revision"); --dry-run planned it. Both refuse it now, with the fix."""
    for extra in (["--dry-run"], []):
        run = tmp_path / f"r{len(extra)}"
        assert main(["evolve", "--run", str(run), "--tasks", str(small_world.tasks_path), *helper, *extra]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{' '.join(helper)} needs a model that" in err and "SimVLM" in err, err
        assert "--backend openai" in err and ("--editor-model NAME" in err or "--investigator-agent-model" in err)
        assert not (run / "settings.json").exists()  # refused before the run started
    given = ["--editor-model", "m", "--editor-base-url", "http://127.0.0.1:9/v1"] if helper[0] == "--editor" else \
        ["--investigator-agent-model", "m", "--investigator-agent-base-url", "http://127.0.0.1:9/v1"]
    assert main(["evolve", "--run", str(tmp_path / "ok"), "--tasks", str(small_world.tasks_path), *helper, *given,
                 "--dry-run"]) == 0  # its own model named: planned


def test_ctrl_c_prints_the_command_that_resumes(small_world, tmp_path: Path, monkeypatch, capsys):
    import videvolve.graph.driver as driver

    def interrupted(ctx, on_update=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "evolve", interrupted)
    run = tmp_path / "r"
    assert main(["evolve", "--run", str(run), "--tasks", str(small_world.tasks_path)]) == 130
    err = " ".join(capsys.readouterr().err.split())
    assert f"videvolve evolve --run {run.resolve()} --resume" in err


def test_a_bug_prints_a_traceback_and_asks_for_a_report(monkeypatch, capsys, tmp_path: Path):
    import videvolve.cli.run_cmds as run_cmds

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(run_cmds, "cmd_report", broken)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")  # the default: ~/.cache/videvolve
    parser_main = main(["report", "--run", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert parser_main == 70 and "KeyError" in err and "bug in videvolve" in err
    assert "github.com" not in err  # main sent people to an issue tracker that does not exist
    (crash,) = (tmp_path / "home" / ".cache" / "videvolve").glob("crash-*.log")
    assert str(crash) in err and "KeyError: 'a bug'" in crash.read_text() and "report --run" in crash.read_text()


@pytest.mark.slow
def test_an_llm_editor_that_never_proposes_ends_with_its_own_code(small_world, tmp_path: Path, seed: Path):
    """SimVLM as the editor model answers no editing prompt: every iteration says why, and the run exits 4."""
    run = tmp_path / "r"
    with serve_sim() as base:
        r = subprocess.run([sys.executable, "-m", "videvolve", "evolve", "--tasks", str(small_world.tasks_path),
                            "--run", str(run), "--seed-harness", str(seed), "--iterations", "2", "--batch", "2",
                            "--editor", "llm", "--editor-base-url", base, "--editor-model", "simvlm",
                            "--memory", str(tmp_path / "m"), "--embedder", "hashing", "--no-cache"],
                           capture_output=True, text=True, timeout=600)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "never produced a usable revision" in r.stderr and "no iteration of this run proposed" in r.stderr
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    why = [e["why"] for e in events if e["event"] == "no proposal"]
    assert len(why) == 2 and all("no usable revision" in w and "began" in w for w in why)


@pytest.mark.slow
def test_the_log_has_one_line_per_gated_candidate(small_world, tmp_path: Path, seed: Path, capsys):
    """The progress callback sees the state after the reducers: every iteration's gate entries reach the log."""
    assert main(["evolve", "--run", str(tmp_path / "r"), "--tasks", str(small_world.tasks_path), "--seed-harness",
                 str(seed), "--iterations", "2", "--batch", "2", "--memory", str(tmp_path / "m"), "--embedder",
                 "hashing", "--no-trials"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    history = [json.loads(x) for x in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    gated = [e for e in history if e["node"] == "gate"]
    assert gated and all(f"iteration {e['iteration'] + 1}: {e['operator']}" in out for e in gated), out[:3000]
    assert re.search(r"best harness: \w+ \(selection score [\d.]+ on \d+ questions, [\d,.]+ visual tokens per "
                     r"question\)", out), out[-600:]


def test_two_bugs_in_the_same_second_keep_both_crash_files(monkeypatch, capsys, tmp_path: Path):
    """The crash file was named by the second alone: two commands failing in the same second (two pytest-xdist
    workers, two jobs of a script) wrote one file, the second over the first."""
    import time

    import videvolve.cli.run_cmds as run_cmds

    def broken(args):
        raise KeyError(f"bug of {args.run}")

    monkeypatch.setattr(run_cmds, "cmd_report", broken)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")  # the default: ~/.cache/videvolve
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-000000")  # the same second for both
    assert main(["report", "--run", "first"]) == 70 and main(["report", "--run", "second"]) == 70
    capsys.readouterr()
    crashes = sorted((tmp_path / "home" / ".cache" / "videvolve").glob("crash-20260101-000000*.log"))
    assert len(crashes) == 2, crashes
    assert {"first" in c.read_text() for c in crashes} == {True, False}


def test_a_bug_inside_a_run_says_that_the_run_resumes(small_world, monkeypatch, capsys, tmp_path: Path):
    """A bug raised inside a node went to the generic handler: "a bug in videvolve", exit 70, and no word that
    everything finished is kept and ``--resume`` retries the step (it does)."""
    import videvolve.graph.driver as driver

    def broken(*args, **kwargs):
        raise RuntimeError("injected bug in edit")

    monkeypatch.setattr(driver, "evolve", broken)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    run = tmp_path / "run"
    code = main(["evolve", "--tasks", str(small_world.tasks_path), "--run", str(run), "--iterations", "1",
                 "--memory", str(tmp_path / "mem")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 70 and "injected bug in edit" in err and "bug in videvolve" in err
    assert f"videvolve evolve --run {run} --resume" in err and "retries the step" in err
