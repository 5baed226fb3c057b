"""Hostile and honest harnesses at once, in one process (run as a script so its peak memory is its own).

``python -m tests.hostile_soak VIDEO TIMEOUT CONCURRENCY`` prints one JSON object: every task's outcome, the wall
time of the whole batch, the calm (one at a time) results of the honest harnesses, and the peak resident memory.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HONEST = '''
def solve(task, ctx):
    reply = ctx.ask(ctx.frames([0.5, 1.5, 2.5]))
    return {"answer": [[1.0, 2.0]], "raw": reply, "evidence_times": [0.5]}
'''
HOSTILE = {
    "write_deadlock": '''
def solve(task, ctx):
    try:
        ctx.parse_match("[" + "1," * 1900000 + "1]")
    except Exception:
        pass
    while True:
        ctx.log("x" * 1000)
''',
    "trace_flood": "def solve(task, ctx):\n    while True:\n        ctx.transcript(0.0, 1.0)\n",
    "search_flood": "def solve(task, ctx):\n    while True:\n        ctx.search_transcript('x' * 200)\n",
    "quadratic_answer": "def solve(task, ctx):\n    return '1' * 25000\n",
    "quadratic_match": "def solve(task, ctx):\n    return str(ctx.parse_match('{' * 3000000))\n",
    "observation_flood": "def solve(task, ctx):\n    f = ctx.frames([1.0])[0]\n    return ctx.ask([f] * 20000)\n",
    "wide_log": "def solve(task, ctx):\n    ctx.log('w', d=[[] for _ in range(1300000)])\n    return 'A'\n",
    "busy_loop": "def solve(task, ctx):\n    while True:\n        pass\n",
}


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def main(video: str, timeout: float, concurrency: int) -> dict[str, object]:
    from videvolve.config import RuntimeSettings
    from videvolve.datasets.transcripts import Segment, Transcript
    from videvolve.models.cost import cost_model
    from videvolve.models.sim import SimVLM
    from videvolve.skill_library.harness import Harness, content_hash
    from videvolve.skill_library.runner import run_task
    from videvolve.skill_library.services import TaskServices
    from videvolve.skill_library.trace import TraceWriter
    from videvolve.tasks import TaskView

    root = Path(tempfile.mkdtemp(prefix="videvolve-soak-"))
    settings = RuntimeSettings(budget=32, wall_seconds=timeout, memory_bytes=1024**3)
    speech = Transcript(segments=[Segment(start=float(i), end=i + 0.5, text=f"line {i}") for i in range(4)])
    view = TaskView(id="t", kind="grounding", question="When does the red star appear?", duration=4.0)
    jobs = {**HOSTILE, **{f"honest_{i}": HONEST for i in range(4)}}

    def one(name: str) -> tuple[str, dict[str, object]]:
        d = root / name
        d.mkdir(exist_ok=True)
        (d / "solver.py").write_text(jobs[name])
        harness = Harness(path=d, version_id=content_hash(d), manifest={}, skill="", config={},
                          solver_source=jobs[name])
        services = TaskServices(view, video, SimVLM(), cost_model("qwen2.5-vl"), settings,
                                trace=TraceWriter(d / "trace.jsonl"), transcript=speech)
        out = run_task(harness, services)
        return name, {"outcome": out.outcome, "kind": out.error_kind, "wall_s": out.wall_s,
                      "answer": None if out.prediction is None else out.prediction.model_dump(mode="json"),
                      "frames": out.usage.get("frames"), "trace_bytes": (d / "trace.jsonl").stat().st_size}

    try:
        calm = dict(one(f"honest_{i}") for i in range(4))
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            stormy = dict(pool.map(one, list(jobs)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"wall_s": time.monotonic() - started, "tasks": stormy, "calm": calm, "peak_rss_mb": peak_rss_mb()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))))
