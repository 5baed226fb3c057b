"""The report's view of the editor's workspaces.

Per proposal: the condensed transcript, the trials with their scores, the probes with their images, and the diff.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from videvolve.rundir import RunDir
from videvolve.skill_library.harness import revision_diff

MAX_RESULT = 600
MAX_TOOL_RESULT = 20_000
"""A tool's result (a trial's JSON, a file read) is shown whole up to this size, scrolling inside its cell."""
MAX_PROBE_IMAGES = 8
MAX_OUTPUT = 4000


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() \
        else []


def _rows(value: Any) -> str:
    """JSON one key a line, and a list of objects (a trial's per-task results) one object a line."""
    if not isinstance(value, dict):
        return json.dumps(value)
    lines = []
    for key, item in value.items():
        if isinstance(item, list) and item and all(isinstance(x, dict) for x in item):
            inner = ",\n".join(f"  {json.dumps(x)}" for x in item)
            lines.append(f"{json.dumps(key)}: [\n{inner}\n]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(item)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def _tool_result(result: Any) -> str:
    """A tool's result, JSON indented so that a trial's per-task rows read as rows; whole up to the cap."""
    text = str(result)
    with contextlib.suppress(ValueError):
        text = _rows(json.loads(text))
    return text if len(text) <= MAX_TOOL_RESULT else text[:MAX_TOOL_RESULT] + f"\n... ({len(text):,} characters)"


def _whole_trial(result: Any, trials: dict[str, dict[str, Any]]) -> Any:
    """A trial's result as the workspace's ``trials/`` keeps it: the transcript keeps only its first characters."""
    text = str(result)
    with contextlib.suppress(ValueError):
        json.loads(text)
        return text
    named = re.match(r'\s*\{\s*"candidate":\s*"([^"]+)"', text)
    return json.dumps(trials[named.group(1)]) if named and named.group(1) in trials else text


def _step(entry: dict[str, Any], trials: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """One transcript entry as a row: who, what, and its (shortened) result.

    ``trials``: the workspace's trials by candidate, for a trial's result that the transcript cut.
    """
    kind = entry.get("kind", "")
    if kind == "tool":
        args = {k: (v[:120] + "..." if isinstance(v, str) and len(v) > 120 else v)
                for k, v in (entry.get("args") or {}).items()}
        result = entry.get("result", "")
        if entry.get("name") == "trial":
            result = _whole_trial(result, trials or {})
        return {"who": "tool", "what": f"{entry.get('name')}({json.dumps(args)[:400]})",
                "result": _tool_result(result), "ok": "ok" if entry.get("ok") else "refused"}
    if kind == "command":
        status = "timed out" if entry.get("timed_out") else f"exit {entry.get('exit')}"
        return {"who": "command", "what": f"{entry.get('command')} ({status}, {entry.get('seconds')} s; tools "
                f"called through bin/: {entry.get('calls')})", "result": str(entry.get("output", ""))[-MAX_OUTPUT:],
                "ok": ""}
    if kind == "assistant":
        calls = ", ".join(entry.get("calls") or []) or "no tool call"
        return {"who": "model", "what": f"round {entry.get('round')}: {calls}",
                "result": str(entry.get("text", ""))[:MAX_RESULT], "ok": ""}
    return {"who": kind, "what": str(entry.get("operator") or ""),
            "result": str(entry.get("why") or entry.get("reason") or "")[:MAX_RESULT], "ok": ""}


def proposals(run: RunDir, out: Path) -> list[dict[str, Any]]:
    """Every workspace of a run, in order, with probe images copied under ``out/workspaces/``."""
    shown = []
    folders = sorted(run.workspaces.glob("*-*"),
                     key=lambda p: tuple(int(x) if x.isdigit() else 0 for x in p.name.split("-")))
    for ws in folders:
        submitted = json.loads((ws / "submitted.json").read_text()) if (ws / "submitted.json").exists() else {}
        version = submitted.get("version")
        diff = revision_diff(run.harness(str(version))) if version else ""
        trials = [json.loads(p.read_text()) for p in sorted((ws / "trials").glob("*.json"))]
        by_candidate = {str(t.get("candidate")): t for t in trials if isinstance(t, dict)}
        probes = []
        for p in sorted((ws / "probes").glob("*/probe.json")):
            probe = json.loads(p.read_text())
            images = []
            for rel in probe.get("images", [])[:MAX_PROBE_IMAGES]:
                src = ws / rel
                if src.is_file():
                    mirrored = f"{ws.relative_to(run.root).as_posix()}/{rel}"  # the report mirrors the run's path
                    dest = out / mirrored
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest)
                    images.append(mirrored)
            probes.append({**probe, "images": images})
        iteration, _, n = ws.name.partition("-")
        shown.append({"name": ws.name, "iteration": int(iteration) if iteration.isdigit() else iteration,
                      "n": n, "version": version, "diff": diff, "trials": trials, "probes": probes,
                      "steps": [_step(e, by_candidate) for e in _lines(ws / "transcript.jsonl")]})
    return shown
