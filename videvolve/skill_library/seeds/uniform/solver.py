"""Uniform sampling: n frames at the midpoints of n equal slices of the video, one model call."""

from videvolve_sdk import HarnessContext, TaskView


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    n = int(ctx.config.get("n_frames", 32))
    if ctx.budget:  # a per-question frame cap from the run: spend at most that
        n = min(n, int(ctx.budget))
    times = [task.duration * (i + 0.5) / n for i in range(n)]
    frames = ctx.frames(times, max_side=ctx.config.get("max_side"))
    reply = ctx.ask(frames)
    return {"answer": reply, "raw": reply, "evidence_times": times}
