"""Build ``RUN/report/``: index.html, progress.png, lineage.png, categories.png and trace thumbnails."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, StrictUndefined

from videvolve.media import contact_sheet, frames_at
from videvolve.report import plots
from videvolve.report.proposals import proposals
from videvolve.search.history import GateEntry
from videvolve.tasks import read_tasks
from videvolve.usage import TaskUsage

COMPARISON = "comparison.json"
"""Written by ``evaluation.experiment.compare_on_test`` into ``RUN/test/``; shown when present."""

MAX_TRACES = 6
MAX_IMAGES_PER_STEP = 12


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() \
        else []


def _versions(run: Path) -> list[dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for rec in _jsonl(run / "lineage.jsonl"):
        merged[rec["version"]] = {**merged.get(rec["version"], {}), **rec}
    for v in merged.values():
        manifest = run / "harnesses" / v["version"] / "manifest.json"
        if manifest.exists():
            v["diff"] = json.loads(manifest.read_text()).get("revision", {}).get("diff", "")
    return list(merged.values())


def _history(run: Path) -> list[GateEntry]:
    """The gate's entries of a run, from its events (a resumed run may repeat a node's events: the last wins)."""
    seen: dict[tuple[Any, Any], GateEntry] = {}
    for e in _jsonl(run / "events.jsonl"):
        if e["node"] == "gate" or (e["node"] == "record" and e["event"] in ("dropped", "none")):
            fields = {k: v for k, v in e.items() if k in GateEntry.model_fields and k not in ("iteration", "decision")}
            fields.setdefault("parent", "?")
            fields.setdefault("reason", "")
            entry = GateEntry(iteration=e["iteration"], decision=e["event"], **fields)
            seen[(entry.iteration, entry.candidate)] = entry
    return sorted(seen.values(), key=lambda h: h.iteration)


def _traces(run: Path, settings: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """The last iteration's training traces, with the observations re-rendered as thumbnails."""
    tasks = {t.id: t for t in read_tasks(settings["tasks"]) if t.split == "train"}
    evals = sorted((run / "evals").glob("*/train/results/*.json"), key=lambda p: p.stat().st_mtime)
    shown: list[dict[str, Any]] = []
    for result_file in reversed(evals):
        result = json.loads(result_file.read_text())
        task = tasks.get(result["task_id"])
        trace = result_file.parent.parent / "traces" / f"{result_file.stem}.jsonl"
        if task is None or not trace.exists() or any(s["task_id"] == task.id for s in shown):
            continue
        steps = []
        for step in _jsonl(trace):
            images = []
            for k, spec in enumerate(step.get("observations", [])[:MAX_IMAGES_PER_STEP]):
                name = f"traces/{result_file.stem}_{step['step']}_{k}.png"
                try:
                    if spec["kind"] == "sheet":
                        frames = frames_at(task.video, spec["times"], max_side=spec.get("cell_width"), clamp=True)
                        image = contact_sheet(frames, cols=6, cell_width=int(spec.get("cell_width") or 160)).image
                    else:
                        first = frames_at(task.video, spec["times"][:1], max_side=spec.get("max_side"), clamp=True)
                        image = first[0].image
                except (OSError, ValueError):
                    continue
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                image.save(out / name)
                images.append(name)
            note = f"observed {len(step.get('observed_times', []))} time(s)" if "observed_times" in step else \
                str(step.get("error") or step.get("answer") or step.get("message") or "")[:300]
            steps.append({"step": step["step"], "event": step["event"], "images": images, "note": note,
                          "reply": step.get("reply", "")})
        shown.append({"task_id": task.id, "kind": task.kind, "question": task.question, "score": result["score"],
                      "frames": TaskUsage.model_validate(result.get("usage", {})).frames, "steps": steps})
        if len(shown) >= MAX_TRACES:
            break
    return shown


def _token_ledger(run: Path) -> dict[str, int]:
    """Prompt tokens of every evaluation of the run: our formula's (metered) and the server's, where it reported."""
    metered = reported = results = 0
    for path in run.glob("evals/*/*/results/*.json"):
        usage = TaskUsage.model_validate(json.loads(path.read_text()).get("usage", {}))
        if usage.reported_prompt_tokens:
            metered += usage.cumulative_tokens
            reported += usage.reported_prompt_tokens
            results += 1
    return {"metered": metered, "reported": reported, "results": results}


def build_report(run: str | Path) -> Path:
    """Write the report of a run directory; returns the HTML file."""
    run = Path(run)
    settings = json.loads((run / "settings.json").read_text())
    out = run / "report"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    versions = _versions(run)
    history = _history(run)
    seed = next((v for v in versions if v.get("decision") == "seed"), {"score": 0.0, "cost": 0.0})
    memory = Path(settings["memory"]) / "diagnoses.jsonl"
    latest: dict[str, dict[str, Any]] = {}
    for d in _jsonl(memory):
        if d["run_id"] == settings["run_id"]:
            latest[d["id"]] = d
    diagnoses = sorted(latest.values(), key=lambda d: (d["iteration"], d["task_id"]))
    plots.progress(history, seed, out / "progress.png")
    plots.lineage(versions, out / "lineage.png")
    plots.categories(diagnoses, out / "categories.png")
    accepted = [v for v in versions if v.get("decision") in ("seed", "accepted")]
    best = accepted[-1] if accepted else seed
    env = Environment(autoescape=True, undefined=StrictUndefined)
    template = env.from_string((resources.files("videvolve.report") / "templates" / "report.html").read_text())
    comparison = run / "test" / COMPARISON
    heldout = json.loads(comparison.read_text()) if comparison.is_file() else None
    html = template.render(run_id=settings["run_id"], settings=settings, history=history, lineage=versions,
                           heldout=heldout, tokens=_token_ledger(run), proposals=proposals(run, out),
                           diagnoses=diagnoses, traces=_traces(run, settings, out), best=best.get("version", "?"),
                           best_score=best.get("score") or 0.0, best_cost=best.get("cost") or 0.0)
    (out / "index.html").write_text(html, encoding="utf-8")
    return out / "index.html"
