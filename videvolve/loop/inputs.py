"""What a run rests on besides its tasks file: the content of the files its tasks read, and the model answering them.

Kept in ``RUN/inputs.json`` when the run starts: each train and selection task's :func:`input_files` (its video, its
transcript, the videos its needles splice in, by content fingerprint) and the solver model's name and revision (an
endpoint's names the checkpoint it serves). ``evolve --resume`` compares what it reads now and refuses other content
or another checkpoint, as it refuses an edited tasks file: the incumbent's score, the history, the alpha-wealth and
the lineage rest on what the run read so far. Fingerprints are read once per file version (``video_fingerprint``).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ValidationError

from videvolve.atomic import write_text_atomic
from videvolve.datasets.transcripts import find_transcript
from videvolve.errors import UsageError
from videvolve.evaluation.results import input_files
from videvolve.loop.services import Run
from videvolve.models.base import reach
from videvolve.tasks import Task
from videvolve.version import result_release

log = logging.getLogger(__name__)


class Inputs(BaseModel):
    """The files each train and selection task reads (task id -> :func:`input_files`) and the model answering."""

    files: dict[str, dict[str, Any]]
    model: str
    revision: str
    release: str | None = None
    """The code that made the run's results (:func:`~videvolve.version.result_release`; None: kept before it was)."""


def inputs_of(run: Run) -> Inputs:
    """What the run reads now (the endpoint is asked which checkpoint it serves first)."""
    reach(run.vlm)
    return Inputs(files={t.id: input_files(t) for t in run.tasks}, model=run.vlm.name, revision=run.vlm.revision,
                  release=result_release())


def keep_inputs(run: Run, inputs: Inputs | None = None) -> None:
    """Record what a run starting now reads (``inputs``, when they are known already)."""
    write_text_atomic(run.dir.inputs, (inputs or inputs_of(run)).model_dump_json() + "\n", "the run's inputs")


def check_inputs(run: Run) -> None:
    """Refuse a resumed run whose files or model are not the ones it started on (:class:`UsageError`).

    A run from before they were kept has nothing to compare: that is logged, and what it reads now is kept, so that
    later resumes are compared with it.
    """
    path = run.dir.inputs
    now = inputs_of(run)
    if not path.is_file():
        log.warning("%s: the run in %s has no record of the files and the model it started on (it began before "
                    "they were kept), so this resume is not checked against them; what it reads now is kept for "
                    "later resumes", path, run.root)
        keep_inputs(run, now)
        return
    try:
        started = Inputs.model_validate_json(path.read_bytes())
    except (ValidationError, ValueError) as exc:
        raise UsageError(f"cannot read {path} ({str(exc)[:300]}): put the file back as it was, or delete it to resume "
                         "unchecked (what the run reads then is kept)") from None
    root = run.root
    if (started.model, started.revision) != (now.model, now.revision):
        where = f" at {run.ctx.model.base_url}" if run.ctx.model.base_url else ""
        raise UsageError(f"the model{where} is {now.model!r} revision {now.revision!r}, but the run in {root} started "
                         f"on {started.model!r} revision {started.revision!r}: its decisions and stored results rest "
                         "on that one. Serve that checkpoint again (--base-url to where it is served) to resume, or "
                         "start a new --run on this one.")
    if started.release is not None and started.release != now.release:  # stored results are not reused (their key)
        log.warning("the run in %s started under videvolve %s and results are now made by other code (%s): tasks are "
                    "evaluated again where needed, but its decisions so far rest on the results of the code it "
                    "started with (start a new --run for a run wholly of this code)", root, started.release,
                    now.release)
    tasks = {t.id: t for t in run.tasks}
    for task_id, files in started.files.items():
        if task_id in tasks and now.files[task_id] != files:
            raise UsageError(f"{changed_file(tasks[task_id], files, now.files[task_id])} changed since the run in "
                             f"{root} started (task {task_id} reads it): the run's decisions and stored results rest "
                             "on its content then. Put the original file back to resume, or start a new --run with "
                             "this one.")


def changed_file(task: Task, started: dict[str, Any], now: dict[str, Any]) -> str:
    """The file of ``task`` whose fingerprint went from ``started`` to ``now`` (two :func:`input_files`)."""
    gone = " (now missing)"
    if started.get("video") != now.get("video"):
        return f"{task.video}{gone if now.get('video') is None else ''}"
    if started.get("transcript") != now.get("transcript"):
        found = find_transcript(task)
        return f"{found[0]}" if found else f"the transcript of {task.video}{gone}"
    splices: tuple[dict[str, Any], dict[str, Any]] = (started.get("splices") or {}, now.get("splices") or {})
    for source in sorted(set(splices[0]) | set(splices[1])):
        if splices[0].get(source) != splices[1].get(source):
            return f"{source}{gone if splices[1].get(source) is None else ''}"
    return f"a file task {task.id} reads"
