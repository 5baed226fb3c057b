"""`evolve --resume` goes on only on the files and the model checkpoint the run started on (``loop/inputs.py``)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_context
from videvolve.config import ModelSettings
from videvolve.editing.base import Proposal
from videvolve.errors import UsageError
from videvolve.graph import Context
from videvolve.graph.driver import evolve
from videvolve.loop.services import open_run
from videvolve.models.sim.canned import CannedVLM
from videvolve.models.sim.server import create_app
from videvolve.tasks import read_tasks
from videvolve.testing import ScriptedEditor, serve_app

pytestmark = pytest.mark.slow  # runs of the loop


def run(ctx: Context) -> dict[str, Any]:
    with open_run(ctx) as services:
        services.editor = ScriptedEditor([Proposal(operator="scripted", rationale="r",
                                                   edits={"SKILL.md": "# scripted\n"})])
        return evolve(ctx, services=services)


def longer(ctx: Context, **model: Any) -> Context:
    """The run resumed for one iteration more (on the model settings given)."""
    return ctx.model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 1}),
                                  "model": ctx.model.model_copy(update=model)})


def test_resume_refuses_other_video_or_transcript_content_and_an_old_run_is_resumed_unchecked(
        small_world, tmp_path: Path, seed: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Only the tasks file was compared on resume: a selection video re-exported (the tasks file untouched) and the
    run went on, its selection results made again on the new content while its state rested on the old."""
    world = tmp_path / "world"
    shutil.copytree(small_world.root, world)
    ctx = run_context(small_world, tmp_path, seed, tasks=str(world / small_world.tasks_path.name),
                      stop={"iterations": 0})
    assert run(ctx)["iteration"] == 0
    videos = {t.split: Path(t.video) for t in reversed(read_tasks(ctx.tasks))}
    selection, other = videos["selection"], videos["train"]
    assert selection != other and not selection.with_suffix(".srt").exists()
    original = selection.read_bytes()
    settings = (tmp_path / "run" / "settings.json").read_text()
    shutil.copyfile(other, selection)  # re-exported
    with pytest.raises(UsageError, match=rf"{selection} changed since the run in .* Put the original file back"):
        run(longer(ctx))
    assert (tmp_path / "run" / "settings.json").read_text() == settings  # the refused resume wrote nothing
    selection.write_bytes(original)
    transcript = selection.with_suffix(".srt")
    transcript.write_text("1\n00:00:01,000 --> 00:00:03,000\nhello\n")  # a transcript the run did not read
    with pytest.raises(UsageError, match=rf"{transcript} changed since the run"):
        run(longer(ctx))
    transcript.unlink()
    (tmp_path / "run" / "inputs.json").unlink()  # a run folder from before the record was kept
    with caplog.at_level(logging.WARNING, logger="videvolve.loop.inputs"):
        assert run(longer(ctx))["iteration"] == 1
    assert [r.message for r in caplog.records if "no record of the files" in r.message] != []
    assert len([r for r in caplog.records if r.name == "videvolve.loop.inputs"]) == 1
    shutil.copyfile(other, selection)  # kept now: a later resume is compared with it
    with pytest.raises(UsageError, match=rf"{selection} changed since the run"):
        run(longer(ctx).model_copy(update={"stop": ctx.stop.model_copy(update={"iterations": 2})}))


def test_resume_refuses_another_checkpoint_behind_the_models_name_but_not_another_address(
        small_world, tmp_path: Path, seed: Path) -> None:
    """`--base-url` may move on resume (a server restarted elsewhere serves the same checkpoint); a server of another
    checkpoint under the same name was taken as the run's model, and the run went on on its answers."""
    with serve_app(create_app()) as first, serve_app(create_app(backend=CannedVLM("A"))) as canned, \
            serve_app(create_app()) as moved:
        model = ModelSettings(backend="openai", model="simvlm", base_url=first, retry_window_s=5)
        ctx = run_context(small_world, tmp_path, seed, model=model, stop={"iterations": 0})
        assert run(ctx)["iteration"] == 0
        with pytest.raises(UsageError, match=rf"the model at {canned} is 'simvlm' revision 'checkpoint=simvlm@"
                                             r"CannedVLM.*started on 'simvlm' revision 'checkpoint=simvlm@SimVLM"):
            run(longer(ctx, base_url=canned))
        assert run(longer(ctx, base_url=moved))["iteration"] == 1  # the same checkpoint at another address


def test_a_resume_under_code_that_makes_results_otherwise_says_so_and_goes_on(small_world, tmp_path: Path, seed: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Stored results are keyed by the code that makes them (``version.result_release``), so none is reused across
    the change; the run's decisions so far rest on the old code's results, which the resume says."""
    import json

    ctx = run_context(small_world, tmp_path, seed, stop={"iterations": 0})
    assert run(ctx)["iteration"] == 0
    record = tmp_path / "run" / "inputs.json"
    kept = json.loads(record.read_text())
    record.write_text(json.dumps({**kept, "release": "0.0.9+000000000000"}))
    with caplog.at_level(logging.WARNING, logger="videvolve.loop.inputs"):
        assert run(longer(ctx))["iteration"] == 1
    assert any("started under videvolve 0.0.9+000000000000 and results are now made by other code" in r.message
               for r in caplog.records)
