"""Build ``RUN/report/``: index.html, progress.png, lineage.png, categories.png and trace thumbnails."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, StrictUndefined
from pydantic import ValidationError

from videvolve.labelfree.labels import LabelMix, label_mix
from videvolve.memory.store import latest_diagnoses
from videvolve.report import plots
from videvolve.report.proposals import proposals
from videvolve.report.traces import traces
from videvolve.rundir import RunDir
from videvolve.search.events import Diagnoses, GateEvent, RecordEvent, RunEvent, read_events
from videvolve.search.history import GateEntry
from videvolve.skill_library.harness import MANIFEST, read_manifest, revision_diff
from videvolve.tasks import read_tasks
from videvolve.usage import CostMeasure, TaskUsage


def versions(run: RunDir) -> list[dict[str, Any]]:
    """The run's lineage, merged, each version with its revision's diff (when its folder has a manifest)."""
    out = []
    for version, rec in run.lineage().items():
        v = rec.as_dict()
        if (run.harness(version) / MANIFEST).exists():
            v["diff"] = revision_diff(run.harness(version))
        out.append(v)
    return out


def kept_versions(events: Sequence[RunEvent]) -> dict[int, str]:
    """Iteration -> the incumbent after it, as the run's ``record`` events say (a resumed run's last word wins)."""
    return {e.iteration: e.incumbent for e in events if isinstance(e, RecordEvent) and e.incumbent}


def _history(events: Sequence[RunEvent]) -> list[GateEntry]:
    """The gate's entries of a run, from its events (a resumed run may repeat a node's events: the last wins)."""
    seen: dict[tuple[int, str | None], GateEntry] = {}
    for e in events:
        if isinstance(e, GateEvent):
            entry = e.entry()
        elif isinstance(e, RecordEvent) and e.event in ("dropped", "none"):
            entry = GateEntry(iteration=e.iteration, decision=e.event, parent=e.parent or "?", candidate=e.candidate,
                              operator=e.operator, reason=e.reason)
        else:
            continue
        seen[(entry.iteration, entry.candidate)] = entry
    return sorted(seen.values(), key=lambda h: h.iteration)


def _token_ledger(run: RunDir) -> dict[str, int]:
    """Prompt tokens of every evaluation of the run: our formula's (metered) and the server's, where it reported."""
    metered = reported = results = 0
    for path in run.result_files():
        usage = TaskUsage.model_validate(json.loads(path.read_text()).get("usage", {}))
        if usage.reported_prompt_tokens:
            metered += usage.cumulative_tokens
            reported += usage.reported_prompt_tokens
            results += 1
    return {"metered": metered, "reported": reported, "results": results}


def _setting(settings: dict[str, Any], section: str, key: str, flat: str) -> Any:
    """One setting of a ``settings.json``: nested in its section, or flat in a run from before the grouping."""
    inner = settings.get(section)
    return inner.get(key) if isinstance(inner, dict) else settings.get(flat)


def _cost_label(settings: dict[str, Any]) -> str:
    """The gate's cost in words (``visual tokens + 0.5 x text tokens``), as the run counted it."""
    metric = _setting(settings, "gate", "cost_metric", "cost_metric") or "visual_tokens"
    weight = _setting(settings, "gate", "text_token_weight", "text_token_weight")
    try:
        return CostMeasure(metric=metric, text_weight=1.0 if weight is None else weight).label
    except ValidationError:  # a metric this release does not know: named as the run wrote it
        return str(metric).replace("_", " ")


def _compare_commands(run: RunDir) -> list[str]:
    """How to get the held-out comparison this report shows when ``RUN/test/comparison.json`` exists."""
    return [f"videvolve compare --run {shlex.quote(str(run.root.resolve()))}"]


def _labels(settings: dict[str, Any]) -> list[LabelMix]:
    """The label-source mix of the train and selection splits (empty when the tasks file is gone)."""
    tasks = Path(settings["tasks"])
    return label_mix(read_tasks(tasks)) if tasks.is_file() else []


def run_diagnoses(events: Sequence[RunEvent], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's diagnoses in the shared memory (the last version of each), in iteration and task order.

    They are the ones its investigate events name: another run of the same name writes to the same memory. A run from
    before the events named them: those with its run id.
    """
    named = [e.diagnosis_ids for e in events if isinstance(e, Diagnoses) and e.diagnosis_ids is not None]
    ours = {str(i) for ids in named for i in ids}
    latest: dict[str, dict[str, Any]] = {}
    for record in latest_diagnoses(Path(settings["memory"]) / "diagnoses.jsonl"):
        d = record.model_dump(mode="json")
        if (d["id"] in ours) if named else (d["run_id"] == settings["run_id"]):
            latest[d["id"]] = d
    return sorted(latest.values(), key=lambda d: (d["iteration"], d["task_id"]))


def heldout_comparison(run: RunDir) -> tuple[dict[str, Any] | None, str | None]:
    """``RUN/test/comparison.json`` when it measured the run's best harness; else (None, the version it measured).

    A run that went on after the comparison (``--resume`` with more iterations) may have promoted another version.
    """
    if not run.comparison.is_file():
        return None, None
    heldout = json.loads(run.comparison.read_text())
    measured = str((heldout.get("best") or {}).get("version"))
    return (heldout, None) if measured == read_manifest(run.best).get("version_id") else (None, measured)


def build_report(run: str | Path) -> Path:
    """Write the report of a run directory; returns the HTML file."""
    rundir = RunDir(Path(run))
    settings = rundir.read_settings()
    out = rundir.report
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lineage = versions(rundir)
    events = read_events(rundir.events)
    history = _history(events)
    seed = next((v for v in lineage if v.get("decision") == "seed"), {"score": 0.0, "cost": 0.0})
    diagnoses = run_diagnoses(events, settings)
    kept = kept_versions(events)
    last = kept[max(kept)] if kept else None  # the incumbent now: several may pass a decision, the best goes on
    best = next((v for v in lineage if v.get("version") == last), seed)
    plots.progress(history, seed, out / "progress.png", kept)
    plots.lineage(lineage, out / "lineage.png", iterations=max((h.number for h in history), default=0))
    plots.categories(diagnoses, out / "categories.png")
    env = Environment(autoescape=True, undefined=StrictUndefined)
    template = env.from_string((resources.files("videvolve.report") / "templates" / "report.html").read_text())
    heldout, former = heldout_comparison(rundir)
    html = template.render(run_id=settings["run_id"], settings=settings, history=history, lineage=lineage,
                           editor=_setting(settings, "editor", "kind", "editor"),
                           cost_label=_cost_label(settings),
                           heldout=heldout, former_best=former, tokens=_token_ledger(rundir),
                           proposals=proposals(rundir, out),
                           diagnoses=diagnoses, labels=_labels(settings),
                           traces=traces(rundir, settings, out, str(best.get("version") or "")),
                           best=best.get("version", "?"),
                           compare_cmds=_compare_commands(rundir),
                           best_score=best.get("score") or 0.0, best_cost=best.get("cost") or 0.0)
    (out / "index.html").write_text(html, encoding="utf-8")
    return out / "index.html"
