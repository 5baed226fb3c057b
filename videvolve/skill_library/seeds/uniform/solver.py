"""Uniform sampling: n frames at the midpoints of n equal slices of the video, one model call."""

from videvolve_sdk import HarnessContext, TaskView


def _transcript(ctx: HarnessContext, task: TaskView, times: list) -> str | None:
    """The transcript of the whole video or around the frames (config ``transcript``), as prompt text."""
    mode = str(ctx.config.get("transcript", "none"))
    w = float(ctx.config.get("transcript_window", 5.0))
    windows = [(t - w, t + w) for t in times]
    if mode == "video":
        windows = [(0.0, task.duration)]
    elif mode != "windows":
        return None
    merged: list = []
    for lo, hi in sorted(windows):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    segments: dict = {}
    for lo, hi in merged:
        for s in ctx.transcript(lo, hi):
            segments[(s["start"], s["end"])] = s["text"]
    if not segments:
        return None
    lines = [f"[{a:.1f}-{b:.1f} s] {text}" for (a, b), text in sorted(segments.items())]
    return "Transcript of what is said (times in seconds):\n" + "\n".join(lines)


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    n = int(ctx.config.get("n_frames", 32))
    if ctx.budget:  # a per-question frame cap from the run: spend at most that
        n = min(n, int(ctx.budget))
    times = [task.duration * (i + 0.5) / n for i in range(n)]
    frames = ctx.frames(times, max_side=ctx.config.get("max_side"))
    reply = ctx.ask(frames, context=_transcript(ctx, task, times))
    return {"answer": reply, "raw": reply, "evidence_times": times}
